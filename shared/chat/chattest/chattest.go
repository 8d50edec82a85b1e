// Package chattest holds what the tests of every chat provider share: the
// check of a provider's routing table, which says, for each way an
// upstream can fail (an HTTP status, an in-band stream error, a dropped
// stream), which route.Failure the provider's *chat.UpstreamError must
// classify as and what the routing policy then does.
package chattest

import (
	"cmp"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
)

// Routing is one row's expectation: the failure (Class, Status,
// RetryAfter, Reason; Reason only for a failure without a status) and the
// policy's Action for it.
type Routing struct {
	Class      route.Class
	Status     int
	RetryAfter time.Duration
	Reason     string
	Action     route.Action
}

// State is where CheckRouting decides: the first attempt on a target, with
// another target left and a minute of budget, no other key free.
var State = route.State{More: true, Left: time.Minute}

// CheckRouting fails t unless err is (or wraps) an *chat.UpstreamError
// whose Failure is want's and whose action by route.DefaultPolicy in
// State is want.Action. It returns the error.
func CheckRouting(t testing.TB, err error, want Routing) *chat.UpstreamError {
	t.Helper()
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("error = %v (%T); want a *chat.UpstreamError", err, err)
	}
	f := ue.Failure()
	if f.Class != want.Class || f.Status != want.Status || f.RetryAfter != want.RetryAfter || (want.Status == 0 && f.Reason != want.Reason) {
		t.Errorf("Failure() of %v = %+v; want class %v, status %d, retry after %v, reason %q",
			err, f, want.Class, want.Status, want.RetryAfter, want.Reason)
	}
	if act, _ := route.DefaultPolicy.Decide(f, State); act != want.Action {
		t.Errorf("Decide(%+v) = %v; want %v", f, act, want.Action)
	}
	return ue
}

// CutServer starts a loopback server that answers every request 200 with
// contentType and body, then closes the connection without ending the
// chunked body, as a dropped upstream connection does: the client's read
// fails with io.ErrUnexpectedEOF. It returns the server's URL; the server
// stops when t ends.
func CutServer(t testing.TB, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(body))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// ClosedURL returns an http URL of a loopback port nobody listens on: a
// call to it is refused.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Answer is how an upstream answers every request, for a routing table:
// Status (200 if 0), Header, ContentType and Body; or, with Cut, a 200
// whose Body is cut by a dropped connection (CutServer); or, with Refused,
// no server at all (ClosedURL).
type Answer struct {
	Status       int
	Header       http.Header
	ContentType  string
	Body         string
	Cut, Refused bool
}

// URL starts a loopback server giving a (stopped when t ends) and
// returns its URL.
func (a Answer) URL(t testing.TB) string {
	t.Helper()
	switch {
	case a.Refused:
		return ClosedURL(t)
	case a.Cut:
		return CutServer(t, a.ContentType, a.Body)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range a.Header {
			w.Header()[k] = v
		}
		if a.ContentType != "" {
			w.Header().Set("Content-Type", a.ContentType)
		}
		w.WriteHeader(cmp.Or(a.Status, http.StatusOK))
		_, _ = w.Write([]byte(a.Body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
