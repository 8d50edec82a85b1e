package main

// The image adapters' contract tests: each vendor's official JavaScript
// SDK makes the image request our adapter makes, against our fake of the
// vendor (contract_test.go's harness; the scripts are in
// clients/npm/vendors). Run them with
//
//	CGO_ENABLED=0 go test -count=1 -p 1 -run ContractImages -v ./cmd/genway/

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/fal"
	"github.com/genway/genway/shared/providers/gemini"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/replicate"
)

// imagesMade checks that our adapter ended with n of the fake's pictures
// in format.
func imagesMade(t *testing.T, ours adapterRun, n int, format string) {
	t.Helper()
	oursEnded(t, ours, "ok", "")
	if len(ours.Images) != n {
		t.Fatalf("our adapter made %d images; want %d", len(ours.Images), n)
	}
	for i, img := range ours.Images {
		if !bytes.Equal(img.Data, testPicture(format)) || img.ContentType != "image/"+format {
			t.Errorf("our image %d: %d bytes of %s; want the fake's %s", i, len(img.Data), img.ContentType, format)
		}
	}
}

// sdkImages returns the images the SDK read (a list of objects), failing
// unless there are n.
func sdkImages(t *testing.T, v any, n int) []map[string]any {
	t.Helper()
	list, _ := v.([]any)
	if len(list) != n {
		t.Fatalf("the SDK read %d images (%v); want %d", len(list), v, n)
	}
	var out []map[string]any
	for _, e := range list {
		m, _ := e.(map[string]any)
		out = append(out, m)
	}
	return out
}

// TestVendorContractImagesOpenAI: openai 7.57.0's images.generate sends
// the request our Images API adapter sends, with the GPT Image models'
// fields, and reads our fake's answers and errors as we do.
func TestVendorContractImagesOpenAI(t *testing.T) {
	gen := func(req map[string]any) map[string]any {
		req["model"] = "gpt-image-1.5"
		return map[string]any{"request": req}
	}
	made := func(n int, format string) func(t *testing.T, sdk sdkReport, ours adapterRun) {
		return func(t *testing.T, sdk sdkReport, ours adapterRun) {
			v := sdkValue(t, sdk)
			for i, d := range sdkImages(t, v["data"], n) {
				if d["bytes"] != float64(len(testPicture(format))) {
					t.Errorf("the SDK read image %d as %v bytes; want the fake's %s", i, d["bytes"], format)
				}
			}
			if field(v, "usage.output_tokens") != float64(1056*n) || v["output_format"] != format {
				t.Errorf("the SDK read %v; want the usage and output format", v)
			}
			imagesMade(t, ours, n, format)
			if ours.Usage == nil || ours.Usage.OutputTokens != 1056*n || ours.Usage.InputTokensDetails.TextTokens == 0 {
				t.Errorf("our usage %+v; want the fake's", ours.Usage)
			}
		}
	}
	compression := 80
	vendorContract{
		pkg: "openai", version: "7.57.0", script: "openai-images.mjs",
		key:  vendorKeys["OPENAI_API_KEY"],
		fake: fakeOpenAIImages,
		images: func(base, key string) images.Provider {
			return openai.NewImages(openai.Config{BaseURL: base + "/v1", APIKey: key})
		},
		step: func(r wireRequest) string { return "generate" },
		cases: []contractCase{
			{name: "the defaults", model: "gpt-image-1.5", wire: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "auto", Quality: "medium", Format: "png"},
				sdk:   gen(map[string]any{"prompt": "a red fox", "n": 1, "size": "auto", "quality": "medium", "output_format": "png"}),
				check: made(1, "png")},
			{name: "every field", model: "gpt-image-1.5", wire: true,
				image: images.Params{Prompt: "a red fox", N: 2, Size: "1536x1024", Quality: "high", Format: "jpeg", Background: "opaque",
					Compression: &compression, Moderation: "low", User: "user-1"},
				sdk: gen(map[string]any{"prompt": "a red fox", "n": 2, "size": "1536x1024", "quality": "high", "output_format": "jpeg",
					"background": "opaque", "output_compression": 80, "moderation": "low", "user": "user-1"}),
				check: made(2, "jpeg")},
			{name: "wrong key", model: "gpt-image-1.5", badKey: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "auto", Format: "png"},
				sdk:   gen(map[string]any{"prompt": "a red fox", "n": 1, "size": "auto", "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "AuthenticationError", http.StatusUnauthorized); field(e.Body, "code") != "invalid_api_key" {
						t.Errorf("the SDK read the error %v; want code invalid_api_key", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "openai refused the configured key")
				}},
			{name: "a size the model lacks", model: "gpt-image-1.5",
				image: images.Params{Prompt: "a red fox", N: 1, Size: "512x512", Format: "png"},
				sdk:   gen(map[string]any{"prompt": "a red fox", "n": 1, "size": "512x512", "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "BadRequestError", http.StatusBadRequest); field(e.Body, "param") != "size" {
						t.Errorf("the SDK read the error %v; want param size", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "Supported values")
				}},
			{name: "a refused prompt", model: "gpt-image-1.5",
				image: images.Params{Prompt: "forbidden scene", N: 1, Size: "auto", Format: "png"},
				sdk:   gen(map[string]any{"prompt": "forbidden scene", "n": 1, "size": "auto", "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "BadRequestError", http.StatusBadRequest); field(e.Body, "code") != "moderation_blocked" {
						t.Errorf("the SDK read the error %v; want code moderation_blocked", e.Body)
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "rejected as a result of our safety system")
				}},
			{name: "throttled", model: "gpt-image-1.5",
				image: images.Params{Prompt: "throttled fox", N: 1, Size: "auto", Format: "png"},
				sdk:   gen(map[string]any{"prompt": "throttled fox", "n": 1, "size": "auto", "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					sdkThrew(t, sdk, "RateLimitError", http.StatusTooManyRequests)
					var te *jobs.TransientError
					if oursEnded(t, ours, "transient", "Rate limit"); !errors.As(ours.Err, &te) || te.RetryAfter != time.Second {
						t.Errorf("our adapter ended %v; want a retry after the fake's Retry-After (1 s)", ours.Err)
					}
				}},
		},
	}.run(t)
}

// TestVendorContractImagesGemini: @google/genai 3.3.0's generateContent
// with image output sends the request our Gemini image adapter sends
// (responseModalities IMAGE, imageConfig.aspectRatio), and reads our
// fake's images, blocks and errors as we do.
func TestVendorContractImagesGemini(t *testing.T) {
	content := func(prompt, ratio string) map[string]any {
		return map[string]any{"request": map[string]any{"model": "gemini-2.5-flash-image", "contents": prompt,
			"config": map[string]any{"responseModalities": []string{"IMAGE"}, "imageConfig": map[string]any{"aspectRatio": ratio}}}}
	}
	made := func(t *testing.T, sdk sdkReport, ours adapterRun) {
		v := sdkValue(t, sdk)
		img := sdkImages(t, v["images"], 1)[0]
		if img["mimeType"] != "image/png" || img["bytes"] != float64(len(testPNG())) || v["finishReason"] != "STOP" || field(v, "usage.candidatesTokenCount") != 1290.0 {
			t.Errorf("the SDK read %v; want the fake's PNG, STOP and the usage", v)
		}
		imagesMade(t, ours, 1, "png")
		if ours.Usage == nil || ours.Usage.OutputTokens != 1290 {
			t.Errorf("our usage %+v; want 1290 output tokens", ours.Usage)
		}
	}
	vendorContract{
		pkg: "@google/genai", version: "3.3.0", script: "gemini-images.mjs",
		key:  vendorKeys["GEMINI_API_KEY"],
		fake: fakeGeminiImages,
		images: func(base, key string) images.Provider {
			return gemini.NewImages(gemini.Config{BaseURL: base, APIKey: key})
		},
		step: func(r wireRequest) string { return "generate" },
		known: map[string]string{
			"generate: path: sdk /v1/models/gemini-2.5-flash-image:generateContent, ours /v1beta/models/gemini-2.5-flash-image:generateContent": "" +
				"@google/genai 3.x calls the stable v1 by default; image output is documented on v1beta (the image generation " +
				"guide's REST calls), which our Gemini chat adapter speaks too, and which takes the same body",
		},
		cases: []contractCase{
			{name: "square", model: "gemini-2.5-flash-image", wire: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   content("a red fox", "1:1"), check: made},
			{name: "landscape", model: "gemini-2.5-flash-image", wire: true,
				image: images.Params{Prompt: "a red fox in the snow", N: 1, Size: "1344x768", Format: "png"},
				sdk:   content("a red fox in the snow", "16:9"), check: made},
			{name: "wrong key", model: "gemini-2.5-flash-image", badKey: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   content("a red fox", "1:1"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusBadRequest); !strings.Contains(e.Message, "API_KEY_INVALID") {
						t.Errorf("the SDK read %q; want the API_KEY_INVALID reason", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "refused the configured key")
				}},
			{name: "a blocked prompt", model: "gemini-2.5-flash-image",
				image: images.Params{Prompt: "forbidden scene", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   content("forbidden scene", "1:1"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if v := sdkValue(t, sdk); v["blockReason"] != "PROHIBITED_CONTENT" || len(v["images"].([]any)) != 0 {
						t.Errorf("the SDK read %v; want blockReason PROHIBITED_CONTENT and no image", v)
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "PROHIBITED_CONTENT")
				}},
			{name: "throttled", model: "gemini-2.5-flash-image",
				image: images.Params{Prompt: "throttled fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   content("throttled fox", "1:1"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusTooManyRequests); !strings.Contains(e.Message, "RESOURCE_EXHAUSTED") {
						t.Errorf("the SDK read %q; want RESOURCE_EXHAUSTED", e.Message)
					}
					oursEnded(t, ours, "transient", "")
				}},
		},
	}.run(t)
}

// TestVendorContractImagesFal: @fal-ai/client 1.10.1 queues FLUX.1 [dev]
// (fal-ai/flux/dev) with the input our adapter sends (a preset
// image_size by name, or width and height), reads its status until
// COMPLETED and fetches its result, as our adapter does within the
// request.
func TestVendorContractImagesFal(t *testing.T) {
	const flux = "fal-ai/flux/dev"
	queue := func(input map[string]any) map[string]any {
		input["enable_safety_checker"] = true
		return map[string]any{"endpoint": flux, "input": input}
	}
	made := func(n int, format string) func(t *testing.T, sdk sdkReport, ours adapterRun) {
		return func(t *testing.T, sdk sdkReport, ours adapterRun) {
			v := sdkValue(t, sdk)
			if got := fmt.Sprint(v["statuses"]); got != "[IN_QUEUE IN_PROGRESS COMPLETED]" {
				t.Errorf("the SDK read the statuses %s; want [IN_QUEUE IN_PROGRESS COMPLETED]", got)
			}
			for i, img := range sdkImages(t, field(v, "data.images"), n) {
				if u, _ := img["url"].(string); !strings.HasSuffix(u, "."+format) {
					t.Errorf("the SDK read image %d %v; want a %s file", i, img, format)
				}
			}
			imagesMade(t, ours, n, format)
		}
	}
	vendorContract{
		pkg: "@fal-ai/client", version: "1.10.1", script: "fal.mjs",
		key:  vendorKeys["FAL_KEY"],
		fake: func(t testing.TB) *fakeVendor { return fakeFal(t, 3) },
		images: func(base, key string) images.Provider {
			return fal.New(fal.Config{BaseURL: base, APIKey: key, PollInterval: time.Millisecond})
		},
		step: func(r wireRequest) string {
			switch {
			case r.Method == http.MethodPost:
				return "submit"
			case strings.HasSuffix(r.Path, "/status"):
				return "status"
			case strings.Contains(r.Path, "/requests/"):
				return "result"
			}
			return "download"
		},
		known: map[string]string{
			`status: query "logs": sdk "0", ours absent`: "the SDK always asks logs=0 (its default: no logs); " +
				"without the parameter fal sends no logs either, and we poll the status_url fal handed back, as given",
			"download: only ours makes this request": "the SDK hands back the result's images[].url; we copy each file " +
				"(without the key: fal's file links are public) and answer its bytes or our own link",
		},
		cases: []contractCase{
			{name: "a preset size, png", model: "flux-dev", wire: true,
				image: images.Params{Prompt: "a red fox", N: 2, Size: "1024x768", Format: "png"},
				sdk:   queue(map[string]any{"prompt": "a red fox", "image_size": "landscape_4_3", "num_images": 2, "output_format": "png"}),
				check: made(2, "png")},
			{name: "width and height, jpeg", model: "flux-dev", wire: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "800x600", Format: "jpeg"},
				sdk: queue(map[string]any{"prompt": "a red fox", "image_size": map[string]any{"width": 800, "height": 600}, "num_images": 1,
					"output_format": "jpeg"}),
				check: made(1, "jpeg")},
			{name: "wrong key", model: "flux-dev", badKey: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   queue(map[string]any{"prompt": "a red fox", "image_size": "square_hd", "num_images": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusUnauthorized); field(e.Body, "detail") == nil {
						t.Errorf("the SDK read the body %v; want fal's detail", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "fal refused the configured key")
				}},
			{name: "content policy", model: "flux-dev",
				image: images.Params{Prompt: "forbidden scene", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   queue(map[string]any{"prompt": "forbidden scene", "image_size": "square_hd", "num_images": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ValidationError", http.StatusUnprocessableEntity); field(e.Body, "detail.0.type") != "content_policy_violation" {
						t.Errorf("the SDK read the body %v; want a content_policy_violation", e.Body)
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "flagged by the content checker")
				}},
			{name: "throttled once", model: "flux-dev",
				image: images.Params{Prompt: "throttled fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   queue(map[string]any{"prompt": "throttled fox", "image_size": "square_hd", "num_images": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					// The SDK retries a 429 by itself; our router retries
					// the attempt.
					if sdkValue(t, sdk); count(sdk.Requests, http.MethodPost, "/flux/dev") != 2 {
						t.Errorf("the SDK submitted %d times; want a 429, then a retry that was queued", count(sdk.Requests, http.MethodPost, "/flux/dev"))
					}
					oursEnded(t, ours, "transient", "Too many requests")
				}},
		},
	}.run(t)
}

// TestVendorContractImagesReplicate: replicate 1.4.0 creates a FLUX.1
// [schnell] prediction by model with "Prefer: wait" (predictions.create
// with wait 60) and the input our adapter sends, and reads it until it
// ends, as our adapter does within the request.
func TestVendorContractImagesReplicate(t *testing.T) {
	create := func(input map[string]any) map[string]any {
		return map[string]any{"request": map[string]any{"model": "black-forest-labs/flux-schnell", "input": input, "wait": 60}}
	}
	made := func(n int, format, ext string) func(t *testing.T, sdk sdkReport, ours adapterRun) {
		return func(t *testing.T, sdk sdkReport, ours adapterRun) {
			v := sdkValue(t, sdk)
			if got := fmt.Sprint(v["statuses"]); got != "[starting processing succeeded]" {
				t.Errorf("the SDK read the statuses %s; want [starting processing succeeded]", got)
			}
			out, _ := v["output"].([]any)
			if len(out) != n || !strings.HasSuffix(fmt.Sprint(out[0]), "."+ext) {
				t.Errorf("the SDK read the output %v; want %d %s files", v["output"], n, ext)
			}
			imagesMade(t, ours, n, format)
		}
	}
	vendorContract{
		pkg: "replicate", version: "1.4.0", script: "replicate.mjs",
		key:  vendorKeys["REPLICATE_API_TOKEN"],
		fake: func(t testing.TB) *fakeVendor { return fakeReplicate(t, 2) },
		images: func(base, key string) images.Provider {
			return replicate.New(replicate.Config{BaseURL: base, APIToken: key, PollInterval: time.Millisecond})
		},
		step: func(r wireRequest) string {
			switch {
			case r.Method == http.MethodPost:
				return "create"
			case strings.HasPrefix(r.Path, "/v1/predictions/"):
				return "get"
			}
			return "download"
		},
		known: map[string]string{
			"download: only ours makes this request": "the SDK hands back the output URLs; we copy each file (without the " +
				"token: Replicate's delivery links are public, and expire after an hour) and answer its bytes or our own link",
		},
		cases: []contractCase{
			{name: "landscape png", model: "flux-schnell", wire: true,
				image: images.Params{Prompt: "a red fox", N: 2, Size: "1344x768", Format: "png"},
				sdk:   create(map[string]any{"prompt": "a red fox", "aspect_ratio": "16:9", "num_outputs": 2, "output_format": "png"}),
				check: made(2, "png", "png")},
			{name: "portrait jpeg", model: "flux-schnell", wire: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "896x1152", Format: "jpeg"},
				sdk:   create(map[string]any{"prompt": "a red fox", "aspect_ratio": "3:4", "num_outputs": 1, "output_format": "jpg"}),
				check: made(1, "jpeg", "jpg")},
			{name: "wrong token", model: "flux-schnell", badKey: true,
				image: images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   create(map[string]any{"prompt": "a red fox", "aspect_ratio": "1:1", "num_outputs": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusUnauthorized); !strings.Contains(e.Message, "valid authentication token") {
						t.Errorf("the SDK read %q; want Replicate's detail", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "Replicate refused the configured token")
				}},
			{name: "flagged as sensitive", model: "flux-schnell",
				image: images.Params{Prompt: "forbidden scene", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   create(map[string]any{"prompt": "forbidden scene", "aspect_ratio": "1:1", "num_outputs": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					v := sdkValue(t, sdk)
					if got := fmt.Sprint(v["statuses"]); got != "[starting processing failed]" || !strings.Contains(fmt.Sprint(v["error"]), "E005") {
						t.Errorf("the SDK read the statuses %s, error %v; want [starting processing failed] with E005", got, v["error"])
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "flagged as sensitive")
				}},
			{name: "throttled once", model: "flux-schnell",
				image: images.Params{Prompt: "throttled fox", N: 1, Size: "1024x1024", Format: "png"},
				sdk:   create(map[string]any{"prompt": "throttled fox", "aspect_ratio": "1:1", "num_outputs": 1, "output_format": "png"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if sdkValue(t, sdk); count(sdk.Requests, http.MethodPost, "/predictions") != 2 {
						t.Errorf("the SDK created %d times; want a 429, then a retry that was created", count(sdk.Requests, http.MethodPost, "/predictions"))
					}
					var te *jobs.TransientError
					if oursEnded(t, ours, "transient", "throttled"); !errors.As(ours.Err, &te) || te.RetryAfter != time.Second {
						t.Errorf("our adapter ended %v; want a retry after the fake's Retry-After (1 s)", ours.Err)
					}
				}},
		},
	}.run(t)
}
