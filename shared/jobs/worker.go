package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// DefaultMaxAttempts is how many times a worker tries a job. It is one less
// than the queue's maxReceiveCount (5): the fifth delivery of a message finds
// the attempts spent and fails the job (no charge), so a job whose attempts
// all crashed the worker is still marked failed before its message goes to
// the dead-letter queue, never left processing forever.
const DefaultMaxAttempts = 4

// Worker turns queued jobs into media. Process is idempotent: a message
// delivered twice, or redelivered after a crash, never completes a job twice
// (completion is a conditional transition from processing). Safe for
// concurrent use.
type Worker struct {
	Store       Store
	Media       Media
	Providers   map[string]Provider // by catalog provider name
	Catalog     *catalog.Catalog
	Log         *slog.Logger
	MaxAttempts int              // 0: DefaultMaxAttempts
	Now         func() time.Time // nil: time.Now
	// Lease is how long a worker owns a job it started: a duplicate
	// delivery of a job that another worker started less than Lease ago is
	// sent back for later (ErrBusy) instead of being generated twice. Set it
	// to the worker's timeout where deliveries can overlap (SQS); 0 (the
	// embedded queue, which hands a job to one worker at a time) takes a
	// processing job over at once.
	Lease time.Duration
}

// ErrBusy is returned by Process for a job another worker is still running.
var ErrBusy = errors.New("job is being processed by another worker")

func (w *Worker) now() int64 {
	if w.Now != nil {
		return w.Now().Unix()
	}
	return time.Now().Unix()
}

// Process runs job id. A nil error means the message can be acknowledged:
// the job is final, or unknown. An error means "retry later" (the job is
// left processing and the message will come back).
func (w *Worker) Process(ctx context.Context, id string) error {
	log := w.Log.With("job_id", id)
	j, err := w.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		log.Warn("message for unknown job dropped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %s: %w", id, err)
	}
	if j.Status.Final() {
		return nil // duplicate delivery
	}
	max := w.MaxAttempts
	if max == 0 {
		max = DefaultMaxAttempts
	}
	if j.Status == Processing && w.Lease > 0 && w.now() < j.Updated+int64(w.Lease/time.Second) {
		return fmt.Errorf("process %s: %w (attempt %d started at %d)", id, ErrBusy, j.Attempts, j.Updated)
	}
	if j.Attempts >= max {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: fmt.Sprintf("Generation did not finish after %d attempts; no credits were charged.", j.Attempts)})
	}
	j, err = w.Store.Transition(ctx, id, j.Status, Processing, Patch{IncAttempts: true, Updated: w.now()})
	if errors.Is(err, ErrConflict) {
		return w.recheck(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("process %s: start: %w", id, err)
	}
	var p Provider
	if m, ok := w.Catalog.Model(j.Model); ok {
		p = w.Providers[m.Provider]
	}
	if p == nil {
		return w.fail(ctx, j, &JobError{Code: CodeInternal, Message: fmt.Sprintf("The model %s has no configured provider.", j.Model)})
	}
	res, err := p.Generate(ctx, j)
	var perr *ProviderError
	switch {
	case errors.As(err, &perr):
		log.Info("generation failed", "code", perr.Code, "err", err)
		return w.fail(ctx, j, &JobError{Code: perr.Code, Message: perr.Message})
	case err != nil:
		return fmt.Errorf("process %s: generate (attempt %d): %w", id, j.Attempts, err)
	}
	// The key carries the attempt, so a concurrent duplicate never
	// overwrites the object a winning attempt points at.
	key := fmt.Sprintf("jobs/%s/%s-%d.%s", j.Account, j.ID, j.Attempts, res.Ext)
	if err := w.Media.Put(ctx, key, res.ContentType, bytes.NewReader(res.Data), int64(len(res.Data))); err != nil {
		return fmt.Errorf("process %s: store output: %w", id, err)
	}
	out := &Output{Key: key, ContentType: res.ContentType, Bytes: int64(len(res.Data)), Duration: res.Duration, Width: res.Width, Height: res.Height}
	if _, err := w.Store.Transition(ctx, id, Processing, Completed, Patch{Output: out, Updated: w.now()}); err != nil {
		if errors.Is(err, ErrConflict) {
			return w.recheck(ctx, id)
		}
		return fmt.Errorf("process %s: complete: %w", id, err)
	}
	log.Info("job completed", "bytes", out.Bytes, "attempt", j.Attempts)
	return nil
}

func (w *Worker) fail(ctx context.Context, j *Job, e *JobError) error {
	_, err := w.Store.Transition(ctx, j.ID, j.Status, Failed, Patch{Error: e, Updated: w.now()})
	if errors.Is(err, ErrConflict) {
		return w.recheck(ctx, j.ID)
	}
	if err != nil {
		return fmt.Errorf("fail job %s: %w", j.ID, err)
	}
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
