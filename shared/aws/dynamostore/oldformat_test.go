package dynamostore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// TestReadsWholeCreditItems: items written before amounts had decimals
// (every amount a DynamoDB number of whole credits, some in the forms
// DynamoDB and other writers give back: "1E+1", "987.0") read with nothing
// lost: the account, its ledger, a key's record and counters, chat and job
// usage, a job's price, hold and candidates, and an open reservation; and
// the store goes on from there exactly, in decimals (a reservation settled
// in part, a job completed at a fallback's price, a fractional grant, a
// fractional credit limit over the old counters).
func TestReadsWholeCreditItems(t *testing.T) {
	s, client := newStore(t, mototest.Start(t))
	ctx := context.Background()
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	m := func(kv map[string]types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: kv}
	}
	const at = 1_700_000_100
	res := credits.Entry{ID: credits.ReservationID("img_old"), Account: "old", Kind: credits.Reservation, Amount: 3 * credits.Credit,
		JobType: "image", Model: "synthetic-image", Key: "key_old", At: at}
	openKey := openResKey(res)
	items := map[string][]map[string]types.AttributeValue{
		"accounts": {
			{"pk": str("acct#old"), "sk": str("account"), "balance": n("1000"), "held": n("13"), "available": n("987.0"), "rate_limit": n("-1"), "created": n("1700000000")},
			{"pk": str("acct#old"), "sk": str("ledger#grant:aa"), "kind": str("grant"), "amount": n("1E+3"), "at": n("1700000000"), "seq": n("1")},
			{"pk": str("acct#old"), "sk": str("ledger#reserve:img_old"), "kind": str("reservation"), "amount": n("3"), "job_type": str("image"),
				"model": str("synthetic-image"), "key": str("key_old"), "at": n("1700000100"), "seq": n("2")},
			{"pk": openKey["pk"], "sk": openKey["sk"], "account": str("old"), "id": str("reserve:img_old"), "amount": n("3"),
				"job_type": str("image"), "model": str("synthetic-image"), "at": n("1700000100")},
			{"pk": str("key#hash_old"), "sk": str("key"), "id": str("key_old"), "hash": str("hash_old"), "prefix": str("sk_live_abcd"),
				"account": str("old"), "created": n("1700000000"), "credit_limit": n("50")},
			{"pk": str("keyid#key_old"), "sk": str("key"), "hash": str("hash_old"), "spent": n("7"), "held": n("3"), "used": n("10"),
				"left": n("40"), "credit_limit": n("50")},
			{"pk": str("acct#old"), "sk": str("usage#2023-11-14#m"), "day": str("2023-11-14"), "model": str("m"), "requests": n("2"),
				"prompt_tokens": n("10"), "completion_tokens": n("5"), "credits": n("4")},
			{"pk": str("acct#old"), "sk": str("jobusage#2023-11-14#sfx#synthetic-sfx"), "day": str("2023-11-14"), "job_type": str("sfx"),
				"model": str("synthetic-sfx"), "jobs": n("1"), "credits": n("2")},
		},
		"jobs": {
			{"id": str("job_sfx_old"), "account": str("old"), "type": str("sfx"), "model": str("synthetic-sfx"), "status": str("processing"),
				"input": m(map[string]types.AttributeValue{"prompt": str("rain"), "duration": n("10"), "format": str("mp3")}),
				"price": n("10"), "hold": n("1E+1"), "created": n("1700000000"), "updated": n("1700000000"),
				"candidates": &types.AttributeValueMemberL{Value: []types.AttributeValue{
					m(map[string]types.AttributeValue{"model": str("synthetic-sfx"), "price": n("10")}),
					m(map[string]types.AttributeValue{"model": str("cheap-sfx"), "price": n("7")}),
				}}},
		},
	}
	for table, list := range items {
		for _, item := range list {
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatalf("PutItem(%s) = %v", table, err)
			}
		}
	}

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
	if err != nil || len(open) != 1 || open[0].Amount != 3*cr {
		t.Fatalf("OpenReservations = %+v, %v; want the reservation of 3", open, err)
	}

	// And on from there, in decimals.
	settled := credits.Entry{ID: credits.SettlementID("img_old"), Account: "old", Kind: credits.Capture, Amount: 2_500_000, Hold: 3 * cr,
		JobType: "image", Model: "synthetic-image", At: at}
	if err := s.Settle(ctx, settled); err != nil {
		t.Fatalf("Settle(%+v) = %v", settled, err)
	}
	charge := 7 * cr
	done, err := s.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Updated: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := credits.Apply(ctx, s, done.Change(jobs.Processing, at)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, "old", 250_000, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Account(ctx, "old"); err != nil || a.Balance != 990_750_000 || a.Held != 0 || a.Available != 990_750_000 {
		t.Errorf("Account(old) after settling = %+v, %v; want 1000 - 2.5 - 7 + 0.25 = 990.75, nothing held", a, err)
	}
	// The old counters under a fractional limit: 60.5 - 9.5 spent = 51 left.
	lim := credits.Amount(60_500_000)
	if _, err := s.SetControls(ctx, "key_old", auth.Controls{CreditLimit: &lim}); err != nil {
		t.Fatalf("SetControls = %v", err)
	}
	over := credits.Entry{ID: credits.ReservationID("img_over"), Account: "old", Kind: credits.Reservation, Amount: 51*cr + 1,
		JobType: "image", Model: "synthetic-image", Key: "key_old", At: at}
	if err := s.Reserve(ctx, over); !errors.Is(err, credits.ErrKeyLimit) {
		t.Errorf("Reserve(51.000001 with 51 left) = %v; want the key's limit", err)
	}
	if k, err := s.KeyByID(ctx, "key_old"); err != nil || k.Spent != 9_500_000 || k.Held != 0 {
		t.Errorf("KeyByID(key_old) after settling = %+v, %v; want spent 9.5, nothing held", k, err)
	}
}
