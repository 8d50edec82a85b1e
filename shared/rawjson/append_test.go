package rawjson

import (
	"bytes"
	"encoding/json"
	"math"
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

// FuzzAppendFloat: AppendFloat writes the bytes encoding/json writes for
// the same finite float64, on either side of its %f and %e bounds.
//
//	go test ./shared/rawjson -run '^$' -fuzz FuzzAppendFloat -fuzztime 30s
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.000143, 1e-6, 9.99e-7, 1e-9, 1e20, 1e21, -1e21, 1.5e300,
		math.SmallestNonzeroFloat64, math.MaxFloat64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return // encoding/json refuses them; AppendFloat's callers check
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat([]byte("x"), v); string(got[1:]) != string(want) || got[0] != 'x' {
			t.Fatalf("%v: got %s, encoding/json %s", v, got[1:], want)
		}
	})
}
