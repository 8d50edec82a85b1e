package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// The delete contract: jobs.DeleteStore, which every backend implements.

// deleter returns b's jobs.DeleteStore.
func deleter(t *testing.T, b Backend) jobs.DeleteStore {
	t.Helper()
	return b
}

// end moves j through processing to status (completed with an output,
// or failed) at j.Created+1.
func end(t *testing.T, b Backend, j *jobs.Job, status jobs.Status) *jobs.Job {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: j.Created + 1}); err != nil {
		t.Fatalf("Transition(%s, queued -> processing) = %v", j.ID, err)
	}
	p := jobs.Patch{Updated: j.Created + 1, Output: &jobs.Output{Key: "videos/" + j.ID + ".mp4", ContentType: "video/mp4", Bytes: 9, Duration: 4}}
	if status == jobs.Failed {
		p = jobs.Patch{Updated: j.Created + 1, Error: &jobs.JobError{Code: jobs.CodeUpstream, Message: "boom"}}
	}
	got, err := b.Transition(ctx, j.ID, jobs.Processing, status, p)
	if err != nil {
		t.Fatalf("Transition(%s, processing -> %s) = %v", j.ID, status, err)
	}
	return got
}

func testDelete(t *testing.T, b Backend) {
	ctx := context.Background()
	d := deleter(t, b)
	acct := newAccount(t, b, 100)
	base := baseTime(t)
	var js []*jobs.Job
	for i := range 5 {
		j := jobAt(t, acct, jobs.TypeVideo, "test-video", base+int64(i))
		j.Price = 10
		js = append(js, create(t, b, j))
	}
	wantAccount(t, b, acct, 100, 50)

	// Not final: refused, nothing written.
	if _, err := d.Delete(ctx, js[0].ID, base+100); !errors.Is(err, jobs.ErrConflict) {
		t.Errorf("Delete(queued %s) = %v; want ErrConflict", js[0].ID, err)
	}
	if _, err := b.Transition(ctx, js[1].ID, jobs.Queued, jobs.Processing, jobs.Patch{Updated: base + 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Delete(ctx, js[1].ID, base+100); !errors.Is(err, jobs.ErrConflict) {
		t.Errorf("Delete(processing %s) = %v; want ErrConflict", js[1].ID, err)
	}
	for _, j := range js[:2] {
		if g, err := b.Get(ctx, j.ID); err != nil || g.Deleted != 0 {
			t.Errorf("Get(%s) after a refused Delete = %+v, %v; want it not deleted", j.ID, g, err)
		}
	}

	// Final: deleted, the rest of the job as it was.
	done := end(t, b, js[2], jobs.Completed)
	failed := end(t, b, js[3], jobs.Failed)
	for _, j := range []*jobs.Job{done, failed} {
		got, err := d.Delete(ctx, j.ID, base+100)
		if err != nil {
			t.Fatalf("Delete(%s %s) = %v", j.Status, j.ID, err)
		}
		g, err := b.Get(ctx, j.ID)
		if err != nil {
			t.Fatalf("Get(deleted %s) = %v; want the record", j.ID, err)
		}
		for _, x := range []*jobs.Job{got, g} {
			if x.Deleted != base+100 || x.Status != j.Status || x.Price != j.Price || x.Updated != j.Updated ||
				!equalOutput(x.Output, j.Output) || !equalError(x.Error, j.Error) || !slices.Equal(x.History, j.History) {
				t.Errorf("deleted job = %+v; want %+v with Deleted %d", x, j, base+100)
			}
		}
		if _, err := d.Delete(ctx, j.ID, base+101); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Delete(%s) again = %v; want ErrNotFound", j.ID, err)
		}
		if _, err := b.Transition(ctx, j.ID, j.Status, jobs.Failed, jobs.Patch{}); !errors.Is(err, jobs.ErrConflict) {
			t.Errorf("Transition(deleted %s) = %v; want ErrConflict", j.ID, err)
		}
	}
	if _, err := d.Delete(ctx, "job_video_"+randomSuffix(t)+"00000000", base); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Delete(unknown id) = %v; want ErrNotFound", err)
	}
	// Delete touches no credits; the final changes settle as ever, once.
	wantAccount(t, b, acct, 100, 50)
	for _, j := range []*jobs.Job{done, failed} {
		for range 2 {
			if err := credits.Apply(ctx, b, j.Change(jobs.Processing, j.Updated)); err != nil {
				t.Fatalf("Apply(%s) = %v", j.ID, err)
			}
		}
	}
	wantAccount(t, b, acct, 90, 30)

	// Listed nowhere, in either order; a cursor at a deleted job still
	// places the next page.
	left := []*jobs.Job{js[0], js[1], js[4]}
	for _, asc := range []bool{false, true} {
		want := newestFirst(left)
		if asc {
			slices.Reverse(want)
		}
		for _, limit := range []int{1, 100} {
			q := jobs.ListQuery{Account: acct, Limit: limit, Ascending: asc}
			if got := listAll(t, b, q, nil); !slices.Equal(got, want) {
				t.Errorf("List(%+v) = %v; want %v (the deleted jobs left out)", q, got, want)
			}
			q = jobs.ListQuery{Since: base, Until: base + 4, Type: jobs.TypeVideo, Limit: limit, Ascending: asc}
			if got := listAll(t, b, q, nil); !slices.Equal(got, want) {
				t.Errorf("List(every account, %+v) = %v; want %v", q, got, want)
			}
		}
		q := jobs.ListQuery{Account: acct, Limit: 1, Ascending: asc, Cursor: jobs.CursorOf(done).Encode()}
		got := listAll(t, b, q, nil)
		wantAfter := []string{js[1].ID, js[0].ID}
		if asc {
			wantAfter = []string{js[4].ID}
		}
		if !slices.Equal(got, wantAfter) {
			t.Errorf("List(after deleted %s, ascending %v) = %v; want %v", done.ID, asc, got, wantAfter)
		}
	}
}
