package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/genway/genway/shared/route"
)

// StatusKind classifies an upstream's HTTP error status the same way for
// every provider (route.StatusFault): 400, 404, 413 and 422 are the
// client's request (UpstreamBadRequest), 429 is UpstreamRateLimited, 408
// and 504 UpstreamTimeout, 503 and 529 (Anthropic's "overloaded")
// UpstreamUnavailable, and anything else (401/403: our own credentials;
// other 4xx and 5xx) UpstreamFailed.
func StatusKind(status int) UpstreamKind { return route.StatusFault(status) }

// Send sends req, an upstream request, as client.Do does, but through
// client's transport directly when client adds nothing to it (no cookie
// jar, no timeout, a transport of its own, no user in the URL): client.Do's
// redirect bookkeeping costs a header copy and a few allocations a
// request, which the chat hot path need not pay. Its errors are client.Do's
// (*url.Error). An answer that redirects (a 3xx with a Location) is not
// returned: its body is closed and req is sent again through client.Do,
// which follows the redirect as it would have (the upstream sees req twice,
// the first time only to answer with its redirect); req's body is sent
// again from req.GetBody, and a request with a body and no GetBody gets
// the redirect answer itself.
func Send(client *http.Client, req *http.Request) (*http.Response, error) {
	if client.Jar != nil || client.Timeout != 0 || client.Transport == nil || req.URL.User != nil {
		return client.Do(req)
	}
	resp, err := client.Transport.RoundTrip(req)
	if err != nil {
		return nil, sendError(req, err)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if resp.Header.Get("Location") == "" || (req.GetBody == nil && req.Body != nil && req.Body != http.NoBody) {
			return resp, nil
		}
		resp.Body.Close()
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return nil, sendError(req, err)
			}
		}
		return client.Do(again)
	}
	return resp, nil
}

// sendError is err as client.Do returns it for req.
func sendError(req *http.Request, err error) error {
	return &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
}

// TransportError classifies a failure to talk to provider's upstream or
// to read its answer; what names the step ("send request", "read stream",
// "decode response"). When ctx was cancelled (the client went away) it is
// ctx's error, not an upstream failure. A deadline (ctx's, or a network
// timeout) is an UpstreamTimeout; anything else an UpstreamFailed: with
// Reason ReasonDropped for a body that was cut (io.ErrUnexpectedEOF), and
// ReasonMalformed for one that is not the JSON expected.
func TransportError(ctx context.Context, provider, what string, err error) error {
	ctxErr := ctx.Err()
	if errors.Is(ctxErr, context.Canceled) {
		return fmt.Errorf("%s: %s: %w", provider, what, ctxErr)
	}
	var ne net.Error
	if ctxErr != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &UpstreamError{Provider: provider, Kind: UpstreamTimeout, Message: "upstream timed out", Err: err}
	}
	e := &UpstreamError{Provider: provider, Kind: UpstreamFailed, Message: what + " failed", Err: err}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		e.Reason = ReasonDropped // the body was cut
	case errors.As(err, &syntax) || errors.As(err, &typ):
		e.Reason = ReasonMalformed
	}
	return e
}

// StatusError returns the UpstreamError of an upstream's error status: an
// HTTP status, or the status an in-band error stands for (an error event
// inside a 200 stream). Its Kind is StatusKind's, its RetryAfter read from
// h (nil for an in-band error: no headers of its own); msg is the
// upstream's message, shown to the client for a bad request (a generic
// one naming provider and status when msg is empty); cause is for logs.
func StatusError(provider string, status int, h http.Header, msg string, cause error) *UpstreamError {
	e := &UpstreamError{Provider: provider, Kind: StatusKind(status), Status: status, Message: msg, Err: cause}
	if h != nil {
		e.RetryAfter = RetryAfter(h, time.Now())
	}
	if e.Kind == UpstreamBadRequest && e.Message == "" {
		e.Message = fmt.Sprintf("The %s provider rejected the request (HTTP %d).", provider, status)
	}
	return e
}

// TransportBody wraps the body of provider's streamed answer (audio, a
// stream of bytes) so that a read that fails is TransportError's: a
// dropped connection is an UpstreamFailed with ReasonDropped, a deadline
// an UpstreamTimeout, the client's own cancellation ctx's error. io.EOF
// stays io.EOF.
func TransportBody(ctx context.Context, provider string, body io.ReadCloser) io.ReadCloser {
	return &transportBody{ReadCloser: body, ctx: ctx, provider: provider}
}

type transportBody struct {
	io.ReadCloser
	ctx      context.Context
	provider string
}

func (b *transportBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = TransportError(b.ctx, b.provider, "read audio", err)
	}
	return n, err
}
