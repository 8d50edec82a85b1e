// Package credits is accounts, balances and the ledger. A job's price is held
// when the job is created (by the jobs Store, atomically with the job) and
// settled exactly once when the job's status becomes final: captured on
// completed, released on failed. Settle is driven by the job change stream
// (DynamoDB Streams in AWS, the embedded store's change feed locally) through
// Apply, the one function both use.
package credits

import (
	"context"
	"errors"
	"fmt"

	"github.com/genway/genway/shared/apierr"
)

// Account is a customer's credit position. Available = Balance - Held is
// stored too, so that a store can hold with one conditional write.
type Account struct {
	ID        string `json:"id"`
	Balance   int64  `json:"balance"`
	Held      int64  `json:"held"`
	Available int64  `json:"available"`
	// RateLimit is requests per minute per key: 0 means the service
	// default, a negative value means unlimited.
	RateLimit int   `json:"rate_limit,omitempty"`
	Created   int64 `json:"created"`
}

// Ledger entry kinds.
const (
	Capture = "capture" // a completed job: balance -= amount, held -= amount
	Release = "release" // a failed job: held -= amount
	Grant   = "grant"   // an operator grant: balance += amount
)

// Entry is one ledger line. For Capture and Release there is exactly one
// entry per job (JobID is its key); that is what makes settling idempotent.
type Entry struct {
	ID      string `json:"id"` // "job:<job id>" for settlements, "grant:<random>" for grants
	Account string `json:"account"`
	Kind    string `json:"kind"`
	Amount  int64  `json:"amount"`
	JobID   string `json:"job_id,omitempty"`
	At      int64  `json:"at"` // Unix seconds
}

// ErrAccountNotFound is returned for an unknown account.
var ErrAccountNotFound = &apierr.Error{Kind: apierr.NotFound, Code: "account_not_found", Message: "No such account."}

// ErrAlreadySettled is returned by Store.Settle when the job's ledger entry
// exists: the settlement happened before (a redelivered event).
var ErrAlreadySettled = errors.New("job already settled")

// Store keeps accounts and the ledger. Implementations are safe for
// concurrent use.
type Store interface {
	// Settle writes e (ID "job:<id>") and applies it to the account in one
	// atomic step, only if no entry with e.ID exists; otherwise it returns
	// ErrAlreadySettled and changes nothing.
	Settle(ctx context.Context, e Entry) error
	// Account returns the account, or ErrAccountNotFound.
	Account(ctx context.Context, id string) (Account, error)
	// Grant adds amount to the account's balance (creating the account if
	// needed), records a Grant entry, and returns the new position.
	Grant(ctx context.Context, id string, amount int64, at int64) (Account, error)
	// Ledger returns the account's entries, oldest first.
	Ledger(ctx context.Context, account string) ([]Entry, error)
}

// Change is a job status change as the change stream reports it.
type Change struct {
	JobID     string
	Account   string
	OldStatus string
	NewStatus string
	Price     int64
	At        int64
}

// Apply settles the job in c if c is a transition into a final status:
// capture on "completed", release on "failed". Records that are not final
// transitions, or have no price, are ignored. A redelivered change is a
// success that changes nothing.
func Apply(ctx context.Context, s Store, c Change) error {
	if c.OldStatus == c.NewStatus || c.Price <= 0 {
		return nil
	}
	var kind string
	switch c.NewStatus {
	case "completed":
		kind = Capture
	case "failed":
		kind = Release
	default:
		return nil
	}
	err := s.Settle(ctx, Entry{ID: "job:" + c.JobID, Account: c.Account, Kind: kind, Amount: c.Price, JobID: c.JobID, At: c.At})
	if err != nil && !errors.Is(err, ErrAlreadySettled) {
		return fmt.Errorf("settle job %s (%s): %w", c.JobID, kind, err)
	}
	return nil
}
