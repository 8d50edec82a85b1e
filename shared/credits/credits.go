// Package credits is accounts, balances and the ledger. A job's hold is
// taken when the job is created (by the jobs Store, atomically with the
// job) and settled exactly once when the job's status becomes final: on
// completed its charge is captured and the rest of the hold released (a
// job served by a cheaper fallback is charged less than it held), on
// failed all of it is released. Settle is driven by the job change stream
// (DynamoDB Streams in AWS, the embedded store's change feed locally)
// through Apply, the one function both use. A capture also counts the job
// in the account's job usage (JobUsage) in the same atomic step, so usage
// and charges cannot disagree. Chat usage is recorded apart (UsageStore).
// A synchronous generation (an image, a speech), which has no job, holds
// its credits with a reservation and settles it the same way (Reserver,
// in reserve.go).
package credits

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/genway/genway/shared/apierr"
)

// Account is a customer's credit position. Available = Balance - Held is
// stored too, so that a store can hold with one conditional write.
type Account struct {
	ID        string `json:"id"`
	Balance   Amount `json:"balance"`
	Held      Amount `json:"held"`
	Available Amount `json:"available"`
	// RateLimit is requests per minute per key: 0 means the service
	// default, -1 unlimited (the admin API writes no other negative; one
	// stored before it refused them reads as unlimited too).
	RateLimit int   `json:"rate_limit,omitempty"`
	Created   int64 `json:"created"`
}

// Ledger entry kinds.
const (
	Capture = "capture" // a completed job: balance -= amount, held -= hold (the rest of the hold is released)
	Release = "release" // a failed job: held -= amount
	Grant   = "grant"   // an operator grant: balance += amount
)

// HeldAmount returns the held credits a settlement clears: Hold for a
// Capture that has one, else Amount.
func (e Entry) HeldAmount() Amount {
	if e.Kind == Capture && e.Hold > 0 {
		return e.Hold
	}
	return e.Amount
}

// Entry is one ledger line. For Capture and Release there is exactly one
// entry per job (JobID is its key); that is what makes settling idempotent.
type Entry struct {
	// ID is "job:<job id>" for a job's settlement, "grant:<random>" for
	// a grant, ReservationID and SettlementID for a reservation's hold
	// and its settlement (see Reserver).
	ID      string `json:"id"`
	Account string `json:"account"`
	Kind    string `json:"kind"`
	Amount  Amount `json:"amount"`
	// Hold is, for a Capture, the credits the job held, all of which the
	// capture clears: Amount is charged, Hold - Amount released. 0 means
	// Amount (a job charged what it held).
	Hold  Amount `json:"hold,omitempty"`
	JobID string `json:"job_id,omitempty"`
	// JobType and Model are the settled job's type (music, sfx, video)
	// and model: for a Capture the model that made the output (a
	// fallback's when one served it), for a Release the model asked for.
	// A Capture that has them is counted in the job usage (see
	// Store.Settle). Entries written before they existed have neither.
	JobType string `json:"job_type,omitempty"`
	Model   string `json:"model,omitempty"`
	// Key is the id of the API key whose request held or spent the
	// credits ("" for none: a job made from the console, an entry from
	// before keys were counted). A job's hold, a reservation and a chat
	// charge count against the key's spend and credit limit in the same
	// atomic step as against the account (see KeyLimit); a settlement
	// moves the key's held credits to spent, or releases them, with the
	// account's. A reservation's settlement takes the key of the
	// reservation it settles.
	Key string `json:"key,omitempty"`
	At  int64  `json:"at"` // Unix seconds; for a settlement, when the job ended
}

// ErrKeyLimit matches (errors.Is) the error a store returns when a hold
// or reservation would take its API key's spent and held credits past the
// key's credit limit: a 402 insufficient_quota, code key_credit_limit,
// whose message (made by KeyLimit) says what the key has left. Nothing
// is written.
var ErrKeyLimit = &apierr.Error{Kind: apierr.InsufficientQuota, Code: "key_credit_limit",
	Message: "This request would take the API key past its credit limit."}

// KeyLimit returns the ErrKeyLimit refusal of amount credits on key,
// which has limit and has spent and holds used of it.
func KeyLimit(key string, amount, limit, used Amount) error {
	return &apierr.Error{Kind: ErrKeyLimit.Kind, Code: ErrKeyLimit.Code,
		Message: fmt.Sprintf("This request needs %s credits, more than this API key has left of its credit limit: %s left of %s (%s spent or held by requests in progress). The key's limit is not the account's balance; ask the operator to raise it.",
			amount, max(limit-used, 0), limit, used)}
}

// ErrAccountNotFound is returned for an unknown account.
var ErrAccountNotFound = &apierr.Error{Kind: apierr.NotFound, Code: "account_not_found", Message: "No such account."}

// ErrAlreadySettled is returned by Store.Settle when the settlement's
// ledger entry exists: it happened before (a redelivered event, a
// reservation the reconciler released first), and by Reserver.Reserve for
// a reservation id used before.
var ErrAlreadySettled = errors.New("already settled")

// Store keeps accounts and the ledger. Implementations are safe for
// concurrent use. No amount they keep passes ±MaxAmount: a Settle whose
// job usage or key spend would is an error matching ErrAmountRange, and
// nothing is written.
type Store interface {
	// Settle writes e (ID "job:<id>", or SettlementID of a reservation)
	// and applies it to the account in one atomic step, only if no entry
	// with e.ID exists; otherwise it returns ErrAlreadySettled and changes
	// nothing. The settlement of a reservation also closes it (it leaves
	// Reserver.OpenReservations) in that step, and needs it: the
	// reservation of e.Account, holding exactly e.HeldAmount(), else
	// ErrNoReservation and nothing is written. A Capture takes e.Amount from
	// the balance and e.HeldAmount() from the held credits; a Release
	// returns e.Amount from held to available. A Capture with a JobType
	// and a Model also adds its job and amount to the account's job usage
	// (JobUsageOf) in that same step, so a job is counted exactly when it
	// is charged: once, however often it is settled again. With a Key
	// (a job's; for a reservation's settlement the reservation's own),
	// the same step moves the key's held credits as the account's: a
	// Capture adds e.Amount to its spent and clears e.HeldAmount() from
	// its held, a Release clears e.Amount. Arguments CheckSettlement
	// refuses are an error and nothing is written.
	Settle(ctx context.Context, e Entry) error
	// Account returns the account, or ErrAccountNotFound.
	Account(ctx context.Context, id string) (Account, error)
	// Grant adds amount to the account's balance (creating the account if
	// needed), records a Grant entry, and returns the new position.
	// A grant that would take the balance (or available) beyond
	// ±MaxAmount is an error matching ErrAmountRange, and changes nothing.
	Grant(ctx context.Context, id string, amount Amount, at int64) (Account, error)
	// Ledger returns the account's entries, oldest first.
	Ledger(ctx context.Context, account string) ([]Entry, error)
}

// Change is a job status change as the change stream reports it.
type Change struct {
	JobID   string
	Account string
	JobType string // music, sfx or video
	// Model is the model that made the output once the job completed
	// (its served candidate, a fallback's when one served it), else the
	// model asked for: job usage is counted under it.
	Model     string
	OldStatus string
	NewStatus string
	// Price is the job's price as stored with the change: the hold while
	// it runs, its charge once completed (the price of the model that
	// made the output).
	Price Amount
	// Hold is the credits held for the job at create; 0 (a job stored
	// before holds and charges could differ) means Price.
	Hold Amount
	// Key is the id of the API key that created the job ("" for none):
	// its settlement moves the key's held credits too.
	Key string
	At  int64 // Unix seconds of the change (the job's updated)
}

// Held returns the credits held for the job: Hold, or Price without one.
func (c Change) Held() Amount {
	if c.Hold > 0 {
		return c.Hold
	}
	return c.Price
}

// Captured returns what settling c captures: for a transition into
// "completed", its Price, never more than it held (that is what the
// account agreed to); else 0.
func (c Change) Captured() Amount {
	if c.NewStatus != "completed" {
		return 0
	}
	return min(max(c.Price, 0), c.Held())
}

// Apply settles the job in c if c is a transition into a final status:
// on "completed" it captures Price and releases the rest of the hold
// (counted in the job usage of c's type and model, on the UTC day of
// c.At), on "failed" it releases the whole hold. Records that are not
// final transitions, or hold nothing, are ignored. A redelivered change is a
// success that changes nothing.
func Apply(ctx context.Context, s Store, c Change) error {
	held := c.Held()
	if c.OldStatus == c.NewStatus || held <= 0 {
		return nil
	}
	e := Entry{ID: "job:" + c.JobID, Account: c.Account, JobID: c.JobID, Key: c.Key, At: c.At}
	switch c.NewStatus {
	case "completed":
		e.Kind, e.Amount = Capture, c.Captured()
		if e.Amount != held {
			e.Hold = held
		}
	case "failed":
		e.Kind, e.Amount = Release, held
	default:
		return nil
	}
	// A change without a usable type and model (a record from before they
	// were sent) is settled all the same, and counted in no job usage: a
	// label must never hold up a settlement.
	if c.JobType != "" && c.Model != "" && !hasNUL(c.JobType, c.Model) {
		e.JobType, e.Model = c.JobType, c.Model
	}
	err := s.Settle(ctx, e)
	if err != nil && !errors.Is(err, ErrAlreadySettled) {
		return fmt.Errorf("settle job %s (%s): %w", c.JobID, e.Kind, err)
	}
	return nil
}

// CheckSettlement validates the arguments of Store.Settle; stores call it
// first. The entry needs an id (not a reservation's hold id, and with a
// reservation id after the SettlementID prefix), an account, the kind
// Capture or Release and a non-negative amount, no more than its Hold when
// it has one (a Capture never charges more than the job held); JobType
// and Model are both set or both empty, and free of NUL bytes.
func CheckSettlement(e Entry) error {
	switch {
	case e.ID == "" || e.Account == "":
		return fmt.Errorf("settle %q: need an id and an account", e.ID)
	case strings.HasPrefix(e.ID, ReservationID("")) || e.ID == SettlementID(""):
		return fmt.Errorf("settle %q: not a settlement id", e.ID)
	case e.Kind != Capture && e.Kind != Release:
		return fmt.Errorf("settle %s: kind %q is not a settlement", e.ID, e.Kind)
	case e.Amount < 0 || e.Hold < 0 || (e.Hold != 0 && e.Hold < e.Amount):
		return fmt.Errorf("settle %s: amount %s, hold %s: need 0 <= amount <= hold", e.ID, e.Amount, e.Hold)
	case (e.JobType == "") != (e.Model == ""):
		return fmt.Errorf("settle %s: job type %q and model %q: give both or neither", e.ID, e.JobType, e.Model)
	case hasNUL(e.JobType, e.Model, e.Account, e.Key):
		return fmt.Errorf("settle %s: NUL byte in account, job type, model or key", e.ID)
	}
	return nil
}

// hasNUL reports whether any of ss has a NUL byte (which no store key
// may hold).
func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}
