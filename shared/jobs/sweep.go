package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sweep defaults.
const (
	// DefaultSweepAfter is how long a job may wait queued, with no new
	// message, before Sweep sends its message again.
	DefaultSweepAfter = 2 * time.Minute
	// DefaultSweepLimit bounds the jobs one Sweep handles; the rest wait for
	// the next run.
	DefaultSweepLimit = 100
	// DefaultMaxSweeps is how many times Sweep re-sends a job's message.
	// Sweep fails a job it finds still queued after that many (no charge;
	// about an hour with DefaultSweepAfter), so nothing is retried forever.
	DefaultMaxSweeps = 30
)

// SweepStore finds jobs left without a message: a store whose job write
// and queue send are not one transaction (DynamoDB and SQS) loses the
// message when the writer dies between the two, and a message that keeps
// failing ends in the dead-letter queue. The jobs it lists are queued ones,
// and processing ones whose next run (Job.NextRun) is overdue: a poll or a
// retry whose message was lost. Implementations are safe for concurrent
// use.
type SweepStore interface {
	// QueuedBefore returns the ids of up to limit jobs that are queued and
	// whose message was last sent (at creation, or by MarkSwept) before t,
	// or processing with a next run due before t.
	// It may be eventually consistent: a job that just left queued can
	// still be listed (MarkSwept then says so).
	QueuedBefore(ctx context.Context, t time.Time, limit int) ([]string, error)
	// MarkSwept records that job id's message is sent again at t (so
	// QueuedBefore lists it again only after t), if the job still waits
	// for one, and returns how many times it has been swept, this time
	// included. It returns an error wrapping ErrConflict if the job no
	// longer waits (it is final, or its worker claimed a new run), and
	// ErrNotFound if there is no such job.
	MarkSwept(ctx context.Context, id string, at time.Time) (int, error)
}

// SweepResult counts what one Sweep did.
type SweepResult struct {
	Found    int `json:"found"`    // jobs listed as queued too long
	Requeued int `json:"requeued"` // messages sent again
	Failed   int `json:"failed"`   // jobs given up on: failed, hold released
	Skipped  int `json:"skipped"`  // jobs that had left queued in the meantime
}

// Sweep sends the message of every job that has been queued for longer
// than olderThan since its last message again (up to SweepLimit jobs per
// call), so that a job whose creator died between storing it and enqueueing
// it still runs. The worker tolerates the duplicate this makes when the
// first message was only slow. A job still queued after MaxSweeps re-sends
// is failed with CodeInternal instead, which releases its hold. It needs
// s.Sweeps. Per-job errors do not stop the sweep: they are joined into the
// returned error, next to the counts of what was done.
func (s *Service) Sweep(ctx context.Context, olderThan time.Duration) (SweepResult, error) {
	if olderThan <= 0 {
		return SweepResult{}, fmt.Errorf("sweep: threshold %v is not positive", olderThan)
	}
	return s.SweepBefore(ctx, s.now().Add(-olderThan))
}

// SweepBefore is Sweep of the jobs whose message was last sent before t,
// and of the processing ones whose next run was due before t, whenever t
// is: a process that starts again after a crash sweeps, once, everything
// its predecessor may have left without a live message (see
// cmd/genway's AWS backend).
func (s *Service) SweepBefore(ctx context.Context, t time.Time) (SweepResult, error) {
	var res SweepResult
	if s.Sweeps == nil {
		return res, errors.New("sweep: the service has no SweepStore")
	}
	limit, maxSweeps := s.SweepLimit, s.MaxSweeps
	if limit <= 0 {
		limit = DefaultSweepLimit
	}
	if maxSweeps <= 0 {
		maxSweeps = DefaultMaxSweeps
	}
	now := s.now()
	ids, err := s.Sweeps.QueuedBefore(ctx, t, limit)
	if err != nil {
		return res, fmt.Errorf("sweep: list queued jobs: %w", err)
	}
	res.Found = len(ids)
	var errs []error
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
			break
		}
		n, err := s.Sweeps.MarkSwept(ctx, id, now)
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			res.Skipped++
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep job %s: %w", id, err))
			continue
		}
		if n > maxSweeps {
			_, err := s.Store.Transition(ctx, id, Queued, Failed, Patch{
				Error:   &JobError{Code: CodeInternal, Message: fmt.Sprintf("The job could not be started after %d attempts to queue it; no credits were charged.", n)},
				Updated: now.Unix(),
			})
			switch {
			case errors.Is(err, ErrConflict):
				// Processing, its run overdue: the worker decides (its
				// deadline fails the job), so send the message again.
				if err := s.Queue.Enqueue(ctx, id, 0); err != nil {
					errs = append(errs, fmt.Errorf("sweep job %s: %w", id, err))
					continue
				}
				res.Requeued++
			case errors.Is(err, ErrNotFound):
				res.Skipped++
			case err != nil:
				errs = append(errs, fmt.Errorf("sweep job %s: give up: %w", id, err))
			default:
				res.Failed++
				s.Log.Warn("queued job never started; failed it", "job_id", id, "sweeps", n-1)
			}
			continue
		}
		if err := s.Queue.Enqueue(ctx, id, 0); err != nil {
			errs = append(errs, fmt.Errorf("sweep job %s: %w", id, err))
			continue
		}
		res.Requeued++
		s.Log.Info("re-enqueued queued job", "job_id", id, "sweep", n)
	}
	return res, errors.Join(errs...)
}
