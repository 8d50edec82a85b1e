// Package replicate is the jobs.Provider for models hosted on Replicate,
// through its predictions API, a long-running vendor:
//
//   - Start: a catalog upstream "owner/name" creates by model (POST
//     {base}/v1/models/{owner}/{name}/predictions {"input"}); one with a
//     version, "owner/name:version", creates by version (POST
//     {base}/v1/predictions {"version", "input"}). The input is the
//     catalog's Input mapping. No "Prefer: wait": no worker waits. The
//     prediction's id and urls.get / urls.cancel are the job's handle.
//   - Poll: GET urls.get: starting and processing are "not yet";
//     succeeded downloads the output (a URL, a list of URLs, or an object
//     with a url; Replicate's delivery links are public: no token is sent
//     to them, and they expire after an hour, so the worker copies them);
//     failed, canceled and aborted (past its deadline before it started)
//     fail the job.
//   - Cancel: POST urls.cancel.
//
// It makes images too (images.Provider, Generate): a prediction created
// with "Prefer: wait", read again within the request until it ends (see
// images.go).
//
// The token goes in "Authorization: Bearer <token>" to the API only. Safe
// for concurrent use.
package replicate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is Replicate's API.
const DefaultBaseURL = "https://api.replicate.com"

// Config configures a Provider.
type Config struct {
	BaseURL    string       // DefaultBaseURL if empty
	APIToken   string       // one token, or a pool separated by commas (route.NewKeySet)
	HTTPClient *http.Client // http.DefaultClient if nil
	// Downloads fetches the output files at the links the vendor answers
	// (they may name any host): it should refuse internal addresses, as
	// upstreams.NewDownloadClient's does. nil: HTTPClient.
	Downloads *http.Client
	// PollInterval is the wait between reads of an image prediction that
	// "Prefer: wait" did not see end (Generate); 0: DefaultPollInterval.
	PollInterval time.Duration
}

// DefaultPollInterval is the wait between reads of an image prediction
// (Replicate's own client polls every 500 ms).
const DefaultPollInterval = 500 * time.Millisecond

// Provider talks to Replicate.
type Provider struct {
	base   string
	tokens route.KeySet // each call sends the token its ctx names (route.WithKey)
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
	return &Provider{base: base, tokens: route.NewKeySet(cfg.APIToken), client: c, files: files, poll: poll}
}

// KeyIDs returns the KeyIDs of the provider's token pool (route.Keyed).
func (p *Provider) KeyIDs() []string { return p.tokens.KeyIDs() }

// prediction is Replicate's prediction object.
type prediction struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  any             `json:"error"`
	URLs   struct {
		Get    string `json:"get"`
		Cancel string `json:"cancel"`
	} `json:"urls"`
}

// request returns a request to the API with the token ctx names
// (route.WithKey; the first of the pool if none): a prediction's polls
// send the token that created it.
func (p *Provider) request(ctx context.Context, method, rawURL string, body []byte) (*http.Request, error) {
	return mediafetch.NewRequest(method, rawURL, body, http.Header{"Authorization": {"Bearer " + p.tokens.Key(ctx)}})
}

// Start implements jobs.Provider: it creates the prediction.
func (p *Provider) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	in := j.Input
	pr, err := p.create(ctx, m, m.Input.Build(in.Prompt, in.Category, in.Duration, in.Size, in.Lyrics, in.Format), 0)
	if err != nil {
		return nil, err
	}
	return &jobs.Step{Handle: &jobs.Handle{ID: pr.ID, StatusURL: pr.URLs.Get, CancelURL: pr.URLs.Cancel}}, nil
}

// create creates a prediction of m with input: by model for an upstream
// "owner/name", by version for "owner/name:version". wait > 0 sends
// "Prefer: wait=<wait>": Replicate holds the answer until the prediction
// ends or wait seconds pass.
func (p *Provider) create(ctx context.Context, m *catalog.Model, input map[string]any, wait int) (*prediction, error) {
	model, version, _ := strings.Cut(m.Upstream, ":")
	owner, name, ok := strings.Cut(model, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || strings.ContainsAny(m.Upstream, "?#") {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The Replicate model in the catalog is not owner/name[:version]."}
	}
	path, body := "/v1/models/"+url.PathEscape(owner)+"/"+url.PathEscape(name)+"/predictions", map[string]any{"input": input}
	if version != "" {
		path, body = "/v1/predictions", map[string]any{"version": version, "input": input}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("replicate: encode input: %w", err)
	}
	req, err := p.request(ctx, http.MethodPost, p.base+path, b)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		req.Header.Set("Prefer", fmt.Sprintf("wait=%d", wait))
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "replicate create", apiError)
	if err != nil {
		return nil, err
	}
	var pr prediction
	if err := mediafetch.DecodeJSON(resp, "replicate create", &pr); err != nil {
		return nil, err
	}
	if pr.ID == "" || pr.URLs.Get == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Replicate created a prediction without its id and URL."}
	}
	return &pr, nil
}

// get reads the prediction at rawURL (its urls.get).
func (p *Provider) get(ctx context.Context, rawURL string) (*prediction, error) {
	req, err := p.request(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "replicate get", apiError)
	if err != nil {
		return nil, err
	}
	var pr prediction
	if err := mediafetch.DecodeJSON(resp, "replicate get", &pr); err != nil {
		return nil, err
	}
	return &pr, nil
}

// ended reports whether pr has ended: false while it is starting or
// processing, true once it succeeded; a prediction that failed, was
// cancelled or aborted (past its deadline before it started) is an error.
func ended(pr *prediction) (bool, error) {
	switch pr.Status {
	case "starting", "processing":
		return false, nil
	case "succeeded":
		return true, nil
	case "failed":
		msg := fmt.Sprint(pr.Error)
		if pr.Error == nil {
			msg = "no reason given"
		}
		code := jobs.CodeUpstream
		if isPolicy(msg) {
			code = jobs.CodeContentPolicy
		}
		return false, &jobs.ProviderError{Code: code, Message: "Replicate: the prediction failed: " + msg}
	case "canceled":
		return false, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Replicate: the prediction was cancelled at the vendor."}
	case "aborted":
		return false, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Replicate: the prediction passed its deadline before it started."}
	}
	return false, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("Replicate reported the unknown status %q.", pr.Status)}
}

// Poll implements jobs.Poller.
func (p *Provider) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	pr, err := p.get(ctx, j.Handle.StatusURL)
	if err != nil {
		return nil, err
	}
	if done, err := ended(pr); !done || err != nil {
		return nil, err
	}
	link := outputURL(pr.Output, j.Type)
	if link == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Replicate's prediction has no output file."}
	}
	fallback := "audio/mpeg"
	if j.Type == jobs.TypeVideo {
		fallback = "video/mp4"
	}
	res, err := mediafetch.Download(ctx, p.files, link, nil, fallback)
	if err != nil {
		return nil, err
	}
	res.Duration = j.Input.Duration
	return res, nil
}

// Cancel implements jobs.Canceller: POST urls.cancel.
func (p *Provider) Cancel(ctx context.Context, m *catalog.Model, j *jobs.Job) error {
	if j.Handle == nil || j.Handle.CancelURL == "" {
		return nil
	}
	req, err := p.request(ctx, http.MethodPost, j.Handle.CancelURL, nil)
	if err != nil {
		return err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "replicate cancel", apiError)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// outputURL picks the file from a prediction's output: a URL string; a
// list of them (the first whose extension fits the job type, else the
// first); or an object with a "url".
func outputURL(raw json.RawMessage, jobType string) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
		for _, u := range list {
			if mediafetch.MatchesType(jobType, "", u) {
				return u
			}
		}
		return list[0]
	}
	var obj struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.URL
	}
	return ""
}

// isPolicy reports whether a failure is a safety refusal: NSFW checks, and
// E005 "flagged as sensitive".
func isPolicy(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "nsfw") || strings.Contains(s, "sensitive") || strings.Contains(s, "e005") || strings.Contains(s, "safety")
}

// apiError reads Replicate's problem details: {"title", "detail",
// "status"} (older answers: {"detail"}). A 401 or 403 (the token) and a
// 402 (the account's credit) are the operator's account's.
func apiError(status int, body []byte) jobs.Refusal {
	var e struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil || (e.Detail == "" && e.Title == "") {
		return jobs.Refusal{}
	}
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return jobs.Refusal{Message: "Replicate refused the configured token: " + msg, Account: true}
	case http.StatusPaymentRequired:
		return jobs.Refusal{Message: "Replicate refused the account (payment required): " + msg, Account: true}
	}
	r := jobs.Refusal{Message: "Replicate: " + msg}
	if isPolicy(msg) {
		r.Code = jobs.CodeContentPolicy
	}
	return r
}
