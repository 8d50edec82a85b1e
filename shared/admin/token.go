package admin

import (
	"context"
	"crypto/hmac"
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

// reloaded is a value read by load and read again when it is older than
// ttl: a failed re-read keeps the last value (and calls onErr, if set),
// and is tried again after another ttl, not on every use. conv checks
// and converts what load returns. With load nil the value is fixed.
type reloaded struct {
	mu     sync.RWMutex
	val    []byte
	load   func(context.Context) (string, error)
	conv   func(string) ([]byte, error)
	ttl    time.Duration
	loaded time.Time
	onErr  func(error)
}

// start reads the first value (an error is returned).
func (r *reloaded) start(ctx context.Context) error {
	s, err := r.load(ctx)
	if err != nil {
		return err
	}
	if r.val, err = r.conv(s); err != nil {
		return err
	}
	r.loaded = time.Now()
	return nil
}

// current returns the value, reading it again first if it is stale.
func (r *reloaded) current() []byte {
	r.mu.RLock()
	v, stale := r.val, r.load != nil && time.Since(r.loaded) >= r.ttl
	r.mu.RUnlock()
	if !stale {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.load(ctx)
	var nv []byte
	if err == nil {
		nv, err = r.conv(s)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loaded = time.Now() // a failure is retried after another ttl, not on every request
	if err != nil {
		if r.onErr != nil {
			r.onErr(err)
		}
		return r.val
	}
	r.val = nv
	return nv
}

// Verifier checks operator tokens against the SHA-256 of the one token,
// in constant time. Only the hash is held. A Verifier made by
// LoadingVerifier reads the token again when it is older than its TTL,
// so a rotated token takes over without a restart.
type Verifier struct {
	r reloaded // the token's SHA-256
}

// hashToken is the Verifier's conversion: the token's SHA-256.
func hashToken(tok string) ([]byte, error) {
	if tok == "" {
		return nil, errors.New("the operator token is empty")
	}
	h := sha256.Sum256([]byte(tok))
	return h[:], nil
}

// LoadingVerifier returns a Verifier for the token load returns: read
// now (an error is returned: no token, no admin API), and again when the
// last read is older than ttl (a failed re-read keeps the token it has,
// and calls onErr if it is not nil).
func LoadingVerifier(ctx context.Context, load func(context.Context) (string, error), ttl time.Duration, onErr func(error)) (*Verifier, error) {
	v := &Verifier{r: reloaded{load: load, conv: hashToken, ttl: ttl, onErr: onErr}}
	if err := v.r.start(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// NewVerifier returns a Verifier for token.
func NewVerifier(token string) *Verifier {
	h := sha256.Sum256([]byte(token))
	return &Verifier{r: reloaded{val: h[:]}}
}

// VerifierFromHash returns a Verifier for the token whose SHA-256 is
// hexHash.
func VerifierFromHash(hexHash string) (*Verifier, error) {
	b, err := hex.DecodeString(strings.TrimSpace(hexHash))
	if err != nil || len(b) != sha256.Size {
		return nil, errors.New("operator token hash is not 64 hex digits")
	}
	return &Verifier{r: reloaded{val: b}}, nil
}

// Verify reports whether token is the operator token. It takes the same
// time whatever the token (both sides are hashed first), and refuses an
// empty token.
func (v *Verifier) Verify(token string) bool {
	if v == nil || token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], v.r.current()) == 1
}

// MinSessionSecret is the shortest console session secret taken, in
// bytes (SessionKeys): 32, 256 bits.
const MinSessionSecret = 32

// SessionKeys derives the keys that sign the console's sessions and CSRF
// tokens from a random secret of their own, bound to the current operator
// token: HMAC-SHA256(secret, purpose and the token's SHA-256). Nothing
// kept with the token (its hash in admin-token.sha256, a backup of it)
// signs a session, and a rotated token, or secret, signs every session
// out. A SessionKeys made by LoadingSessionKeys reads its secret again
// when it is older than its TTL, as a LoadingVerifier reads the token.
// Safe for concurrent use.
type SessionKeys struct {
	v      *Verifier
	secret reloaded
}

// sessionSecret is SessionKeys' conversion: a secret of at least
// MinSessionSecret bytes, taken as it is.
func sessionSecret(s string) ([]byte, error) {
	if len(s) < MinSessionSecret {
		return nil, fmt.Errorf("the console session secret has %d bytes; it needs at least %d (e.g. openssl rand -hex 32)", len(s), MinSessionSecret)
	}
	return []byte(s), nil
}

// errNoVerifier is the error of session keys made without a Verifier.
var errNoVerifier = errors.New("console session keys need the operator token's verifier")

// NewSessionKeys returns the SessionKeys of secret (at least
// MinSessionSecret bytes) and v's token.
func NewSessionKeys(v *Verifier, secret []byte) (*SessionKeys, error) {
	if v == nil {
		return nil, errNoVerifier
	}
	b, err := sessionSecret(string(secret))
	if err != nil {
		return nil, err
	}
	return &SessionKeys{v: v, secret: reloaded{val: b}}, nil
}

// LoadingSessionKeys returns the SessionKeys of v's token and the secret
// load returns: read now (an error is returned: no secret, no console),
// and again when the last read is older than ttl (a failed re-read keeps
// the secret it has, and calls onErr if it is not nil).
func LoadingSessionKeys(ctx context.Context, v *Verifier, load func(context.Context) (string, error), ttl time.Duration, onErr func(error)) (*SessionKeys, error) {
	if v == nil {
		return nil, errNoVerifier
	}
	k := &SessionKeys{v: v, secret: reloaded{load: load, conv: sessionSecret, ttl: ttl, onErr: onErr}}
	if err := k.secret.start(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Key returns the key for purpose ("session" signs cookies, "csrf"
// derives CSRF tokens) under the current secret and token.
func (k *SessionKeys) Key(purpose string) []byte {
	m := hmac.New(sha256.New, k.secret.current())
	m.Write([]byte("genway console " + purpose + "\x00"))
	m.Write(k.v.r.current())
	return m.Sum(nil)
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
