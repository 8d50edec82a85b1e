package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/metrics"
)

// TestMetrics: requests through NewMux are counted by route and status,
// with their latency; GET /metrics needs the operator token.
func TestMetrics(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	gw := syntheticGateway(t)
	v := admin.NewVerifier("gwop_metricsmetricsmetricsmetrics")
	h := NewMux(log,
		Route{Method: "POST", Pattern: "/v1/chat/completions", Handler: withPrincipal(ChatCompletions(gw, log))},
		Route{Method: "GET", Pattern: "/metrics", Handler: Metrics(metrics.Default, v, log)})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 3 {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"synthetic/echo","messages":[{"role":"user","content":"a b"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get := func(auth string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := get(""); status != 401 {
		t.Errorf("metrics without the token: %d; want 401", status)
	}
	if status, _ := get("Bearer sk_live_notanoperatortokennotanoperatortoken"); status != 401 {
		t.Errorf("metrics with an API key: %d; want 401", status)
	}
	status, body := get("Bearer gwop_metricsmetricsmetricsmetrics")
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	for _, want := range []string{
		`genway_http_requests_total{route="POST /v1/chat/completions",status="200"}`,
		`genway_http_request_seconds_count{route="POST /v1/chat/completions"}`,
		`genway_chat_tokens_total{model="synthetic/echo",kind="completion"}`,
		`genway_upstream_seconds_count{provider="synthetic",outcome="ok"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestEMF: on Lambda the access log line is an Embedded Metric Format
// record.
func TestEMF(t *testing.T) {
	attrs := emf("POST /v1/jobs", 503, 0)
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).LogAttrs(t.Context(), slog.LevelInfo, "request", attrs...)
	for _, want := range []string{`"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Route"]]`, `"Namespace":"Genway"`, `"Route":"POST /v1/jobs"`, `"Requests":1`, `"Errors5xx":1`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("EMF line %s lacks %s", b.String(), want)
		}
	}
}
