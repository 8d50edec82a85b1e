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
