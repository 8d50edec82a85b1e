package ratelimit

import (
	"fmt"
	"sync"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

// Default bounds on the requests in progress at once in one process
// (GENWAY_MAX_IN_FLIGHT_PER_KEY, GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT).
const (
	DefaultInFlightPerKey     = 128
	DefaultInFlightPerAccount = 512
)

// InFlightRetryAfter is the Retry-After of a request refused for the
// requests already in progress: one of them may end at any moment.
const InFlightRetryAfter = time.Second

// InFlight bounds the requests a key, and an account over all its keys,
// have in progress at once in this process: a window's count (Limiter)
// bounds how many start in a minute, not how many run at once, and each
// one holds memory (its body, decoded) and an upstream call for as long as
// it runs, minutes for a stream. Safe for concurrent use.
//
// The bounds are per process: `genway serve` is one process; on AWS each
// Lambda instance serves one request at a time, so they never bind there
// (see docs/aws.md).
type InFlight struct {
	perKey, perAccount int // 0 or less: no bound

	mu       sync.Mutex
	keys     map[string]int
	accounts map[string]int
}

// NewInFlight returns an InFlight of at most perKey requests per key and
// perAccount per account (0 or less: no bound).
func NewInFlight(perKey, perAccount int) *InFlight {
	return &InFlight{perKey: perKey, perAccount: perAccount, keys: map[string]int{}, accounts: map[string]int{}}
}

// Acquire admits a request of p: nil, and Release(p) must be called once
// when it ends; or a RateLimited *apierr.Error (code
// concurrency_limit_exceeded, RetryAfter InFlightRetryAfter) naming the
// bound that refused it, and nothing to release.
func (f *InFlight) Acquire(p auth.Principal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, a := f.keys[p.KeyID], f.accounts[p.Account]
	switch {
	case f.perKey > 0 && k >= f.perKey:
		return tooMany(fmt.Sprintf("This key has %d requests in progress, its limit; retry when one ends.", k))
	case f.perAccount > 0 && a >= f.perAccount:
		return tooMany(fmt.Sprintf("This key's account has %d requests in progress, its limit; retry when one ends.", a))
	}
	f.keys[p.KeyID], f.accounts[p.Account] = k+1, a+1
	return nil
}

// Release ends a request that Acquire admitted.
func (f *InFlight) Release(p auth.Principal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	drop(f.keys, p.KeyID)
	drop(f.accounts, p.Account)
}

// InFlight returns the requests in progress of key and of account.
func (f *InFlight) InFlight(key, account string) (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key], f.accounts[account]
}

// drop takes one from m[id], forgetting it at zero.
func drop(m map[string]int, id string) {
	if n := m[id]; n > 1 {
		m[id] = n - 1
	} else {
		delete(m, id)
	}
}

func tooMany(msg string) error {
	return &apierr.Error{Kind: apierr.RateLimited, Code: "concurrency_limit_exceeded", RetryAfter: InFlightRetryAfter, Message: msg}
}
