package images_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/images/imagestest"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
)

// serviceCatalog: "lead" (5 credits an image, up to 4) falls back to
// "cheap" (2 an image, up to 4) and then "single" (1 an image, one at a
// time: it cannot serve n > 1).
const serviceCatalog = `{"providers": [{"name": "a", "kind": "synthetic"}, {"name": "b", "kind": "synthetic"}, {"name": "c", "kind": "synthetic"}],
 "models": [
  {"id": "lead", "type": "image", "provider": "a", "sizes": ["64x64"], "default_size": "64x64", "max_images": 4, "formats": ["png"],
   "fallbacks": ["cheap", "single"], "price": {"credits_per_image": 5}},
  {"id": "cheap", "type": "image", "provider": "b", "sizes": ["64x64"], "default_size": "64x64", "max_images": 4, "formats": ["png"],
   "price": {"credits_per_image": 2}},
  {"id": "single", "type": "image", "provider": "c", "sizes": ["64x64"], "default_size": "64x64", "max_images": 1, "formats": ["png"],
   "price": {"credits_per_image": 1}},
  {"id": "a/echo", "type": "chat", "provider": "a"}
 ]}`

// fakeProvider answers with fn, counting its calls.
type fakeProvider struct {
	calls atomic.Int32
	fn    func(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error)
}

func (f *fakeProvider) Generate(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
	f.calls.Add(1)
	return f.fn(ctx, m, p)
}

// makes answers n images ("img-0", ...), the number asked for if n is 0.
func makes(n int) func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
	return func(_ context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
		k := n
		if k == 0 {
			k = p.N
		}
		out := &images.Output{}
		for i := range k {
			out.Images = append(out.Images, images.Image{Data: []byte(fmt.Sprintf("%s-img-%d", m.ID, i)), ContentType: "image/png"})
		}
		return out, nil
	}
}

func fails(err error) func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
	return func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) { return nil, err }
}

type rig struct {
	svc     *images.Service
	credits *imagestest.Credits
	media   *imagestest.Media
	a, b, c *fakeProvider
}

// newRig is a rig whose account holds balance whole credits.
func newRig(t *testing.T, balance int64) *rig {
	t.Helper()
	cat, err := catalog.Parse([]byte(serviceCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{credits: imagestest.NewCredits(map[string]credits.Amount{"acct": credits.Amount(balance) * credits.Credit}), media: &imagestest.Media{},
		a: &fakeProvider{fn: makes(0)}, b: &fakeProvider{fn: makes(0)}, c: &fakeProvider{fn: makes(0)}}
	r.svc = &images.Service{Catalog: cat, Providers: map[string]images.Provider{"a": r.a, "b": r.b, "c": r.c},
		Router:  route.New(route.Policy{Backoff: time.Millisecond, NoBreakers: true}, nil),
		Credits: r.credits, Media: r.media}
	return r
}

// balance checks the account's position: balance as given (whole
// credits), nothing held.
func (r *rig) balance(t *testing.T, credits int64) {
	t.Helper()
	a, err := r.credits.Account(context.Background(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	if want := cr * cred(credits); a.Balance != want || a.Held != 0 || a.Available != want {
		t.Errorf("account %+v; want balance %s, nothing held", a, want)
	}
}

// cr is one credit; cred converts a count of them.
const cr = credits.Credit

type cred = credits.Amount

// settled checks that every reservation in the ledger was settled once,
// and returns the kinds of the settlements in order.
func (r *rig) settled(t *testing.T) []string {
	t.Helper()
	reserved, kinds := 0, []string{}
	for _, e := range r.credits.Ledger() {
		if e.Kind == credits.Reservation {
			reserved++
		} else {
			kinds = append(kinds, e.Kind)
		}
	}
	if reserved != len(kinds) {
		t.Errorf("%d reservations, %d settlements", reserved, len(kinds))
	}
	return kinds
}

func TestGenerateB64(t *testing.T) {
	r := newRig(t, 100)
	res, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "a cat", N: ptr(3)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "lead" || len(res.Data) != 3 || res.Charged != 15*cr || res.Size != "64x64" || res.OutputFormat != "png" {
		t.Errorf("result %+v; want 3 images by lead for 15 credits", res)
	}
	for i, d := range res.Data {
		b, err := base64.StdEncoding.DecodeString(d.B64JSON)
		if err != nil || string(b) != fmt.Sprintf("lead-img-%d", i) || d.URL != "" {
			t.Errorf("data[%d] = %+v; want lead-img-%d in base64", i, d, i)
		}
	}
	r.balance(t, 85)
	if got := r.settled(t); len(got) != 1 || got[0] != credits.Capture {
		t.Errorf("settlements %v; want one capture", got)
	}
	if u := r.credits.Usage("acct", "image", "lead"); u != 15*cr {
		t.Errorf("image usage of lead %d; want 15", u)
	}
	if r.b.calls.Load()+r.c.calls.Load() != 0 {
		t.Error("a fallback was called though the lead answered")
	}
}

// TestGenerateURL: a url answer stores each image under
// images/<account>/<id>-<i>.<ext> and links it; no bytes are answered.
func TestGenerateURL(t *testing.T) {
	r := newRig(t, 100)
	res, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "a cat", N: ptr(2), ResponseFormat: ptr("url")})
	if err != nil {
		t.Fatal(err)
	}
	files := r.media.Files()
	if len(files) != 2 || len(res.Data) != 2 {
		t.Fatalf("stored %d files, answered %d; want 2 and 2", len(files), len(res.Data))
	}
	for i, d := range res.Data {
		key := fmt.Sprintf("images/acct/%s-%d.png", res.ID, i)
		f, ok := files[key]
		if !ok || string(f.Data) != fmt.Sprintf("lead-img-%d", i) || f.ContentType != "image/png" {
			t.Errorf("file %s = %+v (stored: %v)", key, f, ok)
		}
		if d.B64JSON != "" || d.URL != "https://media.test/"+key+"?ttl=3600" {
			t.Errorf("data[%d] = %+v; want the link to %s", i, d, key)
		}
	}
	r.balance(t, 90)
}

// TestNothingChargedOnFailure: a request refused before any vendor call,
// a prompt the vendor refuses, a vendor that keeps failing, and links
// that cannot be stored all cost nothing, and leave nothing held.
func TestNothingChargedOnFailure(t *testing.T) {
	policy := &jobs.ProviderError{Code: jobs.CodeContentPolicy, Status: 400, Message: "Your request was rejected by the safety system."}
	tests := []struct {
		name     string
		req      images.Request
		a, b, c  error // each provider's failure; nil: it answers
		putErr   error
		wantCode string // the apierr code, or "" for a VendorError
		wantKind string // the VendorError's: "content_policy" or "transient"
		calls    [3]int32
	}{
		{"bad request", images.Request{Model: "lead", Prompt: ""}, nil, nil, nil, nil, "missing_field", "", [3]int32{0, 0, 0}},
		{"unknown model", images.Request{Model: "nope", Prompt: "p"}, nil, nil, nil, nil, "model_not_found", "", [3]int32{0, 0, 0}},
		{"a chat model", images.Request{Model: "a/echo", Prompt: "p"}, nil, nil, nil, nil, "model_type_mismatch", "", [3]int32{0, 0, 0}},
		{"refused prompt: no fallback", images.Request{Model: "lead", Prompt: "p"}, policy, nil, nil, nil, "", "content_policy", [3]int32{1, 0, 0}},
		{"every vendor down", images.Request{Model: "lead", Prompt: "p"},
			&jobs.TransientError{Status: 503, Err: errors.New("down")}, &jobs.TransientError{Status: 503, Err: errors.New("down")},
			&jobs.TransientError{Status: 503, Err: errors.New("down")}, nil, "", "transient", [3]int32{3, 3, 3}},
		{"links not stored", images.Request{Model: "lead", Prompt: "p", ResponseFormat: ptr("url")}, nil, nil, nil,
			errors.New("disk full"), "", "", [3]int32{1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, 100)
			for _, x := range []struct {
				p   *fakeProvider
				err error
			}{{r.a, tt.a}, {r.b, tt.b}, {r.c, tt.c}} {
				if x.err != nil {
					x.p.fn = fails(x.err)
				}
			}
			r.media.PutErr = tt.putErr
			res, err := r.svc.Generate(context.Background(), "acct", &tt.req)
			if err == nil {
				t.Fatalf("Generate = %+v; want an error", res)
			}
			var ve *images.VendorError
			switch {
			case tt.wantCode != "":
				if e := apierr.As(err); e == nil || e.Code != tt.wantCode {
					t.Errorf("Generate = %v; want %s", err, tt.wantCode)
				}
			case tt.wantKind == "content_policy":
				var pe *jobs.ProviderError
				if !errors.As(err, &ve) || !errors.As(err, &pe) || pe.Code != jobs.CodeContentPolicy || ve.Model != "lead" {
					t.Errorf("Generate = %v; want lead's content_policy VendorError", err)
				}
			case tt.wantKind == "transient":
				var te *jobs.TransientError
				var ae *route.AttemptsError
				if !errors.As(err, &ve) || !errors.As(err, &te) || !errors.As(err, &ae) || len(ae.Attempts) != 9 {
					t.Errorf("Generate = %v; want a transient VendorError after 9 attempts", err)
				}
			}
			if got := [3]int32{r.a.calls.Load(), r.b.calls.Load(), r.c.calls.Load()}; got != tt.calls {
				t.Errorf("vendor calls %v; want %v", got, tt.calls)
			}
			r.balance(t, 100)
			for _, k := range r.settled(t) {
				if k != credits.Release {
					t.Errorf("a %s settlement; want releases only", k)
				}
			}
			// A request that reached a vendor leaves a failed record, with
			// its release; one refused before, none.
			recs := r.credits.Records()
			called := tt.calls != [3]int32{}
			if called != (len(recs) == 1) || len(recs) > 1 {
				t.Fatalf("records %+v; want one if a vendor was called (%v)", recs, called)
			}
			if called {
				if rec := recs[0]; rec.Status != credits.StatusFailed || rec.Cost != 0 || rec.Kind != credits.KindImage || rec.ModelAsked != "lead" || rec.Attempts == "" || rec.At == 0 {
					t.Errorf("record %+v; want a failed image request of lead, no cost, its attempts", rec)
				}
			}
		})
	}
}

// TestInsufficientCredits: a request the account cannot pay is a 402
// saying the price and what the account has; no vendor is called.
func TestInsufficientCredits(t *testing.T) {
	r := newRig(t, 9)
	_, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p", N: ptr(2)})
	e := apierr.As(err)
	if e == nil || e.Kind != apierr.InsufficientQuota || !strings.Contains(e.Message, "up to 10 credits") || !strings.Contains(e.Message, "9 available") {
		t.Errorf("Generate = %v; want a 402 naming the 10 credits and the 9 available", err)
	}
	if r.a.calls.Load() != 0 || len(r.credits.Ledger()) != 0 {
		t.Error("a vendor was called or credits were written")
	}
	r.balance(t, 9)
}

// TestFallbackChargedAtItsPrice: the lead fails, its first fallback
// answers: the hold is the highest price among the candidates that can
// serve the request (single cannot make 2 images and is left out, never
// called), and the charge the fallback's price.
func TestFallbackChargedAtItsPrice(t *testing.T) {
	r := newRig(t, 100)
	r.a.fn = fails(&jobs.TransientError{Status: 503, Err: errors.New("overloaded")})
	res, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p", N: ptr(2)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "cheap" || res.Charged != 4*cr || route.FormatAttempts(res.Attempts) != "lead=503, lead=503, lead=503, cheap=200" {
		t.Errorf("result by %s for %s credits, attempts %s; want cheap, 4 credits, lead's 3 failures first", res.Model, res.Charged, route.FormatAttempts(res.Attempts))
	}
	var hold, charge credits.Entry
	for _, e := range r.credits.Ledger() {
		switch e.Kind {
		case credits.Reservation:
			hold = e
		case credits.Capture:
			charge = e
		}
	}
	if hold.Amount != 10*cr || charge.Amount != 4*cr || charge.Hold != 10*cr || charge.Model != "cheap" || charge.JobType != "image" {
		t.Errorf("held %+v, captured %+v; want 10 held (lead's price), 4 captured for cheap", hold, charge)
	}
	if r.c.calls.Load() != 0 {
		t.Error("single, which cannot make 2 images, was called")
	}
	r.balance(t, 96)
	if u := r.credits.Usage("acct", "image", "cheap"); u != 4*cr {
		t.Errorf("usage of cheap %d; want 4", u)
	}
	// The record, with the settlement: the answer's id, 2 images at 2
	// credits, the cost captured.
	recs := r.credits.Records()
	if len(recs) != 1 {
		t.Fatalf("records %+v; want one", recs)
	}
	if rec := recs[0]; rec.ID != res.ID || rec.Kind != credits.KindImage || rec.Account != "acct" || rec.ModelAsked != "lead" || rec.Model != "cheap" ||
		rec.Units != 2 || rec.UnitPrice != 2*cr || rec.Cost != res.Charged || rec.Status != credits.StatusCompleted ||
		rec.Attempts != "lead=503, lead=503, lead=503, cheap=200" || rec.At/1000 != charge.At {
		t.Errorf("record %+v; want %s: cheap's 2 images at 2, costing what was captured, at the capture's second", rec, res.ID)
	}
}

// TestFewerImagesChargedPerImage: a vendor that makes fewer images than
// asked (a safety checker dropped some) is charged for those it made.
func TestFewerImagesChargedPerImage(t *testing.T) {
	r := newRig(t, 100)
	r.a.fn = makes(1)
	res, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p", N: ptr(3)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 1 || res.Charged != 5*cr {
		t.Errorf("%d images for %s credits; want 1 for 5", len(res.Data), res.Charged)
	}
	r.balance(t, 95)
}

// TestGarbageAnswer: an answer with more images than asked, an empty one,
// or one of a type no image may have (an SVG, HTML) is the vendor's
// failure, not charged; it is Final (no retry).
func TestGarbageAnswer(t *testing.T) {
	for _, fn := range []func(context.Context, *catalog.Model, *images.Params) (*images.Output, error){
		makes(3),
		func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
			return &images.Output{Images: []images.Image{{ContentType: "image/png"}}}, nil
		},
		func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
			return &images.Output{}, nil
		},
		func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
			return &images.Output{Images: []images.Image{{ContentType: "image/svg+xml", Data: []byte("<svg onload=alert(1)/>")}}}, nil
		},
		func(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
			return &images.Output{Images: []images.Image{{ContentType: "text/html", Data: []byte("<script>alert(1)</script>")}}}, nil
		},
	} {
		r := newRig(t, 100)
		r.a.fn = fn
		if _, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p", N: ptr(2)}); err == nil {
			t.Error("Generate = nil; want the vendor's failure")
		}
		r.balance(t, 100)
	}
}

// TestAttemptDeadline: an attempt that outlives its model's deadline is
// abandoned as a timeout (Transient), and the request moves on.
func TestAttemptDeadline(t *testing.T) {
	r := newRig(t, 100)
	m, _ := r.svc.Catalog.Model("lead")
	m.DeadlineSeconds = 1
	r.a.fn = func(ctx context.Context, _ *catalog.Model, _ *images.Params) (*images.Output, error) {
		<-ctx.Done() // the attempt's deadline: the test waits for it, bounded by the model's
		return nil, fmt.Errorf("fake: %w", ctx.Err())
	}
	res, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "cheap" || !strings.HasPrefix(route.FormatAttempts(res.Attempts), "lead=timeout") {
		t.Errorf("answered by %s after %s; want cheap after lead's timeouts", res.Model, route.FormatAttempts(res.Attempts))
	}
}

// TestParallelNeverOverdraws: many parallel requests on an account that
// can pay for a few: those past its credits are refused (402) before any
// vendor call, and the account never goes below zero.
func TestParallelNeverOverdraws(t *testing.T) {
	const balance, requests = 10, 24
	r := newRig(t, balance)
	release := make(chan struct{})
	r.a.fn = func(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
		select { // every request reserves while the first ones are still drawing
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return makes(0)(ctx, m, p)
	}
	var wg sync.WaitGroup
	var ok, short atomic.Int32
	errs := make(chan error, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "cheap", Prompt: "p", N: ptr(3)})
			switch e := apierr.As(err); {
			case err == nil:
				ok.Add(1)
			case e != nil && e.Kind == apierr.InsufficientQuota:
				short.Add(1)
				if ok.Load()+short.Load() == requests-balance/6 {
					close(release)
				}
			default:
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// cheap costs 2 an image: 6 a request, so one request fits in 10
	// credits while another holds 6.
	if ok.Load() < 1 || int64(ok.Load())*6 > balance || ok.Load()+short.Load() != requests {
		t.Errorf("%d answered, %d refused; want at most %d answered, the rest refused", ok.Load(), short.Load(), balance/6)
	}
	if calls := r.b.calls.Load(); calls != ok.Load() {
		t.Errorf("%d vendor calls for %d answers", calls, ok.Load())
	}
	r.balance(t, balance-int64(ok.Load())*6)
}

// TestClientGone: a client that goes away while the vendor draws gets
// nothing and pays nothing; the reservation is released all the same.
func TestClientGone(t *testing.T) {
	r := newRig(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	r.a.fn = func(ctx context.Context, _ *catalog.Model, _ *images.Params) (*images.Output, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if _, err := r.svc.Generate(ctx, "acct", &images.Request{Model: "lead", Prompt: "p"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Generate = %v; want context.Canceled", err)
	}
	r.balance(t, 100)
	r.settled(t)
}

// TestVendorErrorNamesProvider: the error of a failed request names the
// model and provider, so that httpapi can say which provider failed.
func TestVendorErrorNamesProvider(t *testing.T) {
	r := newRig(t, 100)
	r.a.fn = fails(&jobs.ProviderError{Code: jobs.CodeUpstream, Status: http.StatusBadRequest, Message: "bad size"})
	_, err := r.svc.Generate(context.Background(), "acct", &images.Request{Model: "lead", Prompt: "p"})
	var ve *images.VendorError
	var ae *route.AttemptsError
	if !errors.As(err, &ve) || ve.Provider != "a" || ve.Model != "lead" || !errors.As(err, &ae) || route.FormatAttempts(ae.Attempts) != "lead=400" {
		t.Errorf("Generate = %#v; want lead's VendorError after one 400", err)
	}
}

func ptr[T any](v T) *T { return &v }
