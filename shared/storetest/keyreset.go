package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
)

// roll calls RollKeyPeriod and checks whether it rolled.
func roll(t *testing.T, b Backend, id, period string, want bool) {
	t.Helper()
	got, err := b.RollKeyPeriod(context.Background(), id, period)
	if err != nil || got != want {
		t.Fatalf("RollKeyPeriod(%s, %q) = %v, %v; want %v, nil", id, period, got, err, want)
	}
}

// wantPeriod checks the period a key's spend belongs to.
func wantPeriod(t *testing.T, b Backend, id, period string) {
	t.Helper()
	r, err := b.KeyByID(context.Background(), id)
	if err != nil || r.Period != period {
		t.Errorf("KeyByID(%s) = period %q, %v; want %q", id, r.Period, err, period)
	}
}

// testKeyReset: a key's credit_limit_reset is stored like its other
// controls; RollKeyPeriod sets spent to 0 and keeps held, so that a hold
// refused at the limit in the old period fits in the new one; rolling
// the same period again, or an older one, changes nothing; holds in
// progress settle into the period they settle in.
func testKeyReset(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	c := auth.Controls{CreditLimit: limit(10), CreditLimitReset: auth.ResetMonthly}
	r := newKey(t, b, acct, c)
	if got, err := b.KeyByHash(ctx, r.Hash); err != nil || !reflect.DeepEqual(got.Controls, c) {
		t.Errorf("KeyByHash = %+v, %v; want controls %+v", got, err, c)
	}
	wantPeriod(t, b, r.ID, "")
	// Spend 6 and hold 3 in November: 1 left, a hold of 2 is refused.
	res, id := reservation(t, acct, "image", "synthetic-image", 6, time.Now().Unix())
	res.Key = r.ID
	if err := b.Reserve(ctx, res); err != nil {
		t.Fatalf("Reserve(6 of limit 10) = %v", err)
	}
	settle(t, b, capture(res, id, 6, time.Now().Unix()))
	roll(t, b, r.ID, "2026-11", true) // a new key's first period: nothing spent before it counts
	wantKey(t, b, r.ID, 0, 0)
	wantPeriod(t, b, r.ID, "2026-11")
	if err := b.Reserve(ctx, res); err == nil {
		t.Fatal("Reserve(settled entry again) = nil")
	}
	res, id = reservation(t, acct, "image", "synthetic-image", 6, time.Now().Unix())
	res.Key = r.ID
	if err := b.Reserve(ctx, res); err != nil {
		t.Fatalf("Reserve(6 of limit 10) = %v", err)
	}
	settle(t, b, capture(res, id, 6, time.Now().Unix()))
	inFlight, inFlightID := reservation(t, acct, "speech", "synthetic-speech", 3, time.Now().Unix())
	inFlight.Key = r.ID
	if err := b.Reserve(ctx, inFlight); err != nil {
		t.Fatalf("Reserve(3 with 4 left) = %v", err)
	}
	over, _ := reservation(t, acct, "speech", "synthetic-speech", 2, time.Now().Unix())
	over.Key = r.ID
	wantKeyLimit(t, "Reserve(2 with 1 left)", b.Reserve(ctx, over), 1, 10)
	wantKey(t, b, r.ID, 6, 3)
	// December: spent is 0, the 3 held stay held, 7 are left.
	roll(t, b, r.ID, "2026-12", true)
	wantKey(t, b, r.ID, 0, 3)
	wantPeriod(t, b, r.ID, "2026-12")
	if err := b.Reserve(ctx, over); err != nil {
		t.Fatalf("Reserve(2 after the roll) = %v; want nil", err)
	}
	wantKey(t, b, r.ID, 0, 5)
	// Rolling December again (another process), or November (a process
	// whose clock is behind), changes nothing.
	roll(t, b, r.ID, "2026-12", false)
	roll(t, b, r.ID, "2026-11", false)
	roll(t, b, r.ID, "2026-11-30", false)
	wantKey(t, b, r.ID, 0, 5)
	wantPeriod(t, b, r.ID, "2026-12")
	// The November hold settles into December: 3 captured of 3.
	settle(t, b, capture(inFlight, inFlightID, 3, time.Now().Unix()))
	wantKey(t, b, r.ID, 3, 2)
	// Exactly the limit is left after the roll: 10 - 3 - 2 = 5 fit, 6 not.
	six, _ := reservation(t, acct, "speech", "synthetic-speech", 6, time.Now().Unix())
	six.Key = r.ID
	wantKeyLimit(t, "Reserve(6 with 5 left)", b.Reserve(ctx, six), 5, 10)
	five, _ := reservation(t, acct, "speech", "synthetic-speech", 5, time.Now().Unix())
	five.Key = r.ID
	if err := b.Reserve(ctx, five); err != nil {
		t.Fatalf("Reserve(5 with 5 left) = %v", err)
	}
	wantKey(t, b, r.ID, 3, 7)
	// A change of reset keeps the period and the spend; a shorter period
	// starting later rolls, one starting earlier does not.
	daily := auth.Controls{CreditLimit: limit(10), CreditLimitReset: auth.ResetDaily}
	if got, err := b.SetControls(ctx, r.ID, daily); err != nil || !reflect.DeepEqual(got.Controls, daily) || got.Spent != 3 || got.Period != "2026-12" {
		t.Errorf("SetControls(daily) = %+v, %v; want daily, spent 3, period 2026-12", got, err)
	}
	if got, err := b.KeyByHash(ctx, r.Hash); err != nil || got.CreditLimitReset != auth.ResetDaily {
		t.Errorf("KeyByHash after SetControls = %+v, %v; want reset daily", got, err)
	}
	roll(t, b, r.ID, "2026-12-01", false) // starts with 2026-12
	roll(t, b, r.ID, "2026-12-02", true)
	wantKey(t, b, r.ID, 0, 7)
	roll(t, b, r.ID, "2026-12", false)
	wantPeriod(t, b, r.ID, "2026-12-02")
	roll(t, b, r.ID, "2026-W49", false) // Monday 2026-11-30
	roll(t, b, r.ID, "2026-W50", true)
	wantPeriod(t, b, r.ID, "2026-W50")
	// No reset: the controls drop it, the period stays for the record.
	if got, err := b.SetControls(ctx, r.ID, auth.Controls{CreditLimit: limit(10)}); err != nil || got.CreditLimitReset != "" {
		t.Errorf("SetControls(no reset) = %+v, %v; want no reset", got, err)
	}
	if got, err := b.KeyByHash(ctx, r.Hash); err != nil || got.CreditLimitReset != "" {
		t.Errorf("KeyByHash after removing the reset = %+v, %v; want none", got, err)
	}
	if all, err := b.Keys(ctx, acct); err != nil || len(all) != 1 || all[0].Period != "2026-W50" || all[0].Held != 7 {
		t.Errorf("Keys(%q) = %+v, %v; want the key, period 2026-W50, held 7", acct, all, err)
	}
	// Errors: an unknown key, a period Period does not make, a reset
	// without a limit.
	if _, err := b.RollKeyPeriod(ctx, "key_0000000000000000", "2026-12"); !errors.Is(err, auth.ErrKeyNotFound) {
		t.Errorf("RollKeyPeriod(unknown key) = %v; want ErrKeyNotFound", err)
	}
	for _, bad := range []string{"", "2026-13", "December"} {
		if _, err := b.RollKeyPeriod(ctx, r.ID, bad); !errors.Is(err, auth.ErrBadPeriod) {
			t.Errorf("RollKeyPeriod(%q) = %v; want ErrBadPeriod", bad, err)
		}
	}
	if _, err := b.SetControls(ctx, r.ID, auth.Controls{CreditLimitReset: auth.ResetMonthly}); err == nil {
		t.Error("SetControls(reset without a limit) = nil; want an error")
	}
	// A key stored with a period (created by an operator in one) starts
	// there: rolling it again does nothing.
	k, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	r2 := auth.NewRecord(k, acct, time.Unix(time.Now().Unix(), 0))
	r2.Controls, r2.Period = c, "2026-12"
	if err := b.PutKey(ctx, r2); err != nil {
		t.Fatalf("PutKey(with a period) = %v", err)
	}
	wantPeriod(t, b, r2.ID, "2026-12")
	roll(t, b, r2.ID, "2026-12", false)
	roll(t, b, r2.ID, "2027-01", true)
}

// testKeyResetConcurrent: processes rolling a key to the same period at
// once roll it once.
func testKeyResetConcurrent(t *testing.T, b ReserveBackend) {
	const n = 8
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(10), CreditLimitReset: auth.ResetWeekly})
	var wg sync.WaitGroup
	rolled := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rolled[i], errs[i] = b.RollKeyPeriod(ctx, r.ID, "2026-W48")
		}()
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("RollKeyPeriod #%d = %v", i, errs[i])
		}
		if rolled[i] {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d parallel rolls to one period: %d rolled; want 1", n, count)
	}
	wantPeriod(t, b, r.ID, "2026-W48")
}
