package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSpeechTTFB measures the time to the first audio byte of a long
// text (4,096 characters: the most tts-1 takes) whose vendor streams it
// slowly, 1 KB every 50 ms (a fake OpenAI text to speech on loopback):
// asked of the vendor directly, and through genway serve (tts-1 at the
// fake). It also measures the time to the first 5 KB, which a server that
// held the audio back until it had more would delay. Each request is
// dropped once it is measured (the vendor stops). Run it with
//
//	CGO_ENABLED=0 go test -run '^$' -bench SpeechTTFB -benchtime 200x -p 1 ./cmd/genway/
//
// ttfb-p50-ms, ttfb-p99-ms and 5kb-p50-ms are reported per path.
func BenchmarkSpeechTTFB(b *testing.B) {
	fake := fakeOpenAITTS(b, 50*time.Millisecond)
	input := strings.Repeat("A long text, read slowly by a fake vendor. ", 100)[:4096]
	ttsAudio(input, "mp3", true) // made once, before the clock runs
	body, _ := json.Marshal(map[string]any{"model": "tts-1", "input": input, "voice": "alloy", "response_format": "mp3"})
	measure := func(b *testing.B, url, key string) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		var first, fifth []time.Duration
		buf := make([]byte, 64<<10)
		b.ResetTimer()
		for range b.N {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode != 200 {
				msg, _ := io.ReadAll(resp.Body)
				b.Fatalf("POST = %d %s", resp.StatusCode, msg)
			}
			got := 0
			for got < 5*ttsChunk {
				n, err := resp.Body.Read(buf)
				if n > 0 && got == 0 {
					first = append(first, time.Since(start))
				}
				got += n
				if err != nil {
					b.Fatalf("read after %d bytes: %v", got, err)
				}
			}
			fifth = append(fifth, time.Since(start))
			resp.Body.Close() // the client goes away: the vendor stops
		}
		b.StopTimer()
		slices.Sort(first)
		slices.Sort(fifth)
		pct := func(d []time.Duration, p float64) float64 {
			return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(first, 0.5), "ttfb-p50-ms")
		b.ReportMetric(pct(first, 0.99), "ttfb-p99-ms")
		b.ReportMetric(pct(fifth, 0.5), "5kb-p50-ms")
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, fake.srv.URL+"/v1/audio/speech", openAIKey)
	})
	b.Run("genway-serve", func(b *testing.B) {
		s := startServer(b, b.TempDir(), map[string]string{"OPENAI_API_KEY": openAIKey, "OPENAI_BASE_URL": fake.srv.URL + "/v1"})
		measure(b, s.base+"/v1/audio/speech", s.key)
	})
}
