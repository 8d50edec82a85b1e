package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sessions are stateless signed cookies, so that they work the same in
// genway serve and across Lambda containers: the cookie holds an expiry
// and a random session id, signed with a key derived from the operator
// token (a new token signs everyone out). The CSRF token of a session is
// another signature of its id; forms carry it in a hidden field, scripts
// in the X-CSRF-Token header.

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

// sessions makes and checks session cookies and CSRF tokens. secret
// derives the signing keys from the operator token (purpose "session"
// signs cookies, "csrf" derives CSRF tokens); it is asked each time, so a
// rotated token signs everyone out.
type sessions struct {
	secret func(purpose string) []byte
	now    func() time.Time
}

func (s *sessions) sign(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue sets a new session cookie on w; secure marks it Secure (https).
func (s *sessions) issue(w http.ResponseWriter, secure bool) session {
	var r [18]byte
	rand.Read(r[:])
	id := base64.RawURLEncoding.EncodeToString(r[:])
	exp := s.now().Add(sessionTTL)
	payload := strconv.FormatInt(exp.Unix(), 10) + "." + id
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: payload + "." + s.sign(s.secret("session"), payload), Path: "/console/",
		Expires: exp, MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
	return session{ID: id, Expires: exp, CSRF: s.sign(s.secret("csrf"), id)}
}

// clear removes the session cookie.
func (s *sessions) clear(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// get returns the session of r's cookie, if it is valid and not expired.
func (s *sessions) get(r *http.Request) (session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return session{}, false
	}
	payload, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.sign(s.secret("session"), payload))) {
		return session{}, false
	}
	expS, id, ok := strings.Cut(payload, ".")
	exp, err := strconv.ParseInt(expS, 10, 64)
	if !ok || err != nil || s.now().Unix() >= exp {
		return session{}, false
	}
	return session{ID: id, Expires: time.Unix(exp, 0), CSRF: s.sign(s.secret("csrf"), id)}, true
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
