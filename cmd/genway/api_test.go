package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// raw sends a request as given and returns status, headers and body.
func raw(t *testing.T, method, url, auth, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestAPIErrors(t *testing.T) {
	s := startServer(t, t.TempDir(), nil)
	bearer := "Bearer " + s.key
	big := `{"type":"sfx","model":"synthetic-sfx","prompt":"` + strings.Repeat("a", 6<<20) + `"}`
	textBig := `{"type":"sfx","model":"synthetic-sfx","prompt":"` + strings.Repeat("a", 3<<20) + `"}`
	tests := []struct {
		name, method, path, auth, ctype, body string
		status                                int
		typ, code, param                      string
	}{
		{"no auth", "GET", "/v1/models", "", "", "", 401, "authentication_error", "invalid_api_key", ""},
		{"wrong scheme", "GET", "/v1/models", "Basic " + s.key, "", "", 401, "authentication_error", "invalid_api_key", ""},
		{"wrong prefix", "GET", "/v1/models", "Bearer sk_test_testtesttesttesttesttesttesttest0001", "", "", 401, "authentication_error", "invalid_api_key", ""},
		{"unknown key", "GET", "/v1/models", "Bearer sk_live_testtesttesttesttesttesttesttest9999", "", "", 401, "authentication_error", "invalid_api_key", ""},
		{"unknown route", "GET", "/v1/nothing", bearer, "", "", 404, "not_found_error", "route_not_found", ""},
		{"method not allowed", "DELETE", "/v1/jobs", bearer, "", "", 405, "invalid_request_error", "method_not_allowed", ""},
		{"bad json", "POST", "/v1/jobs", bearer, "application/json", `{"type":`, 400, "invalid_request_error", "invalid_json", ""},
		{"not an object", "POST", "/v1/jobs", bearer, "application/json", `[1,2]`, 400, "invalid_request_error", "invalid_json", ""},
		{"wrong media type", "POST", "/v1/jobs", bearer, "text/plain", `{}`, 415, "invalid_request_error", "unsupported_media_type", ""},
		{"too large", "POST", "/v1/jobs", bearer, "application/json", big, 413, "invalid_request_error", "request_too_large", ""},
		{"a job past the text limit", "POST", "/v1/jobs", bearer, "application/json", textBig, 413, "invalid_request_error", "request_too_large", ""},
		{"a chat without images past the text limit", "POST", "/v1/chat/completions", bearer, "application/json",
			`{"model":"synthetic/echo","messages":[{"role":"user","content":"` + strings.Repeat("a", 3<<20) + `"}]}`, 413, "invalid_request_error", "request_too_large", ""},
		{"missing type", "POST", "/v1/jobs", bearer, "application/json", `{"model":"synthetic-sfx","prompt":"x"}`, 400, "invalid_request_error", "missing_field", "type"},
		{"duration string", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"synthetic-sfx","prompt":"x","duration":"5"}`, 400, "invalid_request_error", "invalid_type", "duration"},
		{"duration fraction", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"synthetic-sfx","prompt":"x","duration":2.5}`, 400, "invalid_request_error", "invalid_type", "duration"},
		{"unknown field", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"synthetic-sfx","prompt":"x","lenght":3}`, 400, "invalid_request_error", "unknown_parameter", "lenght"},
		{"unknown model", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"nope","prompt":"x"}`, 404, "not_found_error", "model_not_found", "model"},
		{"type mismatch", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"synthetic-video","prompt":"x"}`, 400, "invalid_request_error", "model_type_mismatch", "model"},
		{"foreign field", "POST", "/v1/jobs", bearer, "application/json", `{"type":"sfx","model":"synthetic-sfx","prompt":"x","size":"64x64"}`, 400, "invalid_request_error", "invalid_value", "size"},
		{"malformed job id", "GET", "/v1/jobs/nope", bearer, "", "", 404, "not_found_error", "job_not_found", ""},
		{"unknown job id", "GET", "/v1/jobs/job_music_aaaaaaaaaaaaaaaaaaaa", bearer, "", "", 404, "not_found_error", "job_not_found", ""},
		{"bad model filter", "GET", "/v1/models?type=hologram", bearer, "", "", 400, "invalid_request_error", "invalid_value", "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := raw(t, tt.method, s.base+tt.path, tt.auth, tt.ctype, tt.body)
			if status != tt.status {
				t.Fatalf("%s %s = %d %s; want %d", tt.method, tt.path, status, body, tt.status)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
			if hdr.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id header")
			}
			var e apiError
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("body %s is not the error envelope: %v", body, err)
			}
			if e.Error.Type != tt.typ || e.Error.Code == nil || *e.Error.Code != tt.code {
				t.Errorf("error = %s; want type %s code %s", body, tt.typ, tt.code)
			}
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Errorf("param = %v; want %q", e.Error.Param, tt.param)
			}
			if !bytes.Contains(body, []byte(`"param":`)) {
				t.Errorf("envelope %s lacks param", body)
			}
			if tt.status == 405 && hdr.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestIdempotencyAndOwnership(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, nil)
	req := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "click", "duration": 1}
	var a, b jobResp
	s.do(t, "POST", "/v1/jobs", req, map[string]string{"Idempotency-Key": "k1"}, &a)
	s.do(t, "POST", "/v1/jobs", req, map[string]string{"Idempotency-Key": "k1"}, &b)
	if a.ID == "" || a.ID != b.ID {
		t.Fatalf("same Idempotency-Key gave jobs %q and %q; want one", a.ID, b.ID)
	}
	var e apiError
	other := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "clack", "duration": 1}
	if code, _ := s.do(t, "POST", "/v1/jobs", other, map[string]string{"Idempotency-Key": "k1"}, &e); code != 409 || *e.Error.Code != "idempotency_key_reused" {
		t.Errorf("reused key with another body = %d %+v; want 409", code, e)
	}

	// Another account's key cannot see the job.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "create", "--account", "other", "--credits", "5"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatalf("keys create while serving: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	otherKey := lines[len(lines)-1]
	o := &server{base: s.base, key: otherKey}
	if code, _ := o.do(t, "GET", "/v1/jobs/"+a.ID, nil, nil, &e); code != 404 || *e.Error.Code != "job_not_found" {
		t.Errorf("other account GET = %d; want 404 job_not_found", code)
	}
	// The other account has 5 credits: a 10-second sfx is refused with 402.
	big := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "x", "duration": 10}
	if code, _ := o.do(t, "POST", "/v1/jobs", big, nil, &e); code != 402 || e.Error.Type != "insufficient_quota" || *e.Error.Code != "insufficient_credits" {
		t.Errorf("over-budget create = %d %+v; want 402 insufficient_credits", code, e)
	}
	// It says what the job costs and what the account has.
	if !strings.Contains(e.Error.Message, "costs 10 credits") || !strings.Contains(e.Error.Message, "5 available") {
		t.Errorf("402 message = %q; want the cost (10) and the available credits (5)", e.Error.Message)
	}
	var cr struct {
		Object                   string
		Balance, Held, Available int64
	}
	o.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if cr.Object != "credits" || cr.Balance != 5 || cr.Held != 0 || cr.Available != 5 {
		t.Errorf("credits after refused create = %+v; want balance 5, nothing held", cr)
	}

	// Revoking the key stops it within the cache TTL (5 s locally).
	out.Reset()
	if err := run(t.Context(), []string{"keys", "revoke", otherKey[:12]}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatalf("keys revoke while serving: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := o.do(t, "GET", "/v1/models", nil, nil, nil)
		if code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked key still works after 10 s (status %d)", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestCreditsCaptureAndRelease(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"GENWAY_DEV_CREDITS": "20"})
	credits := func() (bal, held, avail int64) {
		var cr struct{ Balance, Held, Available int64 }
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		return cr.Balance, cr.Held, cr.Available
	}
	var ok, bad jobResp
	s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "beep", "duration": 3}, nil, &ok)
	s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "fail: on purpose", "duration": 4}, nil, &bad)
	okJ, _ := s.waitJob(t, ok.ID, 30*time.Second)
	badJ, seen := s.waitJob(t, bad.ID, 30*time.Second)
	if okJ.Status != "completed" {
		t.Fatalf("job %s = %s", ok.ID, okJ.Status)
	}
	if badJ.Status != "failed" || badJ.Error == nil || badJ.Error.Code != "upstream_error" || badJ.Output != nil {
		t.Fatalf("fail: job = %+v (statuses %v); want failed upstream_error", badJ, seen)
	}
	// Settlement runs from the change feed: wait until nothing is held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		bal, held, avail := credits()
		if held == 0 {
			if bal != 17 || avail != 17 {
				t.Fatalf("credits = balance %d available %d; want 17 (20 - 3 for the completed job, failed job free)", bal, avail)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("credits still held after 10 s: %d", held)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"credits", "ledger", "--account", "dev"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Count(got, "capture") != 1 || strings.Count(got, "release") != 1 {
		t.Errorf("ledger =\n%s\nwant one capture and one release", got)
	}
}
