package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// The job usage contract: Store.Settle counts a captured job in the job
// usage of its UTC day, type and model (the model that made the output:
// a fallback's when one served it), with the credits it was charged (not
// what it held), in the same atomic step as the charge, so that a job is
// counted exactly once however often it is settled (duplicate stream
// records, the reconciler), and a failed job is never counted. See
// credits.JobUsage.

// Two instants one second apart across a UTC midnight.
var (
	lateMar1  = time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC).Unix()
	earlyMar2 = time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC).Unix()
	midApr1   = time.Date(2025, 4, 1, 12, 0, 0, 0, time.UTC).Unix()
)

// jobOf creates (and so holds the price of) a queued job of typ and model
// on acct.
func jobOf(t *testing.T, b Backend, acct, typ, model string, price credits.Amount) *jobs.Job {
	t.Helper()
	j := newJob(t, acct, price)
	id, err := jobs.NewID(typ)
	if err != nil {
		t.Fatalf("NewID: %v", err)
	}
	j.ID, j.Type, j.Model = id, typ, model
	return create(t, b, j)
}

// ending is the change stream's record of j entering status to at at.
func ending(j *jobs.Job, to jobs.Status, at int64) credits.Change {
	return credits.Change{JobID: j.ID, Account: j.Account, JobType: j.Type, Model: j.Model,
		OldStatus: string(jobs.Processing), NewStatus: string(to), Price: j.Price, At: at}
}

func apply(t *testing.T, b Backend, c credits.Change) {
	t.Helper()
	if err := credits.Apply(context.Background(), b, c); err != nil {
		t.Fatalf("Apply(%+v) = %v; want nil", c, err)
	}
}

func wantJobUsage(t *testing.T, b UsageBackend, acct, from, to string, want []credits.JobUsage) {
	t.Helper()
	got, err := b.JobUsage(context.Background(), acct, from, to)
	if err != nil {
		t.Fatalf("JobUsage(%q, %q, %q) = %v; want nil", acct, from, to, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("JobUsage(%q, %q, %q) = %+v; want %+v", acct, from, to, got, want)
	}
}

// testJobUsageOnce delivers a stream of final changes three times, as a
// redelivering stream would: each completed job is counted once, under
// the UTC day of its end, its type and its model; failed jobs are not;
// chat usage is untouched.
func testJobUsageOnce(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 1000)
	sfx1 := jobOf(t, b, acct, jobs.TypeSFX, "test-sfx", 10)
	sfx2 := jobOf(t, b, acct, jobs.TypeSFX, "test-sfx", 15)
	late := jobOf(t, b, acct, jobs.TypeSFX, "test-sfx", 7)
	video := jobOf(t, b, acct, jobs.TypeVideo, "org#video/v1.5", 40) // '#', '/' and '.' in a model id
	music := jobOf(t, b, acct, jobs.TypeMusic, "test-music", 30)
	failed := jobOf(t, b, acct, jobs.TypeMusic, "test-music", 25)
	open := jobOf(t, b, acct, jobs.TypeMusic, "test-music", 5)
	stream := []credits.Change{
		{JobID: sfx1.ID, Account: acct, JobType: sfx1.Type, Model: sfx1.Model, OldStatus: "queued", NewStatus: "processing", Price: 10, At: lateMar1 - 9},
		ending(sfx1, jobs.Completed, lateMar1),
		ending(sfx2, jobs.Completed, lateMar1),
		ending(late, jobs.Completed, earlyMar2), // one second later: the next day
		ending(video, jobs.Completed, lateMar1),
		ending(music, jobs.Completed, midApr1),
		ending(failed, jobs.Failed, lateMar1),
		{JobID: failed.ID, Account: acct, JobType: failed.Type, Model: failed.Model, OldStatus: "queued", NewStatus: "failed", Price: 25, At: lateMar1},
	}
	for range 3 {
		for _, c := range stream {
			apply(t, b, c)
		}
	}
	wantAccount(t, b, acct, 1000-10-15-7-40-30, open.Price)
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{
		{Account: acct, Day: "2025-03-01", JobType: "sfx", Model: "test-sfx", Jobs: 2, Credits: 25},
		{Account: acct, Day: "2025-03-01", JobType: "video", Model: "org#video/v1.5", Jobs: 1, Credits: 40},
		{Account: acct, Day: "2025-03-02", JobType: "sfx", Model: "test-sfx", Jobs: 1, Credits: 7},
		{Account: acct, Day: "2025-04-01", JobType: "music", Model: "test-music", Jobs: 1, Credits: 30},
	})
	wantUsage(t, b, acct, "", "", nil)
	// The ledger entries carry the job's type and model.
	l, err := b.Ledger(context.Background(), acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	for _, e := range l {
		if e.Kind != credits.Grant && (e.JobType == "" || e.Model == "") {
			t.Errorf("Ledger(%q) entry %+v; want its job type and model", acct, e)
		}
	}
}

// testJobUsageRanges reads day ranges of the counters of two accounts.
func testJobUsageRanges(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct, other := newAccount(t, b, 1000), newAccount(t, b, 1000)
	for _, c := range []struct {
		acct, typ, model string
		at               int64
	}{
		{acct, jobs.TypeVideo, "v", lateMar1},
		{acct, jobs.TypeMusic, "m", lateMar1},
		{acct, jobs.TypeMusic, "m", earlyMar2},
		{acct, jobs.TypeSFX, "s", midApr1},
		{other, jobs.TypeSFX, "s", earlyMar2},
	} {
		apply(t, b, ending(jobOf(t, b, c.acct, c.typ, c.model, 3), jobs.Completed, c.at))
	}
	u := func(day, typ, model string) credits.JobUsage {
		return credits.JobUsage{Account: acct, Day: day, JobType: typ, Model: model, Jobs: 1, Credits: 3}
	}
	all := []credits.JobUsage{u("2025-03-01", "music", "m"), u("2025-03-01", "video", "v"), u("2025-03-02", "music", "m"), u("2025-04-01", "sfx", "s")}
	tests := []struct {
		from, to string
		want     []credits.JobUsage
	}{
		{"", "", all},
		{"2025-03-01", "2025-04-01", all},
		{"2025-03-01", "2025-03-01", all[:2]},
		{"2025-03-02", "", all[2:]},
		{"", "2025-03-02", all[:3]},
		{"2025-03-03", "2025-03-31", nil},
		{"2025-04-02", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.from+".."+tt.to, func(t *testing.T) {
			wantJobUsage(t, b, acct, tt.from, tt.to, tt.want)
		})
	}
	wantJobUsage(t, b, other, "", "", []credits.JobUsage{{Account: other, Day: "2025-03-02", JobType: "sfx", Model: "s", Jobs: 1, Credits: 3}})
	wantJobUsage(t, b, "acct-test-nobody-"+randomSuffix(t), "", "", nil)
	for _, r := range [][2]string{{"2025-03-02", "2025-03-01"}, {"2025-3-1", ""}, {"", "yesterday"}} {
		if got, err := b.JobUsage(ctx, acct, r[0], r[1]); err == nil {
			t.Errorf("JobUsage(%q, %q, %q) = %+v, nil; want an error", acct, r[0], r[1], got)
		}
	}
}

// testJobUsageConcurrent settles one completed job from 8 goroutines at
// once (the stream and the reconciler racing) and 12 other jobs of one
// model concurrently: the first counts once, the others sum exactly.
func testJobUsageConcurrent(t *testing.T, b UsageBackend) {
	const goroutines, others = 8, 12
	acct := newAccount(t, b, 1000)
	same := jobOf(t, b, acct, jobs.TypeSFX, "s", 9)
	var changes []credits.Change
	for range goroutines {
		changes = append(changes, ending(same, jobs.Completed, lateMar1))
	}
	var sum credits.Amount
	for i := range others {
		j := jobOf(t, b, acct, jobs.TypeSFX, "s", credits.Amount(i+1))
		sum += j.Price
		changes = append(changes, ending(j, jobs.Completed, lateMar1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(changes))
	for _, c := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- credits.Apply(context.Background(), b, c)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Apply = %v; want nil", err)
		}
	}
	wantAccount(t, b, acct, 1000-9-sum, 0)
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{{Account: acct, Day: "2025-03-01", JobType: "sfx", Model: "s", Jobs: others + 1, Credits: 9 + sum}})
}

// testJobUsageUnlabelled: a settlement without a job type and model (an
// entry of a stream record written before they were recorded) charges as
// before and counts nothing; one with only one of them is refused and
// writes nothing.
func testJobUsageUnlabelled(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	j := jobOf(t, b, acct, jobs.TypeSFX, "s", 10)
	old := ending(j, jobs.Completed, lateMar1)
	old.JobType, old.Model = "", ""
	apply(t, b, old)
	wantAccount(t, b, acct, 90, 0)
	wantJobUsage(t, b, acct, "", "", nil)

	half := jobOf(t, b, acct, jobs.TypeSFX, "s", 5)
	for _, e := range []credits.Entry{
		{ID: "job:" + half.ID, Account: acct, Kind: credits.Capture, Amount: 5, JobID: half.ID, JobType: "sfx", At: lateMar1},
		{ID: "job:" + half.ID, Account: acct, Kind: credits.Capture, Amount: 5, JobID: half.ID, Model: "s", At: lateMar1},
		{ID: "job:" + half.ID, Account: acct, Kind: credits.Capture, Amount: 5, JobID: half.ID, JobType: "sfx", Model: "s\x00", At: lateMar1},
	} {
		if err := b.Settle(ctx, e); err == nil || errors.Is(err, credits.ErrAlreadySettled) {
			t.Errorf("Settle(%+v) = %v; want an error", e, err)
		}
	}
	wantAccount(t, b, acct, 90, 5)
	wantJobUsage(t, b, acct, "", "", nil)
}

// testJobUsageReconcile: a completed job the stream settled and one it
// never did are each counted once however often jobs.Reconcile runs
// (and the stream redelivers), under the day the job ended; a failed job
// the reconciler releases is not counted.
func testJobUsageReconcile(t *testing.T, b UsageBackend) {
	var rs jobs.ReconcileStore = b
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	end := func(price credits.Amount, to jobs.Status, at int64) *jobs.Job {
		j := jobOf(t, b, acct, jobs.TypeSFX, "s", price)
		p := jobs.Patch{Updated: at}
		if to == jobs.Completed {
			if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{Updated: at}); err != nil {
				t.Fatal(err)
			}
			p.Output = &jobs.Output{Key: "k", ContentType: "audio/mpeg", Bytes: 1}
			j, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, p)
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		p.Error = &jobs.JobError{Code: "internal_error", Message: "x"}
		j, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Failed, p)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	streamed := end(10, jobs.Completed, lateMar1)
	end(20, jobs.Completed, earlyMar2) // its capture never happened
	end(30, jobs.Failed, earlyMar2)    // nor its release
	apply(t, b, ending(streamed, jobs.Completed, streamed.Updated))
	since, now := time.Now().Add(-time.Hour), time.Now().Add(time.Minute)
	for i := range 3 {
		if _, err := jobs.Reconcile(ctx, b, rs, since, 0, now); err != nil {
			t.Fatalf("Reconcile #%d = %v", i+1, err)
		}
		apply(t, b, ending(streamed, jobs.Completed, streamed.Updated))
	}
	wantAccount(t, b, acct, 70, 0)
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{
		{Account: acct, Day: "2025-03-01", JobType: "sfx", Model: "s", Jobs: 1, Credits: 10},
		{Account: acct, Day: "2025-03-02", JobType: "sfx", Model: "s", Jobs: 1, Credits: 20},
	})
}

// testJobUsageServedByFallback: jobs held at their lead's price and made
// by a cheaper fallback are charged the fallback's price and counted in
// its job usage with that amount, the rest of the hold released: one the
// stream settles (redelivered, and the reconciler run after it), one only
// the reconciler settles; a job that failed at its fallback is released
// and counted nowhere. The changes are those the stores report
// (jobs.Job.Change of the stored job).
func testJobUsageServedByFallback(t *testing.T, b UsageBackend) {
	var rs jobs.ReconcileStore = b
	ctx := context.Background()
	acct := newAccount(t, b, 300)
	cands := []jobs.Candidate{{Model: "lead-video", Price: 80}, {Model: "cheap-video", Price: 30}}
	// routed creates a video job held at the lead's price, moves it to the
	// fallback on its claim and ends it there at at: completed at the
	// fallback's price, or failed.
	routed := func(to jobs.Status, at int64) *jobs.Job {
		id, err := jobs.NewID(jobs.TypeVideo)
		if err != nil {
			t.Fatalf("NewID: %v", err)
		}
		j := create(t, b, &jobs.Job{ID: id, Account: acct, Type: jobs.TypeVideo, Model: "lead-video", Status: jobs.Queued,
			Input: jobs.Input{Prompt: "a fox", Duration: 8, Size: "1280x720"}, Price: 80, Hold: 80, Candidates: cands,
			Created: time.Now().Unix(), Updated: time.Now().Unix()})
		zero, one := 0, 1
		if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, IfRuns: &zero, Updated: at}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Transition(ctx, j.ID, jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1, IfRuns: &one, Updated: at}); err != nil {
			t.Fatal(err)
		}
		p := jobs.Patch{Updated: at}
		if to == jobs.Completed {
			charge := cands[1].Price
			p.Price, p.Output = &charge, &jobs.Output{Key: "k", ContentType: "video/mp4", Bytes: 1}
		} else {
			p.Error = &jobs.JobError{Code: jobs.CodeUpstream, Message: "x"}
		}
		done, err := b.Transition(ctx, j.ID, jobs.Processing, to, p)
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
	streamed := routed(jobs.Completed, lateMar1)
	routed(jobs.Completed, earlyMar2) // never streamed
	failed := routed(jobs.Failed, earlyMar2)
	wantAccount(t, b, acct, 300, 240)
	since, now := time.Now().Add(-time.Hour), time.Now().Add(time.Minute)
	for i := range 3 {
		apply(t, b, streamed.Change(jobs.Processing, streamed.Updated))
		if i > 0 {
			apply(t, b, failed.Change(jobs.Processing, failed.Updated))
		}
		if _, err := jobs.Reconcile(ctx, b, rs, since, 0, now); err != nil {
			t.Fatalf("Reconcile #%d = %v", i+1, err)
		}
	}
	wantAccount(t, b, acct, 300-30-30, 0)
	wantJobUsage(t, b, acct, "", "", []credits.JobUsage{
		{Account: acct, Day: "2025-03-01", JobType: "video", Model: "cheap-video", Jobs: 1, Credits: 30},
		{Account: acct, Day: "2025-03-02", JobType: "video", Model: "cheap-video", Jobs: 1, Credits: 30},
	})
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	kinds := map[string]int{}
	for _, e := range l {
		kinds[e.Kind]++
		switch e.Kind {
		case credits.Capture:
			if e.Amount != 30 || e.Hold != 80 || e.JobType != "video" || e.Model != "cheap-video" {
				t.Errorf("ledger entry %+v; want a capture of 30 of an 80 hold, labelled video cheap-video", e)
			}
		case credits.Release:
			if e.Amount != 80 || e.JobID != failed.ID {
				t.Errorf("ledger entry %+v; want the failed job's 80 released", e)
			}
		}
	}
	if kinds[credits.Capture] != 2 || kinds[credits.Release] != 1 {
		t.Errorf("ledger kinds = %v; want 2 captures and 1 release", kinds)
	}
}
