package credits

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestAmountString(t *testing.T) {
	tests := []struct {
		a    Amount
		want string
	}{
		{0, "0"},
		{Micro, "0.000001"},
		{Credit, "1"},
		{1000 * Credit, "1000"},
		{999_989_000, "999.989"},
		{-3_500_000, "-3.5"},
		{-Micro, "-0.000001"},
		{1_234_567, "1.234567"},
		{10 * Credit, "10"},
		{100_000, "0.1"},
		{MaxAmount, "1000000000000"},
		{-MaxAmount, "-1000000000000"},
		{math.MaxInt64, "9223372036854.775807"},
		{math.MinInt64, "-9223372036854.775808"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("Amount(%d).String() = %q; want %q", int64(tt.a), got, tt.want)
		}
		b, err := json.Marshal(tt.a)
		if err != nil || string(b) != tt.want {
			t.Errorf("json.Marshal(Amount(%d)) = %s, %v; want %s", int64(tt.a), b, err, tt.want)
		}
	}
}

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in   string
		want Amount
	}{
		{"0", 0},
		{"-0", 0},
		{"1000", 1000 * Credit},
		{"999.989", 999_989_000},
		{"0.000001", Micro},
		{"-3.5", -3_500_000},
		{"+2", 2 * Credit},
		{"0.25", 250_000},
		{".5", 500_000},
		{"5.", 5 * Credit},
		{"1E+3", 1000 * Credit},
		{"1e3", 1000 * Credit},
		{"5e-1", 500_000},
		{"0E-6", 0},
		{"0e99999999999999999999", 0},
		{"1E-6", Micro},
		{"1000000E-12", Micro},
		{"1.5000000000", 1_500_000},
		{"0.0000000", 0},
		{"000012.50", 12_500_000},
		{"1000000000000", MaxAmount},
		{"-1000000000000", -MaxAmount},
		{"1E+12", MaxAmount},
		{"999999999999.999999", MaxAmount - Micro},
		{"12345678901234000000E-12", 12_345_678_901_234}, // 12345678.901234: trailing zeros absorb the exponent
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseAmountErrors(t *testing.T) {
	tests := []struct {
		in      string
		isRange bool
		says    string
	}{
		{"", false, "not a decimal number"},
		{"-", false, "not a decimal number"},
		{".", false, "not a decimal number"},
		{"e5", false, "not a decimal number"},
		{"1e", false, "not a decimal number"},
		{"1e+", false, "not a decimal number"},
		{"1.2.3", false, "not a decimal number"},
		{"1,5", false, "not a decimal number"},
		{" 1", false, "not a decimal number"},
		{"0x10", false, "not a decimal number"},
		{"NaN", false, "not a decimal number"},
		{"Infinity", false, "not a decimal number"},
		{"--1", false, "not a decimal number"},
		{"0.0000001", false, "more than 6 decimal places"},
		{"1.0000001", false, "more than 6 decimal places"},
		{"1E-7", false, "more than 6 decimal places"},
		{"123e-9", false, "more than 6 decimal places"},
		{"1e-99999999999999", false, "more than 6 decimal places"},
		{"1000000000000.000001", true, "beyond"},
		{"-1000000000000.000001", true, "beyond"},
		{"1E+13", true, "beyond"},
		{"9223372036854775807", true, "beyond"},
		{"99999999999999999999999999999999999999", true, "beyond"},
		{"1e99999999999999", true, "beyond"},
		{strings.Repeat("9", 100000), true, "beyond"},
	}
	for _, tt := range tests {
		got, err := ParseAmount(tt.in)
		if err == nil {
			t.Errorf("ParseAmount(%.20q) = %d; want an error", tt.in, got)
			continue
		}
		if !errors.Is(err, ErrAmount) || errors.Is(err, ErrAmountRange) != tt.isRange || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("ParseAmount(%.20q) error %q (range %t); want one saying %q, range %t", tt.in, err, errors.Is(err, ErrAmountRange), tt.says, tt.isRange)
		}
		if len(err.Error()) > 200 {
			t.Errorf("ParseAmount(%.20q) error is %d bytes; want it short", tt.in, len(err.Error()))
		}
	}
}

func TestAmountJSON(t *testing.T) {
	var v struct {
		Balance Amount  `json:"balance"`
		Limit   *Amount `json:"limit"`
	}
	if err := json.Unmarshal([]byte(`{"balance": 999.989, "limit": 1E+3}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.Balance != 999_989_000 || v.Limit == nil || *v.Limit != 1000*Credit {
		t.Errorf("Unmarshal = %d, %v; want 999989000, 1000000000", v.Balance, v.Limit)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"balance":999.989,"limit":1000}` {
		t.Errorf("Marshal = %s, %v; want numbers of credits", b, err)
	}
	for _, in := range []string{`{"balance": "1"}`, `{"balance": 0.0000001}`, `{"balance": 1e13}`, `{"balance": true}`, `{"balance": {}}`} {
		err := json.Unmarshal([]byte(in), &v)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field != "balance" {
			t.Errorf("Unmarshal(%s) = %v; want an UnmarshalTypeError naming balance", in, err)
		}
	}
	v.Balance = 7
	if err := json.Unmarshal([]byte(`{"balance": null}`), &v); err != nil || v.Balance != 7 {
		t.Errorf("Unmarshal(null) = %d, %v; want it left at 7", v.Balance, err)
	}
}

func TestAmountAdd(t *testing.T) {
	tests := []struct {
		a, b Amount
		want Amount
		ok   bool
	}{
		{1, 2, 3, true},
		{MaxAmount - 1, 1, MaxAmount, true},
		{MaxAmount, 1, 0, false},
		{-MaxAmount, -1, 0, false},
		{MaxAmount, -MaxAmount, 0, true},
		{math.MaxInt64, 1, 0, false},
		{math.MinInt64, -1, 0, false},
	}
	for _, tt := range tests {
		got, err := tt.a.Add(tt.b)
		if (err == nil) != tt.ok || got != tt.want || (err != nil && !errors.Is(err, ErrAmountRange)) {
			t.Errorf("%d.Add(%d) = %d, %v; want %d, ok %t", int64(tt.a), int64(tt.b), got, err, tt.want, tt.ok)
		}
	}
}

func TestAmountMul(t *testing.T) {
	tests := []struct {
		a    Amount
		n    int64
		want Amount
		ok   bool
	}{
		{2_500_000, 4, 10 * Credit, true},
		{Micro, 0, 0, true},
		{-Credit, 3, -3 * Credit, true},
		{Credit, -3, -3 * Credit, true},
		{MaxAmount, 1, MaxAmount, true},
		{MaxAmount, 2, 0, false},
		{Credit, math.MaxInt64, 0, false},
		{math.MinInt64, -1, 0, false},
	}
	for _, tt := range tests {
		got, err := tt.a.Mul(tt.n)
		if (err == nil) != tt.ok || got != tt.want || (err != nil && !errors.Is(err, ErrAmountRange)) {
			t.Errorf("%d.Mul(%d) = %d, %v; want %d, ok %t", int64(tt.a), tt.n, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzAmount: every amount in range prints as a decimal that parses back
// to itself, as text and as JSON; any string ParseAmount takes is in range
// and prints as a number that parses to the same amount.
func FuzzAmount(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 999_989_000, int64(MaxAmount), -int64(MaxAmount), 1_000_001} {
		f.Add(n, "")
	}
	for _, s := range []string{"1E+3", "0.000001", "5e-1", "0E-6", "-3.50", "1e-7", "abc"} {
		f.Add(int64(0), s)
	}
	f.Fuzz(func(t *testing.T, n int64, s string) {
		a := Amount(n % int64(MaxAmount+1))
		got, err := ParseAmount(a.String())
		if err != nil || got != a {
			t.Fatalf("ParseAmount(%q) = %d, %v; want %d", a.String(), got, err, a)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Amount
		if err := json.Unmarshal(b, &back); err != nil || back != a {
			t.Fatalf("JSON round trip of %d via %s = %d, %v", a, b, back, err)
		}
		p, err := ParseAmount(s)
		if err != nil {
			return
		}
		if !p.InRange() {
			t.Fatalf("ParseAmount(%q) = %d: beyond MaxAmount", s, p)
		}
		if again, err := ParseAmount(p.String()); err != nil || again != p {
			t.Fatalf("ParseAmount(%q) = %d, printed %q, parsed again %d, %v", s, p, p.String(), again, err)
		}
	})
}
