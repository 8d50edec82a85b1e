package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type memKeys struct {
	mu    sync.Mutex
	recs  map[string]Record
	reads int
	rolls []string // RollKeyPeriod calls: "id period"
}

func (m *memKeys) PutKey(ctx context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[r.Hash] = r
	return nil
}

func (m *memKeys) KeyByHash(ctx context.Context, hash string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	r, ok := m.recs[hash]
	if !ok {
		return Record{}, ErrKeyNotFound
	}
	return r, nil
}

func (m *memKeys) Keys(ctx context.Context, account string) ([]Record, error) { return nil, nil }

func (m *memKeys) RevokeKey(ctx context.Context, id string, at time.Time) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, r := range m.recs {
		if r.ID == id {
			r.Revoked = at.Unix()
			m.recs[h] = r
			return r, nil
		}
	}
	return Record{}, ErrKeyNotFound
}

func (m *memKeys) KeyByID(ctx context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs {
		if r.ID == id {
			return r, nil
		}
	}
	return Record{}, ErrKeyNotFound
}

func (m *memKeys) SetControls(ctx context.Context, id string, c Controls) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, r := range m.recs {
		if r.ID == id {
			r.Controls = c
			m.recs[h] = r
			return r, nil
		}
	}
	return Record{}, ErrKeyNotFound
}

// TouchKey records nothing (touchKeys does).
func (m *memKeys) TouchKey(context.Context, string, time.Time) error { return nil }

// RollKeyPeriod rolls as the stores do, counting the calls.
func (m *memKeys) RollKeyPeriod(ctx context.Context, id, period string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rolls = append(m.rolls, id+" "+period)
	if _, ok := PeriodStart(period); !ok {
		return false, ErrBadPeriod
	}
	for h, r := range m.recs {
		if r.ID == id {
			if !NewerPeriod(r.Period, period) {
				return false, nil
			}
			r.Spent, r.Period = 0, period
			m.recs[h] = r
			return true, nil
		}
	}
	return false, ErrKeyNotFound
}

func TestNewKey(t *testing.T) {
	seen := map[Key]bool{}
	for i := 0; i < 200; i++ {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !ValidKey(string(k)) || len(k) != len(Prefix)+secretLen || seen[k] {
			t.Fatalf("NewKey() = %q; want a fresh valid key", k)
		}
		seen[k] = true
	}
	if got := Key("sk_live_x").LogValue().String(); got != "REDACTED" {
		t.Errorf("LogValue = %q; want REDACTED", got)
	}
}

func TestAuthenticate(t *testing.T) {
	live, _ := NewKey()
	revoked, _ := NewKey()
	now := time.Unix(1_700_000_000, 0)
	store := &memKeys{recs: map[string]Record{}}
	store.PutKey(context.Background(), NewRecord(live, "acme", now))
	rr := NewRecord(revoked, "acme", now)
	rr.Revoked = now.Unix()
	store.PutKey(context.Background(), rr)
	tests := []struct {
		header string
		want   string // account, "" for ErrInvalidKey
	}{
		{"Bearer " + string(live), "acme"},
		{"bearer " + string(live), "acme"},
		{"Bearer " + string(revoked), ""},
		{"", ""},
		{string(live), ""},
		{"Basic " + string(live), ""},
		{"Bearer sk_test_" + strings.Repeat("a", 40), ""},
		{"Bearer " + Prefix + strings.Repeat("a", 40), ""},
		{"Bearer " + Prefix + "short", ""},
		{"Bearer " + Prefix + strings.Repeat("!", 40), ""},
	}
	a := NewAuthenticator(store, 0)
	for _, tt := range tests {
		p, err := a.Authenticate(context.Background(), tt.header)
		if tt.want == "" {
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Authenticate(%q) = %v, %v; want ErrInvalidKey", tt.header, p, err)
			}
			continue
		}
		if err != nil || p.Account != tt.want {
			t.Errorf("Authenticate(%q) = %+v, %v; want account %s", tt.header, p, err, tt.want)
		}
	}
}

// TestAuthenticateCacheAndRevocation checks that hits are cached for the
// TTL and that a revoked key stops working once the TTL has passed.
func TestAuthenticateCacheAndRevocation(t *testing.T) {
	key, _ := NewKey()
	now := time.Unix(1_700_000_000, 0)
	store := &memKeys{recs: map[string]Record{}}
	rec := NewRecord(key, "acme", now)
	store.PutKey(context.Background(), rec)
	a := NewAuthenticator(store, 30*time.Second)
	a.now = func() time.Time { return now }
	h := "Bearer " + string(key)
	for i := 0; i < 5; i++ {
		if _, err := a.Authenticate(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if store.reads != 1 {
		t.Errorf("store reads = %d; want 1 (cached)", store.reads)
	}
	store.RevokeKey(context.Background(), rec.ID, now)
	now = now.Add(31 * time.Second)
	if _, err := a.Authenticate(context.Background(), h); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("revoked key after TTL: %v; want ErrInvalidKey", err)
	}
}

func BenchmarkRandomString(b *testing.B) {
	for i := 0; i < b.N; i++ {
		RandomString(24)
	}
}

func TestSortRecords(t *testing.T) {
	rs := []Record{{ID: "key_c", Created: 2}, {ID: "key_b", Created: 1}, {ID: "key_a", Created: 2}, {ID: "key_d", Created: 0}}
	SortRecords(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.ID)
	}
	if want := "key_d key_b key_a key_c"; strings.Join(got, " ") != want {
		t.Errorf("SortRecords order = %v; want %s", got, want)
	}
}

// TestAuthenticateCachesMisses: an unknown key repeated costs one store
// read per TTL, and a key created afterwards works at once.
func TestAuthenticateCachesMisses(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	store := &memKeys{recs: map[string]Record{}}
	a := NewAuthenticator(store, 30*time.Second)
	a.now = func() time.Time { return now }
	unknown, _ := NewKey()
	for i := 0; i < 100; i++ {
		if _, err := a.Authenticate(context.Background(), "Bearer "+string(unknown)); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("unknown key = %v; want ErrInvalidKey", err)
		}
	}
	if store.reads != 1 {
		t.Errorf("store reads for 100 tries of one unknown key = %d; want 1", store.reads)
	}
	fresh, _ := NewKey()
	store.PutKey(context.Background(), NewRecord(fresh, "acme", now))
	if p, err := a.Authenticate(context.Background(), "Bearer "+string(fresh)); err != nil || p.Account != "acme" {
		t.Errorf("a new key = %+v, %v; want it to work at once", p, err)
	}
	now = now.Add(31 * time.Second)
	a.Authenticate(context.Background(), "Bearer "+string(unknown))
	if store.reads != 3 {
		t.Errorf("store reads after the TTL = %d; want the unknown key read again (3)", store.reads)
	}
}
