// Package routetest checks that an adapter takes its keys from a
// route.KeySet: the tests of each keyed adapter (openai, anthropic,
// gemini, elevenlabs, fal, replicate) call CheckKeyPool.
package routetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/genway/genway/shared/route"
)

// CheckKeyPool checks an adapter built with the key pool "k1,k2" against
// a loopback server that reads the key from header and answers 503: its
// KeyIDs are k1's and k2's, and each call sends the key its ctx names
// (route.WithKey), the first key when ctx names none or a key the pool
// lacks, and never another. build makes the adapter for baseURL with the
// keys "k1,k2" and returns it and a function making one call; sent turns
// a key into the header's value ("Bearer k1").
func CheckKeyPool(t *testing.T, header string, sent func(key string) string,
	build func(baseURL, keys string) (route.Keyed, func(ctx context.Context))) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(header))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p, call := build(srv.URL, "k1, k2")
	if ids := p.KeyIDs(); !slices.Equal(ids, []string{route.KeyID("k1"), route.KeyID("k2")}) {
		t.Errorf("KeyIDs() = %v; want the ids of k1 and k2", ids)
	}
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no key named: the first", context.Background(), sent("k1")},
		{"k2 named", route.WithKey(context.Background(), route.KeyID("k2")), sent("k2")},
		{"a key the pool lacks: the first", route.WithKey(context.Background(), route.KeyID("gone")), sent("k1")},
	}
	for _, tt := range tests {
		mu.Lock()
		got = nil
		mu.Unlock()
		call(tt.ctx)
		mu.Lock()
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: sent %s %q; want %q", tt.name, header, got, tt.want)
		}
		mu.Unlock()
	}
}
