// Package mediafetch is what the media vendors' adapters share on the wire:
// reading a vendor's JSON answer or error, classifying a failed call the
// way the jobs worker expects (jobs.TransientError for 408, 429, 5xx and
// network faults; jobs.ProviderError for the rest), and downloading a
// finished file as a jobs.Result that the worker copies into storage as it
// arrives; and waiting, within a request, for a vendor that queues it
// (PollUntil).
//
// Nothing here logs, and no error it returns carries a request's headers
// (where the vendor keys are) or a URL's query string.
package mediafetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/jobs"
)

// MaxJSON bounds a vendor's JSON answer (status, result, error bodies).
const MaxJSON = 4 << 20

// NewRequest returns a request to a vendor: body (nil for none) sent as
// JSON, with header (the vendor's key). A URL that cannot be used is a
// *jobs.ProviderError (internal_error) whose cause names the URL without its
// query.
func NewRequest(method, rawURL string, body []byte, header http.Header) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The vendor URL is not usable.",
			Err: fmt.Errorf("%s %s: %w", method, Redact(rawURL), err)}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req, nil
}

// Do sends req with c and returns the response if its status is 2xx. A
// network failure is a *jobs.TransientError (unless ctx ended: then ctx's
// error); a non-2xx answer is classified by jobs.StatusError with what
// read (the adapter's reading of its vendor's error body: message, code,
// quota signal, a retry delay; nil, or an empty message: the body's first
// 300 bytes).
func Do(ctx context.Context, c *http.Client, req *http.Request, what string, read func(status int, body []byte) jobs.Refusal) (*http.Response, error) {
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return nil, TransportError(ctx, what, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var r jobs.Refusal
	if read != nil {
		r = read(resp.StatusCode, body)
	}
	if r.Message == "" {
		r.Message = snippet(body)
	}
	if r.Message == "" {
		r.Message = http.StatusText(resp.StatusCode)
	}
	return nil, jobs.StatusError(what, resp.StatusCode, resp.Header, r)
}

// TransportError classifies a failure to reach a vendor: ctx's own error if
// ctx ended (the worker is shutting down); a *jobs.ProviderError
// (upstream_error) for a link that names an address the client's SSRF
// guard refused (chat.ErrRefusedAddr: trying again will not help); else a
// *jobs.TransientError. The URL in a *url.Error is cut to scheme, host and
// path.
func TransportError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s %s: %w", ue.Op, Redact(ue.URL), ue.Err)
	}
	if errors.Is(err, chat.ErrRefusedAddr) {
		return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor's file is at an address this service does not fetch from; no credits were charged.",
			Err: fmt.Errorf("%s: %w", what, err)}
	}
	return &jobs.TransientError{Err: fmt.Errorf("%s: %w", what, err)}
}

// Redact returns rawURL without its query string and fragment (where a
// signed link carries its signature).
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "<unparsable url>"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// DecodeJSON reads resp's body (at most MaxJSON bytes) into v and closes
// it, as DecodeJSONLimit does.
func DecodeJSON(resp *http.Response, what string, v any) error {
	return DecodeJSONLimit(resp, what, MaxJSON, v)
}

// DecodeJSONLimit reads resp's body (at most limit bytes: an answer that
// carries files inline, such as an image in base64, needs more than
// MaxJSON) into v and closes it. An unreadable body is a
// *jobs.TransientError (the connection broke); a body over limit, or not
// the JSON v expects, is a *jobs.ProviderError (upstream_error): the
// vendor answered garbage.
func DecodeJSONLimit(resp *http.Response, what string, limit int64, v any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return &jobs.TransientError{Err: fmt.Errorf("%s: read answer: %w", what, err)}
	}
	if int64(len(b)) > limit {
		return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor's answer was too large.", Err: fmt.Errorf("%s: answer over %d bytes", what, limit)}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor answered something that is not the expected JSON.", Err: fmt.Errorf("%s: %w", what, err)}
	}
	return nil
}

// PollUntil calls poll until it reports done, waiting every between two
// calls: how an image adapter waits, within its request, for a vendor that
// queued it (fal's queue, a Replicate prediction). poll gets the number of
// calls before it (0 the first time); its error ends the wait. Not done
// after max calls is a *jobs.TransientError; ctx ending during a wait is
// ctx's error. what names the request in both.
func PollUntil(ctx context.Context, every time.Duration, max int, what string, poll func(n int) (bool, error)) error {
	for n := 0; ; n++ {
		done, err := poll(n)
		if err != nil || done {
			return err
		}
		if n+1 >= max {
			return &jobs.TransientError{Err: fmt.Errorf("%s: not done after %d polls", what, n+1)}
		}
		if !ctxtime.Sleep(ctx, every) {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
	}
}

// Download GETs rawURL with header (which may carry a vendor key; c follows
// redirects, and Go drops such headers when a redirect leaves the host)
// and returns the file as a jobs.Result whose Body the caller must close.
// The content type is the answer's unless it is missing or generic
// (application/octet-stream, binary/octet-stream), then the one the URL's
// extension implies, else fallbackType; Ext follows the content type.
func Download(ctx context.Context, c *http.Client, rawURL string, header http.Header, fallbackType string) (*jobs.Result, error) {
	req, err := NewRequest(http.MethodGet, rawURL, nil, header)
	if err != nil {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor gave an unusable output link.", Err: err}
	}
	resp, err := Do(ctx, c, req, "download output", nil)
	if err != nil {
		return nil, err
	}
	ct := ContentType(resp.Header.Get("Content-Type"), rawURL, fallbackType)
	return &jobs.Result{Body: resp.Body, Size: resp.ContentLength, ContentType: ct, Ext: jobs.Ext(ct)}, nil
}

// Fetch downloads rawURL as Download does and reads it whole: its bytes
// and media type. A file over max bytes is a *jobs.ProviderError
// (upstream_error); a body cut short a *jobs.TransientError.
func Fetch(ctx context.Context, c *http.Client, rawURL string, header http.Header, fallbackType string, max int64) ([]byte, string, error) {
	res, err := Download(ctx, c, rawURL, header, fallbackType)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	if res.Size > max {
		return nil, "", &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor's file is too large.", Err: fmt.Errorf("download output: %d bytes, over %d", res.Size, max)}
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	switch {
	case err != nil:
		return nil, "", TransportError(ctx, "download output", err)
	case int64(len(b)) > max:
		return nil, "", &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor's file is too large.", Err: fmt.Errorf("download output: over %d bytes", max)}
	case res.Size >= 0 && int64(len(b)) != res.Size:
		return nil, "", &jobs.TransientError{Err: fmt.Errorf("download output: %d of %d bytes: %w", len(b), res.Size, io.ErrUnexpectedEOF)}
	}
	return b, res.ContentType, nil
}

// ContentType picks a file's media type: header's, unless it is empty or
// generic; else the one rawURL's extension implies; else fallback.
func ContentType(header, rawURL, fallback string) string {
	if mt, _, err := mime.ParseMediaType(header); err == nil && mt != "application/octet-stream" && mt != "binary/octet-stream" {
		return mt
	}
	if u, err := url.Parse(rawURL); err == nil {
		if t := byExt[strings.ToLower(path.Ext(u.Path))]; t != "" {
			return t
		}
	}
	return fallback
}

// byExt are the media types of the extensions vendors' files have.
var byExt = map[string]string{
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".flac": "audio/flac", ".ogg": "audio/ogg",
	".m4a": "audio/mp4", ".aac": "audio/aac", ".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
}

// MatchesType reports whether a media type, or when it is empty or
// generic the one a URL's extension implies, is one an output of jobType
// (a job type, or catalog.TypeImage) may have (jobs.MediaType): how an
// adapter picks its output among the files a vendor answers.
func MatchesType(jobType, contentType, rawURL string) bool {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "" || mt == "application/octet-stream" || mt == "binary/octet-stream" {
		contentType = ContentType("", rawURL, "")
	}
	_, ok := jobs.MediaType(jobType, contentType)
	return ok
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.ToValidUTF8(s, "")
}
