package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// RunAmounts runs the contract of exact amounts: credits are kept to the
// micro-credit, through grants, job holds and their settlement,
// reservations, key limits (set, changed, removed, rolled) and usage
// sums, with nothing lost to rounding however many small amounts add up;
// and no balance, key spend or usage sum passes credits.MaxAmount: a
// grant or charge that would is refused with credits.ErrAmountRange, and
// nothing is written. On DynamoDB these are exact decimals (moto
// included: see dynamostore's amount.go). newBackend returns the backend
// for one subtest (it may return the same one every time).
func RunAmounts(t *testing.T, newBackend func(t *testing.T) ReserveBackend) {
	runAll(t, newBackend, []subtest[ReserveBackend]{
		{"FractionalGrants", testFractionalGrants},
		{"FractionalHolds", testFractionalHolds},
		{"FractionalKeyLimit", testFractionalKeyLimit},
		{"FractionalUsage", testFractionalUsage},
		{"GrantPastMaximum", testGrantPastMaximum},
		{"UsagePastMaximum", testUsagePastMaximum},
	})
}

// testFractionalGrants: 250 grants of one micro-credit add up to exactly
// 0.00025 credits (a float64 sum would not).
func testFractionalGrants(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 0)
	const n = 250
	for i := range n {
		if _, err := b.Grant(ctx, acct, credits.Micro, time.Now().Unix()); err != nil {
			t.Fatalf("Grant #%d of 0.000001 = %v", i+1, err)
		}
	}
	wantAccount(t, b, acct, n*credits.Micro, 0)
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	var sum credits.Amount
	for _, e := range l {
		sum += e.Amount
	}
	if len(l) != n || sum != n*credits.Micro {
		t.Errorf("Ledger(%q) = %d entries summing to %s; want %d grants summing to 0.00025", acct, len(l), sum, n)
	}
}

// testFractionalHolds: a job's fractional hold and its capture below it,
// a reservation captured in part and one released, leave the account
// exact to the micro-credit, and the ledger and job usage say the same
// amounts.
func testFractionalHolds(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10_500_000) // 10.5
	j := create(t, b, newJob(t, acct, 2_000_001))
	wantAccount(t, b, acct, 10_500_000, 2_000_001)
	got, err := b.Get(ctx, j.ID)
	if err != nil || got.Price != 2_000_001 {
		t.Fatalf("Get(%q) = %+v, %v; want price 2.000001", j.ID, got, err)
	}
	at := time.Now().Unix()
	charge := credits.Amount(1_234_567)
	if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{Updated: at}); err != nil {
		t.Fatalf("Transition = %v", err)
	}
	if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Updated: at}); err != nil {
		t.Fatalf("Transition = %v", err)
	}
	if got, err := b.Get(ctx, j.ID); err != nil || got.Price != charge || got.Hold != 0 && got.Hold != 2_000_001 {
		t.Errorf("Get(%q) after completion = %+v, %v; want price 1.234567", j.ID, got, err)
	}
	c := credits.Change{JobID: j.ID, Account: acct, JobType: jobs.TypeSFX, Model: "test-sfx", OldStatus: "processing", NewStatus: "completed",
		Price: charge, Hold: 2_000_001, At: at}
	if err := credits.Apply(ctx, b, c); err != nil {
		t.Fatalf("Apply(%+v) = %v", c, err)
	}
	wantAccount(t, b, acct, 9_265_433, 0) // 10.5 - 1.234567
	part, partID := reserve(t, b, acct, "image", "synthetic-image", 333_333, at)
	gone, goneID := reserve(t, b, acct, "speech", "synthetic-speech", credits.Micro, at)
	wantAccount(t, b, acct, 9_265_433, 333_334)
	settle(t, b, capture(part, partID, 111_111, at))
	settle(t, b, release(gone, goneID, at))
	wantAccount(t, b, acct, 9_154_322, 0) // 9.265433 - 0.111111
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	amounts := map[string]credits.Amount{}
	for _, e := range l {
		amounts[e.Kind] += e.Amount
	}
	if amounts[credits.Capture] != 1_345_678 || amounts[credits.Release] != credits.Micro || amounts[credits.Reservation] != 333_334 {
		t.Errorf("Ledger(%q) sums by kind = %v; want captures 1.345678, releases 0.000001, reservations 0.333334", acct, amounts)
	}
	day := credits.Day(time.Unix(at, 0))
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{
		{Account: acct, Day: day, JobType: "image", Model: "synthetic-image", Jobs: 1, Credits: 111_111},
		{Account: acct, Day: day, JobType: jobs.TypeSFX, Model: "test-sfx", Jobs: 1, Credits: 1_234_567},
	})
}

// testFractionalKeyLimit: a key's fractional credit limit holds to the
// micro-credit, and stays exact when it is changed, removed, set again
// and when its period rolls.
func testFractionalKeyLimit(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100*credits.Credit)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(1_000_001)})
	hold := func(amount credits.Amount) (credits.Entry, string, error) {
		t.Helper()
		e, id := reservation(t, acct, "image", "synthetic-image", amount, time.Now().Unix())
		e.Key = r.ID
		return e, id, b.Reserve(ctx, e)
	}
	half, halfID, err := hold(500_000)
	if err != nil {
		t.Fatalf("Reserve(0.5 of 1.000001) = %v", err)
	}
	if _, _, err := hold(500_001); err != nil {
		t.Fatalf("Reserve(0.500001 with 0.500001 left) = %v", err)
	}
	_, _, err = hold(credits.Micro)
	wantKeyLimit(t, "Reserve(0.000001 with nothing left)", err, 0, 1_000_001)
	settle(t, b, capture(half, halfID, 250_000, time.Now().Unix()))
	wantKey(t, b, r.ID, 250_000, 500_001)
	setLimit := func(c auth.Controls) {
		t.Helper()
		if _, err := b.SetControls(ctx, r.ID, c); err != nil {
			t.Fatalf("SetControls(%+v) = %v", c, err)
		}
	}
	// 0.8 - 0.750001 = 0.049999 left.
	setLimit(auth.Controls{CreditLimit: limit(800_000)})
	_, _, err = hold(50_000)
	wantKeyLimit(t, "Reserve(0.05 with 0.049999 left)", err, 49_999, 800_000)
	fits, fitsID, err := hold(49_999)
	if err != nil {
		t.Fatalf("Reserve(0.049999 with 0.049999 left) = %v", err)
	}
	settle(t, b, release(fits, fitsID, time.Now().Unix()))
	// Removed, then set again: 2.5 - 0.750001 = 1.749999 left.
	setLimit(auth.Controls{})
	setLimit(auth.Controls{CreditLimit: limit(2_500_000), CreditLimitReset: auth.ResetMonthly})
	_, _, err = hold(1_750_000)
	wantKeyLimit(t, "Reserve(1.75 with 1.749999 left)", err, 1_749_999, 2_500_000)
	wantKey(t, b, r.ID, 250_000, 500_001)
	// A new period: spent 0, the 0.500001 held stays, 1.999999 left.
	roll(t, b, r.ID, "2026-11", true)
	wantKey(t, b, r.ID, 0, 500_001)
	_, _, err = hold(2_000_000)
	wantKeyLimit(t, "Reserve(2 with 1.999999 left)", err, 1_999_999, 2_500_000)
	if _, _, err := hold(1_999_999); err != nil {
		t.Fatalf("Reserve(1.999999 with 1.999999 left) = %v", err)
	}
	wantKey(t, b, r.ID, 0, 2_500_000)
}

// testFractionalUsage: chat usage of millionths of a credit adds up
// exactly in the usage sums, the account's balance and the key's spend.
func testFractionalUsage(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, credits.Credit)
	r := newKey(t, b, acct, auth.Controls{})
	day := credits.Day(time.Now())
	for i, inc := range []struct {
		model string
		cost  credits.Amount
	}{{"mini", 15}, {"mini", 15}, {"mini", 15}, {"big", 250_000}} {
		rec := credits.Record{ID: "chatcmpl-test-" + randomSuffix(t), Kind: credits.KindChat, Account: acct, Key: r.ID, ModelAsked: inc.model, Model: inc.model,
			Tokens: credits.Tokens{Prompt: 60, Completion: 40}, Cost: inc.cost, Status: credits.StatusCompleted, At: time.Now().UnixMilli()}
		if err := b.AddRecords(ctx, []credits.Record{rec})[0]; err != nil {
			t.Fatalf("AddRecords #%d = %v", i+1, err)
		}
	}
	wantUsage(t, b, acct, "", "", []credits.Usage{
		{Account: acct, Day: day, Model: "big", Requests: 1, PromptTokens: 60, CompletionTokens: 40, Credits: 250_000},
		{Account: acct, Day: day, Model: "mini", Requests: 3, PromptTokens: 180, CompletionTokens: 120, Credits: 45},
	})
	wantAccount(t, b, acct, 749_955, 0) // 1 - 0.250045
	wantKey(t, b, r.ID, 250_045, 0)
}

// testGrantPastMaximum: a grant that would take a balance past
// credits.MaxAmount (or below -MaxAmount) is refused with
// credits.ErrAmountRange, and the account and its ledger are unchanged;
// up to the maximum is fine.
func testGrantPastMaximum(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, credits.MaxAmount-credits.Credit)
	refused := func(what string, amount credits.Amount) {
		t.Helper()
		before, _ := b.Ledger(ctx, acct)
		if a, err := b.Grant(ctx, acct, amount, time.Now().Unix()); !errors.Is(err, credits.ErrAmountRange) {
			t.Errorf("Grant(%s) = %+v, %v; want an error matching ErrAmountRange", what, a, err)
		}
		if after, _ := b.Ledger(ctx, acct); len(after) != len(before) {
			t.Errorf("Grant(%s) refused, yet the ledger has %d entries, not %d", what, len(after), len(before))
		}
	}
	refused("1.000001 past 999999999999", credits.Credit+credits.Micro)
	refused("the maximum again", credits.MaxAmount)
	wantAccount(t, b, acct, credits.MaxAmount-credits.Credit, 0)
	if _, err := b.Grant(ctx, acct, credits.Credit, time.Now().Unix()); err != nil {
		t.Fatalf("Grant(up to the maximum) = %v", err)
	}
	wantAccount(t, b, acct, credits.MaxAmount, 0)
	refused("0.000001 past the maximum", credits.Micro)
	wantAccount(t, b, acct, credits.MaxAmount, 0)
	// Debits: down to -MaxAmount, not below.
	if _, err := b.Grant(ctx, acct, -credits.MaxAmount, time.Now().Unix()); err != nil {
		t.Fatalf("Grant(-MaxAmount) = %v", err)
	}
	if _, err := b.Grant(ctx, acct, -credits.MaxAmount, time.Now().Unix()); err != nil {
		t.Fatalf("Grant(-MaxAmount) down to -MaxAmount = %v", err)
	}
	refused("-0.000001 below -MaxAmount", -credits.Micro)
	wantAccount(t, b, acct, -credits.MaxAmount, 0)
	other := "acct-test-" + randomSuffix(t)
	if _, err := b.Grant(ctx, other, credits.MaxAmount+1, time.Now().Unix()); !errors.Is(err, credits.ErrAmountRange) {
		t.Errorf("Grant(a new account, past the maximum) = %v; want ErrAmountRange", err)
	}
	if _, err := b.Account(ctx, other); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Account(%q) after a refused grant = %v; want ErrAccountNotFound (nothing made)", other, err)
	}
}

// testUsagePastMaximum: a priced record that would take the usage sum or
// the key's spend past credits.MaxAmount is refused (ErrInvalidRecord and
// ErrAmountRange: no retry can write it), and nothing is written.
func testUsagePastMaximum(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, credits.MaxAmount)
	r := newKey(t, b, acct, auth.Controls{})
	now := time.Now()
	day := credits.Day(now)
	rec := credits.Record{ID: "max-" + randomSuffix(t), Kind: credits.KindChat, Account: acct, Key: r.ID, ModelAsked: "m", Model: "m",
		Cost: credits.MaxAmount, Status: credits.StatusCompleted, At: now.UnixMilli()}
	if err := b.AddRecords(ctx, []credits.Record{rec})[0]; err != nil {
		t.Fatalf("AddRecords(MaxAmount) = %v", err)
	}
	wantAccount(t, b, acct, 0, 0)
	past := rec
	past.ID, past.Cost = "past-"+randomSuffix(t), credits.Micro
	if err := b.AddRecords(ctx, []credits.Record{past})[0]; !errors.Is(err, credits.ErrAmountRange) || !errors.Is(err, credits.ErrInvalidRecord) {
		t.Errorf("AddRecords(0.000001 past the maximum) = %v; want ErrAmountRange and ErrInvalidRecord", err)
	}
	wantAccount(t, b, acct, 0, 0)
	wantKey(t, b, r.ID, credits.MaxAmount, 0)
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: day, Model: "m", Requests: 1, Credits: credits.MaxAmount}})
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l {
		if e.ID == credits.ChatEntryID(past.ID) {
			t.Errorf("Ledger(%q) has the refused record's entry %+v", acct, e)
		}
	}
	if _, err := b.Record(ctx, past.ID); !errors.Is(err, credits.ErrRecordNotFound) {
		t.Errorf("Record(%q) of a refused record = %v; want ErrRecordNotFound", past.ID, err)
	}
}
