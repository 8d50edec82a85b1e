// Package auth is API keys: making them, storing only their hash, and
// turning an Authorization header into the calling account.
//
// A key is "sk_live_" followed by 40 base62 characters from crypto/rand.
// Only the SHA-256 of the whole key is stored; the plaintext is shown once.
package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// Prefix starts every key.
const Prefix = "sk_live_"

const (
	secretLen = 40
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// ErrInvalidKey is returned for every authentication failure: missing header,
// wrong scheme, wrong prefix, unknown or revoked key. It never says which.
var ErrInvalidKey = &apierr.Error{Kind: apierr.Unauthenticated, Code: "invalid_api_key", Message: "Invalid API key. Pass a live key as 'Authorization: Bearer sk_live_...'."}

// ErrKeyNotFound is returned by a Store that has no such key.
var ErrKeyNotFound = errors.New("key not found")

// Key is a plaintext API key. It logs as REDACTED.
type Key string

// LogValue keeps keys out of logs.
func (Key) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// NewKey returns a fresh random key.
func NewKey() (Key, error) {
	s, err := RandomString(secretLen)
	if err != nil {
		return "", err
	}
	return Key(Prefix + s), nil
}

// RandomString returns n base62 characters from crypto/rand, uniformly
// distributed (bytes >= 248 are rejected so that byte % 62 is unbiased).
func RandomString(n int) (string, error) {
	var buf [64]byte
	b, err := AppendRandom(buf[:0], n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendRandom appends n random base62 characters to dst, as RandomString
// makes them, without allocating when dst has room.
func AppendRandom(dst []byte, n int) ([]byte, error) {
	var buf [64]byte
	want := len(dst) + n
	for len(dst) < want {
		need := want - len(dst)
		k := min(need+need/4+8, len(buf))
		if _, err := rand.Read(buf[:k]); err != nil {
			return dst, err
		}
		for _, b := range buf[:k] {
			if b < 248 && len(dst) < want {
				dst = append(dst, base62[b%62])
			}
		}
	}
	return dst, nil
}

// ValidKey reports whether s has the shape of a key: Prefix and at least 32
// base62 characters (at most 200).
func ValidKey(s string) bool {
	if !strings.HasPrefix(s, Prefix) || len(s) < len(Prefix)+32 || len(s) > len(Prefix)+200 {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// Hash returns the hex SHA-256 of the whole key: the only form stored.
func Hash(key Key) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Record is a stored key.
type Record struct {
	ID      string `json:"id"`     // "key_" + the first 16 hex digits of Hash
	Hash    string `json:"hash"`   // hex SHA-256 of the key
	Prefix  string `json:"prefix"` // the first 12 characters, to recognise a key in a list
	Account string `json:"account"`
	Created int64  `json:"created"`           // Unix seconds
	Revoked int64  `json:"revoked,omitempty"` // Unix seconds, 0 if live
	// LastUsed is when the key last authenticated a request, to within
	// TouchEvery (Unix seconds, 0 if never).
	LastUsed int64 `json:"last_used,omitempty"`
	// Controls: the key's name, model patterns, expiry and credit limit.
	Controls
	// Spent is what the key's requests were charged so far (captured
	// jobs, images and speeches, priced chat); Held is what its requests
	// in flight hold. A credit limit bounds Spent + Held: a hold that
	// would take them past it is refused (credits.ErrKeyLimit).
	Spent credits.Amount `json:"spent,omitempty"`
	Held  credits.Amount `json:"held,omitempty"`
	// Period is the credit limit period (see Period) that Spent belongs
	// to, for a key with a CreditLimitReset; "" before its first one.
	// Store.RollKeyPeriod starts the next; InPeriod shows a record as of
	// a time. (A DynamoDB record read by KeyByHash has none: it is kept
	// with the counters.)
	Period string `json:"period,omitempty"`
}

// Left returns what the key may still spend under its credit limit (0
// when it is used up or past it), and false when it has no limit.
func (r Record) Left() (credits.Amount, bool) {
	if r.CreditLimit == nil {
		return 0, false
	}
	return max(*r.CreditLimit-r.Spent-r.Held, 0), true
}

// Expired reports whether the key has expired at now.
func (r Record) Expired(now time.Time) bool {
	return r.ExpiresAt != 0 && now.Unix() >= r.ExpiresAt
}

// TouchEvery is how often a key's LastUsed is written while it is in use:
// at most once per key per process in that time, so that "last used"
// costs one write an hour, not one per request.
const TouchEvery = time.Hour

// Toucher is the side of a Store that records when a key was last used.
type Toucher interface {
	// TouchKey sets the LastUsed of the key with hash to at.
	TouchKey(ctx context.Context, hash string, at time.Time) error
}

// NewRecord returns the record for key, owned by account.
func NewRecord(key Key, account string, now time.Time) Record {
	h := Hash(key)
	return Record{ID: "key_" + h[:16], Hash: h, Prefix: string(key)[:len(Prefix)+4], Account: account, Created: now.Unix()}
}

// Store keeps key records. Implementations are safe for concurrent use.
type Store interface {
	// PutKey stores a new key record.
	PutKey(ctx context.Context, r Record) error
	// KeyByHash returns the record with hash, or ErrKeyNotFound.
	KeyByHash(ctx context.Context, hash string) (Record, error)
	// Keys returns all key records of account ("" for every account),
	// in SortRecords order.
	Keys(ctx context.Context, account string) ([]Record, error)
	// RevokeKey marks the key with id revoked at time at; ErrKeyNotFound if none.
	RevokeKey(ctx context.Context, id string, at time.Time) (Record, error)
	// KeyByID returns the record of the key with id, its Spent and Held
	// read strongly consistent, or ErrKeyNotFound.
	KeyByID(ctx context.Context, id string) (Record, error)
	// SetControls replaces the controls of the key with id (validated by
	// Controls.Check first) and returns the record; ErrKeyNotFound if
	// none. Its Spent and Held stay: a new credit limit bounds what was
	// spent already (a limit below it refuses every new hold).
	SetControls(ctx context.Context, id string, c Controls) (Record, error)
	// RollKeyPeriod starts period (as Period makes it) on the key with
	// id: Spent 0, Held kept (requests in progress settle into the new
	// period), Period period, in one conditional write, only if the
	// stored period is older (NewerPeriod). It reports whether it rolled:
	// rolling a period again, or an older one, changes nothing, so that
	// processes rolling at once roll once. ErrKeyNotFound if there is no
	// such key, ErrBadPeriod for a period Period does not make.
	RollKeyPeriod(ctx context.Context, id, period string) (bool, error)
	Toucher
}

// Principal is the authenticated caller.
type Principal struct {
	Account string
	KeyID   string
	// Models are the key's model patterns (see Controls.Models); empty:
	// every model.
	Models []string
	// Limited reports that the key had a credit limit when it was read
	// (within the Authenticator's TTL): the stores enforce the limit
	// itself, this only saves a read where nothing is limited.
	Limited bool
	// OwnJobs: the key sees and manages only the jobs it created
	// (Controls.Jobs JobsOwn; see CanSeeJob).
	OwnJobs bool
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// WithAccount returns ctx carrying a principal for account (tests, internal callers).
func WithAccount(ctx context.Context, account string) context.Context {
	return WithPrincipal(ctx, Principal{Account: account})
}

// FromContext returns the principal in ctx, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Authenticator checks bearer keys against a Store, caching answers for TTL
// so that a warm Lambda container does not read the table on every
// request. A revoked key stops working within TTL; an expired key at once
// (its expiry is checked against the clock on every request, cached or
// not), and a key whose expiry is moved stops or starts within TTL. Misses are cached too,
// so that a client repeating an unknown key costs one read per TTL, not
// one per request; a new key still works at once (its random secret cannot
// have been tried before it existed), except a key imported under a value
// that was already tried (GENWAY_DEV_KEY), which works within TTL.
//
// A key with a credit limit reset whose record's period is not the
// current one (by the Authenticator's clock) is rolled to it
// (Store.RollKeyPeriod) before the request goes on: at most once per key
// per period per process, remembered apart from the cache (whose record
// keeps its old period for TTL), so that the common path writes nothing.
// Safe for concurrent use.
type Authenticator struct {
	store Store
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	cache   map[string]cached
	touched map[string]time.Time // by hash: when this process last wrote LastUsed
	rolled  map[string]rolling   // by key id: the period this process rolled (or is rolling) it to
	// waiting, if set, is called when a request starts waiting for
	// another's roll (tests).
	waiting func()
}

type cached struct {
	rec     Record
	miss    bool // no such key
	expires time.Time
}

// DefaultCacheTTL bounds how long a revoked key keeps working.
const DefaultCacheTTL = 30 * time.Second

// NewAuthenticator returns an Authenticator over store with cache ttl
// (0: no cache).
func NewAuthenticator(store Store, ttl time.Duration) *Authenticator {
	return &Authenticator{store: store, ttl: ttl, now: time.Now, cache: make(map[string]cached)}
}

// SetClock makes a use now for expiries, last use and credit limit
// periods instead of time.Now (tests; genway serve's
// GENWAY_TEST_CLOCK_OFFSET). Call it before the first Authenticate.
func (a *Authenticator) SetClock(now func() time.Time) { a.now = now }

// maxCache bounds the cache; past it the cache is cleared (keys are few).
const maxCache = 10000

// Authenticate returns the principal for an Authorization header value, or
// ErrInvalidKey. Other errors are store failures.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, ErrInvalidKey
	}
	tok = strings.TrimSpace(tok)
	if !ValidKey(tok) {
		return Principal{}, ErrInvalidKey
	}
	h := Hash(Key(tok))
	now := a.now()
	if a.ttl > 0 {
		a.mu.Lock()
		c, hit := a.cache[h]
		a.mu.Unlock()
		if hit && now.Before(c.expires) {
			if c.miss {
				return Principal{}, ErrInvalidKey
			}
			p, err := principal(c.rec, now)
			if err == nil {
				a.touch(ctx, h, c.rec, now)
				a.roll(ctx, c.rec, now)
			}
			return p, err
		}
	}
	rec, err := a.store.KeyByHash(ctx, h)
	if errors.Is(err, ErrKeyNotFound) {
		if a.ttl > 0 {
			a.remember(h, cached{miss: true, expires: now.Add(a.ttl)})
		}
		return Principal{}, ErrInvalidKey
	}
	if err != nil {
		return Principal{}, err
	}
	if a.ttl > 0 {
		a.remember(h, cached{rec: rec, expires: now.Add(a.ttl)})
	}
	p, err := principal(rec, now)
	if err == nil {
		a.touch(ctx, h, rec, now)
		a.roll(ctx, rec, now)
	}
	return p, err
}

// roll starts the current credit limit period on rec's key if it has a
// reset, its record's period is not the current one and this process
// has not rolled it to that period yet. A request that comes while
// another is rolling the key waits for that roll (or for its own ctx),
// so that no request of the new period is counted against the old one.
// A failure is logged and forgotten, so that the next request tries
// again: meanwhile the key's old Spent still counts, which can refuse a
// hold but never allows one too many.
func (a *Authenticator) roll(ctx context.Context, rec Record, now time.Time) {
	if rec.CreditLimitReset == ResetNever {
		return
	}
	p := Period(rec.CreditLimitReset, now)
	if rec.Period == p {
		return
	}
	a.mu.Lock()
	if r, ok := a.rolled[rec.ID]; ok && r.period == p {
		a.mu.Unlock()
		if a.waiting != nil {
			a.waiting()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
		}
		return
	}
	if a.rolled == nil || len(a.rolled) >= maxCache {
		a.rolled = map[string]rolling{}
	}
	old, had := a.rolled[rec.ID]
	mine := rolling{period: p, done: make(chan struct{})}
	a.rolled[rec.ID] = mine
	a.mu.Unlock()
	defer close(mine.done)
	if _, err := a.store.RollKeyPeriod(context.WithoutCancel(ctx), rec.ID, p); err != nil {
		a.mu.Lock()
		if a.rolled[rec.ID] == mine {
			if had {
				a.rolled[rec.ID] = old
			} else {
				delete(a.rolled, rec.ID)
			}
		}
		a.mu.Unlock()
		slog.WarnContext(ctx, "credit limit period not rolled", "key", rec.ID, "period", p, "err", err)
	}
}

// rolling is a key's period this process rolled or is rolling it to;
// done is closed when that roll has returned.
type rolling struct {
	period string
	done   chan struct{}
}

// touch writes the key's LastUsed if it is older than TouchEvery and this
// process has not written it for TouchEvery. A failure changes nothing
// for the request: last-used is for the operator's eyes.
func (a *Authenticator) touch(ctx context.Context, h string, rec Record, now time.Time) {
	if now.Sub(time.Unix(rec.LastUsed, 0)) < TouchEvery {
		return
	}
	a.mu.Lock()
	if a.touched == nil {
		a.touched = map[string]time.Time{}
	}
	if now.Sub(a.touched[h]) < TouchEvery {
		a.mu.Unlock()
		return
	}
	if len(a.touched) >= maxCache {
		clear(a.touched)
	}
	a.touched[h] = now
	a.mu.Unlock()
	_ = a.store.TouchKey(context.WithoutCancel(ctx), h, now)
}

// remember caches c for hash h, clearing the cache when it is full (a
// flood of random keys empties it rather than growing it).
func (a *Authenticator) remember(h string, c cached) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCache {
		clear(a.cache)
	}
	a.cache[h] = c
}

// principal is the caller that r authenticates at now: ErrInvalidKey,
// the same as for an unknown key, if it is revoked or expired.
func principal(r Record, now time.Time) (Principal, error) {
	if r.Revoked != 0 || r.Expired(now) {
		return Principal{}, ErrInvalidKey
	}
	return Principal{Account: r.Account, KeyID: r.ID, Models: r.Models, Limited: r.CreditLimit != nil, OwnJobs: r.Jobs == JobsOwn}, nil
}

// SortRecords orders key records as Store.Keys lists them: oldest first,
// by ID among keys created in the same second.
func SortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.ID, b.ID))
	})
}
