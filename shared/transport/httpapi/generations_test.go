package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
)

// TestGetGeneration: the caller's own record, in {"data": {...}} with its
// amounts as numbers; another account's, an unknown and an expired id are
// the same 404 in the OpenAI envelope.
func TestGetGeneration(t *testing.T) {
	s, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	for _, a := range []string{"acct", "other"} {
		if _, err := s.Grant(context.Background(), a, credits.Credit, now.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	mine := credits.Record{ID: "chatcmpl-mine", Kind: credits.KindChat, Account: "acct", Key: "key1", ModelAsked: "m", Model: "m", Provider: "openai",
		Attempts: "m=200", Tokens: credits.Tokens{Prompt: 1000, Cached: 400, Completion: 100, Reasoning: 30},
		Rates: credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 150_000, CacheWrite1h: 150_000, Output: 600_000},
		Cost:  150, Status: credits.StatusCompleted, FinishReason: "stop", Stream: true, LatencyMS: 800, FirstTokenMS: 120, At: now.UnixMilli()}
	theirs := mine
	theirs.ID, theirs.Account = "chatcmpl-theirs", "other"
	old := mine
	old.ID, old.Cost, old.Expires = "chatcmpl-old", 0, now.Unix()-1
	for i, err := range s.AddRecords(context.Background(), []credits.Record{mine, theirs, old}) {
		if err != nil {
			t.Fatalf("AddRecords[%d] = %v", i, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/generations/{id}", withAccount(GetGeneration(s, nil)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(id string) (int, string) {
		resp, err := http.Get(srv.URL + "/v1/generations/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := get(mine.ID)
	if status != 200 {
		t.Fatalf("GET own = %d %s; want 200", status, body)
	}
	var got struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"id": `"chatcmpl-mine"`, "kind": `"chat"`, "model": `"m"`, "cost": `0.00015`, "status": `"completed"`, "partial": "false",
		"tokens":     `{"prompt_tokens":1000,"cached_tokens":400,"completion_tokens":100,"reasoning_tokens":30}`,
		"rates":      `{"input":0.15,"cached_input":0.075,"cache_write":0.15,"cache_write_1h":0.15,"output":0.6}`,
		"latency_ms": "800", "first_token_ms": "120", "attempts": `"m=200"`,
	} {
		if string(got.Data[field]) != want {
			t.Errorf("data.%s = %s; want %s", field, got.Data[field], want)
		}
	}
	for _, id := range []string{theirs.ID, old.ID, "chatcmpl-nothing"} {
		status, body := get(id)
		if status != 404 || !strings.Contains(body, `"code":"generation_not_found"`) || strings.Contains(body, "other") {
			t.Errorf("GET %s = %d %s; want the 404 generation_not_found, saying nothing of its owner", id, status, body)
		}
	}
}
