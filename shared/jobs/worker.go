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
	"github.com/genway/genway/shared/metrics"
)

// Worker defaults.
const (
	// DefaultMaxAttempts is how many times a worker starts a job at its
	// vendor (a crash, or a transient vendor fault, costs one). It is one
	// less than the queue's maxReceiveCount (5): the fifth delivery of a
	// message finds the attempts spent and fails the job (no charge), so a
	// job whose attempts all crashed the worker is still marked failed
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
type Worker struct {
	Store       Store
	Queue       Queue // re-enqueues polls and retries
	Media       Media
	Providers   map[string]Provider // by catalog provider name
	Catalog     *catalog.Catalog
	Log         *slog.Logger
	MaxAttempts int              // 0: DefaultMaxAttempts
	Now         func() time.Time // nil: time.Now
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
	m, ok := w.Catalog.Model(j.Model)
	var p Provider
	if ok {
		p = w.Providers[m.Provider]
	}
	if p == nil {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: fmt.Sprintf("The model %s has no configured provider; no credits were charged.", j.Model)})
	}
	if j.Started != 0 && !now.Before(deadline(m, j)) {
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

func deadline(m *catalog.Model, j *Job) time.Time {
	return time.Unix(j.Started, 0).Add(m.Deadline())
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

// start claims j and starts it at its vendor.
func (w *Worker) start(ctx context.Context, m *catalog.Model, p Provider, j *Job, now time.Time) error {
	max := w.MaxAttempts
	if max == 0 {
		max = DefaultMaxAttempts
	}
	if j.Attempts >= max {
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
	log := w.Log.With("job_id", j.ID, "model", j.Model, "attempt", j.Attempts)
	sctx, cancel := context.WithTimeout(ctx, deadline(m, j).Sub(now))
	defer cancel()
	step, err := p.Start(sctx, m, j)
	if err == nil && (step == nil || (step.Result == nil) == (step.Handle == nil)) {
		err = &ProviderError{Code: CodeInternal, Message: "The provider answered neither media nor a handle.", Err: fmt.Errorf("provider %s: bad step", m.Provider)}
	}
	if err != nil {
		if step != nil && step.Result != nil {
			step.Result.Body.Close()
		}
		return w.fault(ctx, sctx, m, p, j, "start", err, log)
	}
	if step.Result != nil {
		return w.finishOrRetry(ctx, sctx, m, p, j, step.Result, log)
	}
	if _, ok := p.(Poller); !ok {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: "The provider answered a handle but cannot be polled; no credits were charged."})
	}
	h := *step.Handle
	h.Submitted = w.now().Unix()
	log.Info("submitted to vendor", "vendor_id", h.ID)
	return w.saveHandle(ctx, j, &h, log)
}

// saveHandle stores the vendor's handle on j and schedules the first poll.
// A handle that cannot be stored means a second submit after a restart, so
// the write is tried a few times before giving up.
func (w *Worker) saveHandle(ctx context.Context, j *Job, h *Handle, log *slog.Logger) error {
	interval := w.pollInterval()
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 && !sleep(ctx, time.Duration(100<<try)*time.Millisecond) {
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
	poller, ok := p.(Poller)
	if !ok {
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
	log := w.Log.With("job_id", j.ID, "model", j.Model, "vendor_id", j.Handle.ID, "poll", j.Runs)
	pctx, cancel := context.WithTimeout(ctx, deadline(m, j).Sub(now))
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

// fault decides what a failed start, poll or copy means: a *ProviderError
// fails the job; the run's deadline passing fails it with timeout; the
// worker shutting down leaves the message to come back; anything else is
// transient and retried after a backoff (a start costs an attempt).
func (w *Worker) fault(ctx, rctx context.Context, m *catalog.Model, p Provider, j *Job, what string, err error, log *slog.Logger) error {
	var perr *ProviderError
	switch {
	case errors.As(err, &perr):
		log.Info("generation failed", "step", what, "code", perr.Code, "err", err)
		return w.fail(ctx, j, &JobError{Code: perr.Code, Message: perr.Message})
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
	if j.Handle == nil {
		max := w.MaxAttempts
		if max == 0 {
			max = DefaultMaxAttempts
		}
		if j.Attempts >= max {
			log.Warn("vendor kept failing; job failed", "step", what, "err", err)
			return w.fail(ctx, j, &JobError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor kept failing (%d attempts); no credits were charged.", j.Attempts)})
		}
	}
	delay := w.backoff(j, retryAfter)
	log.Warn("transient vendor fault; retrying", "step", what, "retry_in", delay.String(), "err", err)
	// The next run is due after the delay, not at the claim's lease end.
	now := w.now()
	if _, uerr := w.Store.Transition(ctx, j.ID, Processing, Processing, Patch{Updated: now.Unix(), NextRun: now.Add(delay).Unix(), IfRuns: &j.Runs}); uerr != nil {
		if errors.Is(uerr, ErrConflict) {
			return w.recheck(ctx, j.ID)
		}
		return fmt.Errorf("process %s: schedule retry: %w", j.ID, uerr)
	}
	return w.schedule(ctx, j, delay)
}

// backoff is the delay before retrying j: exponential in its runs (full
// jitter, capped), polls never sooner than the poll interval, and never
// sooner than the vendor's Retry-After.
func (w *Worker) backoff(j *Job, retryAfter time.Duration) time.Duration {
	base := w.RetryBase
	if base <= 0 {
		base = DefaultRetryBase
	}
	n := j.Attempts
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
	if m, ok := w.Catalog.Model(j.Model); ok && j.Started != 0 {
		if left := deadline(m, j).Sub(w.now()) + time.Second; left < delay {
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
	if err := w.Media.Put(ctx, key, res.ContentType, body, res.Size); err != nil {
		if errors.Is(err, errTooLarge) {
			return &ProviderError{Code: CodeUpstream, Message: fmt.Sprintf("The vendor's file is larger than the %d-byte limit; no credits were charged.", maxBytes), Err: err}
		}
		return fmt.Errorf("store output: %w", err)
	}
	out := &Output{Key: key, ContentType: res.ContentType, Bytes: body.n, Duration: res.Duration, Width: res.Width, Height: res.Height}
	if out.Duration == 0 {
		out.Duration = j.Input.Duration
	}
	if j.Type == TypeVideo && out.Width == 0 {
		out.Width, out.Height = parseSize(j.Input.Size)
	}
	if _, err := w.Store.Transition(ctx, j.ID, Processing, Completed, Patch{Output: out, Updated: w.now().Unix()}); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil // another run completed or failed it first
		}
		return fmt.Errorf("complete: %w", err)
	}
	log.Info("job completed", "bytes", out.Bytes, "runs", j.Runs)
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
	if c, ok := p.(Canceller); ok && j.Handle != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Cancel(cctx, m, j); err != nil {
			w.Log.Warn("cancel at vendor failed", "job_id", j.ID, "vendor_id", j.Handle.ID, "err", err)
		}
		cancel()
	}
	w.Log.Info("job passed its deadline", "job_id", j.ID, "deadline", m.Deadline().String())
	return w.fail(ctx, j, &JobError{Code: CodeTimeout, Message: fmt.Sprintf("The job did not finish within %s; no credits were charged.", m.Deadline())})
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

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
