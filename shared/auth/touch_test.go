package auth

import (
	"context"
	"testing"
	"time"
)

// touchKeys is memKeys that records TouchKey calls.
type touchKeys struct {
	memKeys
	touches []int64
}

func (m *touchKeys) TouchKey(ctx context.Context, hash string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touches = append(m.touches, at.Unix())
	r := m.recs[hash]
	r.LastUsed = at.Unix()
	m.recs[hash] = r
	return nil
}

// TestLastUsed: a key's LastUsed is written on its first use and then at
// most once per TouchEvery per process, whatever the request rate, and
// never for a revoked key.
func TestLastUsed(t *testing.T) {
	key, _ := NewKey()
	now := time.Unix(1_700_000_000, 0)
	store := &touchKeys{memKeys: memKeys{recs: map[string]Record{}}}
	rec := NewRecord(key, "acme", now)
	store.PutKey(context.Background(), rec)
	a := NewAuthenticator(store, 30*time.Second)
	a.now = func() time.Time { return now }
	auth := func() {
		if _, err := a.Authenticate(context.Background(), "Bearer "+string(key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		advance time.Duration
		n       int
		want    int // touches so far
	}{
		{0, 5, 1},                  // first use: one write
		{10 * time.Minute, 100, 1}, // busy, within the hour: none more
		{51 * time.Minute, 1, 2},   // an hour after the first write
		{30 * time.Minute, 10, 2},
	} {
		now = now.Add(step.advance)
		for range step.n {
			auth()
		}
		if len(store.touches) != step.want {
			t.Fatalf("after %v: %d touches; want %d", step.advance, len(store.touches), step.want)
		}
	}
	store.RevokeKey(context.Background(), rec.ID, now)
	now = now.Add(2 * time.Hour)
	a.Authenticate(context.Background(), "Bearer "+string(key))
	if len(store.touches) != 2 {
		t.Errorf("a revoked key was touched")
	}
}
