package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/genway/genway/shared/credits"
)

// The reconciler: a job's hold is settled (captured on completed,
// released on failed) by the change stream (credits function on AWS, the
// feed under genway serve). A settlement that keeps failing there ends in
// the credits failure queue with only the stream's position, and the hold
// would stay forever. Reconcile finds final jobs whose settlement entry is
// missing and settles them through the same idempotent path (credits.Apply:
// a ledger entry "job:<id>" written once with the balance change), so
// running it again, or the stream catching up meanwhile, settles nothing
// twice. It also releases the reservations (credits.Reserver) that their
// synchronous request never settled (it died) once they are older than
// credits.ReservationTTL, through the same Settle: the first settlement of
// a reservation wins, so a late request settling it as the reconciler
// releases it is charged or released once, never both.

// ReconcileStore is what Reconcile needs of the accounts side.
type ReconcileStore interface {
	credits.Store
	credits.Reserver
	// Accounts returns every account.
	Accounts(ctx context.Context) ([]credits.Account, error)
	// LedgerEntry reports whether account's ledger has the entry id.
	LedgerEntry(ctx context.Context, account, id string) (bool, error)
}

// ReconcileResult counts what Reconcile did.
type ReconcileResult struct {
	Checked int `json:"checked"` // final priced jobs looked at
	Settled int `json:"settled"` // of those, settled now (their settlement was missing)
	// Reservations counts the open reservations older than
	// credits.ReservationTTL found, Released those of them released now
	// (the others were settled meanwhile, by their request or another
	// run).
	Reservations int `json:"reservations"`
	Released     int `json:"released"`
}

const (
	// reconcilePages bounds the pages Reconcile reads per account and
	// status, and of open reservations.
	reconcilePages = 1000
	// reservationPage is how many open reservations one read lists.
	reservationPage = 100
)

// Reconcile settles the final, priced jobs (a hold, or a price without
// one) created since since and final for at least grace (the stream
// usually settles within seconds; grace keeps the reconciler off its
// heels) whose settlement entry is missing, as the stream would have: a
// completed job's Price (its charge) captured and the rest of its Hold
// released, counted in the job usage of the model that served it; a
// failed job's hold released. It reads each account's completed and
// failed jobs through the jobs store's listing, one ledger read per
// priced job. It also releases every reservation made before
// now - credits.ReservationTTL that is still open (whatever since says:
// an open reservation holds credits however old it is). A failure of one
// of the two does not stop the other; the error joins both.
func Reconcile(ctx context.Context, js Store, cs ReconcileStore, since time.Time, grace time.Duration, now time.Time) (ReconcileResult, error) {
	var res ReconcileResult
	err := releaseStale(ctx, cs, now, &res)
	return res, errors.Join(err, settleMissing(ctx, js, cs, since, grace, now, &res))
}

// settleMissing is Reconcile's part for jobs.
func settleMissing(ctx context.Context, js Store, cs ReconcileStore, since time.Time, grace time.Duration, now time.Time, res *ReconcileResult) error {
	accts, err := cs.Accounts(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: accounts: %w", err)
	}
	cutoff := now.Add(-grace).Unix()
	for _, a := range accts {
		for _, status := range []Status{Completed, Failed} {
			q := ListQuery{Account: a.ID, Status: status, Since: since.Unix(), Limit: MaxListLimit}
			for range reconcilePages {
				page, next, err := js.List(ctx, q)
				if err != nil {
					return fmt.Errorf("reconcile: list %s jobs of %s: %w", status, a.ID, err)
				}
				for _, j := range page {
					// At is when the job ended, as the stream would have
					// said: its job usage counts on that day.
					c := j.Change(Processing, j.Updated)
					if c.Held() <= 0 || j.Updated > cutoff {
						continue
					}
					res.Checked++
					id := "job:" + j.ID
					ok, err := cs.LedgerEntry(ctx, j.Account, id)
					if err != nil {
						return fmt.Errorf("reconcile: ledger of %s: %w", j.Account, err)
					}
					if ok {
						continue
					}
					if err := credits.Apply(ctx, cs, c); err != nil {
						return fmt.Errorf("reconcile: %w", err)
					}
					res.Settled++
				}
				if next == "" {
					break
				}
				q.Cursor = next
			}
		}
	}
	return nil
}

// releaseStale releases the open reservations made before
// now - credits.ReservationTTL, oldest first, a page at a time: each
// release closes its reservation, so the next read lists the next ones.
// A reservation listed again (a store's listing lagging its writes) is
// not released twice and ends the loop when a page has nothing new.
func releaseStale(ctx context.Context, cs ReconcileStore, now time.Time, res *ReconcileResult) error {
	before := now.Unix() - credits.ReservationTTL
	seen := map[[2]string]bool{}
	for range reconcilePages {
		open, err := cs.OpenReservations(ctx, before, reservationPage)
		if err != nil {
			return fmt.Errorf("reconcile: open reservations: %w", err)
		}
		fresh := 0
		for _, r := range open {
			k := [2]string{r.Account, r.ID}
			if seen[k] {
				continue
			}
			seen[k] = true
			fresh++
			res.Reservations++
			released, err := credits.ReleaseReservation(ctx, cs, r, now.Unix())
			if err != nil {
				return fmt.Errorf("reconcile: %w", err)
			}
			if released {
				res.Released++
			}
		}
		if fresh == 0 || len(open) < reservationPage {
			return nil
		}
	}
	return nil
}
