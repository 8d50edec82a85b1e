package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// CancelMessage is the error message of a job its client cancelled.
const CancelMessage = "Cancelled by the client."

// vendorCancelTimeout bounds the call that stops a job at its vendor.
const vendorCancelTimeout = 10 * time.Second

// cancelTries bounds the transitions Cancel tries while the worker moves
// the job on concurrently (a poll claim changes its runs).
const cancelTries = 3

// Cancel stops account's job id and returns it, failed with error code
// CodeCancelled; the change feed then releases its hold like any failed
// job's (no charge).
//
//   - A job that does not exist, is malformed or is another account's:
//     ErrNotFound, as Get.
//   - queued: failed at once. A worker that took the job meanwhile finds
//     it final and never starts it.
//   - processing: stopped at its vendor first (the provider's Canceller,
//     with the job's Handle), then failed on condition that the job is
//     still processing with the runs read before; a completion that won
//     the race is a 409 job_final. A provider that cannot cancel, or a job
//     not yet handed to its vendor, is a 409 job_not_cancellable; a vendor
//     that refuses is a 409 too, and one that cannot be reached a 502:
//     the job then goes on.
//   - completed or failed: 409 job_final.
func (s *Service) Cancel(ctx context.Context, account, id string) (*Job, error) {
	j, err := s.Get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	atVendor := false // the vendor was told to stop
	for try := 1; ; try++ {
		var p Patch
		switch j.Status {
		case Queued:
			p = Patch{Error: &JobError{Code: CodeCancelled, Message: CancelMessage}, Updated: s.now().Unix()}
		case Processing:
			if !atVendor {
				if err := s.cancelAtVendor(ctx, j); err != nil {
					return nil, err
				}
				atVendor = true
			}
			runs := j.Runs
			p = Patch{Error: &JobError{Code: CodeCancelled, Message: CancelMessage}, Updated: s.now().Unix(), IfRuns: &runs}
		default:
			return nil, finalError(j)
		}
		got, err := s.Store.Transition(ctx, j.ID, j.Status, Failed, p)
		if err == nil {
			s.Log.InfoContext(ctx, "job cancelled", "job_id", got.ID, "account", got.Account, "was", j.Status, "at_vendor", atVendor)
			return got, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("cancel job %s: %w", id, err)
		}
		if try == cancelTries {
			return nil, fmt.Errorf("cancel job %s: the job kept changing: %w", id, err)
		}
		// The worker moved the job on: read it again and decide anew.
		if j, err = s.Store.Get(ctx, id); err != nil {
			return nil, fmt.Errorf("cancel job %s: %w", id, err)
		}
	}
}

// cancelAtVendor stops processing job j at its vendor (the candidate it
// is at, with the key that submitted it), or says why it cannot be.
func (s *Service) cancelAtVendor(ctx context.Context, j *Job) error {
	var c Canceller
	var m *catalog.Model
	ok := false
	model := j.Current().Model
	if s.Catalog != nil {
		m, ok = s.Catalog.Model(model)
	}
	if ok {
		c = Capabilities(s.Providers[m.Provider]).Canceller
		ok = c != nil
	}
	if !ok {
		return notCancellable(fmt.Sprintf("The vendor of model %s cannot cancel a running job; it will complete or fail on its own.", model))
	}
	if j.Handle == nil {
		return notCancellable("The job is being submitted to its vendor and cannot be cancelled yet; try again in a few seconds.")
	}
	cctx, cancel := context.WithTimeout(withJobKey(ctx, j), vendorCancelTimeout)
	defer cancel()
	err := c.Cancel(cctx, m, j)
	var perr *ProviderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &perr):
		s.Log.InfoContext(ctx, "vendor refused to cancel", "job_id", j.ID, "vendor_id", j.Handle.ID, "err", err)
		if FailureOf(m.Provider, err).Vendor != "" {
			// The operator's account at the vendor: its words (key,
			// balance) are for the operator's log only.
			return notCancellable(fmt.Sprintf("The %s provider refused to cancel the job; it will complete or fail on its own.", m.Provider))
		}
		return notCancellable(fmt.Sprintf("The vendor refused to cancel the job (it may be finishing): %s", perr.Message))
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return &apierr.Error{Kind: apierr.Upstream, Code: "upstream_error", Err: fmt.Errorf("cancel job %s at vendor: %w", j.ID, err),
		Message: "The vendor could not be reached to cancel the job; it is still running. Try again."}
}

func notCancellable(msg string) error {
	return &apierr.Error{Kind: ErrNotCancellable.Kind, Code: ErrNotCancellable.Code, Message: msg}
}

// finalError is the 409 for cancelling final job j.
func finalError(j *Job) error {
	return &apierr.Error{Kind: ErrJobFinal.Kind, Code: ErrJobFinal.Code,
		Message: fmt.Sprintf("The job is already %s; only a queued or processing job can be cancelled.", j.Status)}
}
