package openai

// The routing table: each way an OpenAI-compatible upstream fails, the
// route.Failure it is classified as, and the policy's action. The in-band
// fixtures (testdata/inband_*.sse, stream_error.sse) follow what servers
// send inside a 200 stream:
//   - OpenAI: {"error": {"message", "type": "server_error", "param", "code": null}}
//     after content (a captured gpt-4.1 stream), and the rate limit and
//     quota errors of https://platform.openai.com/docs/guides/error-codes.
//   - OpenRouter (https://openrouter.ai/docs/api/reference/errors-and-debugging,
//     "Handling errors during streaming"): a chunk with a top-level error
//     {code, message} (code a number or a name) and a choice with
//     finish_reason "error".
//   - vLLM: {"error": {"message", "type": "BadRequestError"|"InternalServerError",
//     "param", "code": 400|500}} then [DONE] (vllm-project/vllm#40986).
//   - Hugging Face TGI: {"error": "...", "error_type": "validation"}
//     (huggingface/huggingface_hub#2558).
//   - A raw JSON error written without "data:" (community.openai.com,
//     "what would a stream look like if an error occurs").

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/route"
)

func TestRouting(t *testing.T) {
	type r = chattest.Routing
	tests := []struct {
		name   string
		up     *upstream // nil: see drop
		stream bool
		drop   string // a stream cut after this body; "refused": no server at all
		want   r
	}{
		// HTTP statuses.
		{"400", &upstream{status: 400, body: `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`}, false, "", r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"401", &upstream{status: 401, body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}, false, "", r{Class: route.KeyRefused, Status: 401, Action: route.Next}},
		{"403", &upstream{status: 403, body: `{"error":{"message":"Country, region, or territory not supported","code":"unsupported_country_region_territory"}}`}, false, "", r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"404", &upstream{status: 404, body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`}, false, "", r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"408", &upstream{status: 408}, false, "", r{Class: route.Transient, Status: 408, Action: route.Again}},
		{"429 long Retry-After", &upstream{status: 429, header: map[string]string{"Retry-After": "20"}, body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}, true, "",
			r{Class: route.RateLimited, Status: 429, RetryAfter: 20 * time.Second, Action: route.Next}},
		{"429 Retry-After-Ms", &upstream{status: 429, header: map[string]string{"Retry-After-Ms": "800"}}, false, "",
			r{Class: route.RateLimited, Status: 429, RetryAfter: 800 * time.Millisecond, Action: route.Again}},
		{"500", &upstream{status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`}, true, "", r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"503 Retry-After", &upstream{status: 503, header: map[string]string{"Retry-After": "1"}}, false, "",
			r{Class: route.Transient, Status: 503, RetryAfter: time.Second, Action: route.Again}},
		{"200 body with an OpenRouter error", &upstream{body: `{"error":{"code":502,"message":"Provider returned error"}}`}, false, "", r{Class: route.Transient, Status: 502, Action: route.Again}},
		{"200 body with finish_reason error", &upstream{body: `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"error"}]}`}, false, "", r{Class: route.Transient, Status: 502, Action: route.Again}},
		{"200 body garbage", &upstream{body: `<html>oops</html>`}, false, "", r{Class: route.Transient, Reason: "malformed", Action: route.Again}},

		// In-band stream errors.
		{"OpenAI server_error after content", sseUp(t, "stream_error.sse"), true, "", r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"OpenAI rate limit before content", sseUp(t, "inband_rate_limit.sse"), true, "", r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"OpenAI insufficient_quota", sseUp(t, "inband_insufficient_quota.sse"), true, "", r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"OpenRouter numeric 529 before content", sseUp(t, "inband_openrouter_529.sse"), true, "", r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"OpenRouter server_error after content", sseUp(t, "inband_openrouter_server_error.sse"), true, "", r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"vLLM 400 in-band", sseUp(t, "inband_vllm_400.sse"), true, "", r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"vLLM 500 before the first token", sseUp(t, "inband_vllm_500.sse"), true, "", r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"TGI validation error", sseUp(t, "inband_tgi_validation.sse"), true, "", r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"SSE error event", sseUp(t, "inband_event_error.sse"), true, "", r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"raw JSON error, no data: field", sseUp(t, "inband_raw_json.sse"), true, "", r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"finish_reason error alone", sseUp(t, "inband_finish_error.sse"), true, "", r{Class: route.Transient, Status: 502, Action: route.Again}},

		// Dropped and malformed streams.
		{"ends without [DONE] or a finish_reason", sseUp(t, "stream_truncated.sse"), true, "", r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection cut mid-stream", nil, true, fixture(t, "stream_truncated.sse"), r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection refused", nil, true, "refused", r{Class: route.Transient, Reason: "connection", Action: route.Again}},
		{"malformed chunk", sseUp(t, "stream_garbage.sse"), true, "", r{Class: route.Transient, Reason: "malformed", Action: route.Again}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var url string
			switch {
			case tt.up != nil:
				srv := httptest.NewServer(tt.up)
				defer srv.Close()
				url = srv.URL
			case tt.drop == "refused":
				url = chattest.ClosedURL(t)
			default:
				url = chattest.CutServer(t, "text/event-stream", tt.drop)
			}
			p := New(Config{BaseURL: url, APIKey: "k"})
			req := &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			if ue := chattest.CheckRouting(t, err, tt.want); ue.Provider != "openai" {
				t.Errorf("Provider = %q; want openai", ue.Provider)
			}
		})
	}
}

// sseUp is an upstream answering 200 with the event stream of fixture name.
func sseUp(t *testing.T, name string) *upstream {
	return &upstream{header: map[string]string{"Content-Type": "text/event-stream"}, body: fixture(t, name)}
}
