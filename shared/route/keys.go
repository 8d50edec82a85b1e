package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// KeySet is a provider's API keys: one key, or a pool given as a
// comma-separated list ("sk-a,sk-b"). An adapter keeps one and takes the
// key of each call with Key(ctx): the key the router chose for the
// attempt, else the first. The zero KeySet has no key. A KeySet is
// immutable and safe for concurrent use.
type KeySet struct {
	keys   []string
	ids    []string
	bearer [][]string // by key: its Authorization header value (BearerHeader)
}

// NewKeySet returns the keys of list, split at commas, with spaces
// trimmed and empty entries dropped.
func NewKeySet(list string) KeySet {
	var k KeySet
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			k.keys = append(k.keys, s)
			k.ids = append(k.ids, KeyID(s))
			k.bearer = append(k.bearer, []string{"Bearer " + s})
		}
	}
	return k
}

// KeyID is a key's short name in logs, metrics and job records: the first
// 8 hex digits of its SHA-256. It never shows the key.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// Key returns the key to use for a call under ctx: the one whose KeyID
// ctx carries (WithKey), or the first key if ctx names none, or one this
// set does not hold (rotated away); "" for an empty set.
func (k KeySet) Key(ctx context.Context) string {
	if i := k.index(ctx); i >= 0 {
		return k.keys[i]
	}
	return ""
}

// BearerHeader returns the Authorization header value of Key(ctx),
// "Bearer " and the key, as an http.Header holds it: one slice per key,
// made once and shared by every request that sends it (net/http reads a
// request's headers and never writes them: set it, do not change it in
// place). nil for an empty set.
func (k KeySet) BearerHeader(ctx context.Context) []string {
	if i := k.index(ctx); i >= 0 {
		return k.bearer[i][:1:1]
	}
	return nil
}

// index is the index of Key(ctx) in k.keys, -1 for an empty set.
func (k KeySet) index(ctx context.Context) int {
	if len(k.keys) == 0 {
		return -1
	}
	if id, _ := ctx.Value(keyCtx{}).(string); id != "" {
		for i, v := range k.ids {
			if v == id {
				return i
			}
		}
	}
	return 0
}

// KeyIDs returns the KeyIDs of the keys, in order. The router reads them
// through the Keyed interface.
func (k KeySet) KeyIDs() []string { return k.ids }

// Keyed is implemented by a provider whose calls take a key from a
// KeySet: the router spreads attempts over the keys and rests those that
// were refused or rate-limited.
type Keyed interface {
	KeyIDs() []string
}

// KeysOf returns the KeyIDs of p's key pool when p is Keyed, else nil:
// the one place a provider is asked for its keys.
func KeysOf(p any) []string {
	if k, ok := p.(Keyed); ok {
		return k.KeyIDs()
	}
	return nil
}

// PoolKeys returns the KeyIDs of p's key pool when p is Keyed with more
// than one key (a Target's Keys), else nil: one key needs no choosing.
func PoolKeys(p any) []string {
	if ids := KeysOf(p); len(ids) > 1 {
		return ids
	}
	return nil
}

type keyCtx struct{}

// WithKey returns ctx naming the key (by KeyID) for the calls made under
// it; the router sets it per attempt, and a job's later calls set the key
// that submitted it.
func WithKey(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, keyCtx{}, id)
}

// KeyFrom returns the KeyID ctx names, "" if none.
func KeyFrom(ctx context.Context) string {
	id, _ := ctx.Value(keyCtx{}).(string)
	return id
}

// keyState is one key's rest: it is not chosen before until while
// another key of its pool is free.
type keyState struct {
	until  time.Time
	logged bool // its refusal was logged (once per bench)
}

// maxUnwrap bounds the Unwrap chain Unwrapped follows.
const maxUnwrap = 8

// Unwrapped calls visit with p, then with the provider p's Unwrap() P
// returns (a provider that stands for another one: the key-rotating
// delegates), and so on down the chain, at most 8 deep, until one has no
// Unwrap or is nil; as net/http's ResponseController looks through a
// ResponseWriter's Unwrap. It is how chat, images and jobs find a
// provider's optional interfaces (their Capabilities): each visit looks
// at one provider of the chain, and the first found wins.
func Unwrapped[P any](p P, visit func(P)) {
	for range maxUnwrap {
		if any(p) == nil {
			return
		}
		visit(p)
		u, ok := any(p).(interface{ Unwrap() P })
		if !ok {
			return
		}
		p = u.Unwrap()
	}
}
