package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// RunKeyLimits runs the contract of API key controls in a store: the
// controls are stored and replaced (SetControls) without touching the
// key's spend; a key's job holds, reservations and chat charges count in
// its Spent and Held in the same atomic step as in the account; a hold
// past the key's credit limit is refused with credits.ErrKeyLimit (a 402
// saying what is left) and nothing written, however many run in parallel
// (50 creates of 1 credit against a limit of 10 hold exactly 10); each
// settlement moves the key's held credits once, whoever settles; a
// credit limit reset's period rolls (RollKeyPeriod: testKeyReset). The
// same table runs on localstore and dynamostore. newBackend returns the
// backend for one subtest (it may return the same one every time).
func RunKeyLimits(t *testing.T, newBackend func(t *testing.T) ReserveBackend) {
	runAll(t, newBackend, []subtest[ReserveBackend]{
		{"Controls", testKeyControls},
		{"Jobs", testKeyLimitJobs},
		{"Concurrent", testKeyLimitConcurrent},
		{"Reservations", testKeyLimitReservations},
		{"Chat", testKeyLimitChat},
		{"Reset", testKeyReset},
		{"ResetConcurrent", testKeyResetConcurrent},
	})
}

// newKey stores a fresh key of acct with controls c and returns its record.
func newKey(t *testing.T, b Backend, acct string, c auth.Controls) auth.Record {
	t.Helper()
	k, err := auth.NewKey()
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	r := auth.NewRecord(k, acct, time.Unix(time.Now().Unix(), 0))
	r.Controls = c
	if err := b.PutKey(context.Background(), r); err != nil {
		t.Fatalf("PutKey(%+v) = %v; want nil", r, err)
	}
	return r
}

func limit(n credits.Amount) *credits.Amount { return &n }

// wantKey checks a key's spent and held credits.
func wantKey(t *testing.T, b Backend, id string, spent, held credits.Amount) {
	t.Helper()
	r, err := b.KeyByID(context.Background(), id)
	if err != nil {
		t.Fatalf("KeyByID(%q) = %v; want nil", id, err)
	}
	if r.Spent != spent || r.Held != held {
		t.Errorf("KeyByID(%q) = spent %s held %s; want %s %s", id, r.Spent, r.Held, spent, held)
	}
}

// wantKeyLimit checks that err is the key limit's 402 saying left of lim.
func wantKeyLimit(t *testing.T, what string, err error, left, lim credits.Amount) {
	t.Helper()
	e := apierr.As(err)
	if !errors.Is(err, credits.ErrKeyLimit) || e == nil || e.Kind != apierr.InsufficientQuota {
		t.Fatalf("%s = %v; want a 402 matching ErrKeyLimit", what, err)
	}
	if !strings.Contains(e.Message, "credit limit") || !strings.Contains(e.Message, left.String()+" left of "+lim.String()) {
		t.Errorf("%s message = %q; want it to say the key's limit: %s left of %s", what, e.Message, left, lim)
	}
}

func testKeyControls(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	c := auth.Controls{Name: "intern", Models: []string{"synthetic/*", "openai/gpt-4o-mini"}, ExpiresAt: 2_000_000_000, CreditLimit: limit(10),
		Jobs: auth.JobsOwn}
	r := newKey(t, b, acct, c)
	got, err := b.KeyByHash(ctx, r.Hash)
	if err != nil || !reflect.DeepEqual(got.Controls, c) {
		t.Errorf("KeyByHash = %+v, %v; want controls %+v", got, err, c)
	}
	got, err = b.KeyByID(ctx, r.ID)
	if err != nil || !reflect.DeepEqual(got.Controls, c) || got.Hash != r.Hash || got.Account != acct {
		t.Errorf("KeyByID = %+v, %v; want the key with controls %+v", got, err, c)
	}
	if _, err := b.KeyByID(ctx, "key_0000000000000000"); !errors.Is(err, auth.ErrKeyNotFound) {
		t.Errorf("KeyByID(unknown) = %v; want ErrKeyNotFound", err)
	}
	// Spend some, then change every control: the spend stays.
	j := newJob(t, acct, 4)
	j.Key = r.ID
	create(t, b, j)
	c2 := auth.Controls{Name: "renamed", CreditLimit: limit(3)}
	got, err = b.SetControls(ctx, r.ID, c2)
	if err != nil || !reflect.DeepEqual(got.Controls, c2) || got.Held != 4 {
		t.Errorf("SetControls(%+v) = %+v, %v; want those controls and held 4", c2, got, err)
	}
	if got, err := b.KeyByHash(ctx, r.Hash); err != nil || !reflect.DeepEqual(got.Controls, c2) {
		t.Errorf("KeyByHash after SetControls = %+v, %v; want controls %+v", got, err, c2)
	}
	// A limit below what is held refuses every new hold, saying 0 left.
	j2 := newJob(t, acct, 1)
	j2.Key = r.ID
	_, err = b.Create(ctx, j2, nil)
	wantKeyLimit(t, "Create(1 on a key holding 4 of limit 3)", err, 0, 3)
	wantAbsent(t, b, j2.ID)
	// No limit: it passes.
	if _, err := b.SetControls(ctx, r.ID, auth.Controls{}); err != nil {
		t.Fatalf("SetControls(none) = %v", err)
	}
	create(t, b, j2)
	wantKey(t, b, r.ID, 0, 5)
	wantAccount(t, b, acct, 100, 5)
	all, err := b.Keys(ctx, acct)
	if err != nil || len(all) != 1 || all[0].Held != 5 || all[0].Name != "" {
		t.Errorf("Keys(%q) = %+v, %v; want the one key holding 5, no name", acct, all, err)
	}
	if _, err := b.SetControls(ctx, "key_0000000000000000", c); !errors.Is(err, auth.ErrKeyNotFound) {
		t.Errorf("SetControls(unknown) = %v; want ErrKeyNotFound", err)
	}
	if _, err := b.SetControls(ctx, r.ID, auth.Controls{CreditLimit: limit(-1)}); err == nil {
		t.Errorf("SetControls(negative limit) = nil; want an error")
	}
}

func testKeyLimitJobs(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(10)})
	var made []*jobs.Job
	for range 3 {
		j := newJob(t, acct, 3)
		j.Key = r.ID
		made = append(made, create(t, b, j))
	}
	wantKey(t, b, r.ID, 0, 9)
	j := newJob(t, acct, 3)
	j.Key = r.ID
	_, err := b.Create(ctx, j, nil)
	wantKeyLimit(t, "Create(3 with 1 left)", err, 1, 10)
	wantAbsent(t, b, j.ID)
	wantAccount(t, b, acct, 100, 9)
	// Another key of the account, and a job with no key, are not limited.
	free := newKey(t, b, acct, auth.Controls{})
	j.Key = free.ID
	create(t, b, j)
	wantKey(t, b, free.ID, 0, 3)
	nokey := create(t, b, newJob(t, acct, 3))
	// Settle: a capture of 2 of a hold of 3, a release; each applied once.
	for range 2 {
		c := made[0].Change(jobs.Processing, time.Now().Unix())
		c.NewStatus, c.Hold, c.Price = string(jobs.Completed), 3, 2
		if err := credits.Apply(ctx, b, c); err != nil {
			t.Fatalf("Apply(completed) = %v", err)
		}
		f := made[1].Change(jobs.Processing, time.Now().Unix())
		f.NewStatus = string(jobs.Failed)
		if err := credits.Apply(ctx, b, f); err != nil {
			t.Fatalf("Apply(failed) = %v", err)
		}
	}
	wantKey(t, b, r.ID, 2, 3)
	wantAccount(t, b, acct, 98, 9) // 3 (made[2]) + 3 (free key) + 3 (no key)
	// 5 left now: a job of 5 fits, then nothing does.
	j5 := newJob(t, acct, 5)
	j5.Key = r.ID
	create(t, b, j5)
	j1 := newJob(t, acct, 1)
	j1.Key = r.ID
	_, err = b.Create(ctx, j1, nil)
	wantKeyLimit(t, "Create(1 with 0 left)", err, 0, 10)
	_ = nokey
}

// testKeyLimitConcurrent: 50 parallel creates of 1 credit on a key with a
// limit of 10 (the account has plenty): exactly 10 are held, and once all
// complete the key has spent exactly 10.
func testKeyLimitConcurrent(t *testing.T, b ReserveBackend) {
	const n, lim = 50, 10
	ctx := context.Background()
	acct := newAccount(t, b, 1000)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(lim)})
	var wg sync.WaitGroup
	errs := make([]error, n)
	made := make([]*jobs.Job, n)
	for i := range n {
		j := newJob(t, acct, 1)
		j.Key = r.ID
		made[i] = j
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Create(ctx, j, nil)
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			c := made[i].Change(jobs.Processing, time.Now().Unix())
			c.NewStatus = string(jobs.Completed)
			if err := credits.Apply(ctx, b, c); err != nil {
				t.Fatalf("Apply(completed %s) = %v", made[i].ID, err)
			}
		case errors.Is(err, credits.ErrKeyLimit):
			wantAbsent(t, b, made[i].ID)
		default:
			t.Errorf("Create #%d = %v; want nil or ErrKeyLimit", i, err)
		}
	}
	if ok != lim {
		t.Errorf("%d parallel creates of 1 credit on a key limited to %d: %d succeeded; want %d", n, lim, ok, lim)
	}
	wantKey(t, b, r.ID, lim, 0)
	wantAccount(t, b, acct, 1000-lim, 0)
}

func testKeyLimitReservations(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(10)})
	res, id := reservation(t, acct, "image", "synthetic-image", 6, time.Now().Unix())
	res.Key = r.ID
	if err := b.Reserve(ctx, res); err != nil {
		t.Fatalf("Reserve(6 of limit 10) = %v", err)
	}
	wantKey(t, b, r.ID, 0, 6)
	over, _ := reservation(t, acct, "speech", "synthetic-speech", 5, time.Now().Unix())
	over.Key = r.ID
	wantKeyLimit(t, "Reserve(5 with 4 left)", b.Reserve(ctx, over), 4, 10)
	wantAccount(t, b, acct, 100, 6)
	if open := openOf(t, b, acct, time.Now().Unix()+1); len(open) != 1 {
		t.Errorf("open reservations = %v; want only the first (the refused one wrote nothing)", open)
	}
	// The settlement takes the reservation's key, whether or not it names it.
	c := capture(res, id, 4, time.Now().Unix())
	settle(t, b, c)
	if err := b.Settle(ctx, c); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("Settle(again) = %v; want ErrAlreadySettled", err)
	}
	wantKey(t, b, r.ID, 4, 0)
	wantAccount(t, b, acct, 96, 0)
	// A reservation the reconciler releases frees the key's hold too.
	stale, _ := reservation(t, acct, "speech", "synthetic-speech", 6, time.Now().Unix()-credits.ReservationTTL-10)
	stale.Key = r.ID
	if err := b.Reserve(ctx, stale); err != nil {
		t.Fatalf("Reserve(6 of 6 left) = %v", err)
	}
	wantKey(t, b, r.ID, 4, 6)
	if ok, err := credits.ReleaseReservation(ctx, b, stale, time.Now().Unix()); err != nil || !ok {
		t.Fatalf("ReleaseReservation = %v, %v; want true, nil", ok, err)
	}
	wantKey(t, b, r.ID, 4, 0)
}

func testKeyLimitChat(t *testing.T, b ReserveBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	r := newKey(t, b, acct, auth.Controls{CreditLimit: limit(10)})
	rec := record{"openai/gpt-4o", credits.Day(time.Now()), 10, 5, 7}.of(t, acct)
	rec.Key = r.ID
	for range 2 { // the same record twice charges once
		add(t, b, rec)
	}
	wantKey(t, b, r.ID, 7, 0)
	// A chat charge is unconditional (the tokens are spent): past the
	// limit it still counts, and then every hold is refused.
	rec.ID = newRecordID(t)
	add(t, b, rec)
	wantKey(t, b, r.ID, 14, 0)
	wantAccount(t, b, acct, 86, 0)
	j := newJob(t, acct, 1)
	j.Key = r.ID
	_, err := b.Create(ctx, j, nil)
	wantKeyLimit(t, "Create(1 after chat spent 14 of 10)", err, 0, 10)
	rows, err := b.Usage(ctx, acct, "", "")
	if err != nil || len(rows) != 1 || rows[0].Credits != 14 {
		t.Errorf("Usage(%q) = %+v, %v; want one row of 14 credits", acct, rows, err)
	}
}
