package httpapi

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

// DefaultTextBodyBytes is the largest body of a request that carries no
// image, when LimitBodies does not say otherwise (see Bodies).
const DefaultTextBodyBytes = 2 << 20

// BodyCost is how many bytes of memory a request body holds per byte of
// its size while its request runs, as Bodies counts it: the bytes read,
// the request decoded from them (its strings), an image decoded from its
// data URI, the request sent upstream (BenchmarkChatBody measures what a
// 5 MB chat body allocates: about 24 MB with text, 35 MB with an image).
const BodyCost = 4

// smallBody is the size up to which a body is not counted against a
// Bodies' memory: a connection's own buffers cost as much, and the
// in-flight bounds (ratelimit.InFlight) bound how many there are. So a
// request of ordinary size never waits behind large ones.
const smallBody = 64 << 10

// DefaultBodyWait is how long a request waits for room in a Bodies'
// memory before it is answered 503 server_busy.
const DefaultBodyWait = 10 * time.Second

// Bodies bounds request bodies beyond MaxBodyBytes (LimitBodies applies
// it):
//
//   - text is the largest body of a request that carries no image: of
//     every route but chat completions and the Responses API, and of
//     theirs when the body names no image part (MaxBodyBytes when it
//     does; see checkTextBody); past it, 413 request_too_large.
//   - memory bounds what the bodies of the requests in progress hold at
//     once, each counted at BodyCost times its size (its Content-Length,
//     taken before the body is read; the route's limit when the length is
//     not announced, settled once read) from when it is read until its
//     request ends. Bodies of at most 64 KiB are not counted. One key
//     (the request's principal) holds at most half of it. A request that
//     finds no room waits for it, in turn (passing those of a key that
//     holds its share), up to DefaultBodyWait, then is answered 503
//     server_busy with Retry-After; a body larger than a key's share is
//     counted as that share.
//
// Safe for concurrent use.
type Bodies struct {
	text   int64
	wait   time.Duration
	budget *budget // nil: no bound on memory
}

// NewBodies returns the bounds of request bodies: text, the largest body
// without an image (0: DefaultTextBodyBytes; at most MaxBodyBytes), and
// memory, the bytes the bodies in progress may hold at once (0 or less:
// no bound).
func NewBodies(text, memory int64) *Bodies {
	if text <= 0 {
		text = DefaultTextBodyBytes
	}
	b := &Bodies{text: min(text, MaxBodyBytes), wait: DefaultBodyWait}
	if memory > 0 {
		b.budget = newBudget(memory)
	}
	return b
}

// Held returns the memory counted for the bodies of the requests in
// progress, and the bound (0, 0 without one).
func (b *Bodies) Held() (held, bound int64) {
	if b.budget == nil {
		return 0, 0
	}
	b.budget.mu.Lock()
	defer b.budget.mu.Unlock()
	return b.budget.size - b.budget.free, b.budget.size
}

// bodyCharge is one request's body, with its share of its Bodies'
// memory: LimitBodies puts it in place of the request's body (rather than
// in a new context: no copy of the request), and readLimited finds it
// there.
type bodyCharge struct {
	io.ReadCloser
	b   *Bodies
	key string // the key it is counted under
	n   int64  // counted against b.budget
}

// LimitBodies makes the routes of next read request bodies under b's
// bounds, and gives back each request's share of b's memory when it
// ends. Requests without a body pass as they are. Nothing between it and
// the routes may replace a request's body.
func LimitBodies(b *Bodies, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		c := &bodyCharge{ReadCloser: r.Body, b: b}
		defer c.settle(0)
		r.Body = c
		next.ServeHTTP(w, r)
	})
}

// chargeOf returns the request's bodyCharge; nil outside LimitBodies.
func chargeOf(r *http.Request) *bodyCharge {
	c, _ := r.Body.(*bodyCharge)
	return c
}

// textLimit is the largest body r may have without an image.
func textLimit(r *http.Request) int64 {
	if c := chargeOf(r); c != nil {
		return c.b.text
	}
	return DefaultTextBodyBytes
}

// take counts a body of size bytes of key's against the memory,
// waiting for room.
func (c *bodyCharge) take(ctx context.Context, key string, size int64) error {
	if c.b.budget == nil || size <= smallBody || c.n > 0 {
		return nil
	}
	n, err := c.b.budget.acquire(ctx, key, BodyCost*size, c.b.wait)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &apierr.Error{Kind: apierr.Unavailable, Code: "server_busy", RetryAfter: time.Second,
			Message: "The server is holding as many request bodies as it may; retry shortly."}
	}
	c.key, c.n = key, n
	return nil
}

// settle keeps what a body of size bytes counts (0: none, the request
// has ended), giving back the rest.
func (c *bodyCharge) settle(size int64) {
	if c.n == 0 {
		return
	}
	keep := min(BodyCost*size, c.n)
	if size <= smallBody {
		keep = 0
	}
	c.b.budget.release(c.key, c.n-keep)
	c.n = keep
}

// readLimited returns the request body, of any media type, of at most
// limit bytes (413 past it), counted against the memory of the request's
// Bodies (LimitBodies) before it is read. A body whose length is
// announced is read into a buffer of that length, once.
func readLimited(r *http.Request, limit int64) ([]byte, error) {
	cl := r.ContentLength
	if cl > limit {
		return nil, tooLarge(limit)
	}
	c := chargeOf(r)
	if c != nil {
		size := cl
		if size <= 0 {
			size = limit // not announced: the most it may be, settled once read
		}
		p, _ := auth.FromContext(r.Context())
		if err := c.take(r.Context(), p.KeyID, size); err != nil {
			return nil, err
		}
	}
	var b []byte
	var err error
	if cl > 0 {
		b = make([]byte, cl)
		_, err = io.ReadFull(r.Body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	if err != nil {
		return nil, &apierr.Error{Kind: apierr.Invalid, Code: "invalid_body", Message: "The request body could not be read.", Err: err}
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	if c != nil && cl <= 0 {
		c.settle(int64(len(b)))
	}
	return b, nil
}

func tooLarge(limit int64) error {
	return &apierr.Error{Kind: apierr.TooLarge, Code: "request_too_large",
		Message: fmt.Sprintf("The request body is larger than %d bytes.", limit)}
}

// checkTextBody refuses the body of a chat, Responses or Messages request
// that names no image part (no "image_url" key: chat's image_url parts and
// the Responses API's input_image parts both have one; no "image" string:
// the Messages API's image blocks' type) and is larger than the text
// limit: 413, before it is decoded. One that names one may be up to
// MaxBodyBytes.
func checkTextBody(r *http.Request, body []byte) error {
	limit := textLimit(r)
	if int64(len(body)) <= limit || bytes.Contains(body, []byte(`"image_url"`)) || bytes.Contains(body, []byte(`"image"`)) {
		return nil
	}
	return &apierr.Error{Kind: apierr.TooLarge, Code: "request_too_large",
		Message: fmt.Sprintf("The request body is larger than %d bytes, the limit of a request without images (%d with one).", limit, MaxBodyBytes)}
}

// budget is a bound on bytes held at once, given out in the order asked
// for, of which one key holds at most half: a key at its share waits
// while those behind it, of other keys, pass. Safe for concurrent use.
type budget struct {
	mu      sync.Mutex
	size    int64
	free    int64
	held    map[string]int64 // by key, while it holds some
	waiting list.List        // *budgetWaiter, first come first
}

func newBudget(size int64) *budget {
	return &budget{size: size, free: size, held: map[string]int64{}}
}

// share is the most one key may hold.
func (b *budget) share() int64 { return max(b.size/2, 1) }

type budgetWaiter struct {
	key   string
	n     int64
	ready chan struct{} // closed when n is granted
}

// acquire takes n bytes for key (at most its share), in turn, waiting up
// to wait or until ctx is done (an error, and nothing taken); it returns
// what it took.
func (b *budget) acquire(ctx context.Context, key string, n int64, wait time.Duration) (int64, error) {
	n = min(n, b.share())
	w := &budgetWaiter{key: key, n: n, ready: make(chan struct{})}
	b.mu.Lock()
	e := b.waiting.PushBack(w)
	b.grantLocked()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("no room for %d bytes within %v", n, wait)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: it is ours
		return n, nil
	default:
	}
	b.waiting.Remove(e)
	b.grantLocked() // those behind it may fit now
	return 0, err
}

// release gives back n bytes of key's.
func (b *budget) release(key string, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	if h := b.held[key] - n; h > 0 {
		b.held[key] = h
	} else {
		delete(b.held, key)
	}
	b.grantLocked()
}

// grantLocked grants the waiters that fit, in order: it stops at the
// first that does not fit what is free, and passes over those whose key
// holds its share.
func (b *budget) grantLocked() {
	for e := b.waiting.Front(); e != nil; {
		w, next := e.Value.(*budgetWaiter), e.Next()
		switch {
		case b.held[w.key]+w.n > b.share():
		case b.free < w.n:
			return
		default:
			b.free -= w.n
			b.held[w.key] += w.n
			b.waiting.Remove(e)
			close(w.ready)
		}
		e = next
	}
}

// DefaultBodyMemory is the default bound of what request bodies hold at
// once in `genway serve` (GENWAY_BODY_MEMORY).
const DefaultBodyMemory = 256 << 20
