package mediafetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
)

func TestDoClassifies(t *testing.T) {
	tests := []struct {
		status   int
		header   string
		body     string
		wantCode string // "" ok, "transient", or a job error code
		wantMsg  string
		wantWait time.Duration
	}{
		{200, "", "ok", "", "", 0},
		{400, "", `{"msg":"bad prompt"}`, jobs.CodeUpstream, `{"msg":"bad prompt"}`, 0},
		{404, "", "", jobs.CodeUpstream, "Not Found", 0},
		{408, "", "", "transient", "", 0},
		{429, "17", "slow down", "transient", "", 17 * time.Second},
		{500, "", "", "transient", "", 0},
		{529, "", "", "transient", "", 0},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(tt.status)
			io.WriteString(w, tt.body)
		}))
		req, _ := http.NewRequest("GET", srv.URL+"/x?sig=secret", nil)
		resp, err := Do(context.Background(), srv.Client(), req, "test", nil)
		srv.Close()
		switch tt.wantCode {
		case "":
			if err != nil {
				t.Fatalf("HTTP %d: Do = %v", tt.status, err)
			}
			resp.Body.Close()
		case "transient":
			var te *jobs.TransientError
			if !errors.As(err, &te) || te.RetryAfter != tt.wantWait {
				t.Errorf("HTTP %d: Do = %v; want transient, retry after %v", tt.status, err, tt.wantWait)
			}
		default:
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || pe.Code != tt.wantCode || pe.Message != tt.wantMsg {
				t.Errorf("HTTP %d: Do = %v; want %s %q", tt.status, err, tt.wantCode, tt.wantMsg)
			}
		}
	}
}

// TestTransportError: an unreachable vendor is transient, and the error
// names the URL without its query (where signatures live).
func TestTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/file.mp4?X-Amz-Signature=secret"
	srv.Close()
	req, _ := http.NewRequest("GET", u, nil)
	_, err := Do(context.Background(), http.DefaultClient, req, "download", nil)
	var te *jobs.TransientError
	if !errors.As(err, &te) || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "/file.mp4") {
		t.Errorf("Do(closed port) = %v; want a transient error naming the path, not the query", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Do(ctx, http.DefaultClient, req, "download", nil); !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Errorf("Do(cancelled) = %v; want the context's error", err)
	}
}

func TestContentType(t *testing.T) {
	tests := []struct{ header, url, fallback, want, ext string }{
		{"video/mp4", "https://x/a", "", "video/mp4", "mp4"},
		{"audio/mpeg; charset=binary", "https://x/a", "", "audio/mpeg", "mp3"},
		{"application/octet-stream", "https://x/a.wav?sig=1", "", "audio/wav", "wav"},
		{"", "https://x/A.MP3", "", "audio/mpeg", "mp3"},
		{"binary/octet-stream", "https://x/a", "video/mp4", "video/mp4", "mp4"},
		{"", "https://x/a.xyz", "", "", "bin"},
		{"application/octet-stream", "https://x/img-0.png", "", "image/png", "png"},
		{"", "https://x/out.jpg", "", "image/jpeg", "jpg"},
		{"", "https://x/out.JPEG", "", "image/jpeg", "jpg"},
		{"", "https://x/out-1.webp", "", "image/webp", "webp"},
	}
	for _, tt := range tests {
		got := ContentType(tt.header, tt.url, tt.fallback)
		if got != tt.want || jobs.Ext(got) != tt.ext {
			t.Errorf("ContentType(%q, %q, %q) = %q (ext %s); want %q (%s)", tt.header, tt.url, tt.fallback, got, jobs.Ext(got), tt.want, tt.ext)
		}
	}
}

func TestMatchesType(t *testing.T) {
	tests := []struct {
		jobType, ct, url string
		want             bool
	}{
		{jobs.TypeVideo, "video/mp4", "", true},
		{jobs.TypeVideo, "audio/mpeg", "", false},
		{jobs.TypeMusic, "audio/wav", "", true},
		{jobs.TypeSFX, "", "https://x/a.mp3", true},
		{jobs.TypeSFX, "", "https://x/a.png", false},
		{jobs.TypeVideo, "application/octet-stream", "https://x/a.webm", true},
		{catalog.TypeImage, "", "https://x/a.png", true},
		{catalog.TypeImage, "image/webp", "", true},
		{catalog.TypeImage, "video/mp4", "", false},
	}
	for _, tt := range tests {
		if got := MatchesType(tt.jobType, tt.ct, tt.url); got != tt.want {
			t.Errorf("MatchesType(%s, %q, %q) = %v; want %v", tt.jobType, tt.ct, tt.url, got, tt.want)
		}
	}
}

// brokenBody is a body whose read fails after some bytes, as a dropped
// connection's does.
type brokenBody struct{ r io.Reader }

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *brokenBody) Close() error { return nil }

// TestDecodeJSONLimit: an answer within the limit is decoded; one over it,
// or not JSON, is an upstream_error; a broken read is transient.
func TestDecodeJSONLimit(t *testing.T) {
	tests := []struct {
		name  string
		body  io.ReadCloser
		limit int64
		want  string // "" ok, "transient", or a job error code
	}{
		{"ok", io.NopCloser(strings.NewReader(`{"a":1}`)), 64, ""},
		{"exactly the limit", io.NopCloser(strings.NewReader(`{"a":1}`)), 7, ""},
		{"over the limit", io.NopCloser(strings.NewReader(`{"a":1}`)), 6, jobs.CodeUpstream},
		{"garbage", io.NopCloser(strings.NewReader(`<html>`)), 64, jobs.CodeUpstream},
		{"broken read", &brokenBody{strings.NewReader(`{"a":`)}, 64, "transient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v map[string]any
			err := DecodeJSONLimit(&http.Response{Body: tt.body}, "status", tt.limit, &v)
			var pe *jobs.ProviderError
			var te *jobs.TransientError
			switch {
			case tt.want == "":
				if err != nil || v["a"] != 1.0 {
					t.Errorf("DecodeJSONLimit = %v, %v; want a=1", v, err)
				}
			case tt.want == "transient":
				if !errors.As(err, &te) {
					t.Errorf("DecodeJSONLimit = %v; want a transient error", err)
				}
			case !errors.As(err, &pe) || pe.Code != tt.want:
				t.Errorf("DecodeJSONLimit = %v; want %s", err, tt.want)
			}
		})
	}
}

// TestDecodeJSON: DecodeJSON is DecodeJSONLimit with MaxJSON.
func TestDecodeJSON(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader(`<html>`))}
	var v map[string]any
	var pe *jobs.ProviderError
	if err := DecodeJSON(resp, "status", &v); !errors.As(err, &pe) || pe.Code != jobs.CodeUpstream {
		t.Errorf("DecodeJSON(garbage) = %v; want upstream_error", err)
	}
	resp = &http.Response{Body: io.NopCloser(strings.NewReader(`{"a":1}`))}
	if err := DecodeJSON(resp, "status", &v); err != nil || v["a"] != 1.0 {
		t.Errorf("DecodeJSON = %v, %v", v, err)
	}
	resp = &http.Response{Body: io.NopCloser(strings.NewReader(`"` + strings.Repeat("x", MaxJSON) + `"`))}
	if err := DecodeJSON(resp, "status", &v); !errors.As(err, &pe) || pe.Code != jobs.CodeUpstream {
		t.Errorf("DecodeJSON(over MaxJSON) = %v; want upstream_error", err)
	}
}

// TestPollUntil: the calls stop at done, at poll's error, after max
// calls (transient) or when ctx ends.
func TestPollUntil(t *testing.T) {
	boom := errors.New("boom")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		every     time.Duration
		doneAt    int // the call that reports done; -1 never
		failAt    int // the call that fails; -1 never
		wantCalls int
		want      error // nil; boom; context.Canceled; or errTransient
	}{
		{"done at once", context.Background(), 0, 0, -1, 1, nil},
		{"done at the third", context.Background(), 0, 2, -1, 3, nil},
		{"poll fails", context.Background(), 0, -1, 1, 2, boom},
		{"never done", context.Background(), 0, -1, -1, 4, errTransient},
		{"ctx ended", canceled, time.Hour, -1, -1, 1, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := PollUntil(tt.ctx, tt.every, 4, "job x", func(n int) (bool, error) {
				if n != calls {
					t.Errorf("call %d got n = %d", calls, n)
				}
				calls++
				if n == tt.failAt {
					return false, boom
				}
				return n == tt.doneAt, nil
			})
			var te *jobs.TransientError
			switch {
			case tt.want == errTransient:
				if !errors.As(err, &te) || !strings.Contains(err.Error(), "job x") {
					t.Errorf("PollUntil = %v; want a transient error naming job x", err)
				}
			case tt.want == nil:
				if err != nil {
					t.Errorf("PollUntil = %v; want nil", err)
				}
			case !errors.Is(err, tt.want):
				t.Errorf("PollUntil = %v; want %v", err, tt.want)
			}
			if calls != tt.wantCalls {
				t.Errorf("%d calls; want %d", calls, tt.wantCalls)
			}
		})
	}
}

// errTransient stands for any *jobs.TransientError in a test's table.
var errTransient = errors.New("transient")

// TestFetch: a file read whole with its type; one over the cap, or cut
// short, is an error of the kind the worker and the router expect.
func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short.png":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
			return
		case "/big.png":
			io.WriteString(w, strings.Repeat("x", 100))
			return
		case "/gone.png":
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, "picture")
	}))
	defer srv.Close()
	ctx := context.Background()
	b, ct, err := Fetch(ctx, srv.Client(), srv.URL+"/a.png?sig=1", nil, "image/jpeg", 64)
	if err != nil || string(b) != "picture" || ct != "image/png" {
		t.Errorf("Fetch = %q, %s, %v; want the picture as image/png", b, ct, err)
	}
	var pe *jobs.ProviderError
	var te *jobs.TransientError
	if _, _, err := Fetch(ctx, srv.Client(), srv.URL+"/big.png", nil, "", 64); !errors.As(err, &pe) || pe.Code != jobs.CodeUpstream {
		t.Errorf("Fetch(big) = %v; want an upstream_error", err)
	}
	if _, _, err := Fetch(ctx, srv.Client(), srv.URL+"/short.png", nil, "", 64); !errors.As(err, &te) {
		t.Errorf("Fetch(cut short) = %v; want a transient error", err)
	}
	if _, _, err := Fetch(ctx, srv.Client(), srv.URL+"/gone.png", nil, "", 64); !errors.As(err, &pe) || pe.Status != 404 {
		t.Errorf("Fetch(gone) = %v; want the vendor's 404", err)
	}
}
