package jobs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// A vendor works in one of two shapes, and Provider covers both:
//
//   - synchronous (ElevenLabs, the synthetic provider): Start answers with
//     the finished media in Step.Result;
//   - long-running (Veo, fal, Replicate): Start answers with the vendor's
//     Handle in Step.Handle. The worker stores the handle on the job before
//     it acknowledges the message, re-enqueues the job with a delay, and
//     each later delivery calls Poll once: no worker ever waits on a vendor
//     for minutes.
//
// Adapters only speak their vendor's wire: the worker owns the job's state,
// the retries with backoff, the deadline and the copy into storage.

// Provider starts generations for jobs. Safe for concurrent use.
//
// Errors: a *ProviderError fails the job at once (no charge); a
// *TransientError, or any other error, is a fault worth retrying (408,
// 429, 5xx, network) and the worker tries again later, within its bounds.
type Provider interface {
	// Start begins generating j and returns either the finished Result or
	// the vendor's Handle. It is called at most once per job and attempt:
	// the worker claims the job before it calls Start.
	//
	// m is j's catalog model: its Upstream names the model at the vendor,
	// and its Input (fal, Replicate) says where j's fields go.
	Start(ctx context.Context, m *catalog.Model, j *Job) (*Step, error)
}

// Poller is the Provider of a long-running vendor.
type Poller interface {
	// Poll checks j's generation at its vendor (j.Handle is set). It
	// returns (nil, nil) while the vendor is still working, the Result when
	// it is done, and an error as Start does. It never submits anything.
	Poll(ctx context.Context, m *catalog.Model, j *Job) (*Result, error)
}

// Canceller is a long-running Provider that can stop a generation at its
// vendor (the worker calls it, best effort, when a job passes its deadline).
type Canceller interface {
	Cancel(ctx context.Context, m *catalog.Model, j *Job) error
}

// Step is what Start returns: exactly one of Result and Handle is set.
type Step struct {
	Result *Result
	Handle *Handle
}

// Handle identifies a generation running at its vendor: what a later Poll
// needs, stored on the job (so it survives crashes and restarts). Which
// fields a vendor uses is the adapter's business; none holds a secret.
type Handle struct {
	ID        string `json:"id"`                   // operation name, request id, prediction id
	StatusURL string `json:"status_url,omitempty"` // where to poll, as the vendor gave it
	ResultURL string `json:"result_url,omitempty"` // where the result is, as the vendor gave it
	CancelURL string `json:"cancel_url,omitempty"` // where to cancel, as the vendor gave it
	Submitted int64  `json:"submitted,omitempty"`  // Unix seconds; set by the worker
}

// Result is finished media, read as it arrives: the worker copies Body into
// storage (up to its size cap) and closes it.
type Result struct {
	Body        io.ReadCloser
	Size        int64  // bytes in Body; -1 if unknown
	ContentType string // e.g. audio/mpeg, audio/wav, video/mp4
	Ext         string // file extension without dot: mp3, wav, mp4
	Duration    int    // seconds; 0: the requested duration
	Width       int    // video, if known
	Height      int
}

// ProviderError is a permanent generation failure: the job fails with Code
// and no charge.
type ProviderError struct {
	Code    string // CodeUpstream, CodeContentPolicy, CodeTimeout, CodeInternal
	Message string // shown to the client in job.error; never a secret
	Err     error
}

func (e *ProviderError) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// TransientError is a fault worth retrying: the vendor said 408, 429 or
// 5xx, or could not be reached. RetryAfter is the vendor's Retry-After, if
// it sent one (0 otherwise); the worker waits at least that long.
type TransientError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *TransientError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("transient (retry after %s): %v", e.RetryAfter, e.Err)
	}
	return "transient: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// Retryable reports whether an HTTP status from a vendor is worth retrying:
// 408, 429 and every 5xx.
func Retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// StatusError classifies a vendor's HTTP error answer: a *TransientError
// for a Retryable status (with the Retry-After header, seconds or an HTTP
// date, honoured), else a *ProviderError with code (CodeUpstream if empty)
// and message, the vendor's own words. what names the call ("submit",
// "poll") for the logs.
func StatusError(what string, status int, header http.Header, code, message string) error {
	err := fmt.Errorf("%s: HTTP %d: %s", what, status, message)
	if Retryable(status) {
		return &TransientError{RetryAfter: RetryAfter(header, time.Now()), Err: err}
	}
	if code == "" {
		code = CodeUpstream
	}
	return &ProviderError{Code: code, Message: message, Err: err}
}

// RetryAfter parses a Retry-After header (delay seconds or an HTTP date,
// relative to now); 0 if absent or unreadable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
