package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genway/genway/shared/auth"
)

func TestAccessLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	gw := syntheticGateway(t)
	h := NewMux(log, Route{Method: "POST", Pattern: "/v1/chat/completions", Handler: withPrincipal(ChatCompletions(gw, log))})
	srv := httptest.NewServer(h)
	defer srv.Close()
	secretPrompt := "my secret prompt words"
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"synthetic/echo","messages":[{"role":"user","content":"`+secretPrompt+`"}]}`))
	req.Header.Set("Authorization", "Bearer sk_live_thisisakeythatmustnotbelogged0000000")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no access log line in %s", buf.String())
	}
	want := map[string]any{"method": "POST", "route": "POST /v1/chat/completions", "status": float64(200),
		"account": "acct", "key_id": "key_test", "model": "synthetic/echo", "prompt_tokens": float64(4), "completion_tokens": float64(6)}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access log %s = %v; want %v", k, line[k], v)
		}
	}
	if id, _ := line["request_id"].(string); id == "" || id != resp.Header.Get("X-Request-Id") {
		t.Errorf("request_id %q; want the X-Request-Id %q", id, resp.Header.Get("X-Request-Id"))
	}
	if strings.Contains(buf.String(), "secret prompt") || strings.Contains(buf.String(), "sk_live_thisisakey") {
		t.Errorf("the log holds the prompt or the key: %s", buf.String())
	}
}

// withPrincipal authenticates every request as account acct, key key_test,
// noting it as Authenticated does.
func withPrincipal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		notePrincipal(r.Context(), "acct", "key_test")
		h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{Account: "acct", KeyID: "key_test"})))
	})
}

// TestAccessLogOmittedTools: a Responses request served without its
// hosted tools names them in its access log line, as in its answer's
// header.
func TestAccessLogOmittedTools(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	h := NewMux(log, Route{Method: "POST", Pattern: "/v1/responses", Handler: withPrincipal(Responses(syntheticGateway(t), log))})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"synthetic/echo","input":"hi",
		"tools":[{"type":"web_search"},{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["v"]},{"type":"web_search"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(OmittedToolsHeader); resp.StatusCode != 200 || got != "web_search, file_search" {
		t.Errorf("status %d, %s %q; want 200, web_search, file_search", resp.StatusCode, OmittedToolsHeader, got)
	}
	if !strings.Contains(buf.String(), `"omitted_tools":"web_search,file_search"`) {
		t.Errorf("access log %s; want omitted_tools web_search,file_search", buf.String())
	}
}
