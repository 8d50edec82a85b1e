package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// sweepStore is memStore plus a hand-written SweepStore: queuedAt is when a
// job's message was last sent (as the DynamoDB index's sort key). stale
// lists ids QueuedBefore returns whatever their status, as an eventually
// consistent index can.
type sweepStore struct {
	*memStore
	mu       sync.Mutex
	queuedAt map[string]int64
	sweeps   map[string]int
	stale    []string
	failures int // transitions into Failed
	idem     map[string]string
	listErr  error
}

func newSweepStore(js ...Job) *sweepStore {
	s := &sweepStore{memStore: newMemStore(), queuedAt: map[string]int64{}, sweeps: map[string]int{}, idem: map[string]string{}}
	for _, j := range js {
		s.memStore.jobs[j.ID] = j
		s.queuedAt[j.ID] = j.Created
	}
	return s
}

// Create implements Store, with idempotency keys: a replay returns the
// first job.
func (s *sweepStore) Create(ctx context.Context, j *Job, idem *Idempotency) (*Job, error) {
	s.mu.Lock()
	if idem != nil {
		if id, ok := s.idem[idem.Key]; ok {
			s.mu.Unlock()
			return s.Get(ctx, id)
		}
		s.idem[idem.Key] = j.ID
	}
	s.queuedAt[j.ID] = j.Created
	s.mu.Unlock()
	return s.memStore.Create(ctx, j, idem)
}

func (s *sweepStore) Transition(ctx context.Context, id string, from, to Status, p Patch) (*Job, error) {
	j, err := s.memStore.Transition(ctx, id, from, to, p)
	if err == nil && to == Failed {
		s.mu.Lock()
		s.failures++
		s.mu.Unlock()
	}
	return j, err
}

func (s *sweepStore) QueuedBefore(ctx context.Context, t time.Time, limit int) ([]string, error) {
	if s.listErr != nil {
		return nil, s.listErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := append([]string(nil), s.stale...)
	for id, at := range s.queuedAt {
		if j, _ := s.memStore.Get(ctx, id); j != nil && j.Status == Queued && at < t.Unix() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

func (s *sweepStore) MarkSwept(ctx context.Context, id string, at time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.memStore.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	if j.Status != Queued {
		return 0, ErrConflict
	}
	s.sweeps[id]++
	s.queuedAt[id] = at.Unix()
	return s.sweeps[id], nil
}

// memQueue records enqueued ids; err, if set, fails every Enqueue.
type memQueue struct {
	mu     sync.Mutex
	ids    []string
	delays []time.Duration
	err    error
}

func (q *memQueue) Enqueue(ctx context.Context, id string, delay time.Duration) error {
	if q.err != nil {
		return q.err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	q.delays = append(q.delays, delay)
	return nil
}

// EnqueueGroup enqueues as Enqueue does (groupQueue records the groups).
func (q *memQueue) EnqueueGroup(ctx context.Context, id, _ string, delay time.Duration) error {
	return q.Enqueue(ctx, id, delay)
}

func (q *memQueue) sent() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.ids...)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is a settable Service.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestSweep(t *testing.T) {
	ctx := context.Background()
	job := func(id string, st Status, created int64) Job {
		return Job{ID: id, Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: st, Input: Input{Prompt: "p", Duration: 1, Format: "mp3"}, Price: 1, Created: created, Updated: created}
	}
	const now = 10_000
	tests := []struct {
		name     string
		jobs     []Job
		stale    []string // listed although not queued (index lag)
		queueErr error
		want     SweepResult
		wantSent []string
		wantErr  bool
	}{
		{
			name: "old queued jobs only",
			jobs: []Job{
				job("job_old", Queued, now-300), job("job_new", Queued, now-60),
				job("job_proc", Processing, now-900), job("job_done", Completed, now-900),
			},
			want:     SweepResult{Found: 1, Requeued: 1},
			wantSent: []string{"job_old"},
		},
		{
			name:     "a job that left queued since the index saw it is skipped",
			jobs:     []Job{job("job_old", Queued, now-300), job("job_proc", Processing, now-900)},
			stale:    []string{"job_proc", "job_gone"},
			want:     SweepResult{Found: 3, Requeued: 1, Skipped: 2},
			wantSent: []string{"job_old"},
		},
		{
			name:     "nothing old",
			jobs:     []Job{job("job_new", Queued, now-119)},
			want:     SweepResult{},
			wantSent: nil,
		},
		{
			name:     "enqueue errors are reported and the sweep goes on",
			jobs:     []Job{job("job_a", Queued, now-300), job("job_b", Queued, now-300)},
			queueErr: errors.New("sqs throttled"),
			want:     SweepResult{Found: 2},
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSweepStore(tt.jobs...)
			st.stale = tt.stale
			q := &memQueue{err: tt.queueErr}
			svc := &Service{Store: st, Queue: q, Sweeps: st, Log: discard(), Now: func() time.Time { return time.Unix(now, 0) }}
			got, err := svc.Sweep(ctx, 2*time.Minute)
			if (err != nil) != tt.wantErr {
				t.Errorf("Sweep(2m) error = %v; want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Sweep(2m) = %+v; want %+v", got, tt.want)
			}
			if sent := q.sent(); !equal(sent, tt.wantSent) {
				t.Errorf("Sweep(2m) sent %v; want %v", sent, tt.wantSent)
			}
		})
	}
}

// TestSweepBefore: a restart's sweep re-sends every job whose message was
// sent before the given time, however recent, and marks each swept once.
func TestSweepBefore(t *testing.T) {
	ctx := context.Background()
	job := func(id string, st Status, created int64) Job {
		return Job{ID: id, Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: st, Input: Input{Prompt: "p", Duration: 1, Format: "mp3"}, Price: 1, Created: created, Updated: created}
	}
	const now = 10_000
	tests := []struct {
		name     string
		before   int64
		want     SweepResult
		wantSent []string
	}{
		{"the jobs of the process that died", now - 5, SweepResult{Found: 2, Requeued: 2}, []string{"job_a_second_old", "job_old"}},
		{"none sent before", now - 400, SweepResult{}, nil},
		{"and the restart's own", now + 1, SweepResult{Found: 3, Requeued: 3}, []string{"job_a_second_old", "job_now", "job_old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSweepStore(job("job_old", Queued, now-300), job("job_a_second_old", Queued, now-6), job("job_now", Queued, now),
				job("job_done", Completed, now-900))
			q := &memQueue{}
			svc := &Service{Store: st, Queue: q, Sweeps: st, Log: discard(), Now: func() time.Time { return time.Unix(now, 0) }}
			got, err := svc.SweepBefore(ctx, time.Unix(tt.before, 0))
			if err != nil || got != tt.want {
				t.Errorf("SweepBefore(%d) = %+v, %v; want %+v", tt.before, got, err, tt.want)
			}
			if sent := q.sent(); !equal(sent, tt.wantSent) {
				t.Errorf("SweepBefore(%d) sent %v; want %v", tt.before, sent, tt.wantSent)
			}
			for _, id := range tt.wantSent {
				if st.sweeps[id] != 1 || st.queuedAt[id] != now {
					t.Errorf("SweepBefore(%d): %s swept %d times, message at %d; want once, at %d", tt.before, id, st.sweeps[id], st.queuedAt[id], now)
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSweepGivesUp sweeps a job that never starts: it is re-sent MaxSweeps
// times, then failed once (which releases its hold), then left alone.
func TestSweepGivesUp(t *testing.T) {
	ctx := context.Background()
	const maxSweeps = 3
	st := newSweepStore(Job{ID: "job_stuck", Account: "a", Status: Queued, Price: 5, Created: 1000, Updated: 1000})
	q := &memQueue{}
	c := &clock{t: time.Unix(1000, 0)}
	svc := &Service{Store: st, Queue: q, Sweeps: st, Log: discard(), Now: c.now, MaxSweeps: maxSweeps}
	for run := 1; run <= maxSweeps+3; run++ {
		c.t = c.t.Add(3 * time.Minute)
		got, err := svc.Sweep(ctx, 2*time.Minute)
		var want SweepResult
		switch {
		case run <= maxSweeps:
			want = SweepResult{Found: 1, Requeued: 1}
		case run == maxSweeps+1:
			want = SweepResult{Found: 1, Failed: 1}
		}
		if err != nil || got != want {
			t.Errorf("Sweep run %d = %+v, %v; want %+v", run, got, err, want)
		}
	}
	if n := len(q.sent()); n != maxSweeps {
		t.Errorf("messages sent = %d; want %d", n, maxSweeps)
	}
	j, _ := st.Get(ctx, "job_stuck")
	if j.Status != Failed || j.Error == nil || j.Error.Code != CodeInternal {
		t.Errorf("job = %s %+v; want failed with %s", j.Status, j.Error, CodeInternal)
	}
	if st.failures != 1 {
		t.Errorf("transitions into failed = %d; want 1 (one release)", st.failures)
	}
}

// TestSweepLimit bounds the work of one run; the next run takes the rest.
func TestSweepLimit(t *testing.T) {
	ctx := context.Background()
	var js []Job
	for _, id := range []string{"job_1", "job_2", "job_3", "job_4", "job_5"} {
		js = append(js, Job{ID: id, Account: "a", Status: Queued, Created: 100, Updated: 100})
	}
	st := newSweepStore(js...)
	q := &memQueue{}
	svc := &Service{Store: st, Queue: q, Sweeps: st, Log: discard(), Now: func() time.Time { return time.Unix(1000, 0) }, SweepLimit: 2}
	for i, want := range []int{2, 2, 1, 0} {
		if got, err := svc.Sweep(ctx, time.Minute); err != nil || got.Requeued != want {
			t.Errorf("Sweep run %d = %+v, %v; want %d requeued", i+1, got, err, want)
		}
	}
	if n := len(q.sent()); n != 5 {
		t.Errorf("messages sent = %d; want 5", n)
	}
}

func TestSweepErrors(t *testing.T) {
	ctx := context.Background()
	st := newSweepStore()
	tests := []struct {
		name      string
		svc       *Service
		olderThan time.Duration
	}{
		{"no sweep store", &Service{Store: st, Queue: &memQueue{}, Log: discard()}, time.Minute},
		{"zero threshold", &Service{Store: st, Queue: &memQueue{}, Sweeps: st, Log: discard()}, 0},
		{"list fails", &Service{Store: st, Queue: &memQueue{}, Sweeps: &sweepStore{memStore: newMemStore(), listErr: errors.New("throttled")}, Log: discard()}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := tt.svc.Sweep(ctx, tt.olderThan); err == nil || got != (SweepResult{}) {
				t.Errorf("Sweep(%v) = %+v, %v; want an error and nothing done", tt.olderThan, got, err)
			}
		})
	}
}

// TestSweepIdempotentReplay: a replay of a create (same Idempotency-Key)
// never sends a message of its own, whether the first call's message went
// out or not; the only second path is Sweep, once the job is old.
func TestSweepIdempotentReplay(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	req := &CreateRequest{Type: TypeSFX, Model: "synthetic-sfx", Prompt: "pop", Duration: ptr(1)}
	tests := []struct {
		name         string
		firstSends   bool // the first call's enqueue works
		wantAfterAll int  // messages after the replays and a sweep of the old job
	}{
		{"first call enqueued", true, 2},
		{"first call died before enqueueing", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSweepStore()
			q := &memQueue{}
			c := &clock{t: time.Unix(5000, 0)}
			svc := &Service{Store: st, Queue: q, Sweeps: st, Catalog: cat, Log: discard(), Now: c.now}
			var first *Job
			if tt.firstSends {
				if first, err = svc.Create(ctx, "a", req, "k1", "h1"); err != nil {
					t.Fatal(err)
				}
			} else {
				// What Create does before enqueueing, then nothing.
				first = &Job{ID: "job_sfx_cccccccccccccccccccc", Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: Queued, Created: c.t.Unix(), Updated: c.t.Unix()}
				if _, err := st.Create(ctx, first, &Idempotency{Key: "a/k1", BodyHash: "h1", JobID: first.ID}); err != nil {
					t.Fatal(err)
				}
			}
			sentFirst := len(q.sent())
			for i := 0; i < 3; i++ {
				got, err := svc.Create(ctx, "a", req, "k1", "h1")
				if err != nil || got.ID != first.ID {
					t.Fatalf("Create(replay %d) = %v, %v; want %s", i+1, got, err, first.ID)
				}
			}
			if got, err := svc.Sweep(ctx, 2*time.Minute); err != nil || got.Requeued != 0 {
				t.Errorf("Sweep(fresh job) = %+v, %v; want nothing re-sent", got, err)
			}
			if n := len(q.sent()); n != sentFirst {
				t.Errorf("messages after replays = %d; want %d (replays send nothing)", n, sentFirst)
			}
			c.t = c.t.Add(3 * time.Minute)
			if _, err := svc.Create(ctx, "a", req, "k1", "h1"); err != nil {
				t.Fatal(err)
			}
			if got, err := svc.Sweep(ctx, 2*time.Minute); err != nil || got.Requeued != 1 {
				t.Errorf("Sweep(old job) = %+v, %v; want 1 re-sent", got, err)
			}
			if n := len(q.sent()); n != tt.wantAfterAll {
				t.Errorf("messages = %d; want %d", n, tt.wantAfterAll)
			}
		})
	}
}

// TestSweepDuplicateDelivery: a job swept while its original message is
// also delivered is generated once and completes once, whether the two
// deliveries run one after the other or at the same time.
func TestSweepDuplicateDelivery(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, concurrent := range []bool{false, true} {
		t.Run(map[bool]string{false: "in turn", true: "concurrently"}[concurrent], func(t *testing.T) {
			const id = "job_sfx_dddddddddddddddddddd"
			st := newSweepStore(Job{ID: id, Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: Queued, Input: Input{Prompt: "p", Duration: 1, Format: "mp3"}, Price: 1, Created: 100, Updated: 100})
			q := &memQueue{}
			q.Enqueue(ctx, id, 0) // the original message, still in flight
			svc := &Service{Store: st, Queue: q, Sweeps: st, Log: discard(), Now: func() time.Time { return time.Unix(1000, 0) }}
			if got, err := svc.Sweep(ctx, 2*time.Minute); err != nil || got.Requeued != 1 {
				t.Fatalf("Sweep = %+v, %v; want 1 re-sent", got, err)
			}
			var mu sync.Mutex
			generated := 0
			p := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
				mu.Lock()
				generated++
				mu.Unlock()
				return media("x", 1), nil
			})
			w := &Worker{Store: st, Media: &memMedia{}, Catalog: cat, Providers: map[string]Provider{"synthetic": p}, Log: discard(),
				Lease: 2 * time.Minute, Now: func() time.Time { return time.Unix(1000, 0) }}
			msgs := q.sent()
			if len(msgs) != 2 {
				t.Fatalf("messages = %v; want the original and the swept one", msgs)
			}
			var wg sync.WaitGroup
			for _, m := range msgs {
				if !concurrent {
					w.Process(ctx, m) // the second finds the job completed
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.Process(ctx, m) // the loser is sent back (ErrBusy) or finds it final
				}()
			}
			wg.Wait()
			j, _ := st.Get(ctx, id)
			if j.Status != Completed || j.Attempts != 1 || generated != 1 || st.completions != 1 {
				t.Errorf("job %s after %d attempts, generated %d times, completed %d times; want completed once after 1 attempt",
					j.Status, j.Attempts, generated, st.completions)
			}
		})
	}
}
