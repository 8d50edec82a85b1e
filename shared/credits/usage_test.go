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
	tests := []struct {
		name                string
		account, model, day string
		prompt, completion  int
		credits             int64
		ok                  bool
	}{
		{"valid", "acct", "m", "2025-03-01", 1, 2, 3, true},
		{"zeros", "acct", "m", "2025-03-01", 0, 0, 0, true},
		{"empty account", "", "m", "2025-03-01", 0, 0, 0, false},
		{"nul in account", "a\x00b", "m", "2025-03-01", 0, 0, 0, false},
		{"empty model", "acct", "", "2025-03-01", 0, 0, 0, false},
		{"nul in model", "acct", "m\x00", "2025-03-01", 0, 0, 0, false},
		{"bad day", "acct", "m", "03/01/2025", 0, 0, 0, false},
		{"negative prompt", "acct", "m", "2025-03-01", -1, 0, 0, false},
		{"negative completion", "acct", "m", "2025-03-01", 0, -1, 0, false},
		{"negative credits", "acct", "m", "2025-03-01", 0, 0, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := credits.CheckUsage(tt.account, tt.model, tt.day, tt.prompt, tt.completion, tt.credits)
			if (err == nil) != tt.ok {
				t.Errorf("CheckUsage(%q, %q, %q, %d, %d, %d) = %v; want ok %v", tt.account, tt.model, tt.day, tt.prompt, tt.completion, tt.credits, err, tt.ok)
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

func TestNewChatEntryID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := credits.NewChatEntryID()
		if err != nil {
			t.Fatalf("NewChatEntryID() = %v", err)
		}
		if !strings.HasPrefix(id, "chat:") || len(id) != len("chat:")+24 || seen[id] {
			t.Fatalf("NewChatEntryID() = %q; want a fresh chat:<24 hex>", id)
		}
		seen[id] = true
	}
}
