package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// Prices in the fallback catalog: veo-3.1 at 40 credits/s, its fallback
// fal-video-8s at 7/s; an 8-second job holds the higher, 320, and is
// charged the price of the model that made it.
const (
	veoPrice8s = 320
	falPrice8s = 56
)

// fallbackCatalog writes the default catalog with one change: veo-3.1
// falls back to fal-video-8s, a fal model that makes what Veo makes at 8 s
// (1280x720 among its sizes), at 7 credits/s. It returns the file's path
// (for GENWAY_CATALOG).
func fallbackCatalog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../shared/catalog/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Providers []json.RawMessage `json:"providers"`
		Models    []map[string]any  `json:"models"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range c.Models {
		if m["id"] == "veo-3.1" {
			m["fallbacks"], found = []string{"fal-video-8s"}, true
		}
	}
	if !found {
		t.Fatal("the default catalog has no veo-3.1")
	}
	c.Models = append(c.Models, map[string]any{
		"id": "fal-video-8s", "type": "video", "provider": "fal", "upstream": "fal-ai/test-video/text-to-video", "created": 1,
		"formats": []string{"mp4"}, "max_duration": 8, "default_duration": 8, "durations": []int{4, 6, 8},
		"sizes": []string{"1280x720", "720x1280"}, "default_size": "1280x720",
		"input": map[string]any{"prompt": "prompt", "duration": "duration", "aspect_ratio": "aspect_ratio"},
		"price": map[string]any{"credits_per_second": 7},
	})
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJobFallbackEndToEnd: a Veo job whose Veo quota on Vertex AI is used
// up (429 RESOURCE_EXHAUSTED with a daily QuotaFailure at submit)
// completes on its fal fallback through genway serve: one submit to each
// vendor (the one Vertex AI refused, the one fal took), served_by naming
// the fal model, the highest price held while it ran and fal's price
// charged, the rest released, and the job counted in the job usage under
// the fal model at fal's price (none under veo-3.1).
func TestJobFallbackEndToEnd(t *testing.T) {
	veo, fal := fakeVertex(t, 1), fakeFal(t, 1)
	env := vertexEnv(veo)
	env["GENWAY_CATALOG"], env["GENWAY_MEDIA_POLL"], env["GENWAY_ADMIN_TOKEN"] = fallbackCatalog(t), "1s", testAdminToken
	env["FAL_KEY"], env["FAL_BASE_URL"], env["GENWAY_MEDIA_ALLOW_PRIVATE"] = vendorKeys["FAL_KEY"], fal.srv.URL, "1"
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), env, logs)
	before := waitSettled(t, s)

	var j jobResp
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": "veo-3.1", "prompt": "quota: a fox in the snow"}, nil, &j); code != 200 {
		t.Fatalf("create = %d", code)
	}
	// The first poll of fal comes a poll interval (1 s) after its submit:
	// the job is still running, its hold the higher price.
	var cr balance
	s.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if cr.Held != veoPrice8s*credits.Credit {
		t.Errorf("held while the job runs = %s; want %d (the highest price among veo-3.1 and its fallback)", cr.Held, veoPrice8s)
	}
	got, statuses := s.waitJob(t, j.ID, 60*time.Second)
	if got.Status != "completed" || got.Model != "veo-3.1" || got.ServedBy != "fal-video-8s" || got.Output == nil || got.Output.ContentType != "video/mp4" {
		t.Fatalf("job = %+v (statuses %v); want completed, model veo-3.1, served_by fal-video-8s, a video", got, statuses)
	}
	if data := download(t, got.Output.URL); len(data) != len(testVideo()) {
		t.Errorf("output is %d bytes; want fal's %d-byte video", len(data), len(testVideo()))
	}
	veoTaken, _, _ := veo.Counts()
	falTaken, _ := fal.counts()
	if veo.Quota() != 1 || veoTaken != 0 || falTaken != 1 {
		t.Errorf("Veo refused %d and took %d submits, fal took %d; want one submit to each (Veo's refused)", veo.Quota(), veoTaken, falTaken)
	}
	after := waitSettled(t, s)
	if before.Balance-after.Balance != falPrice8s*credits.Credit || after.Held != 0 {
		t.Errorf("credits %+v -> %+v; want fal's price %d charged, the rest of the %d hold released", before, after, falPrice8s, veoPrice8s)
	}
	var list struct {
		Data []jobResp `json:"data"`
	}
	s.do(t, "GET", "/v1/jobs", nil, nil, &list)
	if len(list.Data) != 1 || list.Data[0].ServedBy != "fal-video-8s" {
		t.Errorf("GET /v1/jobs = %+v; want the job served by fal-video-8s", list.Data)
	}
	usage := adminJobUsage(t, s)
	if got := usage["fal-video-8s"]; got != [2]int64{1, falPrice8s} || len(usage) != 1 {
		t.Errorf("job usage (jobs, credits) by model = %v; want fal-video-8s %v alone", usage, [2]int64{1, falPrice8s})
	}
	noSecrets(t, "the server log", logs.String())
}

// adminJobUsage returns the job usage rows of GET /admin/v1/usage by
// model: jobs, credits.
func adminJobUsage(t *testing.T, s *server) map[string][2]int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/admin/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			Kind    string `json:"kind"`
			Model   string `json:"model"`
			Jobs    int64  `json:"jobs"`
			Credits int64  `json:"credits"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /admin/v1/usage = %d, %v", resp.StatusCode, err)
	}
	out := map[string][2]int64{}
	for _, u := range list.Data {
		if u.Kind != "chat" {
			v := out[u.Model]
			out[u.Model] = [2]int64{v[0] + u.Jobs, v[1] + u.Credits}
		}
	}
	return out
}

// TestJobKeyPoolEndToEnd: a job's submit takes its key from the
// provider's pool through the router, and its polls and the result's read
// run with the key that submitted it (Handle.KeyID, route.WithKey), not
// the pool's first: with FAL_KEY a refused key, then the good one, the
// submit with the refused key is answered 401, the good key takes the
// job at once in the same run, and every later call to fal is accepted.
func TestJobKeyPoolEndToEnd(t *testing.T) {
	fal := fakeFal(t, 2)
	env := map[string]string{"GENWAY_MEDIA_POLL": "1s", "FAL_BASE_URL": fal.srv.URL, "GENWAY_MEDIA_ALLOW_PRIVATE": "1",
		"FAL_KEY": "fal-refused-key-0000000000," + vendorKeys["FAL_KEY"]}
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), env, logs)
	var j jobResp
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": "kling-2.5-turbo", "prompt": "a fox"}, nil, &j); code != 200 {
		t.Fatalf("create = %d", code)
	}
	got, statuses := s.waitJob(t, j.ID, 60*time.Second)
	if got.Status != "completed" || got.ServedBy != "kling-2.5-turbo" {
		t.Fatalf("job = %+v (statuses %v); want completed by kling-2.5-turbo", got, statuses)
	}
	submits, badAuth := fal.counts()
	if submits != 1 || badAuth != 1 {
		t.Errorf("fal took %d submits and refused %d calls; want one submit, one refusal (the refused key's submit; none of the polls)", submits, badAuth)
	}
	noSecrets(t, "the server log", logs.String())
	if strings.Contains(logs.String(), "fal-refused-key") {
		t.Error("the server log contains the refused key")
	}
}
