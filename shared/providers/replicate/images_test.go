package replicate

// The fake below is Replicate's predictions API (see replicate_test.go)
// running black-forest-labs/flux-schnell (replicate.com/black-forest-labs/
// flux-schnell/api): its input {"prompt", "aspect_ratio", "num_outputs",
// "output_format": webp | jpg | png}; its output a list of file URLs. A
// create with "Prefer: wait=N" holds the answer until the prediction ends
// (here: at once when done is 0) or answers it still processing.

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

var fluxSchnell = &catalog.Model{ID: "flux-schnell", Type: catalog.TypeImage, Upstream: "black-forest-labs/flux-schnell",
	Input: &catalog.Input{Fixed: map[string]any{"go_fast": true}}}

// imagePredictions answers a create with the prediction processing (or,
// with reads 0, already succeeded), and succeeded after reads GETs; a
// failure, if set, ends it failed with that error.
type imagePredictions struct {
	api, files *httptest.Server
	mu         sync.Mutex
	reads      int
	gets       int
	prefer     string
	path       string
	input      map[string]any
	failure    string
	fileAuth   []string
}

func newImagePredictions(t *testing.T, reads int) *imagePredictions {
	f := &imagePredictions{reads: reads}
	f.files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.fileAuth = append(f.fileAuth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "image/webp")
		io.WriteString(w, "picture "+r.URL.Path)
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
		pr := map[string]any{"id": "p1", "status": "processing", "urls": map[string]string{"get": f.api.URL + "/v1/predictions/p1", "cancel": f.api.URL + "/v1/predictions/p1/cancel"}}
		if r.Method == "POST" {
			f.path, f.prefer = r.URL.Path, r.Header.Get("Prefer")
			var body struct {
				Input map[string]any `json:"input"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			f.input = body.Input
			w.WriteHeader(http.StatusCreated)
		} else {
			f.gets++
		}
		if f.gets >= f.reads {
			n, _ := f.input["num_outputs"].(float64)
			var out []string
			for i := range int(n) {
				out = append(out, fmt.Sprintf("%s/xezq/out-%d.%s", f.files.URL, i, f.input["output_format"]))
			}
			pr["status"], pr["output"] = "succeeded", out
			if f.failure != "" {
				pr["status"], pr["output"], pr["error"] = "failed", nil, f.failure
			}
		}
		json.NewEncoder(w).Encode(pr)
	}))
	t.Cleanup(f.api.Close)
	return f
}

func (f *imagePredictions) provider() *Provider {
	return New(Config{BaseURL: f.api.URL, APIToken: testToken, PollInterval: time.Millisecond})
}

// TestImagesPreferWait: a prediction that ends while create waits needs
// no read; its files are downloaded without the token.
func TestImagesPreferWait(t *testing.T) {
	f := newImagePredictions(t, 0)
	out, err := f.provider().Generate(context.Background(), fluxSchnell, &images.Params{Prompt: "a fox", N: 2, Size: "1344x768", Format: "webp"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(f.input)
	const want = `{"aspect_ratio":"16:9","go_fast":true,"num_outputs":2,"output_format":"webp","prompt":"a fox"}`
	if f.path != "/v1/models/black-forest-labs/flux-schnell/predictions" || f.prefer != "wait=60" || string(got) != want {
		t.Errorf("POST %s (Prefer %q) %s\nwant the model's predictions, wait=60, %s", f.path, f.prefer, got, want)
	}
	if f.gets != 0 || len(out.Images) != 2 {
		t.Fatalf("%d reads, %d images; want 0 reads, 2 images", f.gets, len(out.Images))
	}
	for i, img := range out.Images {
		if string(img.Data) != fmt.Sprintf("picture /xezq/out-%d.webp", i) || img.ContentType != "image/webp" {
			t.Errorf("image %d: %q as %s", i, img.Data, img.ContentType)
		}
	}
	if strings.Join(f.fileAuth, "") != "" || len(f.fileAuth) != 2 {
		t.Errorf("files fetched with Authorization %q; want twice, without the token", f.fileAuth)
	}
}

// TestImagesPolled: a prediction still processing when create answers is
// read until it ends; jpeg is asked as jpg.
func TestImagesPolled(t *testing.T) {
	f := newImagePredictions(t, 3)
	out, err := f.provider().Generate(context.Background(), fluxSchnell, &images.Params{Prompt: "a fox", N: 1, Size: "896x1088", Format: "jpeg"})
	if err != nil {
		t.Fatal(err)
	}
	if f.gets != 3 || len(out.Images) != 1 || f.input["output_format"] != "jpg" || f.input["aspect_ratio"] != "4:5" {
		t.Errorf("%d reads, %d images, input %v; want 3 reads, 1 image, jpg in 4:5", f.gets, len(out.Images), f.input)
	}
}

// TestImagesRatios: every size of the catalog's Replicate image models is
// one of FLUX's aspect ratios; another size is sent reduced.
func TestImagesRatios(t *testing.T) {
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.List(catalog.TypeImage, nil) {
		for _, s := range m.Sizes {
			if _, ok := fluxRatios[s]; m.Provider == "replicate" && !ok {
				t.Errorf("%s: size %s is not one of FLUX's", m.ID, s)
			}
		}
	}
	f := newImagePredictions(t, 0)
	if _, err := f.provider().Generate(context.Background(), fluxSchnell, &images.Params{Prompt: "p", N: 1, Size: "1920x1080", Format: "png"}); err != nil {
		t.Fatal(err)
	}
	if f.input["aspect_ratio"] != "16:9" {
		t.Errorf("aspect_ratio %v; want 16:9", f.input["aspect_ratio"])
	}
}

// TestImagesFailed: a prediction flagged as sensitive is content_policy;
// another failure the vendor's.
func TestImagesFailed(t *testing.T) {
	for _, tt := range []struct{ failure, code string }{
		{"The input or output was flagged as sensitive. Please try again with different inputs. (E005)", jobs.CodeContentPolicy},
		{"CUDA out of memory", jobs.CodeUpstream},
	} {
		f := newImagePredictions(t, 1)
		f.failure = tt.failure
		_, err := f.provider().Generate(context.Background(), fluxSchnell, &images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
		var pe *jobs.ProviderError
		if !errors.As(err, &pe) || pe.Code != tt.code || !strings.Contains(pe.Message, tt.failure) {
			t.Errorf("failure %q: Generate = %v; want %s with Replicate's words", tt.failure, err, tt.code)
		}
	}
}

// TestImagesDeadline: the reads stop when ctx ends.
func TestImagesDeadline(t *testing.T) {
	f := newImagePredictions(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.provider().Generate(ctx, fluxSchnell, &images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate = %v; want the deadline", err)
	}
}
