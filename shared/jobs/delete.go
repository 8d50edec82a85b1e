package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// Delete deletes account's final job id (DELETE /v1/videos/{id}) and
// returns it: its output is removed from the media store and the job is
// marked deleted (DeleteStore.Delete), after which Get answers
// ErrNotFound and no listing shows it. Its charge stands: deleting a
// video refunds nothing, and its job usage keeps counting it.
//
// A deleted job leaves the listings that Reconcile reads, so Delete first
// settles it as the change feed does (credits.Apply with the job's final
// change: a no-op when the feed settled it already, and the feed's own
// settlement afterwards is one too). A settlement is never lost and never
// made twice.
//
//   - A job that does not exist, is malformed, is another account's or is
//     deleted already: ErrNotFound, as Get.
//   - queued or processing: 409 job_not_final; cancel it first (Cancel).
//
// A failure part way (the settlement, the media store, the store) leaves
// the job readable; deleting it again finishes the work.
func (s *Service) Delete(ctx context.Context, account, id string) (*Job, error) {
	j, err := s.Get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	return s.DeleteJob(ctx, j)
}

// DeleteJob is Delete of j, the job as Get returned it to its account
// (a caller that read the job already, to check more than Get does, saves
// a second read).
func (s *Service) DeleteJob(ctx context.Context, j *Job) (*Job, error) {
	id := j.ID
	if !j.Status.Final() {
		return nil, notFinal(j)
	}
	if s.Deletes == nil || s.Credits == nil || s.Media == nil {
		return nil, fmt.Errorf("delete job %s: the service has no DeleteStore, credits store or media store", id)
	}
	if err := credits.Apply(ctx, s.Credits, j.Change(Processing, j.Updated)); err != nil {
		return nil, fmt.Errorf("delete job %s: %w", id, err)
	}
	if j.Output != nil && j.Output.Key != "" {
		if err := s.Media.Delete(ctx, j.Output.Key); err != nil {
			return nil, fmt.Errorf("delete job %s output: %w", id, err)
		}
	}
	got, err := s.Deletes.Delete(ctx, id, s.now().Unix())
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ErrNotFound // deleted concurrently
		}
		return nil, fmt.Errorf("delete job %s: %w", id, err)
	}
	s.Log.InfoContext(ctx, "job deleted", "job_id", got.ID, "account", got.Account, "status", got.Status)
	return got, nil
}

// notFinal is the 409 for deleting job j that is not final.
func notFinal(j *Job) error {
	return &apierr.Error{Kind: ErrNotFinal.Kind, Code: ErrNotFinal.Code,
		Message: fmt.Sprintf("The job is %s; only a completed or failed job can be deleted. Wait for it to end, or cancel it first (POST /v1/jobs/%s/cancel).", j.Status, j.ID)}
}
