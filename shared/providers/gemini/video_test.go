package gemini

// The fake below speaks the Gemini API's long-running video protocol as
// documented for Veo (ai.google.dev/gemini-api/docs/video, REST examples):
// POST /v1beta/models/{model}:predictLongRunning with instances[].prompt
// and parameters {aspectRatio, resolution, durationSeconds (integer)};
// the answer {"name": "models/{model}/operations/{id}"}; GET
// /v1beta/{name} answers {"name", "done", "error"?, "response":
// {"generateVideoResponse": {"generatedSamples": [{"video": {"uri"}}],
// "raiMediaFilteredCount", "raiMediaFilteredReasons"}}}; the uri is
// downloaded with the key (curl -L), redirecting to the file. A bad key
// is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID (what the Gemini
// API answers; the SDK contract test in cmd/genway reads it so).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
)

const veoKey = "AIza-test-veo-key-0123456789"

type veoFake struct {
	mu       sync.Mutex
	body     map[string]any // the last submit
	path     string         // the last submit's path
	poll     string         // the answer to GET of an operation
	polled   string         // the last polled path
	fileKey  string         // the key header the file host saw
	fileHost *httptest.Server
}

func newVeoFake(t *testing.T, submitStatus int, submitBody string) (*veoFake, *httptest.Server) {
	f := &veoFake{}
	f.fileHost = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.fileKey = r.Header.Get("x-goog-api-key")
		f.mu.Unlock()
		w.Header().Set("Content-Type", "video/mp4")
		io.WriteString(w, "mp4-bytes")
	}))
	t.Cleanup(f.fileHost.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-goog-api-key") != veoKey || r.URL.RawQuery != "" && !strings.HasSuffix(r.URL.Path, ":download") {
			// The Gemini API answers a bad key 400, not 401.
			http.Error(w, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",`+
				`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, 400)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.Method == "POST":
			f.path = r.URL.Path
			json.NewDecoder(r.Body).Decode(&f.body)
			if submitStatus == 429 {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(submitStatus)
			io.WriteString(w, submitBody)
		case strings.HasSuffix(r.URL.Path, ":download"):
			http.Redirect(w, r, f.fileHost.URL+"/video.mp4", http.StatusFound)
		default:
			f.polled = r.URL.Path
			io.WriteString(w, f.poll)
		}
	}))
	t.Cleanup(api.Close)
	return f, api
}

func veoJob(size string) *jobs.Job {
	return &jobs.Job{ID: "job_video_x", Type: jobs.TypeVideo, Model: "veo-3.1", Input: jobs.Input{Prompt: "a fox", Duration: 8, Size: size}}
}

var veoModel = &catalog.Model{ID: "veo-3.1", Upstream: "veo-3.1-generate-preview"}

func TestVideoStart(t *testing.T) {
	tests := []struct {
		name       string
		size       string
		status     int
		body       string
		wantParams map[string]any
		wantCode   string // "" success, "transient", or a job error code
		wantMsg    string
	}{
		{"landscape 720p", "1280x720", 200, `{"name":"models/veo-3.1-generate-preview/operations/op1"}`,
			map[string]any{"aspectRatio": "16:9", "resolution": "720p", "durationSeconds": 8.0}, "", ""},
		{"portrait 1080p", "1080x1920", 200, `{"name":"models/veo-3.1-generate-preview/operations/op1"}`,
			map[string]any{"aspectRatio": "9:16", "resolution": "1080p", "durationSeconds": 8.0}, "", ""},
		{"invalid argument", "1280x720", 400, `{"error":{"code":400,"message":"durationSeconds must be 4, 6 or 8","status":"INVALID_ARGUMENT"}}`,
			nil, jobs.CodeUpstream, "durationSeconds must be 4, 6 or 8"},
		{"refused prompt", "1280x720", 400, `{"error":{"code":400,"message":"The prompt could not be submitted: it violates the usage policy (safety).","status":"INVALID_ARGUMENT"}}`,
			nil, jobs.CodeContentPolicy, "usage policy"},
		{"bad key", "1280x720", 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`,
			nil, jobs.CodeUpstream, "refused the configured key"},
		{"rate limited", "1280x720", 429, `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, nil, "transient", ""},
		{"daily quota", "1280x720", 429, dailyQuota, nil, "transient", ""},
		{"unavailable", "1280x720", 503, `{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}`, nil, "transient", ""},
		{"no operation name", "1280x720", 200, `{}`, nil, jobs.CodeUpstream, "no operation"},
		{"square size", "720x720", 200, `{}`, nil, jobs.CodeUpstream, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, api := newVeoFake(t, tt.status, tt.body)
			v := NewVideo(Config{BaseURL: api.URL, APIKey: veoKey})
			step, err := v.Start(context.Background(), veoModel, veoJob(tt.size))
			if err != nil && strings.Contains(err.Error(), veoKey) {
				t.Fatalf("error %q contains the key", err)
			}
			switch tt.wantCode {
			case "":
				if err != nil || step.Handle == nil || step.Handle.ID != "models/veo-3.1-generate-preview/operations/op1" {
					t.Fatalf("Start = %+v, %v; want the operation as handle", step, err)
				}
				if f.path != "/v1beta/models/veo-3.1-generate-preview:predictLongRunning" {
					t.Errorf("submit path = %s", f.path)
				}
				inst := f.body["instances"].([]any)[0].(map[string]any)
				params := f.body["parameters"].(map[string]any)
				if inst["prompt"] != "a fox" || len(params) != len(tt.wantParams) {
					t.Errorf("submit body = %v; want prompt and parameters %v", f.body, tt.wantParams)
				}
				for k, want := range tt.wantParams {
					if params[k] != want {
						t.Errorf("parameters[%s] = %v; want %v", k, params[k], want)
					}
				}
			case "transient":
				var te *jobs.TransientError
				if !errors.As(err, &te) {
					t.Fatalf("Start = %v; want a TransientError", err)
				}
				if tt.status == 429 && te.RetryAfter != 7*time.Second {
					t.Errorf("RetryAfter = %v; want 7s (the header wins over the body's delay)", te.RetryAfter)
				}
				if daily := tt.body == dailyQuota; te.Account != daily || te.Status != tt.status {
					t.Errorf("TransientError = %+v; want status %d, Account %v (a daily quota is the operator's)", te, tt.status, daily)
				}
			default:
				var pe *jobs.ProviderError
				if !errors.As(err, &pe) || pe.Code != tt.wantCode || !strings.Contains(pe.Message, tt.wantMsg) {
					t.Fatalf("Start = %v; want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
				}
				if badKey := tt.name == "bad key"; pe.Account != badKey {
					t.Errorf("ProviderError.Account = %v; want %v (only a refused key is the operator's)", pe.Account, badKey)
				}
			}
		})
	}
}

// TestVideoAccountErrors: Veo's answers about the operator's account (a
// key the Gemini API refuses, a denied project, a used-up daily quota)
// fail the job with the generic message of a provider that failed; the
// API's words, which name the project or the quota, are the operator's
// alone (jobs.FailureOf).
func TestVideoAccountErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
	}{
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid for SECRET-PROJECT-42.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"SECRET-PROJECT-42: request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`},
		{"denied", 403, `{"error":{"code":403,"message":"Generative Language API has not been used in project SECRET-PROJECT-42.","status":"PERMISSION_DENIED"}}`},
		{"daily quota", 429, strings.Replace(dailyQuota, "please check your plan", "SECRET-PROJECT-42, please check your plan", 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, api := newVeoFake(t, tt.status, tt.body)
			_, err := NewVideo(Config{BaseURL: api.URL, APIKey: veoKey}).Start(context.Background(), veoModel, veoJob("1280x720"))
			je := jobs.FailureOf("gemini", err)
			if je == nil || je.Message != "The gemini provider failed; no credits were charged." || !strings.Contains(je.Vendor, "SECRET-PROJECT-42") {
				t.Errorf("Start = %v fails the job with %+v; want the generic message, the API's words in Vendor", err, je)
			}
		})
	}
}

// dailyQuota is the Gemini API's answer when a daily quota is used up:
// 429 RESOURCE_EXHAUSTED with a QuotaFailure naming the quota and a
// RetryInfo.
const dailyQuota = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.",` +
	`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` +
	`{"quotaMetric":"generativelanguage.googleapis.com/predict_long_running_requests","quotaId":"PredictLongRunningRequestsPerDayPerProjectPerModel"}]},` +
	`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}`

// TestGoogleErrorSignals: what googleError reads in the body for the
// routing policy: a daily quota is the operator's account, a per-minute
// one is not; RetryInfo's delay is kept.
func TestGoogleErrorSignals(t *testing.T) {
	perMinute := strings.Replace(dailyQuota, "PerDay", "PerMinute", 1)
	for _, tt := range []struct {
		name    string
		status  int
		body    string
		account bool
		wait    time.Duration
	}{
		{"daily quota", 429, dailyQuota, true, 41 * time.Second},
		{"per-minute quota", 429, perMinute, false, 41 * time.Second},
		{"plain 429", 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, false, 0},
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`, true, 0},
	} {
		r := googleError(tt.status, []byte(tt.body))
		if r.Account != tt.account || r.RetryAfter != tt.wait || r.Message == "" {
			t.Errorf("%s: googleError = %+v; want Account %v, RetryAfter %v, a message", tt.name, r, tt.account, tt.wait)
		}
	}
}

func TestVideoPoll(t *testing.T) {
	done := func(api string) string {
		return `{"name":"models/veo-3.1-generate-preview/operations/op1","done":true,"response":{"@type":"type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse","generateVideoResponse":{"generatedSamples":[{"video":{"uri":"` + api + `/v1beta/files/abc:download?alt=media"}}]}}}`
	}
	tests := []struct {
		name     string
		answer   func(api string) string
		wantCode string // "" done, "pending"
		wantMsg  string
	}{
		{"running", func(string) string { return `{"name":"models/veo-3.1-generate-preview/operations/op1"}` }, "pending", ""},
		{"done", done, "", ""},
		{"safety filtered", func(string) string {
			return `{"name":"n","done":true,"response":{"generateVideoResponse":{"raiMediaFilteredCount":1,"raiMediaFilteredReasons":["The video could not be generated because it may violate our policies."]}}}`
		}, jobs.CodeContentPolicy, "may violate our policies"},
		{"failed", func(string) string {
			return `{"name":"n","done":true,"error":{"code":13,"message":"Video generation failed internally."}}`
		}, jobs.CodeUpstream, "failed internally"},
		{"done without samples", func(string) string { return `{"name":"n","done":true,"response":{"generateVideoResponse":{}}}` }, jobs.CodeUpstream, "without a video"},
		{"garbage", func(string) string { return `<html>` }, jobs.CodeUpstream, "not the expected JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, api := newVeoFake(t, 200, "")
			f.poll = tt.answer(api.URL)
			v := NewVideo(Config{BaseURL: api.URL, APIKey: veoKey})
			j := veoJob("1280x720")
			j.Handle = &jobs.Handle{ID: "models/veo-3.1-generate-preview/operations/op1"}
			res, err := v.Poll(context.Background(), veoModel, j)
			if f.polled != "/v1beta/models/veo-3.1-generate-preview/operations/op1" {
				t.Errorf("polled %q; want the operation name under /v1beta/", f.polled)
			}
			if err != nil && strings.Contains(err.Error(), veoKey) {
				t.Fatalf("error %q contains the key", err)
			}
			switch tt.wantCode {
			case "pending":
				if res != nil || err != nil {
					t.Fatalf("Poll = %+v, %v; want nil, nil", res, err)
				}
			case "":
				if err != nil {
					t.Fatalf("Poll = %v", err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if string(b) != "mp4-bytes" || res.ContentType != "video/mp4" || res.Ext != "mp4" || res.Duration != 8 {
					t.Errorf("result = %q %s %s %ds; want the file as video/mp4, 8 s", b, res.ContentType, res.Ext, res.Duration)
				}
				if f.fileKey != "" {
					t.Errorf("the file host (another host, after a redirect) got the key")
				}
			default:
				var pe *jobs.ProviderError
				if !errors.As(err, &pe) || pe.Code != tt.wantCode || !strings.Contains(pe.Message, tt.wantMsg) {
					t.Fatalf("Poll = %+v, %v; want %s mentioning %q", res, err, tt.wantCode, tt.wantMsg)
				}
			}
		})
	}
}

func TestVideoPollRefusesBadHandle(t *testing.T) {
	v := NewVideo(Config{BaseURL: "http://127.0.0.1:1", APIKey: veoKey})
	j := veoJob("1280x720")
	j.Handle = &jobs.Handle{ID: "../../v1/other?x=1"}
	var pe *jobs.ProviderError
	if _, err := v.Poll(context.Background(), veoModel, j); !errors.As(err, &pe) {
		t.Fatalf("Poll(bad handle) = %v; want a ProviderError", err)
	}
}
