package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

// granted reports whether w has been granted within guard.
func granted(w *budgetWaiter) bool {
	select {
	case <-w.ready:
		return true
	case <-time.After(guard):
		return false
	}
}

// queue adds a waiter to b as acquire does and returns it.
func queue(b *budget, key string, n int64) *budgetWaiter {
	w := &budgetWaiter{key: key, n: n, ready: make(chan struct{})}
	b.mu.Lock()
	b.waiting.PushBack(w)
	b.grantLocked()
	b.mu.Unlock()
	return w
}

func isGranted(w *budgetWaiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

func TestBudget(t *testing.T) {
	t.Run("in turn", func(t *testing.T) {
		b := newBudget(100)
		a := queue(b, "k1", 40)
		c := queue(b, "k2", 50)
		d := queue(b, "k3", 20) // 10 free: waits, and so does what follows
		e := queue(b, "k4", 5)
		if !isGranted(a) || !isGranted(c) || isGranted(d) || isGranted(e) {
			t.Fatalf("granted %v %v %v %v; want the first two, then a line", isGranted(a), isGranted(c), isGranted(d), isGranted(e))
		}
		b.release("k1", 40)
		if !granted(d) || !granted(e) {
			t.Error("the line was not granted once room freed")
		}
	})
	t.Run("a key holds at most half", func(t *testing.T) {
		b := newBudget(100)
		a1, a2 := queue(b, "a", 30), queue(b, "a", 30) // 60 > 50: the second waits
		o := queue(b, "o", 40)                         // another key passes it
		if !isGranted(a1) || isGranted(a2) || !isGranted(o) {
			t.Fatalf("granted %v %v %v; want a's first and the other key's, a's second waiting", isGranted(a1), isGranted(a2), isGranted(o))
		}
		b.release("a", 30)
		if !granted(a2) {
			t.Error("a's second was not granted once a's first ended")
		}
		if big := queue(b, "z", 1000); isGranted(big) {
			t.Error("more than the free room was granted")
		}
	})
	t.Run("gives up", func(t *testing.T) {
		b := newBudget(100)
		b.acquire(context.Background(), "k1", 50, guard)
		b.acquire(context.Background(), "k2", 50, guard)
		if n, err := b.acquire(context.Background(), "k3", 10, time.Millisecond); err == nil || n != 0 {
			t.Errorf("acquire with no room = %d, %v; want an error after its wait", n, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.acquire(ctx, "k3", 10, guard); !errors.Is(err, context.Canceled) {
			t.Errorf("acquire with a done context = %v; want its error", err)
		}
		b.release("k1", 50)
		if n, err := b.acquire(context.Background(), "k3", 50, guard); err != nil || n != 50 || b.waiting.Len() != 0 {
			t.Errorf("acquire after a release = %d, %v (%d waiting); want 50, the given-up ones gone", n, err, b.waiting.Len())
		}
	})
}

// echoBody is a handler that reads its body as the JSON routes do
// (readBody) and answers its length, with what the request's Bodies held
// while it ran.
func echoBody(held *int64, bodies *Bodies) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := readBody(r)
		if err != nil {
			writeError(w, r, nil, err)
			return
		}
		*held, _ = bodies.Held()
		writeJSON(w, http.StatusOK, map[string]int{"length": len(b)})
	})
}

// onlyReader hides a reader's type, so that httptest.NewRequest does not
// learn its length (a chunked body).
type onlyReader struct{ io.Reader }

func TestBodiesMemory(t *testing.T) {
	const big = 100 << 10
	tests := []struct {
		name     string
		body     io.Reader
		wantHeld int64
	}{
		{"a small body is not counted", strings.NewReader(`{"a":1}`), 0},
		{"a large body is counted BodyCost times", bytes.NewReader(jsonOf(big)), BodyCost * int64(len(jsonOf(big)))},
		{"a body of unknown length: what it was", onlyReader{bytes.NewReader(jsonOf(big))}, BodyCost * int64(len(jsonOf(big)))},
		{"a small body of unknown length: nothing", onlyReader{strings.NewReader(`{"a":1}`)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bodies := NewBodies(0, 64<<20)
			var held int64
			h := LimitBodies(bodies, echoBody(&held, bodies))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/x", tt.body))
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if held != tt.wantHeld {
				t.Errorf("held while it ran = %d; want %d", held, tt.wantHeld)
			}
			if after, _ := bodies.Held(); after != 0 {
				t.Errorf("held after it ended = %d; want 0", after)
			}
		})
	}
}

// jsonOf returns a JSON object of about n bytes.
func jsonOf(n int) []byte {
	return []byte(`{"a":"` + strings.Repeat("x", n) + `"}`)
}

// TestBodiesBusy: with no room for a body in time, 503 server_busy with
// Retry-After, and nothing held.
func TestBodiesBusy(t *testing.T) {
	bodies := NewBodies(0, 1<<20)
	bodies.wait = time.Millisecond
	bodies.budget.acquire(context.Background(), "key_other", bodies.budget.share(), guard)
	bodies.budget.acquire(context.Background(), "key_other2", bodies.budget.share(), guard)
	var held int64
	h := LimitBodies(bodies, echoBody(&held, bodies))
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/x", bytes.NewReader(jsonOf(100<<10)))
	h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{Account: "a", KeyID: "key_1"})))
	var env envelope
	json.Unmarshal(w.Body.Bytes(), &env)
	if w.Code != 503 || env.Error.Code == nil || *env.Error.Code != "server_busy" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("no room: %d %s, Retry-After %q; want 503 server_busy, Retry-After 1", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if held, _ := bodies.Held(); held != 1<<20 {
		t.Errorf("held = %d; want only the others' %d", held, 1<<20)
	}
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		name    string
		body    io.Reader
		cl      int64 // 0: as httptest.NewRequest sets it
		limit   int64
		want    string // the body read, or the error code
		wantErr bool
	}{
		{"announced", strings.NewReader("hello"), 0, 10, "hello", false},
		{"unknown length", onlyReader{strings.NewReader("hello")}, 0, 10, "hello", false},
		{"announced too large: not read", errReader{}, 11, 10, "request_too_large", true},
		{"read too large", onlyReader{strings.NewReader("hello world")}, 0, 10, "request_too_large", true},
		{"shorter than announced", strings.NewReader("hi"), 5, 10, "invalid_body", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", tt.body)
			if tt.cl != 0 {
				r.ContentLength = tt.cl
			}
			b, err := readLimited(r, tt.limit)
			if tt.wantErr {
				if e := apierr.As(err); e == nil || e.Code != tt.want {
					t.Errorf("readLimited = %q, %v; want %s", b, err, tt.want)
				}
				return
			}
			if err != nil || string(b) != tt.want {
				t.Errorf("readLimited = %q, %v; want %q", b, err, tt.want)
			}
			if r.ContentLength > 0 && cap(b) != len(b) {
				t.Errorf("an announced body read into %d bytes of room; want its %d, allocated once", cap(b), len(b))
			}
		})
	}
}

// errReader fails any read: a body that must not be read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("read") }

// TestTextBodyLimit: a chat or Responses request without an image, and
// every other route's, is limited to the text limit; one with an image to
// MaxBodyBytes.
func TestTextBodyLimit(t *testing.T) {
	text := strings.Repeat("word ", 3<<20/5) // 3 MiB, past the 2 MiB default
	image := bigPNG(t, 3<<20)
	chatText := `{"model":"synthetic/echo","max_tokens":4,"messages":[{"role":"user","content":"` + text + `"}]}`
	chatImage := `{"model":"synthetic/thinker","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"` + image + `"}}]}]}`
	respText := `{"model":"synthetic/echo","max_output_tokens":16,"input":"` + text + `"}`
	respImage := `{"model":"synthetic/thinker","max_output_tokens":16,"input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"` + image + `"}]}]}`
	gw := syntheticGateway(t)
	var held int64
	tests := []struct {
		name   string
		h      http.Handler
		body   string
		bodies *Bodies // nil: none (the defaults)
		want   int
	}{
		{"chat, text", ChatCompletions(gw, nil), chatText, nil, 413},
		{"chat, image", ChatCompletions(gw, nil), chatImage, nil, 200},
		{"chat, text, limit raised", ChatCompletions(gw, nil), chatText, NewBodies(4<<20, 0), 200},
		{"chat, text, limit lowered", ChatCompletions(gw, nil), `{"model":"synthetic/echo","messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`, NewBodies(1000, 0), 413},
		{"responses, text", Responses(gw, nil), respText, nil, 413},
		{"responses, image", Responses(gw, nil), respImage, nil, 200},
		{"another route", echoBody(&held, NewBodies(0, 0)), `{"a":"` + text + `"}`, nil, 413},
		{"another route, with an image's size", echoBody(&held, NewBodies(0, 0)), `{"image_url":"` + image + `"}`, nil, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if tt.bodies != nil {
				h = LimitBodies(tt.bodies, h)
			}
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			r = r.WithContext(auth.WithAccount(r.Context(), "acct"))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d (%.200s); want %d", w.Code, w.Body, tt.want)
			}
			if tt.want == 413 && !strings.Contains(w.Body.String(), `"code":"request_too_large"`) {
				t.Errorf("body %.300s; want request_too_large", w.Body)
			}
		})
	}
}
