package gemini

// Veo on Vertex AI against vertextest, the fake of Google Cloud's side:
// the token endpoint (the JWT is checked with the key's public key), the
// Veo methods and Cloud Storage.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
	"github.com/genway/genway/shared/route"
)

var vertexModel = &catalog.Model{ID: "veo-3.1", Provider: "vertex", Upstream: "veo-3.1-generate-001"}

func newVertex(t *testing.T, fake *vertextest.Server, cfg VertexConfig) *VertexVideo {
	t.Helper()
	cfg.Credentials, cfg.BaseURL = fake.Credentials(), fake.URL
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	v, err := NewVertexVideo(cfg)
	if err != nil {
		t.Fatalf("NewVertexVideo: %v", err)
	}
	return v
}

func vertexJob(prompt, size string, duration int) *jobs.Job {
	return &jobs.Job{ID: "job_video_x", Type: jobs.TypeVideo, Model: "veo-3.1", Input: jobs.Input{Prompt: prompt, Duration: duration, Size: size}}
}

// run starts j and polls it until it is done, at most 10 times.
func run(t *testing.T, v *VertexVideo, j *jobs.Job) (*jobs.Result, error) {
	t.Helper()
	step, err := v.Start(context.Background(), vertexModel, j)
	if err != nil {
		return nil, err
	}
	j.Handle = step.Handle
	for range 10 {
		res, err := v.Poll(context.Background(), vertexModel, j)
		if res != nil || err != nil {
			return res, err
		}
	}
	t.Fatal("not done after 10 polls")
	return nil, nil
}

func TestVertexGenerate(t *testing.T) {
	tests := []struct {
		name       string
		size       string
		duration   int
		storage    string
		wantParams string
	}{
		{"landscape 720p inline", "1280x720", 8, "",
			`{"aspectRatio":"16:9","resolution":"720p","durationSeconds":8,"generateAudio":true,"sampleCount":1}`},
		{"portrait 1080p inline", "1080x1920", 4, "",
			`{"aspectRatio":"9:16","resolution":"1080p","durationSeconds":4,"generateAudio":true,"sampleCount":1}`},
		{"to cloud storage", "1280x720", 6, "gs://genway-veo/out/",
			`{"aspectRatio":"16:9","resolution":"720p","durationSeconds":6,"generateAudio":true,"sampleCount":1,"storageUri":"gs://genway-veo/out/"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := vertextest.NewServer(t)
			fake.DonePolls = 3
			fake.Video = bytes.Repeat([]byte("frame "), 50_000) // spans many filter buffers
			dir := t.TempDir()
			v := newVertex(t, fake, VertexConfig{StorageURI: tt.storage, TempDir: dir})
			res, err := run(t, v, vertexJob("a fox", tt.size, tt.duration))
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			got, _ := io.ReadAll(res.Body)
			if err := res.Body.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
			if !bytes.Equal(got, fake.Video) || res.ContentType != "video/mp4" || res.Ext != "mp4" || res.Duration != tt.duration {
				t.Errorf("result = %d bytes %s %s %ds; want the fake's %d-byte video/mp4, %ds", len(got), res.ContentType, res.Ext, res.Duration, len(fake.Video), tt.duration)
			}
			if tt.storage == "" && res.Size != int64(len(fake.Video)) {
				t.Errorf("Size = %d; want %d", res.Size, len(fake.Video))
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("spool files left behind: %v", left)
			}
			reqs := fake.Requests()
			// token, submit, 3 polls, and the download from Cloud Storage.
			wantPaths := []string{"/token", "/v1/projects/genway-test/locations/us-central1/publishers/google/models/veo-3.1-generate-001:predictLongRunning"}
			for range 3 {
				wantPaths = append(wantPaths, "/v1/projects/123456789012/locations/us-central1/publishers/google/models/veo-3.1-generate-001:fetchPredictOperation")
			}
			if tt.storage != "" {
				wantPaths = append(wantPaths, "/storage/v1/b/genway-veo/o/out%2F00001eef-op1%2Fsample_0.mp4")
			}
			if len(reqs) != len(wantPaths) {
				t.Fatalf("requests %v; want %v", paths(reqs), wantPaths)
			}
			for i, r := range reqs {
				if r.Path != wantPaths[i] || r.Method != map[bool]string{true: "GET", false: "POST"}[strings.HasPrefix(r.Path, "/storage/")] {
					t.Errorf("request %d = %s %s; want %s", i, r.Method, r.Path, wantPaths[i])
				}
				if i > 0 && r.Auth != "Bearer ya29.fake-1" {
					t.Errorf("request %d Authorization = %q; want the one token, fetched once", i, r.Auth)
				}
			}
			var sub struct {
				Instances  []map[string]any `json:"instances"`
				Parameters json.RawMessage  `json:"parameters"`
			}
			if err := json.Unmarshal(reqs[1].Body, &sub); err != nil || len(sub.Instances) != 1 || sub.Instances[0]["prompt"] != "a fox" {
				t.Errorf("submit body = %s; want instances [{prompt}]", reqs[1].Body)
			}
			if string(sub.Parameters) != tt.wantParams {
				t.Errorf("parameters = %s; want %s", sub.Parameters, tt.wantParams)
			}
			if want := `{"operationName":"projects/123456789012/locations/us-central1/publishers/google/models/veo-3.1-generate-001/operations/00001eef-op1"}`; string(reqs[2].Body) != want {
				t.Errorf("poll body = %s; want %s", reqs[2].Body, want)
			}
		})
	}
}

func paths(reqs []vertextest.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// TestVertexOutcomes: how a finished or refused generation fails the job.
func TestVertexOutcomes(t *testing.T) {
	googleErr := func(code int, status, msg string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, ":predictLongRunning") {
				return false
			}
			if code == 429 {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
			return true
		}
	}
	tests := []struct {
		name      string
		prompt    string
		intercept func(w http.ResponseWriter, r *http.Request) bool
		wantCode  string // a job error code, or "transient"
		wantMsg   string
	}{
		{"safety filter", "forbidden scene", nil, jobs.CodeContentPolicy, "safety filters blocked the video: Your prompt may violate"},
		{"operation error", "broken scene", nil, jobs.CodeUpstream, "Veo failed: Video generation failed due to an internal error."},
		{"invalid argument", "p", googleErr(400, "INVALID_ARGUMENT", "durationSeconds is invalid"), jobs.CodeUpstream, "durationSeconds is invalid"},
		{"refused prompt", "p", googleErr(400, "INVALID_ARGUMENT", "The prompt violates Vertex AI's usage guidelines (Responsible AI)."), jobs.CodeContentPolicy, "usage guidelines"},
		{"no permission", "p", googleErr(403, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' denied"), jobs.CodeUpstream, "Vertex AI refused the service account: Permission"},
		{"quota", "p", googleErr(429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model"), "transient", ""},
		{"unavailable", "p", googleErr(503, "UNAVAILABLE", "The service is currently unavailable."), "transient", ""},
		{"done without videos", "p", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, ":fetchPredictOperation") {
				return false
			}
			io.WriteString(w, `{"name":"n","done":true,"response":{"raiMediaFilteredCount":0}}`)
			return true
		}, jobs.CodeUpstream, "without a video"},
		{"not JSON", "p", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, ":fetchPredictOperation") {
				return false
			}
			io.WriteString(w, `<html>`)
			return true
		}, jobs.CodeUpstream, "not the expected JSON"},
		{"not base64", "p", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, ":fetchPredictOperation") {
				return false
			}
			io.WriteString(w, `{"name":"n","done":true,"response":{"videos":[{"bytesBase64Encoded":"%%%%","mimeType":"video/mp4"}]}}`)
			return true
		}, jobs.CodeUpstream, "not the expected JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := vertextest.NewServer(t)
			fake.Intercept = tt.intercept
			v := newVertex(t, fake, VertexConfig{})
			_, err := run(t, v, vertexJob(tt.prompt, "1280x720", 8))
			if tt.wantCode == "transient" {
				var te *jobs.TransientError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v; want a TransientError", err)
				}
				if strings.Contains(tt.name, "quota") && te.RetryAfter != 7*time.Second {
					t.Errorf("RetryAfter = %v; want 7s", te.RetryAfter)
				}
				return
			}
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || pe.Code != tt.wantCode || !strings.Contains(pe.Message, tt.wantMsg) {
				t.Fatalf("err = %v; want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// TestVertexUnauthorized: a 401 (a token revoked or expired early) is
// tried again, with a new token.
func TestVertexUnauthorized(t *testing.T) {
	fake := vertextest.NewServer(t)
	refused := 0
	fake.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/token" || refused > 0 {
			return false
		}
		refused++
		w.WriteHeader(401)
		io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
		return true
	}
	v := newVertex(t, fake, VertexConfig{})
	_, err := v.Start(context.Background(), vertexModel, vertexJob("a fox", "1280x720", 8))
	var te *jobs.TransientError
	if !errors.As(err, &te) {
		t.Fatalf("Start = %v; want a TransientError", err)
	}
	if _, err := v.Start(context.Background(), vertexModel, vertexJob("a fox", "1280x720", 8)); err != nil {
		t.Fatalf("Start again = %v", err)
	}
	if _, tokens, _ := fake.Counts(); tokens != 2 {
		t.Errorf("%d tokens fetched; want 2 (the refused one dropped)", tokens)
	}
}

// TestVertexRefusals: how a refused submit is classified for the routing
// policy (jobs.Failure), read from Google's error envelope as the Gemini
// API's Veo answers are: a used-up daily quota (the fake's "quota"
// trigger: 429 RESOURCE_EXHAUSTED with a QuotaFailure naming a PerDay
// quota) and a refused service account are the operator's account, which
// moves a job to its fallback; a per-minute quota is a rate limit; a 401
// (a token revoked or expired early) only a fault worth another try.
func TestVertexRefusals(t *testing.T) {
	answer := func(code int, body string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, ":predictLongRunning") {
				return false
			}
			w.WriteHeader(code)
			io.WriteString(w, body)
			return true
		}
	}
	perMinute := strings.ReplaceAll(vertextest.QuotaAnswer, "PerDay", "PerMinute")
	perMinute = strings.ReplaceAll(perMinute, "_per_day", "_per_minute")
	tests := []struct {
		name      string
		prompt    string
		intercept func(w http.ResponseWriter, r *http.Request) bool
		badKey    bool
		class     route.Class
		refused   bool
		account   bool
		wait      time.Duration
	}{
		{"daily quota", "quota: a fox", nil, false, route.KeyRefused, true, true, time.Hour},
		{"per-minute quota", "a fox", answer(429, perMinute), false, route.RateLimited, true, false, time.Hour},
		{"no permission", "a fox", answer(403, `{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied","status":"PERMISSION_DENIED"}}`),
			false, route.KeyRefused, true, true, 0},
		{"key refused by the token endpoint", "a fox", nil, true, route.KeyRefused, true, true, 0},
		{"token refused", "a fox", answer(401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`),
			false, route.Transient, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := vertextest.NewServer(t)
			fake.Intercept = tt.intercept
			cfg := VertexConfig{Credentials: fake.Credentials(), BaseURL: fake.URL, TempDir: t.TempDir()}
			if tt.badKey {
				cfg.Credentials = fake.CredentialsWith(func(f map[string]any) { f["client_email"] = "stranger@genway-test.iam.gserviceaccount.com" })
			}
			v, err := NewVertexVideo(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Start(context.Background(), vertexModel, vertexJob(tt.prompt, "1280x720", 8))
			if err == nil {
				t.Fatal("Start succeeded; want a refusal")
			}
			f, refused := jobs.Failure(err)
			if f.Class != tt.class || refused != tt.refused || f.RetryAfter != tt.wait {
				t.Errorf("Failure(%v) = %+v, refused %v; want class %v, refused %v, RetryAfter %v", err, f, refused, tt.class, tt.refused, tt.wait)
			}
			var (
				pe *jobs.ProviderError
				te *jobs.TransientError
			)
			account := errors.As(err, &te) && te.Account || errors.As(err, &pe) && pe.Account
			if account != tt.account {
				t.Errorf("Start = %v: the operator's account %v; want %v", err, account, tt.account)
			}
			// A job that fails on the operator's account tells its client
			// only that the provider failed; Google's words (the project,
			// the quota, the permission) are the operator's.
			if je := jobs.FailureOf("vertex", err); tt.account &&
				(je == nil || je.Message != "The vertex provider failed; no credits were charged." || je.Vendor == "" || strings.Contains(je.Message, "quota")) {
				t.Errorf("the job fails with %+v; want the generic message, Vertex AI's words in Vendor", je)
			}
			if n := fake.Quota(); (tt.name == "daily quota") != (n == 1) {
				t.Errorf("the fake refused %d submits for their quota", n)
			}
		})
	}
}

func TestVertexPollRefusesBadHandle(t *testing.T) {
	fake := vertextest.NewServer(t)
	v := newVertex(t, fake, VertexConfig{})
	for _, h := range []string{"models/veo-3.1-generate-preview/operations/op1", "projects/p/locations/us-central1/publishers/google/models/m/operations/../x",
		"projects/p/locations/us-central1/publishers/google/models/m/operations/x?alt=1", "../../v1/other"} {
		j := vertexJob("p", "1280x720", 8)
		j.Handle = &jobs.Handle{ID: h}
		var pe *jobs.ProviderError
		if _, err := v.Poll(context.Background(), vertexModel, j); !errors.As(err, &pe) || pe.Code != jobs.CodeInternal {
			t.Errorf("Poll(%q) = %v; want internal_error", h, err)
		}
	}
	if n := fake.Calls(); n != 0 {
		t.Errorf("%d calls to Google for unusable handles; want none", n)
	}
}

// TestVertexHosts: each region's own host (the operation's, when
// polling), the global one, and Cloud Storage's.
func TestVertexHosts(t *testing.T) {
	fake := vertextest.NewServer(t)
	v, err := NewVertexVideo(VertexConfig{Credentials: fake.Credentials(), Region: "europe-west4"})
	if err != nil {
		t.Fatal(err)
	}
	for loc, want := range map[string]string{"europe-west4": "https://europe-west4-aiplatform.googleapis.com", "us-central1": "https://us-central1-aiplatform.googleapis.com", "global": "https://aiplatform.googleapis.com"} {
		if got := v.apiBase(loc); got != want {
			t.Errorf("apiBase(%q) = %q; want %q", loc, got, want)
		}
	}
	if got := v.storageBase(); got != "https://storage.googleapis.com" {
		t.Errorf("storageBase = %q", got)
	}
	if v.project != "genway-test" || v.region != "europe-west4" {
		t.Errorf("project, region = %q, %q; want the key's project_id and the region set", v.project, v.region)
	}
}

func TestNewVertexVideoConfig(t *testing.T) {
	fake := vertextest.NewServer(t)
	keyFile := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(keyFile, []byte(fake.Credentials()), 0o600); err != nil {
		t.Fatal(err)
	}
	edit := func(k string, v any) string {
		return fake.CredentialsWith(func(f map[string]any) { f[k] = v })
	}
	tests := []struct {
		name    string
		cfg     VertexConfig
		wantErr string // "" for success
	}{
		{"key JSON", VertexConfig{Credentials: fake.Credentials()}, ""},
		{"key file", VertexConfig{Credentials: keyFile}, ""},
		{"project set", VertexConfig{Credentials: edit("project_id", ""), Project: "other-project"}, ""},
		{"no project", VertexConfig{Credentials: edit("project_id", "")}, "not a Google Cloud project id"},
		{"missing file", VertexConfig{Credentials: filepath.Join(t.TempDir(), "nope.json")}, "neither a key's JSON nor a readable key file"},
		{"not JSON", VertexConfig{Credentials: "{" + fake.Credentials()}, "does not parse"},
		{"user credentials", VertexConfig{Credentials: edit("type", "authorized_user")}, `type "authorized_user"`},
		{"no private key", VertexConfig{Credentials: edit("private_key", "")}, "required"},
		{"plain http token_uri", VertexConfig{Credentials: edit("token_uri", "http://oauth2.example.com/token")}, "https"},
		{"bad region", VertexConfig{Credentials: fake.Credentials(), Region: "us-central1/../x"}, "not a Google Cloud location"},
		{"bad storage", VertexConfig{Credentials: fake.Credentials(), StorageURI: "s3://bucket/x"}, "gs://"},
		{"bad base", VertexConfig{Credentials: fake.Credentials(), BaseURL: "ftp://x"}, "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewVertexVideo(tt.cfg)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("NewVertexVideo = %v; want %q", err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), fake.Email)) {
				t.Errorf("error %q quotes the key", err)
			}
		})
	}
}

// BenchmarkVertexPollInline reads a finished operation with an 8 MB video
// inline (11 MB of base64) into its spool file: the memory it takes
// (B/op) stays a few buffers, not the video's size. For comparison,
// decoding the same answer with encoding/json:
//
//	go test ./shared/providers/gemini -run '^$' -bench VertexPollInline -benchmem
func BenchmarkVertexPollInline(b *testing.B) {
	video := bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7}, 1<<20)
	answer, _ := json.Marshal(map[string]any{"name": "n", "done": true, "response": map[string]any{
		"raiMediaFilteredCount": 0, "videos": []any{map[string]any{"bytesBase64Encoded": video, "mimeType": "video/mp4"}}}})
	b.Run("filter", func(b *testing.B) {
		dir := b.TempDir()
		v := &VertexVideo{}
		j := vertexJob("p", "1280x720", 8)
		j.Handle = &jobs.Handle{ID: "op"}
		b.SetBytes(int64(len(answer)))
		b.ReportAllocs()
		for b.Loop() {
			sp := &spool{dir: dir}
			res, err := v.readOperation(context.Background(), io.NopCloser(bytes.NewReader(answer)), sp, j)
			if err != nil || res.Size != int64(len(video)) {
				b.Fatalf("readOperation = %+v, %v", res, err)
			}
			res.Body.Close()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(answer)))
		b.ReportAllocs()
		for b.Loop() {
			var op struct {
				Response struct {
					Videos []struct {
						Bytes []byte `json:"bytesBase64Encoded"`
					} `json:"videos"`
				} `json:"response"`
			}
			if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&op); err != nil || len(op.Response.Videos[0].Bytes) != len(video) {
				b.Fatal(err)
			}
		}
	})
}
