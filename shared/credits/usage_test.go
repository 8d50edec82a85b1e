package credits_test

import (
	"errors"
	"strings"
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

func TestCheckUsage(t *testing.T) {
	ok := credits.Usage{Account: "acct", Day: "2025-03-01", Model: "m", Requests: 1, PromptTokens: 1, CompletionTokens: 2, Credits: 3}
	with := func(f func(u *credits.Usage)) credits.Usage { u := ok; f(&u); return u }
	tests := []struct {
		name   string
		id     string
		u      credits.Usage
		ok     bool
		badDay bool
	}{
		{"valid", "id1", ok, true, false},
		{"zeros", "", with(func(u *credits.Usage) { u.PromptTokens, u.CompletionTokens, u.Credits = 0, 0, 0 }), true, false},
		{"many requests", "id1", with(func(u *credits.Usage) { u.Requests = 3 }), true, false},
		{"unpriced without id", "", with(func(u *credits.Usage) { u.Credits = 0 }), true, false},
		{"priced without id", "", ok, false, false},
		{"nul in id", "a\x00", ok, false, false},
		{"no requests", "id1", with(func(u *credits.Usage) { u.Requests = 0 }), false, false},
		{"negative requests", "id1", with(func(u *credits.Usage) { u.Requests = -1 }), false, false},
		{"empty account", "id1", with(func(u *credits.Usage) { u.Account = "" }), false, false},
		{"nul in account", "id1", with(func(u *credits.Usage) { u.Account = "a\x00b" }), false, false},
		{"empty model", "id1", with(func(u *credits.Usage) { u.Model = "" }), false, false},
		{"nul in model", "id1", with(func(u *credits.Usage) { u.Model = "m\x00" }), false, false},
		{"bad day", "id1", with(func(u *credits.Usage) { u.Day = "03/01/2025" }), false, true},
		{"negative prompt", "id1", with(func(u *credits.Usage) { u.PromptTokens = -1 }), false, false},
		{"negative completion", "id1", with(func(u *credits.Usage) { u.CompletionTokens = -1 }), false, false},
		{"negative credits", "id1", with(func(u *credits.Usage) { u.Credits = -1 }), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := credits.CheckUsage(tt.id, tt.u)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, credits.ErrInvalidUsage)) || tt.badDay != errors.Is(err, credits.ErrBadDay) {
				t.Errorf("CheckUsage(%q, %+v) = %v; want ok %v (else ErrInvalidUsage), ErrBadDay %v", tt.id, tt.u, err, tt.ok, tt.badDay)
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

func TestNewUsageID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := credits.NewUsageID()
		if err != nil {
			t.Fatalf("NewUsageID() = %v", err)
		}
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("NewUsageID() = %q; want a fresh <24 hex>", id)
		}
		seen[id] = true
		if got := credits.ChatEntryID(id); got != "chat:"+id {
			t.Fatalf("ChatEntryID(%q) = %q; want %q", id, got, "chat:"+id)
		}
	}
}
