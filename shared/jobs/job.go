// Package jobs is the asynchronous generation domain: the Job and its state
// machine, request validation against the catalog, the Service behind
// POST/GET /v1/jobs, and the Worker that turns a queued job into media.
//
// It declares the small interfaces it needs (Store, Queue, Media, Provider);
// adapters (localstore, dynamostore, sqsqueue, s3media, ...) implement them.
package jobs

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// Job types.
const (
	TypeMusic = "music"
	TypeSFX   = "sfx"
	TypeVideo = "video"
)

// Input is the validated request with defaults applied.
type Input struct {
	Prompt     string `json:"prompt"`
	Duration   int    `json:"duration"`
	Format     string `json:"format,omitempty"`
	Mode       string `json:"mode,omitempty"`
	Lyrics     string `json:"lyrics,omitempty"`
	Category   string `json:"category,omitempty"`
	Size       string `json:"size,omitempty"`
	Resolution string `json:"resolution,omitempty"`
}

// Output is a finished job's media. Key is the storage key; URL is made at
// read time (a presigned or signed link) and never stored.
type Output struct {
	Key         string `json:"key"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Duration    int    `json:"duration"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
}

// Error codes of a failed job.
const (
	CodeUpstream      = "upstream_error"
	CodeContentPolicy = "content_policy"
	CodeTimeout       = "timeout"
	CodeInternal      = "internal_error"
	// CodeCancelled is a job its client cancelled (Service.Cancel).
	CodeCancelled = "cancelled"
)

// JobError is why a job failed.
type JobError struct {
	Code    string `json:"code"`
	Message string `json:"message"` // shown to the client
	// Vendor is the vendor's own words when Message is this service's
	// generic one because the failure is about the operator's account at
	// the vendor (a refused key, a used-up quota or balance: FailureOf).
	// It is for the operator (the console, the admin API, the log); the
	// public API and webhooks never render it.
	Vendor string `json:"vendor,omitempty"`
}

// StatusChange is one entry of a job's status history: the status it
// entered, when (Unix seconds), and for a failure its error code.
type StatusChange struct {
	Status    Status `json:"status"`
	At        int64  `json:"at"`
	ErrorCode string `json:"error_code,omitempty"`
}

// Job is one generation job, as stored.
type Job struct {
	ID      string    `json:"id"`
	Account string    `json:"account"`
	Type    string    `json:"type"`
	Model   string    `json:"model"`
	Status  Status    `json:"status"`
	Input   Input     `json:"input"`
	Output  *Output   `json:"output,omitempty"`
	Error   *JobError `json:"error,omitempty"`
	// Price is the job's price in credits: while it runs the hold (the
	// highest price among its candidates); once completed, its charge (the
	// price of the model that made the output, written in the same
	// conditional write that completes it). A failed job keeps its hold
	// here and is charged nothing.
	Price credits.Amount `json:"price"`
	// Hold is the credits held at create (set by Service.Create, never
	// changed); the settlement clears it: charge Price, release the rest.
	// 0 on jobs stored before it: their hold is Price.
	Hold     credits.Amount `json:"hold,omitempty"`
	Attempts int            `json:"attempts"` // times a worker took the job to start it at its vendor
	Created  int64          `json:"created"`  // Unix seconds
	Updated  int64          `json:"updated"`  // Unix seconds

	// Routing: the models that may serve the job and the one being tried.
	// Candidates are set by Service.Create: the requested model first,
	// then those of its catalog fallbacks that accept the request (same
	// input, a configured provider), each with its price for the request.
	// Jobs stored before fallbacks existed have none (their one candidate
	// is Model at Price). Candidate is the index of the candidate being
	// tried; the worker moves it on, with a conditional write, only after
	// a candidate definitely refused the submit (no handle, no result),
	// never once a vendor accepted the job. AttemptsBefore is Attempts at
	// that move: Attempts - AttemptsBefore are the starts at the current
	// candidate.
	Candidates     []Candidate `json:"candidates,omitempty"`
	Candidate      int         `json:"candidate,omitempty"`
	AttemptsBefore int         `json:"attempts_before,omitempty"`

	// Long-running state, written by the worker.
	Started int64   `json:"started,omitempty"` // Unix seconds of the first start: the deadline counts from it
	Handle  *Handle `json:"handle,omitempty"`  // the vendor's handle once the vendor accepted the job
	// Runs counts the worker runs claimed so far (starts, polls, retries).
	// Every claim is conditional on it, so that of duplicate deliveries
	// exactly one runs.
	Runs int `json:"runs,omitempty"`
	// NextRun is the Unix second before which a delivery of this job is
	// early: a duplicate of a run already claimed, or a retry's message
	// come before its delay (see Worker.Process).
	NextRun int64 `json:"next_run,omitempty"`
	// History lists the statuses the job entered, oldest first: queued
	// (written by Store.Create), then one entry per Transition that
	// changed the status. Jobs stored before it existed have none.
	History []StatusChange `json:"history,omitempty"`
	// Deleted is the Unix second its client deleted the final job
	// (Service.Delete: DELETE /v1/videos/{id}), 0 while it is not. A
	// deleted job keeps its record, status and settlement, but is no
	// longer listed, and the API reads it as not found.
	Deleted int64 `json:"deleted,omitempty"`
	// Key is the id of the API key that created the job ("" for none: the
	// console, a job from before keys were counted). Store.Create holds
	// the job's price on the key too, within its credit limit, and the
	// settlement moves it (credits.Change.Key).
	Key string `json:"key_id,omitempty"`
	// WebhookURL is where the job's end is announced (the request's
	// webhook_url; see package webhooks), "" for its account's default.
	WebhookURL string `json:"webhook_url,omitempty"`
}

// Candidate is a model that may serve a job, and what the job costs if
// it does (its catalog price for the job's input, fixed at create).
type Candidate struct {
	Model string         `json:"model"`
	Price credits.Amount `json:"price"`
}

// Current returns the candidate the job is at: the one being tried, or,
// once a vendor accepted the job, the one making it (Model at Price for
// a job stored without candidates).
func (j *Job) Current() Candidate {
	if j.Candidate >= 0 && j.Candidate < len(j.Candidates) {
		return j.Candidates[j.Candidate]
	}
	return Candidate{Model: j.Model, Price: j.Price}
}

// More reports whether another candidate follows the current one.
func (j *Job) More() bool { return j.Candidate+1 < len(j.Candidates) }

// Tries returns how many times the job was started at its current
// candidate (claims, crashes included).
func (j *Job) Tries() int { return j.Attempts - j.AttemptsBefore }

// ServedBy returns the model that made a completed job's output, "" for
// a job that is not completed.
func (j *Job) ServedBy() string {
	if j.Status != Completed {
		return ""
	}
	return j.Current().Model
}

// Change returns the job's transition from old into its status at at as
// the change stream reports it to settlement (credits.Apply): its price
// (the charge once completed), its hold, and, for its job usage, its type
// and the model that made the output (ServedBy: a fallback's when one
// served it), or the model asked for while no model made one.
func (j *Job) Change(old Status, at int64) credits.Change {
	model := j.ServedBy()
	if model == "" {
		model = j.Model
	}
	return credits.Change{
		JobID: j.ID, Account: j.Account, JobType: j.Type, Model: model,
		OldStatus: string(old), NewStatus: string(j.Status), Price: j.Price, Hold: j.Hold, Key: j.Key, At: at,
	}
}

// Charged returns what the job is charged once it is final (ok false
// before): on completed what its settlement captures
// (credits.Change.Captured: the price of the model that made the output,
// never more than was held), on failed 0.
func (j *Job) Charged() (charged credits.Amount, ok bool) {
	if !j.Status.Final() {
		return 0, false
	}
	return j.Change(Processing, 0).Captured(), true
}

// Ended returns the Unix second a final job ended (the At of its last
// History entry, else Updated), 0 for a job that is not final.
func (j *Job) Ended() int64 {
	if !j.Status.Final() {
		return 0
	}
	if n := len(j.History); n > 0 && j.History[n-1].Status == j.Status {
		return j.History[n-1].At
	}
	return j.Updated
}

// HistoryEntry returns the History entry a Transition into to with p
// appends: at p.Updated (now if that is 0), with p.Error's code for a
// failure. Stores call it so that every backend records the same thing.
func HistoryEntry(to Status, p Patch, now int64) StatusChange {
	c := StatusChange{Status: to, At: p.Updated}
	if c.At == 0 {
		c.At = now
	}
	if to == Failed && p.Error != nil {
		c.ErrorCode = p.Error.Code
	}
	return c
}

// Idempotency ties a client's Idempotency-Key to the job it created.
type Idempotency struct {
	Key      string // account-scoped: account + "/" + the header value
	BodyHash string // hex SHA-256 of the request body
	JobID    string
	Expires  int64 // Unix seconds; after it the key may be reused
}

// Patch is what a transition changes besides the status.
type Patch struct {
	Output      *Output
	Error       *JobError
	IncAttempts bool
	Updated     int64
	Started     int64   // set if not 0
	Handle      *Handle // set if not nil
	NextRun     int64   // set if not 0
	// Candidate, when not nil, moves the job to that candidate, with
	// AttemptsBefore (the job's Attempts when it moves).
	Candidate      *int
	AttemptsBefore int
	// Price, when not nil, sets the job's price: its charge, in the
	// transition that completes it.
	Price *credits.Amount
	// IfRuns, when not nil, is a further precondition: the job's Runs
	// must equal *IfRuns, and the transition sets Runs to *IfRuns+1. It is
	// how one delivery among duplicates claims a run.
	IfRuns *int
}

// Store keeps jobs. Implementations are safe for concurrent use.
type Store interface {
	// Create stores j (status queued) and, in the same atomic step, holds
	// j.Price credits on j.Account and records idem if not nil. It returns
	// ErrInsufficientCredits if the account's available credits (balance -
	// held) are short or it has none; with j.Key, it also adds j.Price to
	// the key's held credits in that step, only within the key's credit
	// limit (else an error matching credits.ErrKeyLimit, saying what the
	// key has left); and for an idem key already in use and
	// not expired, the job it created (same body hash) or
	// ErrIdempotencyConflict. On any error nothing is written.
	Create(ctx context.Context, j *Job, idem *Idempotency) (*Job, error)
	// Get returns the job with id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Job, error)
	// Transition moves job id from status from to status to, applying p,
	// atomically and only if the job is still in from (and, with
	// p.IfRuns, has that many runs); otherwise it returns ErrConflict
	// (wrapped, with the job's current state readable by Get).
	//
	// A transition that changes the status appends HistoryEntry(to, p,
	// now) to the job's History in the same atomic step; Create stores the
	// job with History [{queued, Created}].
	Transition(ctx context.Context, id string, from, to Status, p Patch) (*Job, error)
	// List returns the jobs q selects, newest first (Created descending,
	// then ID descending), at most q.Limit of them (see ListQuery), and the
	// cursor of the next page ("" if there is none). The order is stable
	// under concurrent creates: a page's cursor is the position of its
	// last job (or of the last job examined, when a page stops at its scan
	// bound before it is full), and later pages continue strictly after
	// it, so no job is listed twice and none that existed is skipped. A
	// malformed q.Cursor is an *apierr.Error naming "after".
	List(ctx context.Context, q ListQuery) (jobs []*Job, next string, err error)
}

// DeleteStore is the store side of Service.Delete. Both stores implement
// it; it is apart from Store so that a store without it still serves
// everything else.
type DeleteStore interface {
	// Delete marks the final job id deleted at at (Job.Deleted) and takes
	// it out of List's results (for its account and for every account),
	// in one atomic step; it changes nothing else (status, output,
	// price: the settlement is untouched) and writes no change record.
	// It returns the deleted job; ErrNotFound if there is no job id or it
	// is deleted already; an error wrapping ErrConflict (nothing written)
	// if the job is not final.
	Delete(ctx context.Context, id string, at int64) (*Job, error)
}

// Queue delivers job ids to the worker at least once.
type Queue interface {
	// Enqueue schedules id for processing after delay.
	Enqueue(ctx context.Context, id string, delay time.Duration) error
	GroupQueue
}

// GroupQueue is the side of a Queue that takes a job's group, its
// account: the service and the worker enqueue a job of an account with
// EnqueueGroup. A queue that delivers fairly across groups uses it (SQS
// fair queues: a standard queue given a message group per account keeps
// one account's backlog from delaying another's jobs); one that is fair
// on its own (the embedded queue, by its lease) enqueues as Enqueue does.
type GroupQueue interface {
	// EnqueueGroup schedules id, of group, for processing after delay.
	EnqueueGroup(ctx context.Context, id, group string, delay time.Duration) error
}

// enqueue schedules id of account on q, grouped by account.
func enqueue(ctx context.Context, q Queue, id, account string, delay time.Duration) error {
	if account != "" {
		return q.EnqueueGroup(ctx, id, account, delay)
	}
	return q.Enqueue(ctx, id, delay)
}

// Media stores outputs, makes links to them and deletes them.
type Media interface {
	// Put stores the bytes of r under key, copying them as they arrive.
	// size is how many r yields, or -1 if unknown; with size >= 0 another
	// count is an error and nothing is stored. An error from r is returned
	// (wrapped) and nothing is stored.
	Put(ctx context.Context, key, contentType string, r io.Reader, size int64) error
	// URL returns an absolute link to key that works for ttl.
	URL(ctx context.Context, key string, ttl time.Duration) (string, error)
	MediaDeleter
}

// MediaDeleter is the deleting side of a Media (Service.Delete removes a
// deleted video's output with it).
type MediaDeleter interface {
	// Delete removes key; a key that does not exist is no error.
	Delete(ctx context.Context, key string) error
}

// Errors of the jobs domain.
var (
	ErrNotFound            = &apierr.Error{Kind: apierr.NotFound, Code: "job_not_found", Message: "No job with that id."}
	ErrInsufficientCredits = &apierr.Error{Kind: apierr.InsufficientQuota, Code: "insufficient_credits", Message: "The account's available credits do not cover this job."}
	ErrIdempotencyConflict = &apierr.Error{Kind: apierr.Conflict, Code: "idempotency_key_reused", Message: "This Idempotency-Key was used with a different request body."}
	// ErrJobFinal is a cancel of a job that is completed or failed.
	ErrJobFinal = &apierr.Error{Kind: apierr.Conflict, Code: "job_final", Message: "The job has already finished; only a queued or processing job can be cancelled."}
	// ErrNotCancellable is a cancel of a processing job that cannot be
	// stopped at its vendor; the message says why.
	ErrNotCancellable = &apierr.Error{Kind: apierr.Conflict, Code: "job_not_cancellable", Message: "The job cannot be cancelled."}
	// ErrNotFinal is a delete of a job that is queued or processing.
	ErrNotFinal = &apierr.Error{Kind: apierr.Conflict, Code: "job_not_final", Message: "Only a completed or failed job can be deleted."}
	// ErrConflict means a transition's precondition failed: the job was not
	// in the expected status.
	ErrConflict = errors.New("job status changed concurrently")
)
