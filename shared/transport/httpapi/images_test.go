package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/images/imagestest"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/route"
)

// imagesServer serves GenerateImages for account "acct" (100 credits)
// with the default catalog's synthetic-image, and provider as the
// synthetic provider if set.
func imagesServer(t *testing.T, provider images.Provider, opts ...ImagesOption) (*httptest.Server, *imagestest.Credits) {
	t.Helper()
	return imagesServerWith(t, 100, provider, opts...)
}

// imagesServerWith is imagesServer with balance whole credits.
func imagesServerWith(t *testing.T, balance int64, provider images.Provider, opts ...ImagesOption) (*httptest.Server, *imagestest.Credits) {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	if provider == nil {
		provider = synthetic.Images{}
	}
	cr := imagestest.NewCredits(map[string]credits.Amount{"acct": credits.Amount(balance) * credits.Credit})
	svc := &images.Service{Catalog: cat, Providers: map[string]images.Provider{"synthetic": provider}, Credits: cr, Media: &imagestest.Media{},
		Router: route.New(route.Policy{Backoff: time.Millisecond, NoBreakers: true}, nil)}
	srv := httptest.NewServer(withAccount(GenerateImages(svc, nil, opts...)))
	t.Cleanup(srv.Close)
	return srv, cr
}

func postImages(t *testing.T, srv *httptest.Server, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestGenerateImagesAnswer: OpenAI's ImagesResponse, b64_json by the
// model's default or url when asked, with the model that made them and
// the attempts header.
func TestGenerateImagesAnswer(t *testing.T) {
	srv, cr := imagesServer(t, nil)
	resp, b := postImages(t, srv, `{"model":"synthetic-image","prompt":"a fox","size":"256x256","n":2}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get(AttemptsHeader) != "synthetic-image=200" {
		t.Fatalf("POST = %d %v %s", resp.StatusCode, resp.Header, b)
	}
	var got struct {
		ID           string `json:"id"`
		Created      int64  `json:"created"`
		Model        string `json:"model"`
		Size         string `json:"size"`
		OutputFormat string `json:"output_format"`
		Data         []struct {
			B64JSON *string `json:"b64_json"`
			URL     *string `json:"url"`
		} `json:"data"`
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// The synthetic vendor reports no tokens: usage is the cost alone,
	// 2 images at 1 credit, as a number; the id is the record's.
	if got.Created == 0 || got.Model != "synthetic-image" || got.Size != "256x256" || got.OutputFormat != "png" || len(got.Data) != 2 ||
		len(got.Usage) != 1 || string(got.Usage["cost"]) != "2" || !strings.HasPrefix(got.ID, "img_") {
		t.Errorf("answer %s", b)
	}
	if recs := cr.Records(); len(recs) != 1 || recs[0].ID != got.ID || recs[0].Cost != 2*credits.Credit || recs[0].Units != 2 {
		t.Errorf("records %+v; want the answer's (%s), costing the 2 captured", recs, got.ID)
	}
	for _, d := range got.Data {
		if d.B64JSON == nil || d.URL != nil {
			t.Fatalf("data %s; want b64_json only", b)
		}
		pic, _ := base64.StdEncoding.DecodeString(*d.B64JSON)
		cfg, err := png.DecodeConfig(bytes.NewReader(pic))
		if err != nil || cfg.Width != 256 || cfg.Height != 256 {
			t.Errorf("image %dx%d, %v; want a 256x256 PNG", cfg.Width, cfg.Height, err)
		}
	}
	resp, b = postImages(t, srv, `{"model":"synthetic-image","prompt":"a fox","response_format":"url","output_format":"jpeg"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"url":"https://media.test/images/acct/img_`) || strings.Contains(string(b), "b64_json") ||
		!strings.Contains(string(b), `.jpg?ttl=3600"`) {
		t.Errorf("url answer %d %s", resp.StatusCode, b)
	}
	if a, _ := cr.Account(context.Background(), "acct"); a.Balance != 97*credits.Credit || a.Held != 0 {
		t.Errorf("account %+v; want 3 images charged", a)
	}
}

// TestGenerateImagesErrors: each failure in the OpenAI envelope, with its
// status, code and param (the vendor failures through the synthetic
// provider's fail: triggers); none charges anything.
func TestGenerateImagesErrors(t *testing.T) {
	tests := []struct {
		name, body       string
		status           int
		code, param, msg string
		attempts         string
	}{
		{"not json", `{`, 400, "invalid_json", "", "", ""},
		{"n a string", `{"model":"synthetic-image","prompt":"p","n":"2"}`, 400, "invalid_type", "n", "", ""},
		{"no model", `{"prompt":"p"}`, 400, "missing_field", "model", "", ""},
		{"unknown model", `{"model":"dall-e-3","prompt":"p"}`, 404, "model_not_found", "model", "", ""},
		{"a chat model", `{"model":"synthetic/echo","prompt":"p"}`, 400, "model_type_mismatch", "model", "", ""},
		{"n too many", `{"model":"synthetic-image","prompt":"p","n":11}`, 400, "invalid_value", "n", "", ""},
		{"size", `{"model":"synthetic-image","prompt":"p","size":"4096x4096"}`, 400, "invalid_value", "size", "", ""},
		{"webp", `{"model":"synthetic-image","prompt":"p","output_format":"webp"}`, 400, "invalid_value", "output_format", "", ""},
		{"stream", `{"model":"synthetic-image","prompt":"p","stream":true}`, 400, "unsupported_parameter", "stream", "", ""},
		{"style", `{"model":"synthetic-image","prompt":"p","style":"vivid"}`, 400, "unsupported_parameter", "style", "", ""},
		{"background", `{"model":"synthetic-image","prompt":"p","background":"transparent"}`, 400, "unsupported_parameter", "background", "", ""},
		{"auto quality on a model without qualities", `{"model":"synthetic-image","prompt":"p","n":10,"quality":"auto","size":"256x256"}`, 200, "", "", "", "synthetic-image=200"},
		{"content policy", `{"model":"synthetic-image","prompt":"fail:policy a fox"}`, 400, "content_policy", "",
			"The synthetic provider refused this prompt", "synthetic-image=400"},
		{"vendor 400", `{"model":"synthetic-image","prompt":"fail:400 a fox"}`, 400, "upstream_invalid_request", "", "fail:400", "synthetic-image=400"},
		{"vendor down", `{"model":"synthetic-image","prompt":"fail:503 a fox"}`, 503, "upstream_unavailable", "", "synthetic provider is unavailable",
			"synthetic-image=503, synthetic-image=503, synthetic-image=503"},
		{"vendor timeout", `{"model":"synthetic-image","prompt":"fail:504 a fox"}`, 504, "upstream_timeout", "", "", ""},
		{"vendor failure", `{"model":"synthetic-image","prompt":"fail: a fox"}`, 502, "upstream_error", "", "request id", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cr := imagesServer(t, nil)
			resp, b := postImages(t, srv, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("POST %s = %d %s; want %d", tt.body, resp.StatusCode, b, tt.status)
			}
			if tt.attempts != "" && resp.Header.Get(AttemptsHeader) != tt.attempts {
				t.Errorf("attempts %q; want %q", resp.Header.Get(AttemptsHeader), tt.attempts)
			}
			if tt.status == 200 {
				return
			}
			var env struct {
				Error struct {
					Message string  `json:"message"`
					Code    string  `json:"code"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatal(err)
			}
			param := ""
			if env.Error.Param != nil {
				param = *env.Error.Param
			}
			if env.Error.Code != tt.code || param != tt.param || !strings.Contains(env.Error.Message, tt.msg) {
				t.Errorf("error %s; want code %s, param %q, a message with %q", b, tt.code, tt.param, tt.msg)
			}
			if a, _ := cr.Account(context.Background(), "acct"); a.Balance != 100*credits.Credit || a.Held != 0 {
				t.Errorf("account %+v; want nothing charged or held", a)
			}
		})
	}
	srv, _ := imagesServerWith(t, 2, nil)
	resp, b := postImages(t, srv, `{"model":"synthetic-image","prompt":"p","n":3}`)
	if resp.StatusCode != 402 || !strings.Contains(string(b), `"code":"insufficient_credits"`) || !strings.Contains(string(b), "costs 3 credits; the account has 2 available") {
		t.Errorf("n=3 on 2 credits = %d %s; want a 402 saying the price and what is available", resp.StatusCode, b)
	}
	srv, _ = imagesServer(t, nil)
	resp, b = postImages(t, srv, `{"model":"synthetic-image","prompt":"fail:429 busy"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "upstream_rate_limited") {
		t.Errorf("fail:429 = %d %v %s; want 429 with Retry-After", resp.StatusCode, resp.Header, b)
	}
}

// slowImages waits for release (bounded) before making the images, or
// failing with fail.
type slowImages struct {
	release chan struct{}
	fail    error
}

func (s slowImages) Generate(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
	select {
	case <-s.release:
	case <-time.After(guard):
	}
	if s.fail != nil {
		return nil, s.fail
	}
	return synthetic.Images{}.Generate(ctx, m, p)
}

// TestGenerateImagesKeepAlive: a slow image gets keep-alive spaces and
// then the JSON (one value a client reads as usual); a failure after the
// spaces is the error envelope as the body. The vendor waits for the
// test, which waits (bounded) until a space has reached it.
func TestGenerateImagesKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail error
		want string
	}{
		{"slow", nil, `"b64_json":`},
		{"slow then refused", &jobs.ProviderError{Code: jobs.CodeContentPolicy, Message: "refused"}, `"code":"content_policy"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			srv, _ := imagesServer(t, slowImages{release: release, fail: tt.fail}, ImagesKeepAlive(10*time.Millisecond))
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"model":"synthetic-image","prompt":"p","size":"256x256"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, 1)
			if _, err := io.ReadFull(resp.Body, first); err != nil || first[0] != ' ' {
				t.Fatalf("first byte %q, %v; want a keep-alive space", first, err)
			}
			close(release)
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if resp.StatusCode != 200 || json.Unmarshal(rest, &v) != nil || !strings.Contains(string(rest), tt.want) {
				t.Errorf("status %d, body %q; want spaces and one JSON value with %s", resp.StatusCode, rest, tt.want)
			}
		})
	}
}

// TestVendorAPIError: how each vendor failure maps to the client's
// status and code, naming the provider, never the vendor's words for its
// own failures.
func TestVendorAPIError(t *testing.T) {
	timeout := &net.OpError{Op: "read", Err: errTimeout{}}
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		msg    string
	}{
		{"content policy", &jobs.ProviderError{Code: jobs.CodeContentPolicy, Status: 400, Message: "Flagged by the safety system."}, 400, "content_policy", "Flagged by the safety system."},
		{"vendor's 400", &jobs.ProviderError{Code: jobs.CodeUpstream, Status: 400, Message: "Invalid size."}, 400, "upstream_invalid_request", "Invalid size."},
		{"refused key", &jobs.ProviderError{Code: jobs.CodeUpstream, Status: 401, Account: true, Message: "bad key sk-123"}, 502, "upstream_error", "The acme provider failed"},
		{"no image", &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "no image"}, 502, "upstream_error", "The acme provider failed"},
		{"refused key as a 400 (Gemini's API_KEY_INVALID)", &jobs.ProviderError{Code: jobs.CodeUpstream, Status: 400, Account: true,
			Message: "The Gemini API refused the configured key: API key sk-123 not valid"}, 502, "upstream_error", "The acme provider failed"},
		{"an SVG for an image", jobs.MediaTypeError("image", "image/svg+xml"), 502, "upstream_error", "of type image/svg+xml"},
		{"timeout code", &jobs.ProviderError{Code: jobs.CodeTimeout, Message: "slow"}, 504, "upstream_timeout", "did not answer in time"},
		{"rate limited", &jobs.TransientError{Status: 429, RetryAfter: 3 * time.Second, Err: errors.New("429")}, 429, "upstream_rate_limited", "rate limiting"},
		{"unavailable", &jobs.TransientError{Status: 503, Err: errors.New("503")}, 503, "upstream_unavailable", "unavailable"},
		{"gateway timeout", &jobs.TransientError{Status: 504, Err: errors.New("504")}, 504, "upstream_timeout", ""},
		{"server error", &jobs.TransientError{Status: 500, Err: errors.New("500")}, 502, "upstream_error", ""},
		{"network timeout", &jobs.TransientError{Err: timeout}, 504, "upstream_timeout", ""},
		{"deadline", &jobs.TransientError{Err: context.DeadlineExceeded}, 504, "upstream_timeout", ""},
		{"connection refused", &jobs.TransientError{Err: errors.New("connection refused")}, 502, "upstream_error", ""},
		{"anything else", errors.New("boom"), 502, "upstream_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := toAPIError(&images.VendorError{Provider: "acme", Model: "m", Err: tt.err}, "req-1")
			status, _ := statusOf(e.Kind)
			if status != tt.status || e.Code != tt.code || !strings.Contains(e.Message, tt.msg) || strings.Contains(e.Message, "sk-123") {
				t.Errorf("%d %s %q; want %d %s with %q", status, e.Code, e.Message, tt.status, tt.code, tt.msg)
			}
		})
	}
}

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }
