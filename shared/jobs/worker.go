package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/route"
)

// Worker defaults.
const (
	// DefaultMaxAttempts is how many times a worker starts a job at one
	// candidate (a crash, or a transient vendor fault, costs one). It is
	// one less than the queue's maxReceiveCount (5): the fifth delivery of
	// a message finds the attempts spent and fails the job (no charge), so
	// a job whose attempts all crashed the worker is still marked failed
	// before its message goes to the dead-letter queue.
	DefaultMaxAttempts = 4
	// DefaultPollInterval is the delay between two polls of a long-running
	// vendor (GENWAY_MEDIA_POLL).
	DefaultPollInterval = 10 * time.Second
	// DefaultRetryBase is the first retry delay after a transient vendor
	// fault; each retry doubles it (with full jitter) up to MaxRetryDelay.
	DefaultRetryBase = 2 * time.Second
	// MaxRetryDelay caps a retry's delay, a vendor's Retry-After included.
	MaxRetryDelay = 5 * time.Minute
	// DefaultMaxBytes caps one output: a vendor file larger than this fails
	// the job (upstream_error, no charge).
	DefaultMaxBytes = 2 << 30
)

// Worker turns queued jobs into media: each delivery of a job's message is
// one short run (Process) that starts the job at its vendor, polls it once,
// or retries it after a transient fault, so no run waits on a vendor for
// minutes. Each run moves the job along the state table (Transition) with
// conditional writes: of duplicate deliveries one runs, a job is submitted
// at most once per attempt and its vendor's handle is stored before the
// message is acknowledged, so a restart polls it instead of submitting
// again. A failed submit is decided by Router (route.Router.Submit).
// docs/architecture.md ("How a job flows") gives the policy. Safe for
// concurrent use.
type Worker struct {
	Store       Store
	Queue       Queue // re-enqueues polls and retries
	Media       Media
	Providers   map[string]Provider // by catalog provider name
	Catalog     *catalog.Catalog
	Log         *slog.Logger
	MaxAttempts int              // starts at one candidate, crashed runs included; 0: DefaultMaxAttempts
	Now         func() time.Time // nil: time.Now
	// Router is the process's router (shared with chat): it picks the key
	// of each submit from a provider's pool (route.Keyed), records each
	// submit's outcome in its breakers and counters, and decides a failed
	// submit by its policy. nil: route.DefaultPolicy, with no key pools,
	// breakers or routing counters.
	Router *route.Router
	// Lease is how long a worker owns a job it is starting: a duplicate
	// delivery of a job that another worker started less than Lease ago is
	// sent back for later (ErrBusy) instead of being started twice, and a
	// duplicate of a poll round already claimed is dropped. Set it to the
	// worker's timeout where deliveries can overlap (SQS). 0 is for a queue
	// that hands a job to one worker at a time (the embedded queue): a
	// processing job is taken over at once.
	Lease        time.Duration
	PollInterval time.Duration // 0: DefaultPollInterval
	RetryBase    time.Duration // 0: DefaultRetryBase
	MaxBytes     int64         // 0: DefaultMaxBytes
}

// ErrBusy is returned by Process for a job another worker is still running.
var ErrBusy = errors.New("job is being processed by another worker")

// errTooLarge is a vendor file over MaxBytes.
var errTooLarge = errors.New("output too large")

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) maxAttempts() int {
	if w.MaxAttempts > 0 {
		return w.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (w *Worker) pollInterval() time.Duration {
	if w.PollInterval > 0 {
		return w.PollInterval
	}
	return DefaultPollInterval
}

// run is one delivery of a job's message: what the steps of one Process
// share.
type run struct {
	w *Worker
	// ctx is the delivery's: the store's and the queue's calls use it, and
	// its end means the worker is stopping (the message comes back).
	ctx context.Context
	// call is ctx bounded by the job's deadline, set when a start or a
	// poll round is claimed: the vendor's calls and the output's copy use
	// it, and its end alone means the deadline passed (the job fails).
	call context.Context
	j    *Job           // as read, then as claimed
	m    *catalog.Model // the candidate the job is at: submitted to, polled and cancelled at
	p    Provider       // m's
	now  time.Time      // when the delivery began
	log  *slog.Logger   // with the job's attributes, once claimed
}

// Process runs job id once. A nil error means the message can be
// acknowledged: the job is final or unknown, or its next run is scheduled
// (a new message), or the delivery was a duplicate of a run another worker
// claimed. An error means "deliver again later".
func (w *Worker) Process(ctx context.Context, id string) error {
	j, err := w.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		w.Log.Warn("message for unknown job dropped", "job_id", id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", id, err)
	}
	if j.Status.Final() {
		return nil // duplicate delivery
	}
	r := &run{w: w, ctx: ctx, j: j, now: w.now()}
	model := j.Current().Model
	if m, ok := w.Catalog.Model(model); ok {
		r.m, r.p = m, w.Providers[m.Provider]
	}
	if r.p == nil {
		return r.fail(&JobError{Code: CodeInternal, Message: fmt.Sprintf("The model %s has no configured provider; no credits were charged.", model)})
	}
	if j.Started != 0 && !r.now.Before(w.deadline(j)) {
		return r.timeout()
	}
	next := j.NextRun
	if next == 0 && j.Status == Processing {
		next = j.Updated + int64(w.Lease/time.Second) // a job stored before NextRun existed
	}
	if j.Status == Processing && r.now.Unix() < next {
		return r.early()
	}
	if j.Handle != nil {
		return r.poll()
	}
	return r.start()
}

// deadline is when job j passes its deadline: its requested model's
// (Job.Model's, whichever candidate serves it) from its first start.
func (w *Worker) deadline(j *Job) time.Time {
	return time.Unix(j.Started, 0).Add(w.limit(j))
}

// limit is job j's deadline as a duration: its requested model's.
func (w *Worker) limit(j *Job) time.Duration {
	if m, ok := w.Catalog.Model(j.Model); ok {
		return m.Deadline()
	}
	return catalog.DefaultDeadline
}

// write makes transition t of r's job, from the status it was read or
// claimed in, with p.
func (r *run) write(ctx context.Context, t Transition, p Patch) (*Job, error) {
	if err := t.check(r.j.Status); err != nil {
		return nil, err
	}
	return r.w.Store.Transition(ctx, r.j.ID, r.j.Status, t.To, p)
}

// early handles a delivery before the job's NextRun.
func (r *run) early() error {
	w, j := r.w, r.j
	switch {
	case w.Lease > 0 && j.Handle != nil:
		// A duplicate of a poll round another delivery claimed: that one
		// schedules the next poll, or its own message comes back after the
		// visibility timeout (longer than a poll interval) if it dies.
		w.Log.Debug("duplicate poll delivery dropped", "job_id", j.ID)
		return nil
	case w.Lease > 0 || j.NextRun == 0:
		return fmt.Errorf("process %s: %w (run %d claimed until %d)", j.ID, ErrBusy, j.Runs, j.NextRun)
	}
	// One delivery at a time (the embedded queue, after a restart): come
	// back when the run is due. The queue keeps one message per job.
	if err := enqueue(r.ctx, w.Queue, j.ID, j.Account, time.Unix(j.NextRun, 0).Sub(r.now)); err != nil {
		return fmt.Errorf("process %s: reschedule: %w", j.ID, err)
	}
	return nil
}

// start claims the job and submits it to its vendor, through the router:
// one submit, or one per key of the provider's pool while keys refuse it
// and another is free; a failed submit is retried later, moved to the
// next candidate, or fails the job, as the router decides.
func (r *run) start() error {
	w, j := r.w, r.j
	if j.Tries() >= w.maxAttempts() {
		return r.fail(&JobError{Code: CodeInternal, Message: fmt.Sprintf("Generation did not finish after %d attempts; no credits were charged.", j.Attempts)})
	}
	patch := Patch{IncAttempts: true, Updated: r.now.Unix(), NextRun: r.now.Add(w.Lease).Unix(), IfRuns: &j.Runs}
	if j.Started == 0 {
		patch.Started = r.now.Unix()
	}
	j, err := r.write(r.ctx, tStart, patch)
	if errors.Is(err, ErrConflict) {
		return r.recheck()
	}
	if err != nil {
		return fmt.Errorf("process %s: start: %w", r.j.ID, err)
	}
	r.j = j
	r.log = w.Log.With("job_id", j.ID, "model", j.Model, "candidate", r.m.ID, "attempt", j.Attempts)
	call, cancel := context.WithTimeout(r.ctx, w.deadline(j).Sub(r.now))
	defer cancel()
	r.call = call
	target := route.Target{Model: r.m.ID, Provider: r.m.Provider}
	target.Keys = route.KeysOf(r.p)
	var step *Step
	v, err := w.Router.Submit(r.call, route.Submission{Target: target, Retry: max(j.Tries()-1, 0), More: j.More(),
		MaxRetries: w.maxAttempts() - 1, Left: func() time.Duration { return w.deadline(j).Sub(w.now()) }},
		Failure, func(ctx context.Context) (err error) {
			step, err = r.submit(ctx)
			return err
		})
	for _, f := range v.Failed {
		r.log.Warn("submit failed", "outcome", f.Failure.Outcome(), "class", f.Failure.Class.String(), "refused", f.Refused,
			"action", f.Action.String(), "key", f.Key, "err", f.Err)
	}
	switch {
	case err == nil:
		return r.started(step, v.Key)
	case v.Ended && r.ctx.Err() != nil:
		return fmt.Errorf("process %s: start: %w", j.ID, err)
	case v.Ended:
		return r.timeout()
	}
	switch v.Action {
	case route.Again:
		return r.retry(w.backoff(j, v.Wait))
	case route.Next:
		return r.advance(target)
	}
	return r.submitFailed(err)
}

// submit makes one submit of the job (ctx carries the key chosen): a
// step with neither media nor a handle, or both, is the provider's error.
func (r *run) submit(ctx context.Context) (*Step, error) {
	step, err := r.p.Start(ctx, r.m, r.j)
	if err != nil && step != nil && step.Result != nil {
		step.Result.Body.Close()
	}
	if err == nil && (step == nil || (step.Result == nil) == (step.Handle == nil)) {
		if step != nil && step.Result != nil {
			step.Result.Body.Close()
		}
		err = &ProviderError{Code: CodeInternal, Message: "The provider answered neither media nor a handle.", Err: fmt.Errorf("provider %s: bad step", r.m.Provider)}
	}
	return step, err
}

// started handles the vendor's answer to a submit: the media (copied and
// the job completed), or a handle (stored with the key that submitted,
// then polled).
func (r *run) started(step *Step, key string) error {
	if step.Result != nil {
		return r.finishOrRetry(step.Result)
	}
	if Capabilities(r.p).Poller == nil {
		return r.fail(&JobError{Code: CodeInternal, Message: "The provider answered a handle but cannot be polled; no credits were charged."})
	}
	h := *step.Handle
	h.Submitted = r.w.now().Unix()
	h.KeyID = key
	r.log.Info("submitted to vendor", "vendor_id", h.ID)
	return r.saveHandle(&h)
}

// advance moves the claimed job to its next candidate after the current
// one (from) refused the submit: a conditional write on the run's claim,
// so that a redelivery or a restart continues there, then a message at
// once.
func (r *run) advance(from route.Target) error {
	j := r.j
	next := j.Candidate + 1
	now := r.w.now()
	_, err := r.write(r.ctx, tNext, Patch{Candidate: &next, AttemptsBefore: j.Attempts,
		Updated: now.Unix(), NextRun: now.Unix(), IfRuns: &j.Runs})
	if errors.Is(err, ErrConflict) {
		return r.recheck()
	}
	if err != nil {
		return fmt.Errorf("process %s: move to the next candidate: %w", j.ID, err)
	}
	r.w.Router.Moved(from) // counted once the move is written
	r.log.Warn("vendor refused the job; moving to the next candidate", "next", j.Candidates[next].Model)
	return r.schedule(0)
}

// submitFailed fails the job after its last submit failed for good
// (err): as FailureOf says (the vendor's code and words for a refusal of
// the request, a generic message for one of the operator's account),
// else as a vendor that kept failing.
func (r *run) submitFailed(err error) error {
	if je := FailureOf(r.m.Provider, err); je != nil {
		r.log.Warn("generation failed", "step", "start", "code", je.Code, "account", je.Vendor != "", "err", err)
		return r.fail(je)
	}
	r.log.Warn("vendor kept failing; job failed", "step", "start", "err", err)
	return r.fail(&JobError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor kept failing (%d attempts); no credits were charged.", r.j.Attempts)})
}

// saveHandle stores the vendor's handle h on the job and schedules the
// first poll. A handle that cannot be stored means a second submit after
// a restart, so the write is tried a few times before giving up.
func (r *run) saveHandle(h *Handle) error {
	j := r.j
	interval := r.w.pollInterval()
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 && !ctxtime.Sleep(r.ctx, time.Duration(100<<try)*time.Millisecond) {
			break
		}
		now := r.w.now()
		_, err = r.write(r.ctx, tHandle, Patch{Handle: h, Updated: now.Unix(), NextRun: now.Add(interval).Unix(), IfRuns: &j.Runs})
		if err == nil || errors.Is(err, ErrConflict) {
			break
		}
	}
	if err != nil {
		// The vendor works on a job we cannot find again: say where.
		r.log.Error("vendor handle not stored; the job will be started again", "vendor_id", h.ID, "err", err)
		if errors.Is(err, ErrConflict) {
			return r.recheck()
		}
		return fmt.Errorf("process %s: store handle: %w", j.ID, err)
	}
	return r.schedule(interval)
}

// poll claims one poll round of the job and asks the vendor once.
func (r *run) poll() error {
	w, j := r.w, r.j
	poller := Capabilities(r.p).Poller
	if poller == nil {
		return r.fail(&JobError{Code: CodeInternal, Message: "The job's provider cannot be polled; no credits were charged."})
	}
	interval := w.pollInterval()
	j, err := r.write(r.ctx, tPoll, Patch{Updated: r.now.Unix(), NextRun: r.now.Add(interval).Unix(), IfRuns: &j.Runs})
	if errors.Is(err, ErrConflict) {
		// Another delivery claimed this round (or finished the job).
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: claim poll: %w", r.j.ID, err)
	}
	r.j = j
	r.log = w.Log.With("job_id", j.ID, "model", j.Model, "candidate", r.m.ID, "vendor_id", j.Handle.ID, "poll", j.Runs)
	call, cancel := context.WithTimeout(withJobKey(r.ctx, j), w.deadline(j).Sub(r.now))
	defer cancel()
	r.call = call
	res, err := poller.Poll(r.call, r.m, j)
	switch {
	case err != nil:
		return r.fault("poll", err)
	case res == nil:
		return r.schedule(interval)
	}
	return r.finishOrRetry(res)
}

// finishOrRetry stores res and completes the job; a transient failure of
// the copy is retried like a vendor fault.
func (r *run) finishOrRetry(res *Result) error {
	err := r.finish(res)
	if err == nil {
		return nil
	}
	return r.fault("store output", err)
}

// fault decides what a failed poll or copy (what) means (a failed submit
// is start's): a *ProviderError fails the job; the deadline passing fails
// it with timeout; the worker shutting down leaves the message to come
// back; anything else is transient and retried after a backoff (a copy
// of a synchronous vendor's media costs an attempt: the job is submitted
// again to the same candidate).
func (r *run) fault(what string, err error) error {
	w, j := r.w, r.j
	var perr *ProviderError
	switch {
	case errors.As(err, &perr):
		je := FailureOf(r.m.Provider, err)
		r.log.Warn("generation failed", "step", what, "code", je.Code, "account", je.Vendor != "", "err", err)
		return r.fail(je)
	case r.ctx.Err() != nil:
		return fmt.Errorf("process %s: %s: %w", j.ID, what, err)
	case r.call.Err() != nil:
		return r.timeout()
	}
	var retryAfter time.Duration
	var terr *TransientError
	if errors.As(err, &terr) {
		retryAfter = terr.RetryAfter
	}
	if j.Handle == nil && j.Tries() >= w.maxAttempts() {
		r.log.Warn("vendor kept failing; job failed", "step", what, "err", err)
		return r.fail(&JobError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor kept failing (%d attempts); no credits were charged.", j.Attempts)})
	}
	r.log.Warn("transient vendor fault", "step", what, "err", err)
	return r.retry(w.backoff(j, retryAfter))
}

// retry schedules the claimed job's next run after delay: the run's
// NextRun moves to then (not the claim's lease end), and a message is
// sent with that delay.
func (r *run) retry(delay time.Duration) error {
	j := r.j
	r.log.Info("retrying later", "retry_in", delay.String())
	now := r.w.now()
	if _, err := r.write(r.ctx, tRetry, Patch{Updated: now.Unix(), NextRun: now.Add(delay).Unix(), IfRuns: &j.Runs}); err != nil {
		if errors.Is(err, ErrConflict) {
			return r.recheck()
		}
		return fmt.Errorf("process %s: schedule retry: %w", j.ID, err)
	}
	return r.schedule(delay)
}

// backoff is the delay before retrying j: exponential in its starts at
// its current candidate (full jitter, capped), polls never sooner than
// the poll interval, and never sooner than the vendor's Retry-After (or
// the routing policy's wait).
func (w *Worker) backoff(j *Job, retryAfter time.Duration) time.Duration {
	base := w.RetryBase
	if base <= 0 {
		base = DefaultRetryBase
	}
	n := j.Tries()
	if j.Handle != nil {
		n = 1
	}
	d := min(base<<min(max(n-1, 0), 10), MaxRetryDelay)
	d = d/2 + rand.N(d/2+1)
	if j.Handle != nil {
		d = max(d, w.pollInterval())
	}
	return min(max(d, retryAfter), MaxRetryDelay)
}

// schedule enqueues the job's next run after delay, but no later than
// just past its deadline (so a job past it is failed promptly).
func (r *run) schedule(delay time.Duration) error {
	j := r.j
	if j.Started != 0 {
		if left := r.w.deadline(j).Sub(r.w.now()) + time.Second; left < delay {
			delay = max(left, 0)
		}
	}
	if err := enqueue(r.ctx, r.w.Queue, j.ID, j.Account, delay); err != nil {
		// The message comes back after its visibility timeout and runs
		// then (NextRun has passed by then).
		return fmt.Errorf("process %s: schedule next run: %w", j.ID, err)
	}
	return nil
}

// finish copies res into storage and completes the job, within the
// deadline (r.call).
func (r *run) finish(res *Result) error {
	defer res.Body.Close()
	w, j, ctx := r.w, r.j, r.call
	maxBytes := w.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if res.Size > maxBytes {
		return &ProviderError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor's file (%d bytes) is larger than the %d-byte limit; no credits were charged.", res.Size, maxBytes)}
	}
	// Only the media types of the job's type are stored (MediaType): a
	// vendor's HTML or SVG must never be served from our links.
	ct, ok := MediaType(j.Type, res.ContentType)
	if !ok {
		return MediaTypeError(j.Type, res.ContentType)
	}
	// A job cancelled (or failed by another run) while the vendor answered
	// keeps nothing: no object is stored, and the completion below would
	// fail its condition anyway. (A read error is not a reason to drop.)
	if cur, err := w.Store.Get(ctx, j.ID); err == nil && cur.Status.Final() {
		r.log.Info("job finished meanwhile; vendor result dropped", "status", cur.Status)
		return nil
	}
	ext := res.Ext
	if ext == "" {
		ext = "bin"
	}
	// The key carries the run, so a concurrent duplicate never overwrites
	// the object a winning run points at.
	key := fmt.Sprintf("jobs/%s/%s-%d.%s", j.Account, j.ID, j.Runs, ext)
	body := &capReader{r: res.Body, left: maxBytes}
	if err := w.Media.Put(ctx, key, ct, body, res.Size); err != nil {
		if errors.Is(err, errTooLarge) {
			return &ProviderError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor's file is larger than the %d-byte limit; no credits were charged.", maxBytes), Err: err}
		}
		return fmt.Errorf("store output: %w", err)
	}
	out := &Output{Key: key, ContentType: ct, Bytes: body.n, Duration: res.Duration, Width: res.Width, Height: res.Height}
	if out.Duration == 0 {
		out.Duration = j.Input.Duration
	}
	if j.Type == TypeVideo && out.Width == 0 {
		out.Width, out.Height = parseSize(j.Input.Size)
	}
	// The charge is the price of the candidate that made the output (at
	// most the hold), written in the write that completes the job.
	var charge *credits.Amount
	if len(j.Candidates) > 0 {
		c := j.Current().Price
		charge = &c
	}
	if _, err := r.write(ctx, tComplete, Patch{Output: out, Price: charge, Updated: w.now().Unix()}); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil // another run completed or failed it first
		}
		return fmt.Errorf("complete: %w", err)
	}
	r.log.Info("job completed", "bytes", out.Bytes, "runs", j.Runs, "served_by", j.Current().Model)
	jobFinished(j, Completed)
	return nil
}

// jobFinished counts a job that reached a final status.
func jobFinished(j *Job, s Status) {
	metrics.Default.Add("genway_jobs_finished_total", "Jobs that reached a final status, by type, model and status.",
		[]string{"type", "model", "status"}, []string{j.Type, j.Model, string(s)}, 1)
}

// timeout fails the job for passing its deadline, cancelling it at its
// vendor first where that is possible (best effort).
func (r *run) timeout() error {
	w, j := r.w, r.j
	if c := Capabilities(r.p).Canceller; c != nil && j.Handle != nil {
		cctx, cancel := context.WithTimeout(withJobKey(r.ctx, j), 10*time.Second)
		if err := c.Cancel(cctx, r.m, j); err != nil {
			w.Log.Warn("cancel at vendor failed", "job_id", j.ID, "vendor_id", j.Handle.ID, "err", err)
		}
		cancel()
	}
	w.Log.Info("job passed its deadline", "job_id", j.ID, "candidate", r.m.ID, "deadline", w.limit(j).String())
	return r.fail(&JobError{Code: CodeTimeout, Message: fmt.Sprintf("The job did not finish within %s; no credits were charged.", w.limit(j))})
}

// fail fails the job with e.
func (r *run) fail(e *JobError) error {
	_, err := r.write(r.ctx, tFail, Patch{Error: e, Updated: r.w.now().Unix()})
	if errors.Is(err, ErrConflict) {
		return r.recheck()
	}
	if err != nil {
		return fmt.Errorf("fail job %s: %w", r.j.ID, err)
	}
	jobFinished(r.j, Failed)
	return nil
}

// recheck decides after a lost race: done if the job is final, else retry.
func (r *run) recheck() error {
	id := r.j.ID
	j, err := r.w.Store.Get(r.ctx, id)
	if err != nil {
		return fmt.Errorf("recheck %s: %w", id, err)
	}
	if j.Status.Final() {
		return nil
	}
	return fmt.Errorf("job %s changed status concurrently (now %s)", id, j.Status)
}

// capReader counts what it reads and fails with errTooLarge past left.
type capReader struct {
	r    io.Reader
	left int64
	n    int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more than allowed tells a full file from a cut one.
		var one [1]byte
		k, err := c.r.Read(one[:])
		if k > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	c.left -= int64(k)
	return k, err
}

func parseSize(s string) (int, int) {
	ws, hs, _ := strings.Cut(s, "x")
	w, _ := strconv.Atoi(ws)
	h, _ := strconv.Atoi(hs)
	return w, h
}

// withJobKey returns ctx naming the key of the provider's pool that
// submitted j (its handle's KeyID), so that its polls and cancels use it.
func withJobKey(ctx context.Context, j *Job) context.Context {
	if j.Handle != nil && j.Handle.KeyID != "" {
		return route.WithKey(ctx, j.Handle.KeyID)
	}
	return ctx
}
