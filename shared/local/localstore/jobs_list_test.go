package localstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/jobs"
)

func TestPosition(t *testing.T) {
	// Ascending keys are the listing's order: newest first, then id
	// descending, ids of any length.
	order := []struct {
		created int64
		id      string
	}{
		{200, "job_sfx_b"}, {200, "job_sfx_ab"}, {200, "job_sfx_a"}, {200, "job_sfx_"}, {100, "job_sfx_z"}, {0, "job_music_a"},
	}
	var keys [][]byte
	for _, o := range order {
		k := position(o.created, o.id)
		keys = append(keys, k)
		c, id, ok := parsePosition(k)
		if !ok || c != o.created || id != o.id {
			t.Errorf("parsePosition(position(%d, %q)) = %d, %q, %v", o.created, o.id, c, id, ok)
		}
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Errorf("positions are not in listing order")
	}
	for _, bad := range [][]byte{nil, []byte("short"), append(position(1, "x")[:9], 0)} {
		if _, _, ok := parsePosition(bad); ok {
			t.Errorf("parsePosition(%q) ok; want not", bad)
		}
	}
}

// putJobs stores js and indexes them in one transaction (the backfill of
// ensureJobIndex), as many Creates would.
func putJobs(t testing.TB, s *Store, js []*jobs.Job) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket([]byte(bucketJobs))
		for _, j := range js {
			if err := putJSON(jb, []byte(j.ID), j); err != nil {
				return err
			}
		}
		for _, name := range []string{bucketJobsByAccount, bucketJobsByCreated} {
			if tx.Bucket([]byte(name)) != nil {
				if err := tx.DeleteBucket([]byte(name)); err != nil {
					return err
				}
			}
		}
		return ensureJobIndex(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dropIndex deletes the listing indexes, as in a file written before
// they existed.
func dropIndex(t testing.TB, s *Store) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketJobsByAccount, bucketJobsByCreated} {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func listIDs(t testing.TB, s *Store, q jobs.ListQuery) (ids []string, pages int) {
	t.Helper()
	for {
		js, next, err := s.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v) = %v", q, err)
		}
		pages++
		for _, j := range js {
			ids = append(ids, j.ID)
		}
		if next == "" || pages > 10000 {
			return ids, pages
		}
		q.Cursor = next
	}
}

func manyJobs(n, accounts int, status func(i int) jobs.Status) []*jobs.Job {
	js := make([]*jobs.Job, n)
	for i := range js {
		js[i] = &jobs.Job{
			ID: fmt.Sprintf("job_sfx_%020d", i), Account: fmt.Sprintf("acct%d", i%accounts), Type: jobs.TypeSFX, Model: "synthetic-sfx",
			Status: status(i), Input: jobs.Input{Prompt: "rain on a tin roof", Duration: 5, Format: "mp3"}, Price: 5,
			Created: 1_700_000_000 + int64(i/3), Updated: 1_700_000_000 + int64(i/3),
		}
	}
	return js
}

func TestListIndexBackfill(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.Grant(ctx, "acct0", 100, 1); err != nil {
		t.Fatal(err)
	}
	putJobs(t, s, manyJobs(10, 2, func(int) jobs.Status { return jobs.Queued }))
	dropIndex(t, s)
	// The first List of an old file indexes what it holds.
	got, _ := listIDs(t, s, jobs.ListQuery{Account: "acct0", Limit: 3})
	want := []string{"job_sfx_00000000000000000008", "job_sfx_00000000000000000006", "job_sfx_00000000000000000004", "job_sfx_00000000000000000002", "job_sfx_00000000000000000000"}
	if !slices.Equal(got, want) {
		t.Errorf("List(acct0) of an old file = %v; want %v", got, want)
	}
	// So does the first write.
	dropIndex(t, s)
	j := jobs.Job{ID: "job_sfx_new", Account: "acct0", Type: jobs.TypeSFX, Model: "m", Price: 1, Created: 1_800_000_000}
	if _, err := s.Create(ctx, &j, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "job_sfx_00000000000000000008", jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: jobs.CodeCancelled}}); err != nil {
		t.Fatal(err)
	}
	got, _ = listIDs(t, s, jobs.ListQuery{Account: "acct0", Limit: 100})
	if !slices.Equal(got, append([]string{"job_sfx_new"}, want...)) {
		t.Errorf("List(acct0) after a create on an old file = %v", got)
	}
	got, _ = listIDs(t, s, jobs.ListQuery{Account: "acct0", Status: jobs.Failed})
	if !slices.Equal(got, want[:1]) {
		t.Errorf("List(acct0, failed) = %v; want %v (the index follows transitions)", got, want[:1])
	}
}

func TestListScanLimit(t *testing.T) {
	defer func(n int) { listScanLimit = n }(listScanLimit)
	listScanLimit = 7
	s := openTemp(t)
	// 1 in 10 failed; pages of 5 need 50 entries, past the bound of 7:
	// each page stops there with a cursor, and paging still finds all.
	js := manyJobs(100, 1, func(i int) jobs.Status {
		if i%10 == 3 {
			return jobs.Failed
		}
		return jobs.Queued
	})
	putJobs(t, s, js)
	var want []string
	for i := len(js) - 1; i >= 0; i-- {
		if js[i].Status == jobs.Failed {
			want = append(want, js[i].ID)
		}
	}
	for _, q := range []jobs.ListQuery{{Account: "acct0", Status: jobs.Failed, Limit: 5}, {Status: jobs.Failed, Limit: 5}} {
		got, pages := listIDs(t, s, q)
		if !slices.Equal(got, want) {
			t.Errorf("List(%+v) = %v; want %v", q, got, want)
		}
		if pages < 100/7 {
			t.Errorf("List(%+v) took %d pages; want each cut at %d entries", q, pages, listScanLimit)
		}
	}
}

// TestListLarge measures List over 100,000 jobs (skipped with -short).
func TestListLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("100k jobs")
	}
	const n = 100_000
	s := openTemp(t)
	// 100 accounts of 1000 jobs; 1 job in 1000 is processing, all of
	// them acct98's.
	js := manyJobs(n, 100, func(i int) jobs.Status {
		if i%1000 == 998 {
			return jobs.Processing
		}
		return jobs.Completed
	})
	start := time.Now()
	putJobs(t, s, js)
	t.Logf("stored and indexed %d jobs in %v", n, time.Since(start).Round(time.Millisecond))
	dropIndex(t, s)
	start = time.Now()
	if err := s.ensureIndex(); err != nil {
		t.Fatal(err)
	}
	t.Logf("backfilled the index of %d jobs (first List of an old file) in %v", n, time.Since(start).Round(time.Millisecond))

	// For comparison: the scan an index-less List would make per page.
	start = time.Now()
	all, err := s.allJobs()
	if err != nil || len(all) != n {
		t.Fatalf("allJobs = %d, %v", len(all), err)
	}
	t.Logf("for comparison, one scan decoding every job: %v", time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	tests := []struct {
		name string
		q    jobs.ListQuery
		want int
	}{
		{"one account, first page of 20", jobs.ListQuery{Account: "acct7"}, 20},
		{"one account, page of 100", jobs.ListQuery{Account: "acct7", Limit: 100}, 100},
		{"every account, page of 100", jobs.ListQuery{Limit: 100}, 100},
		{"one account, status matching none (its whole index: 1000 entries)", jobs.ListQuery{Account: "acct99", Status: jobs.Processing, Limit: 100}, 0},
		{"one account, status 1 in 10", jobs.ListQuery{Account: "acct98", Status: jobs.Processing, Limit: 100}, 100},
		{"every account, status 1 in 1000 (cut at the scan bound)", jobs.ListQuery{Status: jobs.Processing, Limit: 100}, listScanLimit / 1000},
		{"one account, one hour", jobs.ListQuery{Account: "acct7", Since: 1_700_010_000, Until: 1_700_013_600, Limit: 100}, 100},
	}
	for _, tt := range tests {
		const rounds = 50
		var got []*jobs.Job
		start := time.Now()
		for range rounds {
			var err error
			if got, _, err = s.List(ctx, tt.q); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d jobs in %v per List", tt.name, len(got), (time.Since(start) / rounds).Round(time.Microsecond))
		if len(got) != tt.want {
			t.Errorf("%s: %d jobs; want %d", tt.name, len(got), tt.want)
		}
	}
	// A client paging through one account's 1000 jobs, 100 at a time.
	start = time.Now()
	ids, pages := listIDs(t, s, jobs.ListQuery{Account: "acct3", Limit: 100})
	t.Logf("paged through %d jobs of one account in %d pages: %v", len(ids), pages, time.Since(start).Round(time.Microsecond))
	if len(ids) != n/100 {
		t.Errorf("paging acct3: %d jobs; want %d", len(ids), n/100)
	}
}
