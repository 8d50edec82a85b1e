package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
)

// TestVendorFailuresAlike: a vendor's error status is answered the same
// whichever domain met it (chat's *chat.UpstreamError, an image request's
// *images.VendorError around a jobs error): one route.VendorFailure, one
// mapping, the same status, code, message and Retry-After, and the same
// Messages API envelope.
func TestVendorFailuresAlike(t *testing.T) {
	tests := []struct {
		status int
		words  string
		code   string
	}{
		{400, "Invalid size.", "upstream_invalid_request"},
		{400, "", "upstream_invalid_request"},
		{404, "", "upstream_invalid_request"},
		{401, "bad key sk-123", "upstream_error"},
		{403, "", "upstream_error"},
		{408, "", "upstream_timeout"},
		{429, "slow down", "upstream_rate_limited"},
		{500, "internals", "upstream_error"},
		{502, "", "upstream_error"},
		{503, "", "upstream_unavailable"},
		{504, "", "upstream_timeout"},
		{529, "", "upstream_unavailable"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %q", tt.status, tt.words), func(t *testing.T) {
			h := http.Header{"Retry-After": {"3"}}
			chatErr := &route.AttemptsError{Err: fmt.Errorf("m: %w", chat.StatusError("acme", tt.status, h, tt.words, nil))}
			imageErr := &route.AttemptsError{Err: &images.VendorError{Provider: "acme", Model: "m",
				Err: jobs.StatusError("generate", tt.status, h, jobs.Refusal{Message: tt.words})}}
			cs, cenv, ce := errorEnvelope(chatErr, "req-1")
			is, ienv, ie := errorEnvelope(imageErr, "req-1")
			if cs != is || *cenv.Error.Code != *ienv.Error.Code || cenv.Error.Message != ienv.Error.Message || ce.RetryAfter != ie.RetryAfter {
				t.Errorf("chat's answer %d %s %q (Retry-After %v); an image's %d %s %q (Retry-After %v): want the same",
					cs, *cenv.Error.Code, cenv.Error.Message, ce.RetryAfter, is, *ienv.Error.Code, ienv.Error.Message, ie.RetryAfter)
			}
			if *cenv.Error.Code != tt.code {
				t.Errorf("code = %s; want %s", *cenv.Error.Code, tt.code)
			}
			ca, _ := anthropicError(cenv)
			ia, _ := anthropicError(ienv)
			if ca != ia {
				t.Errorf("Messages API status: chat's %d, an image's %d; want the same", ca, ia)
			}
		})
	}
}

// TestVendorAPIErrorKinds: each kind of route.Fault is answered with its
// status, code and message; only Message is ever the vendor's words.
func TestVendorAPIErrorKinds(t *testing.T) {
	tests := []struct {
		f      route.Fault
		status int
		code   string
		msg    string
		retry  string
	}{
		{route.Fault{Kind: route.VendorContentPolicy, Provider: "acme", Message: "Flagged."}, 400, "content_policy", "Flagged.", ""},
		{route.Fault{Kind: route.VendorContentPolicy, Provider: "acme"}, 400, "content_policy", "The acme provider refused the prompt.", ""},
		{route.Fault{Kind: route.VendorRejected, Provider: "acme", Message: "Too long."}, 400, "upstream_invalid_request", "Too long.", ""},
		{route.Fault{Kind: route.VendorRejected, Provider: "acme"}, 400, "upstream_invalid_request", "The upstream provider rejected the request.", ""},
		{route.Fault{Kind: route.VendorRateLimited, Provider: "acme"}, 429, "upstream_rate_limited", "The acme provider is rate limiting requests; retry later.", "1s"},
		{route.Fault{Kind: route.VendorUnavailable, Provider: "acme", Status: 529}, 503, "upstream_unavailable", "The acme provider is unavailable.", ""},
		{route.Fault{Kind: route.VendorTimeout, Provider: "acme"}, 504, "upstream_timeout", "The acme provider did not answer in time.", ""},
		{route.Fault{Kind: route.VendorFailed, Provider: "acme", Status: 500}, 502, "upstream_error", "The acme provider failed (request id req-1).", ""},
		{route.Fault{Kind: route.VendorFailed, Provider: "acme", Message: "A file of type image/svg+xml."}, 502, "upstream_error", "A file of type image/svg+xml.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.f.Kind.String(), func(t *testing.T) {
			e := vendorAPIError(tt.f, "req-1")
			status, _ := statusOf(e.Kind)
			retry := ""
			if e.RetryAfter > 0 {
				retry = e.RetryAfter.String()
			}
			if status != tt.status || e.Code != tt.code || e.Message != tt.msg || retry != tt.retry {
				t.Errorf("vendorAPIError(%+v) = %d %s %q retry %q; want %d %s %q retry %q", tt.f, status, e.Code, e.Message, retry,
					tt.status, tt.code, tt.msg, tt.retry)
			}
			if e.Kind == apierr.Internal {
				t.Errorf("vendorAPIError(%+v) is an internal error", tt.f)
			}
		})
	}
}

// TestServe: a handler's returned error is answered by serve in the
// request's API shape (the OpenAI envelope; Anthropic's on the Messages
// API, with its request-id), with Retry-After where the error has one; a
// handler that answered itself and returns nil is left as it wrote.
func TestServe(t *testing.T) {
	tests := []struct {
		name, path string
		err        error
		status     int
		body       string
		retry      string
	}{
		{"answered", "/v1/models", nil, 200, `{"ok":true}` + "\n", ""},
		{"refused", "/v1/models", apierr.Invalidf("type", "invalid_value", "Bad type."), 400,
			`{"error":{"message":"Bad type.","type":"invalid_request_error","param":"type","code":"invalid_value"}}` + "\n", ""},
		{"a vendor's 429", "/v1/images/generations", chat.StatusError("acme", 429, http.Header{"Retry-After": {"4"}}, "", nil), 429,
			`{"error":{"message":"The acme provider is rate limiting requests; retry later.","type":"rate_limit_error","param":null,"code":"upstream_rate_limited"}}` + "\n", "4"},
		{"internal", "/v1/jobs", errors.New("store down: secret"), 500,
			`{"error":{"message":"Internal error; quote request id req-1 when reporting it.","type":"api_error","param":null,"code":"internal_error"}}` + "\n", ""},
		{"Messages API", "/v1/messages/count_tokens", chat.StatusError("acme", 529, nil, "", nil), 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"The acme provider is unavailable."},"request_id":"req-1"}` + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := serve(nil, func(w http.ResponseWriter, r *http.Request) error {
				if tt.err != nil {
					return tt.err
				}
				writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
				return nil
			})
			r := httptest.NewRequest("POST", tt.path, nil)
			r = r.WithContext(ContextWithRequestID(r.Context(), "req-1"))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status || w.Body.String() != tt.body || w.Header().Get("Retry-After") != tt.retry {
				t.Errorf("serve(%v) = %d %q, Retry-After %q; want %d %q, Retry-After %q", tt.err, w.Code, w.Body, w.Header().Get("Retry-After"),
					tt.status, tt.body, tt.retry)
			}
			if !json.Valid(w.Body.Bytes()) {
				t.Errorf("body %q is not JSON", w.Body)
			}
		})
	}
}
