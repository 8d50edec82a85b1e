package credits

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// ReservationOf returns the ledger id of the reservation that settlement
// id settles (SettlementID(x) -> ReservationID(x)), and whether id is the
// settlement of a reservation at all.
func ReservationOf(id string) (string, bool) {
	x, ok := strings.CutPrefix(id, SettlementID(""))
	if !ok || x == "" {
		return "", false
	}
	return ReservationID(x), true
}

// ErrNoReservation is returned by Store.Settle for the settlement of a
// reservation that does not match one: no reservation with that id on
// the account, or one holding another amount than the settlement clears.
// Nothing is written.
var ErrNoReservation = errors.New("no such reservation")

// CheckReservation validates the argument of Reserver.Reserve; stores
// call it first. The entry needs the kind Reservation, an ID
// ReservationID(id) with a non-empty id, an account, an amount above 0
// and no Hold, a JobType and a Model (what is generated: the settlement's
// job usage labels), no NUL byte in any of them, and At (Unix seconds)
// above 0: the reconciler releases the reservation ReservationTTL after
// it.
func CheckReservation(e Entry) error {
	id, _ := strings.CutPrefix(e.ID, ReservationID(""))
	switch {
	case e.Kind != Reservation:
		return fmt.Errorf("reserve %s: kind %q is not %q", e.ID, e.Kind, Reservation)
	case !strings.HasPrefix(e.ID, ReservationID("")) || id == "" || e.Account == "":
		return fmt.Errorf("reserve %q: need an id %q and an account", e.ID, ReservationID("<id>"))
	case e.Amount <= 0 || e.Hold != 0:
		return fmt.Errorf("reserve %s: amount %s, hold %s: need amount > 0 and no hold", e.ID, e.Amount, e.Hold)
	case e.JobType == "" || e.Model == "":
		return fmt.Errorf("reserve %s: job type %q and model %q: need both", e.ID, e.JobType, e.Model)
	case hasNUL(e.ID, e.Account, e.JobType, e.Model, e.Key):
		return fmt.Errorf("reserve %s: NUL byte in id, account, job type, model or key", e.ID)
	case e.At <= 0:
		return fmt.Errorf("reserve %s: at %d: need the Unix time of the reservation", e.ID, e.At)
	}
	return nil
}

// ReleaseReservation settles the open reservation r (as
// Reserver.OpenReservations lists it) with a Release of all it holds, at
// at (Unix seconds), through Store.Settle: it reports whether this call
// released it, false (and no error) if it was settled already, by its
// request (however late) or by another release: the first settlement
// wins.
func ReleaseReservation(ctx context.Context, s Store, r Entry, at int64) (bool, error) {
	id, ok := strings.CutPrefix(r.ID, ReservationID(""))
	if !ok || r.Kind != Reservation {
		return false, fmt.Errorf("release %s: not a reservation", r.ID)
	}
	e := Entry{ID: SettlementID(id), Account: r.Account, Kind: Release, Amount: r.Amount, JobType: r.JobType, Model: r.Model, Key: r.Key, At: at}
	err := s.Settle(ctx, e)
	if errors.Is(err, ErrAlreadySettled) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("release reservation %s of %s: %w", id, r.Account, err)
	}
	return true, nil
}

// Reserver holds and settles reservations. Implementations are safe for
// concurrent use; localstore.Store and dynamostore.Store implement it.
type Reserver interface {
	// Reserve writes e (Kind Reservation, ID ReservationID(id), Amount > 0,
	// JobType and Model: what is generated, At: now) and, in the same
	// atomic step, moves e.Amount of the account from available to held,
	// only if available >= e.Amount and no entry e.ID exists. It returns
	// ErrInsufficient (nothing written) when the credits are short,
	// ErrAccountNotFound for an unknown account, ErrAlreadySettled if
	// e.ID exists. With e.Key it also, in the same step, adds e.Amount
	// to the key's held credits, only if that keeps the key's spent and
	// held within its credit limit: else an error matching ErrKeyLimit
	// (nothing written).
	Reserve(ctx context.Context, e Entry) error
	// OpenReservations returns the reservations written before at
	// (Unix seconds) that have no settlement yet, oldest first, at most
	// limit of them.
	OpenReservations(ctx context.Context, before int64, limit int) ([]Entry, error)
}

// Reservations is what a synchronous generation (an image, a speech)
// needs of the credits store: reservations held before the vendor is
// called (never overdrawing), their one settlement, and the account, for
// the message of a 402. localstore.Store and dynamostore.Store implement
// it.
type Reservations interface {
	Reserver
	AccountReader
	Settle(ctx context.Context, e Entry) error
	// SettleRecord is Settle(e) with the record r of the request the
	// reservation held for written in the same atomic step, only if e is:
	// a second settlement is ErrAlreadySettled and writes neither. r's
	// Cost is what e charges (CheckSettledRecord), its Expires, if 0, the
	// store's retention after its At.
	SettleRecord(ctx context.Context, e Entry, r Record) error
}

// AccountReader reads an account's credit position (both stores are
// one); Account returns ErrAccountNotFound for an unknown account.
type AccountReader interface {
	Account(ctx context.Context, id string) (Account, error)
}

// Reserving is what ReserveFor needs: a reservation, and the account for
// the message of a 402.
type Reserving interface {
	Reserve(ctx context.Context, e Entry) error
	AccountReader
}

// ReserveFor reserves e (a Reservation) in rs for a synchronous request
// that what names ("This speech"), and turns a refusal into the client's
// 402: the key's (ErrKeyLimit, whose message says what the key has
// left), or the account's Shortfall of e.Amount (upTo: the highest price
// among the models that may serve it). An account the store does not
// know has no credits. Any other error is wrapped. Images, speech and
// held chat completions reserve through it.
func ReserveFor(ctx context.Context, rs Reserving, e Entry, what string, upTo bool) error {
	err := rs.Reserve(ctx, e)
	switch {
	case err == nil, errors.Is(err, ErrKeyLimit):
		return err
	case errors.Is(err, ErrInsufficient), errors.Is(err, ErrAccountNotFound):
		return Shortfall(ctx, rs, e.Account, what, e.Amount, upTo, err)
	}
	return fmt.Errorf("reserve %s credits for %s: %w", e.Amount, e.ID, err)
}

// Shortfall is the 402 insufficient_credits of a request that costs more
// than account has available: what names the request ("This job", "This
// speech"), price is its cost, upTo says price is the highest among the
// models that may serve it (held until the request is done). The message
// adds the account's position, read from accounts (nil: not read). cause,
// if any, is wrapped.
func Shortfall(ctx context.Context, accounts AccountReader, account, what string, price Amount, upTo bool, cause error) error {
	costs := fmt.Sprintf("%s costs %s credits", what, price)
	if upTo {
		costs = fmt.Sprintf("%s costs up to %s credits (the highest price among the models that may serve it, held until it is done)", what, price)
	}
	msg := costs + ", more than the account has available."
	if accounts != nil {
		a, err := accounts.Account(ctx, account)
		switch {
		case err == nil:
			msg = fmt.Sprintf("%s; the account has %s available (balance %s, %s held by requests in progress).", costs, a.Available, a.Balance, a.Held)
		case errors.Is(err, ErrAccountNotFound):
			msg = costs + "; the account has none."
		}
	}
	return &apierr.Error{Kind: apierr.InsufficientQuota, Code: "insufficient_credits", Message: msg, Err: cause}
}

// SettleDetached writes the settlement e of a synchronous request, even
// when the request's ctx has ended (the client went away), trying three
// times, each within 10 seconds; a settlement written before counts as
// done. An error means it could not be written: the reservation stays
// held until the reconciler releases it (nothing is charged).
// A store whose settlements are made in memory (InMemorySettler) is
// called once, as it is: nothing it does can fail for a while or hang.
func SettleDetached(ctx context.Context, s interface {
	Settle(ctx context.Context, e Entry) error
}, e Entry) error {
	if m, ok := s.(InMemorySettler); ok && m.SettlesInMemory() {
		err := s.Settle(ctx, e)
		if errors.Is(err, ErrAlreadySettled) {
			return nil
		}
		return err
	}
	return detached(ctx, func(ctx context.Context) error { return s.Settle(ctx, e) })
}

// InMemorySettler is a store that says whether its Settle only changes
// memory: it makes no I/O, waits for nothing and ignores its context
// (localstore.MemoryHolds), so that SettleDetached needs no detached
// context, timeout or retry for it.
type InMemorySettler interface {
	SettlesInMemory() bool
}

// SettleRecordDetached is SettleDetached of e with the request's record
// r (Reservations.SettleRecord). A record the store refuses
// (ErrInvalidRecord) is not retried: the error is returned, and the
// reservation stays held until the reconciler releases it (so a caller
// that gets ErrInvalidRecord settles e alone: SettleDetached).
func SettleRecordDetached(ctx context.Context, s Reservations, e Entry, r Record) error {
	return detached(ctx, func(ctx context.Context) error { return s.SettleRecord(ctx, e, r) })
}

// detached runs write past ctx's end, three times at most, each within
// 10 seconds, until it succeeds or finds it done (ErrAlreadySettled); an
// invalid record or an unknown account is not retried.
func detached(ctx context.Context, write func(ctx context.Context) error) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = write(sctx)
		cancel()
		if err == nil || errors.Is(err, ErrAlreadySettled) {
			return nil
		}
		if errors.Is(err, ErrInvalidRecord) || errors.Is(err, ErrAccountNotFound) {
			return err
		}
	}
	return err
}

// The settlement of a reservation is Store.Settle with ID
// SettlementID(id): a Capture of the charge with Hold the reserved amount
// (the charge counts in the job usage of its JobType and Model, "image" or
// "speech"), or a Release of the reserved amount. Settle writes it once;
// a second settlement is ErrAlreadySettled and changes nothing, and one
// that does not clear exactly what the account's reservation holds is
// ErrNoReservation. Reservation ids are unique per store: use random ones.
