package fal

// The fake below follows fal's queue API (docs.fal.ai/model-apis/model-
// endpoints/queue): POST https://queue.fal.run/{model_id} with the input
// JSON and "Authorization: Key ..." answers {"request_id", "response_url",
// "status_url", "cancel_url"}; GET status_url answers {"status":
// "IN_QUEUE" | "IN_PROGRESS" | "COMPLETED", ...}; GET response_url answers
// the model's output (Kling: {"video": {"url", "content_type",
// "file_name", "file_size"}}); PUT cancel_url cancels. The status and
// response URLs use the app's path, which for a model id with sub-paths
// is not the submit path. Errors: {"detail": "..."} or a 422 list with
// type "content_policy_violation".

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
)

const testKey = "fal-key-id:fal-key-secret-0123456789"

var klingModel = &catalog.Model{ID: "kling-2.5-turbo", Upstream: "fal-ai/kling-video/v2.5-turbo/pro/text-to-video",
	Input: &catalog.Input{Duration: "duration", DurationString: true, AspectRatio: "aspect_ratio", Fixed: map[string]any{"negative_prompt": "blur"}}}

type falFake struct {
	api, files   *httptest.Server
	mu           sync.Mutex
	submitPath   string
	submitBody   map[string]any
	status       string // status JSON
	result       string // result JSON; {FILES} is replaced by the file host
	resultStatus int
	cancelled    string
	fileAuth     string
}

func newFalFake(t *testing.T) *falFake {
	f := &falFake{status: `{"status":"IN_QUEUE","queue_position":2}`, resultStatus: 200}
	f.files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.fileAuth = r.Header.Get("Authorization")
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, "file:"+r.URL.Path)
	}))
	t.Cleanup(f.files.Close)
	f.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Key "+testKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"detail":"Invalid Key"}`)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		// fal's app path: the model id without its sub-paths.
		app := "/fal-ai/kling-video/requests/req-1"
		switch {
		case r.Method == "POST":
			f.submitPath = r.URL.Path
			json.NewDecoder(r.Body).Decode(&f.submitBody)
			json.NewEncoder(w).Encode(map[string]any{"request_id": "req-1", "status_url": f.api.URL + app + "/status",
				"response_url": f.api.URL + app, "cancel_url": f.api.URL + app + "/cancel", "queue_position": 0})
		case r.Method == "PUT" && r.URL.Path == app+"/cancel":
			f.cancelled = r.URL.Path
			w.WriteHeader(202)
			io.WriteString(w, `{"status":"CANCELLATION_REQUESTED"}`)
		case r.URL.Path == app+"/status":
			io.WriteString(w, f.status)
		case r.URL.Path == app:
			w.WriteHeader(f.resultStatus)
			io.WriteString(w, strings.ReplaceAll(f.result, "{FILES}", f.files.URL))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.api.Close)
	return f
}

func videoJob() *jobs.Job {
	return &jobs.Job{ID: "job_video_x", Type: jobs.TypeVideo, Input: jobs.Input{Prompt: "a fox", Duration: 5, Size: "1920x1080"}}
}

func TestStart(t *testing.T) {
	f := newFalFake(t)
	step, err := New(Config{BaseURL: f.api.URL, APIKey: testKey}).Start(context.Background(), klingModel, videoJob())
	if err != nil {
		t.Fatal(err)
	}
	if f.submitPath != "/fal-ai/kling-video/v2.5-turbo/pro/text-to-video" {
		t.Errorf("submit path = %s; want the model id", f.submitPath)
	}
	want := map[string]any{"prompt": "a fox", "duration": "5", "aspect_ratio": "16:9", "negative_prompt": "blur"}
	if len(f.submitBody) != len(want) {
		t.Errorf("input = %v; want %v", f.submitBody, want)
	}
	for k, v := range want {
		if f.submitBody[k] != v {
			t.Errorf("input[%s] = %v; want %v", k, f.submitBody[k], v)
		}
	}
	h := step.Handle
	app := f.api.URL + "/fal-ai/kling-video/requests/req-1"
	if h == nil || h.ID != "req-1" || h.StatusURL != app+"/status" || h.ResultURL != app || h.CancelURL != app+"/cancel" {
		t.Errorf("handle = %+v; want fal's URLs as given", h)
	}
}

func TestPoll(t *testing.T) {
	result := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name         string
		jobType      string
		status       string
		result       string
		resultStatus int
		wantFile     string // the file's path, or "" pending
		wantCT       string
		wantCode     string
	}{
		{"queued", jobs.TypeVideo, `{"status":"IN_QUEUE","queue_position":3}`, "", 200, "", "", ""},
		{"in progress", jobs.TypeVideo, `{"status":"IN_PROGRESS","logs":[{"message":"step 3"}]}`, "", 200, "", "", ""},
		{"video result", jobs.TypeVideo, `{"status":"COMPLETED"}`, result("kling.json"), 200, "/files/output.mp4", "video/mp4", ""},
		{"audio file object", jobs.TypeMusic, `{"status":"COMPLETED"}`, result("audio_file.json"), 200, "/files/song", "audio/wav", ""},
		{"list of files by extension", jobs.TypeSFX, `{"status":"COMPLETED"}`, result("list.json"), 200, "/files/b.mp3", "audio/mpeg", ""},
		{"no media", jobs.TypeVideo, `{"status":"COMPLETED"}`, `{"images":[{"url":"{FILES}/files/x.png","content_type":"image/png"}]}`, 200, "", "", jobs.CodeUpstream},
		{"failed request", jobs.TypeVideo, `{"status":"COMPLETED"}`, `{"detail":"Internal error while generating"}`, 400, "", "", jobs.CodeUpstream},
		{"content policy", jobs.TypeVideo, `{"status":"COMPLETED"}`, `{"detail":[{"loc":["body","prompt"],"msg":"The prompt was flagged by the content checker.","type":"content_policy_violation"}]}`, 422, "", "", jobs.CodeContentPolicy},
		{"error in status", jobs.TypeVideo, `{"status":"COMPLETED","error":"Generation failed","error_type":"runtime_error"}`, "", 200, "", "", jobs.CodeUpstream},
		{"result server error", jobs.TypeVideo, `{"status":"COMPLETED"}`, `oops`, 503, "", "", "transient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFalFake(t)
			f.status, f.result, f.resultStatus = tt.status, tt.result, tt.resultStatus
			p := New(Config{BaseURL: f.api.URL, APIKey: testKey})
			j := videoJob()
			j.Type = tt.jobType
			step, err := p.Start(context.Background(), klingModel, j)
			if err != nil {
				t.Fatal(err)
			}
			j.Handle = step.Handle
			res, err := p.Poll(context.Background(), klingModel, j)
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q contains the key", err)
			}
			switch {
			case tt.wantCode == "transient":
				var te *jobs.TransientError
				if !errors.As(err, &te) {
					t.Fatalf("Poll = %v; want a TransientError", err)
				}
			case tt.wantCode != "":
				var pe *jobs.ProviderError
				if !errors.As(err, &pe) || pe.Code != tt.wantCode {
					t.Fatalf("Poll = %+v, %v; want %s", res, err, tt.wantCode)
				}
			case tt.wantFile == "":
				if res != nil || err != nil {
					t.Fatalf("Poll = %+v, %v; want pending", res, err)
				}
			default:
				if err != nil {
					t.Fatalf("Poll = %v", err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if string(b) != "file:"+tt.wantFile || res.ContentType != tt.wantCT {
					t.Errorf("downloaded %q as %s; want %s as %s", b, res.ContentType, tt.wantFile, tt.wantCT)
				}
				if f.fileAuth != "" {
					t.Error("the key was sent to the file host")
				}
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		want   string
	}{
		{422, `{"detail":[{"loc":["body","duration"],"msg":"value is not a valid enumeration member; permitted: '5', '10'","type":"type_error.enum"}]}`, jobs.CodeUpstream},
		{429, `{"detail":"Too many requests"}`, "transient"},
		{500, `{"detail":"boom"}`, "transient"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		_, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Start(context.Background(), klingModel, videoJob())
		srv.Close()
		var te *jobs.TransientError
		var pe *jobs.ProviderError
		switch {
		case tt.want == "transient" && (!errors.As(err, &te) || te.RetryAfter != 3*time.Second):
			t.Errorf("HTTP %d: Start = %v; want transient after 3s", tt.status, err)
		case tt.want != "transient" && (!errors.As(err, &pe) || pe.Code != tt.want || !strings.Contains(pe.Message, "permitted")):
			t.Errorf("HTTP %d: Start = %v; want %s with fal's message", tt.status, err, tt.want)
		}
	}
}

// TestAccountErrors: a refused key, a locked account and payment required
// are the operator's account's, kept with their status, at submit and at
// a poll; the job they fail tells the client only that the provider
// failed (jobs.FailureOf), and fal's words (which name the account and its
// balance) are kept for the operator alone.
func TestAccountErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
	}{
		{401, `{"detail":"Invalid key for org SECRET-ORG-42"}`},
		{403, `{"detail":"User SECRET-ORG-42 is locked. Reason: Exhausted balance."}`},
		{402, `{"detail":"Payment required: balance of SECRET-ORG-42 is $0.00"}`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		p := New(Config{BaseURL: srv.URL, APIKey: testKey})
		_, startErr := p.Start(context.Background(), klingModel, videoJob())
		j := videoJob()
		j.Handle = &jobs.Handle{ID: "r1", StatusURL: srv.URL + "/status", ResultURL: srv.URL + "/result"}
		_, pollErr := p.Poll(context.Background(), klingModel, j)
		srv.Close()
		for step, err := range map[string]error{"Start": startErr, "Poll": pollErr} {
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || !pe.Account || pe.Status != tt.status || pe.Code != jobs.CodeUpstream {
				t.Errorf("HTTP %d: %s = %v; want an upstream_error of the operator's account, status kept", tt.status, step, err)
			}
			if je := jobs.FailureOf("fal", err); je == nil || strings.Contains(je.Message, "SECRET") || !strings.Contains(je.Vendor, "SECRET-ORG-42") {
				t.Errorf("HTTP %d: %s fails the job with %+v; want a generic message, fal's words for the operator only", tt.status, step, je)
			}
		}
	}
}

func TestCancel(t *testing.T) {
	f := newFalFake(t)
	p := New(Config{BaseURL: f.api.URL, APIKey: testKey})
	j := videoJob()
	step, err := p.Start(context.Background(), klingModel, j)
	if err != nil {
		t.Fatal(err)
	}
	j.Handle = step.Handle
	if err := p.Cancel(context.Background(), klingModel, j); err != nil || f.cancelled == "" {
		t.Errorf("Cancel = %v (cancel_url hit: %q); want the PUT to cancel_url", err, f.cancelled)
	}
}
