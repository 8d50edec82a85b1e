package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

type accountsFunc func(ctx context.Context, id string) (credits.Account, error)

func (f accountsFunc) Account(ctx context.Context, id string) (credits.Account, error) {
	return f(ctx, id)
}

func TestLimiter(t *testing.T) {
	limits := map[string]int{"small": 3, "unlimited": -1, "default": 0}
	accounts := accountsFunc(func(ctx context.Context, id string) (credits.Account, error) {
		rpm, ok := limits[id]
		if !ok {
			return credits.Account{}, credits.ErrAccountNotFound
		}
		return credits.Account{ID: id, RateLimit: rpm}, nil
	})
	tests := []struct {
		account string
		calls   int
		allowed int
	}{
		{"small", 5, 3},
		{"unlimited", 50, 50},
		{"default", 6, 4}, // default of 4 in this test
		{"missing", 6, 4},
	}
	for _, tt := range tests {
		t.Run(tt.account, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 10, 0, 15, 0, time.UTC)
			l := New(NewMemory(), accounts, 4)
			l.now = func() time.Time { return now }
			p := auth.Principal{Account: tt.account, KeyID: "key_" + tt.account}
			allowed := 0
			for i := 0; i < tt.calls; i++ {
				err := l.Allow(context.Background(), p)
				if err == nil {
					allowed++
					continue
				}
				e := apierr.As(err)
				if e == nil || e.Kind != apierr.RateLimited || e.Code != "rate_limit_exceeded" || e.RetryAfter != 45*time.Second {
					t.Fatalf("Allow = %v; want rate_limit_exceeded with RetryAfter 45s", err)
				}
			}
			if allowed != tt.allowed {
				t.Errorf("allowed %d of %d; want %d", allowed, tt.calls, tt.allowed)
			}
			// The next window starts afresh.
			now = now.Add(time.Minute)
			if tt.allowed < tt.calls {
				if err := l.Allow(context.Background(), p); err != nil {
					t.Errorf("Allow in the next window = %v; want nil", err)
				}
			}
		})
	}
}

func TestLimiterKeysAreSeparate(t *testing.T) {
	accounts := accountsFunc(func(ctx context.Context, id string) (credits.Account, error) {
		return credits.Account{ID: id, RateLimit: 1}, nil
	})
	l := New(NewMemory(), accounts, 0)
	a := auth.Principal{Account: "acct", KeyID: "key_a"}
	b := auth.Principal{Account: "acct", KeyID: "key_b"}
	if l.Allow(context.Background(), a) != nil || l.Allow(context.Background(), b) != nil {
		t.Fatal("first request of each key refused")
	}
	if l.Allow(context.Background(), a) == nil {
		t.Error("second request of key a allowed; want refused (limit is per key)")
	}
}
