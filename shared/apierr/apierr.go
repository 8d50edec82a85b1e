// Package apierr defines the one coded error type that the domain packages
// return for failures a client must see, and the kinds that the HTTP edge
// (package httpapi) maps to status codes and the OpenAI error envelope.
//
// The domain never names HTTP statuses: it says what went wrong (Kind), a
// stable machine code (Code, e.g. "missing_field"), the request field at fault
// (Param, e.g. "messages[0].content") and a message safe to show the client.
package apierr

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error; httpapi maps each kind to one HTTP status.
type Kind int

// The kinds, with the status httpapi gives them.
const (
	Internal            Kind = iota // 500 api_error
	Invalid                         // 400 invalid_request_error
	Unauthenticated                 // 401 authentication_error
	InsufficientQuota               // 402 insufficient_quota
	NotFound                        // 404 not_found_error
	MethodNotAllowed                // 405 invalid_request_error
	Conflict                        // 409 invalid_request_error
	TooLarge                        // 413 invalid_request_error
	UnsupportedMedia                // 415 invalid_request_error
	RateLimited                     // 429 rate_limit_error
	Upstream                        // 502 api_error
	UpstreamUnavailable             // 503 api_error
	UpstreamTimeout                 // 504 api_error
	PermissionDenied                // 403 permission_error
	Unavailable                     // 503 api_error: this server cannot take the request now (RetryAfter)
)

// Error is a failure with a client-facing message. Err, if set, is the cause;
// it is for logs and errors.Is/As and never reaches the client.
type Error struct {
	Kind       Kind
	Code       string        // machine code, e.g. "invalid_value"
	Param      string        // offending request field, "" if none
	Message    string        // safe to show the client
	RetryAfter time.Duration // for RateLimited and Unavailable: how long to wait
	Err        error
}

func (e *Error) Error() string {
	s := e.Message
	if e.Param != "" {
		s = e.Param + ": " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Kind and Code, so that
// sentinels such as jobs.ErrNotFound match wrapped copies.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Code == e.Code && (t.Param == "" || t.Param == e.Param)
}

// New returns an error of kind k with code and message.
func New(k Kind, code, msg string) *Error { return &Error{Kind: k, Code: code, Message: msg} }

// Invalidf returns a 400-kind error for param with code and a formatted message.
func Invalidf(param, code, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
