package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/chat"
)

// BenchmarkVisionMemory measures the peak heap of 4 parallel vision
// requests that each name n image URLs answering 5 MiB (the per-image
// cap), for a provider that needs image bytes: with the per-request limits
// (200 URLs: refused at once, past 16 images; 16 URLs: refused when the
// fetched images pass 20 MiB together, about the 5th)
// and without them (every image fetched and held, as before the limits).
//
//	go test ./shared/chat -run '^$' -bench VisionMemory -benchtime 1x
func BenchmarkVisionMemory(b *testing.B) {
	big := make([]byte, chat.DefaultMaxImageBytes)
	copy(big, pngBytes(b, 8, 8)) // a PNG header: sniffed as an image
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(big)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		images int
		cfg    chat.Config
	}{
		{"limited-200-urls", 200, chat.Config{}},
		{"limited-16-urls", 16, chat.Config{}},
		{"unlimited-40-urls", 40, chat.Config{MaxImages: 1000, MaxRequestImageBytes: 1 << 40, ImageFetchTimeout: time.Minute}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			urls := make([]string, tc.images)
			for i := range urls {
				urls[i] = fmt.Sprintf("%s/%d.png", srv.URL, i)
			}
			body := imagesBody("synthetic/thinker", urls)
			for b.Loop() {
				runtime.GC()
				var base runtime.MemStats
				runtime.ReadMemStats(&base)
				peak := base.HeapInuse
				stop := make(chan struct{})
				var sampler sync.WaitGroup
				sampler.Add(1)
				go func() {
					defer sampler.Done()
					var m runtime.MemStats
					for {
						select {
						case <-stop:
							return
						case <-time.After(5 * time.Millisecond):
						}
						runtime.ReadMemStats(&m)
						peak = max(peak, m.HeapInuse)
					}
				}()
				var wg sync.WaitGroup
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						prov := &fakeProvider{needsBytes: true}
						cfg := tc.cfg
						cfg.Catalog = mustCatalog(b)
						cfg.Providers = map[string]chat.Provider{"synthetic": prov}
						cfg.Images = chat.NewImageFetcher(chat.ImageFetcherConfig{Allow: allowLoopback})
						gw := chat.NewGateway(cfg)
						var p chat.Params
						if err := json.Unmarshal([]byte(body), &p); err != nil {
							b.Error(err)
							return
						}
						gw.Run(context.Background(), "acct", &p, &sink{})
					}()
				}
				wg.Wait()
				close(stop)
				sampler.Wait()
				b.ReportMetric(float64(peak-base.HeapInuse)/(1<<20), "peak-heap-MiB")
			}
		})
	}
}
