package jsonscan

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

// encodeStrings are strings that exercise every escaping rule of
// encoding/json.
var encodeStrings = []string{
	"",
	"hello",
	" w2",
	`quote " backslash \ slash /`,
	"newline \n return \r tab \t backspace \b formfeed \f",
	"controls \x00 \x01 \x1f \x7f",
	"html <script>alert('x')</script> & co",
	"unicode é ü 日本語 🙂",
	"separators \u2028 and \u2029",
	"invalid \xff utf-8 \xc3",
	"truncated \xe2\x82",
	"surrogate half \xed\xa0\x80",
}

func TestAppendString(t *testing.T) {
	for _, s := range encodeStrings {
		t.Run(s, func(t *testing.T) {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
				t.Errorf("AppendString(%q) = %s; want %s", s, got[1:], want)
			}
		})
	}
}

// TestAppendStringBytes checks every byte value alone and between
// plain ASCII (the safeBytes table and the escapes).
func TestAppendStringBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, s := range []string{string([]byte{byte(c)}), "a" + string([]byte{byte(c)}) + "b"} {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("AppendString(%q) = %s; want %s", s, got, want)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range encodeStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s; want %s", s, got, want)
		}
	})
}

// encodeFloats are float64 values around every formatting rule of
// encoding/json: zero and negative zero, the 1e-6 and 1e21 switches
// between plain and exponent notation, one- and three-digit exponents,
// and the extremes.
var encodeFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 1.5, 0.7, 0.1, 0.2 + 0.1, 2, 100, 1e20,
	1e-6, 1e-7, -1e-7, 9.999999e-7, math.Nextafter(1e-6, 0), 1.5e-7, 1e-9, 1e-10, 1.234e-100,
	1e21, math.Nextafter(1e21, 0), -1e21, 1.5e21, 1e22, 1e100, 1e300,
	123456789.123, 1 << 53, 1<<53 + 1, math.MaxFloat64, -math.MaxFloat64,
	math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 2.2250738585072014e-308,
	float64(float32(0.1)), math.Pi, -math.E,
}

func TestAppendFloat(t *testing.T) {
	for _, f := range encodeFloats {
		t.Run(strconv.FormatFloat(f, 'g', -1, 64), func(t *testing.T) {
			want, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendFloat([]byte("x"), f); string(got) != "x"+string(want) {
				t.Errorf("AppendFloat(%v) = %s; want %s", f, got[1:], want)
			}
		})
	}
}

// TestAppendFloatNotFinite: encoding/json refuses NaN and ±Inf;
// AppendFloat writes null, which keeps its output valid JSON.
func TestAppendFloatNotFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := json.Marshal(f); err == nil {
			t.Errorf("json.Marshal(%v) succeeded; want an error", f)
		}
		if got := AppendFloat(nil, f); string(got) != "null" {
			t.Errorf("AppendFloat(%v) = %s; want null", f, got)
		}
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range encodeFloats {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		want, err := json.Marshal(v)
		if err != nil {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				t.Fatalf("json.Marshal(%v) error %v", v, err)
			}
			want = []byte("null")
		}
		if got := AppendFloat(nil, v); !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%v) = %s; want %s", v, got, want)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	for _, s := range []string{
		strings.Repeat("Tell me more about the history of the printing press and its effects. ", 16),
		strings.Repeat("<b>caf\u00e9</b> & \"quotes\"\n\U0001F642 ", 32),
	} {
		b.Run(strconv.Itoa(len(s)), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			buf := make([]byte, 0, 4*len(s))
			for b.Loop() {
				buf = AppendString(buf[:0], s)
			}
		})
	}
}
