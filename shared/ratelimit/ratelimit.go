// Package ratelimit enforces per-key request limits: a fixed one-minute
// window per key, counted atomically in a Counter (a DynamoDB item with ADD
// and TTL in AWS, memory in the single `genway serve` process), whose limit
// is the account's RateLimit, or the default when the account sets none;
// and bounds on the requests a key and an account have in progress at
// once in the process (InFlight).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// DefaultPerMinute is the default requests per minute per key (docs/api.md,
// "Rate limits").
const DefaultPerMinute = 3000

// Window is the length of a counting window.
const Window = time.Minute

// Counter counts requests per key and window. Incr adds one to the counter
// named key (which includes the window) and returns the new count; the
// counter may be forgotten after expires. Safe for concurrent use.
type Counter interface {
	Incr(ctx context.Context, key string, expires time.Time) (int64, error)
}

// Accounts reads an account's configured limit.
type Accounts interface {
	Account(ctx context.Context, id string) (credits.Account, error)
}

// Limiter decides whether a key may make another request: by its
// window's count (Allow) and, with SetInFlight, by the requests it and its
// account have in progress (Admit and Done). Account limits are cached for
// CacheTTL, so a changed limit applies within it. Safe for concurrent use.
type Limiter struct {
	counter  Counter
	accounts Accounts
	def      int
	now      func() time.Time
	inFlight *InFlight // nil: no bound on requests in progress

	mu    sync.Mutex
	cache map[string]cachedLimit
}

type cachedLimit struct {
	rpm     int
	expires time.Time
}

// CacheTTL is how long an account's limit is cached.
const CacheTTL = 30 * time.Second

// New returns a Limiter with default limit def (requests per minute per key;
// 0 means DefaultPerMinute).
func New(c Counter, a Accounts, def int) *Limiter {
	if def == 0 {
		def = DefaultPerMinute
	}
	return &Limiter{counter: c, accounts: a, def: def, now: time.Now, cache: map[string]cachedLimit{}}
}

// SetInFlight makes Admit bound the requests in progress by f (nil: no
// bound). It is not safe to call once requests are admitted.
func (l *Limiter) SetInFlight(f *InFlight) { l.inFlight = f }

// Admit admits a request of p: the bounds on requests in progress first
// (SetInFlight), then the window's count (Allow). It returns nil, and then
// Done(p) must be called once when the request ends; or the RateLimited
// *apierr.Error of the bound or limit that refused it, and nothing is to
// be done.
func (l *Limiter) Admit(ctx context.Context, p auth.Principal) error {
	if l.inFlight != nil {
		if err := l.inFlight.Acquire(p); err != nil {
			return err
		}
	}
	if err := l.Allow(ctx, p); err != nil {
		l.Done(p)
		return err
	}
	return nil
}

// Done ends a request that Admit admitted.
func (l *Limiter) Done(p auth.Principal) {
	if l.inFlight != nil {
		l.inFlight.Release(p)
	}
}

// Allow returns nil if p may make a request now, or a RateLimited
// *apierr.Error with RetryAfter set to the end of the window.
func (l *Limiter) Allow(ctx context.Context, p auth.Principal) error {
	now := l.now()
	rpm, err := l.limit(ctx, p.Account, now)
	if err != nil {
		return err
	}
	if rpm < 0 {
		return nil
	}
	start := now.Truncate(Window)
	end := start.Add(Window)
	n, err := l.counter.Incr(ctx, p.KeyID+"#"+strconv.FormatInt(start.Unix(), 10), end.Add(Window))
	if err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	if n > int64(rpm) {
		return &apierr.Error{Kind: apierr.RateLimited, Code: "rate_limit_exceeded", RetryAfter: end.Sub(now),
			Message: fmt.Sprintf("Rate limit of %d requests per minute for this key reached; retry after the window ends.", rpm)}
	}
	return nil
}

func (l *Limiter) limit(ctx context.Context, account string, now time.Time) (int, error) {
	l.mu.Lock()
	c, ok := l.cache[account]
	l.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.rpm, nil
	}
	rpm := l.def
	a, err := l.accounts.Account(ctx, account)
	switch {
	case errors.Is(err, credits.ErrAccountNotFound):
	case err != nil:
		return 0, fmt.Errorf("rate limit: account %s: %w", account, err)
	case a.RateLimit != 0:
		rpm = a.RateLimit
	}
	l.mu.Lock()
	if len(l.cache) > 10000 {
		clear(l.cache)
	}
	l.cache[account] = cachedLimit{rpm: rpm, expires: now.Add(CacheTTL)}
	l.mu.Unlock()
	return rpm, nil
}

// Memory is a Counter in process memory, for the single `genway serve`
// process (which alone serves its data directory). Safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	counts map[string]memCount
	now    func() time.Time
}

type memCount struct {
	n       int64
	expires time.Time
}

// NewMemory returns an empty in-memory Counter.
func NewMemory() *Memory { return &Memory{counts: map[string]memCount{}, now: time.Now} }

// Incr implements Counter, dropping expired counters as it goes.
func (m *Memory) Incr(ctx context.Context, key string, expires time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if len(m.counts) > 1000 {
		for k, c := range m.counts {
			if now.After(c.expires) {
				delete(m.counts, k)
			}
		}
	}
	c := m.counts[key]
	c.n++
	c.expires = expires
	m.counts[key] = c
	return c.n, nil
}
