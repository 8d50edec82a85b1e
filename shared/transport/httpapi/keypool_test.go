package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/route"
)

// keyPoolUpstream is a fake OpenAI chat completions server that answers
// each key as refuse says (a status and its headers; none: a completion)
// and counts the calls of each key.
type keyPoolUpstream struct {
	refuse map[string]func(w http.ResponseWriter)
	mu     sync.Mutex
	calls  map[string]int
}

func (u *keyPoolUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	u.mu.Lock()
	u.calls[key]++
	u.mu.Unlock()
	if f := u.refuse[key]; f != nil {
		f(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
}

// routeRetries reads genway_route_retries_total for model from
// metrics.Default: the retries the router made after a wait.
func routeRetries(t *testing.T, model string) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := metrics.Default.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "genway_route_retries_total{") && strings.Contains(line, `model="`+model+`"`) {
			return line
		}
	}
	return "none"
}

// TestKeyPool runs the gateway as genway serve builds it
// (upstreams.New from the environment) with OPENAI_API_KEY holding two
// keys, against a fake OpenAI whose first key is refused: every request
// succeeds with the second key, the first is tried once and then rests,
// no attempt waits, and the log names the refused key by its KeyID only.
func TestKeyPool(t *testing.T) {
	const k1, k2 = "sk-test-first-secret", "sk-test-second-secret"
	const model = "openai/gpt-4o-mini"
	tests := []struct {
		name        string
		refuse      func(w http.ResponseWriter)
		wantFirst   string // the first request's attempts header
		wantLogLine int    // log lines naming k1's id
	}{
		{"429 with Retry-After 30", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		}, model + "=429, " + model + "=200", 0},
		{"401", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}, model + "=401, " + model + "=200", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &keyPoolUpstream{refuse: map[string]func(http.ResponseWriter){k1: tt.refuse}, calls: map[string]int{}}
			up := httptest.NewServer(fake)
			defer up.Close()
			vars := map[string]string{"OPENAI_API_KEY": k1 + "," + k2, "OPENAI_BASE_URL": up.URL + "/v1"}
			hc := upstreams.NewHTTPClient()
			defer hc.CloseIdleConnections()
			cat := testCatalog(t)
			providers, err := upstreams.New(cat, upstreams.Settings{Setup: catalog.Setup{Vars: vars, NoSynthetic: true}}, hc)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			// A budget well under the Retry-After: a request that waited for
			// k1's rest instead of taking k2 would fail, not hang.
			router := route.New(route.Policy{Budget: 10 * time.Second}, slog.New(slog.NewJSONHandler(&logs, nil)))
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Router: router})
			srv := chatServer(t, gw)
			retries := routeRetries(t, model)

			for i := range 10 {
				resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
				attempts := resp.Header.Get(AttemptsHeader)
				switch want := model + "=200"; {
				case i == 0 && attempts != tt.wantFirst:
					t.Errorf("request 0: %s = %q; want %q", AttemptsHeader, attempts, tt.wantFirst)
				case i > 0 && attempts != want:
					t.Errorf("request %d: %s = %q; want %q (k1 rests)", i, AttemptsHeader, attempts, want)
				}
			}
			fake.mu.Lock()
			calls := fmt.Sprint(fake.calls[k1], " ", fake.calls[k2])
			fake.mu.Unlock()
			if calls != "1 10" {
				t.Errorf("calls of k1, k2 = %s; want 1 10", calls)
			}
			if got := routeRetries(t, model); got != retries {
				t.Errorf("retries after a wait: %s, was %s; want none (another key at once)", got, retries)
			}
			out := logs.String()
			if n := strings.Count(out, route.KeyID(k1)); n != tt.wantLogLine {
				t.Errorf("log names k1's id %d times; want %d:\n%s", n, tt.wantLogLine, out)
			}
			if strings.Contains(out, "secret") || strings.Contains(out, route.KeyID(k2)) {
				t.Errorf("log shows a key, or the good key's id:\n%s", out)
			}
		})
	}
}
