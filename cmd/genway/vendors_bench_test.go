package main

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkMediaJobs runs long-running video jobs through genway serve
// against a fake Veo on Vertex AI that finishes each generation 3 to 4 s
// after its submit (spread so done times fall anywhere between two polls), with
// GENWAY_MEDIA_POLL=1s and clients polling GET /v1/jobs every 50 ms.
// It reports the end-to-end overhead (the completion a polling client
// sees minus the vendor's done time: the wait for the next poll, the
// download and copy, the final write) and the vendor calls per minute of
// generation. Target: overhead under one poll interval plus 200 ms.
//
//	go test ./cmd/genway -run '^$' -bench MediaJobs -benchtime 8x
func BenchmarkMediaJobs(b *testing.B) {
	const poll, gen = time.Second, 3 * time.Second
	veo := fakeVertex(b, 0)
	veo.DoneAfter = func(prompt string) time.Duration { // "clip n": n x 173 ms modulo 1 s later, anywhere between two polls
		var n int
		fmt.Sscanf(prompt, "clip %d", &n)
		return gen + time.Duration(n*173%1000)*time.Millisecond
	}
	env := vertexEnv(veo)
	env["GENWAY_MEDIA_POLL"] = poll.String()
	s := startServer(b, b.TempDir(), env)
	var list struct{ Data []modelRecord }
	if code, _, err := doRequest(s, "GET", "/v1/models?type=video", nil, nil, &list); err != nil || code != 200 {
		b.Fatalf("GET /v1/models = %d, %v", code, err)
	}
	var model string
	for _, m := range list.Data {
		if m.OwnedBy == "vertex" && m.Type == "video" {
			model = m.ID
		}
	}
	if model == "" {
		b.Fatal("no Veo model")
	}
	overheads := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range b.N {
		wg.Add(1)
		go func() { // jobs run side by side, as a product's would
			defer wg.Done()
			var j jobResp
			prompt := fmt.Sprint("clip ", i)
			code, _, err := doRequest(s, "POST", "/v1/jobs", map[string]any{"type": "video", "model": model, "prompt": prompt, "duration": 4}, nil, &j)
			if err != nil || code != 200 {
				b.Errorf("create = %d, %v", code, err)
				return
			}
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				var got jobResp
				if _, _, err := doRequest(s, "GET", "/v1/jobs/"+j.ID, nil, nil, &got); err != nil {
					b.Error(err)
					return
				}
				if got.Status == "completed" {
					overheads[i] = time.Since(veo.DoneAt(prompt))
					return
				}
				if got.Status == "failed" {
					b.Errorf("job failed: %+v", got.Error)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.Error("job not completed within 60 s")
		}()
		time.Sleep(100 * time.Millisecond) // staggered submits
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(overheads, func(i, j int) bool { return overheads[i] < overheads[j] })
	b.ReportMetric(float64(overheads[len(overheads)/2].Milliseconds()), "overhead-p50-ms")
	b.ReportMetric(float64(overheads[len(overheads)-1].Milliseconds()), "overhead-max-ms")
	genMinutes := float64(b.N) * gen.Minutes()
	b.ReportMetric(float64(veo.Calls())/genMinutes, "vendor-calls/gen-min")
}
