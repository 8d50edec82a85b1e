package localstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/storetest"
)

func TestRecordsContract(t *testing.T) {
	storetest.RunRecords(t, func(t *testing.T) storetest.RecordsBackend { return openTemp(t) })
}

// TestRecordsContractShared runs the records contract against one file
// for every subtest, as a shared DynamoDB table would be.
func TestRecordsContractShared(t *testing.T) {
	s := openTemp(t)
	storetest.RunRecords(t, func(t *testing.T) storetest.RecordsBackend { return s })
}

// sweepRecord is a free chat record of acct made at (Unix s).
func sweepRecord(id, acct string, at int64) credits.Record {
	return credits.Record{ID: id, Kind: credits.KindChat, Account: acct, ModelAsked: "m", Model: "m",
		Status: credits.StatusCompleted, At: at * 1000}
}

// TestSweepRecords: the records of a store whose retention is a day are
// deleted, oldest first and at most limit at a time, once a day old; the
// rest stay, readable and listed; the usage and the ledger stay.
func TestSweepRecords(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := now // read by the store under its own calls only
	s, err := OpenWith(filepath.Join(t.TempDir(), "genway.db"), Options{Now: func() time.Time { return clock }, RecordRetention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Grant(ctx, "acct", 100*credits.Credit, now.Unix()); err != nil {
		t.Fatal(err)
	}
	var rs []credits.Record
	for i := range 7 {
		// Made 3 days ago to now, half a day apart.
		r := sweepRecord(fmt.Sprintf("chatcmpl-%d", i), "acct", now.Add(time.Duration(i-6)*12*time.Hour).Unix())
		r.Cost = 5
		rs = append(rs, r)
	}
	for i, err := range s.AddRecords(ctx, rs) {
		if err != nil {
			t.Fatalf("AddRecords[%d] = %v", i, err)
		}
	}
	// The first four (3, 2.5, 2 and 1.5 days old) expired, and the fifth
	// (1 day old) just now.
	n, err := s.SweepRecords(ctx, now.Unix(), 2)
	if err != nil || n != 2 {
		t.Fatalf("SweepRecords(limit 2) = %d, %v; want 2", n, err)
	}
	n, err = s.SweepRecords(ctx, now.Unix(), 10)
	if err != nil || n != 3 {
		t.Fatalf("SweepRecords(limit 10) = %d, %v; want 3", n, err)
	}
	if n, err := s.SweepRecords(ctx, now.Unix(), 10); err != nil || n != 0 {
		t.Fatalf("SweepRecords again = %d, %v; want 0", n, err)
	}
	for i, r := range rs {
		_, err := s.Record(ctx, r.ID)
		if gone := i < 5; gone != errors.Is(err, credits.ErrRecordNotFound) {
			t.Errorf("Record(%q) = %v; want gone %v", r.ID, err, gone)
		}
	}
	got, _, err := s.Records(ctx, credits.RecordQuery{Account: "acct"})
	if err != nil || len(got) != 2 || got[0].ID != "chatcmpl-6" || got[1].ID != "chatcmpl-5" {
		t.Errorf("Records(acct) = %+v, %v; want the two live records, newest first", got, err)
	}
	all, _, err := s.Records(ctx, credits.RecordQuery{})
	if err != nil || len(all) != 2 {
		t.Errorf("Records() = %+v, %v; want the two live records", all, err)
	}
	// The charges and the usage stay.
	if a, err := s.Account(ctx, "acct"); err != nil || a.Balance != 100*credits.Credit-35 {
		t.Errorf("Account = %+v, %v; want every record's charge kept", a, err)
	}
	if l, err := s.Ledger(ctx, "acct"); err != nil || len(l) != 8 {
		t.Errorf("Ledger = %d entries, %v; want the grant and 7 charges", len(l), err)
	}
	clock = now.Add(48 * time.Hour)
	if n, err := s.SweepRecords(ctx, clock.Unix(), 10); err != nil || n != 2 {
		t.Errorf("SweepRecords two days later = %d, %v; want the last 2", n, err)
	}
}

// TestSweepRecordsLoop: the loop deletes what expired and stops with its
// context.
func TestSweepRecordsLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := openTemp(t)
	old := sweepRecord("chatcmpl-old", "acct", time.Now().Add(-time.Hour).Unix())
	old.Expires = time.Now().Unix() - 1
	if err := s.AddRecords(ctx, []credits.Record{old})[0]; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.SweepRecordsLoop(ctx, time.Hour) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := s.countRecords(t); c == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := s.countRecords(t); c != 0 {
		t.Errorf("%d records left after the loop's first sweep; want 0", c)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SweepRecordsLoop = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SweepRecordsLoop did not stop within 10 s of its context")
	}
}

// BenchmarkRecordGrowth measures what a priced chat request adds to the
// file on disk, for good (its ledger entry and the entry's index) and
// until it expires (its record and the record's two index entries):
// records written by the recorder's flushes, 1000 at a time, into a store
// that already holds 20,000, with ids as the API makes them
// (credits.NewRecordID), and what writing one costs.
//
//	go test ./shared/local/localstore -run '^$' -bench RecordGrowth -benchtime 20000x
func BenchmarkRecordGrowth(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "genway.db")
	s := openAt(b, path)
	if _, err := s.Grant(ctx, "acct", 1000*credits.Credit, 1); err != nil {
		b.Fatal(err)
	}
	at := time.Now().UnixMilli()
	n := 0
	write := func(count int) {
		batch := make([]credits.Record, 0, 1000)
		for range count {
			n++
			r := credits.Record{ID: credits.NewRecordID("chatcmpl-", time.UnixMilli(at+int64(n))), Kind: credits.KindChat, Account: "acct", Key: "key_0123456789abcdef",
				ModelAsked: "openai/gpt-4o-mini", Model: "openai/gpt-4o-mini", Provider: "openai", Attempts: "openai/gpt-4o-mini=200",
				Tokens: credits.Tokens{Prompt: 1200, Cached: 1024, Completion: 180, Reasoning: 64},
				Rates:  credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 150_000, CacheWrite1h: 150_000, Output: 600_000},
				Cost:   143, Status: credits.StatusCompleted, FinishReason: "stop", Stream: true, LatencyMS: 850, FirstTokenMS: 240, At: at + int64(n)}
			batch = append(batch, r)
			if len(batch) == cap(batch) {
				for _, err := range s.AddRecords(ctx, batch) {
					if err != nil {
						b.Fatal(err)
					}
				}
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			s.AddRecords(ctx, batch)
		}
	}
	write(20000)
	size := func() (records, ledger int64) {
		s.db.View(func(tx *bolt.Tx) error {
			for _, name := range []string{bucketRecords, bucketRecordsTime, bucketRecordsAcct} {
				records += bucketBytes(tx, name)
			}
			for _, name := range []string{bucketLedger, bucketLedgerSeq} {
				ledger += bucketBytes(tx, name)
			}
			return nil
		})
		return
	}
	r0, l0 := size()
	f0 := fileSize(b, path)
	b.ResetTimer()
	start := time.Now()
	write(b.N)
	took := time.Since(start)
	b.StopTimer()
	r1, l1 := size()
	f1 := fileSize(b, path)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "record-B/req")
	b.ReportMetric(float64(l1-l0)/float64(b.N), "ledger-B/req")
	b.ReportMetric(float64(f1-f0)/float64(b.N), "file-B/req")
	b.ReportMetric(float64(took.Microseconds())/float64(b.N), "µs/req")
}

// countRecords returns how many records the store holds, expired or not.
func (s *Store) countRecords(t *testing.T) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte(bucketRecords)).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// bucketBytes is what bucket name uses of its pages.
func bucketBytes(tx *bolt.Tx, name string) int64 {
	st := tx.Bucket([]byte(name)).Stats()
	return int64(st.BranchInuse + st.LeafInuse + st.InlineBucketInuse)
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
