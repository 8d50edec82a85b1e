package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// watchdog bounds every wait on a channel, so that a bug hangs no test for
// long. It is a safety net, never an assertion about speed.
const watchdog = 30 * time.Second

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(watchdog):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// newServer starts an httptest server (TLS if tlsOn) running h and counts
// the connections it accepts.
func newServer(t *testing.T, tlsOn bool, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tlsOn {
		// The bad-roots case makes the server log a handshake error.
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

// newTransport returns New(cfg), closing its idle connections when the
// test ends (before the servers, which were started first).
func newTransport(t *testing.T, cfg Config) *Transport {
	t.Helper()
	tr := New(cfg)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// rawServer is a TCP server for protocol edge cases: each accepted
// connection is handed to handle with its index, then closed.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newRawServer(t *testing.T, handle func(i int, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen = %v", err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for i := range 1000 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(i, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) URL() string { return "http://" + s.ln.Addr().String() }

// serve answers up to max requests on c with the raw response resp.
func serve(c net.Conn, resp string, max int) {
	br := bufio.NewReader(c)
	for range max {
		if _, err := readRequest(br); err != nil {
			return
		}
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
	}
}

// readRequest reads one request and its whole body.
func readRequest(br *bufio.Reader) ([]byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(req.Body)
}

// roundTrip sends a request with an optional body and returns the whole
// response body.
func roundTrip(rt http.RoundTripper, method, url, body string) (*http.Response, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// get is roundTrip for a GET that must succeed.
func get(t *testing.T, rt http.RoundTripper, url string) string {
	t.Helper()
	_, body, err := roundTrip(rt, http.MethodGet, url, "")
	if err != nil {
		t.Fatalf("RoundTrip(GET %s) error %v", url, err)
	}
	return body
}

// idleLen returns the number of pooled idle connections.
func (t *Transport) idleLen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.idle {
		n += len(s)
	}
	return n
}

// newestIdle returns, without taking it, the most recently pooled
// connection for key, or nil.
func (t *Transport) newestIdle(key connKey) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.idle[key]
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

// waitReadable blocks (in the netpoller, not by sleeping) until c's socket
// has data or EOF to read, without consuming it.
func waitReadable(t *testing.T, c *conn) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(watchdog))
	defer c.nc.SetReadDeadline(time.Time{})
	var buf [1]byte
	err := c.rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return !errors.Is(err, syscall.EAGAIN)
	})
	if err != nil {
		t.Fatalf("waiting for the socket to be readable: %v", err)
	}
}

func TestBodies(t *testing.T) {
	big := strings.Repeat("0123456789", 2000)
	mux := http.NewServeMux()
	mux.HandleFunc("/length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		io.WriteString(w, big)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, "part %d;", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/zero", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // all before writing: HTTP/1 servers need that
		w.Write(b)
	})
	for _, tt := range []struct {
		name, method, path, body string
		wantStatus               int
		want                     string
	}{
		{"content-length", http.MethodGet, "/length", "", 200, big},
		{"chunked", http.MethodGet, "/chunked", "", 200, "part 0;part 1;part 2;part 3;part 4;"},
		{"204", http.MethodGet, "/empty", "", 204, ""},
		{"content-length 0", http.MethodGet, "/zero", "", 200, ""},
		{"HEAD", http.MethodHead, "/length", "", 200, ""},
		{"POST echo", http.MethodPost, "/echo", big, 200, big},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, conns := newServer(t, false, mux)
			tr := newTransport(t, Config{})
			for i := range 3 {
				resp, got, err := roundTrip(tr, tt.method, srv.URL+tt.path, tt.body)
				if err != nil {
					t.Fatalf("request %d: RoundTrip(%s %s) error %v", i, tt.method, tt.path, err)
				}
				if resp.StatusCode != tt.wantStatus || got != tt.want {
					t.Errorf("request %d: RoundTrip(%s %s) = %d %.40q; want %d %.40q", i, tt.method, tt.path, resp.StatusCode, got, tt.wantStatus, tt.want)
				}
			}
			if got := conns.Load(); got != 1 {
				t.Errorf("connections accepted = %d; want 1 (reused)", got)
			}
		})
	}
}

// TestBodylessReleasedAtOnce checks that a response without a body frees
// its connection even if the caller never touches the body.
func TestBodylessReleasedAtOnce(t *testing.T) {
	srv, conns := newServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	tr := newTransport(t, Config{})
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: RoundTrip error %v", i, err)
		}
		if resp.Body != http.NoBody {
			t.Errorf("request %d: Body = %T; want http.NoBody", i, resp.Body)
		}
		if got := tr.idleLen(); got != 1 {
			t.Errorf("request %d: idle connections before Body.Close = %d; want 1", i, got)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("connections accepted = %d; want 1", got)
	}
}

func TestNotReused(t *testing.T) {
	for _, tt := range []struct {
		name      string
		resp      string
		reqClose  bool
		wantConns int32
	}{
		{"HTTP/1.1 keep-alive", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, 1},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, 2},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", false, 2},
		{"request Close", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(_ int, c net.Conn) { serve(c, tt.resp, 10) })
			tr := newTransport(t, Config{})
			for i := range 2 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL(), nil)
				req.Close = tt.reqClose
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: RoundTrip error %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					t.Fatalf("request %d: body = %q, %v; want \"ok\", nil", i, b, err)
				}
			}
			if got := srv.accepted.Load(); got != tt.wantConns {
				t.Errorf("connections accepted = %d; want %d", got, tt.wantConns)
			}
		})
	}
}

// TestUnboundedBody reads a body delimited by the server closing.
func TestUnboundedBody(t *testing.T) {
	srv := newRawServer(t, func(_ int, c net.Conn) {
		serve(c, "HTTP/1.1 200 OK\r\n\r\nuntil close", 1)
	})
	tr := newTransport(t, Config{})
	for i := range 2 {
		if got := get(t, tr, srv.URL()); got != "until close" {
			t.Errorf("request %d: body = %q; want %q", i, got, "until close")
		}
	}
	if got := srv.accepted.Load(); got != 2 {
		t.Errorf("connections accepted = %d; want 2", got)
	}
}

// TestStaleIdleConn: the server closes the idle connection; the next
// request must notice before writing (the stale check) and dial anew.
func TestStaleIdleConn(t *testing.T) {
	closed := make(chan struct{})
	afterClose := make(chan string, 1)
	srv := newRawServer(t, func(i int, c net.Conn) {
		if i > 0 {
			serve(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew", 10)
			return
		}
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			afterClose <- "read request: " + err.Error()
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nold")
		c.(*net.TCPConn).CloseWrite() // FIN to the client, but keep reading
		close(closed)
		n, err := br.Read(make([]byte, 1))
		afterClose <- fmt.Sprintf("%d %v", n, err)
	})
	tr := newTransport(t, Config{})
	if got := get(t, tr, srv.URL()); got != "old" {
		t.Fatalf("first body = %q; want %q", got, "old")
	}
	recv(t, closed, "the server to close the connection")
	key, _ := keyFor(mustParse(t, srv.URL()))
	c := tr.newestIdle(key)
	if c == nil {
		t.Fatalf("no idle connection after the first request")
	}
	waitReadable(t, c) // the FIN has arrived
	if got := get(t, tr, srv.URL()); got != "new" {
		t.Errorf("second body = %q; want %q", got, "new")
	}
	// The stale connection was closed without the request on it.
	if got := recv(t, afterClose, "the server's read on the closed connection"); got != "0 EOF" {
		t.Errorf("server read after close = %q; want %q", got, "0 EOF")
	}
	if got := srv.accepted.Load(); got != 2 {
		t.Errorf("connections accepted = %d; want 2", got)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q) = %v", s, err)
	}
	return u
}

// TestRetryRace: the server reads the second request on a reused
// connection and closes without answering; the transport must send it once
// more, identical, on a new connection.
func TestRetryRace(t *testing.T) {
	const payload = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, tt := range []struct {
		name      string
		getBody   bool // the request can be replayed
		wantErr   bool
		wantConns int32
	}{
		{"replayable", true, false, 2},
		{"no GetBody", false, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bodies := make(chan string, 4)
			srv := newRawServer(t, func(i int, c net.Conn) {
				br := bufio.NewReader(c)
				if i > 0 {
					b, err := readRequest(br)
					if err != nil {
						return
					}
					bodies <- string(b)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
					return
				}
				if _, err := readRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				b, err := readRequest(br)
				if err != nil {
					return
				}
				bodies <- string(b) // then close without answering
			})
			tr := newTransport(t, Config{})
			if got := get(t, tr, srv.URL()); got != "ok" {
				t.Fatalf("first body = %q; want \"ok\"", got)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL(), strings.NewReader(payload))
			if !tt.getBody {
				req.GetBody = nil
			}
			resp, err := tr.RoundTrip(req)
			if tt.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("RoundTrip(POST) error nil; want an error")
				}
			} else {
				if err != nil {
					t.Fatalf("RoundTrip(POST) error %v; want nil (retried)", err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "done" {
					t.Errorf("RoundTrip(POST) body = %q; want \"done\"", b)
				}
			}
			if got := recv(t, bodies, "the request on the reused connection"); got != payload {
				t.Errorf("first sending's body = %q; want %q", got, payload)
			}
			if !tt.wantErr {
				if got := recv(t, bodies, "the retried request"); got != payload {
					t.Errorf("retried body = %q; want %q", got, payload)
				}
			}
			if got := srv.accepted.Load(); got != tt.wantConns {
				t.Errorf("connections accepted = %d; want %d", got, tt.wantConns)
			}
		})
	}
}

// TestNoRetryOnFreshConn: a new connection closed without an answer is an
// error, not a retry.
func TestNoRetryOnFreshConn(t *testing.T) {
	var requests atomic.Int32
	srv := newRawServer(t, func(_ int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err == nil {
			requests.Add(1)
		}
	})
	tr := newTransport(t, Config{})
	_, _, err := roundTrip(tr, http.MethodPost, srv.URL(), "body")
	if err == nil {
		t.Fatalf("RoundTrip(POST) error nil; want an error")
	}
	// A retry would happen inside RoundTrip, and the server counts a
	// request before it closes, so the count is final here.
	if got := requests.Load(); got != 1 {
		t.Errorf("requests seen by the server = %d; want 1", got)
	}
}

// blockingHandler answers "ok" at /ok. Elsewhere it sends "first" (at
// /stream) or nothing, signals started, then waits for the request's context
// (the connection closing) or quit, and reports the context's end on done.
func blockingHandler(started, done chan<- struct{}, quit <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			io.WriteString(w, "ok")
			return
		}
		if r.URL.Path == "/stream" {
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		}
		started <- struct{}{}
		select {
		case <-r.Context().Done():
			done <- struct{}{}
		case <-quit:
		}
	}
}

func TestCancelAwaitingHeaders(t *testing.T) {
	for _, tt := range []struct {
		name string
		want error
	}{
		{"cancel", context.Canceled},
		{"deadline", context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			started, done, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
			srv, _ := newServer(t, false, blockingHandler(started, done, quit))
			t.Cleanup(func() { close(quit) })
			tr := newTransport(t, Config{})

			ctx, cancel := context.WithCancel(context.Background())
			if tt.want == context.DeadlineExceeded {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			errc := make(chan error, 1)
			go func() {
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			recv(t, started, "the handler to start")
			if tt.want == context.Canceled {
				cancel()
			}
			err := recv(t, errc, "RoundTrip to return")
			if !errors.Is(err, tt.want) {
				t.Errorf("RoundTrip error = %v; want errors.Is %v", err, tt.want)
			}
			recv(t, done, "the server to see the connection close")
			if got := tr.idleLen(); got != 0 {
				t.Errorf("idle connections = %d; want 0", got)
			}
		})
	}
}

func TestCancelMidBody(t *testing.T) {
	started, done, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	srv, conns := newServer(t, false, blockingHandler(started, done, quit))
	t.Cleanup(func() { close(quit) })
	tr := newTransport(t, Config{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/stream", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip error %v", err)
	}
	defer resp.Body.Close()
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
		t.Fatalf("first chunk = %q, %v; want \"first\", nil", first, err)
	}
	recv(t, started, "the handler to block")
	cancel()
	_, err = resp.Body.Read(make([]byte, 10))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Body.Read after cancel error = %v; want errors.Is context.Canceled", err)
	}
	if _, err2 := resp.Body.Read(make([]byte, 10)); err2 != err {
		t.Errorf("second Body.Read error = %v; want the same %v", err2, err)
	}
	recv(t, done, "the server to see the connection close")
	if got := get(t, tr, srv.URL+"/ok"); got != "ok" {
		t.Errorf("next body = %q; want \"ok\"", got)
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("connections accepted = %d; want 2 (the cancelled one not reused)", got)
	}
}

func TestBodyCloseEarly(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	for _, tt := range []struct{ name, path string }{
		{"streaming", "/stream"},
		{"content-length", "/big"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			started, done, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
			block := blockingHandler(started, done, quit)
			srv, conns := newServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/big" {
					w.Header().Set("Content-Length", fmt.Sprint(len(big)))
					io.WriteString(w, big) // fails once the client closes
					done <- struct{}{}
					return
				}
				block(w, r)
			}))
			t.Cleanup(func() { close(quit) })
			tr := newTransport(t, Config{})

			req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip error %v", err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 5)); err != nil {
				t.Fatalf("reading 5 bytes: %v", err)
			}
			for i := range 2 {
				if err := resp.Body.Close(); err != nil {
					t.Errorf("Close #%d = %v; want nil", i+1, err)
				}
			}
			if n, err := resp.Body.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Errorf("Read after Close = %d, %v; want 0, an error", n, err)
			}
			recv(t, done, "the handler to finish")
			if got := get(t, tr, srv.URL+"/ok"); got != "ok" {
				t.Errorf("next body = %q; want \"ok\"", got)
			}
			if got := conns.Load(); got != 2 {
				t.Errorf("connections accepted = %d; want 2 (the closed one not reused)", got)
			}
		})
	}
}

// TestCloseDuringRead closes the body from another goroutine while a Read
// is blocked, as a streaming caller aborting does.
func TestCloseDuringRead(t *testing.T) {
	started, done, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	srv, _ := newServer(t, false, blockingHandler(started, done, quit))
	t.Cleanup(func() { close(quit) })
	tr := newTransport(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/stream", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip error %v", err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 5)); err != nil {
		t.Fatalf("reading 5 bytes: %v", err)
	}
	recv(t, started, "the handler to block")
	errc := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 10))
		errc <- err
	}()
	resp.Body.Close()
	if err := recv(t, errc, "the blocked Read to return"); err == nil {
		t.Errorf("blocked Read after Close error = nil; want an error")
	}
	recv(t, done, "the server to see the connection close")
}

func TestTLS(t *testing.T) {
	srv, conns := newServer(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tr := newTransport(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	for i := range 3 {
		resp, body, err := roundTrip(tr, http.MethodGet, srv.URL, "")
		if err != nil {
			t.Fatalf("request %d: RoundTrip error %v", i, err)
		}
		if body != "HTTP/1.1" {
			t.Errorf("request %d: server saw %q; want HTTP/1.1", i, body)
		}
		if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "http/1.1" {
			t.Errorf("request %d: resp.TLS = %+v; want NegotiatedProtocol http/1.1", i, resp.TLS)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("connections accepted = %d; want 1", got)
	}

	// Without the test roots the handshake fails.
	bad := newTransport(t, Config{})
	if _, _, err := roundTrip(bad, http.MethodGet, srv.URL, ""); err == nil || !strings.HasPrefix(err.Error(), "h1: TLS handshake") {
		t.Errorf("RoundTrip with default roots error = %v; want a TLS handshake error", err)
	}
}

// roundTripFunc is a fake RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestFallback(t *testing.T) {
	proxyURL := mustParse(t, "http://127.0.0.1:1")
	for _, tt := range []struct {
		name   string
		proxy  func(*http.Request) (*url.URL, error)
		method string
		url    string
		header http.Header
	}{
		{"proxy", http.ProxyURL(proxyURL), http.MethodGet, "http://127.0.0.1:1/x", nil},
		{"other scheme", nil, http.MethodGet, "ftp://127.0.0.1:1/x", nil},
		{"Expect", nil, http.MethodPost, "http://127.0.0.1:1/x", http.Header{"Expect": {"100-continue"}}},
		{"Upgrade", nil, http.MethodGet, "http://127.0.0.1:1/x", http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}},
		{"CONNECT", nil, http.MethodConnect, "http://127.0.0.1:1", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []*http.Request
			tr := newTransport(t, Config{
				Proxy: tt.proxy,
				Fallback: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					got = append(got, r)
					return &http.Response{StatusCode: 299, Body: http.NoBody, Request: r}, nil
				}),
			})
			req, err := http.NewRequest(tt.method, tt.url, nil)
			if err != nil {
				t.Fatalf("NewRequest = %v", err)
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != 299 {
				t.Fatalf("RoundTrip(%s %s) = %v, %v; want the fallback's 299", tt.method, tt.url, resp, err)
			}
			if len(got) != 1 || got[0] != req {
				t.Errorf("fallback got %d requests; want exactly the one sent", len(got))
			}
		})
	}
}

// TestDefaultFallbackUsesProxy: with no Fallback, proxied requests go
// through the configured proxy.
func TestDefaultFallbackUsesProxy(t *testing.T) {
	seen := make(chan string, 1)
	proxy, _ := newServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.RequestURI
		io.WriteString(w, "via proxy")
	}))
	tr := newTransport(t, Config{Proxy: http.ProxyURL(mustParse(t, proxy.URL))})
	if got := get(t, tr, "http://upstream.invalid/v1/models"); got != "via proxy" {
		t.Errorf("body = %q; want \"via proxy\"", got)
	}
	if got, want := recv(t, seen, "the proxied request"), "GET http://upstream.invalid/v1/models"; got != want {
		t.Errorf("proxy saw %q; want %q", got, want)
	}
}

func TestInformational(t *testing.T) {
	final := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	for _, tt := range []struct {
		name, resp string
		wantErr    bool
	}{
		{"103", hint + final, false},
		{"100 then 103", "HTTP/1.1 100 Continue\r\n\r\n" + hint + final, false},
		{"too many", strings.Repeat(hint, 10) + final, true},
		{"unasked 101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, func(_ int, c net.Conn) { serve(c, tt.resp, 10) })
			tr := newTransport(t, Config{})
			resp, body, err := roundTrip(tr, http.MethodGet, srv.URL(), "")
			if tt.wantErr {
				if err == nil {
					t.Errorf("RoundTrip = %d %q; want an error", resp.StatusCode, body)
				}
				return
			}
			if err != nil || resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("RoundTrip = %v, %q, %v; want 200 \"ok\"", resp, body, err)
			}
			if got := get(t, tr, srv.URL()); got != "ok" {
				t.Errorf("second body = %q; want \"ok\"", got)
			}
			if got := srv.accepted.Load(); got != 1 {
				t.Errorf("connections accepted = %d; want 1", got)
			}
		})
	}
}

func TestConcurrent(t *testing.T) {
	srv, conns := newServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s:%s", r.URL.Path, b)
	}))
	const maxIdle, workers, each = 4, 16, 50
	tr := newTransport(t, Config{MaxIdlePerHost: maxIdle})
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				path, payload := fmt.Sprintf("/%d/%d", g, i), fmt.Sprintf("body %d %d", g, i)
				_, got, err := roundTrip(tr, http.MethodPost, srv.URL+path, payload)
				if want := path + ":" + payload; err != nil || got != want {
					t.Errorf("RoundTrip(POST %s) = %q, %v; want %q", path, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := tr.idleLen(); got < 1 || got > maxIdle {
		t.Errorf("idle connections = %d; want 1..%d", got, maxIdle)
	}
	if got := conns.Load(); got > workers*each {
		t.Errorf("connections accepted = %d; want at most %d", got, workers*each)
	}
	t.Logf("%d requests over %d connections", workers*each, conns.Load())
}

func TestResponseHeaderTimeout(t *testing.T) {
	started, done, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	srv, _ := newServer(t, false, blockingHandler(started, done, quit))
	t.Cleanup(func() { close(quit) })
	tr := newTransport(t, Config{ResponseHeaderTimeout: 20 * time.Millisecond})
	_, _, err := roundTrip(tr, http.MethodGet, srv.URL+"/block", "")
	ne, ok := err.(net.Error)
	if !ok || !ne.Timeout() {
		t.Fatalf("RoundTrip error = %#v; want a net.Error with Timeout() true", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip error %v: errors.Is DeadlineExceeded = %v, Canceled = %v; want true, false",
			err, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled))
	}
	recv(t, done, "the server to see the connection close")
	// The timeout applies to headers only: a slow body is fine, and a
	// reused connection has no leftover deadline.
	for i := range 2 {
		if got := get(t, tr, srv.URL+"/ok"); got != "ok" {
			t.Errorf("request %d: body = %q; want \"ok\"", i, got)
		}
	}
}

// closeRecorder is a request body that records Close.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

func TestErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		url    string
		prefix string
		wantIs error
	}{
		{"dial refused", context.Background(), "http://127.0.0.1:1/", "h1: dial 127.0.0.1:1: ", nil},
		{"context done", cancelled, "http://127.0.0.1:1/", "h1: ", context.Canceled},
		{"no host", context.Background(), "http:///x", "h1: no host", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTransport(t, Config{})
			body := &closeRecorder{Reader: strings.NewReader("payload")}
			req, err := http.NewRequestWithContext(tt.ctx, http.MethodPost, tt.url, body)
			if err != nil {
				t.Fatalf("NewRequest = %v", err)
			}
			_, err = tr.RoundTrip(req)
			if err == nil || !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("RoundTrip(%s) error = %v; want prefix %q", tt.url, err, tt.prefix)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("RoundTrip(%s) error = %v; want errors.Is %v", tt.url, err, tt.wantIs)
			}
			if !body.closed.Load() {
				t.Errorf("request body not closed after RoundTrip error")
			}
		})
	}
}

func TestIdleExpiry(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       Config
		closeIdle bool
		wantConns int32
	}{
		{"reused", Config{}, false, 1},
		{"idle timeout", Config{IdleTimeout: time.Nanosecond}, false, 2},
		{"CloseIdleConnections", Config{}, true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, conns := newServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			}))
			tr := newTransport(t, tt.cfg)
			get(t, tr, srv.URL)
			if tt.closeIdle {
				tr.CloseIdleConnections()
				if got := tr.idleLen(); got != 0 {
					t.Errorf("idle connections after CloseIdleConnections = %d; want 0", got)
				}
			}
			get(t, tr, srv.URL)
			if got := conns.Load(); got != tt.wantConns {
				t.Errorf("connections accepted = %d; want %d", got, tt.wantConns)
			}
		})
	}
}

// TestAlive checks the stale-connection probe on its own.
func TestAlive(t *testing.T) {
	for _, tt := range []struct {
		name string
		peer func(c net.Conn) // what the server does to its end
		want bool
	}{
		{"quiet", func(net.Conn) {}, true},
		{"peer closed", func(c net.Conn) { c.Close() }, false},
		{"peer sent data", func(c net.Conn) { io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\n\r\n") }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acted, release := make(chan struct{}), make(chan struct{})
			srv := newRawServer(t, func(_ int, c net.Conn) {
				tt.peer(c)
				close(acted)
				<-release
			})
			defer close(release)
			tr := newTransport(t, Config{})
			key, _ := keyFor(mustParse(t, srv.URL()))
			c, err := tr.dial(context.Background(), key)
			if err != nil {
				t.Fatalf("dial = %v", err)
			}
			defer c.nc.Close()
			recv(t, acted, "the peer")
			if !tt.want {
				waitReadable(t, c)
			}
			if got := c.alive(); got != tt.want {
				t.Errorf("alive() = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestKeyFor(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"http://example.com/x", "http://example.com:80"},
		{"https://example.com/x", "https://example.com:443"},
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080"},
		{"https://[::1]/x", "https://[::1]:443"},
		{"https://[::1]:8443/x", "https://[::1]:8443"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			k, err := keyFor(mustParse(t, tt.url))
			if err != nil || k.String() != tt.want {
				t.Errorf("keyFor(%q) = %q, %v; want %q", tt.url, k.String(), err, tt.want)
			}
		})
	}
}

// BenchmarkRoundTrip compares h1 with net/http.Transport on the gateway's
// shape of call: a small JSON POST answered by a small JSON body.
func BenchmarkRoundTrip(b *testing.B) {
	reqBody := []byte(`{"model":"m","messages":[{"role":"user","content":"Say hello."}]}`)
	respBody := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(respBody)
	}))
	defer srv.Close()
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"h1", New(Config{})},
		{"net-http", &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				// A cancellable context, as a gateway request has.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for pb.Next() {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(reqBody))
					if err != nil {
						b.Error(err)
						return
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := bc.rt.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if n != int64(len(respBody)) {
						b.Errorf("body length %d; want %d", n, len(respBody))
						return
					}
				}
			})
		})
		bc.rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	}
}
