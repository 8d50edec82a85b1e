package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genway/genway/shared/jobs"
)

// TestVendorWordsOnlyForTheOperator: a job that failed for the operator's
// account at its vendor shows its client the generic message (GET, list
// and webhook render the same view); the vendor's words, which name the
// operator's key or balance, are in the admin API's view only.
func TestVendorWordsOnlyForTheOperator(t *testing.T) {
	const secret = "Incorrect API key provided: el-UPSTREAM-1234"
	j := &jobs.Job{ID: "job_sfx_x", Account: "acme", Type: jobs.TypeSFX, Model: "elevenlabs-sfx", Status: jobs.Failed,
		Error: jobs.FailureOf("elevenlabs", jobs.StatusError("submit", 401, nil, jobs.Refusal{Message: secret}))}
	hook, err := JobObject(&jobs.Service{})(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"GET /v1/jobs/{id}": viewJob(j, ""), "webhook data": hook} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "el-UPSTREAM") || strings.Contains(string(b), `"vendor"`) ||
			!strings.Contains(string(b), `"message":"The elevenlabs provider failed; no credits were charged."`) {
			t.Errorf("%s = %s; want the generic message, without the vendor's words", name, b)
		}
	}
	a, err := viewAdminJob(httptest.NewRequest("GET", "/admin/v1/jobs/"+j.ID, nil), &jobs.Service{}, j)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(a); !strings.Contains(string(b), `"vendor":"`+secret) {
		t.Errorf("admin view = %s; want the vendor's words for the operator", b)
	}
}
