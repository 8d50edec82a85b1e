package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineRecorder is a ResponseWriter that records the write deadlines
// set on it (http.ResponseController finds SetWriteDeadline).
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// TestStreamWriteDeadline: a stream's writes keep a write deadline about
// StreamWriteTimeout ahead, set again only once it is deadlineRenew old,
// not at every write.
func TestStreamWriteDeadline(t *testing.T) {
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	s := newSSEStream(w, nil, 0)
	start := time.Now()
	for range 100 {
		s.raw([]byte("data: {}\n\n"))
	}
	if len(w.set) == 0 || len(w.set) > 2 {
		t.Fatalf("100 writes set the deadline %d times; want once (twice if the machine stalled)", len(w.set))
	}
	if d := w.set[0].Sub(start); d < StreamWriteTimeout || d > StreamWriteTimeout+time.Second {
		t.Errorf("deadline %v after the start; want StreamWriteTimeout (%v)", d, StreamWriteTimeout)
	}
	n := len(w.set)
	time.Sleep(deadlineRenew + 100*time.Millisecond)
	s.raw([]byte("data: {}\n\n"))
	if len(w.set) != n+1 {
		t.Fatalf("a write %v after the deadline was set did not set it again (%d sets)", deadlineRenew, len(w.set))
	}
	if ahead := time.Until(w.set[n]); ahead < StreamWriteTimeout-time.Second {
		t.Errorf("the renewed deadline is %v ahead; want about StreamWriteTimeout", ahead)
	}
}
