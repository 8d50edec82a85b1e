package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/mototest"
)

// TestAWSBackend runs the quick start of the AWS-backed local mode against
// moto_server: `genway aws init`, then `GENWAY_BACKEND=aws genway serve`
// with the same environment, a job of each type to completion (through the
// emulated SQS event source mapping), settlement through the emulated
// DynamoDB stream mapping, and the operator commands on that backend.
func TestAWSBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	// Not mototest.Serialize: the SQS long poll would hold its single slot.
	endpoint := mototest.Start(t)
	env := map[string]string{
		"GENWAY_BACKEND":        "aws",
		"AWS_ENDPOINT_URL":      endpoint,
		"AWS_REGION":            mototest.Region,
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
		"GENWAY_DEV_CREDITS":    "500",
	}
	// The SDK reads credentials and profiles from the process environment;
	// make sure the machine's own settings cannot leak in.
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	dir := t.TempDir()
	var out bytes.Buffer
	for i := 0; i < 2; i++ { // idempotent
		out.Reset()
		if err := run(t.Context(), []string{"aws", "init"}, testEnv(dir, env), &out, io.Discard); err != nil {
			t.Fatalf("aws init (run %d): %v\n%s", i+1, err, out.String())
		}
	}
	s := startServer(t, dir, env)

	tests := []struct {
		req         map[string]any
		contentType string
		duration    float64
	}{
		{map[string]any{"type": "music", "model": "synthetic-music", "prompt": "tune", "duration": 2}, "audio/mpeg", 2},
		{map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "pop", "duration": 1, "format": "wav"}, "audio/wav", 1},
		{map[string]any{"type": "video", "model": "synthetic-video", "prompt": "ball", "duration": 1, "size": "160x120"}, "video/mp4", 1},
	}
	var spent int64
	for _, tt := range tests {
		var j jobResp
		if code, _ := s.do(t, "POST", "/v1/jobs", tt.req, nil, &j); code != 200 || j.Status != "queued" {
			t.Fatalf("create %v = %d %+v", tt.req, code, j)
		}
		got, seen := s.waitJob(t, j.ID, 60*time.Second)
		if got.Status != "completed" || got.Output == nil || got.Output.ContentType != tt.contentType {
			t.Fatalf("job %s = %+v (statuses %v)", j.ID, got, seen)
		}
		if !strings.HasPrefix(got.Output.URL, endpoint) || !strings.Contains(got.Output.URL, "X-Amz-Signature=") {
			t.Errorf("output url %q is not a presigned S3 link on the endpoint", got.Output.URL)
		}
		checkMedia(t, downloadAny(t, got.Output.URL), tt.contentType, tt.duration)
		spent += int64(tt.duration)
	}
	var failed jobResp
	s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "fail: please", "duration": 3}, nil, &failed)
	if j, _ := s.waitJob(t, failed.ID, 60*time.Second); j.Status != "failed" {
		t.Fatalf("fail: job = %s", j.Status)
	}
	var cr struct{ Balance, Held, Available int64 }
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if (cr.Held == 0 && cr.Balance == 500-spent) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cr.Balance != 500-spent || cr.Held != 0 || cr.Available != 500-spent {
		t.Errorf("credits = %+v; want balance %d, nothing held (settled through the stream)", cr, 500-spent)
	}

	// Operator commands on the AWS backend, while serving.
	out.Reset()
	if err := run(t.Context(), []string{"keys", "create", "--account", "acme", "--credits", "7"}, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	acme := &server{base: s.base, key: lines[len(lines)-1]}
	acme.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if cr.Balance != 7 {
		t.Errorf("new account's credits = %+v; want 7", cr)
	}
	out.Reset()
	if err := run(t.Context(), []string{"credits", "ledger", "--account", "dev"}, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), " capture "); n != 3 {
		t.Errorf("dev ledger has %d captures; want 3:\n%s", n, out.String())
	}
}

// downloadAny fetches a link from any loopback host.
func downloadAny(t *testing.T, url string) []byte {
	t.Helper()
	return downloadFrom(t, url, "http://127.0.0.1:")
}
