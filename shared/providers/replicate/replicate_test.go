package replicate

// The fake below follows Replicate's HTTP API reference
// (replicate.com/docs/reference/http): POST /v1/models/{owner}/{name}/
// predictions {"input"} for official models, POST /v1/predictions
// {"version", "input"} for a version; both answer a prediction {"id",
// "status": "starting", "urls": {"get", "cancel"}}; GET urls.get answers
// it with status starting / processing / succeeded / failed / canceled /
// aborted (the replicate SDK's Status type has it: past the deadline
// before it started),
// "output" (a URL or a list of them for file outputs) and "error"; POST
// urls.cancel cancels. Errors are problem details {"title", "detail",
// "status"}.

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

const testToken = "r8_test_token_0123456789abcdef"

var musicgen = &catalog.Model{ID: "musicgen", Upstream: "meta/musicgen:671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb",
	Input: &catalog.Input{Duration: "duration", Format: "output_format", Fixed: map[string]any{"model_version": "stereo-large"}}}

type repFake struct {
	api, files *httptest.Server
	mu         sync.Mutex
	path       string
	body       map[string]any
	answer     string // the GET answer; {FILES} is the file host
	cancelled  bool
	fileAuth   string
}

func newRepFake(t *testing.T) *repFake {
	f := &repFake{}
	f.files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.fileAuth = r.Header.Get("Authorization")
		f.mu.Unlock()
		io.WriteString(w, "file:"+r.URL.Path)
	}))
	t.Cleanup(f.files.Close)
	f.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.WriteHeader(401)
			io.WriteString(w, `{"title":"Unauthenticated","detail":"You did not pass a valid authentication token","status":401}`)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		get := f.api.URL + "/v1/predictions/p1"
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/predictions/p1/cancel":
			f.cancelled = true
			io.WriteString(w, `{"id":"p1","status":"canceled"}`)
		case r.Method == "POST":
			f.path = r.URL.Path
			json.NewDecoder(r.Body).Decode(&f.body)
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"id": "p1", "status": "starting", "output": nil, "error": nil,
				"urls": map[string]any{"get": get, "cancel": get + "/cancel"}})
		case r.URL.Path == "/v1/predictions/p1":
			io.WriteString(w, strings.ReplaceAll(f.answer, "{FILES}", f.files.URL))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.api.Close)
	return f
}

func musicJob() *jobs.Job {
	return &jobs.Job{ID: "job_music_x", Type: jobs.TypeMusic, Input: jobs.Input{Prompt: "lofi beat", Duration: 12, Format: "mp3", Mode: "DESCRIPTION"}}
}

func TestCreate(t *testing.T) {
	for _, tt := range []struct {
		name, upstream, wantPath, wantVersion string
	}{
		{"by version", musicgen.Upstream, "/v1/predictions", "671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb"},
		{"by model", "stability-ai/stable-audio-2.5", "/v1/models/stability-ai/stable-audio-2.5/predictions", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newRepFake(t)
			m := *musicgen
			m.Upstream = tt.upstream
			step, err := New(Config{BaseURL: f.api.URL, APIToken: testToken}).Start(context.Background(), &m, musicJob())
			if err != nil {
				t.Fatal(err)
			}
			if f.path != tt.wantPath || (f.body["version"] != nil) != (tt.wantVersion != "") || (tt.wantVersion != "" && f.body["version"] != tt.wantVersion) {
				t.Errorf("create %s %v; want %s with version %q", f.path, f.body, tt.wantPath, tt.wantVersion)
			}
			in, _ := f.body["input"].(map[string]any)
			if in["prompt"] != "lofi beat" || in["duration"] != 12.0 || in["output_format"] != "mp3" || in["model_version"] != "stereo-large" {
				t.Errorf("input = %v; want the mapped job", in)
			}
			h := step.Handle
			if h == nil || h.ID != "p1" || h.StatusURL != f.api.URL+"/v1/predictions/p1" || h.CancelURL != h.StatusURL+"/cancel" {
				t.Errorf("handle = %+v; want the prediction's id and urls", h)
			}
		})
	}
}

func TestPoll(t *testing.T) {
	tests := []struct {
		name     string
		answer   string
		wantFile string
		wantCode string
	}{
		{"starting", `{"id":"p1","status":"starting","output":null}`, "", ""},
		{"processing", `{"id":"p1","status":"processing","logs":"50%"}`, "", ""},
		{"string output", `{"id":"p1","status":"succeeded","output":"{FILES}/out.mp3"}`, "/out.mp3", ""},
		{"list output", `{"id":"p1","status":"succeeded","output":["{FILES}/cover.png","{FILES}/song.wav"]}`, "/song.wav", ""},
		{"object output", `{"id":"p1","status":"succeeded","output":{"url":"{FILES}/x.mp3"}}`, "/x.mp3", ""},
		{"no output", `{"id":"p1","status":"succeeded","output":null}`, "", jobs.CodeUpstream},
		{"failed", `{"id":"p1","status":"failed","error":"CUDA out of memory"}`, "", jobs.CodeUpstream},
		{"nsfw", `{"id":"p1","status":"failed","error":"NSFW content detected. Try running it again, or try a different prompt."}`, "", jobs.CodeContentPolicy},
		{"canceled", `{"id":"p1","status":"canceled"}`, "", jobs.CodeUpstream},
		{"aborted", `{"id":"p1","status":"aborted"}`, "", jobs.CodeUpstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRepFake(t)
			f.answer = tt.answer
			p := New(Config{BaseURL: f.api.URL, APIToken: testToken})
			j := musicJob()
			step, err := p.Start(context.Background(), musicgen, j)
			if err != nil {
				t.Fatal(err)
			}
			j.Handle = step.Handle
			res, err := p.Poll(context.Background(), musicgen, j)
			if err != nil && strings.Contains(err.Error(), testToken) {
				t.Errorf("error %q contains the token", err)
			}
			switch {
			case tt.wantCode != "":
				var pe *jobs.ProviderError
				// Every status here is one Replicate documents.
				if !errors.As(err, &pe) || pe.Code != tt.wantCode || strings.Contains(pe.Message, "unknown status") {
					t.Fatalf("Poll = %+v, %v; want %s", res, err, tt.wantCode)
				}
			case tt.wantFile == "":
				if res != nil || err != nil {
					t.Fatalf("Poll = %+v, %v; want pending", res, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if string(b) != "file:"+tt.wantFile {
					t.Errorf("downloaded %q; want %s", b, tt.wantFile)
				}
				if f.fileAuth != "" {
					t.Error("the token was sent to the delivery host")
				}
			}
		})
	}
}

// TestAccountErrors: a refused token and payment required are the
// operator's account's, kept with their status.
func TestAccountErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
	}{
		{401, `{"title":"Unauthenticated","detail":"You did not pass a valid authentication token for SECRET-ORG-42","status":401}`},
		{402, `{"title":"Payment Required","detail":"SECRET-ORG-42 has insufficient credit to run this model.","status":402}`},
		{403, `{"title":"Forbidden","detail":"SECRET-ORG-42 may not run this model.","status":403}`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		p := New(Config{BaseURL: srv.URL, APIToken: testToken})
		_, startErr := p.Start(context.Background(), musicgen, musicJob())
		j := musicJob()
		j.Handle = &jobs.Handle{ID: "p1", StatusURL: srv.URL + "/v1/predictions/p1"}
		_, pollErr := p.Poll(context.Background(), musicgen, j)
		srv.Close()
		for step, err := range map[string]error{"Start": startErr, "Poll": pollErr} {
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || !pe.Account || pe.Status != tt.status {
				t.Errorf("HTTP %d: %s = %v; want a failure of the operator's account, status kept", tt.status, step, err)
			}
			// The job it fails tells the client only that the provider
			// failed; Replicate's words are the operator's.
			if je := jobs.FailureOf("replicate", err); je == nil || strings.Contains(je.Message, "SECRET") || !strings.Contains(je.Vendor, "SECRET-ORG-42") {
				t.Errorf("HTTP %d: %s fails the job with %+v; want a generic message, Replicate's words for the operator only", tt.status, step, je)
			}
		}
	}
}

func TestErrorsAndCancel(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		want   string
	}{
		{422, `{"title":"Input validation failed","detail":"- input.duration: Must be less than or equal to 30","status":422}`, jobs.CodeUpstream},
		{429, `{"title":"Request was throttled","detail":"Request was throttled. Expected available in 5 seconds.","status":429}`, "transient"},
		{502, `bad gateway`, "transient"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		_, err := New(Config{BaseURL: srv.URL, APIToken: testToken}).Start(context.Background(), musicgen, musicJob())
		srv.Close()
		var te *jobs.TransientError
		var pe *jobs.ProviderError
		switch {
		case tt.want == "transient" && (!errors.As(err, &te) || te.RetryAfter != 5*time.Second):
			t.Errorf("HTTP %d: Start = %v; want transient after 5s", tt.status, err)
		case tt.want != "transient" && (!errors.As(err, &pe) || pe.Code != tt.want || !strings.Contains(pe.Message, "less than or equal to 30")):
			t.Errorf("HTTP %d: Start = %v; want %s with the detail", tt.status, err, tt.want)
		}
	}
	f := newRepFake(t)
	p := New(Config{BaseURL: f.api.URL, APIToken: testToken})
	j := musicJob()
	step, err := p.Start(context.Background(), musicgen, j)
	if err != nil {
		t.Fatal(err)
	}
	j.Handle = step.Handle
	if err := p.Cancel(context.Background(), musicgen, j); err != nil || !f.cancelled {
		t.Errorf("Cancel = %v (cancelled %v); want a POST to urls.cancel", err, f.cancelled)
	}
}
