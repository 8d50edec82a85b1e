package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestVendorAccountErrorsHidden: a job that ElevenLabs refuses for the
// operator's account (its key, in words that name it) fails with the
// generic message of a provider that failed; the vendor's words reach
// neither GET /v1/jobs/{id}, nor GET /v1/jobs, nor the webhook, only the
// operator's log and the admin API (and so the console).
func TestVendorAccountErrorsHidden(t *testing.T) {
	const vendorWords = "Incorrect API key provided: el-UPSTREAM-7f3a; org org-SECRET-42 has 0 credits left"
	eleven := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"detail": map[string]string{"status": "invalid_api_key", "message": vendorWords}})
	}))
	defer eleven.Close()
	rcv := newHookReceiver(t)
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), map[string]string{"ELEVENLABS_API_KEY": "el-configured-key", "ELEVENLABS_BASE_URL": eleven.URL,
		"GENWAY_WEBHOOK_ALLOW_PRIVATE": "1", "GENWAY_ADMIN_TOKEN": testAdminToken}, logs)
	rcv.setSecrets(secretOf(t, s))

	var j jobResp
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "elevenlabs-sfx", "prompt": "a door", "duration": 2,
		"webhook_url": rcv.url("/ok")}, nil, &j); code != 200 {
		t.Fatalf("POST /v1/jobs = %d", code)
	}
	got, _ := s.waitJob(t, j.ID, 60*time.Second)
	const generic = "The elevenlabs provider failed; no credits were charged."
	if got.Status != "failed" || got.Error == nil || got.Error.Code != "upstream_error" || got.Error.Message != generic {
		t.Fatalf("job = %s %+v; want failed, upstream_error, %q", got.Status, got.Error, generic)
	}
	leaks := func(where, s string) {
		t.Helper()
		for _, w := range []string{"el-UPSTREAM", "org-SECRET", "Incorrect API key", `"vendor"`} {
			if strings.Contains(s, w) {
				t.Errorf("%s contains %q: %s", where, w, s)
			}
		}
	}
	var one, list json.RawMessage
	s.do(t, "GET", "/v1/jobs/"+j.ID, nil, nil, &one)
	s.do(t, "GET", "/v1/jobs", nil, nil, &list)
	leaks("GET /v1/jobs/{id}", string(one))
	leaks("GET /v1/jobs", string(list))
	if !strings.Contains(string(list), generic) {
		t.Errorf("GET /v1/jobs = %s; want the job with the generic message", list)
	}
	ds := rcv.waitFor(t, eventID(j.ID), 1, 60*time.Second)
	leaks("the webhook's data", string(ds[0].event.Data))
	if ds[0].event.Type != "job.failed" || !strings.Contains(string(ds[0].event.Data), generic) {
		t.Errorf("webhook %s %s; want job.failed with the generic message", ds[0].event.Type, ds[0].event.Data)
	}

	// The operator sees the vendor's words: the admin API (which the
	// console's pages share the store with) and the log.
	admin := &server{base: s.base, key: testAdminToken}
	var aj json.RawMessage
	if code, _ := admin.do(t, "GET", "/admin/v1/jobs/"+j.ID, nil, nil, &aj); code != 200 || !strings.Contains(string(aj), "el-UPSTREAM-7f3a") {
		t.Errorf("GET /admin/v1/jobs/{id} = %d %s; want the vendor's words for the operator", code, aj)
	}
	if !strings.Contains(logs.String(), "el-UPSTREAM-7f3a") {
		t.Error("the log lacks the vendor's words")
	}
}
