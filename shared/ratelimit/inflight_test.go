package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

func TestInFlight(t *testing.T) {
	a1 := auth.Principal{Account: "a", KeyID: "key_1"}
	a2 := auth.Principal{Account: "a", KeyID: "key_2"}
	b1 := auth.Principal{Account: "b", KeyID: "key_3"}
	type step struct {
		release bool // Release instead of Acquire
		p       auth.Principal
		refused string // a word of the refusal's message; "" admitted
	}
	tests := []struct {
		name               string
		perKey, perAccount int
		steps              []step
	}{
		{"per key", 2, 10, []step{{false, a1, ""}, {false, a1, ""}, {false, a1, "This key has 2"}, {false, a2, ""}, {true, a1, ""}, {false, a1, ""}}},
		{"per account", 10, 3, []step{{false, a1, ""}, {false, a2, ""}, {false, a1, ""}, {false, a2, "account has 3"}, {false, b1, ""}, {true, a2, ""}, {false, a2, ""}}},
		{"no bounds", -1, 0, []step{{false, a1, ""}, {false, a1, ""}, {false, a1, ""}, {false, a2, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewInFlight(tt.perKey, tt.perAccount)
			for i, s := range tt.steps {
				if s.release {
					f.Release(s.p)
					continue
				}
				err := f.Acquire(s.p)
				if s.refused == "" {
					if err != nil {
						t.Fatalf("step %d: Acquire(%v) = %v; want admitted", i, s.p, err)
					}
					continue
				}
				e := apierr.As(err)
				if e == nil || e.Kind != apierr.RateLimited || e.Code != "concurrency_limit_exceeded" || e.RetryAfter != InFlightRetryAfter || !strings.Contains(e.Message, s.refused) {
					t.Fatalf("step %d: Acquire(%v) = %v; want concurrency_limit_exceeded saying %q", i, s.p, err, s.refused)
				}
			}
		})
	}
}

func TestInFlightReleaseForgets(t *testing.T) {
	f := NewInFlight(5, 5)
	p := auth.Principal{Account: "a", KeyID: "key_1"}
	for range 3 {
		f.Acquire(p)
	}
	for range 3 {
		f.Release(p)
	}
	if k, a := f.InFlight("key_1", "a"); k != 0 || a != 0 || len(f.keys) != 0 || len(f.accounts) != 0 {
		t.Errorf("after every request ended: InFlight = %d, %d, maps %v %v; want zero and empty", k, a, f.keys, f.accounts)
	}
}

// TestLimiterAdmit: Admit applies the in-flight bounds, then the window;
// a request the window refuses leaves nothing in progress.
func TestLimiterAdmit(t *testing.T) {
	accounts := accountsFunc(func(ctx context.Context, id string) (credits.Account, error) {
		return credits.Account{ID: id, RateLimit: 3}, nil
	})
	l := New(NewMemory(), accounts, 0)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	f := NewInFlight(2, 0)
	l.SetInFlight(f)
	p := auth.Principal{Account: "a", KeyID: "key_1"}
	ctx := context.Background()
	if l.Admit(ctx, p) != nil || l.Admit(ctx, p) != nil {
		t.Fatal("the first two requests were refused")
	}
	if e := apierr.As(l.Admit(ctx, p)); e == nil || e.Code != "concurrency_limit_exceeded" {
		t.Fatalf("a third in progress: %v; want concurrency_limit_exceeded", e)
	}
	l.Done(p)
	if err := l.Admit(ctx, p); err != nil { // the window's third
		t.Fatalf("after one ended: %v; want admitted", err)
	}
	l.Done(p)
	if e := apierr.As(l.Admit(ctx, p)); e == nil || e.Code != "rate_limit_exceeded" {
		t.Fatalf("the window's fourth: %v; want rate_limit_exceeded", e)
	}
	if k, _ := f.InFlight("key_1", "a"); k != 1 {
		t.Errorf("in progress after the window refused one = %d; want 1 (the refused one not counted)", k)
	}
}
