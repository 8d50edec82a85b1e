// Package h1 is a lean, synchronous HTTP/1.1 client transport: an
// http.RoundTripper for the gateway's upstream calls that does the work of
// a round trip on the calling goroutine.
//
// net/http.Transport runs a read and a write goroutine per connection and
// hands each request and response between them over channels; for the
// gateway's short request/response exchanges that machinery is a visible
// share of the CPU. Transport instead writes the request with
// (*http.Request).Write into a pooled bufio.Writer, flushes, and parses the
// response with http.ReadResponse from a pooled bufio.Reader, all on the
// goroutine that called RoundTrip; the connection goes back to a LIFO idle
// pool when the response body reaches io.EOF. No goroutine is started per
// connection or per request: cancellation is a context.AfterFunc that sets a
// past deadline on the connection, which makes the blocked read or write
// return.
//
// Transport speaks HTTP/1.1 over TCP or TLS (ALPN "http/1.1" only). It does
// not ask for compressed responses (no Accept-Encoding is added, so there is
// no transparent gzip) and it does not follow redirects (that is
// http.Client's job). Requests it does not serve itself go to a fallback
// RoundTripper: proxied requests, schemes other than http and https,
// requests with an Expect header, protocol upgrades and CONNECT.
package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config configures a Transport. The zero value is usable: every zero field
// takes the default its comment gives.
type Config struct {
	// DialTimeout bounds establishing a TCP connection; 0 means 10s.
	DialTimeout time.Duration
	// IdleTimeout is how long a connection may sit idle in the pool and
	// still be reused; an older one is closed instead. 0 means 60s.
	IdleTimeout time.Duration
	// MaxIdlePerHost caps the idle connections kept per scheme, host and
	// port; a connection released beyond the cap is closed. 0 means 256.
	MaxIdlePerHost int
	// TLSConfig is the base TLS client configuration for https. nil means
	// the defaults (system roots). It is cloned; each connection gets
	// ServerName set to the URL's host (unless the config sets one) and
	// NextProtos set to ["http/1.1"].
	TLSConfig *tls.Config
	// TLSHandshakeTimeout bounds the TLS handshake; 0 means 10s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout, if positive, bounds the wait for the response
	// headers after the request is written; 0 means no bound other than
	// the request's context.
	ResponseHeaderTimeout time.Duration
	// Proxy chooses a proxy per request, as http.Transport.Proxy does; a
	// request it gives a proxy URL is sent through Fallback. nil means
	// http.ProxyFromEnvironment.
	Proxy func(*http.Request) (*url.URL, error)
	// Fallback serves the requests Transport does not (see the package
	// documentation). nil means a clone of http.DefaultTransport using
	// Proxy, TLSConfig and the timeouts above.
	Fallback http.RoundTripper
}

// Defaults for the zero Config fields.
const (
	defaultDialTimeout         = 10 * time.Second
	defaultIdleTimeout         = 60 * time.Second
	defaultMaxIdlePerHost      = 256
	defaultTLSHandshakeTimeout = 10 * time.Second

	// max1xx bounds the informational responses skipped before the final
	// one, as net/http does, so a misbehaving server cannot hold a round
	// trip in an endless header loop.
	max1xx = 5
)

// Transport is an http.RoundTripper speaking HTTP/1.1 synchronously on the
// caller's goroutine, with a per-host LIFO pool of idle connections. It is
// safe for concurrent use; make one with New and share it. Connections are
// pooled per scheme, host and port.
//
// RoundTrip follows the http.RoundTripper contract: it always closes the
// request body, and the caller must close the response body. Reading the
// body to io.EOF returns the connection to the pool; closing the body
// before io.EOF closes the connection (the rest of the body is not
// drained).
type Transport struct {
	dialer        net.Dialer
	idleTimeout   time.Duration
	maxIdle       int
	tlsConfig     *tls.Config // cloned base, NextProtos set
	tlsTimeout    time.Duration
	headerTimeout time.Duration
	proxy         func(*http.Request) (*url.URL, error)
	fallback      http.RoundTripper
	readers       sync.Pool // *bufio.Reader
	writers       sync.Pool // *bufio.Writer
	mu            sync.Mutex
	idle          map[connKey][]*conn // guarded by mu; most recently used last
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport configured by cfg (see Config for the defaults).
func New(cfg Config) *Transport {
	t := &Transport{
		dialer:        net.Dialer{Timeout: orDefault(cfg.DialTimeout, defaultDialTimeout)},
		idleTimeout:   orDefault(cfg.IdleTimeout, defaultIdleTimeout),
		maxIdle:       cfg.MaxIdlePerHost,
		tlsTimeout:    orDefault(cfg.TLSHandshakeTimeout, defaultTLSHandshakeTimeout),
		headerTimeout: cfg.ResponseHeaderTimeout,
		proxy:         cfg.Proxy,
		fallback:      cfg.Fallback,
		idle:          make(map[connKey][]*conn),
	}
	if t.maxIdle <= 0 {
		t.maxIdle = defaultMaxIdlePerHost
	}
	if t.proxy == nil {
		t.proxy = http.ProxyFromEnvironment
	}
	if cfg.TLSConfig != nil {
		t.tlsConfig = cfg.TLSConfig.Clone()
	} else {
		t.tlsConfig = &tls.Config{}
	}
	t.tlsConfig.NextProtos = []string{"http/1.1"}
	if t.fallback == nil {
		t.fallback = defaultFallback(cfg, t)
	}
	return t
}

// defaultFallback clones http.DefaultTransport and makes it agree with cfg,
// so a proxied request goes through the proxy cfg.Proxy chose.
func defaultFallback(cfg Config, t *Transport) http.RoundTripper {
	ht, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		ht = ht.Clone()
	} else {
		ht = &http.Transport{ForceAttemptHTTP2: true}
	}
	ht.Proxy = t.proxy
	ht.DialContext = t.dialer.DialContext
	if cfg.TLSConfig != nil {
		ht.TLSClientConfig = cfg.TLSConfig.Clone()
	}
	ht.TLSHandshakeTimeout = t.tlsTimeout
	ht.ResponseHeaderTimeout = t.headerTimeout
	ht.IdleConnTimeout = t.idleTimeout
	ht.MaxIdleConnsPerHost = t.maxIdle
	return ht
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// connKey names a pool: the scheme and the dialled "host:port" (the
// default port added), i.e. "scheme://host:port".
type connKey struct {
	https bool
	addr  string
}

func (k connKey) String() string {
	if k.https {
		return "https://" + k.addr
	}
	return "http://" + k.addr
}

// keyFor returns the pool key of u, whose scheme is http or https.
func keyFor(u *url.URL) (connKey, error) {
	k := connKey{https: u.Scheme == "https"}
	host := u.Hostname()
	if host == "" {
		return k, fmt.Errorf("h1: no host in request URL %q", u.Redacted())
	}
	switch {
	case u.Port() != "":
		k.addr = u.Host // "host:port" or "[v6]:port" already: no allocation
	case k.https:
		k.addr = net.JoinHostPort(host, "443")
	default:
		k.addr = net.JoinHostPort(host, "80")
	}
	return k, nil
}

// RoundTrip implements http.RoundTripper. It serves http and https requests
// itself and sends the others (see the package documentation) to the
// fallback. It is safe for concurrent use.
//
// Cancellation and deadlines come from req.Context(): once the context is
// done, RoundTrip and reads of the response body return an error for which
// errors.Is(err, req.Context().Err()) holds. A response header wait longer
// than Config.ResponseHeaderTimeout fails with a net.Error whose Timeout is
// true (and which also matches context.DeadlineExceeded).
//
// If a connection taken from the idle pool fails before any byte of the
// response arrives (the write fails, or the first read sees EOF, ECONNRESET
// or EPIPE: the server closed the idle connection just as the request was
// sent), the request is sent once more on a newly dialled connection, with
// its body from req.GetBody. A request with a body and no GetBody is not
// retried. Unlike net/http, the retry is made for any method: the failure
// shows that the server read no complete request on that connection, or at
// least answered none.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("h1: nil Request.URL")
	}
	if t.delegate(req) {
		return t.fallback.RoundTrip(req)
	}
	proxyURL, err := t.proxy(req)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("h1: proxy for %s: %w", req.URL.Redacted(), err)
	}
	if proxyURL != nil {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, fmt.Errorf("h1: %w", err)
	}
	key, err := keyFor(req.URL)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	c, reused, err := t.getConn(ctx, key)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, retryable, err := t.send(ctx, c, req, req)
	if err == nil || !reused || !retryable || ctx.Err() != nil {
		return resp, err
	}
	again, ok := rewind(req)
	if !ok {
		return nil, err
	}
	c, err = t.dial(ctx, key)
	if err != nil {
		closeBody(again)
		return nil, err
	}
	resp, _, err = t.send(ctx, c, again, req)
	return resp, err
}

// delegate reports whether req is one for the fallback: a scheme other than
// http or https, CONNECT, an Expect header or a protocol upgrade.
func (t *Transport) delegate(req *http.Request) bool {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return true
	}
	if req.Method == http.MethodConnect {
		return true
	}
	return len(req.Header["Expect"]) > 0 || len(req.Header["Upgrade"]) > 0
}

// rewind returns the request to send again after a failed first attempt,
// whose Write consumed and closed the body: req itself when it has no body,
// a shallow copy with a fresh body from GetBody, or false if the body
// cannot be had again.
func rewind(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	again := new(http.Request)
	*again = *req
	again.Body = body
	return again, true
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// send does one round trip of wreq on c: the request written is wreq, the
// response's Request is orig. It owns c: on error c is closed, on success it
// belongs to the response body (or is back in the pool). retryable reports
// a failure before any byte of the response was read that a reused
// connection going stale explains.
func (t *Transport) send(ctx context.Context, c *conn, wreq, orig *http.Request) (resp *http.Response, retryable bool, err error) {
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.expireFn)
	}

	bw := t.getWriter(c)
	c.werr = nil
	err = wreq.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	t.putWriter(bw)
	if err != nil {
		retryable = c.werr != nil // the connection failed, not the body
		t.discard(c, stop)
		return nil, retryable, wrapErr(ctx, "write request", err)
	}

	c.br = t.getReader(c.nc)
	if t.headerTimeout > 0 {
		c.setReadDeadline(ctx, time.Now().Add(t.headerTimeout))
	}
	if _, err := c.br.Peek(1); err != nil {
		retryable = errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
		t.discard(c, stop)
		return nil, retryable, t.readErr(ctx, "read response", err)
	}
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(c.br, orig)
		if err != nil {
			t.discard(c, stop)
			return nil, false, t.readErr(ctx, "read response", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n >= max1xx {
			t.discard(c, stop)
			return nil, false, fmt.Errorf("h1: read response: more than %d 1xx informational responses", max1xx)
		}
	}
	if t.headerTimeout > 0 {
		c.setReadDeadline(ctx, time.Time{})
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Upgrades go to the fallback, so this one was not asked for.
		t.discard(c, stop)
		return nil, false, errors.New("h1: read response: unexpected 101 Switching Protocols")
	}
	resp.TLS = c.tls
	keep := resp.ProtoAtLeast(1, 1) && !resp.Close && !orig.Close
	if resp.Body == http.NoBody {
		// HEAD, 204, 304, Content-Length: 0: nothing more to read.
		t.release(c, stop, keep)
		return resp, false, nil
	}
	resp.Body = &body{t: t, c: c, rc: resp.Body, ctx: ctx, stop: stop, keep: keep}
	return resp, false, nil
}

// readErr wraps an error reading the response headers: the context's error
// if it is done, a timeout error if the header deadline passed.
func (t *Transport) readErr(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil && t.headerTimeout > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return &timeoutError{"h1: timeout awaiting response headers"}
	}
	return wrapErr(ctx, op, err)
}

// wrapErr wraps err with "h1: op", replacing it by the context's error when
// the context is done: the deadline the cancellation set is what failed.
func wrapErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("h1: %s: %w", op, cerr)
	}
	return fmt.Errorf("h1: %s: %w", op, err)
}

// timeoutError is a net.Error timeout that also matches
// context.DeadlineExceeded, like net/http's own header timeout.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }

// Timeout reports true: the error is a timeout.
func (e *timeoutError) Timeout() bool { return true }

// Temporary reports true, as net/http's timeouts do.
func (e *timeoutError) Temporary() bool { return true }

// Is matches context.DeadlineExceeded and os.ErrDeadlineExceeded.
func (e *timeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded || target == os.ErrDeadlineExceeded
}

// release ends a round trip whose response was read completely: c goes back
// to the pool if keep says the connection may be reused and the context did
// not fire; otherwise it is closed.
func (t *Transport) release(c *conn, stop func() bool, keep bool) {
	if stop != nil && !stop() {
		keep = false // the cancellation ran: c has a past deadline
	}
	if !keep || c.br.Buffered() > 0 { // bytes after the response: a broken peer
		t.closeConn(c)
		return
	}
	t.putReader(c.br)
	c.br = nil
	t.putIdle(c)
}

// discard closes c after a failed round trip on the caller's goroutine.
func (t *Transport) discard(c *conn, stop func() bool) {
	if stop != nil {
		stop()
	}
	t.closeConn(c)
}

// closeConn closes c and recycles its reader. Only the goroutine that owns
// c (no body Read in flight) may call it.
func (t *Transport) closeConn(c *conn) {
	c.nc.Close()
	if c.br != nil {
		t.putReader(c.br)
		c.br = nil
	}
}

func (t *Transport) getWriter(w io.Writer) *bufio.Writer {
	if bw, ok := t.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriter(w)
}

func (t *Transport) putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	t.writers.Put(bw)
}

func (t *Transport) getReader(r io.Reader) *bufio.Reader {
	if br, ok := t.readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReader(r)
}

func (t *Transport) putReader(br *bufio.Reader) {
	br.Reset(nil)
	t.readers.Put(br)
}

// getConn returns a healthy idle connection for key, most recently used
// first, or dials a new one; reused reports which.
func (t *Transport) getConn(ctx context.Context, key connKey) (c *conn, reused bool, err error) {
	for range t.maxIdle + 1 {
		c = t.popIdle(key)
		if c == nil {
			break
		}
		if c.alive() {
			return c, true, nil
		}
		c.nc.Close()
	}
	c, err = t.dial(ctx, key)
	return c, false, err
}

// popIdle takes the most recently used idle connection for key that has not
// been idle longer than the idle timeout, closing the expired ones.
func (t *Transport) popIdle(key connKey) *conn {
	now := time.Now()
	t.mu.Lock()
	s := t.idle[key]
	if len(s) == 0 {
		t.mu.Unlock()
		return nil
	}
	c := s[len(s)-1]
	if now.Sub(c.idleAt) <= t.idleTimeout {
		s[len(s)-1] = nil
		t.idle[key] = s[:len(s)-1]
		t.mu.Unlock()
		return c
	}
	// The newest is expired, so all are: take them all out.
	delete(t.idle, key)
	t.mu.Unlock()
	for _, c := range s {
		c.nc.Close()
	}
	return nil
}

// putIdle pools c, closing it instead if the pool for its key is full, and
// closing pooled connections that have outlived the idle timeout.
func (t *Transport) putIdle(c *conn) {
	now := time.Now()
	c.idleAt = now
	var expired []*conn
	t.mu.Lock()
	s := t.idle[c.key]
	if len(s) > 0 && now.Sub(s[0].idleAt) > t.idleTimeout {
		n := 0
		for n < len(s) && now.Sub(s[n].idleAt) > t.idleTimeout {
			n++
		}
		expired = append(expired, s[:n]...)
		m := copy(s, s[n:])
		clear(s[m:])
		s = s[:m]
	}
	full := len(s) >= t.maxIdle
	if !full {
		s = append(s, c)
	}
	t.idle[c.key] = s
	t.mu.Unlock()
	if full {
		c.nc.Close()
	}
	for _, e := range expired {
		e.nc.Close()
	}
}

// CloseIdleConnections closes the pooled idle connections, and the
// fallback's if it has a CloseIdleConnections method. Connections in use
// are not affected. It is safe for concurrent use.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[connKey][]*conn)
	t.mu.Unlock()
	for _, s := range idle {
		for _, c := range s {
			c.nc.Close()
		}
	}
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// dial opens a new connection for key: TCP, then TLS for https.
func (t *Transport) dial(ctx context.Context, key connKey) (*conn, error) {
	nc, err := t.dialer.DialContext(ctx, "tcp", key.addr)
	if err != nil {
		return nil, wrapErr(ctx, "dial "+key.addr, err)
	}
	c := &conn{key: key, nc: nc}
	if tcp, ok := nc.(*net.TCPConn); ok {
		if rc, err := tcp.SyscallConn(); err == nil {
			c.rc = rc
		}
	}
	if key.https {
		tc, err := t.handshake(ctx, nc, key.addr)
		if err != nil {
			nc.Close()
			return nil, err
		}
		c.nc = tc
		state := tc.ConnectionState()
		c.tls = &state
	}
	// Method values made once per connection, not once per request.
	c.peekFn = c.peek
	c.expireFn = c.expire
	return c, nil
}

// handshake runs the TLS client handshake on nc, bounded by the handshake
// timeout, and checks that the server agreed to HTTP/1.1.
func (t *Transport) handshake(ctx context.Context, nc net.Conn, addr string) (*tls.Conn, error) {
	cfg := t.tlsConfig.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("h1: TLS handshake with %s: %w", addr, err)
		}
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	hctx, cancel := context.WithTimeout(ctx, t.tlsTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
			return nil, &timeoutError{"h1: TLS handshake with " + addr + ": timeout"}
		}
		return nil, wrapErr(ctx, "TLS handshake with "+addr, err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
		return nil, fmt.Errorf("h1: TLS handshake with %s: server chose protocol %q", addr, p)
	}
	return tc, nil
}

// conn is one upstream connection. A conn is owned by one goroutine at a
// time: the pool, a RoundTrip, or the response body; only expireFn (the
// context's AfterFunc) and body.Close touch it from elsewhere, and only
// through net.Conn's concurrency-safe methods.
type conn struct {
	key  connKey
	nc   net.Conn             // the connection requests go over (TLS or TCP)
	rc   syscall.RawConn      // of the TCP connection under nc, for peeking; nil if none
	tls  *tls.ConnectionState // nil for http
	br   *bufio.Reader        // set during a round trip, pooled while idle
	werr error                // the last error writing to nc

	idleAt   time.Time
	peekBuf  [1]byte
	peekN    int
	peekErr  error
	peekFn   func(fd uintptr) bool // c.peek
	expireFn func()                // c.expire
}

// Write writes to the connection, recording a failure so that send can tell
// a dead connection from a failing request body.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.nc.Write(p)
	if err != nil {
		c.werr = err
	}
	return n, err
}

// expire sets a past deadline, making any blocked read or write return. It
// is the context's AfterFunc.
func (c *conn) expire() {
	c.nc.SetDeadline(time.Unix(1, 0))
}

// setReadDeadline sets the read deadline without undoing a cancellation: if
// the context fired meanwhile, the past deadline is set again. (The context
// is done before its AfterFunc runs, so when ctx.Err() is nil here the
// AfterFunc, if it comes, sets its deadline after this one.)
func (c *conn) setReadDeadline(ctx context.Context, d time.Time) {
	c.nc.SetReadDeadline(d)
	if ctx.Err() != nil {
		c.expire()
	}
}

// alive reports whether an idle connection can be reused, without
// blocking: nothing may be readable on the socket. Data (the server does not
// send unasked), EOF (the server closed it) or an error all mean no.
func (c *conn) alive() bool {
	if c.rc == nil {
		return true
	}
	c.peekN, c.peekErr = 0, nil
	if err := c.rc.Read(c.peekFn); err != nil {
		return false
	}
	return errors.Is(c.peekErr, syscall.EAGAIN) || errors.Is(c.peekErr, syscall.EWOULDBLOCK)
}

// peek is alive's raw read: a non-blocking MSG_PEEK of one byte. It returns
// true so that RawConn.Read never waits.
func (c *conn) peek(fd uintptr) bool {
	c.peekN, _, c.peekErr = syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}

// Body states.
const (
	bodyOpen   int32 = iota
	bodyEOF          // read to the end; the connection was released
	bodyFailed       // a read failed; the connection is closed
	bodyClosed       // Close was called
)

// body is a response body. Reaching io.EOF releases the connection to the
// pool (if reusable); Close before that closes the connection without
// draining. Close may be called concurrently with Read (to abort it) and
// more than once.
type body struct {
	t     *Transport
	c     *conn
	rc    io.ReadCloser // http.ReadResponse's body; never closed (it would drain)
	ctx   context.Context
	stop  func() bool
	keep  bool
	state atomic.Int32
	err   error // the failure, in state bodyFailed; only Read touches it
}

// Read reads the body. Once the request's context is done, it returns an
// error matching the context's error; after Close it returns
// http.ErrBodyReadAfterClose.
func (b *body) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case bodyEOF:
		return 0, io.EOF
	case bodyFailed:
		return 0, b.err
	case bodyClosed:
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		if b.state.CompareAndSwap(bodyOpen, bodyEOF) {
			b.t.release(b.c, b.stop, b.keep)
		}
		return n, io.EOF
	}
	err = wrapErr(b.ctx, "read response body", err)
	b.err = err
	if b.state.CompareAndSwap(bodyOpen, bodyFailed) {
		b.t.discard(b.c, b.stop)
	}
	return n, err
}

// Close closes the body. Before io.EOF it closes the connection. It always
// returns nil.
func (b *body) Close() error {
	if b.state.Swap(bodyClosed) == bodyOpen {
		// A Read may be in flight: close the connection to end it, but
		// leave the reader alone (it is not recycled).
		if b.stop != nil {
			b.stop()
		}
		b.c.nc.Close()
	}
	return nil
}
