package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

type requestIDKey struct{}

// RequestID returns the request id that WithRequestID put in ctx.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ContextWithRequestID returns ctx carrying id (the Lambda adapter uses the
// API Gateway request id).
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// WithRequestID gives every request an id, in its context and in the
// X-Request-Id response header. An id already in the context (set by the
// Lambda adapter) is kept; a client's own X-Request-Id is not trusted.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := RequestID(r.Context())
		if id == "" {
			var buf [32]byte
			b, err := auth.AppendRandom(append(buf[:0], "req_"...), 24)
			id = string(b)
			if err != nil {
				id = "req_unavailable"
			}
			r = r.WithContext(ContextWithRequestID(r.Context(), id))
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

// Limiter decides whether the principal may start another request, and
// learns when it ends. Admit returns a RateLimited *apierr.Error (with
// RetryAfter) when it may not; after it returns nil, Done(p) is called
// once, when the request ends.
type Limiter interface {
	Admit(ctx context.Context, p auth.Principal) error
	Done(p auth.Principal)
}

// Authenticated lets only requests with a valid key through, with the
// principal in the context, admitted by lim for as long as they run; lim
// may be nil (no rate limits). The key is the Authorization header's
// bearer token, or the x-api-key header's value, as Anthropic's clients
// send it; when both are there, x-api-key is the one, as the Messages
// API takes it.
func Authenticated(a *auth.Authenticator, lim Limiter, log *slog.Logger, next http.Handler) http.Handler {
	refusals := &sampler{every: time.Second}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if k := r.Header.Get("X-Api-Key"); k != "" {
			header = "Bearer " + k
		}
		p, err := a.Authenticate(r.Context(), header)
		if err != nil {
			if r.ContentLength != 0 {
				// Answer at once and close, rather than read (drain) a
				// body that nobody authenticated sent.
				w.Header().Set("Connection", "close")
			}
			// Anyone can send these, as fast as they like: at most one log
			// line a second, counting the ones left out.
			if ok, dropped := refusals.allow(time.Now()); ok && log != nil {
				log.InfoContext(r.Context(), "request refused: authentication", "request_id", RequestID(r.Context()),
					"err", err, "refusals_not_logged", dropped)
			}
			writeError(w, r, nil, err)
			return
		}
		if lim != nil {
			if err := lim.Admit(r.Context(), p); err != nil {
				// Its body unread: net/http drains a small one, and
				// closes the connection on a large one.
				writeError(w, r, log, err)
				return
			}
			defer lim.Done(p)
		}
		notePrincipal(r.Context(), p.Account, p.KeyID)
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// account returns the calling account; routes run behind Authenticated.
func account(r *http.Request) string {
	p, _ := auth.FromContext(r.Context())
	return p.Account
}

// Route is one API route: a method and pattern ("/v1/jobs/{id}") and its handler.
type Route struct {
	Method  string
	Pattern string
	Handler http.Handler
}

// NewMux returns a handler serving routes, with 404 route_not_found for
// unknown paths and 405 method_not_allowed (with Allow) for known paths
// with another method, all in the OpenAI envelope; with a request id for
// each request, and with log, one access log line each (see accesslog.go).
func NewMux(log *slog.Logger, routes ...Route) http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Pattern, rt.Handler)
		allowed[rt.Pattern] = append(allowed[rt.Pattern], rt.Method)
	}
	for pattern, methods := range allowed {
		allow := strings.Join(methods, ", ")
		mux.Handle(pattern, serve(log, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", allow)
			return &apierr.Error{Kind: apierr.MethodNotAllowed, Code: "method_not_allowed",
				Message: r.Method + " is not allowed here; use " + allow + "."}
		}))
	}
	mux.Handle("/", serve(log, func(w http.ResponseWriter, r *http.Request) error {
		return &apierr.Error{Kind: apierr.NotFound, Code: "route_not_found",
			Message: "No route " + r.Method + " " + r.URL.Path + "."}
	}))
	return WithRequestID(accessLog(log, mux))
}

// DefaultBodyTimeout is how long a client may take to send a request body
// (BodyTimeout).
const DefaultBodyTimeout = 30 * time.Second

// BodyTimeout bounds the time a request's body may take to arrive: a
// client that sends a body slowly, or announces more bytes than it sends,
// gets its connection's read deadline at d after the request started. Once
// the body has been read to its end the deadline is lifted, so a long
// streamed answer (which reads nothing more) is not cut. Where the
// ResponseWriter cannot set deadlines (the Lambda adapter) it does nothing.
func BodyTimeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r) // not supported here
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline once the body is read.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// sampler lets one event through per period and counts the rest.
type sampler struct {
	every   time.Duration
	mu      sync.Mutex
	next    time.Time
	dropped int
}

// allow reports whether the event at now may be logged, and how many were
// left out since the last one that was.
func (s *sampler) allow(now time.Time) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.next) {
		s.dropped++
		return false, 0
	}
	s.next = now.Add(s.every)
	d := s.dropped
	s.dropped = 0
	return true, d
}
