package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrAmbiguousKey is returned by Resolve when a prefix matches more than
// one key.
var ErrAmbiguousKey = errors.New("key prefix matches more than one key")

// minPrefixChars is how many characters Resolve needs after "key_" or
// "sk_live_", so that a bare scheme prefix never selects a key.
const minPrefixChars = 4

// Resolve finds the one key an operator means by s: a key id, a
// plaintext key, or a unique prefix of a key id ("key_3f2a...") or of a
// key's shown prefix ("sk_live_AbCd"), with at least four characters after
// "key_" or "sk_live_". It returns ErrKeyNotFound if nothing matches
// and ErrAmbiguousKey if several keys do.
func Resolve(ctx context.Context, s Store, idOrPrefix string) (Record, error) {
	q := strings.TrimSpace(idOrPrefix)
	switch {
	case strings.HasPrefix(q, Prefix) && len(q) > len(Prefix)+minPrefixChars:
		// Longer than any shown prefix: a whole key, or a mistake (a key
		// is only known by its first characters and its hash, so a longer
		// prefix cannot be checked beyond them).
		if !ValidKey(q) {
			return Record{}, fmt.Errorf("resolve key %q: a key prefix is the first %d characters (as keys list shows it, e.g. %s), or give the whole key or its id: %w",
				q, len(Prefix)+minPrefixChars, q[:len(Prefix)+minPrefixChars], ErrKeyNotFound)
		}
		r, err := s.KeyByHash(ctx, Hash(Key(q)))
		if err != nil {
			return Record{}, fmt.Errorf("resolve key: %w", err)
		}
		return r, nil
	case strings.HasPrefix(q, Prefix) && len(q) >= len(Prefix)+minPrefixChars,
		strings.HasPrefix(q, "key_") && len(q) >= len("key_")+minPrefixChars:
	default:
		return Record{}, fmt.Errorf("resolve key %q: need a key id, a key or a prefix with %d characters after the scheme: %w", q, minPrefixChars, ErrKeyNotFound)
	}
	all, err := s.Keys(ctx, "")
	if err != nil {
		return Record{}, fmt.Errorf("resolve key: %w", err)
	}
	var hits []Record
	for _, r := range all {
		if r.ID == q {
			return r, nil
		}
		if strings.HasPrefix(r.ID, q) || strings.HasPrefix(r.Prefix, q) {
			hits = append(hits, r)
		}
	}
	switch len(hits) {
	case 0:
		return Record{}, fmt.Errorf("resolve key %q: %w", q, ErrKeyNotFound)
	case 1:
		return hits[0], nil
	}
	return Record{}, fmt.Errorf("resolve key %q: %d keys match: %w", q, len(hits), ErrAmbiguousKey)
}
