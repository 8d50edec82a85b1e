package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// addUsageFunc is a UsageStore fake.
type addUsageFunc func(ctx context.Context, id string, u credits.Usage) error

func (f addUsageFunc) AddUsage(ctx context.Context, id string, u credits.Usage) error {
	return f(ctx, id, u)
}

func TestStoreRecorder(t *testing.T) {
	errStore := errors.New("store down")
	tests := []struct {
		name    string
		now     time.Time
		credits credits.Amount
		err     error
		want    credits.Usage
	}{
		{"utc day", time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC), 0, nil,
			credits.Usage{Account: "acct1", Day: "2025-03-01", Model: "m", Requests: 1, PromptTokens: 7, CompletionTokens: 9}},
		// 01:30 at UTC+2 is still the previous day in UTC.
		{"local clock", time.Date(2025, 3, 2, 1, 30, 0, 0, time.FixedZone("EET", 2*3600)), 5, nil,
			credits.Usage{Account: "acct1", Day: "2025-03-01", Model: "m", Requests: 1, PromptTokens: 7, CompletionTokens: 9, Credits: 5}},
		{"store error", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), 0, errStore,
			credits.Usage{Account: "acct1", Day: "2025-03-01", Model: "m", Requests: 1, PromptTokens: 7, CompletionTokens: 9}},
	}
	ids := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got credits.Usage
			var gotID string
			r := StoreRecorder{
				Store: addUsageFunc(func(_ context.Context, id string, u credits.Usage) error {
					gotID, got = id, u
					return tt.err
				}),
				Now: func() time.Time { return tt.now },
			}
			err := r.RecordChatUsage(context.Background(), "acct1", "m", Usage{PromptTokens: 7, CompletionTokens: 9, TotalTokens: 16}, tt.credits)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("RecordChatUsage = %v; want %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("AddUsage called with %+v; want %+v", got, tt.want)
			}
			if len(gotID) != 24 || ids[gotID] {
				t.Errorf("AddUsage id = %q; want a fresh 24-digit id", gotID)
			}
			ids[gotID] = true
		})
	}
}

// fakeStore is a UsageStore that applies an id with credits at most once,
// as the real stores do, and fails as its script says.
type fakeStore struct {
	mu      sync.Mutex
	script  []outcome // of the calls in order; past its end: applied, nil
	calls   []string  // "id requests credits" of each call
	applied map[string]bool
	sums    map[usageKey]credits.Usage
	charged credits.Amount // credits charged, over every key
	called  chan struct{}
}

// outcome is what one AddUsage call of a fakeStore does.
type outcome struct {
	apply bool  // the write is applied (even if err is not nil)
	err   error // what the caller gets
}

func newFakeStore(script ...outcome) *fakeStore {
	return &fakeStore{script: script, applied: map[string]bool{}, sums: map[usageKey]credits.Usage{}, called: make(chan struct{}, 1000)}
}

func (f *fakeStore) AddUsage(_ context.Context, id string, u credits.Usage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := credits.CheckUsage(id, u); err != nil {
		return err
	}
	o := outcome{apply: true}
	if n := len(f.calls); n < len(f.script) {
		o = f.script[n]
	}
	f.calls = append(f.calls, fmt.Sprintf("%s %d %d", id, u.Requests, int64(u.Credits)))
	if o.apply && !(u.Credits > 0 && f.applied[id]) {
		k := usageKey{u.Account, u.Day, u.Model, ""}
		s := f.sums[k]
		s.Account, s.Day, s.Model = u.Account, u.Day, u.Model
		s.Requests += u.Requests
		s.PromptTokens += u.PromptTokens
		s.CompletionTokens += u.CompletionTokens
		s.Credits += u.Credits
		f.sums[k] = s
		f.charged += u.Credits
		if u.Credits > 0 {
			f.applied[id] = true
		}
	}
	select {
	case f.called <- struct{}{}:
	default:
	}
	return o.err
}

func (f *fakeStore) snapshot() (calls []string, sums map[usageKey]credits.Usage, charged credits.Amount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sums = make(map[usageKey]credits.Usage, len(f.sums))
	for k, v := range f.sums {
		sums[k] = v
	}
	return append([]string(nil), f.calls...), sums, f.charged
}

// testRecorder returns a BufferedRecorder on store whose loop ticks only
// when the test sends on the returned channel, with ids id1, id2, ... and
// a fixed clock; it is closed at the end of the test.
func testRecorder(t *testing.T, store UsageStore) (*BufferedRecorder, chan time.Time) {
	t.Helper()
	r := newBufferedRecorder(store, nil)
	var n int
	r.newID = func() (string, error) { n++; return fmt.Sprintf("id%d", n), nil } // only flush calls it, under flushMu
	r.now = func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	tick := make(chan time.Time)
	r.start(tick, func() {})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return r, tick
}

// record records n completions of 10 prompt and 2 completion tokens and
// amount credits each.
func record(t *testing.T, r *BufferedRecorder, account, model string, n int, amount credits.Amount) {
	t.Helper()
	for range n {
		if err := r.RecordChatUsage(context.Background(), account, model, Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}, amount); err != nil {
			t.Fatalf("RecordChatUsage(%q, %q) = %v; want nil", account, model, err)
		}
	}
}

func sum(account, day, model string, n int64, amount credits.Amount) credits.Usage {
	return credits.Usage{Account: account, Day: day, Model: model, Requests: n, PromptTokens: 10 * n, CompletionTokens: 2 * n, Credits: amount * credits.Amount(n)}
}

func TestBufferedRecorderMerges(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	record(t, r, "a1", "m1", 50, 2)
	record(t, r, "a1", "m2", 3, 0)
	record(t, r, "a2", "m1", 7, 1)
	r.now = func() time.Time { return time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC) } // the next UTC day is another sum
	record(t, r, "a1", "m1", 4, 2)
	r.flush(context.Background(), time.Minute)

	calls, sums, charged := store.snapshot()
	want := map[usageKey]credits.Usage{
		{"a1", "2025-03-01", "m1", ""}: sum("a1", "2025-03-01", "m1", 50, 2),
		{"a1", "2025-03-01", "m2", ""}: sum("a1", "2025-03-01", "m2", 3, 0),
		{"a2", "2025-03-01", "m1", ""}: sum("a2", "2025-03-01", "m1", 7, 1),
		{"a1", "2025-03-02", "m1", ""}: sum("a1", "2025-03-02", "m1", 4, 2),
	}
	if len(calls) != len(want) {
		t.Errorf("AddUsage calls = %q; want one per (account, day, model), %d", calls, len(want))
	}
	for k, w := range want {
		if sums[k] != w {
			t.Errorf("store sum of %v = %+v; want %+v", k, sums[k], w)
		}
	}
	if charged != 100+7+8 {
		t.Errorf("charged = %d; want %d", charged, 100+7+8)
	}
	// Each sum went out with its own id.
	ids := map[string]bool{}
	for _, c := range calls {
		ids[strings.Fields(c)[0]] = true
	}
	if len(ids) != len(calls) {
		t.Errorf("AddUsage ids of %q; want distinct", calls)
	}
	// Nothing new: a flush writes nothing.
	r.flush(context.Background(), time.Minute)
	if calls2, _, _ := store.snapshot(); len(calls2) != len(calls) {
		t.Errorf("AddUsage calls after an empty flush = %q; want still %q", calls2, calls)
	}
}

func TestBufferedRecorderFlushesOnTick(t *testing.T) {
	store := newFakeStore()
	r, tick := testRecorder(t, store)
	record(t, r, "a1", "m1", 3, 1)
	if calls, _, _ := store.snapshot(); len(calls) != 0 {
		t.Fatalf("AddUsage calls before a tick = %q; want none", calls)
	}
	tick <- time.Now()
	select {
	case <-store.called:
	case <-time.After(10 * time.Second):
		t.Fatal("no AddUsage within 10 s of a tick")
	}
	calls, sums, _ := store.snapshot()
	if want := sum("a1", "2025-03-01", "m1", 3, 1); len(calls) != 1 || sums[usageKey{"a1", "2025-03-01", "m1", ""}] != want {
		t.Errorf("after a tick: calls %q, sums %+v; want one call of %+v", calls, sums, want)
	}
}

func TestNewBufferedRecorderFlushes(t *testing.T) {
	store := newFakeStore()
	r := NewBufferedRecorder(store, time.Millisecond, nil)
	defer r.Close(context.Background())
	if err := r.RecordChatUsage(context.Background(), "a1", "m1", Usage{PromptTokens: 1}, 0); err != nil {
		t.Fatalf("RecordChatUsage = %v", err)
	}
	select {
	case <-store.called:
	case <-time.After(10 * time.Second):
		t.Fatal("no AddUsage within 10 s with a 1 ms interval")
	}
}

var errDown = errors.New("store down")

// TestBufferedRecorderRetries records 3 completions, flushes, records 2
// more, and flushes three more times, with stores that fail in different
// ways: a failed sum is retried with its id, so nothing is charged twice,
// and the later completions are written too.
func TestBufferedRecorderRetries(t *testing.T) {
	applied, lost := outcome{apply: true, err: errDown}, outcome{err: errDown}
	gone := outcome{err: fmt.Errorf("add usage: %w", credits.ErrAccountNotFound)}
	tests := []struct {
		name      string
		script    []outcome
		wantCalls []string
		wantSum   int64 // requests (and credits) in the store
	}{
		{"no failure", nil, []string{"id1 3 3", "id2 2 2"}, 5},
		{"applied, answer lost", []outcome{applied}, []string{"id1 3 3", "id1 3 3", "id2 2 2"}, 5},
		{"not applied", []outcome{lost}, []string{"id1 3 3", "id1 3 3", "id2 2 2"}, 5},
		// The retry fails too: the 2 later completions wait in the buffer
		// rather than pile up a second failed sum of the key.
		{"applied, then retry fails", []outcome{applied, lost}, []string{"id1 3 3", "id1 3 3", "id1 3 3", "id2 2 2"}, 5},
		{"failing three times", []outcome{lost, lost, lost}, []string{"id1 3 3", "id1 3 3", "id1 3 3", "id1 3 3", "id2 2 2"}, 5},
		// A refusal no retry can change is dropped.
		{"account not found", []outcome{gone, gone}, []string{"id1 3 3", "id2 2 2"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(tt.script...)
			r, _ := testRecorder(t, store)
			ctx := context.Background()
			record(t, r, "a1", "m1", 3, 1)
			r.flush(ctx, time.Minute)
			record(t, r, "a1", "m1", 2, 1)
			for range 3 {
				r.flush(ctx, time.Minute)
			}
			calls, sums, charged := store.snapshot()
			if strings.Join(calls, ", ") != strings.Join(tt.wantCalls, ", ") {
				t.Errorf("AddUsage calls = %q; want %q", calls, tt.wantCalls)
			}
			got := sums[usageKey{"a1", "2025-03-01", "m1", ""}]
			if got.Requests != tt.wantSum || got.Credits != credits.Amount(tt.wantSum) || charged != credits.Amount(tt.wantSum) {
				t.Errorf("store: %d requests, %d credits, %d charged; want %d of each", got.Requests, got.Credits, charged, tt.wantSum)
			}
		})
	}
}

func TestBufferedRecorderClose(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		script  []outcome
		cancel  bool // Close with a cancelled context
		wantErr bool
		wantSum int64
	}{
		{"writes what is left", nil, false, false, 4},
		{"retries until written", []outcome{{err: errDown}, {apply: true, err: errDown}}, false, false, 4},
		{"gives up when ctx is done", []outcome{{err: errDown}, {err: errDown}}, true, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(tt.script...)
			r, _ := testRecorder(t, store)
			record(t, r, "a1", "m1", 4, 1)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := r.Close(cctx)
			if (err != nil) != tt.wantErr {
				t.Errorf("Close = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "a1 2025-03-01 m1: 4 requests") {
				t.Errorf("Close = %v; want it to name the unwritten sum", err)
			}
			_, sums, charged := store.snapshot()
			if got := sums[usageKey{"a1", "2025-03-01", "m1", ""}]; got.Requests != tt.wantSum || charged != credits.Amount(tt.wantSum) {
				t.Errorf("store after Close: %+v, %d charged; want %d requests and credits", got, charged, tt.wantSum)
			}
		})
	}
}

// TestBufferedRecorderAfterClose: a completion recorded after Close is
// written at once, with an id.
func TestBufferedRecorderAfterClose(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	record(t, r, "a1", "m1", 2, 3)
	calls, sums, _ := store.snapshot()
	if len(calls) != 2 || sums[usageKey{"a1", "2025-03-01", "m1", ""}] != sum("a1", "2025-03-01", "m1", 2, 3) {
		t.Errorf("after Close: calls %q, sums %+v; want two direct writes", calls, sums)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

func TestBufferedRecorderRefusesInvalid(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	tests := []struct {
		name, account, model string
		u                    Usage
		amount               credits.Amount
	}{
		{"no account", "", "m1", Usage{}, 0},
		{"no model", "a1", "", Usage{}, 0},
		{"negative tokens", "a1", "m1", Usage{PromptTokens: -1}, 0},
		{"negative credits", "a1", "m1", Usage{}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.RecordChatUsage(context.Background(), tt.account, tt.model, tt.u, tt.amount); !errors.Is(err, credits.ErrInvalidUsage) {
				t.Errorf("RecordChatUsage(%q, %q, %+v, %d) = %v; want ErrInvalidUsage", tt.account, tt.model, tt.u, tt.amount, err)
			}
		})
	}
	r.flush(context.Background(), time.Minute)
	if calls, _, _ := store.snapshot(); len(calls) != 0 {
		t.Errorf("AddUsage calls = %q; want none", calls)
	}
}

// TestBufferedRecorderConcurrent records from 8 goroutines while another
// flushes, with a store that fails two calls in three (one of them after
// applying the write): the totals are exact. Every completion is priced:
// an unpriced sum retried after an applied write would count twice.
func TestBufferedRecorderConcurrent(t *testing.T) {
	const goroutines, each = 8, 300
	var script []outcome
	for i := range 600 {
		switch i % 3 {
		case 1:
			script = append(script, outcome{apply: true, err: errDown})
		case 2:
			script = append(script, outcome{err: errDown})
		default:
			script = append(script, outcome{apply: true})
		}
	}
	store := newFakeStore(script...)
	r, _ := testRecorder(t, store)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				acct := fmt.Sprintf("a%d", g%3)
				if err := r.RecordChatUsage(context.Background(), acct, "m1", Usage{PromptTokens: 10 + i%2, CompletionTokens: 2}, 1); err != nil {
					t.Errorf("RecordChatUsage = %v", err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for range 1000 {
			select {
			case <-stop:
				return
			default:
				r.flush(context.Background(), time.Minute)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-flushed
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	_, sums, charged := store.snapshot()
	var requests, prompt int64
	var credit credits.Amount
	for _, s := range sums {
		requests += s.Requests
		prompt += s.PromptTokens
		credit += s.Credits
	}
	const n = goroutines * each
	if wantPrompt := int64(10*n + n/2); requests != n || prompt != wantPrompt || credit != credits.Amount(n) || charged != credits.Amount(n) {
		t.Errorf("store: %d requests, %d prompt tokens, %d credits, %d charged; want %d, %d, %d, %d", requests, prompt, credit, charged, n, wantPrompt, n, n)
	}
}

// TestBufferedRecorderUnwrittenCredits: credits count as unwritten from
// RecordChatUsage until a write of them succeeds (or is refused for good),
// across failed writes and retries.
func TestBufferedRecorderUnwrittenCredits(t *testing.T) {
	gone := outcome{err: fmt.Errorf("add usage: %w", credits.ErrAccountNotFound)}
	tests := []struct {
		name   string
		script []outcome
		want   []credits.Amount // UnwrittenCredits("a1") after recording 3 x 2 credits, then after each of 3 flushes
	}{
		{"written at the first flush", nil, []credits.Amount{6, 0, 0, 0}},
		{"write lost once", []outcome{{err: errDown}}, []credits.Amount{6, 6, 0, 0}},
		{"applied, answer lost, then retried", []outcome{{apply: true, err: errDown}}, []credits.Amount{6, 6, 0, 0}},
		{"failing twice", []outcome{{err: errDown}, {err: errDown}}, []credits.Amount{6, 6, 6, 0}},
		{"refused for good", []outcome{gone}, []credits.Amount{6, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := testRecorder(t, newFakeStore(tt.script...))
			record(t, r, "a1", "m1", 3, 2)
			got := []credits.Amount{r.UnwrittenCredits("a1")}
			for range 3 {
				r.flush(context.Background(), time.Minute)
				got = append(got, r.UnwrittenCredits("a1"))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("UnwrittenCredits(a1) = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestBufferedRecorderUnwrittenCreditsPerAccount: unpriced completions and
// other accounts' credits do not count.
func TestBufferedRecorderUnwrittenCreditsPerAccount(t *testing.T) {
	r, _ := testRecorder(t, newFakeStore())
	record(t, r, "a1", "m1", 3, 2)
	record(t, r, "a2", "m1", 1, 5)
	record(t, r, "a1", "free", 4, 0)
	for _, tt := range []struct {
		account string
		want    credits.Amount
	}{{"a1", 6}, {"a2", 5}, {"a3", 0}} {
		if got := r.UnwrittenCredits(tt.account); got != tt.want {
			t.Errorf("UnwrittenCredits(%q) = %d; want %d", tt.account, got, tt.want)
		}
	}
}
