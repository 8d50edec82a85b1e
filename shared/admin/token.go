package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenPrefix starts every operator token Genway makes, so that one is
// told apart from an API key (sk_live_) at a glance.
const TokenPrefix = "gwop_"

// NewToken returns a new operator token: TokenPrefix and 52 base32
// characters from a CSPRNG (260 bits).
func NewToken() string {
	return TokenPrefix + strings.ToLower(rand.Text()+rand.Text())
}

// Verifier checks operator tokens against the SHA-256 of the one token,
// in constant time. Only the hash is held. A Verifier made by
// LoadingVerifier reads the token again when it is older than its TTL,
// so a rotated token takes over without a restart.
type Verifier struct {
	mu   sync.RWMutex
	hash [sha256.Size]byte

	load   func(context.Context) (string, error) // nil: a fixed token
	ttl    time.Duration
	loaded time.Time
	onErr  func(error)
}

// LoadingVerifier returns a Verifier for the token load returns: read
// now (an error is returned: no token, no admin API), and again when the
// last read is older than ttl (a failed re-read keeps the token it has,
// and calls onErr if it is not nil).
func LoadingVerifier(ctx context.Context, load func(context.Context) (string, error), ttl time.Duration, onErr func(error)) (*Verifier, error) {
	tok, err := load(ctx)
	if err != nil {
		return nil, err
	}
	if tok == "" {
		return nil, errors.New("the operator token is empty")
	}
	return &Verifier{hash: sha256.Sum256([]byte(tok)), load: load, ttl: ttl, loaded: time.Now(), onErr: onErr}, nil
}

// current returns the hash, reloading it first if it is stale.
func (v *Verifier) current() [sha256.Size]byte {
	v.mu.RLock()
	h, stale := v.hash, v.load != nil && time.Since(v.loaded) >= v.ttl
	v.mu.RUnlock()
	if !stale {
		return h
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tok, err := v.load(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.loaded = time.Now() // a failure is retried after another ttl, not on every request
	if err != nil || tok == "" {
		if err == nil {
			err = errors.New("the operator token is empty")
		}
		if v.onErr != nil {
			v.onErr(err)
		}
		return v.hash
	}
	v.hash = sha256.Sum256([]byte(tok))
	return v.hash
}

// NewVerifier returns a Verifier for token.
func NewVerifier(token string) *Verifier {
	return &Verifier{hash: sha256.Sum256([]byte(token))}
}

// VerifierFromHash returns a Verifier for the token whose SHA-256 is
// hexHash.
func VerifierFromHash(hexHash string) (*Verifier, error) {
	b, err := hex.DecodeString(strings.TrimSpace(hexHash))
	if err != nil || len(b) != sha256.Size {
		return nil, errors.New("operator token hash is not 64 hex digits")
	}
	v := &Verifier{}
	copy(v.hash[:], b)
	return v, nil
}

// Verify reports whether token is the operator token. It takes the same
// time whatever the token (both sides are hashed first), and refuses an
// empty token.
func (v *Verifier) Verify(token string) bool {
	if v == nil || token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	want := v.current()
	return subtle.ConstantTimeCompare(h[:], want[:]) == 1
}

// Secret is a key derived from the token, for what must change when the
// token does (the console's session and CSRF signatures): a new token
// signs everyone out.
func (v *Verifier) Secret(purpose string) []byte {
	h := v.current()
	s := sha256.Sum256(append([]byte("genway console "+purpose+"\x00"), h[:]...))
	return s[:]
}

// LocalToken returns the operator token's Verifier for genway serve: from
// token (GENWAY_ADMIN_TOKEN) when set; else from the hash stored in
// hashFile; else a new token is made, its hash stored in hashFile (mode
// 0600), and the token returned in made (to be shown once).
func LocalToken(token, hashFile string) (v *Verifier, made string, err error) {
	if token != "" {
		return NewVerifier(token), "", nil
	}
	b, err := os.ReadFile(hashFile)
	if err == nil {
		v, err := VerifierFromHash(string(b))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", hashFile, err)
		}
		return v, "", nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	made = NewToken()
	h := sha256.Sum256([]byte(made))
	if err := os.WriteFile(hashFile, []byte(hex.EncodeToString(h[:])+"\n"), 0o600); err != nil {
		return nil, "", fmt.Errorf("store the operator token's hash: %w", err)
	}
	return NewVerifier(made), made, nil
}
