package localstore

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/storetest"
)

// clock is a settable time source for queue tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(time.Now().Unix(), 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openTemp opens a store in a fresh temporary file, closed at cleanup.
func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "genway.db"))
}

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// allJobs returns every job, by id.
func (s *Store) allJobs() ([]jobs.Job, error) {
	var out []jobs.Job
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketJobs))
		return b.ForEach(func(k, _ []byte) error {
			var j jobs.Job
			if _, err := getJSON(b, k, &j); err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
	})
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, err
}

// messages returns the queue's messages by job id.
func (s *Store) messages() (map[string]message, error) {
	out := make(map[string]message)
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketQueue))
		n := 0
		err := b.ForEach(func(k, _ []byte) error {
			var m message
			if _, err := getJSON(b, k, &m); err != nil {
				return err
			}
			out[string(k)] = m
			return nil
		})
		if err != nil {
			return err
		}
		// The index must hold exactly one entry per message, at its time.
		err = tx.Bucket([]byte(bucketQueueVis)).ForEach(func(k, _ []byte) error {
			n++
			m, ok := out[string(k[8:])]
			if !ok || string(visKey(m.VisibleAt, string(k[8:]))) != string(k) {
				return errors.New("queue index entry without a matching message: " + string(k[8:]))
			}
			return nil
		})
		if err == nil && n != len(out) {
			err = errors.New("queue index and messages differ in size")
		}
		return err
	})
	return out, err
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend { return openTemp(t) })
}

// TestContractShared runs the contract against one file for every subtest,
// as a shared DynamoDB table would be.
func TestContractShared(t *testing.T) {
	s := openTemp(t)
	storetest.Run(t, func(t *testing.T) storetest.Backend { return s })
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "genway.db")
	openAt(t, path)
	s, err := OpenTimeout(path, 50*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenTimeout(%q) while open = %v; want ErrLocked", path, err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "genway.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.Grant(ctx, "acct", 100, 1); err != nil {
		t.Fatalf("Grant: %v", err)
	}
	j := &jobs.Job{ID: "job_sfx_aaaaaaaaaaaaaaaaaaaa", Account: "acct", Price: 10}
	if _, err := s.Create(ctx, j, nil); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = openAt(t, path)
	if g, err := s.Get(ctx, j.ID); err != nil || g.Status != jobs.Queued {
		t.Errorf("Get(%q) after reopen = %+v, %v; want queued job", j.ID, g, err)
	}
	if a, err := s.Account(ctx, "acct"); err != nil || a.Held != 10 || a.Available != 90 {
		t.Errorf("Account after reopen = %+v, %v; want held 10 available 90", a, err)
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	now := time.Unix(1700000000, 0)
	keys := []auth.Key{
		"sk_live_AbCdxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"sk_live_AbCdyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
		"sk_live_WxYzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
	}
	var recs []auth.Record
	for _, k := range keys {
		r := auth.NewRecord(k, "acct", now)
		if err := s.PutKey(ctx, r); err != nil {
			t.Fatalf("PutKey: %v", err)
		}
		recs = append(recs, r)
	}
	if err := s.PutKey(ctx, recs[0]); err == nil {
		t.Errorf("PutKey(duplicate %q) = nil; want an error", recs[0].ID)
	}
	tests := []struct {
		in      string
		want    string // record id; "" if an error
		wantErr error
	}{
		{recs[0].ID, recs[0].ID, nil},
		{recs[1].ID[:12], recs[1].ID, nil},
		{string(keys[1]), recs[1].ID, nil},
		{"sk_live_WxYz", recs[2].ID, nil},
		{"  sk_live_WxYz  ", recs[2].ID, nil},
		{"sk_live_AbCd", "", auth.ErrAmbiguousKey},
		{"sk_live_AbC", "", auth.ErrKeyNotFound},
		{"sk_live_AbCe", "", auth.ErrKeyNotFound},
		{"key_", "", auth.ErrKeyNotFound},
		{"sk_live_", "", auth.ErrKeyNotFound},
		{"key_ffffffff", "", auth.ErrKeyNotFound},
		{"sk_live_Zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "", auth.ErrKeyNotFound},
		{"", "", auth.ErrKeyNotFound},
	}
	if recs[0].ID[:8] != recs[1].ID[:8] {
		tests = append(tests, struct {
			in      string
			want    string
			wantErr error
		}{recs[0].ID[:8], recs[0].ID, nil})
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := auth.Resolve(ctx, s, tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Resolve(%q) = %+v, %v; want %v", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.ID != tt.want {
				t.Errorf("Resolve(%q) = %+v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestRevokeKeepsFirstTime(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	r := auth.NewRecord("sk_live_AbCdxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "acct", time.Unix(1, 0))
	if err := s.PutKey(ctx, r); err != nil {
		t.Fatalf("PutKey: %v", err)
	}
	for _, at := range []int64{100, 200} {
		got, err := s.RevokeKey(ctx, r.ID, time.Unix(at, 0))
		if err != nil || got.Revoked != 100 {
			t.Errorf("RevokeKey(%q, %d) = %+v, %v; want revoked at 100", r.ID, at, got, err)
		}
	}
}

func TestAccountsAndRateLimit(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for _, id := range []string{"b", "a"} {
		if _, err := s.Grant(ctx, id, 10, 1); err != nil {
			t.Fatalf("Grant(%q): %v", id, err)
		}
	}
	if err := s.SetRateLimit(ctx, "a", 120); err != nil {
		t.Fatalf("SetRateLimit: %v", err)
	}
	if err := s.SetRateLimit(ctx, "nobody", 1); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("SetRateLimit(unknown) = %v; want ErrAccountNotFound", err)
	}
	got, err := s.Accounts(ctx)
	if err != nil {
		t.Fatalf("Accounts: %v", err)
	}
	if len(got) != 2 || got[0].ID != "a" || got[0].RateLimit != 120 || got[1].ID != "b" || got[1].RateLimit != 0 || got[1].Balance != 10 {
		t.Errorf("Accounts() = %+v; want a (120 rpm), b (default)", got)
	}
	if _, err := s.Grant(ctx, "bad\x00id", 1, 1); err == nil {
		t.Errorf("Grant(account with NUL) = nil; want an error")
	}
}

// TestGrantZeroCreatesAccount checks that a 0 grant makes the account (so a
// free job can be created for it) and writes no ledger entry.
func TestGrantZeroCreatesAccount(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.Grant(ctx, "free", 0, 5); err != nil {
		t.Fatalf("Grant(0): %v", err)
	}
	if a, err := s.Account(ctx, "free"); err != nil || a.Created != 5 || a.Balance != 0 {
		t.Errorf("Account(free) = %+v, %v; want created at 5 with 0", a, err)
	}
	if l, err := s.Ledger(ctx, "free"); err != nil || len(l) != 0 {
		t.Errorf("Ledger(free) = %+v, %v; want empty", l, err)
	}
	j := &jobs.Job{ID: "job_sfx_bbbbbbbbbbbbbbbbbbbb", Account: "free", Price: 0}
	if _, err := s.Create(ctx, j, nil); err != nil {
		t.Errorf("Create(free job, empty account) = %v; want nil", err)
	}
}
