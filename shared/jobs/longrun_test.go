package jobs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// fakeVendor is a long-running Provider: Start hands out a handle, Poll
// answers from script (one entry per call; the last repeats).
type fakeVendor struct {
	mu       sync.Mutex
	startErr []error // consumed one per Start; nil entries succeed
	script   []pollAnswer
	submits  int
	polls    int
	cancels  int
}

type pollAnswer struct {
	done bool
	body string
	size int64 // 0: unknown (-1)
	err  error
}

func (v *fakeVendor) Start(ctx context.Context, m *catalog.Model, j *Job) (*Step, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.submits++
	if len(v.startErr) > 0 {
		err := v.startErr[0]
		v.startErr = v.startErr[1:]
		if err != nil {
			return nil, err
		}
	}
	return &Step{Handle: &Handle{ID: "op-" + j.ID, StatusURL: "http://127.0.0.1/status/" + j.ID}}, nil
}

func (v *fakeVendor) Poll(ctx context.Context, m *catalog.Model, j *Job) (*Result, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j.Handle == nil || j.Handle.ID != "op-"+j.ID {
		return nil, errors.New("polled without the stored handle")
	}
	a := v.script[min(v.polls, len(v.script)-1)]
	v.polls++
	if a.err != nil {
		return nil, a.err
	}
	if !a.done {
		return nil, nil
	}
	r := media(a.body, 0)
	r.ContentType, r.Ext, r.Size = "video/mp4", "mp4", -1
	if a.size != 0 {
		r.Size = a.size
	}
	return r, nil
}

func (v *fakeVendor) Cancel(ctx context.Context, m *catalog.Model, j *Job) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cancels++
	return nil
}

func (v *fakeVendor) counts() (submits, polls, cancels int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.submits, v.polls, v.cancels
}

const lrID = "job_video_aaaaaaaaaaaaaaaaaaaa"

// longRun sets up a video job on a long-running vendor with a settable
// clock; the catalog's synthetic-video model stands for the vendor's.
func longRun(t *testing.T, v *fakeVendor, lease time.Duration) (*Worker, *memStore, *memQueue, *clock) {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore(Job{ID: lrID, Account: "a", Type: TypeVideo, Model: "synthetic-video", Status: Queued,
		Input: Input{Prompt: "p", Duration: 4, Size: "640x360"}, Price: 4, Created: 1000, Updated: 1000})
	q := &memQueue{}
	c := &clock{t: time.Unix(1000, 0)}
	w := &Worker{Store: st, Queue: q, Media: &memMedia{}, Catalog: cat, Providers: map[string]Provider{"synthetic": v},
		Log: discard(), Lease: lease, Now: c.now, PollInterval: 10 * time.Second, RetryBase: time.Second}
	return w, st, q, c
}

func (q *memQueue) last() (string, time.Duration, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ids) == 0 {
		return "", 0, 0
	}
	return q.ids[len(q.ids)-1], q.delays[len(q.delays)-1], len(q.ids)
}

func getJob(t *testing.T, st *memStore) *Job {
	t.Helper()
	j, err := st.Get(context.Background(), lrID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestLongRunningPolls runs a job across several delayed polls: one
// submit, the handle stored before the first poll, each poll one short
// run that re-enqueues the job with the poll interval.
func TestLongRunningPolls(t *testing.T) {
	for _, lease := range []time.Duration{0, 2 * time.Minute} {
		t.Run("lease "+lease.String(), func(t *testing.T) {
			ctx := context.Background()
			v := &fakeVendor{script: []pollAnswer{{}, {}, {done: true, body: "mp4bytes"}}}
			w, st, q, c := longRun(t, v, lease)
			if err := w.Process(ctx, lrID); err != nil {
				t.Fatalf("Process (submit) = %v", err)
			}
			j := getJob(t, st)
			if j.Status != Processing || j.Handle == nil || j.Handle.ID != "op-"+lrID || j.Handle.Submitted != 1000 {
				t.Fatalf("after submit: status %s, handle %+v; want processing with the vendor's handle", j.Status, j.Handle)
			}
			for round := 1; round <= 3; round++ {
				id, delay, n := q.last()
				if id != lrID || delay != 10*time.Second || n != round {
					t.Fatalf("round %d: last message %q after %v (%d sent); want the job after 10s", round, id, delay, n)
				}
				c.t = c.t.Add(delay)
				if err := w.Process(ctx, lrID); err != nil {
					t.Fatalf("Process (poll %d) = %v", round, err)
				}
			}
			j = getJob(t, st)
			submits, polls, _ := v.counts()
			if j.Status != Completed || j.Output == nil || j.Output.Bytes != 8 || j.Output.ContentType != "video/mp4" || j.Output.Duration != 4 || j.Output.Width != 640 {
				t.Errorf("job = %s, output %+v; want completed with 8 bytes of video/mp4, 4 s, 640 wide", j.Status, j.Output)
			}
			if submits != 1 || polls != 3 || j.Attempts != 1 {
				t.Errorf("submits %d, polls %d, attempts %d; want 1, 3, 1", submits, polls, j.Attempts)
			}
			if _, _, n := q.last(); n != 3 {
				t.Errorf("messages sent = %d; want 3 (one per pending answer)", n)
			}
		})
	}
}

// TestLongRunningDuplicates delivers a job's message many times at once,
// at submit and at a poll round: one submit, one poll per round.
func TestLongRunningDuplicates(t *testing.T) {
	ctx := context.Background()
	v := &fakeVendor{script: []pollAnswer{{}, {done: true, body: "x"}}}
	w, st, _, c := longRun(t, v, 2*time.Minute)
	burst := func() {
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Process(ctx, lrID) // losers: ErrBusy (sent back) or dropped
			}()
		}
		wg.Wait()
	}
	burst()
	if submits, _, _ := v.counts(); submits != 1 {
		t.Fatalf("submits after a burst of 8 deliveries = %d; want 1", submits)
	}
	c.t = c.t.Add(10 * time.Second)
	burst()
	if _, polls, _ := v.counts(); polls != 1 {
		t.Fatalf("polls after a burst of 8 deliveries = %d; want 1", polls)
	}
	// A straggler of the burst arriving early is dropped, not polled.
	c.t = c.t.Add(3 * time.Second)
	if err := w.Process(ctx, lrID); err != nil {
		t.Fatalf("early duplicate: Process = %v; want nil (dropped)", err)
	}
	if _, polls, _ := v.counts(); polls != 1 {
		t.Fatalf("an early duplicate polled the vendor (polls %d)", polls)
	}
	c.t = c.t.Add(10 * time.Second)
	burst()
	submits, polls, _ := v.counts()
	if j := getJob(t, st); j.Status != Completed || submits != 1 || polls != 2 || st.completions != 1 {
		t.Errorf("job %s, submits %d, polls %d, completions %d; want completed, 1, 2, 1", j.Status, submits, polls, st.completions)
	}
}

// TestLongRunningRestart is a restart of the embedded queue mid-poll: the
// lease expires at once, the message comes back before the poll is due; a
// new worker (nothing in memory) waits for it and polls the stored handle.
func TestLongRunningRestart(t *testing.T) {
	ctx := context.Background()
	v := &fakeVendor{script: []pollAnswer{{done: true, body: "x"}}}
	w, st, q, c := longRun(t, v, 0)
	if err := w.Process(ctx, lrID); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(4 * time.Second) // restarted 4 s later: the message is back now
	w2 := *w
	if err := w2.Process(ctx, lrID); err != nil {
		t.Fatalf("Process after restart = %v", err)
	}
	if _, delay, n := q.last(); n != 2 || delay != 6*time.Second {
		t.Fatalf("after restart: %d messages, last after %v; want the poll rescheduled at its time (6s)", n, delay)
	}
	c.t = c.t.Add(6 * time.Second)
	if err := w2.Process(ctx, lrID); err != nil {
		t.Fatal(err)
	}
	submits, polls, _ := v.counts()
	if j := getJob(t, st); j.Status != Completed || submits != 1 || polls != 1 {
		t.Errorf("job %s, submits %d, polls %d; want completed, submitted once, polled once", j.Status, submits, polls)
	}
}

// TestLongRunningFaults covers the deadline, retries and refusals.
func TestLongRunningFaults(t *testing.T) {
	ctx := context.Background()
	transient := &TransientError{RetryAfter: 30 * time.Second, Err: errors.New("HTTP 429")}
	refused := &ProviderError{Code: CodeContentPolicy, Message: "The prompt was refused."}
	tests := []struct {
		name       string
		vendor     *fakeVendor
		steps      []time.Duration // clock advance before each further delivery
		wantStatus Status
		wantCode   string
		wantSubmit int
		wantPolls  int
		wantCancel int
	}{
		{"retry after 429 then success", &fakeVendor{startErr: []error{transient}, script: []pollAnswer{{done: true, body: "x"}}},
			[]time.Duration{30 * time.Second, 10 * time.Second}, Completed, "", 2, 1, 0},
		{"refusal is not retried", &fakeVendor{startErr: []error{refused}}, nil, Failed, CodeContentPolicy, 1, 0, 0},
		{"vendor failure while polling fails the job", &fakeVendor{script: []pollAnswer{{err: &ProviderError{Code: CodeUpstream, Message: "boom"}}}},
			[]time.Duration{10 * time.Second}, Failed, CodeUpstream, 1, 1, 0},
		{"poll faults are retried", &fakeVendor{script: []pollAnswer{{err: errors.New("reset")}, {err: transient}, {done: true, body: "x"}}},
			[]time.Duration{10 * time.Second, 10 * time.Second, 30 * time.Second}, Completed, "", 1, 3, 0},
		{"start faults run out", &fakeVendor{startErr: []error{transient, transient, transient, transient}},
			[]time.Duration{time.Minute, time.Minute, time.Minute, time.Minute}, Failed, CodeUpstream, 4, 0, 0},
		{"deadline fails and cancels", &fakeVendor{script: []pollAnswer{{}}},
			[]time.Duration{10 * time.Minute, 6 * time.Minute}, Failed, CodeTimeout, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, st, q, c := longRun(t, tt.vendor, 2*time.Minute)
			if err := w.Process(ctx, lrID); err != nil {
				t.Fatalf("Process = %v", err)
			}
			for i, d := range tt.steps {
				if _, delay, _ := q.last(); delay > d {
					t.Fatalf("step %d: next run after %v; the test advances only %v", i, delay, d)
				}
				c.t = c.t.Add(d)
				if err := w.Process(ctx, lrID); err != nil {
					t.Fatalf("step %d: Process = %v", i, err)
				}
			}
			j := getJob(t, st)
			submits, polls, cancels := tt.vendor.counts()
			if j.Status != tt.wantStatus || submits != tt.wantSubmit || polls != tt.wantPolls || cancels != tt.wantCancel {
				t.Errorf("job %s, submits %d, polls %d, cancels %d; want %s, %d, %d, %d", j.Status, submits, polls, cancels,
					tt.wantStatus, tt.wantSubmit, tt.wantPolls, tt.wantCancel)
			}
			if tt.wantCode != "" && (j.Error == nil || j.Error.Code != tt.wantCode || strings.TrimSpace(j.Error.Message) == "") {
				t.Errorf("job error = %+v; want code %s with a message", j.Error, tt.wantCode)
			}
		})
	}
}

// TestRetryHonoursRetryAfter: a 429's Retry-After is the least delay.
func TestRetryHonoursRetryAfter(t *testing.T) {
	v := &fakeVendor{startErr: []error{&TransientError{RetryAfter: 42 * time.Second, Err: errors.New("429")}}}
	w, st, q, _ := longRun(t, v, 2*time.Minute)
	if err := w.Process(context.Background(), lrID); err != nil {
		t.Fatal(err)
	}
	_, delay, _ := q.last()
	if j := getJob(t, st); delay < 42*time.Second || j.NextRun < 1042 {
		t.Errorf("retry after %v, next run %d; want at least 42 s (1042)", delay, j.NextRun)
	}
}

// TestOutputCap: a vendor file over MaxBytes fails the job, no retry.
func TestOutputCap(t *testing.T) {
	for _, size := range []int64{-1, 100} {
		v := &fakeVendor{script: []pollAnswer{{done: true, body: strings.Repeat("x", 100), size: size}}}
		w, st, _, c := longRun(t, v, 0)
		w.MaxBytes = 50
		w.Process(context.Background(), lrID)
		c.t = c.t.Add(10 * time.Second)
		if err := w.Process(context.Background(), lrID); err != nil {
			t.Fatal(err)
		}
		if j := getJob(t, st); j.Status != Failed || j.Error.Code != CodeUpstream {
			t.Errorf("size %d: job %s %+v; want failed upstream_error", size, j.Status, j.Error)
		}
	}
}

// groupQueue is a memQueue that also takes groups (as SQS fair queues).
type groupQueue struct {
	memQueue
	groups []string
}

func (q *groupQueue) EnqueueGroup(ctx context.Context, id, group string, delay time.Duration) error {
	q.mu.Lock()
	q.groups = append(q.groups, group)
	q.mu.Unlock()
	return q.Enqueue(ctx, id, delay)
}

// TestEnqueueGroupsByAccount: a queue that can be fair across groups gets
// the job's account as the group, for the poll a start schedules.
func TestEnqueueGroupsByAccount(t *testing.T) {
	v := &fakeVendor{script: []pollAnswer{{}}}
	w, _, _, _ := longRun(t, v, 0)
	q := &groupQueue{}
	w.Queue = q
	if err := w.Process(context.Background(), lrID); err != nil {
		t.Fatal(err)
	}
	if len(q.groups) != 1 || q.groups[0] != "a" {
		t.Errorf("groups = %q; want the job's account [a]", q.groups)
	}
}
