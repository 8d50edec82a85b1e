package credits_test

import (
	"errors"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

func TestDay(t *testing.T) {
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), "2025-03-01"},
		{time.Date(2025, 12, 31, 23, 59, 59, 999, time.UTC), "2025-12-31"},
		{time.Date(2025, 3, 2, 1, 0, 0, 0, time.FixedZone("UTC+2", 2*3600)), "2025-03-01"},
		{time.Date(2025, 3, 1, 22, 0, 0, 0, time.FixedZone("UTC-3", -3*3600)), "2025-03-02"},
	}
	for _, tt := range tests {
		if got := credits.Day(tt.t); got != tt.want {
			t.Errorf("Day(%v) = %q; want %q", tt.t, got, tt.want)
		}
	}
	// Day keeps the day it made last: the seconds on either side of a
	// midnight, in turn, and before 1970, are each their own day.
	midnight := time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{midnight.Add(-time.Nanosecond), midnight, midnight.Add(-time.Second), midnight.Add(24*time.Hour - 1),
		midnight.Add(24 * time.Hour), time.Unix(-1, 0), time.Unix(0, 0), time.Unix(-86400, 0), time.Unix(-86401, 999)} {
		if got, want := credits.Day(at), at.UTC().Format(credits.DayLayout); got != want {
			t.Errorf("Day(%v) = %q; want %q", at, got, want)
		}
	}
}

// FuzzDay: Day of two times in turn (the second may hit the day kept from
// the first) is their UTC date, as Format makes it.
func FuzzDay(f *testing.F) {
	f.Add(int64(1740873599), int64(1740873600), int64(0))
	f.Add(int64(-1), int64(0), int64(999999999))
	f.Add(int64(1740873600), int64(1740959999), int64(1))
	f.Fuzz(func(t *testing.T, a, b, nsec int64) {
		const bound = 1 << 40 // about 35,000 years either side of 1970
		if a > bound || a < -bound || b > bound || b < -bound {
			return
		}
		for _, sec := range []int64{a, b} {
			at := time.Unix(sec, nsec%1e9)
			if got, want := credits.Day(at), at.UTC().Format(credits.DayLayout); got != want {
				t.Fatalf("Day(%v) = %q; want %q", at, got, want)
			}
		}
	})
}

func TestCheckDay(t *testing.T) {
	tests := []struct {
		day string
		ok  bool
	}{
		{"2025-03-01", true},
		{"2024-02-29", true},
		{"2025-02-29", false},
		{"2025-3-1", false},
		{"2025-03-01 ", false},
		{"20250301", false},
		{"", false},
		{"2025-03-01T00:00:00Z", false},
	}
	for _, tt := range tests {
		t.Run(tt.day, func(t *testing.T) {
			err := credits.CheckDay(tt.day)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, credits.ErrBadDay)) {
				t.Errorf("CheckDay(%q) = %v; want ok %v (else ErrBadDay)", tt.day, err, tt.ok)
			}
		})
	}
}

func TestCheckDayRange(t *testing.T) {
	tests := []struct {
		from, to string
		ok       bool
	}{
		{"", "", true},
		{"2025-03-01", "", true},
		{"", "2025-03-01", true},
		{"2025-03-01", "2025-03-01", true},
		{"2025-03-01", "2025-04-01", true},
		{"2025-04-01", "2025-03-01", false},
		{"2025-03", "", false},
		{"", "today", false},
	}
	for _, tt := range tests {
		if err := credits.CheckDayRange(tt.from, tt.to); (err == nil) != tt.ok {
			t.Errorf("CheckDayRange(%q, %q) = %v; want ok %v", tt.from, tt.to, err, tt.ok)
		}
	}
}
