package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/providers/synthetic"
)

// Fake image vendors, as vendors_test.go's fakes are (fal's and
// Replicate's image models are theirs): OpenAI's Images API and Gemini's
// image output. Both answer a wrong key with their vendor's error, a
// "forbidden ..." prompt with their refusal (OpenAI: 400
// moderation_blocked; Gemini: promptFeedback.blockReason), and the first
// "throttled ..." request with their 429.

// testPNG and testJPEG are the pictures the fake image vendors hand out.
var (
	testPNG = sync.OnceValue(func() []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, synthetic.Picture(7, 64, 48)); err != nil {
			panic(err)
		}
		return b.Bytes()
	})
	testJPEG = sync.OnceValue(func() []byte {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, synthetic.Picture(7, 64, 48), nil); err != nil {
			panic(err)
		}
		return b.Bytes()
	})
)

// testPicture is the picture of a file extension or output format
// (".jpg", "jpeg", ...): the JPEG, else the PNG.
func testPicture(ext string) []byte {
	switch strings.TrimPrefix(ext, ".") {
	case "jpg", "jpeg":
		return testJPEG()
	}
	return testPNG()
}

// fakeOpenAIImages speaks OpenAI's Images API (POST
// /v1/images/generations, "Authorization: Bearer"): n images in base64 of
// the output format asked for, the size ("auto" answered 1024x1024),
// quality and usage; a missing prompt, an unsupported size or a
// response_format sent to a GPT Image model is OpenAI's 400 naming it.
func fakeOpenAIImages(t testing.TB) *fakeVendor {
	v := &fakeVendor{}
	auth := "Bearer " + vendorKeys["OPENAI_API_KEY"]
	const badKey = `{"error":{"message":"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	invalid := func(w http.ResponseWriter, param, code, msg string) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": code}})
		writeStatusJSON(w, 400, string(b))
	}
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/images/generations" {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
			return
		}
		var body struct {
			Model          string  `json:"model"`
			Prompt         string  `json:"prompt"`
			N              *int    `json:"n"`
			Size           string  `json:"size"`
			Quality        string  `json:"quality"`
			OutputFormat   string  `json:"output_format"`
			ResponseFormat *string `json:"response_format"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			invalid(w, "", "invalid_json", "We could not parse the JSON body of your request.")
			return
		}
		switch {
		case body.Prompt == "":
			invalid(w, "prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
			return
		case body.ResponseFormat != nil && strings.HasPrefix(body.Model, "gpt-image"):
			invalid(w, "response_format", "unknown_parameter", "Unknown parameter: 'response_format'.")
			return
		case !slices.Contains([]string{"", "auto", "1024x1024", "1536x1024", "1024x1536"}, body.Size):
			invalid(w, "size", "invalid_value", "Invalid value: '"+body.Size+"'. Supported values are: '1024x1024', '1024x1536', '1536x1024', and 'auto'.")
			return
		}
		id := v.accept(body.Prompt)
		switch {
		case id == "":
			w.Header().Set("Retry-After", "1")
			writeStatusJSON(w, 429, `{"error":{"message":"Rate limit reached for gpt-image in organization org-test on images per minute: Limit 5, Used 5.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		case v.isRefused(id):
			writeStatusJSON(w, 400, `{"error":{"message":"Your request was rejected as a result of our safety system. Your request may contain content that is not allowed by our safety system.","type":"image_generation_user_error","param":null,"code":"moderation_blocked"}}`)
			return
		}
		n, format, size, quality := 1, body.OutputFormat, body.Size, body.Quality
		if body.N != nil {
			n = *body.N
		}
		if format == "" {
			format = "png"
		}
		if size == "" || size == "auto" {
			size = "1024x1024"
		}
		if quality == "" || quality == "auto" {
			quality = "medium"
		}
		var data []any
		for range n {
			data = append(data, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(testPicture(format))})
		}
		words := len(strings.Fields(body.Prompt))
		writeJSONTest(w, map[string]any{"created": time.Now().Unix(), "background": "opaque", "data": data, "output_format": format, "quality": quality, "size": size,
			"usage": map[string]any{"input_tokens": words, "input_tokens_details": map[string]any{"text_tokens": words, "image_tokens": 0},
				"output_tokens": 1056 * n, "total_tokens": words + 1056*n}})
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// geminiRatios are the aspect ratios Gemini's image output takes.
var geminiRatios = []string{"1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"}

// fakeGeminiImages speaks the Gemini API's image output (POST
// /v1beta/models/{model}:generateContent, or the same under /v1,
// "x-goog-api-key"): one PNG as
// an inlineData part of the candidate, with usageMetadata; an aspect
// ratio it does not take, or a request without IMAGE among its
// responseModalities, is a 400 INVALID_ARGUMENT.
func fakeGeminiImages(t testing.TB) *fakeVendor {
	v := &fakeVendor{}
	key := vendorKeys["GEMINI_API_KEY"]
	const badKey = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		_, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/") // the API version: v1beta or v1 (@google/genai 3.x's default)
		if r.Method != "POST" || !strings.HasPrefix(p, "/v1") || !strings.HasPrefix(rest, "models/") || !strings.HasSuffix(p, ":generateContent") {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "x-goog-api-key", key, 400, badKey) {
			return
		}
		model := strings.TrimSuffix(strings.TrimPrefix(rest, "models/"), ":generateContent")
		var body struct {
			Contents []struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"contents"`
			GenerationConfig struct {
				ResponseModalities []string `json:"responseModalities"`
				ImageConfig        struct {
					AspectRatio string `json:"aspectRatio"`
				} `json:"imageConfig"`
			} `json:"generationConfig"`
		}
		err := json.NewDecoder(r.Body).Decode(&body)
		ratio := body.GenerationConfig.ImageConfig.AspectRatio
		switch {
		case err != nil || len(body.Contents) != 1 || len(body.Contents[0].Parts) != 1 || body.Contents[0].Parts[0].Text == "":
			writeStatusJSON(w, 400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT"}}`)
			return
		case !slices.Contains(body.GenerationConfig.ResponseModalities, "IMAGE"):
			writeStatusJSON(w, 400, `{"error":{"code":400,"message":"Model only supports text and image as response modalities","status":"INVALID_ARGUMENT"}}`)
			return
		case ratio != "" && !slices.Contains(geminiRatios, ratio):
			writeStatusJSON(w, 400, `{"error":{"code":400,"message":"Unsupported aspect ratio: `+ratio+`","status":"INVALID_ARGUMENT"}}`)
			return
		}
		prompt := body.Contents[0].Parts[0].Text
		tokens := len(strings.Fields(prompt))
		id := v.accept(prompt)
		switch {
		case id == "":
			writeStatusJSON(w, 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
			return
		case v.isRefused(id):
			writeJSONTest(w, map[string]any{"promptFeedback": map[string]any{"blockReason": "PROHIBITED_CONTENT"},
				"usageMetadata": map[string]any{"promptTokenCount": tokens, "totalTokenCount": tokens}, "modelVersion": model, "responseId": id})
			return
		}
		writeJSONTest(w, map[string]any{
			"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{
				map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(testPNG())}}}},
				"finishReason": "STOP", "index": 0}},
			"usageMetadata": map[string]any{"promptTokenCount": tokens, "candidatesTokenCount": 1290, "totalTokenCount": tokens + 1290},
			"modelVersion":  model, "responseId": id,
		})
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// imageVendorEnv points genway serve at the fake image vendors.
func imageVendorEnv(openai, gemini, fal, replicate *fakeVendor) map[string]string {
	env := map[string]string{"GENWAY_MEDIA_ALLOW_PRIVATE": "1"} // the fakes' files are on loopback
	for _, k := range []string{"OPENAI_API_KEY", "GEMINI_API_KEY", "FAL_KEY", "REPLICATE_API_TOKEN"} {
		env[k] = vendorKeys[k]
	}
	env["OPENAI_BASE_URL"] = openai.srv.URL + "/v1"
	env["GEMINI_BASE_URL"] = gemini.srv.URL
	env["FAL_BASE_URL"] = fal.srv.URL
	env["REPLICATE_BASE_URL"] = replicate.srv.URL
	return env
}

// TestImageVendorsEndToEnd makes images with every vendor image model of
// the default catalog through genway serve, against the fake vendors on
// loopback: b64_json and url answers hold the vendor's picture byte for
// byte (a vendor's link downloaded and served from our storage, never
// shown), each request charged its model's price per image once; a
// refused prompt is a 400 content_policy with the vendor's words and
// costs nothing; a 429 is retried (Retry-After) and answered; no vendor
// key shows anywhere.
func TestImageVendorsEndToEnd(t *testing.T) {
	oai, gem, fal, rep := fakeOpenAIImages(t), fakeGeminiImages(t), fakeFal(t, 2), fakeReplicate(t, 2)
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), imageVendorEnv(oai, gem, fal, rep), logs)
	prices := map[string]credits.Amount{}
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
			Price   struct {
				PerImage credits.Amount `json:"credits_per_image"`
			} `json:"price"`
		} `json:"data"`
	}
	s.do(t, "GET", "/v1/models?type=image", nil, nil, &list)
	for _, m := range list.Data {
		if m.OwnedBy != "synthetic" {
			prices[m.ID] = m.Price.PerImage
		}
	}
	cases := []struct {
		model, size, format, rf string
		n                       int
	}{
		{"gpt-image-1.5", "1024x1024", "png", "", 2},
		{"gpt-image-1.5", "auto", "jpeg", "url", 1},
		{"gemini-2.5-flash-image", "1344x768", "png", "", 2},
		{"gemini-2.5-flash-image", "1024x1024", "png", "url", 1},
		{"flux-dev", "1024x768", "jpeg", "", 2},
		{"flux-dev", "1024x1024", "png", "url", 1},
		{"flux-schnell", "1344x768", "png", "", 2},
		{"flux-schnell", "896x1152", "jpeg", "url", 1},
	}
	covered := map[string]bool{}
	before := waitSettled(t, s)
	var charged credits.Amount
	for _, c := range cases {
		covered[c.model] = true
		req := map[string]any{"model": c.model, "prompt": "a red fox in the snow", "n": c.n, "size": c.size, "output_format": c.format}
		if c.rf != "" {
			req["response_format"] = c.rf
		}
		var a imagesAnswer
		code, _ := s.do(t, "POST", "/v1/images/generations", req, nil, &a)
		if code != 200 || a.Model != c.model || len(a.Data) != c.n {
			t.Errorf("%s %v = %d %+v", c.model, req, code, a.Error)
			continue
		}
		for i, b := range imageBytes(t, s, a) {
			if !bytes.Equal(b, testPicture(c.format)) {
				t.Errorf("%s %v: image %d is not the vendor's %s", c.model, req, i, c.format)
			}
		}
		charged += prices[c.model] * credits.Amount(c.n)
		b, _ := json.Marshal(a)
		noSecrets(t, c.model+"'s answer", string(b))
		for _, f := range []*fakeVendor{fal, rep} {
			if strings.Contains(string(b), f.srv.URL) {
				t.Errorf("%s's answer shows the vendor's link", c.model)
			}
		}
	}
	for id := range prices {
		if !covered[id] {
			t.Errorf("vendor image model %s is not covered", id)
		}
	}
	paid := waitSettled(t, s)
	if before.Balance-paid.Balance != charged || paid.Held != 0 {
		t.Errorf("credits %+v -> %+v; want %v charged, nothing held", before, paid, charged)
	}
	for _, model := range []string{"gpt-image-1.5", "gemini-2.5-flash-image", "flux-dev", "flux-schnell"} {
		var a imagesAnswer
		code, _ := s.do(t, "POST", "/v1/images/generations", map[string]any{"model": model, "prompt": "forbidden: a scene"}, nil, &a)
		if code != 400 || a.Error == nil || a.Error.Code != "content_policy" || a.Error.Message == "" {
			t.Errorf("%s, a refused prompt = %d %+v; want a 400 content_policy with the vendor's words", model, code, a.Error)
		}
	}
	var a imagesAnswer
	code, hdr := s.do(t, "POST", "/v1/images/generations", map[string]any{"model": "gpt-image-1.5", "prompt": "throttled fox", "size": "1024x1024"}, nil, &a)
	if code != 200 || hdr.Get("X-Genway-Attempts") != "gpt-image-1.5=429, gpt-image-1.5=200" {
		t.Errorf("a throttled request = %d (attempts %q); want the retry's 200", code, hdr.Get("X-Genway-Attempts"))
	}
	if after := waitSettled(t, s); paid.Balance-after.Balance != prices["gpt-image-1.5"] {
		t.Errorf("credits %+v -> %+v; want the throttled request's image charged once, the refusals nothing", paid, after)
	}
	for name, v := range map[string]*fakeVendor{"openai": oai, "gemini": gem, "fal": fal, "replicate": rep} {
		if _, badAuth := v.counts(); badAuth != 0 {
			t.Errorf("%s refused our key %d times", name, badAuth)
		}
	}
	// Gemini makes one image a call: 2 requests for 3 images, and the
	// refused one.
	if submits, _ := gem.counts(); submits != 3+1 {
		t.Errorf("Gemini: %d calls; want 4", submits)
	}
	noSecrets(t, "the server log", logs.String())
}
