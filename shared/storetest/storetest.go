// Package storetest is the contract every store backend must meet: the
// embedded localstore and the DynamoDB adapter run the same Run. It checks
// the promises of jobs.Store, auth.Store and credits.Store that the service
// relies on: atomic holds without overdraft, idempotency keys, conditional
// transitions, status history, job listing (order, pages, filters),
// exactly-once settlement (a job charged its served model's price, the
// rest of its hold released), deleting a final job (jobs.DeleteStore) and
// key records.
//
// Every subtest uses fresh, randomly named accounts and fresh job ids, so
// one backend (one table, one file) can serve all of them.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Backend is a store implementing all three domain store interfaces,
// with what the service needs of both stores beside them: deleting a job
// (jobs.DeleteStore) and serving the reconciler (jobs.ReconcileStore).
type Backend interface {
	jobs.Store
	auth.Store
	credits.Store
	jobs.DeleteStore
	jobs.ReconcileStore
}

// Run runs the contract subtests; newBackend returns the backend for one
// subtest (it may return the same one every time).
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	runAll(t, newBackend, []subtest[Backend]{
		{"CreateGet", testCreateGet},
		{"Idempotency", testIdempotency},
		{"InsufficientCredits", testInsufficientCredits},
		{"UnknownAccount", testUnknownAccount},
		{"ConcurrentHolds", testConcurrentHolds},
		{"Transitions", testTransitions},
		{"TransitionMissingJob", testTransitionMissingJob},
		{"Runs", testRuns},
		{"SettleCapture", testSettleCapture},
		{"SettleRelease", testSettleRelease},
		{"SettleUnknownAccount", testSettleUnknownAccount},
		{"ApplyReplay", testApplyReplay},
		{"SettleServedPrice", testSettleServedPrice},
		{"ServedByFallback", testServedByFallback},
		{"Grant", testGrant},
		{"LedgerOrder", testLedgerOrder},
		{"Keys", testKeys},
		{"History", testHistory},
		{"ListOrder", testListOrder},
		{"ListConcurrentCreates", testListConcurrentCreates},
		{"ListFilters", testListFilters},
		{"ListOfKey", testListOfKey},
		{"ListBadCursor", testListBadCursor},
		{"ListAscending", testListAscending},
		{"Delete", testDelete},
		{"Reconcile", testReconcile},
		{"TouchKey", testTouchKey},
	})
}

// subtest is one named check of a contract on a backend of type B.
type subtest[B any] struct {
	name string
	fn   func(t *testing.T, b B)
}

// runAll runs each of tests as a subtest, on the backend newBackend
// returns for it.
func runAll[B any](t *testing.T, newBackend func(t *testing.T) B, tests []subtest[B]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newBackend(t))
		})
	}
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("rand: %v", err)
	}
	return hex.EncodeToString(b)
}

// newAccount grants balance to a fresh account and returns its id.
func newAccount(t *testing.T, b Backend, balance credits.Amount) string {
	t.Helper()
	id := "acct-test-" + randomSuffix(t)
	a, err := b.Grant(context.Background(), id, balance, time.Now().Unix())
	if err != nil {
		t.Fatalf("Grant(%q, %s) = %v; want nil", id, balance, err)
	}
	if a.Balance != balance || a.Available != balance || a.Held != 0 {
		t.Fatalf("Grant(%q, %s) = %+v; want balance = available = %s, held 0", id, balance, a, balance)
	}
	return id
}

// newJob returns an unsaved queued sfx job of price on account.
func newJob(t *testing.T, account string, price credits.Amount) *jobs.Job {
	t.Helper()
	id, err := jobs.NewID(jobs.TypeSFX)
	if err != nil {
		t.Fatalf("NewID: %v", err)
	}
	now := time.Now().Unix()
	return &jobs.Job{
		ID: id, Account: account, Type: jobs.TypeSFX, Model: "test-sfx", Status: jobs.Queued,
		Input: jobs.Input{Prompt: "rain on a tin roof", Duration: 5, Format: "mp3"},
		Price: price, Created: now, Updated: now,
	}
}

func create(t *testing.T, b Backend, j *jobs.Job) *jobs.Job {
	t.Helper()
	got, err := b.Create(context.Background(), j, nil)
	if err != nil {
		t.Fatalf("Create(%q) = %v; want nil", j.ID, err)
	}
	return got
}

// wantAccount checks an account's position.
func wantAccount(t *testing.T, b Backend, id string, balance, held credits.Amount) {
	t.Helper()
	a, err := b.Account(context.Background(), id)
	if err != nil {
		t.Fatalf("Account(%q) = %v; want nil", id, err)
	}
	if a.Balance != balance || a.Held != held || a.Available != balance-held {
		t.Errorf("Account(%q) = balance %s held %s available %s; want %s %s %s", id, a.Balance, a.Held, a.Available, balance, held, balance-held)
	}
}

func wantAbsent(t *testing.T, b Backend, id string) {
	t.Helper()
	if j, err := b.Get(context.Background(), id); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Get(%q) = %+v, %v; want ErrNotFound", id, j, err)
	}
}

func testCreateGet(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	j := newJob(t, acct, 30)
	got := create(t, b, j)
	if got.ID != j.ID || got.Status != jobs.Queued {
		t.Errorf("Create(%q) = %+v; want the job, queued", j.ID, got)
	}
	g, err := b.Get(ctx, j.ID)
	if err != nil {
		t.Fatalf("Get(%q) = %v; want nil", j.ID, err)
	}
	if g.ID != j.ID || g.Account != acct || g.Status != jobs.Queued || g.Price != 30 || g.Input != j.Input || g.Model != j.Model || g.Type != j.Type || g.Created != j.Created {
		t.Errorf("Get(%q) = %+v; want %+v", j.ID, g, j)
	}
	wantAccount(t, b, acct, 100, 30)
	wantAbsent(t, b, "job_sfx_doesnotexist0000000000")
}

func testIdempotency(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	now := time.Now().Unix()
	key := acct + "/retry-1"
	first := newJob(t, acct, 10)
	got, err := b.Create(ctx, first, &jobs.Idempotency{Key: key, BodyHash: "hash-a", JobID: first.ID, Expires: now + 3600})
	if err != nil || got.ID != first.ID {
		t.Fatalf("Create(%q, key) = %+v, %v; want the job", first.ID, got, err)
	}

	replay := newJob(t, acct, 10)
	got, err = b.Create(ctx, replay, &jobs.Idempotency{Key: key, BodyHash: "hash-a", JobID: replay.ID, Expires: now + 3600})
	if err != nil || got.ID != first.ID {
		t.Errorf("Create(replay, same key and body) = %+v, %v; want job %s", got, err, first.ID)
	}
	wantAbsent(t, b, replay.ID)

	other := newJob(t, acct, 10)
	got, err = b.Create(ctx, other, &jobs.Idempotency{Key: key, BodyHash: "hash-b", JobID: other.ID, Expires: now + 3600})
	if !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Errorf("Create(same key, other body) = %+v, %v; want ErrIdempotencyConflict", got, err)
	}
	wantAbsent(t, b, other.ID)
	wantAccount(t, b, acct, 100, 10)

	// An expired key may be used again, for any body.
	oldKey := acct + "/retry-2"
	old := newJob(t, acct, 10)
	if _, err := b.Create(ctx, old, &jobs.Idempotency{Key: oldKey, BodyHash: "hash-a", JobID: old.ID, Expires: now - 10}); err != nil {
		t.Fatalf("Create(%q, expired key) = %v; want nil", old.ID, err)
	}
	fresh := newJob(t, acct, 10)
	got, err = b.Create(ctx, fresh, &jobs.Idempotency{Key: oldKey, BodyHash: "hash-b", JobID: fresh.ID, Expires: now + 3600})
	if err != nil || got.ID != fresh.ID {
		t.Errorf("Create(reused expired key) = %+v, %v; want job %s", got, err, fresh.ID)
	}
	// And the renewed key now points at the new job.
	again := newJob(t, acct, 10)
	got, err = b.Create(ctx, again, &jobs.Idempotency{Key: oldKey, BodyHash: "hash-b", JobID: again.ID, Expires: now + 3600})
	if err != nil || got.ID != fresh.ID {
		t.Errorf("Create(replay of renewed key) = %+v, %v; want job %s", got, err, fresh.ID)
	}
	wantAccount(t, b, acct, 100, 30)
}

func testInsufficientCredits(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 25)
	create(t, b, newJob(t, acct, 20))
	key := acct + "/k"
	j := newJob(t, acct, 10)
	got, err := b.Create(ctx, j, &jobs.Idempotency{Key: key, BodyHash: "hash-a", JobID: j.ID, Expires: time.Now().Unix() + 3600})
	if !errors.Is(err, jobs.ErrInsufficientCredits) {
		t.Fatalf("Create(price 10, available 5) = %+v, %v; want ErrInsufficientCredits", got, err)
	}
	wantAbsent(t, b, j.ID)
	wantAccount(t, b, acct, 25, 20)
	// The idempotency key was not recorded: another body may use it.
	if _, err := b.Grant(ctx, acct, 100, time.Now().Unix()); err != nil {
		t.Fatalf("Grant: %v", err)
	}
	j2 := newJob(t, acct, 10)
	got, err = b.Create(ctx, j2, &jobs.Idempotency{Key: key, BodyHash: "hash-b", JobID: j2.ID, Expires: time.Now().Unix() + 3600})
	if err != nil || got.ID != j2.ID {
		t.Errorf("Create(key of a refused create, other body) = %+v, %v; want job %s", got, err, j2.ID)
	}
	wantAccount(t, b, acct, 125, 30)
}

func testUnknownAccount(t *testing.T, b Backend) {
	j := newJob(t, "acct-missing-"+randomSuffix(t), 10)
	got, err := b.Create(context.Background(), j, nil)
	if !errors.Is(err, jobs.ErrInsufficientCredits) {
		t.Errorf("Create(unknown account) = %+v, %v; want ErrInsufficientCredits", got, err)
	}
	wantAbsent(t, b, j.ID)
}

func testConcurrentHolds(t *testing.T, b Backend) {
	const n, price, balance = 40, 10, 100
	acct := newAccount(t, b, balance)
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]string, n)
	for i := range n {
		j := newJob(t, acct, price)
		ids[i] = j.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Create(context.Background(), j, nil)
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, jobs.ErrInsufficientCredits):
			wantAbsent(t, b, ids[i])
		default:
			t.Errorf("Create(%q) = %v; want nil or ErrInsufficientCredits", ids[i], err)
		}
	}
	if ok != balance/price {
		t.Errorf("%d concurrent creates of %d against %d: %d succeeded; want %d", n, price, balance, ok, balance/price)
	}
	wantAccount(t, b, acct, balance, balance)
}

func testTransitions(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10000)
	out := &jobs.Output{Key: "jobs/a/x-1.mp3", ContentType: "audio/mpeg", Bytes: 1234, Duration: 5}
	jerr := &jobs.JobError{Code: jobs.CodeUpstream, Message: "boom", Vendor: "Incorrect API key provided: el-UPST..."}
	tests := []struct {
		name     string
		setup    []jobs.Status // transitions applied first, from queued
		from, to jobs.Status
		patch    jobs.Patch
		ok       bool
	}{
		{"queued to processing", nil, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true}, true},
		{"queued to failed", nil, jobs.Queued, jobs.Failed, jobs.Patch{Error: jerr}, true},
		{"processing to processing", []jobs.Status{jobs.Processing}, jobs.Processing, jobs.Processing, jobs.Patch{IncAttempts: true}, true},
		{"processing to completed", []jobs.Status{jobs.Processing}, jobs.Processing, jobs.Completed, jobs.Patch{Output: out}, true},
		{"processing to failed", []jobs.Status{jobs.Processing}, jobs.Processing, jobs.Failed, jobs.Patch{Error: jerr}, true},
		{"queued to completed", nil, jobs.Queued, jobs.Completed, jobs.Patch{Output: out}, false},
		{"queued to queued", nil, jobs.Queued, jobs.Queued, jobs.Patch{}, false},
		{"processing to queued", []jobs.Status{jobs.Processing}, jobs.Processing, jobs.Queued, jobs.Patch{}, false},
		{"stale from: queued, is processing", []jobs.Status{jobs.Processing}, jobs.Queued, jobs.Failed, jobs.Patch{Error: jerr}, false},
		{"stale from: processing, is queued", nil, jobs.Processing, jobs.Completed, jobs.Patch{Output: out}, false},
		{"stale from: processing, is completed", []jobs.Status{jobs.Processing, jobs.Completed}, jobs.Processing, jobs.Failed, jobs.Patch{Error: jerr}, false},
		{"completed to failed", []jobs.Status{jobs.Processing, jobs.Completed}, jobs.Completed, jobs.Failed, jobs.Patch{Error: jerr}, false},
		{"completed to processing", []jobs.Status{jobs.Processing, jobs.Completed}, jobs.Completed, jobs.Processing, jobs.Patch{IncAttempts: true}, false},
		{"completed to completed", []jobs.Status{jobs.Processing, jobs.Completed}, jobs.Completed, jobs.Completed, jobs.Patch{Output: out}, false},
		{"failed to completed", []jobs.Status{jobs.Failed}, jobs.Failed, jobs.Completed, jobs.Patch{Output: out}, false},
		{"failed to processing", []jobs.Status{jobs.Failed}, jobs.Failed, jobs.Processing, jobs.Patch{IncAttempts: true}, false},
		{"failed to queued", []jobs.Status{jobs.Failed}, jobs.Failed, jobs.Queued, jobs.Patch{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := create(t, b, newJob(t, acct, 1))
			cur := jobs.Queued
			for _, s := range tt.setup {
				p := jobs.Patch{Updated: j.Created}
				if s == jobs.Processing {
					p.IncAttempts = true
				}
				if _, err := b.Transition(ctx, j.ID, cur, s, p); err != nil {
					t.Fatalf("setup Transition(%q, %s, %s) = %v; want nil", j.ID, cur, s, err)
				}
				cur = s
			}
			before, err := b.Get(ctx, j.ID)
			if err != nil {
				t.Fatalf("Get(%q) = %v", j.ID, err)
			}
			p := tt.patch
			p.Updated = before.Updated + 7
			got, err := b.Transition(ctx, j.ID, tt.from, tt.to, p)
			after, gerr := b.Get(ctx, j.ID)
			if gerr != nil {
				t.Fatalf("Get(%q) = %v", j.ID, gerr)
			}
			if !tt.ok {
				if !errors.Is(err, jobs.ErrConflict) {
					t.Errorf("Transition(%s -> %s) on a %s job = %+v, %v; want ErrConflict", tt.from, tt.to, cur, got, err)
				}
				if after.Status != before.Status || after.Attempts != before.Attempts || after.Updated != before.Updated {
					t.Errorf("after a refused transition Get(%q) = %+v; want unchanged %+v", j.ID, after, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("Transition(%s -> %s) = %v; want nil", tt.from, tt.to, err)
			}
			want := *before
			want.Status = tt.to
			want.Updated = p.Updated
			if p.IncAttempts {
				want.Attempts++
			}
			if p.Output != nil {
				want.Output = p.Output
			}
			if p.Error != nil {
				want.Error = p.Error
			}
			for _, g := range []*jobs.Job{got, after} {
				if g.Status != want.Status || g.Attempts != want.Attempts || g.Updated != want.Updated ||
					!equalOutput(g.Output, want.Output) || !equalError(g.Error, want.Error) || g.Price != want.Price || g.Account != want.Account {
					t.Errorf("Transition(%s -> %s) then Get = %+v; want %+v", tt.from, tt.to, g, want)
				}
			}
		})
	}
}

func equalOutput(a, b *jobs.Output) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func equalError(a, b *jobs.JobError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// testRuns checks the worker's run claims: IfRuns is a precondition that
// counts, and the long-running fields persist.
func testRuns(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10)
	j := create(t, b, newJob(t, acct, 1))
	zero, one := 0, 1
	h := &jobs.Handle{ID: "models/veo/operations/abc", StatusURL: "https://vendor.example/status/abc", Submitted: 123}
	got, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Started: 100, NextRun: 220, IfRuns: &zero})
	if err != nil || got.Runs != 1 || got.Started != 100 || got.NextRun != 220 || got.Attempts != 1 {
		t.Fatalf("first claim = %+v, %v; want runs 1, started 100, next run 220, attempts 1", got, err)
	}
	// A duplicate that read the job before the claim loses.
	if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Processing, jobs.Patch{IfRuns: &zero}); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("stale claim = %v; want ErrConflict", err)
	}
	got, err = b.Transition(ctx, j.ID, jobs.Processing, jobs.Processing, jobs.Patch{Handle: h, NextRun: 300, IfRuns: &one})
	if err != nil || got.Runs != 2 || got.Handle == nil || *got.Handle != *h || got.NextRun != 300 || got.Started != 100 {
		t.Fatalf("handle claim = %+v, %v; want runs 2 with the handle, next run 300", got, err)
	}
	g, err := b.Get(ctx, j.ID)
	if err != nil || g.Runs != 2 || g.Handle == nil || *g.Handle != *h || g.NextRun != 300 || g.Started != 100 || g.Attempts != 1 {
		t.Fatalf("Get = %+v, %v; want the stored runs, handle, next run, started", g, err)
	}
	if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{IfRuns: &one}); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("completion with stale runs = %v; want ErrConflict", err)
	}
}

func testTransitionMissingJob(t *testing.T, b Backend) {
	id := "job_sfx_missing" + randomSuffix(t)
	got, err := b.Transition(context.Background(), id, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true})
	if !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrConflict) {
		t.Errorf("Transition(missing job) = %+v, %v; want ErrNotFound or ErrConflict", got, err)
	}
	wantAbsent(t, b, id)
}

// settled creates a job of price on acct and settles it three times.
func settleThrice(t *testing.T, b Backend, acct string, price credits.Amount, kind string) {
	t.Helper()
	ctx := context.Background()
	j := create(t, b, newJob(t, acct, price))
	e := credits.Entry{ID: "job:" + j.ID, Account: acct, Kind: kind, Amount: price, JobID: j.ID, At: time.Now().Unix()}
	for i := range 3 {
		err := b.Settle(ctx, e)
		if i == 0 && err != nil {
			t.Fatalf("Settle(%s %q) = %v; want nil", kind, e.ID, err)
		}
		if i > 0 && !errors.Is(err, credits.ErrAlreadySettled) {
			t.Errorf("Settle(%s %q) again (%d) = %v; want ErrAlreadySettled", kind, e.ID, i, err)
		}
	}
}

func testSettleCapture(t *testing.T, b Backend) {
	acct := newAccount(t, b, 100)
	create(t, b, newJob(t, acct, 5)) // an unrelated hold stays
	settleThrice(t, b, acct, 30, credits.Capture)
	wantAccount(t, b, acct, 70, 5)
}

func testSettleRelease(t *testing.T, b Backend) {
	acct := newAccount(t, b, 100)
	create(t, b, newJob(t, acct, 5))
	settleThrice(t, b, acct, 30, credits.Release)
	wantAccount(t, b, acct, 100, 5)
}

func testSettleUnknownAccount(t *testing.T, b Backend) {
	acct := "acct-missing-" + randomSuffix(t)
	err := b.Settle(context.Background(), credits.Entry{ID: "job:job_sfx_" + randomSuffix(t), Account: acct, Kind: credits.Capture, Amount: 10, At: 1})
	if !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Settle(unknown account) = %v; want ErrAccountNotFound", err)
	}
	if _, err := b.Account(context.Background(), acct); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Account(%q) after Settle = %v; want ErrAccountNotFound", acct, err)
	}
}

// testApplyReplay drives credits.Apply with a change stream delivered three
// times, as a redelivering stream would.
func testApplyReplay(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	done := create(t, b, newJob(t, acct, 30))
	failed := create(t, b, newJob(t, acct, 20))
	open := create(t, b, newJob(t, acct, 10))
	stream := []credits.Change{
		{JobID: done.ID, Account: acct, OldStatus: "queued", NewStatus: "processing", Price: 30, At: 1},
		{JobID: done.ID, Account: acct, OldStatus: "processing", NewStatus: "completed", Price: 30, At: 2},
		{JobID: failed.ID, Account: acct, OldStatus: "queued", NewStatus: "failed", Price: 20, At: 3},
		{JobID: open.ID, Account: acct, OldStatus: "queued", NewStatus: "processing", Price: 10, At: 4},
	}
	for round := range 3 {
		for _, c := range stream {
			if err := credits.Apply(ctx, b, c); err != nil {
				t.Fatalf("Apply(%+v) in round %d = %v; want nil", c, round, err)
			}
		}
	}
	wantAccount(t, b, acct, 70, 10)
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	if len(l) != 3 { // the grant, one capture, one release
		t.Errorf("Ledger(%q) has %d entries; want 3: %+v", acct, len(l), l)
	}
}

func testGrant(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := "acct-test-" + randomSuffix(t)
	if a, err := b.Account(ctx, acct); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Fatalf("Account(%q) = %+v, %v; want ErrAccountNotFound", acct, a, err)
	}
	for i, want := range []credits.Amount{50, 75} {
		a, err := b.Grant(ctx, acct, []credits.Amount{50, 25}[i], time.Now().Unix())
		if err != nil {
			t.Fatalf("Grant(%q) = %v; want nil", acct, err)
		}
		if a.ID != acct || a.Balance != want || a.Available != want || a.Held != 0 {
			t.Errorf("Grant(%q) #%d = %+v; want balance = available = %s", acct, i+1, a, want)
		}
	}
	create(t, b, newJob(t, acct, 40))
	a, err := b.Grant(ctx, acct, 5, time.Now().Unix())
	if err != nil || a.Balance != 80 || a.Held != 40 || a.Available != 40 {
		t.Errorf("Grant with a hold = %+v, %v; want balance 80 held 40 available 40", a, err)
	}
	wantAccount(t, b, acct, 80, 40)
}

func testLedgerOrder(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := "acct-test-" + randomSuffix(t)
	if _, err := b.Grant(ctx, acct, 100, 1000); err != nil {
		t.Fatalf("Grant: %v", err)
	}
	if _, err := b.Grant(ctx, acct, 20, 1001); err != nil {
		t.Fatalf("Grant: %v", err)
	}
	j1 := create(t, b, newJob(t, acct, 30))
	j2 := create(t, b, newJob(t, acct, 15))
	for i, e := range []credits.Entry{
		{ID: "job:" + j1.ID, Account: acct, Kind: credits.Capture, Amount: 30, JobID: j1.ID, At: 1002},
		{ID: "job:" + j2.ID, Account: acct, Kind: credits.Release, Amount: 15, JobID: j2.ID, At: 1003},
	} {
		if err := b.Settle(ctx, e); err != nil {
			t.Fatalf("Settle #%d = %v", i, err)
		}
	}
	other := newAccount(t, b, 7) // another account's entries stay apart
	got, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	want := []struct {
		kind   string
		amount credits.Amount
		job    string
	}{{credits.Grant, 100, ""}, {credits.Grant, 20, ""}, {credits.Capture, 30, j1.ID}, {credits.Release, 15, j2.ID}}
	if len(got) != len(want) {
		t.Fatalf("Ledger(%q) = %+v; want %d entries", acct, got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Amount != w.amount || g.JobID != w.job || g.Account != acct || g.ID == "" {
			t.Errorf("Ledger(%q)[%d] = %+v; want %s %s job %q", acct, i, g, w.kind, w.amount, w.job)
		}
	}
	if l, err := b.Ledger(ctx, other); err != nil || len(l) != 1 || l[0].Amount != 7 {
		t.Errorf("Ledger(%q) = %+v, %v; want one grant of 7", other, l, err)
	}
	wantAccount(t, b, acct, 90, 0)
}

func testKeys(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := "acct-test-" + randomSuffix(t)
	other := "acct-test-" + randomSuffix(t)
	now := time.Unix(time.Now().Unix(), 0)
	var recs []auth.Record
	for i, owner := range []string{acct, acct, other} {
		k, err := auth.NewKey()
		if err != nil {
			t.Fatalf("NewKey: %v", err)
		}
		r := auth.NewRecord(k, owner, now.Add(time.Duration(i)*time.Second))
		if err := b.PutKey(ctx, r); err != nil {
			t.Fatalf("PutKey(%q) = %v; want nil", r.ID, err)
		}
		recs = append(recs, r)
		got, err := b.KeyByHash(ctx, auth.Hash(k))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("KeyByHash(%q) = %+v, %v; want %+v", r.ID, got, err, r)
		}
	}
	if got, err := b.KeyByHash(ctx, auth.Hash("sk_live_nosuchkey")); !errors.Is(err, auth.ErrKeyNotFound) {
		t.Errorf("KeyByHash(unknown) = %+v, %v; want ErrKeyNotFound", got, err)
	}

	mine, err := b.Keys(ctx, acct)
	if err != nil {
		t.Fatalf("Keys(%q) = %v", acct, err)
	}
	if len(mine) != 2 || !hasKey(mine, recs[0].ID) || !hasKey(mine, recs[1].ID) {
		t.Errorf("Keys(%q) = %+v; want the 2 keys %s, %s", acct, mine, recs[0].ID, recs[1].ID)
	}
	all, err := b.Keys(ctx, "")
	if err != nil {
		t.Fatalf(`Keys("") = %v`, err)
	}
	for _, r := range recs {
		if !hasKey(all, r.ID) {
			t.Errorf(`Keys("") lacks %s`, r.ID)
		}
	}

	at := now.Add(time.Hour)
	got, err := b.RevokeKey(ctx, recs[0].ID, at)
	if err != nil || got.ID != recs[0].ID || got.Revoked != at.Unix() {
		t.Errorf("RevokeKey(%q) = %+v, %v; want revoked at %d", recs[0].ID, got, err, at.Unix())
	}
	if g, err := b.KeyByHash(ctx, recs[0].Hash); err != nil || g.Revoked != at.Unix() {
		t.Errorf("KeyByHash(revoked) = %+v, %v; want revoked at %d", g, err, at.Unix())
	}
	if g, err := b.KeyByHash(ctx, recs[1].Hash); err != nil || g.Revoked != 0 {
		t.Errorf("KeyByHash(other key) = %+v, %v; want live", g, err)
	}
	if _, err := b.RevokeKey(ctx, "key_0000000000000000", at); !errors.Is(err, auth.ErrKeyNotFound) {
		t.Errorf("RevokeKey(unknown) = %v; want ErrKeyNotFound", err)
	}
}

func hasKey(rs []auth.Record, id string) bool {
	for _, r := range rs {
		if r.ID == id {
			return true
		}
	}
	return false
}

// testSettleServedPrice: a capture below the hold (a job served by a
// cheaper fallback) charges its amount and releases the rest, exactly
// once; an entry charging more than its hold is refused and changes
// nothing.
func testSettleServedPrice(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	create(t, b, newJob(t, acct, 5)) // an unrelated hold stays
	j := create(t, b, newJob(t, acct, 50))
	bad := credits.Entry{ID: "job:" + j.ID, Account: acct, Kind: credits.Capture, Amount: 60, Hold: 50, JobID: j.ID, At: 1}
	if err := b.Settle(ctx, bad); err == nil {
		t.Errorf("Settle(capture 60 of a 50 hold) = nil; want an error")
	}
	wantAccount(t, b, acct, 100, 55)
	e := credits.Entry{ID: "job:" + j.ID, Account: acct, Kind: credits.Capture, Amount: 20, Hold: 50, JobID: j.ID, At: 2}
	for i := range 3 {
		err := b.Settle(ctx, e)
		if (i == 0 && err != nil) || (i > 0 && !errors.Is(err, credits.ErrAlreadySettled)) {
			t.Fatalf("Settle #%d = %v", i+1, err)
		}
	}
	wantAccount(t, b, acct, 80, 5)
	l, err := b.Ledger(ctx, acct)
	if err != nil || len(l) != 2 || l[1].Kind != credits.Capture || l[1].Amount != 20 || l[1].Hold != 50 {
		t.Errorf("Ledger = %+v, %v; want the grant, then a capture of 20 of a 50 hold", l, err)
	}
}

// testServedByFallback: the fields of a job routed to a fallback persist
// (its candidates and hold at create; the move, on a claim; its charge,
// in the write that completes it), and its change settles at the charge,
// the rest of the hold released, however often it is applied. A failed
// job's whole hold is released.
func testServedByFallback(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	cands := []jobs.Candidate{{Model: "lead-sfx", Price: 50}, {Model: "cheap-sfx", Price: 20}}
	j := newJob(t, acct, 50)
	j.Model, j.Hold, j.Candidates = "lead-sfx", 50, cands
	create(t, b, j)
	g, err := b.Get(ctx, j.ID)
	if err != nil || g.Hold != 50 || g.Price != 50 || len(g.Candidates) != 2 || g.Candidates[1] != cands[1] || g.Candidate != 0 {
		t.Fatalf("Get after Create = %+v, %v; want hold = price = 50 and the candidates, at 0", g, err)
	}
	wantAccount(t, b, acct, 100, 50)
	zero, one := 0, 1
	if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, IfRuns: &zero, NextRun: 10}); err != nil {
		t.Fatal(err)
	}
	// A stale claim cannot move the job; the live one does.
	if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1, IfRuns: &zero, NextRun: 11}); !errors.Is(err, jobs.ErrConflict) {
		t.Errorf("move on a stale claim = %v; want ErrConflict", err)
	}
	got, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1, IfRuns: &one, NextRun: 12})
	if err != nil || got.Candidate != 1 || got.AttemptsBefore != 1 || got.Current() != cands[1] {
		t.Fatalf("move = %+v, %v; want at candidate 1 (attempts before 1)", got, err)
	}
	charge := credits.Amount(20)
	done, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Updated: j.Created + 1,
		Output: &jobs.Output{Key: "k", ContentType: "audio/mpeg", Bytes: 1}})
	if err != nil || done.Price != 20 || done.Hold != 50 || done.ServedBy() != "cheap-sfx" {
		t.Fatalf("complete = %+v, %v; want price 20, hold 50, served by cheap-sfx", done, err)
	}
	if g, err := b.Get(ctx, j.ID); err != nil || g.Price != 20 || g.Hold != 50 || g.Candidate != 1 || g.ServedBy() != "cheap-sfx" {
		t.Errorf("Get after completion = %+v, %v; want price 20, hold 50, candidate 1", g, err)
	}
	failed := newJob(t, acct, 30)
	failed.Hold, failed.Candidates = 30, []jobs.Candidate{{Model: "test-sfx", Price: 30}, {Model: "cheap-sfx", Price: 12}}
	create(t, b, failed)
	if _, err := b.Transition(ctx, failed.ID, jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: jobs.CodeUpstream, Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	failedJob, err := b.Get(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAccount(t, b, acct, 100, 80)
	// The changes as the stream or feed reports them (price, hold and the
	// model that made the output, as stored), delivered three times.
	completion, failure := done.Change(jobs.Processing, 3), failedJob.Change(jobs.Queued, 4)
	if completion.Model != "cheap-sfx" || completion.Price != 20 || completion.Hold != 50 || failure.Model != "test-sfx" || failure.Held() != 30 {
		t.Errorf("changes = %+v, %+v; want the completion at cheap-sfx's 20 of a 50 hold, the failure of test-sfx's 30", completion, failure)
	}
	for range 3 {
		for _, c := range []credits.Change{completion, failure} {
			if err := credits.Apply(ctx, b, c); err != nil {
				t.Fatalf("Apply(%+v) = %v", c, err)
			}
		}
	}
	wantAccount(t, b, acct, 80, 0)
}
