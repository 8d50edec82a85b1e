package openai

// The fake below follows OpenAI's Images API
// (platform.openai.com/docs/api-reference/images/create, and the openai
// npm SDK 7.57.0's ImageGenerateParams and ImagesResponse): POST
// /v1/images/generations with a JSON body and "Authorization: Bearer";
// the answer {"created", "data": [{"b64_json" | "url", "revised_prompt"}],
// "usage", "size", "quality", "output_format"}; errors {"error":
// {"message", "type", "param", "code"}}, a refused prompt with code
// moderation_blocked (type image_generation_user_error).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// testPNG is a 2x1 PNG.
func testPNG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, 2, 1))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImagesRequest: the body carries exactly the fields asked for, with
// the catalog model's upstream name; never response_format.
func TestImagesRequest(t *testing.T) {
	tests := []struct {
		name   string
		params images.Params
		want   string
	}{
		{"defaults", images.Params{Prompt: "a fox", N: 1, Size: "auto", Quality: "medium", Format: "png"},
			`{"model":"gpt-image-1.5","n":1,"output_format":"png","prompt":"a fox","quality":"medium","size":"auto"}`},
		{"every field", images.Params{Prompt: "a fox", N: 2, Size: "1536x1024", Quality: "high", Format: "webp", Background: "transparent",
			Compression: ptr(80), Moderation: "low", User: "user-1"},
			`{"background":"transparent","model":"gpt-image-1.5","moderation":"low","n":2,"output_compression":80,"output_format":"webp",` +
				`"prompt":"a fox","quality":"high","size":"1536x1024","user":"user-1"}`},
		{"compression 0 is sent", images.Params{Prompt: "a fox", N: 1, Size: "auto", Format: "jpeg", Compression: ptr(0)},
			`{"model":"gpt-image-1.5","n":1,"output_compression":0,"output_format":"jpeg","prompt":"a fox","size":"auto"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b64 := base64.StdEncoding.EncodeToString(testPNG(t))
			up := &upstream{body: `{"created":1,"data":[{"b64_json":"` + b64 + `"},{"b64_json":"` + b64 + `"}]}`}
			srv := httptest.NewServer(up)
			defer srv.Close()
			p := NewImages(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test"})
			if _, err := p.Generate(context.Background(), model(t, "gpt-image-1.5"), &tt.params); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(up.gotBody)
			if string(got) != tt.want {
				t.Errorf("body %s\nwant %s", got, tt.want)
			}
			if up.gotPath != "/v1/images/generations" || up.gotHdr.Get("Authorization") != "Bearer sk-test" || up.gotHdr.Get("Content-Type") != "application/json" {
				t.Errorf("POST %s with %v", up.gotPath, up.gotHdr)
			}
		})
	}
}

// TestImagesAnswer: base64 images are decoded (their type sniffed),
// links downloaded without the key, and usage, revised prompts and the
// size read.
func TestImagesAnswer(t *testing.T) {
	pic := testPNG(t)
	var fileAuth []string
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fileAuth = append(fileAuth, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "image/png")
		w.Write(pic)
	}))
	defer files.Close()
	b64 := base64.StdEncoding.EncodeToString(pic)
	up := &upstream{body: `{"created":1713833628,"data":[{"b64_json":"` + b64 + `","revised_prompt":"a red fox"},{"url":"` + files.URL + `/img.png?sig=x"}],` +
		`"background":"opaque","output_format":"png","quality":"high","size":"1536x1024",` +
		`"usage":{"input_tokens":50,"input_tokens_details":{"text_tokens":50,"image_tokens":0},"output_tokens":4160,"total_tokens":4210}}`}
	srv := httptest.NewServer(up)
	defer srv.Close()
	out, err := NewImages(Config{BaseURL: srv.URL, APIKey: "sk-test"}).Generate(context.Background(), model(t, "gpt-image-1.5"),
		&images.Params{Prompt: "a fox", N: 2, Size: "auto", Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Images) != 2 || out.Size != "1536x1024" {
		t.Fatalf("%d images of %q; want 2 of 1536x1024", len(out.Images), out.Size)
	}
	for i, img := range out.Images {
		if !bytes.Equal(img.Data, pic) || img.ContentType != "image/png" {
			t.Errorf("image %d: %d bytes of %s; want the PNG", i, len(img.Data), img.ContentType)
		}
	}
	if out.Images[0].RevisedPrompt != "a red fox" {
		t.Errorf("revised prompt %q", out.Images[0].RevisedPrompt)
	}
	want := images.Usage{InputTokens: 50, InputTokensDetails: images.TokensDetails{TextTokens: 50}, OutputTokens: 4160, TotalTokens: 4210}
	if out.Usage == nil || *out.Usage != want {
		t.Errorf("usage %+v; want %+v", out.Usage, want)
	}
	if len(fileAuth) != 1 || fileAuth[0] != "" {
		t.Errorf("the link was fetched with Authorization %q; want once, without the key", fileAuth)
	}
}

// TestImagesErrors: how each answer of the Images API ends a call.
func TestImagesErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		header  map[string]string
		body    string
		check   func(err error) bool
		message string // in the error
	}{
		{"moderation", 400, nil,
			`{"error":{"message":"Your request was rejected as a result of our safety system.","type":"image_generation_user_error","param":null,"code":"moderation_blocked"}}`,
			func(err error) bool {
				var pe *jobs.ProviderError
				return errors.As(err, &pe) && pe.Code == jobs.CodeContentPolicy && pe.Status == 400
			}, "rejected as a result of our safety system"},
		{"dall-e content policy", 400, nil,
			`{"error":{"message":"This request has been blocked by our content filters.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`,
			func(err error) bool {
				var pe *jobs.ProviderError
				return errors.As(err, &pe) && pe.Code == jobs.CodeContentPolicy
			}, "content filters"},
		{"invalid size", 400, nil,
			`{"error":{"message":"Invalid value: '512x512'. Supported values are: '1024x1024', '1024x1536', '1536x1024', and 'auto'.","type":"invalid_request_error","param":"size","code":"invalid_value"}}`,
			func(err error) bool {
				var pe *jobs.ProviderError
				f, _ := jobs.Failure(err)
				return errors.As(err, &pe) && pe.Code == jobs.CodeUpstream && pe.Status == 400 && f.Class == route.Final
			}, "Supported values"},
		{"wrong key", 401, nil,
			`{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			func(err error) bool {
				f, _ := jobs.Failure(err)
				return f.Class == route.KeyRefused
			}, "openai refused the configured key"},
		{"rate limited", 429, map[string]string{"Retry-After": "7"},
			`{"error":{"message":"Rate limit reached for images per minute.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			func(err error) bool {
				var te *jobs.TransientError
				return errors.As(err, &te) && te.Status == 429 && te.RetryAfter == 7*time.Second && !te.Account
			}, "Rate limit"},
		{"quota used up", 429, nil,
			`{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			func(err error) bool {
				var te *jobs.TransientError
				return errors.As(err, &te) && te.Account
			}, "quota"},
		{"server error", 500, nil, `{"error":{"message":"The server had an error.","type":"server_error","param":null,"code":null}}`,
			func(err error) bool {
				f, _ := jobs.Failure(err)
				return f.Class == route.Transient
			}, ""},
		{"garbage", 200, nil, `<html>`, func(err error) bool {
			var pe *jobs.ProviderError
			return errors.As(err, &pe) && pe.Code == jobs.CodeUpstream
		}, ""},
		{"answer cut short", 200, map[string]string{"Content-Length": "100"}, `{"created":1,"data":[`, func(err error) bool {
			var te *jobs.TransientError
			f, _ := jobs.Failure(err)
			return errors.As(err, &te) && te.Status == 0 && f.Class == route.Transient
		}, "read answer"},
		{"no image in an entry", 200, nil, `{"created":1,"data":[{"revised_prompt":"x"}]}`, func(err error) bool {
			var pe *jobs.ProviderError
			return errors.As(err, &pe) && pe.Code == jobs.CodeUpstream
		}, "neither"},
		{"not base64", 200, nil, `{"created":1,"data":[{"b64_json":"***"}]}`, func(err error) bool {
			var pe *jobs.ProviderError
			return errors.As(err, &pe) && pe.Code == jobs.CodeUpstream
		}, "not base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&upstream{status: tt.status, header: tt.header, body: tt.body})
			defer srv.Close()
			_, err := NewImages(Config{BaseURL: srv.URL, APIKey: "sk-test"}).Generate(context.Background(), model(t, "gpt-image-1.5"),
				&images.Params{Prompt: "a fox", N: 1, Size: "auto", Format: "png"})
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Generate = %v", err)
			}
		})
	}
}

// TestImagesTimeout: a call that outlives ctx is ended by it.
func TestImagesTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := NewImages(Config{BaseURL: srv.URL, APIKey: "k"}).Generate(ctx, model(t, "gpt-image-1.5"), &images.Params{Prompt: "p", N: 1, Size: "auto", Format: "png"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Generate = %v; want the deadline", err)
	}
}

// TestImagesKeyPool: the Images API provider takes a pool of keys.
func TestImagesKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "Authorization", func(k string) string { return "Bearer " + k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := NewImages(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Generate(ctx, model(t, "gpt-image-1.5"), &images.Params{Prompt: "p", N: 1, Size: "auto", Format: "png"})
			}
		})
}
