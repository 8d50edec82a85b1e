package localstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// feedRun runs s.Feed with apply until want changes were applied
// successfully (or the deadline), then stops it and returns every call's
// change (successful or not), in order.
func feedRun(t *testing.T, s *Store, want int, apply func(c credits.Change) error) []credits.Change {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan credits.Change, 1000)
	ok := make(chan struct{}, 1000)
	done := make(chan error, 1)
	go func() {
		done <- s.Feed(ctx, func(ctx context.Context, c credits.Change) error {
			calls <- c
			if err := apply(c); err != nil {
				return err
			}
			ok <- struct{}{}
			return nil
		})
	}()
	deadline := time.After(30 * time.Second)
	for got := 0; got < want; got++ {
		select {
		case <-ok:
		case <-deadline:
			t.Fatalf("feed applied %d of %d changes before the deadline", got, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Feed() = %v; want nil after cancel", err)
	}
	close(calls)
	var out []credits.Change
	for c := range calls {
		out = append(out, c)
	}
	return out
}

func describe(cs []credits.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.JobID[len(c.JobID)-1:] + ":" + c.OldStatus + ">" + c.NewStatus
	}
	return out
}

// runJob creates job_sfx_<20 x id> and moves it along path.
func runJob(t *testing.T, s *Store, id string, path ...jobs.Status) {
	t.Helper()
	ctx := context.Background()
	jid := "job_sfx_" + fmt.Sprintf("%020s", id)
	if _, err := s.Create(ctx, &jobs.Job{ID: jid, Account: "acct", Price: 10}, nil); err != nil {
		t.Fatalf("Create(%s) = %v", jid, err)
	}
	cur := jobs.Queued
	for _, st := range path {
		if _, err := s.Transition(ctx, jid, cur, st, jobs.Patch{IncAttempts: st == jobs.Processing, Updated: 100}); err != nil {
			t.Fatalf("Transition(%s, %s, %s) = %v", jid, cur, st, err)
		}
		cur = st
	}
}

func newFeedStore(t *testing.T, path string) *Store {
	t.Helper()
	s := openAt(t, path)
	if _, err := s.Grant(context.Background(), "acct", 1000, 1); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFeedOrder(t *testing.T) {
	s := newFeedStore(t, filepath.Join(t.TempDir(), "f.db"))
	runJob(t, s, "a", jobs.Processing, jobs.Processing, jobs.Completed) // processing->processing is no change
	runJob(t, s, "b", jobs.Failed)
	runJob(t, s, "c", jobs.Processing)
	got := feedRun(t, s, 4, func(credits.Change) error { return nil })
	want := []string{"a:queued>processing", "a:processing>completed", "b:queued>failed", "c:queued>processing"}
	if fmt.Sprint(describe(got)) != fmt.Sprint(want) {
		t.Errorf("Feed delivered %v; want %v", describe(got), want)
	}
	if c := got[1]; c.Account != "acct" || c.Price != 10 || c.At != 100 {
		t.Errorf("Feed change = %+v; want account acct, price 10, at 100", c)
	}
	if p, err := s.pendingChanges(10); err != nil || len(p) != 0 {
		t.Errorf("pendingChanges after feed = %v, %v; want none", p, err)
	}
}

// TestFeedChargeAndHold: a job completed by a cheaper fallback is in the
// feed with its charge (the price its completion wrote), its hold and the
// fallback's model (its job usage is counted under it).
func TestFeedChargeAndHold(t *testing.T) {
	ctx := context.Background()
	s := newFeedStore(t, filepath.Join(t.TempDir(), "f.db"))
	id := "job_sfx_" + fmt.Sprintf("%020s", "h")
	if _, err := s.Create(ctx, &jobs.Job{ID: id, Account: "acct", Type: jobs.TypeSFX, Model: "a", Price: 30, Hold: 30,
		Candidates: []jobs.Candidate{{Model: "a", Price: 30}, {Model: "b", Price: 8}}}, nil); err != nil {
		t.Fatal(err)
	}
	one, charge := 1, credits.Amount(8)
	for _, step := range []struct {
		from, to jobs.Status
		p        jobs.Patch
	}{
		{jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true}},
		{jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1}},
		{jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Updated: 100}},
	} {
		if _, err := s.Transition(ctx, id, step.from, step.to, step.p); err != nil {
			t.Fatal(err)
		}
	}
	got := feedRun(t, s, 2, func(credits.Change) error { return nil })
	if len(got) != 2 || got[1].NewStatus != "completed" || got[1].Price != 8 || got[1].Hold != 30 || got[1].JobType != "sfx" || got[1].Model != "b" {
		t.Errorf("Feed = %+v; want the completion with price 8 and hold 30, labelled sfx and b (the model that served it)", got)
	}
	if got[0].Model != "a" {
		t.Errorf("Feed = %+v; want the start labelled a (the model asked for)", got)
	}
}

func TestFeedRetriesFailedApply(t *testing.T) {
	s := newFeedStore(t, filepath.Join(t.TempDir(), "f.db"))
	runJob(t, s, "a", jobs.Failed)
	runJob(t, s, "b", jobs.Failed)
	runJob(t, s, "c", jobs.Failed)
	failures := 2
	got := feedRun(t, s, 3, func(c credits.Change) error {
		if c.JobID[len(c.JobID)-1] == 'b' && failures > 0 {
			failures--
			return errors.New("store unavailable")
		}
		return nil
	})
	want := []string{"a:queued>failed", "b:queued>failed", "b:queued>failed", "b:queued>failed", "c:queued>failed"}
	if fmt.Sprint(describe(got)) != fmt.Sprint(want) {
		t.Errorf("Feed delivered %v; want %v", describe(got), want)
	}
}

// TestFeedCursorPersists checks at-least-once across a restart: what was
// applied is not delivered again, what was not is.
func TestFeedCursorPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	s := newFeedStore(t, path)
	runJob(t, s, "a", jobs.Failed)
	runJob(t, s, "b", jobs.Failed)
	// b's apply never succeeds in this run: the "crash" comes first.
	feedRun(t, s, 1, func(c credits.Change) error {
		if c.JobID[len(c.JobID)-1] == 'b' {
			return errors.New("crash before ack")
		}
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	runJob(t, s, "c", jobs.Failed)
	got := feedRun(t, s, 2, func(credits.Change) error { return nil })
	want := []string{"b:queued>failed", "c:queued>failed"}
	if fmt.Sprint(describe(got)) != fmt.Sprint(want) {
		t.Errorf("Feed after reopen delivered %v; want %v", describe(got), want)
	}
}

// TestFeedSettlesCredits drives credits.Apply from the feed, the way
// `genway serve` does.
func TestFeedSettlesCredits(t *testing.T) {
	ctx := context.Background()
	s := newFeedStore(t, filepath.Join(t.TempDir(), "f.db"))
	runJob(t, s, "a", jobs.Processing, jobs.Completed)
	runJob(t, s, "b", jobs.Processing, jobs.Failed)
	runJob(t, s, "c", jobs.Processing)
	feedRun(t, s, 5, func(c credits.Change) error { return credits.Apply(ctx, s, c) })
	a, err := s.Account(ctx, "acct")
	if err != nil || a.Balance != 990 || a.Held != 10 || a.Available != 980 {
		t.Errorf("Account after feed = %+v, %v; want balance 990 held 10 available 980", a, err)
	}
}
