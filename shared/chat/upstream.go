package chat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// StatusKind classifies an upstream's HTTP error status the same way for
// every provider: 400, 404, 413 and 422 are the client's request
// (UpstreamBadRequest), 429 is UpstreamRateLimited, 408 and 504
// UpstreamTimeout, 503 and 529 (Anthropic's "overloaded")
// UpstreamUnavailable, and anything else (401/403: our own credentials;
// other 4xx and 5xx) UpstreamFailed.
func StatusKind(status int) UpstreamKind {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return UpstreamBadRequest
	case http.StatusTooManyRequests:
		return UpstreamRateLimited
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return UpstreamTimeout
	case http.StatusServiceUnavailable, 529:
		return UpstreamUnavailable
	default:
		return UpstreamFailed
	}
}

// TransportError classifies a failure to talk to provider's upstream or
// to read its answer; what names the step ("send request", "read stream").
// When ctx was cancelled (the client went away) it is ctx's error, not an
// upstream failure. A deadline (ctx's, or a network timeout) is an
// UpstreamTimeout; anything else an UpstreamFailed.
func TransportError(ctx context.Context, provider, what string, err error) error {
	ctxErr := ctx.Err()
	if errors.Is(ctxErr, context.Canceled) {
		return fmt.Errorf("%s: %s: %w", provider, what, ctxErr)
	}
	var ne net.Error
	if ctxErr != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &UpstreamError{Provider: provider, Kind: UpstreamTimeout, Message: "upstream timed out", Err: err}
	}
	return &UpstreamError{Provider: provider, Kind: UpstreamFailed, Message: what + " failed", Err: err}
}
