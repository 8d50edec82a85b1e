package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/admin"
)

// Sessions are signed cookies backed by the store: the cookie holds an
// expiry and a random session id, signed with a key of admin.SessionKeys
// (a random secret of its own, bound to the operator token: nothing
// stored with the token signs a session, and a new token or secret signs
// everyone out), and the store (admin.SessionStore) keeps the hash of each
// live session's id, so that signing out ends the session on the server,
// in genway serve and across Lambda containers alike. The CSRF token of a
// session is another signature of its id; forms carry it in a hidden
// field, scripts in the X-CSRF-Token header.

// cookieName is the session cookie.
const cookieName = "genway_console"

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 12 * time.Hour

// session is a signed-in operator.
type session struct {
	ID      string
	Expires time.Time
	CSRF    string
}

// sessions makes, checks and ends sessions. keys signs them (purpose
// "session" signs cookies, "csrf" derives CSRF tokens; asked each time,
// so a rotation signs everyone out); store keeps the live ones.
type sessions struct {
	keys  *admin.SessionKeys
	store admin.SessionStore
	now   func() time.Time
}

func (s *sessions) sign(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// storeID is what the store keeps of session id: its SHA-256, so that
// the store's contents are no cookies.
func storeID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// issue records a new session and sets its cookie on w; secure marks the
// cookie Secure (https).
func (s *sessions) issue(ctx context.Context, w http.ResponseWriter, secure bool) (session, error) {
	var r [18]byte
	rand.Read(r[:])
	id := base64.RawURLEncoding.EncodeToString(r[:])
	exp := s.now().Add(sessionTTL)
	if err := s.store.AddSession(ctx, storeID(id), exp.Unix()); err != nil {
		return session{}, err
	}
	payload := strconv.FormatInt(exp.Unix(), 10) + "." + id
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: payload + "." + s.sign(s.keys.Key("session"), payload), Path: "/console/",
		Expires: exp, MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
	return session{ID: id, Expires: exp, CSRF: s.sign(s.keys.Key("csrf"), id)}, nil
}

// clear removes the session cookie.
func (s *sessions) clear(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// get returns the session of r's cookie, if its signature is valid, it
// has not expired and the store has it live; an error is the store's.
func (s *sessions) get(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false, nil
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return session{}, false, nil
	}
	payload, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.sign(s.keys.Key("session"), payload))) {
		return session{}, false, nil
	}
	expS, id, ok := strings.Cut(payload, ".")
	exp, err := strconv.ParseInt(expS, 10, 64)
	now := s.now().Unix()
	if !ok || err != nil || now >= exp || id == "" {
		return session{}, false, nil
	}
	live, err := s.store.SessionLive(r.Context(), storeID(id), now)
	if err != nil || !live {
		return session{}, false, err
	}
	return session{ID: id, Expires: time.Unix(exp, 0), CSRF: s.sign(s.keys.Key("csrf"), id)}, true, nil
}

// end ends ses on the server: its cookie is refused from then on,
// wherever it is replayed.
func (s *sessions) end(ctx context.Context, ses session) error {
	return s.store.EndSession(ctx, storeID(ses.ID))
}

// checkCSRF reports whether r carries ses's CSRF token (form field csrf
// or header X-CSRF-Token).
func (s *sessions) checkCSRF(r *http.Request, ses session) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	return tok != "" && hmac.Equal([]byte(tok), []byte(ses.CSRF))
}

// limiter bounds sign-in attempts per client address: at most burst
// attempts, refilled one every per. In memory: per process (per Lambda
// container), which with the token's 260 bits makes guessing hopeless
// anyway; it keeps a flood off the hash.
type limiter struct {
	mu    sync.Mutex
	burst int
	per   time.Duration
	now   func() time.Time
	seen  map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (l *limiter) allow(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.seen) > 10000 { // bounded memory: forget everyone
		l.seen = map[string]*bucket{}
	}
	b := l.seen[addr]
	if b == nil {
		b = &bucket{tokens: float64(l.burst), at: now}
		l.seen[addr] = b
	}
	b.tokens = min(float64(l.burst), b.tokens+now.Sub(b.at).Seconds()/l.per.Seconds())
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
