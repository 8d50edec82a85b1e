package rawjson

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzScannerSkip: Skip followed by End takes exactly the JSON
// encoding/json takes (json.Valid), but for nesting deeper than
// maxScanDepth, which it declines; Raw takes what Skip takes and returns
// what a json.RawMessage keeps of it.
//
//	go test ./shared/rawjson -run '^$' -fuzz FuzzScannerSkip -fuzztime 30s
func FuzzScannerSkip(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, ` {"a":[1,-2.5e+3,true,false,null,"x\u00e9\n"],"b":{}} `, `"\ud800"`, `0`, `-0.0`,
		`01`, `1.`, `.5`, `1e`, `tru`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `"a` + "\x01" + `"`, "\"\xff\"", `{"\u0063":1}`,
		`"\x"`, `"\u12"`, ``, ` `, `{} {}`, strings.Repeat("[", 64) + strings.Repeat("]", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		s := NewScanner([]byte(data))
		took := s.Skip() && s.End()
		valid := json.Valid([]byte(data))
		if took && !valid {
			t.Fatalf("Skip took %q, which encoding/json refuses", data)
		}
		s = NewScanner([]byte(data))
		raw, ok := s.Raw()
		if ok = ok && s.End(); ok != took {
			t.Fatalf("Raw(%q) took it: %v; Skip: %v", data, ok, took)
		}
		var kept json.RawMessage
		if took && (json.Unmarshal([]byte(data), &kept) != nil || string(raw) != string(kept) || cap(raw) != len(raw)) {
			t.Fatalf("Raw(%q) = %q (cap %d); want %q, what json.RawMessage keeps", data, raw, cap(raw), kept)
		}
		if valid && !took && depth(data) <= maxScanDepth {
			t.Fatalf("Skip declined %q, valid JSON nested %d deep", data, depth(data))
		}
	})
}

// depth is how deep brackets nest in data, strings aside.
func depth(data string) int {
	d, most, in, esc := 0, 0, false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '[' || c == '{'):
			d++
			most = max(most, d)
		case !in && (c == ']' || c == '}'):
			d--
		}
	}
	return most
}

// TestStringIntoKnown: a known value is set without a copy, any other as
// StringInto sets it, and null leaves the destination as it is.
func TestStringIntoKnown(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`"stop"`, "stop"}, {`"length"`, "length"}, {`"st\u006fp"`, "stop"}, {`"other"`, "other"}, {`null`, "kept"},
	} {
		s, got := NewScanner([]byte(tt.in)), "kept"
		if !s.StringIntoKnown(&got, "stop", "length") || !s.End() || got != tt.want {
			t.Errorf("StringIntoKnown(%s) = %q; want %q", tt.in, got, tt.want)
		}
	}
	data := []byte(`"length"`)
	var v string
	if n := testing.AllocsPerRun(100, func() {
		s := NewScanner(data)
		s.StringIntoKnown(&v, "stop", "length")
	}); n != 0 {
		t.Errorf("StringIntoKnown of a known value allocates %v times; want 0", n)
	}
}

// TestObjects: an array of objects read onto a slice as json.Unmarshal
// reads it: the backing array's old elements decoded over, zero ones
// appended after; anything but an object refused.
func TestObjects(t *testing.T) {
	type elem struct{ A, B int }
	tests := []struct {
		name string
		in   string
		old  []elem // *list before, reset to [:0] as a caller does
		want []elem
		ok   bool
	}{
		{"appended", `[{"a":1},{"b":2}]`, nil, []elem{{A: 1}, {B: 2}}, true},
		{"over the old ones", `[{"a":1},{"b":2}]`, []elem{{A: 7, B: 7}, {A: 8, B: 8}}, []elem{{A: 1, B: 7}, {A: 8, B: 2}}, true},
		{"past the old ones", `[{"a":1},{"b":2}]`, []elem{{A: 7, B: 7}}, []elem{{A: 1, B: 7}, {B: 2}}, true},
		{"empty", `[]`, nil, nil, true},
		{"a null element", `[{"a":1},null]`, nil, nil, false},
		{"a number", `[1]`, nil, nil, false},
		{"not an array", `{"a":1}`, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := tt.old[:0]
			s := NewScanner([]byte(tt.in))
			ok := Objects(&s, &list, func(e *elem) bool {
				return s.Object(func(key []byte) bool {
					switch string(key) {
					case "a":
						return s.Int(&e.A)
					case "b":
						return s.Int(&e.B)
					}
					return s.Skip()
				})
			})
			if ok != tt.ok || (ok && !slices.Equal(list, tt.want)) {
				t.Errorf("Objects(%s) = %v, %+v; want %v, %+v", tt.in, ok, list, tt.ok, tt.want)
			}
			if !tt.ok {
				return
			}
			var viaJSON []elem = tt.old[:0]
			if err := json.Unmarshal([]byte(tt.in), &viaJSON); err != nil || !slices.Equal(viaJSON, list) {
				t.Errorf("json.Unmarshal(%s) over the same array = %+v, %v; want what Objects read, %+v", tt.in, viaJSON, err, list)
			}
		})
	}
}

// TestTaken: a declined decode's result is zeroed, a taken one kept.
func TestTaken(t *testing.T) {
	type result struct {
		s []int
		n int
	}
	for _, ok := range []bool{true, false} {
		v := result{s: []int{1}, n: 2}
		if got := Taken(&v, ok); got != ok || (ok && (v.n != 2 || len(v.s) != 1)) || (!ok && (v.n != 0 || v.s != nil)) {
			t.Errorf("Taken(%v) = %v, left %+v", ok, got, v)
		}
	}
}

// TestPtr: Ptr reads into a pointer as json.Unmarshal does: null makes it
// nil, a value is read into a new T, or into the one already there.
func TestPtr(t *testing.T) {
	type pair struct{ A, B int }
	read := func(s *Scanner) func(p *pair) bool {
		return func(p *pair) bool {
			return s.Object(func(key []byte) bool {
				switch string(key) {
				case "a":
					return s.Int(&p.A)
				case "b":
					return s.Int(&p.B)
				}
				return false
			})
		}
	}
	set := &pair{A: 1, B: 2}
	tests := []struct {
		name   string
		data   string
		before *pair
		want   *pair
		ok     bool
		same   bool // read into before, not a new one
	}{
		{"null", `null`, set, nil, true, false},
		{"into a new one", `{"a":5}`, nil, &pair{A: 5}, true, false},
		{"into the one there", `{"a":5}`, &pair{A: 1, B: 2}, &pair{A: 5, B: 2}, true, true},
		{"declined", `{"c":1}`, nil, &pair{}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, before := tt.before, tt.before
			s := NewScanner([]byte(tt.data))
			ok := Ptr(&s, &p, read(&s))
			if ok != tt.ok || !reflect.DeepEqual(p, tt.want) || (tt.same && p != before) {
				t.Errorf("Ptr(%s) = %v, %+v; want %v, %+v", tt.data, ok, p, tt.ok, tt.want)
			}
			if ok {
				var want *pair
				if before != nil {
					c := *before
					want = &c
				}
				if err := json.Unmarshal([]byte(tt.data), &want); err != nil || !reflect.DeepEqual(want, p) {
					t.Errorf("json.Unmarshal(%s) = %+v, %v; Ptr gave %+v", tt.data, want, err, p)
				}
			}
		})
	}
}
