package lambdahttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/transport/httpapi"
)

func loadEvent(t *testing.T, name string) events.APIGatewayProxyRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return ev
}

func TestRequest(t *testing.T) {
	tests := []struct {
		name      string
		ev        events.APIGatewayProxyRequest
		method    string
		uri       string
		body      string
		header    map[string][]string
		requestID string
	}{
		{
			name:   "captured GET with multi-value query",
			ev:     loadEvent(t, "get_job.json"),
			method: "GET", uri: "/v1/jobs/job_123?a=1&a=2&b=x",
			header:    map[string][]string{"Authorization": {"Bearer sk_live_test"}, "Accept": {"application/json", "text/plain"}},
			requestID: "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
		},
		{
			name: "single-value fields only",
			ev: events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/v1/jobs", Body: `{"a":1}`,
				Headers:               map[string]string{"Content-Type": "application/json"},
				QueryStringParameters: map[string]string{"type": "music"}},
			method: "POST", uri: "/v1/jobs?type=music", body: `{"a":1}`,
			header: map[string][]string{"Content-Type": {"application/json"}},
		},
		{
			name: "base64 body",
			ev: events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/v1/x", IsBase64Encoded: true,
				Body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 'z'})},
			method: "POST", uri: "/v1/x", body: "\x00\x01\x02z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := lambdahttp.Request(context.Background(), tt.ev)
			if err != nil {
				t.Fatalf("Request() error = %v", err)
			}
			if r.Method != tt.method || r.URL.RequestURI() != tt.uri {
				t.Errorf("Request() = %s %s; want %s %s", r.Method, r.URL.RequestURI(), tt.method, tt.uri)
			}
			b, _ := io.ReadAll(r.Body)
			if string(b) != tt.body || r.ContentLength != int64(len(tt.body)) {
				t.Errorf("Request() body = %q (length %d); want %q", b, r.ContentLength, tt.body)
			}
			for k, want := range tt.header {
				if got := r.Header.Values(k); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("Request() header %s = %q; want %q", k, got, want)
				}
			}
			if got := httpapi.RequestID(r.Context()); got != tt.requestID {
				t.Errorf("RequestID(ctx) = %q; want %q", got, tt.requestID)
			}
		})
	}
	if _, err := lambdahttp.Request(context.Background(), events.APIGatewayProxyRequest{Path: "/", IsBase64Encoded: true, Body: "%%%"}); err == nil {
		t.Errorf("Request(bad base64) error = nil; want an error")
	}
}

func TestProxy(t *testing.T) {
	tests := []struct {
		name       string
		h          http.HandlerFunc
		status     int
		body       string
		base64     bool
		header     string
		headerVals []string
	}{
		{
			name: "json",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Add("Set-Cookie", "a=1")
				w.Header().Add("Set-Cookie", "b=2")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":"`+httpapi.RequestID(r.Context())+`"}`)
			},
			status: 201, body: `{"id":"c6af9ac6-7b61-11e6-9a41-93e8deadbeef"}`,
			header: "Set-Cookie", headerVals: []string{"a=1", "b=2"},
		},
		{
			name: "binary is base64",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "audio/mpeg")
				w.Write([]byte{0xff, 0xfb, 0})
			},
			status: 200, body: base64.StdEncoding.EncodeToString([]byte{0xff, 0xfb, 0}), base64: true,
		},
		{
			name:   "no body",
			h:      func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
			status: 204,
		},
		{
			name:   "content type sniffed",
			h:      func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") },
			status: 200, body: "hello", header: "Content-Type", headerVals: []string{"text/plain; charset=utf-8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := lambdahttp.Proxy(tt.h)(context.Background(), loadEvent(t, "get_job.json"))
			if err != nil {
				t.Fatalf("Proxy() error = %v", err)
			}
			if res.StatusCode != tt.status || res.Body != tt.body || res.IsBase64Encoded != tt.base64 {
				t.Errorf("Proxy() = %d %q base64=%v; want %d %q base64=%v", res.StatusCode, res.Body, res.IsBase64Encoded, tt.status, tt.body, tt.base64)
			}
			if tt.header != "" {
				if got := res.MultiValueHeaders[tt.header]; strings.Join(got, "|") != strings.Join(tt.headerVals, "|") {
					t.Errorf("Proxy() header %s = %q; want %q", tt.header, got, tt.headerVals)
				}
			}
		})
	}
}

// splitPrelude reads a streaming response as the Lambda runtime does and
// splits the API Gateway prelude (JSON, then 8 NUL bytes) from the body.
func splitPrelude(t *testing.T, r io.Reader, bodyBytes int) (map[string]any, string) {
	t.Helper()
	var all []byte
	buf := make([]byte, 512)
	for i := 0; i < 10000; i++ {
		n, err := r.Read(buf)
		all = append(all, buf[:n]...)
		if j := bytes.Index(all, make([]byte, 8)); j >= 0 && len(all)-j-8 >= bodyBytes {
			var prelude map[string]any
			if err := json.Unmarshal(all[:j], &prelude); err != nil {
				t.Fatalf("prelude %q: %v", all[:j], err)
			}
			return prelude, string(all[j+8:])
		}
		if err != nil {
			t.Fatalf("read stream: %v after %q", err, all)
		}
	}
	t.Fatal("stream never produced the prelude")
	return nil, ""
}

func TestStreamIsIncremental(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	res, err := lambdahttp.Stream(h)(context.Background(), loadEvent(t, "get_job.json"))
	if err != nil {
		t.Fatalf("Stream() error = %v", err)
	}
	// The handler is blocked before its second event: whatever we read now
	// was sent before the handler finished.
	prelude, first := splitPrelude(t, res, len("data: one\n\n"))
	if first != "data: one\n\n" {
		t.Errorf("first body bytes = %q; want %q", first, "data: one\n\n")
	}
	if got := prelude["statusCode"]; got != float64(200) {
		t.Errorf("prelude statusCode = %v; want 200", got)
	}
	mv, _ := prelude["multiValueHeaders"].(map[string]any)
	if ct, _ := mv["Content-Type"].([]any); len(ct) != 1 || ct[0] != "text/event-stream" {
		t.Errorf("prelude Content-Type = %v; want [text/event-stream]", mv["Content-Type"])
	}
	close(release)
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(res, buf, len("data: two\n\n"))
	if err != nil || string(buf[:n]) != "data: two\n\n" {
		t.Errorf("second read = %q, %v; want %q", buf[:n], err, "data: two\n\n")
	}
	res.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the response did not cancel the handler's context")
	}
}

func TestStreamStatusAndErrors(t *testing.T) {
	tests := []struct {
		name   string
		h      http.HandlerFunc
		status int
		body   string
	}{
		{
			name: "non-stream json error",
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":{}}`)
			},
			status: 401, body: `{"error":{}}`,
		},
		{
			name:   "handler writes nothing",
			h:      func(w http.ResponseWriter, r *http.Request) {},
			status: 200, body: "",
		},
		{
			name:   "panic before writing",
			h:      func(w http.ResponseWriter, r *http.Request) { panic("boom") },
			status: 500, body: `{"error":{"code":"internal_error","message":"Internal error.","param":null,"type":"api_error"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := lambdahttp.Stream(tt.h)(context.Background(), loadEvent(t, "get_job.json"))
			if err != nil {
				t.Fatalf("Stream() error = %v", err)
			}
			defer res.Close()
			b, err := io.ReadAll(res)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			i := bytes.Index(b, make([]byte, 8))
			if i < 0 {
				t.Fatalf("no prelude separator in %q", b)
			}
			var prelude struct {
				StatusCode int `json:"statusCode"`
			}
			json.Unmarshal(b[:i], &prelude)
			if prelude.StatusCode != tt.status || string(b[i+8:]) != tt.body {
				t.Errorf("Stream() = %d %q; want %d %q", prelude.StatusCode, b[i+8:], tt.status, tt.body)
			}
		})
	}
}

func TestStreamDeadlineBeforeHeaders(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := lambdahttp.Stream(h)(ctx, loadEvent(t, "get_job.json")); err == nil {
		t.Errorf("Stream(cancelled ctx) = %v, nil; want an error", res)
	}
}
