package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig of JPEG answers
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/providers/synthetic"
)

// imagesAnswer is the answer of POST /v1/images/generations.
type imagesAnswer struct {
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Size    string `json:"size"`
	Format  string `json:"output_format"`
	Data    []struct {
		B64JSON string `json:"b64_json"`
		URL     string `json:"url"`
	} `json:"data"`
	Usage *images.Usage `json:"usage"`
	Error *struct {
		Message, Type, Code string
		Param               *string
	} `json:"error"`
}

// syntheticPictures are the images synthetic-image makes for params:
// what an answer must hold, byte for byte.
func syntheticPictures(t *testing.T, p images.Params) [][]byte {
	t.Helper()
	out, err := synthetic.Images{}.Generate(context.Background(), &catalog.Model{ID: "synthetic-image"}, &p)
	if err != nil {
		t.Fatal(err)
	}
	var b [][]byte
	for _, img := range out.Images {
		b = append(b, img.Data)
	}
	return b
}

// imageBytes returns the images of an answer: decoded from base64, or
// downloaded from our own links (which must be ours: s.base/files/images/).
func imageBytes(t *testing.T, s *server, a imagesAnswer) [][]byte {
	t.Helper()
	var out [][]byte
	for i, d := range a.Data {
		switch {
		case d.B64JSON != "" && d.URL == "":
			b, err := base64.StdEncoding.DecodeString(d.B64JSON)
			if err != nil {
				t.Fatalf("data[%d].b64_json: %v", i, err)
			}
			out = append(out, b)
		case d.URL != "" && d.B64JSON == "":
			out = append(out, downloadFrom(t, d.URL, s.base+"/files/images/dev/"))
		default:
			t.Fatalf("data[%d] = %+v; want one of b64_json and url", i, d)
		}
	}
	return out
}

// TestEndToEndImages: POST /v1/images/generations through genway serve
// with synthetic-image: b64_json (its default) and url answers (our
// signed links, downloaded and decoded: exactly the size asked for),
// PNG and JPEG; each request charged its images once, in the job usage;
// refusals (a bad field, a refused prompt, a vendor failure, credits
// short) cost nothing.
func TestEndToEndImages(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"GENWAY_DEV_CREDITS": "12"})
	before := waitSettled(t, s)
	for _, tt := range []struct {
		name string
		req  map[string]any
		p    images.Params
	}{
		{"b64_json by default", map[string]any{"model": "synthetic-image", "prompt": "a lighthouse at dusk", "n": 2, "size": "512x512"},
			images.Params{Prompt: "a lighthouse at dusk", N: 2, Size: "512x512", Format: "png"}},
		{"url", map[string]any{"model": "synthetic-image", "prompt": "a lighthouse at dusk", "size": "1024x1536", "response_format": "url"},
			images.Params{Prompt: "a lighthouse at dusk", N: 1, Size: "1024x1536", Format: "png"}},
		{"jpeg url", map[string]any{"model": "synthetic-image", "prompt": "a fox", "n": 2, "output_format": "jpeg", "response_format": "url"},
			images.Params{Prompt: "a fox", N: 2, Size: "1024x1024", Format: "jpeg"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a imagesAnswer
			code, hdr := s.do(t, "POST", "/v1/images/generations", tt.req, nil, &a)
			if code != 200 || a.Model != "synthetic-image" || a.Size != tt.p.Size || a.Format != tt.p.Format || a.Created == 0 ||
				hdr.Get("X-Genway-Attempts") != "synthetic-image=200" {
				t.Fatalf("POST %v = %d %+v (attempts %q)", tt.req, code, a, hdr.Get("X-Genway-Attempts"))
			}
			got, want := imageBytes(t, s, a), syntheticPictures(t, tt.p)
			if len(got) != len(want) {
				t.Fatalf("%d images; want %d", len(got), len(want))
			}
			for i := range got {
				cfg, format, err := image.DecodeConfig(bytes.NewReader(got[i]))
				if err != nil || format != tt.p.Format || fmt.Sprintf("%dx%d", cfg.Width, cfg.Height) != tt.p.Size {
					t.Errorf("image %d: %s %dx%d, %v; want a %s of %s", i, format, cfg.Width, cfg.Height, err, tt.p.Format, tt.p.Size)
				}
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("image %d is not synthetic-image's picture of the prompt", i)
				}
			}
		})
	}
	paid := waitSettled(t, s)
	if before.Balance-paid.Balance != 5*credits.Credit || paid.Held != 0 {
		t.Errorf("credits %+v -> %+v; want 5 images charged, nothing held", before, paid)
	}

	for _, tt := range []struct {
		name        string
		req         map[string]any
		status      int
		code, param string
	}{
		{"n over max_images", map[string]any{"model": "synthetic-image", "prompt": "p", "n": 11}, 400, "invalid_value", "n"},
		{"webp", map[string]any{"model": "synthetic-image", "prompt": "p", "output_format": "webp"}, 400, "invalid_value", "output_format"},
		{"stream", map[string]any{"model": "synthetic-image", "prompt": "p", "stream": true}, 400, "unsupported_parameter", "stream"},
		{"refused prompt", map[string]any{"model": "synthetic-image", "prompt": "fail:policy a fox"}, 400, "content_policy", ""},
		{"vendor failure", map[string]any{"model": "synthetic-image", "prompt": "fail:500 a fox"}, 502, "upstream_error", ""},
		{"credits short", map[string]any{"model": "synthetic-image", "prompt": "a fox", "n": 10, "size": "256x256"}, 402, "insufficient_credits", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a imagesAnswer
			code, _ := s.do(t, "POST", "/v1/images/generations", tt.req, nil, &a)
			param := ""
			if a.Error != nil && a.Error.Param != nil {
				param = *a.Error.Param
			}
			if code != tt.status || a.Error == nil || a.Error.Code != tt.code || param != tt.param {
				t.Errorf("POST %v = %d %+v; want %d %s naming %q", tt.req, code, a.Error, tt.status, tt.code, tt.param)
			}
		})
	}
	if after := waitSettled(t, s); after != paid {
		t.Errorf("credits %+v after the refusals; want %+v: refusals cost nothing", after, paid)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"credits", "usage", "--account", "dev"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\S+\s+image\s+synthetic-image\s+0\s+0\s+0\s+3\s+5$`).MatchString(out.String()) {
		t.Errorf("genway credits usage:\n%s\nwant synthetic-image's 3 requests (as jobs) for 5 credits", out.String())
	}
	// The links are ours and signed: without their signature, nothing.
	var a imagesAnswer
	s.do(t, "POST", "/v1/images/generations", map[string]any{"model": "synthetic-image", "prompt": "p", "size": "256x256", "response_format": "url"}, nil, &a)
	u := a.Data[0].URL
	resp, err := http.Get(u[:strings.Index(u, "?")])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Errorf("GET %s without its signature = 200", u[:strings.Index(u, "?")])
	}
	if _, err := png.DecodeConfig(bytes.NewReader(download(t, u))); err != nil {
		t.Errorf("the signed link: %v", err)
	}
}

// imageCase is one images.generate call of clients/npm/images.mjs, and
// what its images must be.
type imageCase struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	N              int    `json:"n"`
	Size           string `json:"size"`
	OutputFormat   string `json:"output_format"`
	ResponseFormat string `json:"response_format"` // "": the model's default
	Format         string `json:"format"`
	Width          int    `json:"width"`
	Height         int    `json:"height"`
}

// syntheticImageCases: synthetic-image's default answer (b64_json) and
// url answers, PNG and JPEG, of OpenAI's sizes.
var syntheticImageCases = []imageCase{
	{Model: "synthetic-image", Prompt: "a lighthouse at dusk", N: 2, Size: "1024x1024", OutputFormat: "png", Format: "png", Width: 1024, Height: 1024},
	{Model: "synthetic-image", Prompt: "a lighthouse at dusk", N: 1, Size: "1536x1024", OutputFormat: "png", ResponseFormat: "url", Format: "png", Width: 1536, Height: 1024},
	{Model: "synthetic-image", Prompt: "a fox in the snow", N: 2, Size: "1024x1536", OutputFormat: "jpeg", ResponseFormat: "url", Format: "jpeg", Width: 1024, Height: 1536},
	{Model: "synthetic-image", Prompt: "a fox in the snow", N: 1, Size: "512x512", OutputFormat: "jpeg", ResponseFormat: "b64_json", Format: "jpeg", Width: 512, Height: 512},
}

var (
	imageLineRE = regexp.MustCompile(`(?m)^image (\S+) (\d+) sha256 ([0-9a-f]{64})$`)
	linkLineRE  = regexp.MustCompile(`(?m)^link (\S+) (\d+) (\S+)$`)
)

// runImagesScript runs clients/npm/images.mjs against s with cases and
// checks what the script cannot see: each image's bytes are those of
// want(case) (synthetic-image's picture, a vendor's file), each link is
// our own (under linkPrefix), and the account was charged each request's
// price once, with nothing left held.
func runImagesScript(t *testing.T, s *server, cases []imageCase, linkPrefix string, want func(c imageCase, i int) []byte) {
	t.Helper()
	node, dir := npmClients(t, filepath.Join("openai", "resources", "images.mjs"))
	prices := map[string]credits.Amount{}
	var list struct {
		Data []struct {
			ID    string `json:"id"`
			Price struct {
				PerImage credits.Amount `json:"credits_per_image"`
			} `json:"price"`
		} `json:"data"`
	}
	s.do(t, "GET", "/v1/models?type=image", nil, nil, &list)
	for _, m := range list.Data {
		prices[m.ID] = m.Price.PerImage
	}
	before := waitSettled(t, s)
	raw, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	out := string(runNode(t, node, dir, []string{"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key, "GENWAY_IMAGE_CASES=" + string(raw)}, "images.mjs"))
	if n := strings.Count(out, "ok "); n != len(cases)+3 {
		t.Errorf("images.mjs reported %d checks; want %d", n, len(cases)+3)
	}
	noSecrets(t, "the script's output", out)
	made, links := imageLineRE.FindAllStringSubmatch(out, -1), linkLineRE.FindAllStringSubmatch(out, -1)
	var charged credits.Amount
	k, wantLinks := 0, 0
	for _, c := range cases {
		charged += prices[c.Model] * credits.Amount(c.N)
		if c.ResponseFormat == "url" {
			wantLinks += c.N
		}
		for i := range c.N {
			if k >= len(made) {
				t.Fatalf("images.mjs made %d images; want more", len(made))
			}
			m := made[k]
			k++
			sum := sha256.Sum256(want(c, i))
			if m[1] != c.Model || m[2] != strconv.Itoa(i) || hex.EncodeToString(sum[:]) != m[3] {
				t.Errorf("image %s #%s: the SDK read other bytes than %s's image %d", m[1], m[2], c.Model, i)
			}
		}
	}
	if k != len(made) || len(links) != wantLinks {
		t.Errorf("images.mjs made %d images and %d links; want %d and %d", len(made), len(links), k, wantLinks)
	}
	for _, l := range links {
		if !strings.HasPrefix(l[3], linkPrefix) {
			t.Errorf("link %s is not ours (%s...)", l[3], linkPrefix)
		}
	}
	after := waitSettled(t, s)
	if before.Balance-after.Balance != charged || after.Held != 0 {
		t.Errorf("credits %+v -> %+v; want %v charged, nothing held", before, after, charged)
	}
}

// syntheticWant is synthetic-image's picture of c's image i.
func syntheticWant(t *testing.T) func(c imageCase, i int) []byte {
	return func(c imageCase, i int) []byte {
		return syntheticPictures(t, images.Params{Prompt: c.Prompt, N: c.N, Size: c.Size, Format: c.OutputFormat})[i]
	}
}

// TestNPMImages runs the official openai npm client's images.generate
// (clients/npm/images.mjs) unmodified against genway serve: with
// synthetic-image (b64_json and url answers, PNG and JPEG, refusals as the
// SDK's typed errors), and with every vendor image model through fakes of
// their wire, as the vendor end-to-end test runs them.
func TestNPMImages(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		s := startServer(t, t.TempDir(), nil)
		runImagesScript(t, s, syntheticImageCases, s.base+"/files/images/dev/", syntheticWant(t))
	})
	t.Run("vendors", func(t *testing.T) {
		oai, gem, fal, rep := fakeOpenAIImages(t), fakeGeminiImages(t), fakeFal(t, 2), fakeReplicate(t, 2)
		logs := &syncBuffer{}
		s := startServerLog(t, t.TempDir(), imageVendorEnv(oai, gem, fal, rep), logs)
		// Each fake vendor hands out its 64x48 picture, whatever was asked.
		cases := []imageCase{
			{Model: "gpt-image-1.5", Prompt: "a red fox", N: 2, Size: "1024x1024", OutputFormat: "png", Format: "png", Width: 64, Height: 48},
			{Model: "gpt-image-1.5", Prompt: "a red fox", N: 1, Size: "auto", OutputFormat: "jpeg", ResponseFormat: "url", Format: "jpeg", Width: 64, Height: 48},
			{Model: "gemini-2.5-flash-image", Prompt: "a red fox", N: 1, Size: "1344x768", OutputFormat: "png", ResponseFormat: "url", Format: "png", Width: 64, Height: 48},
			{Model: "flux-dev", Prompt: "a red fox", N: 2, Size: "1024x768", OutputFormat: "jpeg", Format: "jpeg", Width: 64, Height: 48},
			{Model: "flux-schnell", Prompt: "a red fox", N: 1, Size: "1344x768", OutputFormat: "png", ResponseFormat: "url", Format: "png", Width: 64, Height: 48},
		}
		runImagesScript(t, s, cases, s.base+"/files/images/dev/", func(c imageCase, i int) []byte { return testPicture(c.OutputFormat) })
		noSecrets(t, "the server log", logs.String())
	})
}

// TestNPMImagesAWS runs the same script on the AWS-backed local mode
// against moto_server: the reservation and its settlement in DynamoDB,
// the url answers' images in S3, linked by presigned URLs.
func TestNPMImagesAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	npmClients(t, filepath.Join("openai", "resources", "images.mjs"))
	endpoint, env, dir := awsServe(t)
	s := startServer(t, dir, env)
	runImagesScript(t, s, syntheticImageCases[1:3], endpoint+"/", syntheticWant(t))
}
