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

// Worker turns queued jobs into media. Each delivery of a job's message is
// one short run: start the job at its vendor, or poll it once, or retry it
// after a transient fault; a long-running vendor's job is re-enqueued with
// a delay between polls, so no worker waits on a vendor for minutes.
//
// Process is idempotent: every run is claimed with a conditional write
// (Job.Runs), so of duplicate deliveries one runs; a job is started at its
// vendor at most once per attempt and its handle is stored before the
// message is acknowledged, so a restart polls it instead of submitting
// again; completion is a conditional transition. Safe for concurrent use.
//
// Routing (a job whose model has fallbacks: Job.Candidates). Each failed
// submit is classified (Failure) and the routing policy decides
// (route.Policy.Decide, the function chat uses) with State.Retry the
// retries at the current candidate, More whether another candidate
// follows, Left the time to the job's deadline:
//
//   - Again: the job is re-enqueued after the wait (never sooner than the
//     worker's own backoff), as for any transient fault;
//   - OtherKey: the same candidate at once with another key of its
//     provider's pool, in the same run (the key refused or rate-limited
//     rests in the Router);
//   - Next: the job moves to the next candidate (Job.Candidate, with a
//     conditional write on the run's claim) and is re-enqueued at once: a
//     redelivery or a restart continues there;
//   - Stop (or Next with no candidate left): the job fails, no charge.
//
// Only a definite refusal moves a job on (Failure reports it): a failure
// after which the vendor may have taken the job (a timeout or a broken
// connection after the request was sent, a 502 or 504, an unreadable
// answer) is decided as if no candidate followed, so it is retried at the
// same candidate or fails the job; and no submit is routed at all once a
// vendor answered with a handle or the media. The retries: while another
// candidate follows, the policy's (Policy.Retries, GENWAY_ROUTE_RETRIES);
// at the last candidate (a job without fallbacks has only one), up to
// MaxAttempts starts, as before fallbacks existed. MaxAttempts caps the
// starts at any one candidate, crashed runs included.
type Worker struct {
	Store       Store
	Queue       Queue // re-enqueues polls and retries
	Media       Media
	Providers   map[string]Provider // by catalog provider name
	Catalog     *catalog.Catalog
	Log         *slog.Logger
	MaxAttempts int              // 0: DefaultMaxAttempts
	Now         func() time.Time // nil: time.Now
	// Router is the process's router (shared with chat): its policy
	// decides failed submits, its key state picks the key of each submit
	// from a provider's pool (route.Keyed), and each submit's outcome is
	// recorded in its breakers and counters. nil: route.DefaultPolicy,
	// with no key pools, breakers or routing counters.
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

// ParsePollInterval parses GENWAY_MEDIA_POLL: a positive Go duration; ""
// is DefaultPollInterval.
func ParsePollInterval(s string) (time.Duration, error) {
	if s == "" {
		return DefaultPollInterval, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("poll interval must be a positive duration such as 10s, got %q", s)
	}
	return d, nil
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
	now := w.now()
	// m is the candidate the job is at: the model it is submitted to,
	// polled at and cancelled at.
	model := j.Current().Model
	m, ok := w.Catalog.Model(model)
	var p Provider
	if ok {
		p = w.Providers[m.Provider]
	}
	if p == nil {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: fmt.Sprintf("The model %s has no configured provider; no credits were charged.", model)})
	}
	if j.Started != 0 && !now.Before(w.deadline(j)) {
		return w.timeout(ctx, m, p, j)
	}
	next := j.NextRun
	if next == 0 && j.Status == Processing {
		next = j.Updated + int64(w.Lease/time.Second) // a job stored before NextRun existed
	}
	if j.Status == Processing && now.Unix() < next {
		return w.early(ctx, j, now)
	}
	if j.Handle != nil {
		return w.poll(ctx, m, p, j, now)
	}
	return w.start(ctx, m, p, j, now)
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

// early handles a delivery before the job's NextRun.
func (w *Worker) early(ctx context.Context, j *Job, now time.Time) error {
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
	if err := enqueue(ctx, w.Queue, j.ID, j.Account, time.Unix(j.NextRun, 0).Sub(now)); err != nil {
		return fmt.Errorf("process %s: reschedule: %w", j.ID, err)
	}
	return nil
}

// start claims j and starts it at its vendor (m, the candidate it is at):
// one submit, or one per key of the provider's pool while keys refuse it
// and another is free; a failed submit is decided by the routing policy.
func (w *Worker) start(ctx context.Context, m *catalog.Model, p Provider, j *Job, now time.Time) error {
	if j.Tries() >= w.maxAttempts() {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: fmt.Sprintf("Generation did not finish after %d attempts; no credits were charged.", j.Attempts)})
	}
	patch := Patch{IncAttempts: true, Updated: now.Unix(), NextRun: now.Add(w.Lease).Unix(), IfRuns: &j.Runs}
	if j.Started == 0 {
		patch.Started = now.Unix()
	}
	id := j.ID
	j, err := w.Store.Transition(ctx, id, j.Status, Processing, patch)
	if errors.Is(err, ErrConflict) {
		return w.recheck(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("process %s: start: %w", id, err)
	}
	log := w.Log.With("job_id", j.ID, "model", j.Model, "candidate", m.ID, "attempt", j.Attempts)
	sctx, cancel := context.WithTimeout(ctx, w.deadline(j).Sub(now))
	defer cancel()
	target := route.Target{Model: m.ID, Provider: m.Provider}
	target.Keys = route.KeysOf(p)
	tried := map[string]bool{}
	for {
		key := ""
		if w.Router != nil {
			key = w.Router.Key(target, tried)
		}
		actx := sctx
		if key != "" {
			tried[key] = true
			actx = route.WithKey(sctx, key)
		}
		step, err := p.Start(actx, m, j)
		if err != nil && step != nil && step.Result != nil {
			step.Result.Body.Close()
		}
		if err == nil && (step == nil || (step.Result == nil) == (step.Handle == nil)) {
			if step != nil && step.Result != nil {
				step.Result.Body.Close()
			}
			err = &ProviderError{Code: CodeInternal, Message: "The provider answered neither media nor a handle.", Err: fmt.Errorf("provider %s: bad step", m.Provider)}
		}
		switch {
		case err == nil:
			w.observe(target, key, nil)
			return w.started(ctx, sctx, m, p, j, step, key, log)
		case ctx.Err() != nil:
			return fmt.Errorf("process %s: start: %w", j.ID, err)
		case sctx.Err() != nil:
			return w.timeout(ctx, m, p, j)
		}
		f, refused := Failure(err)
		w.observe(target, key, &f)
		keyFree := w.Router != nil && refused && w.Router.KeyFree(target, tried)
		act, wait := w.decide(j, f, refused, keyFree)
		log.Warn("submit failed", "outcome", f.Outcome(), "class", f.Class.String(), "refused", refused, "action", act.String(), "key", key, "err", err)
		switch act {
		case route.OtherKey:
			continue
		case route.Again:
			return w.retry(ctx, j, w.backoff(j, wait), log)
		case route.Next:
			if refused && j.More() {
				return w.advance(ctx, j, target, log)
			}
		}
		return w.submitFailed(ctx, j, m.Provider, err, log)
	}
}

// started handles the vendor's answer to a submit: the media (copied and
// the job completed), or a handle (stored with the key that submitted,
// then polled).
func (w *Worker) started(ctx, sctx context.Context, m *catalog.Model, p Provider, j *Job, step *Step, key string, log *slog.Logger) error {
	if step.Result != nil {
		return w.finishOrRetry(ctx, sctx, m, p, j, step.Result, log)
	}
	if Capabilities(p).Poller == nil {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: "The provider answered a handle but cannot be polled; no credits were charged."})
	}
	h := *step.Handle
	h.Submitted = w.now().Unix()
	h.KeyID = key
	log.Info("submitted to vendor", "vendor_id", h.ID)
	return w.saveHandle(ctx, j, &h, log)
}

// observe records a submit's outcome in the Router, if there is one.
func (w *Worker) observe(t route.Target, key string, f *route.Failure) {
	if w.Router != nil {
		w.Router.Observe(t, key, f)
	}
}

// decide applies the routing policy to failure f of a submit of j (see
// Worker): Decide with the router's policy (DefaultPolicy without one),
// the retries at j's current candidate, whether another follows (only
// after a definite refusal), the time to j's deadline. At the last
// candidate, or after a failure the vendor may have taken the job with,
// the retries are MaxAttempts - 1; elsewhere the policy's, within them.
func (w *Worker) decide(j *Job, f route.Failure, refused, keyFree bool) (route.Action, time.Duration) {
	p := route.DefaultPolicy
	if w.Router != nil {
		p = w.Router.Policy()
	}
	more := refused && j.More()
	last := w.maxAttempts() - 1
	if more {
		p.Retries = min(p.Retries, last)
	} else {
		p.Retries = last
	}
	if p.Retries <= 0 {
		p.Retries = -1 // none (0 is the default's)
	}
	return p.Decide(f, route.State{Retry: max(j.Tries()-1, 0), More: more, KeyFree: keyFree,
		Left: w.deadline(j).Sub(w.now()), Jitter: rand.Float64()})
}

// advance moves claimed job j to its next candidate after the current
// one refused the submit: a conditional write on the run's claim, so that
// a redelivery or a restart continues there, then a message at once.
func (w *Worker) advance(ctx context.Context, j *Job, from route.Target, log *slog.Logger) error {
	next := j.Candidate + 1
	now := w.now()
	_, err := w.Store.Transition(ctx, j.ID, Processing, Processing, Patch{Candidate: &next, AttemptsBefore: j.Attempts,
		Updated: now.Unix(), NextRun: now.Unix(), IfRuns: &j.Runs})
	if errors.Is(err, ErrConflict) {
		return w.recheck(ctx, j.ID)
	}
	if err != nil {
		return fmt.Errorf("process %s: move to the next candidate: %w", j.ID, err)
	}
	if w.Router != nil {
		w.Router.Moved(from)
	}
	log.Warn("vendor refused the job; moving to the next candidate", "next", j.Candidates[next].Model)
	return w.schedule(ctx, j, 0)
}

// submitFailed fails j after its last submit to provider failed for
// good: as FailureOf says (the vendor's code and words for a refusal of
// the request, a generic message for one of the operator's account), else
// as a vendor that kept failing.
func (w *Worker) submitFailed(ctx context.Context, j *Job, provider string, err error, log *slog.Logger) error {
	if je := FailureOf(provider, err); je != nil {
		log.Warn("generation failed", "step", "start", "code", je.Code, "account", je.Vendor != "", "err", err)
		return w.fail(ctx, j, je)
	}
	log.Warn("vendor kept failing; job failed", "step", "start", "err", err)
	return w.fail(ctx, j, &JobError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor kept failing (%d attempts); no credits were charged.", j.Attempts)})
}

// saveHandle stores the vendor's handle on j and schedules the first poll.
// A handle that cannot be stored means a second submit after a restart, so
// the write is tried a few times before giving up.
func (w *Worker) saveHandle(ctx context.Context, j *Job, h *Handle, log *slog.Logger) error {
	interval := w.pollInterval()
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 && !ctxtime.Sleep(ctx, time.Duration(100<<try)*time.Millisecond) {
			break
		}
		now := w.now()
		_, err = w.Store.Transition(ctx, j.ID, Processing, Processing, Patch{Handle: h, Updated: now.Unix(), NextRun: now.Add(interval).Unix(), IfRuns: &j.Runs})
		if err == nil || errors.Is(err, ErrConflict) {
			break
		}
	}
	if err != nil {
		// The vendor works on a job we cannot find again: say where.
		log.Error("vendor handle not stored; the job will be started again", "vendor_id", h.ID, "err", err)
		if errors.Is(err, ErrConflict) {
			return w.recheck(ctx, j.ID)
		}
		return fmt.Errorf("process %s: store handle: %w", j.ID, err)
	}
	return w.schedule(ctx, j, interval)
}

// poll claims one poll round of j and asks the vendor once.
func (w *Worker) poll(ctx context.Context, m *catalog.Model, p Provider, j *Job, now time.Time) error {
	poller := Capabilities(p).Poller
	if poller == nil {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: "The job's provider cannot be polled; no credits were charged."})
	}
	interval := w.pollInterval()
	id := j.ID
	j, err := w.Store.Transition(ctx, id, Processing, Processing, Patch{Updated: now.Unix(), NextRun: now.Add(interval).Unix(), IfRuns: &j.Runs})
	if errors.Is(err, ErrConflict) {
		// Another delivery claimed this round (or finished the job).
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: claim poll: %w", id, err)
	}
	log := w.Log.With("job_id", j.ID, "model", j.Model, "candidate", m.ID, "vendor_id", j.Handle.ID, "poll", j.Runs)
	pctx, cancel := context.WithTimeout(withJobKey(ctx, j), w.deadline(j).Sub(now))
	defer cancel()
	res, err := poller.Poll(pctx, m, j)
	switch {
	case err != nil:
		return w.fault(ctx, pctx, m, p, j, "poll", err, log)
	case res == nil:
		return w.schedule(ctx, j, interval)
	}
	return w.finishOrRetry(ctx, pctx, m, p, j, res, log)
}

// finishOrRetry stores res and completes j; a transient failure of the
// copy is retried like a vendor fault.
func (w *Worker) finishOrRetry(ctx, rctx context.Context, m *catalog.Model, p Provider, j *Job, res *Result, log *slog.Logger) error {
	err := w.finish(rctx, j, res, log)
	if err == nil {
		return nil
	}
	return w.fault(ctx, rctx, m, p, j, "store output", err, log)
}

// fault decides what a failed poll or copy means (a failed submit is
// start's): a *ProviderError fails the job; the run's deadline passing
// fails it with timeout; the worker shutting down leaves the message to
// come back; anything else is transient and retried after a backoff (a
// copy of a synchronous vendor's media costs an attempt: the job is
// submitted again to the same candidate).
func (w *Worker) fault(ctx, rctx context.Context, m *catalog.Model, p Provider, j *Job, what string, err error, log *slog.Logger) error {
	var perr *ProviderError
	switch {
	case errors.As(err, &perr):
		je := FailureOf(m.Provider, err)
		log.Warn("generation failed", "step", what, "code", je.Code, "account", je.Vendor != "", "err", err)
		return w.fail(ctx, j, je)
	case ctx.Err() != nil:
		return fmt.Errorf("process %s: %s: %w", j.ID, what, err)
	case rctx.Err() != nil:
		return w.timeout(ctx, m, p, j)
	}
	var retryAfter time.Duration
	var terr *TransientError
	if errors.As(err, &terr) {
		retryAfter = terr.RetryAfter
	}
	if j.Handle == nil && j.Tries() >= w.maxAttempts() {
		log.Warn("vendor kept failing; job failed", "step", what, "err", err)
		return w.fail(ctx, j, &JobError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor kept failing (%d attempts); no credits were charged.", j.Attempts)})
	}
	log.Warn("transient vendor fault", "step", what, "err", err)
	return w.retry(ctx, j, w.backoff(j, retryAfter), log)
}

// retry schedules claimed job j's next run after delay: the run's
// NextRun moves to then (not the claim's lease end), and a message is
// sent with that delay.
func (w *Worker) retry(ctx context.Context, j *Job, delay time.Duration, log *slog.Logger) error {
	log.Info("retrying later", "retry_in", delay.String())
	now := w.now()
	if _, err := w.Store.Transition(ctx, j.ID, Processing, Processing, Patch{Updated: now.Unix(), NextRun: now.Add(delay).Unix(), IfRuns: &j.Runs}); err != nil {
		if errors.Is(err, ErrConflict) {
			return w.recheck(ctx, j.ID)
		}
		return fmt.Errorf("process %s: schedule retry: %w", j.ID, err)
	}
	return w.schedule(ctx, j, delay)
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

// schedule enqueues j's next run after delay, but no later than just past
// its deadline (so a job past it is failed promptly).
func (w *Worker) schedule(ctx context.Context, j *Job, delay time.Duration) error {
	if j.Started != 0 {
		if left := w.deadline(j).Sub(w.now()) + time.Second; left < delay {
			delay = max(left, 0)
		}
	}
	if err := enqueue(ctx, w.Queue, j.ID, j.Account, delay); err != nil {
		// The message comes back after its visibility timeout and runs
		// then (NextRun has passed by then).
		return fmt.Errorf("process %s: schedule next run: %w", j.ID, err)
	}
	return nil
}

// finish copies res into storage and completes j.
func (w *Worker) finish(ctx context.Context, j *Job, res *Result, log *slog.Logger) error {
	defer res.Body.Close()
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
		log.Info("job finished meanwhile; vendor result dropped", "status", cur.Status)
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
	if _, err := w.Store.Transition(ctx, j.ID, Processing, Completed, Patch{Output: out, Price: charge, Updated: w.now().Unix()}); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil // another run completed or failed it first
		}
		return fmt.Errorf("complete: %w", err)
	}
	log.Info("job completed", "bytes", out.Bytes, "runs", j.Runs, "served_by", j.Current().Model)
	jobFinished(j, Completed)
	return nil
}

// jobFinished counts a job that reached a final status.
func jobFinished(j *Job, s Status) {
	metrics.Default.Add("genway_jobs_finished_total", "Jobs that reached a final status, by type, model and status.",
		[]string{"type", "model", "status"}, []string{j.Type, j.Model, string(s)}, 1)
}

// timeout fails j for passing its deadline, cancelling it at its vendor
// first where that is possible (best effort).
func (w *Worker) timeout(ctx context.Context, m *catalog.Model, p Provider, j *Job) error {
	if c := Capabilities(p).Canceller; c != nil && j.Handle != nil {
		cctx, cancel := context.WithTimeout(withJobKey(ctx, j), 10*time.Second)
		if err := c.Cancel(cctx, m, j); err != nil {
			w.Log.Warn("cancel at vendor failed", "job_id", j.ID, "vendor_id", j.Handle.ID, "err", err)
		}
		cancel()
	}
	w.Log.Info("job passed its deadline", "job_id", j.ID, "candidate", m.ID, "deadline", w.limit(j).String())
	return w.fail(ctx, j, &JobError{Code: CodeTimeout, Message: fmt.Sprintf("The job did not finish within %s; no credits were charged.", w.limit(j))})
}

func (w *Worker) fail(ctx context.Context, j *Job, e *JobError) error {
	_, err := w.Store.Transition(ctx, j.ID, j.Status, Failed, Patch{Error: e, Updated: w.now().Unix()})
	if errors.Is(err, ErrConflict) {
		return w.recheck(ctx, j.ID)
	}
	if err != nil {
		return fmt.Errorf("fail job %s: %w", j.ID, err)
	}
	jobFinished(j, Failed)
	return nil
}

// recheck decides after a lost race: done if the job is final, else retry.
func (w *Worker) recheck(ctx context.Context, id string) error {
	j, err := w.Store.Get(ctx, id)
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
