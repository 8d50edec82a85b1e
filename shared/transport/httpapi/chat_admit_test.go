package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/providers/openai"
)

// admitCatalog has one priced model and one marked free on an
// OpenAI-compatible provider.
const admitCatalog = `{
  "providers": [{"name": "openai", "kind": "openai"}],
  "models": [
    {"id": "openai/priced", "type": "chat", "provider": "openai",
     "price": {"credits_per_million_input_tokens": 1000, "credits_per_million_output_tokens": 2000}},
    {"id": "openai/free", "type": "chat", "provider": "openai", "price": {"free": true}}
  ]
}`

// countingUpstream is a fake OpenAI chat completions server that counts the
// requests it gets and answers each with a fixed completion or stream.
func countingUpstream(t *testing.T) (base string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

// admitBalances is a chat.Balances with a fixed answer that counts reads.
type admitBalances struct {
	acct  credits.Account
	err   error
	reads atomic.Int64
}

func (b *admitBalances) Account(context.Context, string) (credits.Account, error) {
	b.reads.Add(1)
	return b.acct, b.err
}

// countingRecorder is an in-memory UsageRecorder that counts the credits
// charged.
type countingRecorder struct {
	mu      sync.Mutex
	calls   int
	charged credits.Amount
}

func (r *countingRecorder) Record(_ context.Context, rec credits.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.charged += rec.Cost
	return nil
}

func (r *countingRecorder) InMemory() bool { return true }

func (*countingRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

// TestChatAdmit: a priced model is refused with 402 insufficient_credits in
// the OpenAI envelope while the account has no credits left, streamed or
// not, before any upstream request and without a charge; a priced model
// with credits, and an unpriced one without any (and without a store read),
// go through.
func TestChatAdmit(t *testing.T) {
	cat, err := catalog.Parse([]byte(admitCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	tests := []struct {
		name      string
		model     string
		available credits.Amount
		storeErr  error
		status    int
		want      []string       // in the response body
		upstream  bool           // the request reaches the upstream
		reads     int64          // of the balance store
		charge    credits.Amount // recorded: 3 prompt and 1 completion tokens, 0.003 + 0.002
	}{
		{"priced, available 0", "openai/priced", 0, nil, http.StatusPaymentRequired,
			[]string{`"type":"insufficient_quota"`, `"code":"insufficient_credits"`, `no credits left for priced model \"openai/priced\"`}, false, 1, 0},
		{"priced, available -5", "openai/priced", -5 * credits.Credit, nil, http.StatusPaymentRequired,
			[]string{`"type":"insufficient_quota"`, `"code":"insufficient_credits"`}, false, 1, 0},
		{"priced, store error", "openai/priced", 10 * credits.Credit, errors.New("dynamodb: connection refused"), http.StatusInternalServerError,
			[]string{`"type":"api_error"`}, false, 1, 0},
		{"priced, available 0.000001", "openai/priced", credits.Micro, nil, http.StatusOK, []string{`"content":"hi"`}, true, 1, 5000},
		{"unpriced, available 0", "openai/free", 0, nil, http.StatusOK, []string{`"content":"hi"`}, true, 0, 0},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name + ", non-stream"
			if stream {
				name = tt.name + ", stream"
			}
			t.Run(name, func(t *testing.T) {
				base, calls := countingUpstream(t)
				bal := &admitBalances{acct: credits.Account{ID: "acct", Balance: tt.available, Available: tt.available}, err: tt.storeErr}
				rec := &countingRecorder{}
				gw := chat.NewGateway(chat.Config{Catalog: cat, Balances: bal, Usage: rec,
					Providers: map[string]chat.Provider{"openai": openai.New(openai.Config{BaseURL: base + "/v1", APIKey: "k"})}})
				srv := chatServer(t, gw)
				body := `{"model":"` + tt.model + `","messages":[{"role":"user","content":"hello"}]`
				if stream {
					body += `,"stream":true`
				}
				body += "}"
				resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatalf("POST = %v", err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("read body = %v", err)
				}
				if resp.StatusCode != tt.status {
					t.Errorf("POST %s status = %d; want %d (body %s)", body, resp.StatusCode, tt.status, b)
				}
				for _, w := range tt.want {
					if !strings.Contains(string(b), w) {
						t.Errorf("POST %s body = %s; want it to contain %s", body, b, w)
					}
				}
				if tt.status != http.StatusOK {
					if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
						t.Errorf("POST %s Content-Type = %q; want application/json (an error, not a stream)", body, ct)
					}
					if strings.Contains(string(b), "dynamodb") {
						t.Errorf("POST %s body = %s; want no store internals", body, b)
					}
				}
				if got := calls.Load() > 0; got != tt.upstream {
					t.Errorf("POST %s reached the upstream = %v (%d requests); want %v", body, got, calls.Load(), tt.upstream)
				}
				if got := bal.reads.Load(); got != tt.reads {
					t.Errorf("POST %s balance reads = %d; want %d", body, got, tt.reads)
				}
				srv.Close() // waits for the handler, and so for RecordUsage
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if wantCalls := map[bool]int{false: 0, true: 1}[tt.upstream]; rec.calls != wantCalls {
					t.Errorf("POST %s usage records = %d; want %d", body, rec.calls, wantCalls)
				}
				if rec.charged != tt.charge {
					t.Errorf("POST %s charged %s credits; want %s", body, rec.charged, tt.charge)
				}
			})
		}
	}
}
