package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// vendorStub is a long-running provider whose Cancel answers err after
// running during (what the worker does meanwhile, in a test).
type vendorStub struct {
	err    error
	during func()
	calls  int
}

func (v *vendorStub) Start(context.Context, *catalog.Model, *Job) (*Step, error) {
	return nil, errors.New("not started in this test")
}

func (v *vendorStub) Cancel(ctx context.Context, m *catalog.Model, j *Job) error {
	v.calls++
	if j.Handle == nil {
		return errors.New("cancel without a handle")
	}
	if v.during != nil {
		v.during()
	}
	return v.err
}

func TestCancel(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	const id = "job_video_cccccccccccccccccccc"
	handle := &Handle{ID: "op-1", CancelURL: "http://127.0.0.1/cancel"}
	sync := providerFunc(func(context.Context, *Job) (*Result, error) { return nil, errors.New("unused") })
	tests := []struct {
		name      string
		status    Status
		handle    *Handle
		provider  func(st *memStore) Provider // nil: none configured
		account   string                      // the caller; "" is the job's ("a")
		id        string                      // "" is the job's
		code      string                      // "" is success
		kind      apierr.Kind
		message   string // in the error's message
		after     Status // the job's status afterwards
		vendorHit int    // calls of the vendor's Cancel
	}{
		{name: "queued", status: Queued, after: Failed},
		{name: "queued, the vendor untouched", status: Queued, provider: func(*memStore) Provider { return &vendorStub{} }, after: Failed},
		{name: "processing at a vendor that cancels", status: Processing, handle: handle,
			provider: func(*memStore) Provider { return &vendorStub{} }, after: Failed, vendorHit: 1},
		{name: "processing at a vendor that cannot cancel", status: Processing, handle: handle,
			provider: func(*memStore) Provider { return sync }, code: "job_not_cancellable", kind: apierr.Conflict,
			message: "cannot cancel a running job", after: Processing},
		{name: "processing, provider not configured here", status: Processing, handle: handle,
			code: "job_not_cancellable", kind: apierr.Conflict, message: "cannot cancel a running job", after: Processing},
		{name: "processing, not yet at the vendor", status: Processing,
			provider: func(*memStore) Provider { return &vendorStub{} }, code: "job_not_cancellable", kind: apierr.Conflict,
			message: "try again", after: Processing},
		{name: "vendor refuses", status: Processing, handle: handle,
			provider: func(*memStore) Provider {
				return &vendorStub{err: &ProviderError{Code: CodeUpstream, Message: "already completed"}}
			}, code: "job_not_cancellable", kind: apierr.Conflict, message: "already completed", after: Processing, vendorHit: 1},
		{name: "vendor refuses the operator's key", status: Processing, handle: handle,
			provider: func(*memStore) Provider {
				return &vendorStub{err: StatusError("cancel", 401, nil, Refusal{Message: "fal refused the configured key: SECRET-ORG-42"})}
			}, code: "job_not_cancellable", kind: apierr.Conflict, message: "The synthetic provider refused to cancel", after: Processing, vendorHit: 1},
		{name: "vendor unreachable", status: Processing, handle: handle,
			provider: func(*memStore) Provider {
				return &vendorStub{err: &TransientError{Err: errors.New("dial: refused")}}
			}, code: "upstream_error", kind: apierr.Upstream, message: "still running", after: Processing, vendorHit: 1},
		{name: "worker completes it meanwhile", status: Processing, handle: handle,
			provider: func(st *memStore) Provider {
				return &vendorStub{during: func() {
					st.Transition(context.Background(), id, Processing, Completed, Patch{Output: &Output{Key: "k"}})
				}}
			}, code: "job_final", kind: apierr.Conflict, message: "already completed", after: Completed, vendorHit: 1},
		{name: "worker claims a poll meanwhile", status: Processing, handle: handle,
			provider: func(st *memStore) Provider {
				return &vendorStub{during: func() {
					runs := 3
					st.Transition(context.Background(), id, Processing, Processing, Patch{IfRuns: &runs, NextRun: 5000})
				}}
			}, after: Failed, vendorHit: 1},
		{name: "completed", status: Completed, code: "job_final", kind: apierr.Conflict, message: "already completed", after: Completed},
		{name: "failed", status: Failed, code: "job_final", kind: apierr.Conflict, message: "already failed", after: Failed},
		{name: "another account's", status: Queued, account: "b", code: "job_not_found", kind: apierr.NotFound, after: Queued},
		{name: "unknown id", status: Queued, id: "job_video_dddddddddddddddddddd", code: "job_not_found", kind: apierr.NotFound, after: Queued},
		{name: "malformed id", status: Queued, id: "../x", code: "job_not_found", kind: apierr.NotFound, after: Queued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := newMemStore(Job{ID: id, Account: "a", Type: TypeVideo, Model: "synthetic-video", Status: tt.status, Handle: tt.handle,
				Input: Input{Prompt: "p", Duration: 4}, Price: 4, Runs: 3, Created: 1000, Updated: 1000})
			svc := &Service{Store: st, Catalog: cat, Log: discard(), Now: func() time.Time { return time.Unix(2000, 0) }}
			var stub *vendorStub
			if tt.provider != nil {
				p := tt.provider(st)
				stub, _ = p.(*vendorStub)
				svc.Providers = map[string]Provider{"synthetic": p}
			}
			account, jid := "a", id
			if tt.account != "" {
				account = tt.account
			}
			if tt.id != "" {
				jid = tt.id
			}
			got, err := svc.Cancel(ctx, account, jid)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Cancel = %v; want the cancelled job", err)
				}
				if got.Status != Failed || got.Error == nil || got.Error.Code != CodeCancelled || got.Error.Message != CancelMessage || got.Updated != 2000 {
					t.Errorf("Cancel = %+v; want failed with error cancelled, updated 2000", got)
				}
				if h := got.History; len(h) == 0 || h[len(h)-1] != (StatusChange{Status: Failed, At: 2000, ErrorCode: CodeCancelled}) {
					t.Errorf("history = %+v; want it to end with failed/cancelled at 2000", h)
				}
			} else {
				e := apierr.As(err)
				if e == nil || e.Code != tt.code || e.Kind != tt.kind || !strings.Contains(e.Message, tt.message) {
					t.Fatalf("Cancel = %+v, %v; want %s (kind %d) saying %q", got, err, tt.code, tt.kind, tt.message)
				}
			}
			j, _ := st.Get(ctx, id)
			if j.Status != tt.after {
				t.Errorf("job afterwards is %s; want %s", j.Status, tt.after)
			}
			calls := 0
			if stub != nil {
				calls = stub.calls
			}
			if calls != tt.vendorHit {
				t.Errorf("vendor Cancel called %d times; want %d", calls, tt.vendorHit)
			}
		})
	}
}

// cancellingPoller cancels the job through svc when it is polled, before
// it answers: the client's cancel lands while the worker waits on the
// vendor.
type cancellingPoller struct {
	*fakeVendor
	cancel func()
}

func (p *cancellingPoller) Poll(ctx context.Context, m *catalog.Model, j *Job) (*Result, error) {
	p.cancel()
	return p.fakeVendor.Poll(ctx, m, j)
}

// TestCancelLongRunning cancels a job at a long-running vendor while the
// worker runs it: the worker never resurrects it, nothing is stored and
// nothing completes (so nothing is charged).
func TestCancelLongRunning(t *testing.T) {
	for _, when := range []string{"between two polls", "during a poll"} {
		t.Run(when, func(t *testing.T) {
			ctx := context.Background()
			v := &fakeVendor{script: []pollAnswer{{}, {done: true, body: "mp4bytes"}}}
			w, st, q, c := longRun(t, v, 0)
			svc := &Service{Store: st, Catalog: w.Catalog, Providers: w.Providers, Log: discard(), Now: c.now}
			cancel := func() {
				j, err := svc.Cancel(ctx, "a", lrID)
				if err != nil || j.Status != Failed || j.Error.Code != CodeCancelled {
					t.Errorf("Cancel = %+v, %v; want failed, cancelled", j, err)
				}
			}
			if err := w.Process(ctx, lrID); err != nil { // submit
				t.Fatalf("Process (submit) = %v", err)
			}
			c.t = c.t.Add(10 * time.Second)
			if err := w.Process(ctx, lrID); err != nil { // poll 1: not done
				t.Fatalf("Process (poll 1) = %v", err)
			}
			if when == "between two polls" {
				cancel()
			} else {
				w.Providers["synthetic"] = &cancellingPoller{fakeVendor: v, cancel: cancel}
			}
			_, _, sent := q.last()
			c.t = c.t.Add(10 * time.Second)
			if err := w.Process(ctx, lrID); err != nil { // poll 2's message
				t.Fatalf("Process (after the cancel) = %v; want nil (the job is final)", err)
			}
			j := getJob(t, st)
			submits, polls, cancels := v.counts()
			if j.Status != Failed || j.Error.Code != CodeCancelled || j.Output != nil {
				t.Errorf("job = %s %+v, output %+v; want failed, cancelled, no output", j.Status, j.Error, j.Output)
			}
			wantPolls := 1
			if when == "during a poll" {
				wantPolls = 2 // the vendor answered; the answer was dropped
			}
			if submits != 1 || polls != wantPolls || cancels != 1 {
				t.Errorf("submits %d, polls %d, vendor cancels %d; want 1, %d, 1", submits, polls, cancels, wantPolls)
			}
			if puts := len(w.Media.(*memMedia).puts); puts != 0 || st.completions != 0 {
				t.Errorf("objects stored %d, completions %d; want none", puts, st.completions)
			}
			if _, _, n := q.last(); n != sent {
				t.Errorf("messages sent after the cancel: %d; want none", n-sent)
			}
		})
	}
}
