package bedrock

// The routing table: each way Bedrock's Converse and ConverseStream fail,
// as the real aws-sdk-go-v2 client reads them from the fake runtime, the
// route.Failure it is classified as, and the policy's action. HTTP errors
// carry X-Amzn-ErrorType; inside a 200 ConverseStream an error is an
// exception message of the event stream (internalServerException,
// modelStreamErrorException, serviceUnavailableException,
// throttlingException, validationException: API_runtime_ConverseStreamOutput.html),
// which the SDK's stream reader returns from Err().

import (
	"context"
	"net/http"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/route"
)

func TestRouting(t *testing.T) {
	type r = chattest.Routing
	tests := []struct {
		name    string
		status  int    // an HTTP error status, with errType; 0: script
		errType string // X-Amzn-ErrorType
		script  string // a testdata stream script, for a 200 ConverseStream
		stream  bool
		want    r
	}{
		// HTTP statuses.
		{"400 ValidationException", 400, "ValidationException", "", false, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"403 AccessDeniedException", 403, "AccessDeniedException", "", true, r{Class: route.KeyRefused, Status: 403, Action: route.Next}},
		{"404 ResourceNotFoundException", 404, "ResourceNotFoundException", "", false, r{Class: route.Unsupported, Status: 404, Action: route.Next}},
		{"408 ModelTimeoutException", 408, "ModelTimeoutException", "", true, r{Class: route.Transient, Status: 408, Action: route.Again}},
		{"429 ThrottlingException", 429, "ThrottlingException", "", false, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"429 ModelNotReadyException", 429, "ModelNotReadyException", "", true, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"400 ServiceQuotaExceededException", 400, "ServiceQuotaExceededException", "", false, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"424 ModelErrorException", 424, "ModelErrorException", "", false, r{Class: route.Transient, Status: 502, Action: route.Again}},
		{"500 InternalServerException", 500, "InternalServerException", "", true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"503 ServiceUnavailableException", 503, "ServiceUnavailableException", "", false, r{Class: route.Transient, Status: 503, Action: route.Again}},

		// Exceptions inside the event stream.
		{"throttlingException after content", 0, "", "stream_throttled.json", true, r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"serviceUnavailableException", 0, "", "inband_unavailable.json", true, r{Class: route.Transient, Status: 503, Action: route.Again}},
		{"internalServerException first", 0, "", "inband_internal.json", true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"modelStreamErrorException, the model's 500", 0, "", "stream_model_error.json", true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"modelStreamErrorException, the model's 400", 0, "", "inband_model_stream_400.json", true, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"validationException", 0, "", "stream_validation.json", true, r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"an exception the SDK does not know", 0, "", "inband_unknown.json", true, r{Class: route.Transient, Status: 502, Action: route.Again}},

		// Dropped streams.
		{"ends before messageStop", 0, "", "stream_truncated.json", true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.set(func(f *fakeBedrock) {
				f.status, f.errType = 200, ""
				if tt.status != 0 {
					f.status, f.errType = tt.status, tt.errType
				} else {
					f.stream = encodeScript(t, loadScript(t, tt.script))
				}
			})
			req := &chat.Request{Model: nova, Messages: []chat.Message{user("x")}}
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			if ue := chattest.CheckRouting(t, err, tt.want); ue.Provider != "bedrock" {
				t.Errorf("Provider = %q; want bedrock", ue.Provider)
			}
		})
	}
	t.Run("connection cut mid-stream", func(t *testing.T) {
		body := encodeScript(t, loadScript(t, "stream_truncated.json"))
		url := chattest.CutServer(t, "application/vnd.amazon.eventstream", string(body[:len(body)-7]))
		p := New(newClient(t, url, http.DefaultClient))
		_, err := p.Stream(context.Background(), &chat.Request{Model: nova, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(chat.Delta) error { return nil }))
		chattest.CheckRouting(t, err, r{Class: route.Transient, Reason: "dropped", Action: route.Again})
	})
	t.Run("connection refused", func(t *testing.T) {
		p := New(newClient(t, chattest.ClosedURL(t), http.DefaultClient))
		_, err := p.Stream(context.Background(), &chat.Request{Model: nova, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(chat.Delta) error { return nil }))
		chattest.CheckRouting(t, err, r{Class: route.Transient, Reason: "connection", Action: route.Again})
	})
}
