package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
)

// The Vertex AI wire for Veo (Gemini Enterprise Agent Platform, formerly
// Vertex AI; docs.cloud.google.com/gemini-enterprise-agent-platform:
// the Veo API reference, models.predictLongRunning and
// models.fetchPredictOperation), as @google/genai 3.3.0 speaks it in
// Vertex mode (models.generateVideos, operations.getVideosOperation):
//
//	POST {base}/v1/projects/{project}/locations/{region}/publishers/google/models/{model}:predictLongRunning
//	  {"instances":[{"prompt"}],"parameters":{"aspectRatio","durationSeconds","generateAudio",
//	   "resolution","sampleCount"[,"storageUri"]}}
//	  -> {"name": "projects/{project}/locations/{region}/publishers/google/models/{model}/operations/{id}"}
//	POST {base}/v1/{name up to /operations/}:fetchPredictOperation {"operationName": name}
//	  -> {"name","done","error"?,"response":{"raiMediaFilteredCount","raiMediaFilteredReasons",
//	      "videos":[{"bytesBase64Encoded" | "gcsUri","mimeType"}]}}
//
// with "Authorization: Bearer <access token>" of a service account
// (serviceaccount.go). A video comes inline unless the request named a
// Cloud Storage prefix (storageUri); then it is read from Cloud Storage's
// JSON API with the same token.

// DefaultVertexRegion is the Vertex AI region used when none is set.
const DefaultVertexRegion = "us-central1"

// maxInlineVideo bounds a video decoded from an operation's answer (an
// 8-second 1080p Veo video is a few megabytes).
const maxInlineVideo = 256 << 20

// VertexConfig configures a VertexVideo.
type VertexConfig struct {
	// Credentials is a service-account key: the key file's JSON, or the
	// path of the file.
	Credentials string
	// Project is the Google Cloud project billed; "" means the key's
	// project_id.
	Project string
	// Region is the Vertex AI location; "" means DefaultVertexRegion.
	Region string
	// BaseURL replaces https://{region}-aiplatform.googleapis.com and
	// Cloud Storage's https://storage.googleapis.com (a test server or a
	// private endpoint serving both); "" for Google's.
	BaseURL string
	// StorageURI, a gs://bucket/prefix/, makes Vertex AI write videos there
	// instead of answering them inline; "" for inline.
	StorageURI string
	// HTTPClient makes every call, the token requests included;
	// http.DefaultClient if nil.
	HTTPClient *http.Client
	// TempDir is where inline videos are spooled; os.TempDir() if "".
	TempDir string
}

// VertexVideo makes videos with Veo on Vertex AI, a long-running
// jobs.Provider (Start submits, Poll reads the operation once and, when it
// is done, hands over the video). It has no Cancel: Vertex AI offers none
// for a prediction. Safe for concurrent use.
type VertexVideo struct {
	project    string
	region     string
	base       string // "" for the region's own host
	storageURI string
	tempDir    string
	client     *http.Client
	tokens     *tokenSource
}

var (
	_ jobs.Provider = (*VertexVideo)(nil)
	_ jobs.Poller   = (*VertexVideo)(nil)
)

var (
	// regionRE and projectRE keep configuration out of URL syntax.
	regionRE  = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)
	projectRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.:-]{0,99}$`)
	// operationRE is an operation name as Vertex AI gives it (the project
	// may be its number): the model's resource name, then the operation.
	operationRE = regexp.MustCompile(`^(projects/[a-z0-9.:-]+/locations/([a-z][a-z0-9-]+)/publishers/google/models/[A-Za-z0-9._-]+)/operations/[A-Za-z0-9._-]+$`)
)

// NewVertexVideo returns the Vertex AI Veo provider for cfg, or an error
// if its key cannot be read or its configuration is unusable. Errors never
// quote the key.
func NewVertexVideo(cfg VertexConfig) (*VertexVideo, error) {
	sa, err := loadServiceAccount(cfg.Credentials, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("vertex credentials: %w", err)
	}
	v := &VertexVideo{project: cfg.Project, region: cfg.Region, base: strings.TrimRight(cfg.BaseURL, "/"),
		storageURI: cfg.StorageURI, tempDir: cfg.TempDir, client: cfg.HTTPClient}
	if v.project == "" {
		v.project = sa.projectID
	}
	if v.region == "" {
		v.region = DefaultVertexRegion
	}
	if !projectRE.MatchString(v.project) {
		return nil, fmt.Errorf("vertex: project %q is not a Google Cloud project id (set it, or use a key with project_id)", v.project)
	}
	if !regionRE.MatchString(v.region) {
		return nil, fmt.Errorf("vertex: region %q is not a Google Cloud location", v.region)
	}
	if v.storageURI != "" {
		if _, _, err := splitGCS(v.storageURI); err != nil {
			return nil, fmt.Errorf("vertex: storage URI: %w", err)
		}
	}
	if v.base != "" {
		if u, err := url.Parse(v.base); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("vertex: base URL %q is not an http(s) URL", v.base)
		}
	}
	if v.client == nil {
		v.client = http.DefaultClient
	}
	v.tokens = newTokenSource(sa, CloudPlatformScope, v.client)
	return v, nil
}

// apiBase is the Vertex AI host serving location.
func (v *VertexVideo) apiBase(location string) string {
	switch {
	case v.base != "":
		return v.base
	case location == "global":
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + location + "-aiplatform.googleapis.com"
}

func (v *VertexVideo) storageBase() string {
	if v.base != "" {
		return v.base
	}
	return "https://storage.googleapis.com"
}

// vertexParameters are the predictLongRunning parameters: Gemini's, plus
// one video (sampleCount) with its sound (generateAudio: the catalog's
// Veo models and prices are for videos with audio).
type vertexParameters struct {
	videoParameters
	GenerateAudio bool   `json:"generateAudio"`
	SampleCount   int    `json:"sampleCount"`
	StorageURI    string `json:"storageUri,omitempty"`
}

type vertexRequest struct {
	Instances  []videoInstance  `json:"instances"`
	Parameters vertexParameters `json:"parameters"`
}

// vertexOperation is a google.longrunning.Operation of a Veo prediction.
type vertexOperation struct {
	Name     string     `json:"name"`
	Done     bool       `json:"done"`
	Error    *rpcStatus `json:"error"`
	Response *struct {
		raiFiltered
		Videos []struct {
			GCSURI   string `json:"gcsUri"`
			MimeType string `json:"mimeType"`
		} `json:"videos"`
	} `json:"response"`
}

// Start implements jobs.Provider: it submits the generation; the
// operation's name is the job's handle.
func (v *VertexVideo) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	params, err := videoParams(j.Input.Size, j.Input.Duration)
	if err != nil {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo cannot make a video of this size.", Err: err}
	}
	body, err := json.Marshal(vertexRequest{Instances: []videoInstance{{Prompt: j.Input.Prompt}},
		Parameters: vertexParameters{videoParameters: params, GenerateAudio: true, SampleCount: 1, StorageURI: v.storageURI}})
	if err != nil {
		return nil, fmt.Errorf("vertex: encode request: %w", err)
	}
	model := "projects/" + v.project + "/locations/" + v.region + "/publishers/google/models/" + url.PathEscape(m.Upstream)
	resp, err := v.call(ctx, v.apiBase(v.region)+"/v1/"+model+":predictLongRunning", body, "vertex submit")
	if err != nil {
		return nil, err
	}
	var op vertexOperation
	if err := mediafetch.DecodeJSON(resp, "vertex submit", &op); err != nil {
		return nil, err
	}
	if !operationRE.MatchString(op.Name) {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Vertex AI answered no usable operation name.", Err: fmt.Errorf("operation %q", op.Name)}
	}
	return &jobs.Step{Handle: &jobs.Handle{ID: op.Name}}, nil
}

// Poll implements jobs.Poller: one read of the operation; once it is done,
// the video, decoded from the answer into a temporary file as it arrives
// (or read from Cloud Storage).
func (v *VertexVideo) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	name := j.Handle.ID
	match := operationRE.FindStringSubmatch(name)
	if match == nil {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The stored Vertex AI operation name is not usable.", Err: fmt.Errorf("operation %q", name)}
	}
	body, _ := json.Marshal(map[string]string{"operationName": name})
	resp, err := v.call(ctx, v.apiBase(match[2])+"/v1/"+match[1]+":fetchPredictOperation", body, "vertex poll")
	if err != nil {
		return nil, err
	}
	sp := &spool{dir: v.tempDir}
	res, err := v.readOperation(ctx, resp.Body, sp, j)
	if res == nil || err != nil {
		sp.Close()
	}
	return res, err
}

// readOperation reads a fetchPredictOperation answer, spooling an inline
// video into sp, and returns the finished video (nil, nil while the
// operation runs). It closes body.
func (v *VertexVideo) readOperation(ctx context.Context, body io.ReadCloser, sp *spool, j *jobs.Job) (*jobs.Result, error) {
	defer body.Close()
	f := newPayloadFilter(body, "bytesBase64Encoded", sp, maxInlineVideo)
	var op vertexOperation
	if err := json.NewDecoder(io.LimitReader(f, mediafetch.MaxJSON)).Decode(&op); err != nil {
		var pe *payloadError
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		var we *sinkError
		switch {
		case errors.Is(err, errPayloadTooLarge):
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("Vertex AI's video is larger than %d bytes; no credits were charged.", maxInlineVideo), Err: err}
		case errors.As(err, &pe), errors.As(err, &se), errors.As(err, &te):
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Vertex AI answered something that is not the expected JSON.", Err: fmt.Errorf("vertex poll: %w", err)}
		case errors.As(err, &we):
			return nil, fmt.Errorf("vertex poll: spool the video: %w", err) // the local disk: worth another try
		}
		return nil, mediafetch.TransportError(ctx, "vertex poll: read answer", err)
	}
	switch {
	case !op.Done:
		return nil, nil
	case op.Error != nil:
		return nil, op.Error.failure(j.Handle.ID)
	case op.Response == nil:
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo finished without a response."}
	}
	r := op.Response
	if err := r.failure(); err != nil {
		return nil, err
	}
	if len(r.Videos) == 0 {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo finished without a video."}
	}
	ct := mediafetch.ContentType(r.Videos[0].MimeType, "", "video/mp4")
	var res *jobs.Result
	switch {
	case f.Written() > 0:
		if err := sp.rewind(); err != nil {
			return nil, fmt.Errorf("vertex poll: %w", err)
		}
		res = &jobs.Result{Body: sp, Size: f.Written(), ContentType: ct, Ext: jobs.Ext(ct)}
	case r.Videos[0].GCSURI != "":
		got, err := v.download(ctx, r.Videos[0].GCSURI, ct)
		if err != nil {
			return nil, err
		}
		res = got
	default:
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Veo finished without a video."}
	}
	res.Duration = j.Input.Duration
	return res, nil
}

// download reads gs://bucket/object through Cloud Storage's JSON API.
func (v *VertexVideo) download(ctx context.Context, gcsURI, contentType string) (*jobs.Result, error) {
	bucket, object, err := splitGCS(gcsURI)
	if err != nil || object == "" {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Vertex AI gave an unusable Cloud Storage link.", Err: fmt.Errorf("gcsUri %q", gcsURI)}
	}
	tok, err := v.tokens.Token(ctx)
	if err != nil {
		return nil, err
	}
	link := v.storageBase() + "/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(object) + "?alt=media"
	return mediafetch.Download(ctx, v.client, link, http.Header{"Authorization": {"Bearer " + tok}}, contentType)
}

// call POSTs body to rawURL with a bearer token and returns the 2xx
// answer. Errors are classified as the Gemini API's are (googleAPIError:
// a refused service account or a used-up daily quota is the operator's
// account, jobs.Refusal.Account, which may move a job to its fallback);
// a 401 drops the token and is worth another try (a token revoked or
// expired early: the next call fetches a new one).
func (v *VertexVideo) call(ctx context.Context, rawURL string, body []byte, what string) (*http.Response, error) {
	tok, err := v.tokens.Token(ctx)
	if err != nil {
		return nil, err
	}
	req, err := mediafetch.NewRequest(http.MethodPost, rawURL, body, http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		return nil, err
	}
	unauthorized := false
	resp, err := mediafetch.Do(ctx, v.client, req, what, func(status int, body []byte) jobs.Refusal {
		unauthorized = status == http.StatusUnauthorized
		return googleAPIError(status, body, "Vertex AI refused the service account: ")
	})
	if unauthorized {
		// Only a fault worth another try (jobs.Failure: Transient), not
		// the refused account the 401's own classification says: the
		// error is kept as text so that it does not wrap that one.
		v.tokens.Invalidate(tok)
		return nil, &jobs.TransientError{Err: fmt.Errorf("%s: token refused, dropped: %s", what, err)}
	}
	return resp, err
}

// splitGCS splits gs://bucket/object.
func splitGCS(uri string) (bucket, object string, err error) {
	rest, ok := strings.CutPrefix(uri, "gs://")
	if !ok {
		return "", "", fmt.Errorf("%q is not a gs:// URI", uri)
	}
	bucket, object, _ = strings.Cut(rest, "/")
	if bucket == "" || strings.ContainsAny(bucket, "?#") {
		return "", "", fmt.Errorf("%q names no bucket", uri)
	}
	return bucket, object, nil
}
