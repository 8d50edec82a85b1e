package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/metrics"
)

// IdempotencyTTL is how long an Idempotency-Key maps to its job.
const IdempotencyTTL = 24 * time.Hour

// DefaultLinkTTL is how long an output link made at read time works.
const DefaultLinkTTL = time.Hour

// Service is the jobs API: create, read, list and cancel, and Sweep for
// stores that need it. Safe for concurrent use.
type Service struct {
	Store   Store
	Queue   Queue
	Media   Media
	Catalog *catalog.Catalog
	// Balances, if set, is read when a job is refused for credits, so that
	// the 402 says what the job costs and what the account has.
	Balances interface {
		Account(ctx context.Context, id string) (credits.Account, error)
	}
	// Configured reports whether a catalog provider can run jobs here; a
	// job for a model of another is refused like an unknown model. nil:
	// every provider is.
	Configured func(provider string) bool
	// Providers are the job providers by catalog provider name, for
	// Cancel: a processing job is cancelled at its vendor when its
	// provider is a Canceller. nil: no processing job can be cancelled.
	Providers map[string]Provider
	Log       *slog.Logger
	LinkTTL   time.Duration    // 0: DefaultLinkTTL
	Now       func() time.Time // nil: time.Now
	// Sweeps lists jobs left queued, for Sweep; nil where the store writes
	// the job and its message in one transaction (no Sweep needed).
	Sweeps     SweepStore
	SweepLimit int // jobs per Sweep; 0: DefaultSweepLimit
	MaxSweeps  int // re-sends before Sweep fails a job; 0: DefaultMaxSweeps
	// Deletes, Credits and Media are what Delete needs: the store marks
	// the job deleted, Credits settles it first, Media removes its output
	// (see Delete). nil: Delete fails.
	Deletes DeleteStore
	Credits credits.Store
	// Retention is how long an output is kept after its job completed
	// (the media store's expiry: GENWAY_MEDIA_RETENTION locally, the S3
	// lifecycle rule on AWS); 0 when unknown. See Expires.
	Retention time.Duration
	// CheckWebhookURL validates a request's webhook_url (param names
	// the field; webhooks.Service.CheckURL). nil: webhook_url is refused.
	CheckWebhookURL func(param, raw string) error
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Create validates req against its model (the lead), computes the job's
// candidates (Candidates: the lead, then its catalog fallbacks that can
// serve the same input), holds the highest of their prices on account,
// and stores and enqueues the job. With a non-empty idemKey, a retry with
// the same key and body (bodyHash) returns the job the first call
// created (ErrIdempotencyConflict if it was deleted since); another body
// is ErrIdempotencyConflict. Errors are
// *apierr.Error for client faults, all of them about the lead: a fallback
// that cannot serve the request is silently not a candidate.
func (s *Service) Create(ctx context.Context, account string, req *CreateRequest, idemKey, bodyHash string) (*Job, error) {
	m, in, err := Validate(s.Catalog, req)
	if err != nil {
		return nil, err
	}
	if req.WebhookURL != "" {
		if s.CheckWebhookURL == nil {
			return nil, apierr.Invalidf("webhook_url", "unsupported_parameter", "webhook_url is not supported on this deployment.")
		}
		if err := s.CheckWebhookURL("webhook_url", req.WebhookURL); err != nil {
			return nil, err
		}
	}
	if !s.configured(m) {
		return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q is not configured on this deployment; see GET /v1/models?type=%s.", m.ID, m.Type)}
	}
	if err := auth.CheckModel(ctx, "model", m.ID); err != nil {
		return nil, err
	}
	id, err := NewID(req.Type)
	if err != nil {
		return nil, err
	}
	now := s.now().Unix()
	cands := s.candidates(ctx, m, req, in)
	var hold credits.Amount
	for _, c := range cands {
		hold = max(hold, c.Price)
	}
	j := &Job{
		ID: id, Account: account, Type: req.Type, Model: m.ID, Status: Queued, Input: in,
		Price: hold, Hold: hold, Candidates: cands, Created: now, Updated: now, Key: auth.KeyID(ctx), WebhookURL: req.WebhookURL,
	}
	var idem *Idempotency
	if idemKey != "" {
		idem = &Idempotency{Key: account + "/" + idemKey, BodyHash: bodyHash, JobID: id, Expires: now + int64(IdempotencyTTL/time.Second)}
	}
	got, err := s.Store.Create(ctx, j, idem)
	if errors.Is(err, credits.ErrKeyLimit) {
		return nil, err // its message says what the key has left
	}
	if errors.Is(err, ErrInsufficientCredits) {
		return nil, s.short(ctx, account, j)
	}
	if err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	if got.ID != j.ID {
		// An idempotent replay: the first call enqueued the job, or died
		// before it could and Sweep sends the message; a second send here
		// would only add a duplicate. A job deleted since is not shown
		// again.
		if got.Deleted != 0 {
			return nil, &apierr.Error{Kind: ErrIdempotencyConflict.Kind, Code: ErrIdempotencyConflict.Code,
				Message: "The job this Idempotency-Key created has been deleted since; send the request with a new key."}
		}
		if !auth.CanSeeJob(ctx, got.Key) {
			// Another key's job, which this key may not see.
			return nil, &apierr.Error{Kind: ErrIdempotencyConflict.Kind, Code: ErrIdempotencyConflict.Code,
				Message: "This Idempotency-Key was used by another API key of the account; send the request with a new key."}
		}
		return got, nil
	}
	if err := s.enqueue(ctx, j.ID, account); err != nil {
		// The job must not sit queued forever with no message: fail it, which
		// releases the hold through the change feed.
		s.Log.Error("enqueue failed; failing job", "job_id", j.ID, "err", err)
		fctx := context.WithoutCancel(ctx)
		if _, ferr := s.Store.Transition(fctx, j.ID, Queued, Failed, Patch{
			Error: &JobError{Code: CodeInternal, Message: "The job could not be queued; no credits were charged."}, Updated: s.now().Unix(),
		}); ferr != nil {
			s.Log.Error("failing unqueued job", "job_id", j.ID, "err", ferr)
		}
		return nil, fmt.Errorf("enqueue job %s: %w", j.ID, err)
	}
	metrics.Default.Add("genway_jobs_created_total", "Jobs created, by type and model.", []string{"type", "model"}, []string{got.Type, got.Model}, 1)
	return got, nil
}

// short is the 402 for job j that account cannot pay: it says the price
// (for a job with fallbacks, the hold: the highest of their prices) and,
// when Balances can tell, what the account has.
func (s *Service) short(ctx context.Context, account string, j *Job) error {
	return credits.Shortfall(ctx, s.Balances, account, "This job", j.Price, len(j.Candidates) > 1, nil)
}

// configured reports whether m's provider can run jobs here.
func (s *Service) configured(m *catalog.Model) bool {
	return s.Configured == nil || s.Configured(m.Provider)
}

// candidates returns the models that may serve a job of lead m with
// input in (req validated against m): m first, then each of m's catalog
// fallbacks, in order, that accepts the same request with the same
// input (duration, format, mode, lyrics, category, size: Validate with
// in's values gives in back), whose provider is configured here and which
// the caller's API key may use (a fallback the key may not use is
// skipped, not an error). Each is priced by its own catalog price for
// in's duration.
func (s *Service) candidates(ctx context.Context, m *catalog.Model, req *CreateRequest, in Input) []Candidate {
	out := []Candidate{{Model: m.ID, Price: m.Price.JobCost(in.Duration)}}
	for _, id := range m.Fallbacks {
		r := CreateRequest{Type: req.Type, Model: id, Prompt: req.Prompt, Duration: &in.Duration, Category: req.Category}
		switch req.Type {
		case TypeMusic:
			r.Format, r.Mode = &in.Format, &in.Mode
			if in.Mode == "LYRICS" {
				r.Lyrics = &in.Lyrics
			}
		case TypeSFX:
			r.Format = &in.Format
		case TypeVideo:
			r.Size, r.Resolution = &in.Size, req.Resolution
		}
		f, fin, err := Validate(s.Catalog, &r)
		if err != nil || fin != in || !s.configured(f) || !auth.Allowed(ctx, f.ID) {
			continue
		}
		out = append(out, Candidate{Model: f.ID, Price: f.Price.JobCost(in.Duration)})
	}
	return out
}

func (s *Service) enqueue(ctx context.Context, id, account string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = enqueue(ctx, s.Queue, id, account, 0); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return err
}

// Get returns account's job id, or ErrNotFound if it does not exist, is
// malformed, belongs to another account, was deleted, or was made by
// another key than the caller's in ctx while that key may see only its
// own jobs (auth.CanSeeJob). Cancel and Delete read the job through it.
func (s *Service) Get(ctx context.Context, account, id string) (*Job, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	j, err := s.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && (j.Account != account || j.Deleted != 0 || !auth.CanSeeJob(ctx, j.Key))) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, nil
}

// Expires returns the Unix second a completed job's output expires (it
// ended plus Retention), 0 if the job is not completed or Retention is
// unknown.
func (s *Service) Expires(j *Job) int64 {
	if j.Status != Completed || s.Retention <= 0 {
		return 0
	}
	return j.Ended() + int64(s.Retention/time.Second)
}

// Expired reports whether a completed job's output has expired (see
// Expires): the media store has deleted it, or will any moment.
func (s *Service) Expired(j *Job) bool {
	e := s.Expires(j)
	return e != 0 && s.now().Unix() >= e
}

// Link returns a fresh link to a completed job's output ("" if none).
func (s *Service) Link(ctx context.Context, j *Job) (string, error) {
	if j.Output == nil || j.Output.Key == "" {
		return "", nil
	}
	ttl := s.LinkTTL
	if ttl == 0 {
		ttl = DefaultLinkTTL
	}
	u, err := s.Media.URL(ctx, j.Output.Key, ttl)
	if err != nil {
		return "", fmt.Errorf("link job %s output: %w", j.ID, err)
	}
	return u, nil
}
