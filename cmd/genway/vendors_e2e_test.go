package main

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// modelRecord is a job model of GET /v1/models.
type modelRecord struct {
	ID              string   `json:"id"`
	Type            string   `json:"type"`
	OwnedBy         string   `json:"owned_by"`
	Formats         []string `json:"formats"`
	DefaultDuration int      `json:"default_duration"`
	Durations       []int    `json:"durations"`
	Price           *struct {
		PerSecond credits.Amount `json:"credits_per_second"`
		PerJob    credits.Amount `json:"credits_per_job"`
	} `json:"price"`
}

// credits is what a job of duration seconds costs (catalog.Price.JobCost).
func (m modelRecord) credits(duration int) credits.Amount {
	return m.Price.PerJob + m.Price.PerSecond*credits.Amount(duration)
}

func listModels(t *testing.T, s *server) []modelRecord {
	t.Helper()
	var list struct {
		Data []modelRecord `json:"data"`
	}
	if code, _ := s.do(t, "GET", "/v1/models", nil, nil, &list); code != 200 {
		t.Fatalf("GET /v1/models = %d", code)
	}
	return list.Data
}

type balance struct{ Balance, Held, Available credits.Amount }

// waitSettled polls the credits until nothing is held.
func waitSettled(t *testing.T, s *server) balance {
	t.Helper()
	var cr balance
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Held == 0 || time.Now().After(deadline) {
			return cr
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestKillWhilePolling SIGKILLs genway serve while a Veo job is being
// polled; after a restart on the same data directory the job completes,
// submitted once and charged once.
func TestKillWhilePolling(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real server")
	}
	veo := fakeVertex(t, 4)
	env := vertexEnv(veo)
	env["GENWAY_MEDIA_POLL"] = "1s"
	dir := t.TempDir()
	s, cmd := startProcess(t, dir, env)
	var model string
	for _, m := range listModels(t, s) {
		if m.OwnedBy == "vertex" && m.Type == "video" {
			model = m.ID
			break
		}
	}
	if model == "" {
		t.Fatal("no Veo model listed with GOOGLE_VERTEX_CREDENTIALS set")
	}
	before := waitSettled(t, s)
	var j jobResp
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": model, "prompt": "a ball", "duration": 4}, nil, &j); code != 200 {
		t.Fatalf("create = %d", code)
	}
	// Kill once the vendor has been polled (the job is mid-generation).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if veo.Polls() >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the vendor was never polled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	s2, _ := startProcess(t, dir, env)
	got, statuses := s2.waitJob(t, j.ID, 60*time.Second)
	if got.Status != "completed" {
		t.Fatalf("job after restart = %+v (statuses %v); want completed", got, statuses)
	}
	if submits, _, _ := veo.Counts(); submits != 1 {
		t.Errorf("submitted %d times across the kill; want once", submits)
	}
	after := waitSettled(t, s2)
	var price credits.Amount
	for _, m := range listModels(t, s2) {
		if m.ID == model {
			price = m.credits(got.Input.Duration)
		}
	}
	if before.Balance-after.Balance != price || after.Held != 0 {
		t.Errorf("credits %+v -> %+v; want the job's price %s charged once", before, after, price)
	}
	t.Logf("killed after the first poll; completed after restart with %d polls in all, 1 submit", veo.Polls())
}
