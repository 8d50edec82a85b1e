package gemini

// The fake below follows the Gemini API's image generation
// (ai.google.dev/gemini-api/docs/image-generation, and @google/genai
// 3.3.0's GenerateContentConfig.imageConfig): POST
// /v1beta/models/{model}:generateContent with "x-goog-api-key", a user
// turn with the prompt and generationConfig {"responseModalities":
// ["IMAGE"], "imageConfig": {"aspectRatio"}}; the answer's candidate
// holds the image as an inlineData part {"mimeType", "data"}; a blocked
// prompt has promptFeedback.blockReason, a withheld image a finishReason
// such as IMAGE_SAFETY; errors are google.rpc.Status envelopes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

func imageModel(t testing.TB) *catalog.Model {
	t.Helper()
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("gemini-2.5-flash-image")
	if !ok {
		t.Fatal("no gemini-2.5-flash-image in the catalog")
	}
	return m
}

func testPNG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageFake answers each generateContent call with answer (status 200)
// or status and answer, recording the calls.
type imageFake struct {
	mu     sync.Mutex
	status int
	answer string
	paths  []string
	bodies []string
	keys   []string
}

func (f *imageFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.paths, f.bodies, f.keys = append(f.paths, r.URL.Path), append(f.bodies, string(b)), append(f.keys, r.Header.Get("x-goog-api-key"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 {
		w.WriteHeader(f.status)
	}
	io.WriteString(w, f.answer)
}

func imageAnswer(t testing.TB, pic []byte) string {
	return `{"candidates":[{"content":{"role":"model","parts":[{"inlineData":{"mimeType":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(pic) + `"}}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":1290,"totalTokenCount":1297},"modelVersion":"gemini-2.5-flash-image"}`
}

// TestImagesRequestAndAnswer: one call per image, each asking for image
// output in the size's aspect ratio; the images and the summed usage.
func TestImagesRequestAndAnswer(t *testing.T) {
	pic := testPNG(t)
	f := &imageFake{answer: imageAnswer(t, pic)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	out, err := NewImages(Config{BaseURL: srv.URL, APIKey: "g-key"}).Generate(context.Background(), imageModel(t),
		&images.Params{Prompt: "a fox", N: 2, Size: "1344x768", Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Images) != 2 || out.Size != "1344x768" {
		t.Fatalf("%d images of %s; want 2 of 1344x768", len(out.Images), out.Size)
	}
	for _, img := range out.Images {
		if !bytes.Equal(img.Data, pic) || img.ContentType != "image/png" {
			t.Errorf("image %d bytes of %s; want the PNG", len(img.Data), img.ContentType)
		}
	}
	want := images.Usage{InputTokens: 14, InputTokensDetails: images.TokensDetails{TextTokens: 14}, OutputTokens: 2580, TotalTokens: 2594}
	if out.Usage == nil || *out.Usage != want {
		t.Errorf("usage %+v; want %+v", out.Usage, want)
	}
	const body = `{"contents":[{"role":"user","parts":[{"text":"a fox"}]}],"generationConfig":{"responseModalities":["IMAGE"],"imageConfig":{"aspectRatio":"16:9"}}}`
	if len(f.bodies) != 2 {
		t.Fatalf("%d calls; want 2", len(f.bodies))
	}
	for i := range f.bodies {
		if f.paths[i] != "/v1beta/models/gemini-2.5-flash-image:generateContent" || f.bodies[i] != body || f.keys[i] != "g-key" {
			t.Errorf("call %d: POST %s key %q body %s\nwant body %s", i, f.paths[i], f.keys[i], f.bodies[i], body)
		}
	}
}

// TestImagesAspectRatios: every size of the catalog's Gemini image models
// has its aspect ratio, and each ratio is one Gemini takes.
func TestImagesAspectRatios(t *testing.T) {
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	takes := map[string]bool{"1:1": true, "2:3": true, "3:2": true, "3:4": true, "4:3": true, "4:5": true, "5:4": true, "9:16": true, "16:9": true, "21:9": true}
	for _, m := range c.List(catalog.TypeImage, nil) {
		if m.Provider != "gemini" {
			continue
		}
		for _, s := range m.Sizes {
			if r, ok := aspectRatios[s]; !ok || !takes[r] {
				t.Errorf("%s: size %s has the aspect ratio %q", m.ID, s, r)
			}
		}
	}
}

// TestImagesRefusals: blocked prompts and withheld images are
// content_policy with Gemini's reason (and its words); an answer without
// an image otherwise is the vendor's failure; errors as the Gemini API's.
func TestImagesRefusals(t *testing.T) {
	tests := []struct {
		name   string
		status int
		answer string
		check  func(err error) bool
		msg    string
	}{
		{"prompt blocked", 200, `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7}}`,
			isCode(jobs.CodeContentPolicy), "PROHIBITED_CONTENT"},
		{"image withheld", 200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"I can't make that image."}]},"finishReason":"IMAGE_SAFETY"}]}`,
			isCode(jobs.CodeContentPolicy), "IMAGE_SAFETY): I can't make that image."},
		{"no image", 200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Here is a poem."}]},"finishReason":"STOP"}]}`,
			isCode(jobs.CodeUpstream), "no image"},
		{"no candidate", 200, `{"candidates":[{"finishReason":"NO_IMAGE"}]}`, isCode(jobs.CodeUpstream), "NO_IMAGE"},
		{"not base64", 200, `{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"***"}}]}}]}`,
			isCode(jobs.CodeUpstream), "base64"},
		{"garbage", 200, `<html>`, isCode(jobs.CodeUpstream), "not the expected JSON"},
		{"invalid argument", 400, `{"error":{"code":400,"message":"Unsupported aspect ratio.","status":"INVALID_ARGUMENT"}}`,
			func(err error) bool {
				var pe *jobs.ProviderError
				return errors.As(err, &pe) && pe.Status == 400 && pe.Code == jobs.CodeUpstream
			}, "Unsupported aspect ratio"},
		{"bad key", 400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`,
			func(err error) bool {
				f, _ := jobs.Failure(err)
				return f.Class == route.KeyRefused
			}, "refused the configured key"},
		{"exhausted", 429, `{"error":{"code":429,"message":"Resource has been exhausted.","status":"RESOURCE_EXHAUSTED"}}`,
			func(err error) bool {
				f, _ := jobs.Failure(err)
				return f.Class == route.RateLimited
			}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&imageFake{status: tt.status, answer: tt.answer})
			defer srv.Close()
			_, err := NewImages(Config{BaseURL: srv.URL, APIKey: "k"}).Generate(context.Background(), imageModel(t),
				&images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Generate = %v; want %q", err, tt.msg)
			}
		})
	}
}

// TestImagesFailLate: a failure after the first image fails the request.
func TestImagesFailLate(t *testing.T) {
	calls := 0
	pic := testPNG(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 2 {
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)
			return
		}
		io.WriteString(w, imageAnswer(t, pic))
	}))
	defer srv.Close()
	_, err := NewImages(Config{BaseURL: srv.URL, APIKey: "k"}).Generate(context.Background(), imageModel(t),
		&images.Params{Prompt: "p", N: 3, Size: "1024x1024", Format: "png"})
	var te *jobs.TransientError
	if !errors.As(err, &te) || te.Status != 503 || calls != 2 {
		t.Errorf("Generate = %v after %d calls; want the 503 after 2", err, calls)
	}
}

// TestImagesKeyPool: Gemini images take a pool of keys.
func TestImagesKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "x-goog-api-key", func(k string) string { return k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := NewImages(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Generate(ctx, imageModel(t), &images.Params{Prompt: "p", N: 1, Size: "1024x1024", Format: "png"})
			}
		})
}

func isCode(code string) func(error) bool {
	return func(err error) bool {
		var pe *jobs.ProviderError
		return errors.As(err, &pe) && pe.Code == code
	}
}
