package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
)

// TestKeyPool: the OpenAI-compatible provider takes a pool of keys; each
// call sends the key its ctx names (route.WithKey), the first without one,
// and never another.
func TestKeyPool(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, APIKey: "k1, k2"})
	if ids := p.KeyIDs(); !slices.Equal(ids, []string{route.KeyID("k1"), route.KeyID("k2")}) {
		t.Errorf("KeyIDs() = %v; want the ids of k1 and k2", ids)
	}
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no key named: the first", context.Background(), "Bearer k1"},
		{"k2 named", route.WithKey(context.Background(), route.KeyID("k2")), "Bearer k2"},
		{"a key the pool lacks: the first", route.WithKey(context.Background(), route.KeyID("gone")), "Bearer k1"},
	}
	for _, tt := range tests {
		mu.Lock()
		got = nil
		mu.Unlock()
		p.Complete(tt.ctx, &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}})
		mu.Lock()
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: sent %q; want %q", tt.name, got, tt.want)
		}
		mu.Unlock()
	}
}
