package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
)

// List implements Store for memStore: every job sorted, filtered, cut at
// the cursor and the limit (the reference the real stores are held to).
func (s *memStore) List(ctx context.Context, q ListQuery) ([]*Job, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	cur, _ := DecodeCursor(q.Cursor)
	s.mu.Lock()
	var all []*Job
	for _, j := range s.jobs {
		c := j
		all = append(all, &c)
	}
	s.mu.Unlock()
	sort.Slice(all, func(a, b int) bool { return CursorOf(all[a]).After(all[b].Created, all[b].ID) })
	var out []*Job
	for _, j := range all {
		if (!cur.IsZero() && !cur.After(j.Created, j.ID)) || !q.Match(j) {
			continue
		}
		if len(out) == q.Limit {
			return out, CursorOf(out[len(out)-1]).Encode(), nil
		}
		out = append(out, j)
	}
	return out, "", nil
}

func TestListQueryNormalize(t *testing.T) {
	tests := []struct {
		name  string
		q     ListQuery
		param string // "" = valid
		limit int    // after Normalize, when valid
	}{
		{"zero", ListQuery{}, "", DefaultListLimit},
		{"all filters", ListQuery{Status: Completed, Type: TypeVideo, Model: "synthetic-video", Since: 10, Until: 20, Limit: 100, Cursor: Cursor{Created: 5, ID: "job_x"}.Encode()}, "", 100},
		{"since equals until", ListQuery{Since: 10, Until: 10, Limit: 1}, "", 1},
		{"unknown status", ListQuery{Status: "done"}, "status", 0},
		{"unknown type", ListQuery{Type: "image"}, "type", 0},
		{"long model", ListQuery{Model: strings.Repeat("m", 201)}, "model", 0},
		{"negative since", ListQuery{Since: -1}, "since", 0},
		{"negative until", ListQuery{Until: -1}, "until", 0},
		{"until before since", ListQuery{Since: 20, Until: 10}, "until", 0},
		{"limit too big", ListQuery{Limit: 101}, "limit", 0},
		{"negative limit", ListQuery{Limit: -1}, "limit", 0},
		{"cursor not base64", ListQuery{Cursor: "!!!"}, "after", 0},
		{"cursor not json", ListQuery{Cursor: "bm90IGpzb24"}, "after", 0},
		{"cursor without id", ListQuery{Cursor: Cursor{Created: 5}.Encode()}, "after", 0},
		{"cursor with extra fields", ListQuery{Cursor: "eyJjIjoxLCJpIjoiYSIsIngiOjF9"}, "after", 0},
		{"cursor too long", ListQuery{Cursor: strings.Repeat("a", 600)}, "after", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			err := q.Normalize()
			if tt.param == "" {
				if err != nil || q.Limit != tt.limit {
					t.Errorf("Normalize(%+v) = %v, limit %d; want nil, limit %d", tt.q, err, q.Limit, tt.limit)
				}
				return
			}
			e := apierr.As(err)
			if e == nil || e.Kind != apierr.Invalid || e.Param != tt.param {
				t.Errorf("Normalize(%+v) = %v; want a 400 naming %q", tt.q, err, tt.param)
			}
		})
	}
}

func TestCursor(t *testing.T) {
	c := Cursor{Created: 1700000000, ID: "job_sfx_abc"}
	got, err := DecodeCursor(c.Encode())
	if err != nil || got != c {
		t.Fatalf("DecodeCursor(Encode(%+v)) = %+v, %v", c, got, err)
	}
	if strings.ContainsAny(c.Encode(), "+/=") {
		t.Errorf("Encode() = %q; want base64url without padding", c.Encode())
	}
	if got, err := DecodeCursor(""); err != nil || !got.IsZero() {
		t.Errorf(`DecodeCursor("") = %+v, %v; want the zero cursor`, got, err)
	}
	order := []struct {
		created int64
		id      string
		after   bool
	}{
		{1700000001, "job_sfx_abc", false}, // newer
		{1700000000, "job_sfx_abd", false}, // same second, larger id: listed first
		{1700000000, "job_sfx_abc", false}, // the cursor's own job
		{1700000000, "job_sfx_abb", true},
		{1699999999, "job_sfx_zzz", true},
	}
	for _, o := range order {
		if got := c.After(o.created, o.id); got != o.after {
			t.Errorf("%+v.After(%d, %q) = %v; want %v", c, o.created, o.id, got, o.after)
		}
	}
}

func TestServiceList(t *testing.T) {
	var js []Job
	for i := range 5 {
		js = append(js, Job{ID: fmt.Sprintf("job_sfx_%020d", i), Account: "a", Type: TypeSFX, Model: "m", Status: Queued, Created: int64(100 + i)})
		js = append(js, Job{ID: fmt.Sprintf("job_sfx_b%019d", i), Account: "b", Type: TypeSFX, Model: "m", Status: Queued, Created: int64(100 + i)})
	}
	svc := &Service{Store: newMemStore(js...), Log: discard()}
	ctx := context.Background()
	// An empty Account in the query does not widen the listing: the
	// service sets it to the caller's.
	got, next, err := svc.List(ctx, "a", ListQuery{Account: "", Limit: 3})
	if err != nil || len(got) != 3 || next == "" {
		t.Fatalf("List(a, limit 3) = %d jobs, %q, %v; want 3 and a cursor", len(got), next, err)
	}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		for _, j := range got {
			if j.Account != "a" || seen[j.ID] {
				t.Errorf("page %d: %s of account %s (seen before: %v); want each of a's jobs once", page, j.ID, j.Account, seen[j.ID])
			}
			seen[j.ID] = true
		}
		if next == "" {
			break
		}
		if got, next, err = svc.List(ctx, "a", ListQuery{Account: "b", Limit: 3, Cursor: next}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 5 {
		t.Errorf("listed %d jobs of a; want 5", len(seen))
	}
	if _, _, err := svc.List(ctx, "a", ListQuery{Limit: 500}); apierr.As(err) == nil || apierr.As(err).Param != "limit" {
		t.Errorf("List(limit 500) = %v; want a 400 naming limit", err)
	}
	if _, _, err := svc.List(ctx, "", ListQuery{}); err == nil || apierr.As(err) != nil {
		t.Errorf(`List(account "") = %v; want an internal error`, err)
	}
}

// TestOwnJobs: a key limited to its own jobs (auth.JobsOwn) gets, lists,
// pages after, cancels and deletes only the jobs it created; the
// account's other jobs are not found for it. A key without the control,
// and the operator (no principal), see every job of the account.
func TestOwnJobs(t *testing.T) {
	const mine, theirs, console = "job_sfx_00000000000000000001", "job_sfx_00000000000000000002", "job_sfx_00000000000000000003"
	st := newMemStore(
		Job{ID: mine, Account: "a", Type: TypeSFX, Model: "m", Status: Queued, Created: 100, Key: "key_own"},
		Job{ID: theirs, Account: "a", Type: TypeSFX, Model: "m", Status: Queued, Created: 101, Key: "key_other"},
		Job{ID: console, Account: "a", Type: TypeSFX, Model: "m", Status: Queued, Created: 102},
	)
	svc := &Service{Store: st, Log: discard()}
	own := auth.WithPrincipal(context.Background(), auth.Principal{Account: "a", KeyID: "key_own", OwnJobs: true})
	shared := auth.WithPrincipal(context.Background(), auth.Principal{Account: "a", KeyID: "key_other"})
	tests := []struct {
		name string
		ctx  context.Context
		sees []string // newest first
	}{
		{"own key", own, []string{mine}},
		{"account key", shared, []string{console, theirs, mine}},
		{"operator", context.Background(), []string{console, theirs, mine}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, id := range []string{mine, theirs, console} {
				want := slices.Contains(tt.sees, id)
				if _, err := svc.Get(tt.ctx, "a", id); (err == nil) != want || (!want && !errors.Is(err, ErrNotFound)) {
					t.Errorf("Get(%s) = %v; want found %v (else ErrNotFound)", id, err, want)
				}
				if _, err := svc.CursorAt(tt.ctx, "a", id); (err == nil) != want {
					t.Errorf("CursorAt(%s) = %v; want ok %v", id, err, want)
				}
			}
			var got []string
			q := ListQuery{Limit: 1}
			for {
				js, next, err := svc.List(tt.ctx, "a", q)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range js {
					got = append(got, j.ID)
				}
				if next == "" || len(got) > 3 {
					break
				}
				q.Cursor = next
			}
			if !slices.Equal(got, tt.sees) {
				t.Errorf("List pages = %v; want %v", got, tt.sees)
			}
		})
	}
	// Cancel reads through Get: another key's job is not found, and stays.
	if _, err := svc.Cancel(own, "a", theirs); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel(another key's job) = %v; want ErrNotFound", err)
	}
	if j, _ := st.Get(context.Background(), theirs); j.Status != Queued {
		t.Errorf("another key's job after a refused cancel: %s; want queued", j.Status)
	}
	if _, err := svc.Cancel(own, "a", mine); err != nil {
		t.Errorf("Cancel(its own job) = %v; want nil", err)
	}
}

// TestOwnJobsIdempotentReplay: a key limited to its own jobs that sends
// an Idempotency-Key another key of the account used gets a conflict, not
// that key's job; the key that made it replays it as before.
func TestOwnJobsIdempotentReplay(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	st := newSweepStore()
	svc := &Service{Store: st, Queue: &memQueue{}, Catalog: cat, Log: discard()}
	req := &CreateRequest{Type: TypeSFX, Model: "synthetic-sfx", Prompt: "pop", Duration: ptr(1)}
	first := auth.WithPrincipal(context.Background(), auth.Principal{Account: "a", KeyID: "key_1"})
	own := auth.WithPrincipal(context.Background(), auth.Principal{Account: "a", KeyID: "key_2", OwnJobs: true})
	j, err := svc.Create(first, "a", req, "k1", "h1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(own, "a", req, "k1", "h1"); !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("Create by an own-jobs key with another key's Idempotency-Key = %v; want ErrIdempotencyConflict", err)
	}
	if got, err := svc.Create(first, "a", req, "k1", "h1"); err != nil || got.ID != j.ID {
		t.Errorf("replay by the key that made it = %v, %v; want %s", got, err, j.ID)
	}
}
