// Package rawjsontest helps test the decoders built on rawjson's Scanner
// against encoding/json.
package rawjsontest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FieldBodies returns, for each field json.Unmarshal decodes into a
// struct of type typ, and each field of its fields' struct types, a JSON
// body that sets that field alone (to SampleJSON of its type): wrap puts
// an object with the one member where typ is. A decoder's test feeds each
// body to the decoder and to json.Unmarshal, so that a field the decoder
// does not take is found.
func FieldBodies(typ reflect.Type, wrap func(string) string) []string {
	var bodies []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		member := func(v string) string { return wrap(`{"` + name + `":` + v + `}`) }
		bodies = append(bodies, member(SampleJSON(f.Type)))
		elem, inArray := f.Type, false
		for elem.Kind() == reflect.Pointer || (elem.Kind() == reflect.Slice && elem != reflect.TypeFor[json.RawMessage]()) {
			inArray = inArray || elem.Kind() == reflect.Slice
			elem = elem.Elem()
		}
		if elem.Kind() == reflect.Struct {
			bodies = append(bodies, FieldBodies(elem, func(v string) string {
				if inArray {
					v = "[" + v + "]"
				}
				return member(v)
			})...)
		}
	}
	return bodies
}

// SampleJSON is a JSON value of type typ other than its zero value; it
// panics for a type it has no sample of.
func SampleJSON(typ reflect.Type) string {
	switch {
	case typ == reflect.TypeFor[json.RawMessage]():
		return `{"a":[1]}`
	case typ.Kind() == reflect.String:
		return `"x"`
	case typ.Kind() == reflect.Bool:
		return `true`
	case typ.Kind() == reflect.Float64:
		return `1.5`
	case typ.Kind() == reflect.Int || typ.Kind() == reflect.Int64:
		return `2`
	case typ.Kind() == reflect.Pointer:
		return SampleJSON(typ.Elem())
	case typ.Kind() == reflect.Slice:
		return "[" + SampleJSON(typ.Elem()) + "]"
	case typ.Kind() == reflect.Map:
		return `{"k":` + SampleJSON(typ.Elem()) + `}`
	case typ.Kind() == reflect.Struct:
		return `{}`
	}
	panic("rawjsontest.SampleJSON: no sample of " + typ.String())
}

// Compare fails t unless scan, a decoder's fast path (named name in the
// messages), agrees with json.Unmarshal on data: what it takes, it
// decodes to a value reflect.DeepEqual to json.Unmarshal's (which must
// take it too); what it declines, it leaves zero (its caller then decodes
// with encoding/json). It reports whether scan took data.
func Compare[T any](t testing.TB, name string, scan func([]byte, *T) bool, data []byte) (scanned bool) {
	t.Helper()
	var fast, slow, zero T
	scanned = scan(data, &fast)
	err := json.Unmarshal(data, &slow)
	if !scanned {
		if !reflect.DeepEqual(fast, zero) {
			t.Fatalf("%s declined %q, leaving %+v; want the zero value", name, data, fast)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%s took %q, which encoding/json refuses: %v", name, data, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		f, _ := json.Marshal(fast)
		s, _ := json.Marshal(slow)
		t.Fatalf("%s(%q):\nfast %s\njson %s", name, data, f, s)
	}
	return true
}
