package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
)

// RunSessions checks the admin.SessionStore contract on the store open
// returns: a session is live from AddSession until it expires or
// EndSession ends it, for good; sessions are independent; ending an
// unknown or ended session is no error.
func RunSessions(t *testing.T, open func(t *testing.T) admin.SessionStore) {
	ctx := context.Background()
	s := open(t)
	now := time.Now().Unix() // a store may drop expired sessions by its own clock
	a, b := "sess-"+randomSuffix(t), "sess-"+randomSuffix(t)
	live := func(id string, at int64, want bool) {
		t.Helper()
		if got, err := s.SessionLive(ctx, id, at); err != nil || got != want {
			t.Errorf("SessionLive(%q, %d) = %v, %v; want %v", id, at, got, err, want)
		}
	}
	live(a, now, false) // never added
	for _, id := range []string{a, b} {
		if err := s.AddSession(ctx, id, now+3600); err != nil {
			t.Fatalf("AddSession(%q) = %v", id, err)
		}
	}
	live(a, now, true)
	live(a, now+3599, true)
	live(a, now+3600, false) // expired
	if err := s.EndSession(ctx, a); err != nil {
		t.Fatalf("EndSession(%q) = %v", a, err)
	}
	live(a, now, false)
	live(b, now, true) // another session stays
	for _, id := range []string{a, "sess-never-" + randomSuffix(t)} {
		if err := s.EndSession(ctx, id); err != nil {
			t.Errorf("EndSession(%q) again or unknown = %v; want nil", id, err)
		}
	}
	live(a, now, false)
	// An expired session of the past is no live one, whatever its id.
	c := "sess-" + randomSuffix(t)
	if err := s.AddSession(ctx, c, now-1); err != nil {
		t.Fatal(err)
	}
	live(c, now, false)
}
