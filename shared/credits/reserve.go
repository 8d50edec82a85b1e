package credits

import (
	"context"

	"github.com/genway/genway/shared/apierr"
)

// Reservations: the credits of a synchronous generation (an image, a
// speech), which has no job to hold them. The request reserves its price
// before it calls a vendor, in one conditional write that never lets
// parallel requests overdraw the account, and settles the reservation
// exactly once when it ends: the charge captured and the rest released on
// success, everything released on failure. A reservation its request never
// settled (the process died) is released by the reconciler once it is
// older than ReservationTTL.

// Reservation is the ledger kind of a reservation's hold entry.
const Reservation = "reservation"

// ReservationTTL is how old an unsettled reservation must be before the
// reconciler releases it: longer than any synchronous generation may take.
const ReservationTTL = 30 * 60 // seconds

// ErrInsufficient is the error Reserve returns when the account's
// available credits do not cover the amount (nothing is written): a 402
// insufficient_credits; callers wrap it with the price and what is
// available.
var ErrInsufficient = &apierr.Error{Kind: apierr.InsufficientQuota, Code: "insufficient_credits",
	Message: "The account's available credits do not cover this request."}

// ReservationID is the ledger id of the hold of reservation id
// ("reserve:<id>"); SettlementID is that of its settlement
// ("reserved:<id>"), written once.
func ReservationID(id string) string { return "reserve:" + id }

// SettlementID is the ledger id of the settlement of reservation id.
func SettlementID(id string) string { return "reserved:" + id }

// Reserver holds and settles reservations. Implementations are safe for
// concurrent use; localstore.Store and dynamostore.Store implement it.
type Reserver interface {
	// Reserve writes e (Kind Reservation, ID ReservationID(id), Amount > 0,
	// JobType and Model: what is generated, At: now) and, in the same
	// atomic step, moves e.Amount of the account from available to held,
	// only if available >= e.Amount and no entry e.ID exists. It returns
	// ErrInsufficient (nothing written) when the credits are short,
	// ErrAccountNotFound for an unknown account, ErrAlreadySettled if
	// e.ID exists.
	Reserve(ctx context.Context, e Entry) error
	// OpenReservations returns the reservations written before at
	// (Unix seconds) that have no settlement yet, oldest first, at most
	// limit of them.
	OpenReservations(ctx context.Context, before int64, limit int) ([]Entry, error)
}

// The settlement of a reservation is Store.Settle with ID
// SettlementID(id): a Capture of the charge with Hold the reserved amount
// (the charge counts in the job usage of its JobType and Model, "image" or
// "speech"), or a Release of the reserved amount. Settle writes it once;
// a second settlement is ErrAlreadySettled and changes nothing.
