package fal

// The fake below is fal's queue (see fal_test.go) running a
// text-to-image model of the FLUX family (fal.ai/models/fal-ai/flux/dev/api):
// its input {"prompt", "image_size": a preset name or {"width", "height"},
// "num_images", "output_format", "enable_safety_checker"}; its result
// {"images": [{"url", "width", "height", "content_type"}], "timings",
// "seed", "has_nsfw_concepts": [bool], "prompt"}.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
)

var fluxModel = &catalog.Model{ID: "flux-dev", Type: catalog.TypeImage, Upstream: "fal-ai/flux/dev",
	Input: &catalog.Input{Fixed: map[string]any{"num_inference_steps": 28}}}

// imageQueue is fal's queue running an image model: the status is
// IN_QUEUE, then IN_PROGRESS, then COMPLETED on the third read; the result
// lists one file per image, those in nsfw flagged.
type imageQueue struct {
	api, files *httptest.Server
	mu         sync.Mutex
	input      map[string]any
	path       string
	reads      int
	nsfw       map[int]bool
	fileAuth   []string
	result     string // instead of the computed one, if set
	status     int    // the result's status with result; 0: 200
}

func newImageQueue(t *testing.T) *imageQueue {
	q := &imageQueue{nsfw: map[int]bool{}}
	q.files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q.mu.Lock()
		q.fileAuth = append(q.fileAuth, r.Header.Get("Authorization"))
		q.mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream") // fal's storage is generic: the extension names the type
		io.WriteString(w, "image "+r.URL.Path)
	}))
	t.Cleanup(q.files.Close)
	q.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Key "+testKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"detail":"Invalid Key"}`)
			return
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		app := "/fal-ai/flux/requests/req-9"
		switch {
		case r.Method == "POST":
			q.path = r.URL.Path
			json.NewDecoder(r.Body).Decode(&q.input)
			json.NewEncoder(w).Encode(map[string]any{"request_id": "req-9", "status_url": q.api.URL + app + "/status",
				"response_url": q.api.URL + app, "cancel_url": q.api.URL + app + "/cancel"})
		case r.URL.Path == app+"/status":
			q.reads++
			st := map[int]string{1: "IN_QUEUE", 2: "IN_PROGRESS"}[q.reads]
			if st == "" {
				st = "COMPLETED"
			}
			fmt.Fprintf(w, `{"status":%q}`, st)
		case r.URL.Path == app:
			if q.result != "" {
				if q.status != 0 {
					w.WriteHeader(q.status)
				}
				io.WriteString(w, q.result)
				return
			}
			n, _ := q.input["num_images"].(float64)
			var imgs []map[string]any
			var flags []bool
			for i := range int(n) {
				imgs = append(imgs, map[string]any{"url": fmt.Sprintf("%s/files/img-%d.%s", q.files.URL, i, q.input["output_format"]), "width": 1024, "height": 768})
				flags = append(flags, q.nsfw[i])
			}
			json.NewEncoder(w).Encode(map[string]any{"images": imgs, "has_nsfw_concepts": flags, "seed": 42, "timings": map[string]any{"inference": 1.2}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(q.api.Close)
	return q
}

func (q *imageQueue) provider() *Provider {
	return New(Config{BaseURL: q.api.URL, APIKey: testKey, PollInterval: time.Millisecond})
}

// TestImagesQueue: the image request is queued with the FLUX input (a
// preset size by name), its status read until COMPLETED, and its files
// downloaded without the key, typed by their extension.
func TestImagesQueue(t *testing.T) {
	q := newImageQueue(t)
	out, err := q.provider().Generate(context.Background(), fluxModel, &images.Params{Prompt: "a fox", N: 2, Size: "1024x768", Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(q.input)
	const want = `{"enable_safety_checker":true,"image_size":"landscape_4_3","num_images":2,"num_inference_steps":28,"output_format":"png","prompt":"a fox"}`
	if q.path != "/fal-ai/flux/dev" || string(got) != want {
		t.Errorf("POST %s %s\nwant /fal-ai/flux/dev %s", q.path, got, want)
	}
	if q.reads != 3 || len(out.Images) != 2 || out.Size != "1024x768" {
		t.Fatalf("%d status reads, %d images of %s; want 3 reads, 2 images", q.reads, len(out.Images), out.Size)
	}
	for i, img := range out.Images {
		if string(img.Data) != fmt.Sprintf("image /files/img-%d.png", i) || img.ContentType != "image/png" {
			t.Errorf("image %d: %q as %s", i, img.Data, img.ContentType)
		}
	}
	if strings.Join(q.fileAuth, "") != "" || len(q.fileAuth) != 2 {
		t.Errorf("files fetched with Authorization %q; want twice, without the key", q.fileAuth)
	}
}

// TestImagesSizes: a preset size goes by its name, another as width and
// height; every size of the catalog's fal image models is a preset.
func TestImagesSizes(t *testing.T) {
	q := newImageQueue(t)
	if _, err := q.provider().Generate(context.Background(), fluxModel, &images.Params{Prompt: "p", N: 1, Size: "800x600", Format: "jpeg"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(q.input["image_size"]); string(got) != `{"height":600,"width":800}` {
		t.Errorf("image_size %s; want width and height", got)
	}
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.List(catalog.TypeImage, nil) {
		for _, s := range m.Sizes {
			if _, ok := presets[s]; m.Provider == "fal" && !ok {
				t.Errorf("%s: size %s is not one of fal's presets", m.ID, s)
			}
		}
	}
}

// TestImagesSafetyChecker: images the safety checker flagged are left
// out; when all of them are, the prompt is refused (content_policy).
func TestImagesSafetyChecker(t *testing.T) {
	q := newImageQueue(t)
	q.nsfw[0] = true
	out, err := q.provider().Generate(context.Background(), fluxModel, &images.Params{Prompt: "p", N: 2, Size: "1024x1024", Format: "jpeg"})
	if err != nil || len(out.Images) != 1 || string(out.Images[0].Data) != "image /files/img-1.jpeg" || out.Images[0].ContentType != "image/jpeg" {
		t.Fatalf("Generate = %+v, %v; want the second image only", out, err)
	}
	q = newImageQueue(t)
	q.nsfw[0] = true
	_, err = q.provider().Generate(context.Background(), fluxModel, &images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "jpeg"})
	var pe *jobs.ProviderError
	if !errors.As(err, &pe) || pe.Code != jobs.CodeContentPolicy {
		t.Errorf("Generate = %v; want content_policy", err)
	}
}

// TestImagesResultErrors: a result without images, or an image without a
// link, is the vendor's failure; a result refused as a content policy
// violation is content_policy.
func TestImagesResultErrors(t *testing.T) {
	for _, tt := range []struct {
		status       int
		result, code string
	}{
		{200, `{"images":[]}`, jobs.CodeUpstream},
		{200, `{"images":[{"url":"file:///etc/passwd"}]}`, jobs.CodeUpstream},
		{422, `{"detail":[{"loc":["body","prompt"],"msg":"The prompt was flagged.","type":"content_policy_violation"}]}`, jobs.CodeContentPolicy},
	} {
		q := newImageQueue(t)
		q.result, q.status = tt.result, tt.status
		_, err := q.provider().Generate(context.Background(), fluxModel, &images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
		var pe *jobs.ProviderError
		if !errors.As(err, &pe) || pe.Code != tt.code {
			t.Errorf("result %s: Generate = %v; want %s", tt.result, err, tt.code)
		}
	}
}

// TestImagesDeadline: the status reads stop when ctx ends.
func TestImagesDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			fmt.Fprintf(w, `{"request_id":"r","status_url":"http://%s/s","response_url":"http://%s/r"}`, r.Host, r.Host)
			return
		}
		io.WriteString(w, `{"status":"IN_QUEUE"}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := New(Config{BaseURL: srv.URL, APIKey: testKey, PollInterval: 5 * time.Millisecond}).Generate(ctx, fluxModel,
		&images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate = %v; want the deadline", err)
	}
}
