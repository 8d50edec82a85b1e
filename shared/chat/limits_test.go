package chat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// imageServer serves a small PNG after delay, counting fetches and the
// most at once.
type imageServer struct {
	srv          *httptest.Server
	fetches      atomic.Int32
	mu           sync.Mutex
	inFlight, hi int
}

func newImageServer(t *testing.T, png []byte, delay time.Duration) *imageServer {
	s := &imageServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		s.inFlight++
		s.hi = max(s.hi, s.inFlight)
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func imagesBody(model string, urls []string) string {
	parts := []string{`{"type":"text","text":"look"}`}
	for _, u := range urls {
		parts = append(parts, `{"type":"image_url","image_url":{"url":"`+u+`"}}`)
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
}

func byteGateway(t *testing.T, cfg chat.Config) (*chat.Gateway, *fakeProvider) {
	prov := &fakeProvider{needsBytes: true}
	if cfg.Catalog == nil {
		cfg.Catalog = mustCatalog(t)
	}
	cfg.Providers = map[string]chat.Provider{"synthetic": prov}
	cfg.Images = chat.NewImageFetcher(chat.ImageFetcherConfig{Allow: allowLoopback})
	return chat.NewGateway(cfg), prov
}

// TestImageLimits: more images, or more image bytes, than a request may
// carry is a 400 naming the image that crosses the line.
func TestImageLimits(t *testing.T) {
	png := pngBytes(t, 8, 8)
	uri := dataURI("image/png", png)
	tests := []struct {
		name      string
		cfg       chat.Config
		urls      []string
		wantParam string
	}{
		{"count", chat.Config{MaxImages: 2}, []string{uri, uri, uri}, "messages[0].content[3]"},
		{"data URI bytes together", chat.Config{MaxRequestImageBytes: 2*len(png) + 1}, []string{uri, uri, uri}, "messages[0].content[3]"},
		{"within the limits", chat.Config{MaxImages: 3, MaxRequestImageBytes: 3 * len(png)}, []string{uri, uri, uri}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, _ := byteGateway(t, tt.cfg)
			err := gw.Run(context.Background(), "acct", params(t, imagesBody("synthetic/thinker", tt.urls)), &sink{})
			e := apierr.As(err)
			switch {
			case tt.wantParam == "" && err != nil:
				t.Fatalf("Run = %v; want nil", err)
			case tt.wantParam != "" && (e == nil || e.Param != tt.wantParam || e.Kind != apierr.Invalid):
				t.Fatalf("Run = %v; want a 400 naming %s", err, tt.wantParam)
			}
		})
	}
}

// TestFetchedImageBytesTogether: fetched images count toward the
// request's byte cap.
func TestFetchedImageBytesTogether(t *testing.T) {
	png := pngBytes(t, 8, 8)
	srv := newImageServer(t, png, 0)
	gw, prov := byteGateway(t, chat.Config{MaxRequestImageBytes: 2*len(png) + 1})
	urls := []string{srv.srv.URL + "/a.png", srv.srv.URL + "/b.png", srv.srv.URL + "/c.png"}
	err := gw.Run(context.Background(), "acct", params(t, imagesBody("synthetic/thinker", urls)), &sink{})
	// Fetched side by side: the image that crosses the line is whichever
	// arrives last.
	if e := apierr.As(err); e == nil || e.Code != "invalid_value" || !strings.HasPrefix(e.Param, "messages[0].content[") || !strings.Contains(e.Message, "larger than") {
		t.Fatalf("Run = %v; want a 400 naming the image that crossed the budget", err)
	}
	if len(prov.got) != 0 {
		t.Error("the provider was called")
	}
}

// TestImageFetchDeadline: slow image servers share one deadline, fetched a
// few at a time: the request fails within the deadline, not after one
// per image.
func TestImageFetchDeadline(t *testing.T) {
	png := pngBytes(t, 8, 8)
	srv := newImageServer(t, png, 2*time.Second)
	gw, _ := byteGateway(t, chat.Config{ImageFetchTimeout: 300 * time.Millisecond})
	urls := make([]string, 8)
	for i := range urls {
		urls[i] = srv.srv.URL + "/slow.png"
	}
	start := time.Now()
	err := gw.Run(context.Background(), "acct", params(t, imagesBody("synthetic/thinker", urls)), &sink{})
	if e := apierr.As(err); e == nil || e.Code != "invalid_image_url" || !strings.Contains(e.Message, "in time") {
		t.Fatalf("Run = %v; want a 400: did not answer in time", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("failed after %v; want about the 300 ms deadline", el)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.hi > 4 {
		t.Errorf("%d fetches at once; want at most 4", srv.hi)
	}
}

// TestAdmitBeforeFetch: an account with no credits asking a priced vision
// model is refused before any image is fetched.
func TestAdmitBeforeFetch(t *testing.T) {
	cat, err := catalog.Parse([]byte(`{"providers":[{"name":"synthetic","kind":"synthetic"}],"models":[
		{"id":"synthetic/eye","type":"chat","provider":"synthetic","capabilities":{"vision":true,"streaming":true},
		 "price":{"credits_per_million_input_tokens":1000}}]}`), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	srv := newImageServer(t, pngBytes(t, 8, 8), 0)
	broke := balancesFunc(func(ctx context.Context, id string) (credits.Account, error) {
		return credits.Account{ID: id, Balance: 0, Available: 0}, nil
	})
	gw, _ := byteGateway(t, chat.Config{Catalog: cat, Balances: broke})
	err = gw.Run(context.Background(), "acct", params(t, imagesBody("synthetic/eye", []string{srv.srv.URL + "/a.png"})), &sink{})
	if e := apierr.As(err); e == nil || e.Code != "insufficient_credits" {
		t.Fatalf("Run = %v; want 402 insufficient_credits", err)
	}
	if n := srv.fetches.Load(); n != 0 {
		t.Errorf("%d images fetched for a refused request; want none", n)
	}
}

type balancesFunc func(ctx context.Context, id string) (credits.Account, error)

func (f balancesFunc) Account(ctx context.Context, id string) (credits.Account, error) {
	return f(ctx, id)
}
