package chat

import (
	"encoding/json"
	"testing"
)

var plainStringSamples = []struct {
	raw  string
	want bool // plainString handles it
}{
	{`"hello there"`, true},
	{`""`, true},
	{`"日本語 🙂 <&>"`, true},
	{`"line\nbreak"`, false},
	{`"quote \" inside"`, false},
	{`"\u00e9"`, false},
	{"\"bad \xff utf-8\"", false},
	{`"unterminated`, false},
	{`5`, false},
	{`"`, false},
}

func TestPlainString(t *testing.T) {
	for _, tt := range plainStringSamples {
		t.Run(tt.raw, func(t *testing.T) {
			got, ok := plainString([]byte(tt.raw))
			if ok != tt.want {
				t.Fatalf("plainString(%q) ok = %v; want %v", tt.raw, ok, tt.want)
			}
			var want string
			if ok && (json.Unmarshal([]byte(tt.raw), &want) != nil || got != want) {
				t.Errorf("plainString(%q) = %q; want %q", tt.raw, got, want)
			}
		})
	}
}

// FuzzPlainString: whenever plainString handles a valid JSON string, its
// value is json.Unmarshal's.
func FuzzPlainString(f *testing.F) {
	for _, tt := range plainStringSamples {
		f.Add(tt.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, ok := plainString([]byte(raw))
		var want string
		if !ok || !json.Valid([]byte(raw)) {
			return
		}
		if err := json.Unmarshal([]byte(raw), &want); err != nil || got != want {
			t.Errorf("plainString(%q) = %q; want %q (%v)", raw, got, want, err)
		}
	})
}
