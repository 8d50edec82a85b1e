package localstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// TestReadsWholeCreditData: a store file written before amounts had
// decimals (every amount a JSON integer of whole credits, as releases
// before credits.Amount wrote them) reads with nothing lost: the account,
// its ledger, a key's limit, spend and hold, chat and job usage, a job's
// price, hold and candidates, and an open reservation all read as the
// same credits; and the store goes on from there exactly (a reservation
// settled in part, a fractional grant).
func TestReadsWholeCreditData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "genway.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	const at = 1_700_000_100
	old := []struct{ bucket, key, value string }{
		{bucketAccounts, "old", `{"id":"old","balance":1000,"held":13,"available":987,"rate_limit":-1,"created":1700000000}`},
		{bucketLedger, "grant:aa", `{"id":"grant:aa","account":"old","kind":"grant","amount":1000,"at":1700000000}`},
		{bucketLedger, "reserve:img_old", `{"id":"reserve:img_old","account":"old","kind":"reservation","amount":3,"job_type":"image","model":"synthetic-image","key":"key_old","at":1700000100}`},
		{bucketLedgerSeq, "old\x00" + string(u64(1)), "grant:aa"},
		{bucketLedgerSeq, "old\x00" + string(u64(2)), "reserve:img_old"},
		{bucketOpenRes, string(u64(at)) + "reserve:img_old", ""},
		{bucketKeys, "hash_old", `{"id":"key_old","hash":"hash_old","prefix":"sk_live_abcd","account":"old","created":1700000000,"credit_limit":50,"spent":7,"held":3}`},
		{bucketKeyIDs, "key_old", "hash_old"},
		{bucketUsage, "old\x002023-11-14\x00m", `{"account":"old","day":"2023-11-14","model":"m","requests":2,"prompt_tokens":10,"completion_tokens":5,"credits":4}`},
		{bucketJobUsage, "old\x002023-11-14\x00sfx\x00synthetic-sfx", `{"account":"old","day":"2023-11-14","type":"sfx","model":"synthetic-sfx","jobs":1,"credits":2}`},
		{bucketJobs, "job_sfx_old", `{"id":"job_sfx_old","account":"old","type":"sfx","model":"synthetic-sfx","status":"processing",` +
			`"input":{"prompt":"rain","duration":10,"format":"mp3"},"price":10,"hold":10,` +
			`"candidates":[{"model":"synthetic-sfx","price":10},{"model":"cheap-sfx","price":7}],"created":1700000000,"updated":1700000000}`},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, o := range old {
			b, err := tx.CreateBucketIfNotExists([]byte(o.bucket))
			if err != nil {
				return err
			}
			var v []byte
			if o.value != "" {
				v = []byte(o.value)
			}
			if err := b.Put([]byte(o.key), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	ctx := context.Background()
	const cr = credits.Credit
	if a, err := s.Account(ctx, "old"); err != nil || a.Balance != 1000*cr || a.Held != 13*cr || a.Available != 987*cr || a.RateLimit != -1 {
		t.Errorf("Account(old) = %+v, %v; want balance 1000, held 13, available 987, unlimited", a, err)
	}
	l, err := s.Ledger(ctx, "old")
	if err != nil || len(l) != 2 || l[0].Amount != 1000*cr || l[1].Amount != 3*cr || l[1].Key != "key_old" {
		t.Errorf("Ledger(old) = %+v, %v; want the grant of 1000 and the reservation of 3", l, err)
	}
	k, err := s.KeyByID(ctx, "key_old")
	if err != nil || k.CreditLimit == nil || *k.CreditLimit != 50*cr || k.Spent != 7*cr || k.Held != 3*cr {
		t.Errorf("KeyByID(key_old) = %+v, %v; want limit 50, spent 7, held 3", k, err)
	}
	if u, err := s.Usage(ctx, "old", "", ""); err != nil || len(u) != 1 || u[0].Credits != 4*cr || u[0].Requests != 2 {
		t.Errorf("Usage(old) = %+v, %v; want 2 requests for 4 credits", u, err)
	}
	if u, err := s.JobUsage(ctx, "old", "", ""); err != nil || len(u) != 1 || u[0].Credits != 2*cr {
		t.Errorf("JobUsage(old) = %+v, %v; want 1 job for 2 credits", u, err)
	}
	j, err := s.Get(ctx, "job_sfx_old")
	if err != nil || j.Price != 10*cr || j.Hold != 10*cr || len(j.Candidates) != 2 || j.Candidates[1].Price != 7*cr {
		t.Errorf("Get(job_sfx_old) = %+v, %v; want price and hold 10, candidates at 10 and 7", j, err)
	}
	open, err := s.OpenReservations(ctx, at+1, 10)
	if err != nil || len(open) != 1 || open[0].Amount != 3*cr || open[0].Key != "key_old" {
		t.Fatalf("OpenReservations = %+v, %v; want the reservation of 3", open, err)
	}

	// And on from there, exactly: the reservation captured in part, the
	// job completed at its fallback's price, a fractional grant.
	settled := credits.Entry{ID: credits.SettlementID("img_old"), Account: "old", Kind: credits.Capture, Amount: 2_500_000, Hold: 3 * cr,
		JobType: "image", Model: "synthetic-image", At: at}
	if err := s.Settle(ctx, settled); err != nil {
		t.Fatalf("Settle(%+v) = %v", settled, err)
	}
	charge := 7 * cr
	if _, err := s.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Updated: at}); err != nil {
		t.Fatal(err)
	}
	c := credits.Change{JobID: j.ID, Account: "old", JobType: "sfx", Model: "cheap-sfx", OldStatus: "processing", NewStatus: "completed", Price: charge, Hold: 10 * cr, At: at}
	if err := credits.Apply(ctx, s, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, "old", 250_000, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Account(ctx, "old"); err != nil || a.Balance != 990_750_000 || a.Held != 0 || a.Available != 990_750_000 {
		t.Errorf("Account(old) after settling = %+v, %v; want 1000 - 2.5 - 7 + 0.25 = 990.75, nothing held", a, err)
	}
	if k, err := s.KeyByID(ctx, "key_old"); err != nil || k.Spent != 9_500_000 || k.Held != 0 {
		t.Errorf("KeyByID(key_old) after settling = %+v, %v; want spent 9.5, nothing held", k, err)
	}
}
