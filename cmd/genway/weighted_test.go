package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWeightedAliasEndToEnd runs chat requests to an alias over two
// OpenAI-compatible upstreams (A weight 3, B weight 1) through genway
// serve: both get traffic, each answer is one target's and named as its,
// and usage and credits are recorded per target at its price, none for
// the alias. GET /v1/models lists the alias with its targets.
func TestWeightedAliasEndToEnd(t *testing.T) {
	a := &chaosUpstream{name: "A", rng: rand.New(rand.NewPCG(1, 2))}
	b := &chaosUpstream{name: "B", rng: rand.New(rand.NewPCG(3, 4))}
	upA, upB := httptest.NewServer(a), httptest.NewServer(b)
	defer upA.Close()
	defer upB.Close()
	s := startServer(t, t.TempDir(), map[string]string{
		"GENWAY_CATALOG": "testdata/weighted_catalog.json", "GENWAY_ADMIN_TOKEN": testAdminToken,
		"OPENAI_API_KEY": "sk-a", "OPENAI_BASE_URL": upA.URL, "GROQ_API_KEY": "gsk-b", "GROQ_BASE_URL": upB.URL,
		"GENWAY_DEV_CREDITS": "1000000", "GENWAY_USAGE_FLUSH": "50ms",
	})

	var list struct {
		Data []struct {
			ID           string          `json:"id"`
			OwnedBy      string          `json:"owned_by"`
			Capabilities json.RawMessage `json:"capabilities"`
			Targets      json.RawMessage `json:"targets"`
		} `json:"data"`
	}
	if code, _ := s.do(t, "GET", "/v1/models", nil, nil, &list); code != 200 || len(list.Data) != 3 {
		t.Fatalf("GET /v1/models = %d, %d models; want 3", code, len(list.Data))
	}
	al := list.Data[0] // "balanced" sorts first
	if al.ID != "balanced" || al.OwnedBy != "genway" ||
		string(al.Targets) != `[{"model":"openai/gpt-4o-mini","weight":3},{"model":"groq/llama-3.3-70b-versatile","weight":1}]` ||
		string(al.Capabilities) != `{"vision":false,"reasoning":false,"streaming":true,"tools":true,"structured_outputs":false}` {
		t.Errorf("alias listed as %s owned by %s, targets %s, capabilities %s", al.ID, al.OwnedBy, al.Targets, al.Capabilities)
	}

	// 60 requests at 3:1: that either target gets none has a probability
	// below 1e-7.
	const n = 60
	served := map[string]int64{}
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range n {
		stream := i%2 == 1
		req, _ := http.NewRequest("POST", s.base+"/v1/chat/completions",
			strings.NewReader(fmt.Sprintf(`{"model":"balanced","stream":%v,"messages":[{"role":"user","content":"hi %d"}]}`, stream, i)))
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var model, problem string
		if stream {
			model, problem = checkChatStream(resp.Body)
		} else {
			var c struct {
				Model   string `json:"model"`
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
				problem = fmt.Sprintf("answer %+v, %v", c, err)
			} else {
				model, problem = c.Model, answerOf(c.Model, c.Choices[0].Message.Content)
			}
		}
		attempts := resp.Header.Get("X-Genway-Attempts")
		resp.Body.Close()
		if resp.StatusCode != 200 || problem != "" || attempts != model+"=200" {
			t.Fatalf("request %d: status %d, attempts %q: %s", i, resp.StatusCode, attempts, problem)
		}
		served[model]++
	}
	t.Logf("%d requests: A answered %d, B %d", n, served[chaosA], served[chaosB])
	if served[chaosA] == 0 || served[chaosB] == 0 || served[chaosA]+served[chaosB] != n {
		t.Errorf("served A %d, B %d of %d; want both some", served[chaosA], served[chaosB], n)
	}
	if a.calls.Load() != served[chaosA] || b.calls.Load() != served[chaosB] {
		t.Errorf("upstream calls A %d, B %d; want %v", a.calls.Load(), b.calls.Load(), served)
	}

	// Usage per target, at its price (A: 5 credits a completion, B: 10);
	// none for the alias.
	var usage map[string][2]int64
	for deadline := time.Now().Add(guardWait); ; time.Sleep(50 * time.Millisecond) {
		usage = adminUsage(t, s)
		if usage[chaosA][0]+usage[chaosB][0] >= n || time.Now().After(deadline) {
			break
		}
	}
	if usage[chaosA] != [2]int64{served[chaosA], 5 * served[chaosA]} || usage[chaosB] != [2]int64{served[chaosB], 10 * served[chaosB]} || len(usage) != 2 {
		t.Errorf("usage (requests, credits) %v; want A %v, B %v and nothing else", usage,
			[2]int64{served[chaosA], 5 * served[chaosA]}, [2]int64{served[chaosB], 10 * served[chaosB]})
	}
}
