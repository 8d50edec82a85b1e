package metrics

import (
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	r := New()
	r.Add("genway_requests_total", "Requests.", []string{"route", "status"}, []string{"POST /v1/jobs", "200"}, 1)
	r.Add("genway_requests_total", "Requests.", []string{"route", "status"}, []string{"POST /v1/jobs", "200"}, 1)
	r.Add("genway_requests_total", "Requests.", []string{"route", "status"}, []string{`GET "x"`, "404"}, 1)
	r.Observe("genway_request_seconds", "Latency.", []string{"route"}, []string{"POST /v1/jobs"}, 0.02)
	r.Observe("genway_request_seconds", "Latency.", []string{"route"}, []string{"POST /v1/jobs"}, 7)
	r.Gauge("genway_queue_depth", "Jobs waiting.", nil, func() []Sample { return []Sample{{Value: 3}} })
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE genway_requests_total counter",
		`genway_requests_total{route="POST /v1/jobs",status="200"} 2`,
		`genway_requests_total{route="GET \"x\"",status="404"} 1`,
		"# TYPE genway_request_seconds histogram",
		`genway_request_seconds_bucket{route="POST /v1/jobs",le="0.025"} 1`,
		`genway_request_seconds_bucket{route="POST /v1/jobs",le="5"} 1`,
		`genway_request_seconds_bucket{route="POST /v1/jobs",le="10"} 2`,
		`genway_request_seconds_bucket{route="POST /v1/jobs",le="+Inf"} 2`,
		`genway_request_seconds_sum{route="POST /v1/jobs"} 7.02`,
		`genway_request_seconds_count{route="POST /v1/jobs"} 2`,
		"# TYPE genway_queue_depth gauge",
		"genway_queue_depth 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
}
