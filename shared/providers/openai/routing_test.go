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
	"net/http"
	"testing"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/route"
)

func TestRouting(t *testing.T) {
	type r = chattest.Routing
	type a = chattest.Answer
	sse := func(name string) a { return a{ContentType: "text/event-stream", Body: fixture(t, name)} }
	tests := []struct {
		name   string
		a      a
		stream bool
		want   r
	}{
		// HTTP statuses.
		{"400", a{Status: 400, Body: `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`}, false, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"401", a{Status: 401, Body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}, false, r{Class: route.KeyRefused, Status: 401, Action: route.Next}},
		{"403", a{Status: 403, Body: `{"error":{"message":"Country, region, or territory not supported","code":"unsupported_country_region_territory"}}`}, false, r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"403 OpenRouter moderation is the input's", a{Status: 403, Body: `{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["violence"],"flagged_input":"...","provider_name":"OpenAI","model_slug":"openai/gpt-4o"}}}`}, false,
			r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"404", a{Status: 404, Body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`}, false, r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"408", a{Status: 408}, false, r{Class: route.Transient, Status: 408, Action: route.Again}},
		{"429 long Retry-After", a{Status: 429, Header: http.Header{"Retry-After": {"20"}}, Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}, true,
			r{Class: route.RateLimited, Status: 429, RetryAfter: 20 * time.Second, Action: route.Next}},
		{"429 Retry-After-Ms", a{Status: 429, Header: http.Header{"Retry-After-Ms": {"800"}}}, false,
			r{Class: route.RateLimited, Status: 429, RetryAfter: 800 * time.Millisecond, Action: route.Again}},
		{"500", a{Status: 500, Body: `{"error":{"message":"The server had an error","type":"server_error"}}`}, true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"503 Retry-After", a{Status: 503, Header: http.Header{"Retry-After": {"1"}}}, false,
			r{Class: route.Transient, Status: 503, RetryAfter: time.Second, Action: route.Again}},
		{"200 body with an OpenRouter error", a{Body: `{"error":{"code":502,"message":"Provider returned error"}}`}, false, r{Class: route.Transient, Status: 502, Action: route.Again}},
		{"200 body with finish_reason error", a{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"error"}]}`}, false, r{Class: route.Transient, Status: 502, Action: route.Again}},
		{"200 body garbage", a{Body: `<html>oops</html>`}, false, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},

		// In-band stream errors.
		{"OpenAI server_error after content", sse("stream_error.sse"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"OpenAI rate limit before content", sse("inband_rate_limit.sse"), true, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"OpenAI insufficient_quota", sse("inband_insufficient_quota.sse"), true, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"OpenRouter numeric 529 before content", sse("inband_openrouter_529.sse"), true, r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"OpenRouter server_error after content", sse("inband_openrouter_server_error.sse"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"vLLM 400 in-band", sse("inband_vllm_400.sse"), true, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"vLLM 500 before the first token", sse("inband_vllm_500.sse"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"TGI validation error", sse("inband_tgi_validation.sse"), true, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"SSE error event", sse("inband_event_error.sse"), true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"raw JSON error, no data: field", sse("inband_raw_json.sse"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"finish_reason error alone", sse("inband_finish_error.sse"), true, r{Class: route.Transient, Status: 502, Action: route.Again}},

		// Dropped and malformed streams.
		{"ends without [DONE] or a finish_reason", sse("stream_truncated.sse"), true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection cut mid-stream", a{Cut: true, ContentType: "text/event-stream", Body: fixture(t, "stream_truncated.sse")}, true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection refused", a{Refused: true}, true, r{Class: route.Transient, Reason: "connection", Action: route.Again}},
		{"malformed chunk", sse("stream_garbage.sse"), true, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{BaseURL: tt.a.URL(t), APIKey: "k"})
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
