package localstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/jobs"
)

// openClocked opens a store at path whose queue reads c.
func openClocked(t *testing.T, path string, c *clock) *Store {
	t.Helper()
	s, err := OpenWith(path, Options{Now: c.Now})
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// leaseIDs leases up to n messages at now and returns their ids.
func leaseIDs(t *testing.T, s *Store, now time.Time, n int, vis time.Duration) []lease {
	t.Helper()
	ls, _, err := s.lease(now, n, vis, nil)
	if err != nil {
		t.Fatalf("lease(%v) = %v", now, err)
	}
	return ls
}

func ids(ls []lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.id
	}
	return out
}

func TestEnqueueOneMessagePerID(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	for range 3 {
		if err := s.Enqueue(ctx, "a", 0); err != nil {
			t.Fatalf("Enqueue(a) = %v", err)
		}
	}
	got := leaseIDs(t, s, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].id != "a" || got[0].receives != 1 {
		t.Errorf("lease after 3 Enqueue(a) = %+v; want one message a, receive 1", got)
	}
	if _, err := s.messages(); err != nil {
		t.Errorf("queue index: %v", err)
	}
}

func TestEnqueueDelay(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		delays []time.Duration // successive Enqueue calls for one id
		want   time.Duration   // when it becomes visible
	}{
		{"delay", []time.Duration{time.Hour}, time.Hour},
		{"earlier wins", []time.Duration{time.Hour, time.Minute}, time.Minute},
		{"later ignored", []time.Duration{time.Minute, time.Hour}, time.Minute},
		{"negative is now", []time.Duration{-time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
			start := c.Now()
			for _, d := range tt.delays {
				if err := s.Enqueue(ctx, "a", d); err != nil {
					t.Fatalf("Enqueue(a, %v) = %v", d, err)
				}
			}
			if tt.want > 0 {
				ls, next, err := s.lease(start.Add(tt.want-time.Second), 10, time.Minute, nil)
				if err != nil || len(ls) != 0 || !next.Equal(start.Add(tt.want)) {
					t.Errorf("lease before due = %+v, next %v, %v; want none, next %v", ls, next, err, start.Add(tt.want))
				}
			}
			if got := leaseIDs(t, s, start.Add(tt.want), 10, time.Minute); len(got) != 1 {
				t.Errorf("lease when due = %v; want [a]", ids(got))
			}
		})
	}
}

func TestLeaseExpiryAndStaleAck(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	if err := s.Enqueue(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	t0 := c.Now()
	first := leaseIDs(t, s, t0, 10, time.Minute)
	if len(first) != 1 {
		t.Fatalf("lease = %v; want [a]", ids(first))
	}
	if got := leaseIDs(t, s, t0.Add(30*time.Second), 10, time.Minute); len(got) != 0 {
		t.Errorf("lease during visibility = %v; want none", ids(got))
	}
	second := leaseIDs(t, s, t0.Add(61*time.Second), 10, time.Minute)
	if len(second) != 1 || second[0].receives != 2 {
		t.Fatalf("lease after visibility = %+v; want a again, receive 2", second)
	}
	// The first worker's late ack must not delete the message the second
	// worker holds.
	if err := s.ack(first[0]); err != nil {
		t.Fatalf("ack(stale) = %v", err)
	}
	if m, _ := s.messages(); len(m) != 1 {
		t.Errorf("messages after stale ack = %v; want a kept", m)
	}
	if err := s.nack(first[0], t0); err != nil {
		t.Fatalf("nack(stale) = %v", err)
	}
	if m, _ := s.messages(); !m["a"].Leased {
		t.Errorf("message after stale nack = %+v; want still leased", m["a"])
	}
	if err := s.ack(second[0]); err != nil {
		t.Fatalf("ack = %v", err)
	}
	if m, err := s.messages(); err != nil || len(m) != 0 {
		t.Errorf("messages after ack = %v, %v; want none", m, err)
	}
}

func TestLeaseBounded(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	for i := range 10 {
		if err := s.Enqueue(ctx, fmt.Sprintf("m%02d", i), time.Duration(i)*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	got := leaseIDs(t, s, c.Now().Add(time.Second), 3, time.Minute)
	if want := []string{"m00", "m01", "m02"}; fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Errorf("lease(3) = %v; want %v (oldest visible first)", ids(got), want)
	}
}

func TestLeaseSurvivesCrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	c := newClock()
	s, err := OpenWith(path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"leased", "delayed"} {
		d := time.Duration(0)
		if id == "delayed" {
			d = time.Hour
		}
		if err := s.Enqueue(ctx, id, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := leaseIDs(t, s, c.Now(), 10, time.Hour); len(got) != 1 {
		t.Fatalf("lease = %v; want [leased]", ids(got))
	}
	if err := s.Close(); err != nil { // the process "dies" holding the lease
		t.Fatal(err)
	}
	s = openClocked(t, path, c)
	got := leaseIDs(t, s, c.Now(), 10, time.Hour)
	if len(got) != 1 || got[0].id != "leased" || got[0].receives != 2 {
		t.Errorf("lease after reopen = %+v; want leased again at once (receive 2), delayed still hidden", got)
	}
}

func TestNackBackoff(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	if err := s.Enqueue(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	now := c.Now()
	for n := 1; n <= 7; n++ {
		ls := leaseIDs(t, s, now, 10, time.Minute)
		if len(ls) != 1 || ls[0].receives != n {
			t.Fatalf("lease #%d = %+v; want a, receive %d", n, ls, n)
		}
		if err := s.nack(ls[0], now); err != nil {
			t.Fatal(err)
		}
		wait := backoff(n)
		if got := leaseIDs(t, s, now.Add(wait-time.Millisecond), 10, time.Minute); len(got) != 0 {
			t.Fatalf("lease %v after failure #%d = %v; want none before %v", wait-time.Millisecond, n, ids(got), wait)
		}
		now = now.Add(wait)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, 2 * time.Second}, {2, 4 * time.Second}, {5, 32 * time.Second}, {6, time.Minute}, {40, time.Minute}}
	for _, tt := range tests {
		if got := backoff(tt.n); got != tt.want {
			t.Errorf("backoff(%d) = %v; want %v", tt.n, got, tt.want)
		}
	}
}

func TestEnqueueWhileLeased(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		final     bool // the job is completed when the lease is acked
		wantAgain bool
	}{
		{"job still running is redelivered", false, true},
		{"final job is dropped", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
			if _, err := s.Grant(ctx, "acct", 100, 1); err != nil {
				t.Fatal(err)
			}
			j, err := s.Create(ctx, &jobs.Job{ID: "job_sfx_cccccccccccccccccccc", Account: "acct", Price: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ls := leaseIDs(t, s, c.Now(), 10, time.Minute)
			if len(ls) != 1 || ls[0].id != j.ID {
				t.Fatalf("lease after Create = %v; want [%s]", ids(ls), j.ID)
			}
			if err := s.Enqueue(ctx, j.ID, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true}); err != nil {
				t.Fatal(err)
			}
			if tt.final {
				if _, err := s.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.ack(ls[0]); err != nil {
				t.Fatal(err)
			}
			if got := leaseIDs(t, s, c.Now().Add(4*time.Second), 10, time.Minute); len(got) != 0 {
				t.Errorf("lease before the requeue delay = %v; want none", ids(got))
			}
			got := leaseIDs(t, s, c.Now().Add(5*time.Second), 10, time.Minute)
			if again := len(got) == 1; again != tt.wantAgain {
				t.Errorf("lease after ack = %v; want redelivered %v", ids(got), tt.wantAgain)
			}
		})
	}
}

func TestCreateEnqueues(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	if _, err := s.Grant(ctx, "acct", 100, 1); err != nil {
		t.Fatal(err)
	}
	j := &jobs.Job{ID: "job_sfx_dddddddddddddddddddd", Account: "acct", Price: 1}
	if _, err := s.Create(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, j.ID, 0); err != nil { // what Service.Create does next
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, &jobs.Job{ID: "job_sfx_eeeeeeeeeeeeeeeeeeee", Account: "acct", Price: 1000}, nil); !errors.Is(err, jobs.ErrInsufficientCredits) {
		t.Fatalf("Create(too dear) = %v; want ErrInsufficientCredits", err)
	}
	got := leaseIDs(t, s, c.Now(), 10, time.Minute)
	if len(got) != 1 || got[0].id != j.ID {
		t.Errorf("lease after Create + Enqueue = %v; want exactly [%s]", ids(got), j.ID)
	}
}

// TestConsume runs the consumer for real: every message is processed once,
// at most workers at a time, failures come back after the backoff, and
// success deletes.
func TestConsume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	const n, workers = 30, 4
	for i := range n {
		if err := s.Enqueue(ctx, fmt.Sprintf("m%02d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	calls := make(map[string]int)
	running, peak := 0, 0
	seen := make(chan string, 2*n)
	process := func(ctx context.Context, id string) error {
		mu.Lock()
		calls[id]++
		first := calls[id] == 1
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		seen <- id
		if id == "m07" && first {
			return errors.New("transient")
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.Consume(ctx, workers, time.Minute, process) }()

	deadline := time.After(30 * time.Second)
	for got := 0; got < n; got++ {
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("processed %d of %d messages before the deadline", got, n)
		}
	}
	// m07 failed once: it is back only after its backoff, on the clock.
	// Wait for the nack to land before moving the clock.
	for i := 0; ; i++ {
		m, err := s.messages()
		if err != nil {
			t.Fatal(err)
		}
		if msg, ok := m["m07"]; ok && !msg.Leased {
			break
		}
		if i == 1000 {
			t.Fatalf("m07 not released after its failure: %+v", m["m07"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Add(backoff(1))
	if err := s.Enqueue(ctx, "late", 0); err != nil { // also wakes the consumer
		t.Fatal(err)
	}
	for got := 0; got < 2; got++ {
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("retry and late message not processed before the deadline")
		}
	}
	for range 100 { // acks of the last calls land just after process returns
		if m, _ := s.messages(); len(m) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume() = %v; want nil after cancel", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("m%02d", i)
		want := 1
		if id == "m07" {
			want = 2
		}
		if calls[id] != want {
			t.Errorf("process(%q) called %d times; want %d", id, calls[id], want)
		}
	}
	if calls["late"] != 1 {
		t.Errorf("process(late) called %d times; want 1", calls["late"])
	}
	if peak > workers {
		t.Errorf("peak concurrent calls = %d; want <= %d", peak, workers)
	}
	if m, err := s.messages(); err != nil || len(m) != 0 {
		t.Errorf("messages after all succeeded = %v, %v; want none", m, err)
	}
}

// TestLeaseFair: with one account's backlog ahead in the queue, a lease
// picks the other account's job as soon as the first has one in flight;
// with one account only, it is oldest first.
func TestLeaseFair(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openClocked(t, filepath.Join(t.TempDir(), "q.db"), c)
	for _, a := range []string{"a", "b"} {
		if _, err := s.Grant(ctx, a, 1000, c.Now().Unix()); err != nil {
			t.Fatal(err)
		}
	}
	// a's four videos, then b's sound, each a millisecond later.
	for i, acct := range []string{"a", "a", "a", "a", "b"} {
		c.t = c.t.Add(time.Millisecond)
		j := &jobs.Job{ID: fmt.Sprintf("job_video_%020d", i), Account: acct, Type: jobs.TypeVideo, Model: "m", Price: 1, Created: c.Now().Unix()}
		if _, err := s.Create(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
	}
	now := c.Now().Add(time.Second)
	tests := []struct {
		name string
		busy map[string]int
		n    int
		want []string
	}{
		{"two free workers, none busy: one of each", nil, 2, []string{"a", "b"}},
		{"one free worker, a already running one: b", map[string]int{"a": 1}, 1, []string{"b"}},
		{"b busy too: a's oldest", map[string]int{"a": 1, "b": 1}, 1, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, _, err := s.lease(now, tt.n, time.Millisecond, tt.busy)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range ls {
				got = append(got, l.account)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("leased accounts %v; want %v", got, tt.want)
			}
			now = now.Add(time.Second) // the leases expire: the next case sees every message again
		})
	}
}

// TestQueueStoredFormat opens a file whose queues hold messages as the
// store has always written them (a job message leased with a requeue, a
// webhook message leased) and checks both queues read them, expire their
// leases on Open, and write them back in the same JSON.
func TestQueueStoredFormat(t *testing.T) {
	c := newClock()
	now := c.Now().UnixNano()
	tests := []struct {
		q     queue
		id    string
		raw   string // as stored by a process that died holding the lease
		lease func(s *Store) ([]lease, time.Time, error)
	}{
		{jobQueue, "job_a", fmt.Sprintf(`{"visible_at":%d,"receives":1,"leased":true,"requeue":true,"requeue_at":%d}`, now+int64(time.Hour), now+int64(time.Second)),
			func(s *Store) ([]lease, time.Time, error) { return s.lease(c.Now(), 10, time.Minute, nil) }},
		{hookQueue, "job_h", fmt.Sprintf(`{"visible_at":%d,"receives":1,"leased":true}`, now+int64(time.Hour)),
			func(s *Store) ([]lease, time.Time, error) { return s.leaseHooks(c.Now(), 10, time.Minute) }},
	}
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, tt := range tests {
			var m message
			if err := json.Unmarshal([]byte(tt.raw), &m); err != nil {
				return err
			}
			if err := put(tx, tt.q.msgs, []byte(tt.id), []byte(tt.raw)); err != nil {
				return err
			}
			if err := put(tx, tt.q.vis, visKey(m.VisibleAt, tt.id), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatalf("write the old file: %v, %v", err, cerr)
	}
	s := openClocked(t, path, c)
	for _, tt := range tests {
		t.Run(tt.q.msgs, func(t *testing.T) {
			ls, _, err := tt.lease(s)
			if err != nil || len(ls) != 1 || ls[0].id != tt.id || ls[0].receives != 2 {
				t.Fatalf("lease after Open = %+v, %v; want %s again at once, receive 2", ls, err, tt.id)
			}
			var raw string
			err = s.db.View(func(tx *bolt.Tx) error {
				raw = string(tx.Bucket([]byte(tt.q.msgs)).Get([]byte(tt.id)))
				return nil
			})
			want := fmt.Sprintf(`{"visible_at":%d,"receives":2,"leased":true}`, now+int64(time.Minute))
			if err != nil || raw != want {
				t.Errorf("stored message = %s, %v; want %s", raw, err, want)
			}
		})
	}
	if _, err := s.messages(); err != nil {
		t.Errorf("job queue index: %v", err)
	}
}

// put writes k=v in bucket name, creating it if needed.
func put(tx *bolt.Tx, name string, k, v []byte) error {
	b, err := tx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return err
	}
	return b.Put(k, v)
}
