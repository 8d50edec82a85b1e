package jobs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// reserveStore is a hand-written ReconcileStore of reservations alone (no
// accounts, so no jobs to reconcile): open holds the open reservations;
// with lag, OpenReservations lists settled ones too, as a listing behind
// its writes would; settleErr fails every Settle.
type reserveStore struct {
	ReconcileStore // nil: only the methods below are called
	open           map[string]credits.Entry
	settled        []credits.Entry
	lag            bool
	settleErr      error
	listed         []int64 // the before of each OpenReservations
}

func newReserveStore(n int, at int64) *reserveStore {
	s := &reserveStore{open: map[string]credits.Entry{}}
	for i := range n {
		id := fmt.Sprintf("img_%03d", i)
		s.open[id] = credits.Entry{ID: credits.ReservationID(id), Account: "a", Kind: credits.Reservation,
			Amount: credits.Amount(i + 1), JobType: "image", Model: "m", At: at + int64(i)}
	}
	return s
}

func (s *reserveStore) Accounts(context.Context) ([]credits.Account, error) { return nil, nil }

func (s *reserveStore) OpenReservations(_ context.Context, before int64, limit int) ([]credits.Entry, error) {
	s.listed = append(s.listed, before)
	var out []credits.Entry
	for _, e := range s.open {
		if e.At < before {
			out = append(out, e)
		}
	}
	if s.lag {
		for _, e := range s.settled {
			out = append(out, credits.Entry{ID: credits.ReservationID(e.ID[len(credits.SettlementID("")):]), Account: e.Account,
				Kind: credits.Reservation, Amount: e.Amount, At: 0})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out[:min(len(out), limit)], nil
}

func (s *reserveStore) Settle(_ context.Context, e credits.Entry) error {
	if s.settleErr != nil {
		return s.settleErr
	}
	rid, ok := credits.ReservationOf(e.ID)
	if !ok {
		return fmt.Errorf("settle %s: not a reservation's", e.ID)
	}
	id := rid[len(credits.ReservationID("")):]
	if _, open := s.open[id]; !open {
		return credits.ErrAlreadySettled
	}
	delete(s.open, id)
	s.settled = append(s.settled, e)
	return nil
}

// TestReconcileReservations checks the reconciler's loop over open
// reservations: every stale one released once (a page after another),
// with the right settlement, none younger than the TTL, a listing that
// lags behind the releases neither counted twice nor looped on, and a
// store error returned.
func TestReconcileReservations(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	stale := now.Unix() - credits.ReservationTTL
	tests := []struct {
		name                   string
		store                  *reserveStore
		reservations, released int
		open                   int
		fails                  bool
	}{
		{"none", newReserveStore(0, stale-10), 0, 0, 0, false},
		{"pages", newReserveStore(2*reservationPage+50, stale-3*reservationPage), 2*reservationPage + 50, 2*reservationPage + 50, 0, false},
		{"young ones stay", newReserveStore(20, stale-10), 10, 10, 10, false},
		// The second page lists the first again: nothing new, so the run
		// stops there (the next run releases the rest), without looping.
		{"lagging listing", func() *reserveStore { s := newReserveStore(reservationPage+50, stale-200); s.lag = true; return s }(), reservationPage, reservationPage, 50, false},
		{"store error", func() *reserveStore {
			s := newReserveStore(3, stale-10)
			s.settleErr = errors.New("throttled")
			return s
		}(), 1, 0, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Reconcile(context.Background(), newMemStore(), tt.store, now.Add(-time.Hour), 0, now)
			if (err != nil) != tt.fails {
				t.Fatalf("Reconcile = %+v, %v; want error %v", res, err, tt.fails)
			}
			if res.Reservations != tt.reservations || res.Released != tt.released {
				t.Errorf("Reconcile = %+v; want %d reservations found, %d released", res, tt.reservations, tt.released)
			}
			if len(tt.store.open) != tt.open {
				t.Errorf("after Reconcile %d reservations open; want %d", len(tt.store.open), tt.open)
			}
			if len(tt.store.listed) > 4 {
				t.Errorf("Reconcile listed open reservations %d times; want a few pages", len(tt.store.listed))
			}
			for _, b := range tt.store.listed {
				if b != stale {
					t.Errorf("OpenReservations(before %d); want %d (now - ReservationTTL)", b, stale)
				}
			}
			for _, e := range tt.store.settled {
				if e.Kind != credits.Release || e.At != now.Unix() || e.JobType != "image" || e.Model != "m" || e.Amount <= 0 {
					t.Errorf("settled %+v; want a release of all of it, at now, with its labels", e)
				}
			}
		})
	}
}
