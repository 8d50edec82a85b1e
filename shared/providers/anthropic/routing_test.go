package anthropic

// The routing table: each way the Messages API fails, the route.Failure it
// is classified as, and the policy's action. Error bodies and error events
// have the shape of https://docs.anthropic.com/en/api/errors
// ({"type": "error", "error": {"type", "message"}}, the types' HTTP
// statuses) and https://docs.anthropic.com/en/api/messages-streaming
// ("Error events": an event: error, also after message_start, inside a
// 200 stream, such as overloaded_error).

import (
	"context"
	"fmt"
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
	sse := func(name string) a { return a{ContentType: "text/event-stream", Body: string(fixture(t, name))} }
	event := func(typ string) a { // an error event as the stream's first event
		return a{ContentType: "text/event-stream",
			Body: fmt.Sprintf("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":%q,\"message\":\"m\"}}\n\n", typ)}
	}
	status := func(code int, typ string, h http.Header) a {
		return a{Status: code, Header: h, ContentType: "application/json",
			Body: fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"m"},"request_id":"req_1"}`, typ)}
	}
	tests := []struct {
		name   string
		a      a
		stream bool
		want   r
	}{
		// HTTP statuses.
		{"400", status(400, "invalid_request_error", nil), false, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"401", status(401, "authentication_error", nil), true, r{Class: route.KeyRefused, Status: 401, Action: route.Next}},
		{"403", status(403, "permission_error", nil), false, r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"404", status(404, "not_found_error", nil), false, r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"413", status(413, "request_too_large", nil), false, r{Class: route.Final, Status: 413, Action: route.Stop}},
		{"429 retry-after", status(429, "rate_limit_error", http.Header{"Retry-After": {"17"}}), true,
			r{Class: route.RateLimited, Status: 429, RetryAfter: 17 * time.Second, Action: route.Next}},
		{"429 short retry-after", status(429, "rate_limit_error", http.Header{"Retry-After": {"1"}}), false,
			r{Class: route.RateLimited, Status: 429, RetryAfter: time.Second, Action: route.Again}},
		{"500", status(500, "api_error", nil), false, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"503 not JSON", a{Status: 503, ContentType: "text/plain", Body: "upstream connect error"}, true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"504", status(504, "timeout_error", nil), false, r{Class: route.Transient, Status: 504, Action: route.Again}},
		{"529 overloaded", status(529, "overloaded_error", nil), true, r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"error object in a 200 body", a{ContentType: "application/json", Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, false,
			r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"malformed 200 body", a{ContentType: "application/json", Body: `<html>hi</html>`}, false, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},

		// In-band stream errors.
		{"overloaded after message_start", sse("inband_overloaded_first.sse"), true, r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"overloaded after content", sse("stream_overloaded.sse"), true, r{Class: route.Transient, Status: 529, Action: route.Again}},
		{"rate limit after message_start", sse("inband_rate_limit.sse"), true, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"api_error first", sse("inband_api_error.sse"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"invalid_request_error event", event("invalid_request_error"), true, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"authentication_error event", event("authentication_error"), true, r{Class: route.KeyRefused, Status: 401, Action: route.Next}},
		{"permission_error event", event("permission_error"), true, r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"not_found_error event", event("not_found_error"), true, r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"request_too_large event", event("request_too_large"), true, r{Class: route.Final, Status: 413, Action: route.Stop}},
		{"timeout_error event", event("timeout_error"), true, r{Class: route.Transient, Status: 504, Action: route.Again}},
		{"billing_error event", event("billing_error"), true, r{Class: route.Final, Status: 402, Action: route.Stop}},
		{"unknown error type", event("brand_new_error"), true, r{Class: route.Transient, Status: 500, Action: route.Again}},

		// Dropped and malformed streams.
		{"ends before message_stop", sse("stream_truncated.sse"), true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection cut mid-stream", a{Cut: true, ContentType: "text/event-stream", Body: string(fixture(t, "stream_truncated.sse"))}, true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection refused", a{Refused: true}, true, r{Class: route.Transient, Reason: "connection", Action: route.Again}},
		{"malformed event", a{ContentType: "text/event-stream", Body: "event: message_start\ndata: {nope\n\n"}, true, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},
	}
	// Each row for a translated request, and for a native one (a Messages
	// API client's, sent as it came): classified alike.
	for _, tt := range tests {
		for _, native := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/native=%t", tt.name, native), func(t *testing.T) {
				p := New(Config{BaseURL: tt.a.URL(t), APIKey: "sk-test", Native: []string{chat.APIMessages}})
				req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}
				if native {
					req = nativeRequest(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, 0, nil)
				}
				var err error
				switch {
				case native && tt.stream:
					_, err = p.NativeStream(context.Background(), req, nativeWriter(func(chat.NativeEvent) error { return nil }))
				case native:
					_, err = p.NativeComplete(context.Background(), req)
				case tt.stream:
					_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
				default:
					_, err = p.Complete(context.Background(), req)
				}
				if ue := chattest.CheckRouting(t, err, tt.want); ue.Provider != "anthropic" {
					t.Errorf("Provider = %q; want anthropic", ue.Provider)
				}
			})
		}
	}
}
