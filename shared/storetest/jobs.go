package storetest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/jobs"
)

// The listing and history contract: Store.List and the History that
// Create and Transition keep.

// baseTime returns a random Unix second in 1990..2000, far from the
// jobs other subtests create (now), so that a subtest's time range holds
// only its own jobs even where every subtest shares one table.
func baseTime(t *testing.T) int64 {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("rand: %v", err)
	}
	return 631152000 + int64(binary.BigEndian.Uint64(b[:])%(315360000-1000))
}

// jobAt returns an unsaved queued job of typ and model on account,
// created at created.
func jobAt(t *testing.T, account, typ, model string, created int64) *jobs.Job {
	t.Helper()
	j := newJob(t, account, 1)
	id, err := jobs.NewID(typ)
	if err != nil {
		t.Fatalf("NewID: %v", err)
	}
	j.ID, j.Type, j.Model, j.Created, j.Updated = id, typ, model, created, created
	if typ != jobs.TypeSFX {
		j.Input.Format = ""
	}
	return j
}

// newestFirst sorts js as List orders them.
func newestFirst(js []*jobs.Job) []string {
	s := slices.Clone(js)
	slices.SortFunc(s, func(a, b *jobs.Job) int {
		switch {
		case a.Created != b.Created:
			return int(b.Created - a.Created)
		default:
			return strings.Compare(b.ID, a.ID)
		}
	})
	ids := make([]string, len(s))
	for i, j := range s {
		ids[i] = j.ID
	}
	return ids
}

// listAll pages through q (limit per page) and returns every id in order,
// failing on a page over the limit or a cursor that repeats.
func listAll(t *testing.T, b Backend, q jobs.ListQuery, between func(page int)) []string {
	t.Helper()
	var ids []string
	for page := 0; ; page++ {
		js, next, err := b.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v) page %d = %v", q, page, err)
		}
		if len(js) > q.Limit {
			t.Fatalf("List(%+v) page %d has %d jobs; want at most %d", q, page, len(js), q.Limit)
		}
		for _, j := range js {
			ids = append(ids, j.ID)
		}
		if next == "" {
			return ids
		}
		if next == q.Cursor || page > 1000 {
			t.Fatalf("List(%+v) page %d: cursor %q does not advance", q, page, next)
		}
		if between != nil {
			between(page)
		}
		q.Cursor = next
	}
}

func testHistory(t *testing.T, b Backend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	j := newJob(t, acct, 1)
	j.History = []jobs.StatusChange{{Status: jobs.Completed, At: 1}} // ignored: Create writes its own
	create(t, b, j)
	steps := []struct {
		from, to jobs.Status
		p        jobs.Patch
		want     []jobs.StatusChange
	}{
		{"", "", jobs.Patch{}, []jobs.StatusChange{{Status: jobs.Queued, At: j.Created}}},
		{jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: j.Created + 1}, []jobs.StatusChange{
			{Status: jobs.Queued, At: j.Created}, {Status: jobs.Processing, At: j.Created + 1}}},
		// A status that stays is no history.
		{jobs.Processing, jobs.Processing, jobs.Patch{NextRun: 5, Updated: j.Created + 2}, []jobs.StatusChange{
			{Status: jobs.Queued, At: j.Created}, {Status: jobs.Processing, At: j.Created + 1}}},
		// Neither is a refused transition.
		{jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: "x"}, Updated: j.Created + 3}, []jobs.StatusChange{
			{Status: jobs.Queued, At: j.Created}, {Status: jobs.Processing, At: j.Created + 1}}},
		{jobs.Processing, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: jobs.CodeCancelled, Message: "m"}, Updated: j.Created + 4}, []jobs.StatusChange{
			{Status: jobs.Queued, At: j.Created}, {Status: jobs.Processing, At: j.Created + 1},
			{Status: jobs.Failed, At: j.Created + 4, ErrorCode: jobs.CodeCancelled}}},
	}
	for i, st := range steps {
		if st.to != "" {
			got, err := b.Transition(ctx, j.ID, st.from, st.to, st.p)
			if err == nil && !slices.Equal(got.History, st.want) {
				t.Errorf("step %d: Transition(%s -> %s) history = %+v; want %+v", i, st.from, st.to, got.History, st.want)
			}
			if refused := errors.Is(err, jobs.ErrConflict); err != nil && !refused {
				t.Fatalf("step %d: Transition(%s -> %s) = %v", i, st.from, st.to, err)
			}
		}
		g, err := b.Get(ctx, j.ID)
		if err != nil {
			t.Fatalf("Get(%q) = %v", j.ID, err)
		}
		if !slices.Equal(g.History, st.want) {
			t.Errorf("step %d: Get(%q).History = %+v; want %+v", i, j.ID, g.History, st.want)
		}
	}
}

func testListOrder(t *testing.T, b Backend) {
	acct, other := newAccount(t, b, 100), newAccount(t, b, 100)
	base := baseTime(t)
	var mine []*jobs.Job
	// Three share a second: the id decides among them.
	for _, off := range []int64{0, 5, 5, 5, 9, 2, 7} {
		mine = append(mine, create(t, b, jobAt(t, acct, jobs.TypeSFX, "test-sfx", base+off)))
		create(t, b, jobAt(t, other, jobs.TypeSFX, "test-sfx", base+off))
	}
	want := newestFirst(mine)
	for _, limit := range []int{1, 2, 3, 7, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got := listAll(t, b, jobs.ListQuery{Account: acct, Limit: limit}, nil)
			if !slices.Equal(got, want) {
				t.Errorf("List(%s) pages of %d = %v; want %v", acct, limit, got, want)
			}
		})
	}
	// The first page is the newest, and the default limit holds them all.
	js, next, err := b.List(context.Background(), jobs.ListQuery{Account: acct})
	if err != nil || next != "" || len(js) != len(want) || js[0].ID != want[0] {
		t.Fatalf("List(%s, default limit) = %d jobs, next %q, %v; want all %d, no next", acct, len(js), next, err, len(want))
	}
	// Listed jobs are whole: as Get returns them.
	for _, j := range js {
		g, err := b.Get(context.Background(), j.ID)
		if err != nil || g.Account != j.Account || g.Input != j.Input || g.Model != j.Model || g.Type != j.Type ||
			g.Status != j.Status || g.Price != j.Price || g.Created != j.Created || !slices.Equal(g.History, j.History) {
			t.Errorf("listed %+v; Get = %+v, %v", j, g, err)
		}
	}
}

// testListOfKey: with ListQuery.Key only the jobs that key created are
// listed, in order, across pages, with the other filters, whatever the
// account's other keys made around them.
func testListOfKey(t *testing.T, b Backend) {
	acct := newAccount(t, b, 100)
	key, other := newKey(t, b, acct, auth.Controls{Jobs: auth.JobsOwn}).ID, newKey(t, b, acct, auth.Controls{}).ID
	base := baseTime(t)
	var mine, mineMusic []*jobs.Job
	for i, off := range []int64{0, 1, 1, 2, 3, 5, 8, 13} {
		typ := jobs.TypeSFX
		if i%3 == 0 {
			typ = jobs.TypeMusic
		}
		j := jobAt(t, acct, typ, "test-"+typ, base+off)
		j.Key = key
		mine = append(mine, create(t, b, j))
		if typ == jobs.TypeMusic {
			mineMusic = append(mineMusic, mine[len(mine)-1])
		}
		// Others' jobs between and around: another key's, the console's.
		for _, k := range []string{other, other, ""} {
			o := jobAt(t, acct, typ, "test-"+typ, base+off)
			o.Key = k
			create(t, b, o)
		}
	}
	for _, limit := range []int{1, 3, 100} {
		got := listAll(t, b, jobs.ListQuery{Account: acct, Key: key, Limit: limit}, nil)
		if want := newestFirst(mine); !slices.Equal(got, want) {
			t.Errorf("List(%s, its key) pages of %d = %v; want its %d jobs %v", acct, limit, got, len(want), want)
		}
	}
	q := jobs.ListQuery{Account: acct, Key: key, Type: jobs.TypeMusic, Limit: 2}
	if got, want := listAll(t, b, q, nil), newestFirst(mineMusic); !slices.Equal(got, want) {
		t.Errorf("List(%s, its key, music) = %v; want %v", acct, got, want)
	}
	if got := listAll(t, b, jobs.ListQuery{Account: acct, Key: "key_0000000000000000", Limit: 5}, nil); len(got) != 0 {
		t.Errorf("List(%s, a key with no jobs) = %v; want none", acct, got)
	}
}

func testListConcurrentCreates(t *testing.T, b Backend) {
	acct := newAccount(t, b, 100)
	base := baseTime(t)
	var before []*jobs.Job
	for i := range 9 {
		before = append(before, create(t, b, jobAt(t, acct, jobs.TypeSFX, "test-sfx", base+int64(i/2))))
	}
	// Jobs created while the client pages are newer than every cursor:
	// they are on no later page, and nothing is listed twice or skipped.
	got := listAll(t, b, jobs.ListQuery{Account: acct, Limit: 2}, func(page int) {
		create(t, b, jobAt(t, acct, jobs.TypeSFX, "test-sfx", base+100+int64(page)))
	})
	if want := newestFirst(before); !slices.Equal(got, want) {
		t.Errorf("pages listed while creating = %v; want %v", got, want)
	}
}

func testListFilters(t *testing.T, b Backend) {
	ctx := context.Background()
	acct, other := newAccount(t, b, 100), newAccount(t, b, 100)
	base := baseTime(t)
	var all []*jobs.Job
	add := func(typ, model string, off int64, path ...jobs.Status) {
		j := create(t, b, jobAt(t, acct, typ, model, base+off))
		cur := jobs.Queued
		for _, st := range path {
			p := jobs.Patch{Updated: j.Created + 1}
			if st == jobs.Failed {
				p.Error = &jobs.JobError{Code: jobs.CodeUpstream, Message: "boom"}
			}
			if st == jobs.Completed {
				p.Output = &jobs.Output{Key: "k", ContentType: "audio/mpeg", Bytes: 1, Duration: 1}
			}
			var err error
			if j, err = b.Transition(ctx, j.ID, cur, st, p); err != nil {
				t.Fatalf("Transition(%s -> %s) = %v", cur, st, err)
			}
			cur = st
		}
		all = append(all, j)
		// The other account's twin: never listed.
		create(t, b, jobAt(t, other, typ, model, base+off))
	}
	add(jobs.TypeSFX, "test-sfx", 0)
	add(jobs.TypeSFX, "test-sfx", 1, jobs.Processing)
	add(jobs.TypeSFX, "other-sfx", 2, jobs.Processing, jobs.Completed)
	add(jobs.TypeMusic, "test-music", 3, jobs.Failed)
	add(jobs.TypeMusic, "test-music", 4, jobs.Processing, jobs.Completed)
	add(jobs.TypeVideo, "test-video", 5)
	add(jobs.TypeSFX, "test-sfx", 6, jobs.Processing, jobs.Completed)
	add(jobs.TypeSFX, "test-sfx", 7, jobs.Processing, jobs.Failed)

	tests := []struct {
		name string
		q    jobs.ListQuery
	}{
		{"status completed", jobs.ListQuery{Status: jobs.Completed}},
		{"status failed", jobs.ListQuery{Status: jobs.Failed}},
		{"status queued", jobs.ListQuery{Status: jobs.Queued}},
		{"status processing", jobs.ListQuery{Status: jobs.Processing}},
		{"type music", jobs.ListQuery{Type: jobs.TypeMusic}},
		{"type video", jobs.ListQuery{Type: jobs.TypeVideo}},
		{"model", jobs.ListQuery{Model: "test-sfx"}},
		{"unknown model", jobs.ListQuery{Model: "nope"}},
		{"since", jobs.ListQuery{Since: base + 3}},
		{"until", jobs.ListQuery{Until: base + 3}},
		{"since and until", jobs.ListQuery{Since: base + 2, Until: base + 5}},
		{"one second", jobs.ListQuery{Since: base + 4, Until: base + 4}},
		{"type, status and model", jobs.ListQuery{Type: jobs.TypeSFX, Status: jobs.Completed, Model: "test-sfx"}},
		{"status and time", jobs.ListQuery{Status: jobs.Completed, Since: base + 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.Account = acct
			var want []*jobs.Job
			for _, j := range all {
				if q.Match(j) {
					want = append(want, j)
				}
			}
			for _, limit := range []int{1, 2, 100} {
				q.Limit = limit
				got := listAll(t, b, q, nil)
				if w := newestFirst(want); !slices.Equal(got, w) {
					t.Errorf("List(%+v) = %v; want %v", q, got, w)
				}
			}
		})
	}
	// Every account's jobs: the operator's listing has both accounts'.
	q := jobs.ListQuery{Since: base, Until: base + 7, Type: jobs.TypeMusic, Limit: 1}
	got := listAll(t, b, q, nil)
	if len(got) != 4 {
		t.Errorf("List(every account, music) = %v; want 4 jobs (2 of each account)", got)
	}
	js, _, err := b.List(ctx, jobs.ListQuery{Status: jobs.Completed, Since: base, Until: base + 7})
	if err != nil {
		t.Fatal(err)
	}
	accounts := map[string]int{}
	for _, j := range js {
		accounts[j.Account]++
		if j.Status != jobs.Completed || j.Output == nil {
			t.Errorf("List(every account, completed) has %+v; want completed jobs with their output", j)
		}
	}
	if accounts[acct] != 3 || accounts[other] != 0 || len(js) != 3 {
		t.Errorf("List(every account, completed) by account = %v; want 3 of %s (the other's jobs stayed queued)", accounts, acct)
	}
}

func testListBadCursor(t *testing.T, b Backend) {
	for _, c := range []string{"x", "e30", "!!"} {
		_, _, err := b.List(context.Background(), jobs.ListQuery{Account: "acct-any", Cursor: c})
		if e := apierr.As(err); e == nil || e.Param != "after" {
			t.Errorf("List(cursor %q) = %v; want a 400 naming after", c, err)
		}
	}
	if _, _, err := b.List(context.Background(), jobs.ListQuery{Account: "acct-any", Limit: 101}); apierr.As(err) == nil {
		t.Errorf("List(limit 101) = %v; want a 400", err)
	}
	js, next, err := b.List(context.Background(), jobs.ListQuery{Account: "acct-none-" + randomSuffix(t)})
	if err != nil || len(js) != 0 || next != "" {
		t.Errorf("List(account without jobs) = %v, %q, %v; want nothing", js, next, err)
	}
}

func testListAscending(t *testing.T, b Backend) {
	acct, other := newAccount(t, b, 100), newAccount(t, b, 100)
	base := baseTime(t)
	var mine []*jobs.Job
	// Three share a second: the id decides among them.
	for i, off := range []int64{0, 5, 5, 5, 9, 2, 7} {
		typ := jobs.TypeSFX
		if i%2 == 0 {
			typ = jobs.TypeVideo
		}
		mine = append(mine, create(t, b, jobAt(t, acct, typ, "test-"+typ, base+off)))
		create(t, b, jobAt(t, other, typ, "test-"+typ, base+off))
	}
	tests := []struct {
		name string
		q    jobs.ListQuery
	}{
		{"all", jobs.ListQuery{}},
		{"since", jobs.ListQuery{Since: base + 5}},
		{"until", jobs.ListQuery{Until: base + 5}},
		{"since and until", jobs.ListQuery{Since: base + 2, Until: base + 7}},
		{"one second", jobs.ListQuery{Since: base + 5, Until: base + 5}},
		{"type", jobs.ListQuery{Type: jobs.TypeVideo}},
		{"type and time", jobs.ListQuery{Type: jobs.TypeVideo, Since: base + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.Account, q.Ascending = acct, true
			var sel []*jobs.Job
			for _, j := range mine {
				if q.Match(j) {
					sel = append(sel, j)
				}
			}
			want := newestFirst(sel)
			slices.Reverse(want)
			for _, limit := range []int{1, 2, 3, 100} {
				q.Limit = limit
				if got := listAll(t, b, q, nil); !slices.Equal(got, want) {
					t.Errorf("List(%+v) = %v; want %v (oldest first)", q, got, want)
				}
			}
		})
	}
	// The operator's listing of every account, oldest first: both
	// accounts' jobs, each second's in id order.
	q := jobs.ListQuery{Since: base, Until: base + 9, Type: jobs.TypeVideo, Limit: 2, Ascending: true}
	got := listAll(t, b, q, nil)
	js := make([]*jobs.Job, 0, len(got))
	for _, id := range got {
		j, err := b.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		js = append(js, j)
	}
	want := newestFirst(js)
	slices.Reverse(want)
	if len(got) != 8 || !slices.Equal(got, want) {
		t.Errorf("List(every account, video, ascending) = %v; want the 8 video jobs of both accounts, oldest first", got)
	}
}
