package main

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkJobs measures, through the HTTP API of an in-process `genway
// serve` on the embedded store: POST /v1/jobs latency (p50, p99) at 8
// concurrent clients, and how many jobs per second the whole pipeline
// completes (create, worker, synthetic 1-second sfx mp3, settlement).
//
//	go test ./cmd/genway -run '^$' -bench Jobs -benchtime 400x
func BenchmarkJobs(b *testing.B) {
	s := startServer(b, b.TempDir(), map[string]string{"GENWAY_DEV_CREDITS": "100000000"})
	const clients = 8
	lat := make([]time.Duration, 0, b.N)
	ids := make([]string, 0, b.N)
	var mu sync.Mutex
	next := make(chan int, b.N)
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				var j jobResp
				code, _, err := doRequest(s, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": fmt.Sprint("beep ", i), "duration": 1}, nil, &j)
				d := time.Since(t0)
				if err != nil || code != 200 {
					b.Errorf("create: %d %v", code, err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				ids = append(ids, j.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	// Wait for the last job; the worker takes them in order, roughly.
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for {
			var j jobResp
			doRequest(s, "GET", "/v1/jobs/"+id, nil, nil, &j)
			if j.Status == "completed" || j.Status == "failed" {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s not done in 5 minutes", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	total := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "create-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "create-p99-ms")
	b.ReportMetric(float64(len(ids))/created.Seconds(), "creates/s")
	b.ReportMetric(float64(len(ids))/total.Seconds(), "completed/s")
}
