// Package fal is the jobs.Provider for models hosted on fal.ai, through its
// queue API, a long-running vendor:
//
//   - Start: POST {base}/{model id} with the model's input (the catalog's
//     Input mapping); the answer's request_id, status_url, response_url and
//     cancel_url are the job's handle, kept as fal gave them (a model id
//     with sub-paths does not rebuild into them).
//   - Poll: GET status_url: IN_QUEUE and IN_PROGRESS are "not yet";
//     COMPLETED fetches response_url, finds the media in the model's own
//     result JSON (see FindMedia) and downloads it (fal's file links are
//     public: no key is sent to them).
//   - Cancel: PUT cancel_url.
//
// It makes images too (images.Provider, Generate): the same queue, polled
// within the request until the result is ready (see images.go).
//
// The key goes in "Authorization: Key <key>" to the queue only. Safe for
// concurrent use.
package fal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is fal's queue.
const DefaultBaseURL = "https://queue.fal.run"

// Config configures a Provider.
type Config struct {
	BaseURL    string       // DefaultBaseURL if empty
	APIKey     string       // one key, or a pool separated by commas (route.NewKeySet)
	HTTPClient *http.Client // http.DefaultClient if nil
	// Downloads fetches the output files at the links the vendor answers
	// (they may name any host): it should refuse internal addresses, as
	// upstreams.NewDownloadClient's does. nil: HTTPClient.
	Downloads *http.Client
	// PollInterval is the wait between status reads of an image request,
	// which is answered within its HTTP request (Generate); 0:
	// DefaultPollInterval.
	PollInterval time.Duration
}

// DefaultPollInterval is the wait between status reads of an image
// request (fal's own client waits 500 ms).
const DefaultPollInterval = 500 * time.Millisecond

// Provider talks to fal's queue.
type Provider struct {
	base   string
	keys   route.KeySet // each call sends the key its ctx names (route.WithKey)
	client *http.Client
	files  *http.Client // output files (Config.Downloads)
	poll   time.Duration
}

var (
	_ jobs.Provider   = (*Provider)(nil)
	_ jobs.Poller     = (*Provider)(nil)
	_ jobs.Canceller  = (*Provider)(nil)
	_ images.Provider = (*Provider)(nil)
	_ route.Keyed     = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	c := cfg.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	files := cfg.Downloads
	if files == nil {
		files = c
	}
	return &Provider{base: base, keys: route.NewKeySet(cfg.APIKey), client: c, files: files, poll: poll}
}

// KeyIDs returns the KeyIDs of the provider's key pool (route.Keyed).
func (p *Provider) KeyIDs() []string { return p.keys.KeyIDs() }

type queued struct {
	RequestID   string `json:"request_id"`
	StatusURL   string `json:"status_url"`
	ResponseURL string `json:"response_url"`
	CancelURL   string `json:"cancel_url"`
}

type status struct {
	Status    string `json:"status"`
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// request returns a request to fal with the key ctx names (route.WithKey;
// the first of the pool if none): a job's polls send the key that
// submitted it.
func (p *Provider) request(ctx context.Context, method, rawURL string, body []byte) (*http.Request, error) {
	return mediafetch.NewRequest(method, rawURL, body, http.Header{"Authorization": {"Key " + p.keys.Key(ctx)}})
}

// Start implements jobs.Provider: it queues the request.
func (p *Provider) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	in := j.Input
	h, err := p.submit(ctx, m, m.Input.Build(in.Prompt, in.Category, in.Duration, in.Size, in.Lyrics, in.Format))
	if err != nil {
		return nil, err
	}
	return &jobs.Step{Handle: h}, nil
}

// submit queues input on m's fal endpoint and returns the request's
// handle: its id, status, response and cancel URLs as fal gave them.
func (p *Provider) submit(ctx context.Context, m *catalog.Model, input map[string]any) (*jobs.Handle, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("fal: encode input: %w", err)
	}
	model := strings.Trim(m.Upstream, "/")
	if model == "" || strings.Contains(model, "..") || strings.ContainsAny(model, "?#") {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The fal model id in the catalog is not usable."}
	}
	req, err := p.request(ctx, http.MethodPost, p.base+"/"+model, body)
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "fal submit", apiError)
	if err != nil {
		return nil, err
	}
	var q queued
	if err := mediafetch.DecodeJSON(resp, "fal submit", &q); err != nil {
		return nil, err
	}
	if q.RequestID == "" || q.StatusURL == "" || q.ResponseURL == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "fal queued the request without its status and response URLs."}
	}
	return &jobs.Handle{ID: q.RequestID, StatusURL: q.StatusURL, ResultURL: q.ResponseURL, CancelURL: q.CancelURL}, nil
}

// done reads the status of the request h: false while it is IN_QUEUE or
// IN_PROGRESS, true once it is COMPLETED; an error fal reports in the
// status fails it (content_policy for its safety checks).
func (p *Provider) done(ctx context.Context, h *jobs.Handle) (bool, error) {
	req, err := p.request(ctx, http.MethodGet, h.StatusURL, nil)
	if err != nil {
		return false, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "fal status", apiError)
	if err != nil {
		return false, err
	}
	var st status
	if err := mediafetch.DecodeJSON(resp, "fal status", &st); err != nil {
		return false, err
	}
	switch st.Status {
	case "IN_QUEUE", "IN_PROGRESS":
		return false, nil
	case "COMPLETED":
	default:
		return false, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("fal reported the unknown status %q.", st.Status)}
	}
	if st.Error != "" {
		code := jobs.CodeUpstream
		if isPolicy(st.ErrorType) {
			code = jobs.CodeContentPolicy
		}
		return false, &jobs.ProviderError{Code: code, Message: "fal: " + st.Error}
	}
	return true, nil
}

// result reads the result of the completed request h into v.
func (p *Provider) result(ctx context.Context, h *jobs.Handle, v any) error {
	req, err := p.request(ctx, http.MethodGet, h.ResultURL, nil)
	if err != nil {
		return err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "fal result", apiError)
	if err != nil {
		return err
	}
	return mediafetch.DecodeJSON(resp, "fal result", v)
}

// Poll implements jobs.Poller.
func (p *Provider) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	if done, err := p.done(ctx, j.Handle); !done || err != nil {
		return nil, err
	}
	var result any
	if err := p.result(ctx, j.Handle, &result); err != nil {
		return nil, err
	}
	link, ct := FindMedia(result, j.Type)
	if link == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "fal's result has no " + j.Type + " file."}
	}
	fallback := "audio/mpeg"
	if j.Type == jobs.TypeVideo {
		fallback = "video/mp4"
	}
	res, err := mediafetch.Download(ctx, p.files, link, nil, mediafetch.ContentType(ct, link, fallback))
	if err != nil {
		return nil, err
	}
	res.Duration = j.Input.Duration
	return res, nil
}

// Cancel implements jobs.Canceller: PUT cancel_url.
func (p *Provider) Cancel(ctx context.Context, m *catalog.Model, j *jobs.Job) error {
	if j.Handle == nil || j.Handle.CancelURL == "" {
		return nil
	}
	req, err := p.request(ctx, http.MethodPut, j.Handle.CancelURL, nil)
	if err != nil {
		return err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "fal cancel", apiError)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// FindMedia finds a job type's file in a model's result JSON, which every
// fal model shapes its own way ({"video": {"url", "content_type"}},
// {"audio_file": {"url"}}, a list of files, ...). It walks the document
// depth first, object keys in sorted order, and returns the first object
// with a "url" and a "content_type" of the job's kind (audio/* for music
// and sfx, video/*), else the first URL (an object's "url", or a string)
// whose extension is of that kind; "" if there is none.
func FindMedia(doc any, jobType string) (link, contentType string) {
	var byExt string
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if u, ok := x["url"].(string); ok && isHTTP(u) {
				ct, _ := x["content_type"].(string)
				if ct != "" && mediafetch.MatchesType(jobType, ct, "") {
					link, contentType = u, ct
					return true
				}
				if byExt == "" && mediafetch.MatchesType(jobType, "", u) {
					byExt = u
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if walk(x[k]) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case string:
			if byExt == "" && isHTTP(x) && mediafetch.MatchesType(jobType, "", x) {
				byExt = x
			}
		}
		return false
	}
	if walk(doc) {
		return link, contentType
	}
	return byExt, ""
}

func isHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func isPolicy(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "content_policy") || strings.Contains(s, "nsfw") || strings.Contains(s, "safety")
}

// apiError reads fal's error bodies: {"detail": "..."} or a validation list
// {"detail": [{"loc", "msg", "type"}]}; a content_policy_violation is
// content_policy. A 401 or 403 (a bad key, or an account locked for an
// exhausted balance) and a 402 are the operator's account's.
func apiError(status int, body []byte) jobs.Refusal {
	var e struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Detail) == 0 {
		return jobs.Refusal{}
	}
	var text string
	if json.Unmarshal(e.Detail, &text) == nil {
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return jobs.Refusal{Message: "fal refused the configured key: " + text, Account: true}
		case http.StatusPaymentRequired:
			return jobs.Refusal{Message: "fal refused the account (payment required): " + text, Account: true}
		}
		return jobs.Refusal{Message: "fal: " + text}
	}
	var list []struct {
		Msg  string `json:"msg"`
		Type string `json:"type"`
		Loc  []any  `json:"loc"`
	}
	if json.Unmarshal(e.Detail, &list) != nil {
		return jobs.Refusal{}
	}
	var r jobs.Refusal
	var msgs []string
	for _, l := range list {
		if isPolicy(l.Type) {
			r.Code = jobs.CodeContentPolicy
		}
		msgs = append(msgs, l.Msg)
	}
	r.Message = "fal: " + strings.Join(msgs, "; ")
	return r
}
