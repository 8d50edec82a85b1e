// Package console is the operator console: server-rendered pages
// (html/template, embedded with go:embed, a little plain JavaScript, no
// build step and nothing from a CDN) where an operator signs in with the
// operator token and manages models, accounts, keys and credits, watches
// jobs, requests (their records, each charge explained) and usage, and
// tries models. It is served at /console/ by genway
// serve and by the AWS admin function alike.
//
// Security: sessions are HttpOnly, SameSite=Strict cookies (Secure on
// https) that expire, signed with keys of their own (admin.SessionKeys,
// never derived from what is kept of the operator token) and live only
// while the store has them (signing out ends one on the server); every
// state-changing request carries a CSRF token; every page has a strict
// Content-Security-Policy (no inline script or style); the token is
// compared in constant time and sign-in attempts are rate limited; everything user-supplied is rendered through
// html/template's escaping; after sign-in no secret is in a URL; every
// action is in the audit log (admin.Service).
package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is what the console needs.
type Config struct {
	Operator admin.AuditingOperator
	Verifier *admin.Verifier // checks the operator token at sign-in
	// SessionKeys signs sessions and CSRF tokens; Sessions keeps the live
	// sessions. Both are needed.
	SessionKeys *admin.SessionKeys
	Sessions    admin.SessionStore
	Catalog     *catalog.Catalog
	Configured  func(provider string) bool // nil: every provider
	// Jobs lists, reads and cancels jobs for the jobs pages; nil: made
	// from JobService, and without that the pages say there are no jobs
	// here.
	Jobs Jobs
	// JobService creates the playground's jobs and makes output links;
	// nil: the playground has no job form.
	JobService *jobs.Service
	// Chat runs the playground's chat; nil: the playground has no chat.
	Chat *chat.Gateway // the playground's chat runs through httpapi.ChatCompletions on it
	// Images makes the playground's images (through
	// httpapi.GenerateImages on it); nil: the playground has no image
	// form.
	Images *images.Service
	// Speech speaks the playground's speech (through httpapi.Speech on
	// it, streamed); nil: the playground has no speech form.
	Speech *speech.Service
	// Router is this process's router: the models page shows each
	// model's breaker and recent error rate; nil: not shown.
	Router *route.Router
	// Webhooks shows a job's webhook deliveries (with a resend) and an
	// account's webhook URL and secret rotation; nil: not shown.
	Webhooks *webhooks.Service
	// Extra are more pages and endpoints, each under /console/; they are
	// served behind the same sign-in, CSRF check and headers.
	Extra []Route
	Log   *slog.Logger
	Now   func() time.Time // nil: time.Now
}

// Route is one console route: Method and Pattern as net/http's ServeMux
// takes them (the pattern under /console/), and the handler, which gets
// the page context.
type Route struct {
	Method  string
	Pattern string
	Handle  func(p *Page, w http.ResponseWriter, r *http.Request) error
}

// Page is what a handler and its template get: the session's CSRF token,
// the current section, a flash message, and the handler's own data.
type Page struct {
	CSRF    string
	Section string
	Title   string
	Flash   string
	Error   string
	Data    any
	// Scripts are the page's own scripts in static/ (after app.js).
	Scripts []string
	c       *Console
	ses     session // the signed-in operator's
}

// Console serves the console. Make it with New.
type Console struct {
	cfg      Config
	sess     *sessions
	signins  *limiter
	pages    map[string]*template.Template
	log      *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
	configed func(string) bool
	chat     http.Handler // the API's chat completions on cfg.Chat; nil without it
	images   http.Handler // the API's image generations on cfg.Images; nil without it
	speech   http.Handler // the API's speech on cfg.Speech; nil without it
}

// New returns the console for cfg.
func New(cfg Config) (*Console, error) {
	c := &Console{cfg: cfg, log: cfg.Log, now: cfg.Now, configed: cfg.Configured}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.configed == nil {
		c.configed = func(string) bool { return true }
	}
	if cfg.Verifier == nil || cfg.Operator == nil || cfg.SessionKeys == nil || cfg.Sessions == nil {
		return nil, errors.New("console: an operator, a token verifier, session keys and a session store are needed")
	}
	if c.cfg.Jobs == nil && cfg.JobService != nil {
		c.cfg.Jobs = ServiceJobs(cfg.JobService)
	}
	c.sess = &sessions{keys: cfg.SessionKeys, store: cfg.Sessions, now: c.now}
	c.signins = &limiter{burst: 10, per: 6 * time.Second, now: c.now, seen: map[string]*bucket{}}
	if err := c.parse(); err != nil {
		return nil, err
	}
	if cfg.Chat != nil {
		c.chat = httpapi.ChatCompletions(cfg.Chat, c.log)
	}
	if cfg.Images != nil {
		c.images = httpapi.GenerateImages(cfg.Images, c.log)
	}
	if cfg.Speech != nil {
		c.speech = httpapi.Speech(cfg.Speech, c.log)
	}
	c.routes()
	return c, nil
}

// funcs are the template helpers.
var funcs = template.FuncMap{
	"time": func(unix int64) string {
		if unix == 0 {
			return ""
		}
		return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04:05")
	},
	"join": strings.Join,
	// jobType reports whether a ledger entry's type is a job's (or not
	// recorded, as in entries from before types were), whose page the
	// jobs pages have; an image or speech request has none.
	"jobType": func(t string) bool { return t == "" || isJobType(t) },
	// expired reports whether a key's expiry (Unix seconds, 0: never) has
	// passed.
	"expired": func(unix int64) bool { return unix != 0 && time.Now().Unix() >= unix },
	// static is the versioned URL of a file in static/: it changes when
	// any static file does, so browsers may cache them for good.
	"static": func(name string) string { return "/console/static/" + name + "?v=" + staticVersion },
}

// staticVersion is a hash of the static files, for their URLs.
var staticVersion = func() string {
	h := sha256.New()
	fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		h.Write([]byte(p + "\x00"))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// parse parses each page with the layout.
func (c *Console) parse() error {
	c.pages = map[string]*template.Template{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console template %s: %w", n, err)
		}
		c.pages[base] = t
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script or style but our own files; nothing may frame us; media
	// and images may come from the storage links (S3 presigned URLs are
	// https); streamed speech plays from a blob: (a MediaSource).
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "+
		"media-src 'self' https: blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	switch {
	case !strings.HasPrefix(r.URL.Path, "/console/static/"):
		h.Set("Cache-Control", "no-store")
	case r.URL.Query().Get("v") == staticVersion:
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	default:
		h.Set("Cache-Control", "no-cache")
	}
	c.mux.ServeHTTP(w, r)
}

// secure reports whether r came over https (directly or via a proxy
// that says so, like API Gateway).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// routes mounts the console's routes.
func (c *Console) routes() {
	c.mux = http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/signin", c.signinPage)
	c.mux.HandleFunc("POST /console/signin", c.signin)
	c.mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/models", http.StatusSeeOther)
	})
	for _, rt := range append(append(append(append(c.coreRoutes(), c.liveRoutes()...), c.webhookRoutes()...), c.requestRoutes()...), c.cfg.Extra...) {
		c.mux.Handle(rt.Method+" "+rt.Pattern, c.authed(rt))
	}
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		if _, ok, err := c.sess.get(r); !ok {
			if err != nil {
				c.sessionsDown(w, r, err)
				return
			}
			http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
			return
		}
		c.render(w, r, http.StatusNotFound, "error", &Page{Title: "Not found", Error: "There is no such page."})
	})
}

// authed runs rt for a signed-in operator: others are sent to sign in
// (pages) or get 401 (scripts); a POST without the session's CSRF token
// is a 403. The request context names the actor for the audit log.
func (c *Console) authed(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ses, ok, err := c.sess.get(r)
		if err != nil {
			c.sessionsDown(w, r, err)
			return
		}
		if !ok {
			if r.Method != http.MethodGet || r.Header.Get("Accept") == "application/json" {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !c.sess.checkCSRF(r, ses) {
			c.log.WarnContext(r.Context(), "console: request without a valid CSRF token", "path", r.URL.Path)
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		r = r.WithContext(admin.WithActor(r.Context(), "console:"+ses.ID[:8]))
		p := &Page{CSRF: ses.CSRF, c: c, ses: ses}
		if err := rt.Handle(p, w, r); err != nil {
			c.fail(w, r, p, err)
		}
	})
}

// sessionsDown answers a request whose session could not be read from
// the store: 503, logged (the operator may retry; nobody is let in).
func (c *Console) sessionsDown(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console: session store unavailable", "path", r.URL.Path, "err", err)
	c.render(w, r, http.StatusServiceUnavailable, "error", &Page{Title: "Unavailable", Error: "The session store cannot be read; try again shortly."})
}

// fail renders err on the error page with the status and message the API
// would answer (httpapi.ErrorStatus); a server fault is logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, p *Page, err error) {
	status, msg := httpapi.ErrorStatus(err, httpapi.RequestID(r.Context()))
	if status >= http.StatusInternalServerError {
		c.log.ErrorContext(r.Context(), "console: request failed", "path", r.URL.Path, "err", err)
	}
	p.Title, p.Error = http.StatusText(status), msg
	c.render(w, r, status, "error", p)
}

// render writes page name with p.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *Page) {
	t := c.pages[name]
	if t == nil {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout.html", p); err != nil {
		c.log.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// Render writes page name with p (for Extra routes).
func (p *Page) Render(w http.ResponseWriter, r *http.Request, name string) error {
	p.c.render(w, r, http.StatusOK, name, p)
	return nil
}

// signinPage shows the sign-in form; with ?token= (the link genway serve
// prints) it signs in at once and redirects, so the token leaves the URL.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		c.trySignin(w, r, tok)
		return
	}
	if _, ok, _ := c.sess.get(r); ok {
		http.Redirect(w, r, "/console/models", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", &Page{Title: "Sign in"})
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	c.trySignin(w, r, r.PostFormValue("token"))
}

// trySignin checks tok, rate-limited per client address.
func (c *Console) trySignin(w http.ResponseWriter, r *http.Request, tok string) {
	if !c.signins.allow(clientAddr(r)) {
		w.Header().Set("Retry-After", "60")
		c.render(w, r, http.StatusTooManyRequests, "signin", &Page{Title: "Sign in", Error: "Too many sign-in attempts; wait a minute."})
		return
	}
	if !c.cfg.Verifier.Verify(strings.TrimSpace(tok)) {
		c.log.WarnContext(r.Context(), "console: sign-in refused", "addr", clientAddr(r))
		c.render(w, r, http.StatusUnauthorized, "signin", &Page{Title: "Sign in", Error: "That is not the operator token."})
		return
	}
	ses, err := c.sess.issue(r.Context(), w, secure(r))
	if err != nil {
		c.sessionsDown(w, r, err)
		return
	}
	ctx := admin.WithActor(context.WithoutCancel(r.Context()), "console:"+ses.ID[:8])
	c.auditSignin(ctx)
	http.Redirect(w, r, "/console/models", http.StatusSeeOther)
}

// auditSignin records a sign-in.
func (c *Console) auditSignin(ctx context.Context) {
	c.cfg.Operator.Record(ctx, "console.signin", "console", "")
}

// clientAddr is the client's address, from the connection (on Lambda,
// the API Gateway event's source IP): never a header a client can set.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
