package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// Video makes videos with Veo through the Gemini API, a long-running
// jobs.Provider:
//
//   - Start: POST {base}/v1beta/models/{model}:predictLongRunning with
//     {"instances":[{"prompt"}],"parameters":{"aspectRatio","resolution",
//     "durationSeconds"}}; the answer is an operation whose name is the
//     job's handle.
//   - Poll: GET {base}/v1beta/{operation name} until "done"; then the
//     first generated sample's video.uri is downloaded with the key,
//     following redirects (the key goes only to the Gemini API's host).
//
// The key is sent as x-goog-api-key, never in a URL. Safe for concurrent
// use.
//
// Google shut Veo down on the Gemini API (the veo-3.1 preview models, the
// only ones it had, since October 2026; @google/genai 3.x dropped the
// call), so the catalog's Veo models are VertexVideo's. Video stays for a
// catalog of one's own whose GEMINI_BASE_URL is a server speaking this
// API.
type Video struct{ conn }

var (
	_ jobs.Provider = (*Video)(nil)
	_ jobs.Poller   = (*Video)(nil)
	_ route.Keyed   = (*Video)(nil)
)

// NewVideo returns the Veo provider for cfg (Name is not used).
func NewVideo(cfg Config) *Video { return &Video{newConn(cfg)} }

// videoRequest is the predictLongRunning body.
type videoRequest struct {
	Instances  []videoInstance `json:"instances"`
	Parameters videoParameters `json:"parameters"`
}

type videoInstance struct {
	Prompt string `json:"prompt"`
}

type videoParameters struct {
	AspectRatio     string `json:"aspectRatio"`
	Resolution      string `json:"resolution"`
	DurationSeconds int    `json:"durationSeconds"`
}

// operation is a google.longrunning.Operation of a video generation.
type operation struct {
	Name     string     `json:"name"`
	Done     bool       `json:"done"`
	Error    *rpcStatus `json:"error"`
	Response *struct {
		GenerateVideoResponse struct {
			GeneratedSamples []struct {
				Video struct {
					URI string `json:"uri"`
				} `json:"video"`
			} `json:"generatedSamples"`
			raiFiltered
		} `json:"generateVideoResponse"`
	} `json:"response"`
}

// rpcStatus is a google.rpc.Status: a finished operation's error.
type rpcStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// failure is the job failure of operation name ending with s.
func (s *rpcStatus) failure(name string) error {
	return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo failed: " + s.Message,
		Err: fmt.Errorf("veo operation %s: error %d", name, s.Code)}
}

// raiFiltered is what Veo's answer says of its safety filters (the same
// fields on the Gemini API and on Vertex AI).
type raiFiltered struct {
	RAIMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
	RAIMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
}

// failure is the content_policy failure of a video the filters blocked,
// with Veo's reasons; nil if none was.
func (r *raiFiltered) failure() error {
	if r.RAIMediaFilteredCount == 0 {
		return nil
	}
	msg := "Veo's safety filters blocked the video."
	if len(r.RAIMediaFilteredReasons) > 0 {
		msg = "Veo's safety filters blocked the video: " + strings.Join(r.RAIMediaFilteredReasons, " ")
	}
	return &jobs.ProviderError{Code: jobs.CodeContentPolicy, Message: msg}
}

// videoParams maps a job's size ("WxH") and duration onto Veo's
// parameters: the orientation gives the aspect ratio (16:9 or 9:16), the
// shorter side the resolution (720p, 1080p). The catalog's sizes and
// durations keep anything else from reaching here; this is the last check.
func videoParams(size string, duration int) (videoParameters, error) {
	ws, hs, _ := strings.Cut(size, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if err1 != nil || err2 != nil || w == h || w <= 0 || h <= 0 {
		return videoParameters{}, fmt.Errorf("veo makes 16:9 or 9:16 videos, not %q", size)
	}
	p := videoParameters{AspectRatio: "16:9", Resolution: strconv.Itoa(min(w, h)) + "p", DurationSeconds: duration}
	if h > w {
		p.AspectRatio = "9:16"
	}
	return p, nil
}

// Start implements jobs.Provider: it submits the generation.
func (v *Video) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	params, err := videoParams(j.Input.Size, j.Input.Duration)
	if err != nil {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo cannot make a video of this size.", Err: err}
	}
	body, err := json.Marshal(videoRequest{Instances: []videoInstance{{Prompt: j.Input.Prompt}}, Parameters: params})
	if err != nil {
		return nil, fmt.Errorf("veo: encode request: %w", err)
	}
	req, err := mediafetch.NewRequest(http.MethodPost, v.base+"/v1beta/models/"+m.Upstream+":predictLongRunning", body, v.keyHeader(ctx))
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, v.client, req, "veo submit", googleError)
	if err != nil {
		return nil, err
	}
	var op operation
	if err := mediafetch.DecodeJSON(resp, "veo submit", &op); err != nil {
		return nil, err
	}
	if op.Name == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo answered no operation name."}
	}
	return &jobs.Step{Handle: &jobs.Handle{ID: op.Name}}, nil
}

// Poll implements jobs.Poller: one read of the operation, and the download
// of the video once it is done.
func (v *Video) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	name := j.Handle.ID
	if !strings.Contains(name, "/operations/") || strings.Contains(name, "..") || strings.ContainsAny(name, "?#") {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The stored Veo operation name is not usable.", Err: fmt.Errorf("operation %q", name)}
	}
	req, err := mediafetch.NewRequest(http.MethodGet, v.base+"/v1beta/"+name, nil, v.keyHeader(ctx))
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, v.client, req, "veo poll", googleError)
	if err != nil {
		return nil, err
	}
	var op operation
	if err := mediafetch.DecodeJSON(resp, "veo poll", &op); err != nil {
		return nil, err
	}
	switch {
	case !op.Done:
		return nil, nil
	case op.Error != nil:
		return nil, op.Error.failure(name)
	case op.Response == nil:
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo finished without a response."}
	}
	gv := op.Response.GenerateVideoResponse
	if err := gv.failure(); err != nil {
		return nil, err
	}
	if len(gv.GeneratedSamples) == 0 || gv.GeneratedSamples[0].Video.URI == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo finished without a video."}
	}
	res, err := mediafetch.Download(ctx, v.keyOnlyToOrigin(), gv.GeneratedSamples[0].Video.URI, v.keyHeader(ctx), "video/mp4")
	if err != nil {
		return nil, err
	}
	res.Duration = j.Input.Duration
	return res, nil
}

// keyHeader is the header of the key ctx names (route.WithKey; the first
// of the pool if none): a job's polls send the key that submitted it.
func (v *Video) keyHeader(ctx context.Context) http.Header {
	return http.Header{"x-goog-api-key": {v.keys.Key(ctx)}}
}

// keyOnlyToOrigin returns the client of output files with a redirect policy that drops the
// key when a redirect leaves the host it was sent to (net/http drops only
// Authorization and Cookie headers by itself).
func (v *Video) keyOnlyToOrigin() *http.Client {
	c := *v.files
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("x-goog-api-key")
		}
		return nil
	}
	return &c
}

// googleError reads a Gemini API error envelope (googleAPIError).
func googleError(status int, body []byte) jobs.Refusal {
	return googleAPIError(status, body, "The Gemini API refused the configured key: ")
}

// googleAPIError reads a Google API error envelope, the Gemini API's and
// Vertex AI's alike: {"error":{"code":400,"message":"...","status":
// "INVALID_ARGUMENT","details":[...]}}. A refusal on safety grounds is
// content_policy. A refused credential is our configuration's fault, not
// the prompt's, and the operator's account: 401, 403, and the Gemini
// API's own answer to a bad key, 400 INVALID_ARGUMENT with reason
// API_KEY_INVALID; its message is prefixed with refused (which
// credentials were refused). A 429 RESOURCE_EXHAUSTED whose QuotaFailure
// names a daily quota is the operator's quota used up (retrying soon will
// not cure it); its RetryInfo delay is kept either way.
func googleAPIError(status int, body []byte, refused string) jobs.Refusal {
	var e errorBody
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return jobs.Refusal{}
	}
	r := jobs.Refusal{Message: e.Error.Message, RetryAfter: e.Error.retryDelay()}
	lower := strings.ToLower(e.Error.Message)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || e.Error.hasReason("API_KEY_INVALID"):
		r.Message, r.Account = refused+e.Error.Message, true
	case status == http.StatusTooManyRequests && e.Error.dailyQuota():
		r.Account = true
	case status == http.StatusBadRequest && (strings.Contains(lower, "safety") || strings.Contains(lower, "responsible ai") || strings.Contains(lower, "policy")):
		r.Code = jobs.CodeContentPolicy
	}
	return r
}
