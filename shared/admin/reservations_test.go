package admin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
)

// settleReservation reserves amount on acct for typ and model at at, and
// settles it as images and speech do: a capture of charge (charge 0: a
// release of everything). It returns the reservation.
func settleReservation(t *testing.T, st *localstore.Store, id, acct, typ, model string, amount, charge credits.Amount, at time.Time, settle bool) credits.Entry {
	t.Helper()
	ctx := context.Background()
	r := credits.Entry{ID: credits.ReservationID(id), Account: acct, Kind: credits.Reservation, Amount: amount, JobType: typ, Model: model, At: at.Unix()}
	if err := st.Reserve(ctx, r); err != nil {
		t.Fatalf("Reserve(%+v) = %v", r, err)
	}
	if !settle {
		return r
	}
	s := credits.Entry{ID: credits.SettlementID(id), Account: acct, Kind: credits.Capture, Amount: charge, Hold: amount, JobType: typ, Model: model, At: at.Unix()}
	if charge == 0 {
		s = credits.Entry{ID: credits.SettlementID(id), Account: acct, Kind: credits.Release, Amount: amount, JobType: typ, Model: model, At: at.Unix()}
	}
	if err := st.Settle(ctx, s); err != nil {
		t.Fatalf("Settle(%+v) = %v", s, err)
	}
	return r
}

// TestUsageImagesSpeech: image and speech generations, settled as their
// reservations are, are in the usage (Kind image and speech) with their
// credits, through the Service and the admin API alike; released ones
// (failures) and open ones (still running) are not.
func TestUsageImagesSpeech(t *testing.T) {
	ctx := context.Background()
	st, ops := operators(t)
	if _, err := st.Grant(ctx, "acct1", 100, 1); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2025, 3, 2, 12, 0, 0, 0, time.UTC)
	settleReservation(t, st, "img_a", "acct1", "image", "synthetic-image", 3, 3, day, true)                  // n=3
	settleReservation(t, st, "img_b", "acct1", "image", "synthetic-image", 2, 1, day, true)                  // a fallback's cheaper price
	settleReservation(t, st, "img_c", "acct1", "image", "synthetic-image", 5, 0, day, true)                  // failed: released
	settleReservation(t, st, "img_d", "acct1", "image", "gpt-image-1", 4, 4, day.AddDate(0, 0, 1), true)     // next day
	settleReservation(t, st, "sp_a", "acct1", "speech", "synthetic-speech", 2, 2, day, true)                 // spoken
	settleReservation(t, st, "sp_b", "acct1", "speech", "synthetic-speech", 1, 0, day, true)                 // cut short: released
	settleReservation(t, st, "sp_c", "acct1", "speech", "synthetic-speech", 1, 0, day.Add(time.Hour), false) // still open
	want := []admin.DayUsage{
		{Account: "acct1", Day: "2025-03-02", Kind: "image", Model: "synthetic-image", Jobs: 2, Credits: 4},
		{Account: "acct1", Day: "2025-03-02", Kind: "speech", Model: "synthetic-speech", Jobs: 1, Credits: 2},
		{Account: "acct1", Day: "2025-03-03", Kind: "image", Model: "gpt-image-1", Jobs: 1, Credits: 4},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			got, err := op.Usage(ctx, "acct1", "", "")
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Usage = %+v, %v; want %+v", got, err, want)
			}
			a, err := op.Account(ctx, "acct1")
			if err != nil || a.Balance != 100-10 || a.Held != 1 || a.Available != 100-10-1 {
				t.Errorf("Account = %+v, %v; want balance 90, held 1 (the open speech), available 89", a, err)
			}
		})
	}
}

// TestReservations: the open reservations, of every account or of one,
// oldest first, through the Service and the admin API alike; settled
// ones are gone.
func TestReservations(t *testing.T) {
	ctx := context.Background()
	st, ops := operators(t)
	for _, a := range []string{"acct1", "acct2", "acct3"} {
		if _, err := st.Grant(ctx, a, 100, 1); err != nil {
			t.Fatal(err)
		}
	}
	// operators' clock is at 1_700_000_000.
	at := func(s int64) time.Time { return time.Unix(1_700_000_000-s, 0) }
	r1 := settleReservation(t, st, "img_1", "acct1", "image", "synthetic-image", 3, 0, at(60), false)
	r2 := settleReservation(t, st, "sp_2", "acct2", "speech", "synthetic-speech", 2, 0, at(3000), false)
	r3 := settleReservation(t, st, "sp_3", "acct1", "speech", "tts-1", 1, 0, at(5), false)
	settleReservation(t, st, "img_4", "acct1", "image", "synthetic-image", 4, 4, at(30), true) // captured
	settleReservation(t, st, "img_5", "acct2", "image", "synthetic-image", 4, 0, at(30), true) // released
	tests := []struct {
		name    string
		account string
		want    []credits.Entry
		wantErr error
	}{
		{"every account", "", []credits.Entry{r2, r1, r3}, nil},
		{"one account", "acct1", []credits.Entry{r1, r3}, nil},
		{"an account with none", "acct3", nil, nil},
		{"unknown account", "nobody", nil, credits.ErrAccountNotFound},
	}
	for name, op := range ops {
		rl, ok := op.(admin.ReservationLister)
		if !ok {
			t.Fatalf("%s (%T) does not list reservations", name, op)
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				got, err := rl.Reservations(ctx, tt.account)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Reservations(%q) = %v; want %v", tt.account, err, tt.wantErr)
				}
				if !slices.EqualFunc(got, tt.want, func(a, b credits.Entry) bool {
					return a.ID == b.ID && a.Account == b.Account && a.Amount == b.Amount && a.JobType == b.JobType && a.Model == b.Model && a.At == b.At
				}) {
					t.Errorf("Reservations(%q) = %+v; want %+v", tt.account, got, tt.want)
				}
			})
		}
	}
}
