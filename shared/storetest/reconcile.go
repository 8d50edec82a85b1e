package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// testReconcile: final jobs whose settlement never ran (a "poisoned"
// stream record: the job is final, its hold still open) are settled by
// jobs.Reconcile exactly once however often it runs, and a job the
// stream did settle is left alone.
func testReconcile(t *testing.T, b Backend) {
	var rs jobs.ReconcileStore = b
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	// charged completes a job of hold held at charge (a cheaper fallback
	// served it); final is a job charged what it held.
	charged := func(hold, charge credits.Amount, to jobs.Status, settle bool) *jobs.Job {
		nj := newJob(t, acct, hold)
		nj.Hold = hold
		j := create(t, b, nj)
		if to == jobs.Completed {
			if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{Updated: j.Created}); err != nil {
				t.Fatal(err)
			}
			p := jobs.Patch{Updated: j.Created, Output: &jobs.Output{Key: "k", ContentType: "audio/mpeg", Bytes: 1}}
			if charge != hold {
				p.Price = &charge
			}
			if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, p); err != nil {
				t.Fatal(err)
			}
		} else if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Failed, jobs.Patch{Updated: j.Created, Error: &jobs.JobError{Code: "internal_error", Message: "x"}}); err != nil {
			t.Fatal(err)
		}
		if settle {
			if err := credits.Apply(ctx, b, credits.Change{JobID: j.ID, Account: acct, OldStatus: "processing", NewStatus: string(to), Price: charge, Hold: hold, At: j.Created}); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	final := func(price credits.Amount, to jobs.Status, settle bool) *jobs.Job {
		return charged(price, price, to, settle)
	}
	final(30, jobs.Completed, false)      // its capture never happened
	final(20, jobs.Failed, false)         // its release never happened
	final(10, jobs.Completed, true)       // settled by the stream
	charged(25, 5, jobs.Completed, false) // served by a cheaper fallback, never settled
	wantAccount(t, b, acct, 90, 75)
	since, now := time.Now().Add(-time.Hour), time.Now().Add(time.Minute)
	var settled int
	for i := range 3 {
		res, err := jobs.Reconcile(ctx, b, rs, since, 0, now)
		if err != nil {
			t.Fatalf("Reconcile #%d = %v", i+1, err)
		}
		if i > 0 && res.Settled != 0 {
			t.Errorf("Reconcile #%d settled %d; want 0 (all settled before)", i+1, res.Settled)
		}
		settled += res.Settled
	}
	if settled < 3 {
		t.Errorf("Reconcile settled %d jobs in all; want at least this account's 3", settled)
	}
	wantAccount(t, b, acct, 55, 0) // 30 and 5 captured, 20 of the 25 hold released
	entries, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	if kinds[credits.Capture] != 3 || kinds[credits.Release] != 1 {
		t.Errorf("ledger kinds = %v; want 3 captures and 1 release", kinds)
	}
	// Grace keeps the reconciler off jobs the stream may still settle.
	fresh := final(5, jobs.Completed, false)
	if res, err := jobs.Reconcile(ctx, b, rs, since, time.Hour, time.Unix(fresh.Updated, 0)); err != nil || res.Settled != 0 {
		t.Errorf("Reconcile within the grace = %+v, %v; want nothing settled", res, err)
	}
}

// testTouchKey: a key's last use is recorded and listed.
func testTouchKey(t *testing.T, b Backend) {
	var tb auth.Toucher = b
	ctx := context.Background()
	acct := newAccount(t, b, 0)
	key, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	rec := auth.NewRecord(key, acct, time.Now())
	if err := b.PutKey(ctx, rec); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 0)
	if err := tb.TouchKey(ctx, rec.Hash, at); err != nil {
		t.Fatalf("TouchKey = %v", err)
	}
	if err := tb.TouchKey(ctx, "0000000000000000000000000000000000000000000000000000000000000000", at); err != nil {
		t.Errorf("TouchKey of an unknown key = %v; want nil (nothing to record)", err)
	}
	keys, err := b.Keys(ctx, acct)
	if err != nil || len(keys) != 1 || keys[0].LastUsed != at.Unix() {
		t.Errorf("Keys after TouchKey = %+v, %v; want last_used %d", keys, err, at.Unix())
	}
	got, err := b.KeyByHash(ctx, rec.Hash)
	if err != nil || got.LastUsed != at.Unix() || got.Revoked != 0 {
		t.Errorf("KeyByHash after TouchKey = %+v, %v", got, err)
	}
}
