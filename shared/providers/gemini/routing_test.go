package gemini

// The routing table: each way the Gemini API fails, the route.Failure it
// is classified as, and the policy's action. Error bodies are
// google.rpc.Status objects ({"error": {"code", "message", "status",
// "details"}}: https://ai.google.dev/gemini-api/docs/troubleshooting). In a
// 200 stream the same object comes as an event's data
// (diegosouzapw/OmniRoute#4177: 503 UNAVAILABLE mid-stream) or as raw,
// indented JSON after the last event (vercel/ai#5217); a candidate may
// finish with MALFORMED_FUNCTION_CALL and no content (pydantic/pydantic-ai#3095).

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
	status := func(code int, rpc, details string, h http.Header) a {
		return a{Status: code, Header: h, ContentType: "application/json",
			Body: fmt.Sprintf(`{"error":{"code":%d,"message":"m","status":%q%s}}`, code, rpc, details)}
	}
	const badKey = `,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]`
	const retry38 = `,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]`
	tests := []struct {
		name   string
		a      a
		stream bool
		want   r
	}{
		// HTTP statuses.
		{"400 INVALID_ARGUMENT", status(400, "INVALID_ARGUMENT", "", nil), false, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"400 API_KEY_INVALID is our key", status(400, "INVALID_ARGUMENT", badKey, nil), true, r{Class: route.KeyRefused, Status: 401, Action: route.Next}},
		{"403 PERMISSION_DENIED", status(403, "PERMISSION_DENIED", "", nil), false, r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"404 NOT_FOUND", status(404, "NOT_FOUND", "", nil), true, r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"429 RESOURCE_EXHAUSTED with RetryInfo", status(429, "RESOURCE_EXHAUSTED", retry38, nil), false,
			r{Class: route.RateLimited, Status: 429, RetryAfter: 38 * time.Second, Action: route.Next}},
		{"429 with a short Retry-After", status(429, "RESOURCE_EXHAUSTED", "", http.Header{"Retry-After": {"1"}}), true,
			r{Class: route.RateLimited, Status: 429, RetryAfter: time.Second, Action: route.Again}},
		{"500 INTERNAL", status(500, "INTERNAL", "", nil), false, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"503 UNAVAILABLE", status(503, "UNAVAILABLE", "", nil), true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"504 DEADLINE_EXCEEDED", status(504, "DEADLINE_EXCEEDED", "", nil), false, r{Class: route.Transient, Status: 504, Action: route.Again}},
		{"error in a 200 body", a{ContentType: "application/json", Body: `{"error":{"code":503,"message":"m","status":"UNAVAILABLE"}}`}, false,
			r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"malformed 200 body", a{ContentType: "application/json", Body: `<html>hi</html>`}, false, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},
		{"MALFORMED_FUNCTION_CALL answer", a{ContentType: "application/json",
			Body: `{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL","index":0}],"usageMetadata":{"promptTokenCount":5}}`}, false,
			r{Class: route.Transient, Reason: "model_error", Action: route.Again}},

		// In-band stream errors.
		{"UNAVAILABLE after content", sse("stream_error.sse"), true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"UNAVAILABLE before content", sse("inband_unavailable_first.sse"), true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"RESOURCE_EXHAUSTED in the stream", sse("inband_exhausted.sse"), true,
			r{Class: route.RateLimited, Status: 429, RetryAfter: 38 * time.Second, Action: route.Next}},
		{"a status name without a code", a{ContentType: "text/event-stream", Body: `data: {"error":{"message":"m","status":"UNAVAILABLE"}}` + "\n\n"}, true,
			r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"raw JSON error after the last event", sse("inband_raw_json.sse"), true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"MALFORMED_FUNCTION_CALL finish", sse("malformed_function_call.sse"), true, r{Class: route.Transient, Reason: "model_error", Action: route.Again}},

		// Dropped and malformed streams.
		{"ends without a finishReason", sse("stream_truncated.sse"), true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection cut mid-stream", a{Cut: true, ContentType: "text/event-stream", Body: string(fixture(t, "stream_truncated.sse"))}, true,
			r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection refused", a{Refused: true}, true, r{Class: route.Transient, Reason: "connection", Action: route.Again}},
		{"malformed event", a{ContentType: "text/event-stream", Body: "data: {nope\n\n"}, true, r{Class: route.Transient, Reason: "malformed", Action: route.Again}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{BaseURL: tt.a.URL(t), APIKey: "k"})
			req := &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			if ue := chattest.CheckRouting(t, err, tt.want); ue.Provider != "gemini" {
				t.Errorf("Provider = %q; want gemini", ue.Provider)
			}
		})
	}
}
