package jobs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/genway/genway/shared/route"
)

// TestFault: what a client is told of each vendor failure of the media
// vendors (an image request answers with it): the kind, status and
// Retry-After, and the vendor's words only for a refused prompt, a
// rejected request and a file of a forbidden type; never about the
// operator's account.
func TestFault(t *testing.T) {
	const secret = "key sk-live-123 has no credit left"
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	status := func(code int, r Refusal) error {
		return StatusError("submit", code, http.Header{"Retry-After": {"7"}}, r)
	}
	tests := []struct {
		name string
		err  route.VendorFailure
		want route.Fault
	}{
		{"refused prompt", &ProviderError{Code: CodeContentPolicy, Status: 400, Message: "Flagged."},
			route.Fault{Kind: route.VendorContentPolicy, Status: 400, Message: "Flagged."}},
		{"rejected request", status(422, Refusal{Message: "duration must be 5 or 10"}).(*ProviderError),
			route.Fault{Kind: route.VendorRejected, Status: 422, Message: "duration must be 5 or 10"}},
		{"404", status(404, Refusal{}).(*ProviderError), route.Fault{Kind: route.VendorRejected, Status: 404}},
		{"401", status(401, Refusal{Message: secret}).(*ProviderError), route.Fault{Kind: route.VendorFailed, Status: 401}},
		{"402", status(402, Refusal{Message: secret}).(*ProviderError), route.Fault{Kind: route.VendorFailed, Status: 402}},
		{"a bad key as a 400 (Gemini)", status(400, Refusal{Message: secret, Account: true}).(*ProviderError),
			route.Fault{Kind: route.VendorFailed, Status: 400}},
		{"a file of a forbidden type", MediaTypeError("image", "image/svg+xml"),
			route.Fault{Kind: route.VendorFailed, Message: MediaTypeError("image", "image/svg+xml").Message}},
		{"timeout code", &ProviderError{Code: CodeTimeout, Message: "slow"}, route.Fault{Kind: route.VendorTimeout}},
		{"an unusable answer", &ProviderError{Code: CodeUpstream, Message: "garbage"}, route.Fault{Kind: route.VendorFailed}},
		{"429", status(429, Refusal{Message: secret}).(*TransientError),
			route.Fault{Kind: route.VendorRateLimited, Status: 429, RetryAfter: 7 * time.Second}},
		{"429, a daily quota", status(429, Refusal{Message: secret, Account: true}).(*TransientError),
			route.Fault{Kind: route.VendorRateLimited, Status: 429, RetryAfter: 7 * time.Second}},
		{"503", status(503, Refusal{}).(*TransientError),
			route.Fault{Kind: route.VendorUnavailable, Status: 503, RetryAfter: 7 * time.Second}},
		{"500", status(500, Refusal{}).(*TransientError), route.Fault{Kind: route.VendorFailed, Status: 500, RetryAfter: 7 * time.Second}},
		{"504", status(504, Refusal{}).(*TransientError), route.Fault{Kind: route.VendorTimeout, Status: 504, RetryAfter: 7 * time.Second}},
		{"network timeout", &TransientError{Err: timeout}, route.Fault{Kind: route.VendorTimeout}},
		{"deadline", &TransientError{Err: context.DeadlineExceeded}, route.Fault{Kind: route.VendorTimeout}},
		{"connection refused", &TransientError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
			route.Fault{Kind: route.VendorFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Fault(); got != tt.want {
				t.Errorf("(%v).Fault() = %+v; want %+v", tt.err, got, tt.want)
			}
		})
	}
}

// TestFailureMethods: the Failure methods of ProviderError and
// TransientError are the classification Failure gives them.
func TestFailureMethods(t *testing.T) {
	errs := []error{
		StatusError("submit", 400, nil, Refusal{}), StatusError("submit", 401, nil, Refusal{}),
		StatusError("submit", 404, nil, Refusal{}), StatusError("submit", 400, nil, Refusal{Account: true}),
		StatusError("submit", 422, nil, Refusal{Code: CodeContentPolicy}), StatusError("submit", 429, http.Header{"Retry-After": {"3"}}, Refusal{}),
		StatusError("submit", 429, nil, Refusal{Account: true}), StatusError("submit", 502, nil, Refusal{}),
		&ProviderError{Code: CodeUpstream, Message: "garbage"}, &TransientError{Status: 418, Err: errors.New("made by hand")},
		&TransientError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
		&TransientError{Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}},
		&TransientError{Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}},
	}
	for _, err := range errs {
		want, _ := Failure(err)
		if got := err.(route.VendorFailure).Failure(); got != want {
			t.Errorf("(%v).Failure() = %+v; want %+v, as Failure says", err, got, want)
		}
	}
}
