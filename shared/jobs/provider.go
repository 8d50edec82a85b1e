package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/route"
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
// At submit (Start) Failure classifies the error for the routing policy,
// which may move a job whose model has fallbacks to the next candidate.
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
	// KeyID names the key of the provider's pool that submitted the job
	// (route.KeyID, never the key): the worker sets it, and polls and
	// cancels of the job run with it (route.WithKey). "" without a pool.
	KeyID string `json:"key_id,omitempty"`
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
// and no charge (unless, at submit, the routing policy moves the job to
// another candidate: see Failure).
type ProviderError struct {
	Code    string // CodeUpstream, CodeContentPolicy, CodeTimeout, CodeInternal
	Message string // shown to the client in job.error; never a secret
	// Status is the vendor's HTTP status when the failure is its answer
	// (StatusError sets it); 0 otherwise.
	Status int
	// Account: the vendor refused the operator's account or key, not the
	// request (see Refusal.Account).
	Account bool
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

// account reports whether e is about the operator's account or key at
// the vendor (Account; a 401, 402 or 403), not about the request.
func (e *ProviderError) account() bool {
	return e.Account || e.Status == http.StatusUnauthorized || e.Status == http.StatusPaymentRequired ||
		e.Status == http.StatusForbidden
}

// Failure classifies e by the routing policy, as a failed submit (see the
// package's Failure): the operator's account or key KeyRefused, a 404
// (the vendor lacks the model) Unsupported, any other refusal (the
// request's fault: a 400 or 422, a refused prompt, an unusable answer)
// Final.
func (e *ProviderError) Failure() route.Failure {
	f := route.Failure{Class: route.Final, Status: e.Status}
	switch {
	case e.account():
		f.Class, f.Reason = route.KeyRefused, "account"
	case e.Status == http.StatusNotFound:
		f.Class = route.Unsupported
	}
	return f
}

// Fault is what a client is told of e when it answers a request at once
// (an image request; a job's failure is FailureOf's): a refused prompt
// (CodeContentPolicy) with the vendor's words; a file of a type no
// output may have (MediaTypeError) with its message; a refusal of the
// operator's account or key a failure, without the vendor's words;
// CodeTimeout a timeout; any other by its Status (route.StatusFault), the
// vendor's words only for a rejected request. Its Provider is "": the
// caller names the vendor (images.VendorError).
func (e *ProviderError) Fault() route.Fault {
	f := route.Fault{Status: e.Status}
	switch {
	case e.Code == CodeContentPolicy:
		f.Kind, f.Message = route.VendorContentPolicy, e.Message
	case errors.Is(e.Err, ErrMediaType):
		f.Kind, f.Message = route.VendorFailed, e.Message
	case e.account():
		f.Kind = route.VendorFailed
	case e.Code == CodeTimeout:
		f.Kind = route.VendorTimeout
	default:
		f.Kind = route.StatusFault(e.Status)
		if f.Kind == route.VendorRejected {
			f.Message = e.Message
		}
	}
	return f
}

// TransientError is a fault worth retrying: the vendor said 408, 429 or
// 5xx, or could not be reached. RetryAfter is the vendor's Retry-After, if
// it sent one (0 otherwise); the worker waits at least that long.
type TransientError struct {
	// Status is the vendor's HTTP status; 0 if it did not answer (a
	// network fault).
	Status     int
	RetryAfter time.Duration
	// Account: a 429 that says the operator's quota is used up (a Gemini
	// daily quota), which retrying soon will not cure.
	Account bool
	Err     error
}

func (e *TransientError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("transient (retry after %s): %v", e.RetryAfter, e.Err)
	}
	return "transient: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// Failure classifies e by the routing policy, as a failed submit (see the
// package's Failure): a used-up quota of the operator's (Account)
// KeyRefused; the vendor's status by route.StatusClass (one that is not
// retryable, made by hand, Transient); no answer (Status 0) Transient,
// with Reason "timeout" for a network timeout after the connection was
// made, else "connection".
func (e *TransientError) Failure() route.Failure {
	f := route.Failure{Class: route.Transient, Status: e.Status, RetryAfter: e.RetryAfter}
	switch {
	case e.Account:
		f.Class, f.Reason = route.KeyRefused, "account"
	case e.Status != 0:
		if c := route.StatusClass(e.Status); c != route.Final {
			f.Class = c
		}
	case !unreached(e.Err) && timedOut(e.Err):
		f.Reason = "timeout"
	default:
		f.Reason = "connection"
	}
	return f
}

// Fault is what a client is told of e when it answers a request at once
// (an image request): by its Status (route.StatusFault), with its
// Retry-After; no answer a timeout when a deadline passed, else a
// failure. Never the vendor's words. Its Provider is "": the caller names
// the vendor (images.VendorError).
func (e *TransientError) Fault() route.Fault {
	f := route.Fault{Kind: route.StatusFault(e.Status), Status: e.Status, RetryAfter: e.RetryAfter}
	var ne interface{ Timeout() bool }
	if e.Status == 0 && errors.As(e.Err, &ne) && ne.Timeout() {
		f.Kind = route.VendorTimeout
	}
	return f
}

var (
	_ route.VendorFailure = (*ProviderError)(nil)
	_ route.VendorFailure = (*TransientError)(nil)
)

// Retryable reports whether an HTTP status from a vendor is worth retrying:
// 408, 429 and every 5xx.
func Retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// Refusal is what an adapter reads in its vendor's error answer, for
// StatusError. Adapters read only their vendor's words and signals; what
// a status means for the job is decided here (StatusError, Failure).
type Refusal struct {
	// Code is the job's error code if the answer fails it:
	// CodeContentPolicy for a refused prompt; "" for CodeUpstream.
	Code    string
	Message string // the vendor's own words; never a secret
	// Account says the answer is about the operator's account at the
	// vendor, not the request: a key the vendor does not accept (where
	// its status does not say so: Gemini's 400 API_KEY_INVALID), a quota
	// or credit used up (ElevenLabs' quota_exceeded, a Gemini daily
	// quota). A 401, 403 or 402 is one whatever the body says.
	Account bool
	// RetryAfter is a wait the answer's body asks for (Gemini's
	// RetryInfo); the Retry-After header wins over it.
	RetryAfter time.Duration
}

// StatusError classifies a vendor's HTTP error answer: a *TransientError
// for a Retryable status (with the Retry-After header, seconds or an HTTP
// date, honoured, else r.RetryAfter), else a *ProviderError with r's code
// (CodeUpstream if empty) and message, the vendor's own words. Both keep
// the status and the account signal. what names the call ("submit", "poll")
// for the logs.
func StatusError(what string, status int, header http.Header, r Refusal) error {
	err := fmt.Errorf("%s: HTTP %d: %s", what, status, r.Message)
	account := r.Account || status == http.StatusUnauthorized || status == http.StatusPaymentRequired || status == http.StatusForbidden
	if Retryable(status) {
		ra := RetryAfter(header, time.Now())
		if ra == 0 {
			ra = r.RetryAfter
		}
		return &TransientError{Status: status, RetryAfter: ra, Account: account, Err: err}
	}
	code := r.Code
	if code == "" {
		code = CodeUpstream
	}
	return &ProviderError{Code: code, Message: r.Message, Status: status, Account: account, Err: err}
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

// Failure classifies a failed submit (Provider.Start's error) by the
// routing policy (route.Policy.Decide), and reports whether the vendor
// definitely did not take the job: only such a refusal may move a job to
// its next candidate, so that a job the vendor may have accepted is never
// submitted to another.
//
//	the failure                                        class        refused
//	the operator's account or key (Account, 401, 402,  KeyRefused   yes
//	  403): a bad key, a used-up quota or credit
//	404 (the vendor lacks the model)                   Unsupported  yes
//	429                                                RateLimited  yes
//	408, 5xx but 502 and 504                           Transient    yes
//	502, 504 (a gateway: what is behind it may have    Transient    no
//	  taken the job)
//	no answer, the connection never made (dial, DNS)   Transient    yes
//	no answer otherwise (reset, timeout after sending) Transient    no
//	any other *ProviderError (the request's fault: a   Final        no
//	  400 or 422, a refused prompt, an unusable answer)
//	any other error                                    Transient    no
func Failure(err error) (f route.Failure, refused bool) {
	var (
		perr *ProviderError
		terr *TransientError
	)
	switch {
	case errors.As(err, &perr):
		f = perr.Failure()
		return f, f.Class != route.Final
	case errors.As(err, &terr):
		f = terr.Failure()
		switch {
		case terr.Account:
			return f, true
		case terr.Status != 0:
			return f, terr.Status != http.StatusBadGateway && terr.Status != http.StatusGatewayTimeout
		}
		return f, unreached(err)
	}
	f = route.Failure{Class: route.Transient, Reason: "error"}
	switch {
	case unreached(err):
		f.Reason = "connection"
		return f, true
	case timedOut(err):
		f.Reason = "timeout"
	}
	return f, false
}

// unreached reports whether err says the vendor was never reached: the
// connection was never made (a failed dial, DNS).
func unreached(err error) bool {
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	return errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial")
}

// timedOut reports whether err is a network timeout (or a deadline).
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// FailureOf returns the error a job fails with for err, a permanent
// failure at provider (a *ProviderError, or a *TransientError that says
// the operator's quota is used up), and nil for any other error. A
// failure about the operator's account at the vendor (Account; a 401,
// 402 or 403) reads as chat, images and speech answer one, "The
// <provider> provider failed", with the vendor's words, which may name
// the key, the balance, the organisation, only in Vendor (for the
// operator: the console, the admin API); any other refusal keeps the
// vendor's code and words (a refused prompt, a request the vendor
// cannot serve).
func FailureOf(provider string, err error) *JobError {
	var (
		perr *ProviderError
		terr *TransientError
	)
	switch {
	case errors.As(err, &perr) && perr.account():
		return accountFailure(provider, perr.Message)
	case errors.As(err, &perr):
		return &JobError{Code: perr.Code, Message: perr.Message}
	case errors.As(err, &terr) && terr.Account:
		vendor := ""
		if terr.Err != nil {
			vendor = terr.Err.Error()
		}
		return accountFailure(provider, vendor)
	}
	return nil
}

// accountFailure is the JobError of a failure about the operator's
// account at provider, whose vendor said vendor.
func accountFailure(provider, vendor string) *JobError {
	if vendor == "" {
		vendor = "(no message)"
	}
	return &JobError{Code: CodeUpstream, Message: fmt.Sprintf("The %s provider failed; no credits were charged.", provider), Vendor: vendor}
}
