package upstreams_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/upstreams"
)

// TestOpenAIKindAsksStreamUsage: every provider of kind openai in the
// shipped catalog (OpenAI and the compatible servers) asks its streams
// for usage (stream_options.include_usage), so that a stream's usage is
// the upstream's own; one that sends none anyway is charged by the
// gateway's estimate.
func TestOpenAIKindAsksStreamUsage(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		json.Unmarshal(b, &body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	env := map[string]string{}
	var names []string
	for _, p := range cat.Providers {
		if p.Kind != "openai" {
			continue
		}
		names = append(names, p.Name)
		env[p.BaseURLEnv] = srv.URL + "/v1"
		if p.KeyEnv != "" {
			env[p.KeyEnv] = "k"
		}
	}
	if len(names) < 2 {
		t.Fatalf("openai-kind providers of the catalog = %v; want OpenAI and the compatible ones", names)
	}
	provs, err := upstreams.New(cat, upstreams.Settings{Setup: catalog.Setup{Vars: env, NoSynthetic: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var m *catalog.Model
			for i := range cat.Models {
				if cat.Models[i].Provider == name && cat.Models[i].Type == catalog.TypeChat {
					m = &cat.Models[i]
					break
				}
			}
			prov, ok := provs[name]
			if m == nil || !ok {
				t.Skipf("provider %s: no chat model (%v) or not configured (%v)", name, m != nil, ok)
			}
			mu.Lock()
			bodies = nil
			mu.Unlock()
			req := &chat.Request{Model: m, Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Text: "hi"}}}}}
			resp, err := prov.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			if err != nil {
				t.Fatalf("Stream = %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 1 {
				t.Fatalf("%s: the upstream got %d requests; want 1", name, len(bodies))
			}
			if got := string(bodies[0]["stream_options"]); got != `{"include_usage":true}` {
				t.Errorf("%s stream request stream_options = %s; want {\"include_usage\":true}", name, got)
			}
			if resp.Usage.PromptTokens != 1 || resp.Usage.CompletionTokens != 1 {
				t.Errorf("%s stream usage = %+v; want the upstream's (1, 1)", name, resp.Usage)
			}
		})
	}
}
