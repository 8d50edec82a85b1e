package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// ReserveBackend is a UsageBackend that also holds reservations
// (credits.Reserver) and serves the reconciler (jobs.ReconcileStore).
type ReserveBackend interface {
	UsageBackend
	jobs.ReconcileStore
}

// RunReservations runs the contract of credits.Reserver and of the
// settlement of reservations: a reservation moves its amount from
// available to held atomically and never overdraws, however many run in
// parallel; a duplicate id, an unknown account and short credits are
// refused with nothing written; the one settlement (a capture of at most
// the reserved amount, the rest released, counted in the job usage of
// "image" or "speech"; or a release of all of it) is written once, and
// only for the reservation it names; OpenReservations lists the unsettled
// ones oldest first; jobs.Reconcile releases the stale ones once however
// often it runs, and a late request settling one as it is released is
// either charged or released, never both. newBackend returns the backend
// for one subtest (it may return the same one every time).
func RunReservations(t *testing.T, newBackend func(t *testing.T) ReserveBackend) {
	runAll(t, newBackend, []subtest[ReserveBackend]{
		{"CaptureRelease", testReserveCaptureRelease},
		{"Refusals", testReserveRefusals},
		{"Invalid", testReserveInvalid},
		{"Concurrent", testReserveConcurrent},
		{"SettleOnce", testReserveSettleOnce},
		{"SettleMismatch", testReserveSettleMismatch},
		{"Open", testReserveOpen},
		{"Reconcile", testReserveReconcile},
		{"ReleaseRace", testReserveReleaseRace},
	})
}

// reservation returns the entry that reserves amount for a fresh id on
// acct at at, to generate typ with model, and that id.
func reservation(t *testing.T, acct, typ, model string, amount credits.Amount, at int64) (credits.Entry, string) {
	t.Helper()
	id := "img_" + randomSuffix(t)
	return credits.Entry{ID: credits.ReservationID(id), Account: acct, Kind: credits.Reservation, Amount: amount,
		JobType: typ, Model: model, At: at}, id
}

// reserve reserves amount on acct at at and returns the reservation.
func reserve(t *testing.T, b ReserveBackend, acct, typ, model string, amount credits.Amount, at int64) (credits.Entry, string) {
	t.Helper()
	e, id := reservation(t, acct, typ, model, amount, at)
	if err := b.Reserve(context.Background(), e); err != nil {
		t.Fatalf("Reserve(%+v) = %v; want nil", e, err)
	}
	return e, id
}

// capture is the settlement of reservation r (of id) charging charge.
func capture(r credits.Entry, id string, charge credits.Amount, at int64) credits.Entry {
	return credits.Entry{ID: credits.SettlementID(id), Account: r.Account, Kind: credits.Capture, Amount: charge, Hold: r.Amount,
		JobType: r.JobType, Model: r.Model, At: at}
}

// release is the settlement of reservation r (of id) releasing all of it.
func release(r credits.Entry, id string, at int64) credits.Entry {
	return credits.Entry{ID: credits.SettlementID(id), Account: r.Account, Kind: credits.Release, Amount: r.Amount,
		JobType: r.JobType, Model: r.Model, At: at}
}

func settle(t *testing.T, b ReserveBackend, e credits.Entry) {
	t.Helper()
	if err := b.Settle(context.Background(), e); err != nil {
		t.Fatalf("Settle(%+v) = %v; want nil", e, err)
	}
}

// wantSettlements checks that acct's ledger has exactly the settlements
// want (settlement id -> kind) of reservations, and one entry per
// reservation in reserved.
func wantSettlements(t *testing.T, b ReserveBackend, acct string, reserved []string, want map[string]string) {
	t.Helper()
	l, err := b.Ledger(context.Background(), acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	got, res := map[string]string{}, map[string]int{}
	for _, e := range l {
		switch e.Kind {
		case credits.Reservation:
			res[e.ID]++
		case credits.Capture, credits.Release:
			if _, dup := got[e.ID]; dup {
				t.Errorf("Ledger(%q) has %s twice", acct, e.ID)
			}
			got[e.ID] = e.Kind
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Ledger(%q) settlements = %v; want %v", acct, got, want)
	}
	for _, id := range reserved {
		if res[credits.ReservationID(id)] != 1 {
			t.Errorf("Ledger(%q) has %d entries %s; want 1", acct, res[credits.ReservationID(id)], credits.ReservationID(id))
		}
	}
	if len(res) != len(reserved) {
		t.Errorf("Ledger(%q) has %d reservations; want %d", acct, len(res), len(reserved))
	}
}

// openOf returns the open reservations of acct made before before.
func openOf(t *testing.T, b ReserveBackend, acct string, before int64) []string {
	t.Helper()
	all, err := b.OpenReservations(context.Background(), before, 1000)
	if err != nil {
		t.Fatalf("OpenReservations(%d) = %v", before, err)
	}
	var ids []string
	for i, e := range all {
		if i > 0 && e.At < all[i-1].At {
			t.Errorf("OpenReservations(%d): %s (at %d) after %s (at %d); want oldest first", before, e.ID, e.At, all[i-1].ID, all[i-1].At)
		}
		if e.At >= before {
			t.Errorf("OpenReservations(%d) lists %s at %d; want only older ones", before, e.ID, e.At)
		}
		if e.Account == acct {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// testReserveCaptureRelease: a capture charges what the request cost and
// releases the rest of the reservation, counted in the job usage of its
// type and model; a release returns all of it and counts nothing; the
// ledger has the reservation and its settlement.
func testReserveCaptureRelease(t *testing.T, b ReserveBackend) {
	acct := newAccount(t, b, 100)
	create(t, b, newJob(t, acct, 5)) // a job's hold stays apart
	img, imgID := reserve(t, b, acct, "image", "synthetic-image", 30, lateMar1)
	wantAccount(t, b, acct, 100, 35)
	speech, speechID := reserve(t, b, acct, "speech", "synthetic-speech", 25, lateMar1)
	wantAccount(t, b, acct, 100, 60)
	settle(t, b, capture(img, imgID, 20, lateMar1)) // cost less than reserved
	wantAccount(t, b, acct, 80, 30)
	settle(t, b, release(speech, speechID, lateMar1))
	wantAccount(t, b, acct, 80, 5)
	said, saidID := reserve(t, b, acct, "speech", "synthetic-speech", 12, earlyMar2)
	settle(t, b, capture(said, saidID, 12, earlyMar2)) // all of it
	wantAccount(t, b, acct, 68, 5)
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{
		{Account: acct, Day: "2025-03-01", JobType: "image", Model: "synthetic-image", Jobs: 1, Credits: 20},
		{Account: acct, Day: "2025-03-02", JobType: "speech", Model: "synthetic-speech", Jobs: 1, Credits: 12},
	})
	wantSettlements(t, b, acct, []string{imgID, speechID, saidID}, map[string]string{
		credits.SettlementID(imgID): credits.Capture, credits.SettlementID(speechID): credits.Release,
		credits.SettlementID(saidID): credits.Capture,
	})
	l, err := b.Ledger(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l {
		if e.ID == img.ID && (e.Kind != credits.Reservation || e.Amount != 30 || e.JobType != "image" || e.Model != "synthetic-image" || e.At != lateMar1) {
			t.Errorf("Ledger(%q) has %+v; want the reservation %+v", acct, e, img)
		}
	}
}

// testReserveRefusals: short credits, an unknown account and a duplicate
// id are refused with their errors, and write nothing.
func testReserveRefusals(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 50)
	create(t, b, newJob(t, acct, 20))
	short, _ := reservation(t, acct, "image", "m", 31, time.Now().Unix())
	err := b.Reserve(ctx, short)
	if !errors.Is(err, credits.ErrInsufficient) {
		t.Errorf("Reserve(31 of 30 available) = %v; want ErrInsufficient", err)
	}
	if ae := apierr.As(err); ae == nil || ae.Kind != apierr.InsufficientQuota || ae.Code != "insufficient_credits" {
		t.Errorf("Reserve(31 of 30 available) = %v; want a 402 insufficient_credits apierr", err)
	}
	wantAccount(t, b, acct, 50, 20)
	if got := openOf(t, b, acct, time.Now().Unix()+10); len(got) != 0 {
		t.Errorf("open reservations after a refused Reserve = %v; want none", got)
	}
	// Its id was not used: the same reservation fits once credits do.
	short.Amount = 30
	if err := b.Reserve(ctx, short); err != nil {
		t.Errorf("Reserve(all 30 available, id of a refused one) = %v; want nil", err)
	}
	wantAccount(t, b, acct, 50, 50)
	if err := b.Reserve(ctx, short); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("Reserve(same id again) = %v; want ErrAlreadySettled", err)
	}
	wantAccount(t, b, acct, 50, 50)

	missing := "acct-missing-" + randomSuffix(t)
	e, _ := reservation(t, missing, "image", "m", 1, time.Now().Unix())
	if err := b.Reserve(ctx, e); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Reserve(unknown account) = %v; want ErrAccountNotFound", err)
	}
	if _, err := b.Account(ctx, missing); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Account(%q) after Reserve = %v; want ErrAccountNotFound", missing, err)
	}

	// A settled reservation's id stays used.
	other := newAccount(t, b, 10)
	r, id := reserve(t, b, other, "speech", "m", 10, time.Now().Unix())
	settle(t, b, release(r, id, time.Now().Unix()))
	if err := b.Reserve(ctx, r); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("Reserve(id of a settled reservation) = %v; want ErrAlreadySettled", err)
	}
	wantAccount(t, b, other, 10, 0)
}

// testReserveInvalid: entries credits.CheckReservation refuses are errors
// and write nothing.
func testReserveInvalid(t *testing.T, b ReserveBackend) {
	acct := newAccount(t, b, 100)
	now := time.Now().Unix()
	good := credits.Entry{ID: credits.ReservationID("x" + randomSuffix(t)), Account: acct, Kind: credits.Reservation,
		Amount: 5, JobType: "image", Model: "m", At: now}
	with := func(f func(e *credits.Entry)) credits.Entry { e := good; f(&e); return e }
	for _, tt := range []struct {
		name string
		e    credits.Entry
	}{
		{"kind capture", with(func(e *credits.Entry) { e.Kind = credits.Capture })},
		{"job id", with(func(e *credits.Entry) { e.ID = "job:" + randomSuffix(t) })},
		{"settlement id", with(func(e *credits.Entry) { e.ID = credits.SettlementID(randomSuffix(t)) })},
		{"empty id", with(func(e *credits.Entry) { e.ID = credits.ReservationID("") })},
		{"no account", with(func(e *credits.Entry) { e.Account = "" })},
		{"zero amount", with(func(e *credits.Entry) { e.Amount = 0 })},
		{"negative amount", with(func(e *credits.Entry) { e.Amount = -5 })},
		{"a hold", with(func(e *credits.Entry) { e.Hold = 10 })},
		{"no type", with(func(e *credits.Entry) { e.JobType = "" })},
		{"no model", with(func(e *credits.Entry) { e.Model = "" })},
		{"NUL in model", with(func(e *credits.Entry) { e.Model = "m\x00" })},
		{"no time", with(func(e *credits.Entry) { e.At = 0 })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.Reserve(context.Background(), tt.e); err == nil {
				t.Errorf("Reserve(%+v) = nil; want an error", tt.e)
			}
		})
	}
	wantAccount(t, b, acct, 100, 0)
	if l, err := b.Ledger(context.Background(), acct); err != nil || len(l) != 1 {
		t.Errorf("Ledger(%q) = %+v, %v; want the grant alone", acct, l, err)
	}
}

// testReserveConcurrent: 50 parallel reservations of 7 against 100
// credits: exactly 14 succeed, the others get ErrInsufficient, and the
// account is never overdrawn.
func testReserveConcurrent(t *testing.T, b ReserveBackend) {
	const (
		balance  = 100
		amount   = 7
		requests = 50
	)
	acct := newAccount(t, b, balance)
	now := time.Now().Unix()
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := credits.Entry{ID: credits.ReservationID(fmt.Sprintf("par_%d_%s", i, acct)), Account: acct,
				Kind: credits.Reservation, Amount: amount, JobType: "image", Model: "m", At: now}
			errs[i] = b.Reserve(context.Background(), e)
		}()
	}
	wg.Wait()
	var ok, short int
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, credits.ErrInsufficient):
			short++
		default:
			t.Errorf("Reserve #%d = %v; want nil or ErrInsufficient", i, err)
		}
	}
	// A reservation is refused only once available < amount, which
	// takes balance/amount successes first.
	if want := balance / amount; ok != want || short != requests-want {
		t.Errorf("%d parallel reservations of %d on %d credits: %d succeeded, %d short; want %d and %d", requests, amount, balance, ok, short, want, requests-want)
	}
	wantAccount(t, b, acct, balance, credits.Amount(ok)*amount)
	if got := openOf(t, b, acct, now+1); len(got) != ok {
		t.Errorf("open reservations = %d; want the %d made", len(got), ok)
	}
}

// testReserveSettleOnce: a reservation is settled once; any later
// settlement of it, either kind, is ErrAlreadySettled and changes nothing.
func testReserveSettleOnce(t *testing.T, b ReserveBackend) {
	acct := newAccount(t, b, 100)
	now := time.Now().Unix()
	r, id := reserve(t, b, acct, "image", "synthetic-image", 40, now)
	settle(t, b, capture(r, id, 25, now))
	for _, e := range []credits.Entry{capture(r, id, 25, now), capture(r, id, 40, now), release(r, id, now)} {
		if err := b.Settle(context.Background(), e); !errors.Is(err, credits.ErrAlreadySettled) {
			t.Errorf("Settle(%s %s) after a capture = %v; want ErrAlreadySettled", e.Kind, e.ID, err)
		}
	}
	wantAccount(t, b, acct, 75, 0)
	day := credits.Day(time.Unix(now, 0))
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{{Account: acct, Day: day, JobType: "image", Model: "synthetic-image", Jobs: 1, Credits: 25}})
	wantSettlements(t, b, acct, []string{id}, map[string]string{credits.SettlementID(id): credits.Capture})
}

// testReserveSettleMismatch: a settlement that matches no reservation (an
// unknown id, another account's, another amount than reserved) is
// ErrNoReservation and writes nothing; a reservation's own id is no
// settlement id.
func testReserveSettleMismatch(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct, other := newAccount(t, b, 100), newAccount(t, b, 100)
	now := time.Now().Unix()
	r, id := reserve(t, b, acct, "speech", "synthetic-speech", 30, now)
	wrongAcct := release(r, id, now)
	wrongAcct.Account = other
	unknown := release(r, id, now)
	unknown.ID = credits.SettlementID("never_" + randomSuffix(t))
	more := capture(r, id, 10, now)
	more.Hold = 31
	for _, tt := range []struct {
		name string
		e    credits.Entry
	}{
		{"unknown id", unknown},
		{"another account", wrongAcct},
		{"release of part", with(release(r, id, now), func(e *credits.Entry) { e.Amount = 20 })},
		{"capture of another hold", more},
		{"capture without a hold", with(capture(r, id, 10, now), func(e *credits.Entry) { e.Hold = 0 })},
	} {
		if err := b.Settle(ctx, tt.e); !errors.Is(err, credits.ErrNoReservation) {
			t.Errorf("Settle(%s: %+v) = %v; want ErrNoReservation", tt.name, tt.e, err)
		}
	}
	if err := b.Settle(ctx, credits.Entry{ID: r.ID, Account: acct, Kind: credits.Release, Amount: 30, At: now}); err == nil || errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("Settle(the reservation's own id %s) = %v; want an invalid settlement", r.ID, err)
	}
	wantAccount(t, b, acct, 100, 30)
	wantAccount(t, b, other, 100, 0)
	if got := openOf(t, b, acct, now+1); len(got) != 1 {
		t.Errorf("open reservations of %s = %v; want %s still open", acct, got, r.ID)
	}
	settle(t, b, release(r, id, now)) // the right one still settles
	wantAccount(t, b, acct, 100, 0)
}

func with(e credits.Entry, f func(e *credits.Entry)) credits.Entry { f(&e); return e }

// testReserveOpen: OpenReservations lists the unsettled reservations made
// before its bound, oldest first, at most limit; a settled one is no
// longer listed.
func testReserveOpen(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	// Days in 1970, older than any other subtest's reservations.
	base := int64(1_000_000)
	a, aID := reserve(t, b, acct, "image", "m", 10, base+2)
	first, firstID := reserve(t, b, acct, "image", "m", 10, base)
	mid, midID := reserve(t, b, acct, "speech", "m", 10, base+1)
	_, _ = reserve(t, b, acct, "speech", "m", 10, time.Now().Unix())
	if got, want := openOf(t, b, acct, base+3), []string{first.ID, mid.ID, a.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("open reservations before %d = %v; want %v", base+3, got, want)
	}
	if got := openOf(t, b, acct, base); len(got) != 0 {
		t.Errorf("open reservations before %d = %v; want none (the oldest is at %d)", base, got, base)
	}
	got, err := b.OpenReservations(ctx, base+3, 2)
	if err != nil || len(got) != 2 || got[0] != first || got[1] != mid {
		t.Errorf("OpenReservations(%d, 2) = %+v, %v; want %+v and %+v", base+3, got, err, first, mid)
	}
	if got, err := b.OpenReservations(ctx, base+3, 0); err != nil || len(got) != 0 {
		t.Errorf("OpenReservations(%d, 0) = %+v, %v; want none", base+3, got, err)
	}
	settle(t, b, capture(first, firstID, 4, base+100))
	if got, want := openOf(t, b, acct, base+3), []string{mid.ID, a.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("open reservations after settling %s = %v; want %v", first.ID, got, want)
	}
	settle(t, b, release(mid, midID, base+100))
	settle(t, b, release(a, aID, base+100))
	if got := openOf(t, b, acct, base+3); len(got) != 0 {
		t.Errorf("open reservations after settling all = %v; want none", got)
	}
	wantAccount(t, b, acct, 96, 10)
}

// testReserveReconcile: jobs.Reconcile releases each reservation older
// than credits.ReservationTTL once, across three runs, and leaves younger
// ones alone.
func testReserveReconcile(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	now := time.Now()
	stale := now.Unix() - credits.ReservationTTL
	_, oldID := reserve(t, b, acct, "image", "synthetic-image", 30, stale-60)
	_, edgeID := reserve(t, b, acct, "speech", "synthetic-speech", 20, stale-1)
	young, youngID := reserve(t, b, acct, "image", "synthetic-image", 10, stale) // exactly the TTL old: not yet
	wantAccount(t, b, acct, 100, 60)
	var released int
	for i := range 3 {
		res, err := jobs.Reconcile(ctx, b, b, now, 0, now)
		if err != nil {
			t.Fatalf("Reconcile #%d = %v", i+1, err)
		}
		if i > 0 && (res.Released != 0 || res.Reservations != 0) {
			t.Errorf("Reconcile #%d = %+v; want no reservation found (all released before)", i+1, res)
		}
		released += res.Released
	}
	if released < 2 {
		t.Errorf("Reconcile released %d reservations in all; want at least this account's 2", released)
	}
	wantAccount(t, b, acct, 100, 10)
	wantSettlements(t, b, acct, []string{oldID, edgeID, youngID}, map[string]string{
		credits.SettlementID(oldID): credits.Release, credits.SettlementID(edgeID): credits.Release,
	})
	wantJobUsage(t, b, acct, "", "", nil)
	if got := openOf(t, b, acct, now.Unix()+1); len(got) != 1 || got[0] != credits.ReservationID(youngID) {
		t.Errorf("open reservations after Reconcile = %v; want only %s", got, credits.ReservationID(youngID))
	}
	// Its request ends (a later subtest's run must not find it stale).
	settle(t, b, release(young, youngID, now.Unix()))
}

// testReserveReleaseRace: the reconciler releasing stale reservations
// races their requests capturing them late: each is settled once, by
// whichever came first; the loser gets ErrAlreadySettled (the reconciler
// counts it as not released); the account and the job usage match the
// winners.
func testReserveReleaseRace(t *testing.T, b ReserveBackend) {
	const rounds = 8
	ctx := context.Background()
	acct := newAccount(t, b, 1000)
	now := time.Now()
	at := now.Unix() - credits.ReservationTTL - 1
	type round struct {
		r        credits.Entry
		id       string
		capErr   error
		released bool
		relErr   error
	}
	rs := make([]round, rounds)
	for i := range rs {
		rs[i].r, rs[i].id = reserve(t, b, acct, "image", "synthetic-image", 30, at)
	}
	// One round through jobs.Reconcile itself, the others through the
	// release it makes, so that both orders come up.
	var res jobs.ReconcileResult
	var recErr error
	var wg sync.WaitGroup
	for i := range rs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			rs[i].capErr = b.Settle(ctx, capture(rs[i].r, rs[i].id, 12, now.Unix()))
		}()
		go func() {
			defer wg.Done()
			if i == 0 {
				return
			}
			rs[i].released, rs[i].relErr = credits.ReleaseReservation(ctx, b, rs[i].r, now.Unix())
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, recErr = jobs.Reconcile(ctx, b, b, now, 0, now)
	}()
	wg.Wait()
	if recErr != nil {
		t.Fatalf("Reconcile = %v", recErr)
	}
	captured, releasedN := 0, 0
	want := map[string]string{}
	var ids []string
	for i, r := range rs {
		ids = append(ids, r.id)
		if r.relErr != nil {
			t.Errorf("round %d: ReleaseReservation = %v; want nil", i, r.relErr)
		}
		switch {
		case r.capErr == nil:
			captured++
			want[credits.SettlementID(r.id)] = credits.Capture
			if r.released {
				t.Errorf("round %d: both the late capture and the release won", i)
			}
		case errors.Is(r.capErr, credits.ErrAlreadySettled):
			releasedN++
			want[credits.SettlementID(r.id)] = credits.Release
		default:
			t.Errorf("round %d: late capture = %v; want nil or ErrAlreadySettled", i, r.capErr)
		}
	}
	wantSettlements(t, b, acct, ids, want)
	wantAccount(t, b, acct, 1000-credits.Amount(12*captured), 0)
	if captured > 0 {
		day := credits.Day(now)
		wantJobUsage(t, b, acct, "", "", []credits.JobUsage{{Account: acct, Day: day, JobType: "image", Model: "synthetic-image", Jobs: int64(captured), Credits: credits.Amount(12 * captured)}})
	} else {
		wantJobUsage(t, b, acct, "", "", nil)
	}
	if got := openOf(t, b, acct, now.Unix()+1); len(got) != 0 {
		t.Errorf("open reservations after the race = %v; want none", got)
	}
	// Every release is accounted for by the reconciler's run or a
	// ReleaseReservation that returned true.
	var byRelease int
	for _, r := range rs {
		if r.released {
			byRelease++
		}
	}
	if byRelease+res.Released != releasedN {
		t.Errorf("releases reported: %d by ReleaseReservation + %d by Reconcile; want the %d in the ledger", byRelease, res.Released, releasedN)
	}
	t.Logf("%d rounds: %d captured late, %d released", rounds, captured, releasedN)
}
