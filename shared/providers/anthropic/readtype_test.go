package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzReadType: readType sets the type as json.Unmarshal(raw, &typ) does
// (errors ignored), for any raw value and any type before it.
func FuzzReadType(f *testing.F) {
	for _, raw := range []string{`"content_block_delta"`, `"message_start"`, `"ping"`, `"tool_use"`, `"custom_event"`,
		`"content_block_delta" `, `null`, `1`, `{}`, `""`, `"\u0070ing"`, `"a\"b"`, `"\xff"`, `"tab	"`, `nul`, `"unterminated`} {
		f.Add([]byte(raw), "event")
	}
	f.Fuzz(func(t *testing.T, raw []byte, before string) {
		if len(raw) == 0 {
			return // a member always has a value
		}
		got, want := readType(raw, before), before
		_ = json.Unmarshal(raw, &want)
		if got != want {
			t.Errorf("readType(%q) from %q = %q; json.Unmarshal gives %q", raw, before, got, want)
		}
	})
}
