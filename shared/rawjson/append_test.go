package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString writes the bytes encoding/json writes for
// the same string, with and without HTML escaping.
//
//	go test ./shared/rawjson -run '^$' -fuzz FuzzAppendString -fuzztime 30s
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\back/slash`, "\n\r\t\b\f\x00\x1f\x7f", "<a href='x'>&amp;</a>",
		"héllo ✓ 😀", "\u2028\u2029", "\xff\xfe bad \xc3", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			got := AppendString([]byte("x"), s, html)
			if string(got[1:]) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) || got[0] != 'x' {
				t.Fatalf("escapeHTML %v, %q: got %s, encoding/json %s", html, s, got[1:], want.Bytes())
			}
		}
	})
}
