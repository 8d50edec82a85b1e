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

// at is 2025-03-01 12:00 UTC in Unix ms.
var at = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

// fakeStore is a RecordStore that writes a record at most once, by id, as
// the real stores do, and fails as its script says.
type fakeStore struct {
	mu      sync.Mutex
	script  []outcome // of the AddRecords calls in order; past its end: applied, nil
	calls   [][]string
	records map[string]credits.Record
	charged credits.Amount // over every record written
	called  chan struct{}
}

// outcome is what one AddRecords call of a fakeStore does to each record.
type outcome struct {
	apply bool  // the write is applied (even if err is not nil)
	err   error // what the caller gets for each record
}

func newFakeStore(script ...outcome) *fakeStore {
	return &fakeStore{script: script, records: map[string]credits.Record{}, called: make(chan struct{}, 1000)}
}

func (f *fakeStore) AddRecords(_ context.Context, rs []credits.Record) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := outcome{apply: true}
	if n := len(f.calls); n < len(f.script) {
		o = f.script[n]
	}
	var ids []string
	errs := make([]error, len(rs))
	for i, r := range rs {
		ids = append(ids, r.ID)
		if err := credits.CheckAddRecord(r); err != nil {
			errs[i] = err
			continue
		}
		if _, ok := f.records[r.ID]; o.apply && !ok {
			f.records[r.ID] = r
			f.charged += r.Cost
		}
		errs[i] = o.err
	}
	f.calls = append(f.calls, ids)
	select {
	case f.called <- struct{}{}:
	default:
	}
	return errs
}

func (f *fakeStore) snapshot() (calls [][]string, n int, charged credits.Amount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), len(f.records), f.charged
}

// rec returns a completed chat record of account with id and cost.
func rec(id, account string, cost credits.Amount) credits.Record {
	return credits.Record{ID: id, Kind: credits.KindChat, Account: account, ModelAsked: "m1", Model: "m1",
		Tokens: credits.Tokens{Prompt: 10, Completion: 2}, Cost: cost, Status: credits.StatusCompleted, At: at}
}

// recordN records n records of account, ids prefix-1.., of cost each.
func recordN(t *testing.T, r UsageRecorder, prefix, account string, n int, cost credits.Amount) {
	t.Helper()
	for i := range n {
		if err := r.Record(context.Background(), rec(fmt.Sprintf("%s-%d", prefix, i+1), account, cost)); err != nil {
			t.Fatalf("Record = %v; want nil", err)
		}
	}
}

var errDown = errors.New("store down")

func TestStoreRecorder(t *testing.T) {
	gone := outcome{err: fmt.Errorf("add record: %w", credits.ErrAccountNotFound)}
	tests := []struct {
		name      string
		script    []outcome
		wantErr   bool
		wantCalls int
		wantN     int
	}{
		{"written", nil, false, 1, 1},
		{"lost, then written", []outcome{{err: errDown}}, false, 2, 1},
		{"applied, answer lost, then found", []outcome{{apply: true, err: errDown}}, false, 2, 1},
		{"failing three times", []outcome{{err: errDown}, {err: errDown}, {err: errDown}}, true, 3, 0},
		{"refused for good: not retried", []outcome{gone}, true, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(tt.script...)
			err := StoreRecorder{Store: store}.Record(context.Background(), rec("chatcmpl-1", "a1", 5))
			calls, n, charged := store.snapshot()
			if (err != nil) != tt.wantErr || len(calls) != tt.wantCalls || n != tt.wantN || charged != credits.Amount(5*tt.wantN) {
				t.Errorf("Record = %v, %d calls, %d written, %s charged; want error %v, %d calls, %d written", err, len(calls), n, charged, tt.wantErr, tt.wantCalls, tt.wantN)
			}
			for _, c := range calls {
				if !slices.Equal(c, []string{"chatcmpl-1"}) {
					t.Errorf("AddRecords calls = %v; want the same record each time", calls)
				}
			}
		})
	}
}

// testRecorder returns a BufferedRecorder on store whose loop ticks only
// when the test sends on the returned channel; it is closed at the end of
// the test.
func testRecorder(t *testing.T, store RecordStore) (*BufferedRecorder, chan time.Time) {
	t.Helper()
	r := newBufferedRecorder(store, nil)
	tick := make(chan time.Time)
	r.start(tick, func() {})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	})
	return r, tick
}

// TestBufferedRecorderBatches: a flush writes every record kept since the
// last one, in calls of at most flushBatch records, and an empty flush
// writes nothing.
func TestBufferedRecorderBatches(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	recordN(t, r, "a", "a1", flushBatch+5, 2)
	recordN(t, r, "b", "a2", 3, 0)
	r.flush(context.Background(), time.Minute)
	calls, n, charged := store.snapshot()
	if len(calls) != 2 || len(calls[0]) != flushBatch || len(calls[1]) != 8 || n != flushBatch+8 || charged != 2*(flushBatch+5) {
		t.Errorf("after a flush: calls of %d records, %d written, %s charged; want calls of %d and 8, %d written, %d charged",
			len(calls), n, charged, flushBatch, flushBatch+8, 2*(flushBatch+5))
	}
	r.flush(context.Background(), time.Minute)
	if calls2, _, _ := store.snapshot(); len(calls2) != len(calls) {
		t.Errorf("AddRecords calls after an empty flush = %d; want still %d", len(calls2), len(calls))
	}
}

func TestBufferedRecorderFlushesOnTick(t *testing.T) {
	store := newFakeStore()
	r, tick := testRecorder(t, store)
	recordN(t, r, "a", "a1", 3, 1)
	if calls, _, _ := store.snapshot(); len(calls) != 0 {
		t.Fatalf("AddRecords calls before a tick = %v; want none", calls)
	}
	tick <- time.Now()
	select {
	case <-store.called:
	case <-time.After(10 * time.Second):
		t.Fatal("no AddRecords within 10 s of a tick")
	}
	if calls, n, _ := store.snapshot(); len(calls) != 1 || n != 3 {
		t.Errorf("after a tick: calls %v, %d written; want one call of 3", calls, n)
	}
}

func TestNewBufferedRecorderFlushes(t *testing.T) {
	store := newFakeStore()
	r := NewBufferedRecorder(store, time.Millisecond, nil)
	defer r.Close(context.Background())
	recordN(t, r, "a", "a1", 1, 0)
	select {
	case <-store.called:
	case <-time.After(10 * time.Second):
		t.Fatal("no AddRecords within 10 s with a 1 ms interval")
	}
}

// TestBufferedRecorderRetries records 3 records, flushes, records 2 more,
// and flushes three more times, with stores that fail in different ways:
// a record whose write failed is written again, with its id, so nothing
// is charged twice, and the later records are written too.
func TestBufferedRecorderRetries(t *testing.T) {
	applied, lost := outcome{apply: true, err: errDown}, outcome{err: errDown}
	gone := outcome{err: fmt.Errorf("add record: %w", credits.ErrAccountNotFound)}
	tests := []struct {
		name      string
		script    []outcome
		wantCalls string
		wantN     int // records in the store (each charged 1)
	}{
		{"no failure", nil, "[a-1 a-2 a-3] [b-1 b-2]", 5},
		{"applied, answer lost", []outcome{applied}, "[a-1 a-2 a-3] [a-1 a-2 a-3 b-1 b-2]", 5},
		{"not applied", []outcome{lost}, "[a-1 a-2 a-3] [a-1 a-2 a-3 b-1 b-2]", 5},
		{"failing three times", []outcome{lost, lost, lost}, "[a-1 a-2 a-3] [a-1 a-2 a-3 b-1 b-2] [a-1 a-2 a-3 b-1 b-2] [a-1 a-2 a-3 b-1 b-2]", 5},
		// A refusal no retry can change is dropped.
		{"account not found", []outcome{gone, gone}, "[a-1 a-2 a-3] [b-1 b-2]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(tt.script...)
			r, _ := testRecorder(t, store)
			ctx := context.Background()
			recordN(t, r, "a", "a1", 3, 1)
			r.flush(ctx, time.Minute)
			recordN(t, r, "b", "a1", 2, 1)
			for range 3 {
				r.flush(ctx, time.Minute)
			}
			calls, n, charged := store.snapshot()
			if got := strings.Trim(fmt.Sprint(calls), "[]"); got != strings.Trim(tt.wantCalls, "[]") {
				t.Errorf("AddRecords calls = %v; want %s", calls, tt.wantCalls)
			}
			if n != tt.wantN || charged != credits.Amount(tt.wantN) {
				t.Errorf("store: %d records, %s charged; want %d of each", n, charged, tt.wantN)
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
		wantN   int
	}{
		{"writes what is left", nil, false, false, 4},
		{"retries until written", []outcome{{err: errDown}, {apply: true, err: errDown}}, false, false, 4},
		{"gives up when ctx is done", []outcome{{err: errDown}, {err: errDown}}, true, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(tt.script...)
			r, _ := testRecorder(t, store)
			recordN(t, r, "a", "a1", 4, 1)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := r.Close(cctx)
			if (err != nil) != tt.wantErr {
				t.Errorf("Close = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "chat a-1 of a1, m1: 10 prompt and 2 completion tokens, 0.000001 credits") {
				t.Errorf("Close = %v; want it to name the unwritten records", err)
			}
			if _, n, charged := store.snapshot(); n != tt.wantN || charged != credits.Amount(tt.wantN) {
				t.Errorf("store after Close: %d records, %s charged; want %d", n, charged, tt.wantN)
			}
		})
	}
}

// TestBufferedRecorderAfterClose: a record made after Close is written
// at once.
func TestBufferedRecorderAfterClose(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	recordN(t, r, "a", "a1", 2, 3)
	if calls, n, _ := store.snapshot(); len(calls) != 2 || n != 2 {
		t.Errorf("after Close: calls %v, %d written; want two direct writes", calls, n)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

func TestBufferedRecorderRefusesInvalid(t *testing.T) {
	store := newFakeStore()
	r, _ := testRecorder(t, store)
	for _, tt := range []struct {
		name string
		f    func(r *credits.Record)
	}{
		{"no id", func(r *credits.Record) { r.ID = "" }},
		{"no account", func(r *credits.Record) { r.Account = "" }},
		{"no model", func(r *credits.Record) { r.Model = "" }},
		{"negative tokens", func(r *credits.Record) { r.Tokens.Prompt = -1 }},
		{"negative cost", func(r *credits.Record) { r.Cost = -1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := rec("chatcmpl-1", "a1", 1)
			tt.f(&x)
			if err := r.Record(context.Background(), x); !errors.Is(err, credits.ErrInvalidRecord) {
				t.Errorf("Record(%+v) = %v; want ErrInvalidRecord", x, err)
			}
		})
	}
	r.flush(context.Background(), time.Minute)
	if calls, _, _ := store.snapshot(); len(calls) != 0 {
		t.Errorf("AddRecords calls = %v; want none", calls)
	}
}

// TestBufferedRecorderConcurrent records from 8 goroutines while another
// flushes, with a store that fails two calls in three (one of them after
// applying the write): every record is written once, the charges exact.
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
				if err := r.Record(context.Background(), rec(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("a%d", g%3), credits.Amount(1+i%2))); err != nil {
					t.Errorf("Record = %v", err)
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
	const n = goroutines * each
	if _, got, charged := store.snapshot(); got != n || charged != credits.Amount(n+n/2) {
		t.Errorf("store: %d records, %s charged; want %d, %d", got, charged, n, n+n/2)
	}
	for _, a := range []string{"a0", "a1", "a2"} {
		if u := r.UnwrittenCredits(a); u != 0 {
			t.Errorf("UnwrittenCredits(%q) after Close = %s; want 0", a, u)
		}
	}
}

// TestBufferedRecorderUnwrittenCredits: a record's cost counts as
// unwritten from Record until a write of it succeeds (or is refused for
// good), across failed writes and retries.
func TestBufferedRecorderUnwrittenCredits(t *testing.T) {
	gone := outcome{err: fmt.Errorf("add record: %w", credits.ErrAccountNotFound)}
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
			recordN(t, r, "a", "a1", 3, 2)
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

// TestBufferedRecorderUnwrittenCreditsPerAccount: free and failed
// requests and other accounts' costs do not count.
func TestBufferedRecorderUnwrittenCreditsPerAccount(t *testing.T) {
	r, _ := testRecorder(t, newFakeStore())
	recordN(t, r, "a", "a1", 3, 2)
	recordN(t, r, "b", "a2", 1, 5)
	recordN(t, r, "c", "a1", 4, 0)
	failed := rec("d", "a1", 0)
	failed.Status, failed.Model = credits.StatusFailed, ""
	if err := r.Record(context.Background(), failed); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		account string
		want    credits.Amount
	}{{"a1", 6}, {"a2", 5}, {"a3", 0}} {
		if got := r.UnwrittenCredits(tt.account); got != tt.want {
			t.Errorf("UnwrittenCredits(%q) = %d; want %d", tt.account, got, tt.want)
		}
	}
}
