package localstore

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/storetest"
	"github.com/genway/genway/shared/webhooks"
)

func TestWebhookQueue(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "q.db")
	s := openClocked(t, path, c)
	for range 3 {
		if err := s.SendWebhook(ctx, "job_a", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if ls, _, _ := s.leaseHooks(c.Now(), 10, time.Minute); len(ls) != 0 {
		t.Fatalf("leased %v before its delay", ls)
	}
	if err := s.SendWebhook(ctx, "job_a", 0); err != nil { // earlier wins
		t.Fatal(err)
	}
	ls, _, err := s.leaseHooks(c.Now(), 10, time.Minute)
	if err != nil || len(ls) != 1 || ls[0].id != "job_a" {
		t.Fatalf("leaseHooks = %v, %v; want job_a alone (one message per job)", ls, err)
	}
	// Leased: not again until its lease ends...
	if again, _, _ := s.leaseHooks(c.Now(), 10, time.Minute); len(again) != 0 {
		t.Errorf("leased twice: %v", again)
	}
	// ...or a new process opens the file: the dead process's lease is over.
	s.Close()
	s = openClocked(t, path, c)
	ls, _, _ = s.leaseHooks(c.Now(), 10, time.Minute)
	if len(ls) != 1 {
		t.Fatalf("after reopen: leased %v; want job_a again", ls)
	}
	// A retry reschedules it; 0 deletes it.
	if err := s.settleHook(ls[0], 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if now, _, _ := s.leaseHooks(c.Now(), 10, time.Minute); len(now) != 0 {
		t.Errorf("a message to retry in 5 s leased at once")
	}
	c.Add(5 * time.Second)
	ls, _, _ = s.leaseHooks(c.Now(), 10, time.Minute)
	if len(ls) != 1 {
		t.Fatalf("retry not leased after its delay")
	}
	if err := s.settleHook(ls[0], 0); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Hour)
	if ls, next, _ := s.leaseHooks(c.Now(), 10, time.Minute); len(ls) != 0 || !next.IsZero() {
		t.Errorf("after a done delivery: leased %v, next %v; want an empty queue", ls, next)
	}
}

// TestSendWebhookDuringLease: a send during a lease that asks for an
// earlier time than the lease's end keeps the message when its delivery
// settles as done, visible at that time; one that asks for a later time
// changes nothing.
func TestSendWebhookDuringLease(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	tests := []struct {
		name  string
		delay time.Duration // of the send during the lease
		kept  bool          // the message is still there after settleHook(l, 0)
	}{
		{"earlier", 0, true},
		{"later", 2 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "job_" + tt.name
			if err := s.SendWebhook(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
			ls, _, err := s.leaseHooks(c.Now(), 1, time.Minute)
			if err != nil || len(ls) != 1 || ls[0].id != id {
				t.Fatalf("leaseHooks = %v, %v; want %s", ls, err, id)
			}
			if err := s.SendWebhook(ctx, id, tt.delay); err != nil {
				t.Fatal(err)
			}
			if err := s.settleHook(ls[0], 0); err != nil {
				t.Fatal(err)
			}
			again, _, err := s.leaseHooks(c.Now(), 1, time.Minute)
			if err != nil || (len(again) == 1) != tt.kept {
				t.Fatalf("after settling: leased %v, %v; want kept %v", again, err, tt.kept)
			}
			if tt.kept {
				if err := s.settleHook(again[0], 0); err != nil {
					t.Fatal(err)
				}
			}
			if _, next, _ := s.leaseHooks(c.Now().Add(time.Hour), 1, time.Minute); !next.IsZero() {
				t.Errorf("queue not empty at the end: next %v", next)
			}
		})
	}
}

func TestConsumeWebhooks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	deliver := func(ctx context.Context, id string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		switch {
		case id == "job_err" && calls[id] == 1:
			return 0, errors.New("store down")
		case id == "job_retry" && calls[id] == 1:
			return time.Millisecond, nil
		}
		if calls["job_err"] == 2 && calls["job_retry"] == 2 && calls["job_ok"] == 1 {
			close(done)
		}
		return 0, nil
	}
	for _, id := range []string{"job_ok", "job_retry", "job_err"} {
		if err := s.SendWebhook(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- s.ConsumeWebhooks(ctx, 2, time.Minute, deliver) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("calls %v; want job_ok once, job_retry and job_err twice", calls)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("ConsumeWebhooks = %v", err)
	}
}

func TestWebhookStore(t *testing.T) {
	storetest.RunWebhooks(t, func(t *testing.T) webhooks.Store { return openTemp(t) })
}
