package rawjson

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"
)

func TestMember(t *testing.T) {
	obj := ` { "type" : "content_block_delta", "index":0,"esc\"aped":"x","delta":{"type":"text_delta","text":"a \"quoted\" }{ \\"},
	  "list":[1,{"a":"]"},"x\\"] , "n":-1.5e3,"t":true,"z":null } `
	tests := []struct {
		key  string
		want string
		ok   bool
	}{
		{"type", `"content_block_delta"`, true},
		{"index", `0`, true},
		{"delta", `{"type":"text_delta","text":"a \"quoted\" }{ \\"}`, true},
		{"list", `[1,{"a":"]"},"x\\"]`, true},
		{"n", `-1.5e3`, true},
		{"t", `true`, true},
		{"z", `null`, true},
		{"text", ``, false}, // nested, not a member
		{"esc\\\"aped", `"x"`, true},
		{"nope", ``, false},
	}
	for _, tt := range tests {
		got, ok := Member([]byte(obj), tt.key)
		if string(got) != tt.want || ok != tt.ok {
			t.Errorf("Member(%q) = %q, %t; want %q, %t", tt.key, got, ok, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a"}`, `{"a":}`, `{"a":"b`, `{"a":1 "b":2}`, `{"a":[1,2}`} {
		if _, ok := Member([]byte(bad), "b"); ok {
			t.Errorf("Member(%q, b) found it; want not found", bad)
		}
	}
}

func TestSetDelete(t *testing.T) {
	tests := []struct {
		name, obj string
		edit      func([]byte) ([]byte, error)
		want      string
	}{
		{"replace", `{"model":"a","x":1}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`"b"`), "model") }, `{"model":"b","x":1}`},
		{"add", `{"x":1}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`false`), "store") }, `{"store":false,"x":1}`},
		{"add to empty", ` { } `, func(b []byte) ([]byte, error) { return Set(b, []byte(`1`), "a") }, ` {"a":1 } `},
		{"nested replace", `{"response":{"id":"r","usage":{"in":1}}}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`"g"`), "response", "id") },
			`{"response":{"id":"g","usage":{"in":1}}}`},
		{"nested add", `{"response":{"id":"r","usage":{"in":1}}}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`0.5`), "response", "usage", "cost") },
			`{"response":{"id":"r","usage":{"cost":0.5,"in":1}}}`},
		{"nested over null", `{"usage":null}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`1`), "usage", "cost") }, `{"usage":{"cost":1}}`},
		{"nested missing", `{"a":1}`, func(b []byte) ([]byte, error) { return Set(b, []byte(`1`), "usage", "cost") }, `{"usage":{"cost":1},"a":1}`},
		{"delete first", `{"models":["x"], "model":"a"}`, func(b []byte) ([]byte, error) { return Delete(b, "models") }, `{"model":"a"}`},
		{"delete middle", `{"a":1,"models":["x"],"b":2}`, func(b []byte) ([]byte, error) { return Delete(b, "models") }, `{"a":1,"b":2}`},
		{"delete last", `{"a":1 , "models":["x"] }`, func(b []byte) ([]byte, error) { return Delete(b, "models") }, `{"a":1  }`},
		{"delete only", `{ "models":["x"] }`, func(b []byte) ([]byte, error) { return Delete(b, "models") }, `{  }`},
		{"delete absent", `{"a":1}`, func(b []byte) ([]byte, error) { return Delete(b, "models") }, `{"a":1}`},
	}
	for _, tt := range tests {
		obj := []byte(tt.obj)
		orig := string(obj)
		got, err := tt.edit(obj)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %s = %s, %v; want %s", tt.name, tt.obj, got, err, tt.want)
		}
		if string(obj) != orig {
			t.Errorf("%s: the input changed to %s", tt.name, obj)
		}
	}
	if _, err := Set([]byte(`[1]`), []byte(`1`), "a"); err == nil {
		t.Error("Set on an array = nil error; want ErrNotObject")
	}
}

// topMembers returns the top-level members of a JSON object, in order,
// by encoding/json.
func topMembers(obj []byte) (keys []string, values []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		keys, values = append(keys, tok.(string)), append(values, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false
	}
	return keys, values, true
}

func decode(b []byte) any {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return "invalid"
	}
	return v
}

// FuzzEdit: on any input no function panics; on a valid JSON object
// whose keys are unique and written without escapes, Member finds each
// member's value, Delete leaves the object without it and Set with a
// new value, as encoding/json reads them.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` {"a" : "x\"}" , "b":[{"c":"]"}], "d":null}`, `{"model":"m","models":["a","b"],"max_tokens":5}`,
		`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`, `{"a":"\\"}`, `[1]`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		for _, k := range []string{"a", "model"} {
			Member(obj, k)
			Delete(obj, k)
			Set(obj, []byte(`1`), k, "x")
		}
		keys, values, ok := topMembers(obj)
		if !ok || !json.Valid(obj) {
			return
		}
		seen := map[string]bool{}
		for _, k := range keys {
			q, _ := json.Marshal(k)
			if seen[k] || !bytes.Contains(obj, q) {
				return // a key twice, or written with escapes
			}
			seen[k] = true
		}
		base := decode(obj).(map[string]any)
		for i, k := range keys {
			got, found := Member(obj, k)
			if !found || !reflect.DeepEqual(decode(got), decode(values[i])) {
				t.Fatalf("Member(%s, %q) = %s, %t; want %s", obj, k, got, found, values[i])
			}
			del, err := Delete(obj, k)
			want := map[string]any{}
			for kk, v := range base {
				if kk != k {
					want[kk] = v
				}
			}
			if err != nil || !reflect.DeepEqual(decode(del), any(want)) {
				t.Fatalf("Delete(%s, %q) = %s, %v", obj, k, del, err)
			}
			set, err := Set(obj, []byte(`{"new":true}`), k)
			want[k] = map[string]any{"new": true}
			if err != nil || !reflect.DeepEqual(decode(set), any(want)) {
				t.Fatalf("Set(%s, %q) = %s, %v", obj, k, set, err)
			}
		}
		set, err := Set(obj, []byte(`"v"`), "gw_fuzz_added", "inner")
		if _, had := base["gw_fuzz_added"]; !had && (err != nil || decode(set).(map[string]any)["gw_fuzz_added"].(map[string]any)["inner"] != "v") {
			t.Fatalf("Set(%s, gw_fuzz_added.inner) = %s, %v", obj, set, err)
		}
	})
}
