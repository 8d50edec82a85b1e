package route

import (
	"fmt"
	"net/http"
	"time"
)

// VendorFailure is a failed call to a vendor (a model provider, a media
// vendor): the one contract of every domain's vendor errors, whatever
// the API. *chat.UpstreamError (chat completions, the Responses and
// Messages APIs, speech), *jobs.ProviderError and *jobs.TransientError
// (jobs, images) and *images.VendorError (an image request's last
// failure, naming its provider) keep it.
//
// Failure classifies the failure for the routing policy (Decide); Fault
// says what a client may be told of it, which the HTTP edge renders (a
// status, an error code, a message, Retry-After) in one place. Neither
// carries the vendor's words about the operator's own account or key.
type VendorFailure interface {
	error
	Failure() Failure
	Fault() Fault
}

// FaultKind is what a client is told a vendor failure was. The edge
// answers each with its own status (in parentheses).
type FaultKind int

// Fault kinds.
const (
	// VendorFailed: the vendor failed (a 5xx, a malformed or dropped
	// answer, a connection that failed, the operator's own key or
	// account refused): 502, naming the provider, never the vendor's
	// words.
	VendorFailed FaultKind = iota
	// VendorRejected: the vendor refused the request as the client sent
	// it (400, 404, 413, 422): 400 with the vendor's words.
	VendorRejected
	// VendorRateLimited: the vendor is rate limiting (429): 429 with
	// Retry-After.
	VendorRateLimited
	// VendorUnavailable: the vendor is overloaded (503, 529) or not
	// configured: 503.
	VendorUnavailable
	// VendorTimeout: the vendor did not answer in time (408, 504, a
	// deadline): 504.
	VendorTimeout
	// VendorContentPolicy: the vendor refused the prompt on content
	// grounds: 400 content_policy with the vendor's words.
	VendorContentPolicy
)

var faultNames = [...]string{"failed", "rejected", "rate_limited", "unavailable", "timeout", "content_policy"}

func (k FaultKind) String() string {
	if k >= 0 && int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// StatusFault is the FaultKind of a vendor's HTTP error status, the same
// for every vendor: 400, 404, 413 and 422 are the client's request
// (VendorRejected), 429 VendorRateLimited, 408 and 504 VendorTimeout, 503
// and 529 (Anthropic's "overloaded") VendorUnavailable, and anything else
// (401 and 403: the operator's own key; other 4xx and 5xx; 0, no status)
// VendorFailed.
func StatusFault(status int) FaultKind {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return VendorRejected
	case http.StatusTooManyRequests:
		return VendorRateLimited
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return VendorTimeout
	case http.StatusServiceUnavailable, StatusOverloaded:
		return VendorUnavailable
	default:
		return VendorFailed
	}
}

// StatusOverloaded is the status of Anthropic's overloaded_error.
const StatusOverloaded = 529

// Fault is a vendor failure as a client may see it.
type Fault struct {
	Kind FaultKind
	// Provider is the catalog provider that failed, named in the
	// client's message ("The openai provider is unavailable."); "" when
	// the error does not know it (a jobs error before the caller named
	// its vendor: images.VendorError does).
	Provider string
	// Status is the vendor's HTTP status, or the one an in-band error
	// stands for (Anthropic's overloaded_error: 529); 0 if none.
	Status int
	// RetryAfter is the wait the vendor asked for; 0 if none.
	RetryAfter time.Duration
	// Message is the vendor's words a client may be shown: the reason of
	// a VendorRejected or VendorContentPolicy, or what was wrong with a
	// VendorFailed answer that the client may know (a file of a type no
	// image may have). "" for a generic message; never a secret, never
	// about the operator's account.
	Message string
}

// Overloaded reports whether the vendor said it is overloaded (503, or
// Anthropic's 529): the Messages API answers it as overloaded_error.
func (f Fault) Overloaded() bool {
	return f.Status == http.StatusServiceUnavailable || f.Status == StatusOverloaded
}
