package speech

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images/imagestest"
	"github.com/genway/genway/shared/route"
)

// providerFunc is a Provider made of a function.
type providerFunc func(ctx context.Context, c *Call) (io.ReadCloser, error)

func (f providerFunc) Speak(ctx context.Context, c *Call) (io.ReadCloser, error) { return f(ctx, c) }

// body is a vendor's audio: chunks, one per read, then err (nil: io.EOF);
// with block, after the chunks it waits for its context instead.
type body struct {
	ctx    context.Context
	chunks [][]byte
	err    error
	block  bool
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	if len(b.chunks) > 0 {
		n := copy(p, b.chunks[0])
		if b.chunks[0] = b.chunks[0][n:]; len(b.chunks[0]) == 0 {
			b.chunks = b.chunks[1:]
		}
		return n, nil
	}
	if b.block {
		<-b.ctx.Done()
		return 0, chat.TransportError(b.ctx, "fake", "read audio", context.Cause(b.ctx))
	}
	if b.err != nil {
		return 0, b.err
	}
	return 0, io.EOF
}

func (b *body) Close() error { b.closed = true; return nil }

// vendor is a fake vendor: it counts its calls and answers each with
// answer (which may look at the call).
type vendor struct {
	mu     sync.Mutex
	calls  []*Call
	answer func(ctx context.Context, c *Call) (io.ReadCloser, error)
}

func (v *vendor) Speak(ctx context.Context, c *Call) (io.ReadCloser, error) {
	v.mu.Lock()
	v.calls = append(v.calls, c)
	v.mu.Unlock()
	return v.answer(ctx, c)
}

func (v *vendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.calls)
}

// audio answers the chunks, in order, one per read.
func audio(chunks ...string) func(ctx context.Context, c *Call) (io.ReadCloser, error) {
	return func(ctx context.Context, c *Call) (io.ReadCloser, error) {
		b := &body{ctx: ctx}
		for _, s := range chunks {
			b.chunks = append(b.chunks, []byte(s))
		}
		return b, nil
	}
}

// status refuses every call with the vendor's HTTP status.
func status(code int) func(ctx context.Context, c *Call) (io.ReadCloser, error) {
	return func(ctx context.Context, c *Call) (io.ReadCloser, error) {
		return nil, chat.StatusError("fake", code, http.Header{}, "refused", fmt.Errorf("HTTP %d", code))
	}
}

// recorder is the client: it records the answer and each write; with
// failAt > 0, the write of that number fails (the client has gone).
type recorder struct {
	answer *Answer
	writes []string
	failAt int
	order  []string // "begin", "write"
}

func (r *recorder) Begin(a Answer) error {
	r.answer = &a
	r.order = append(r.order, "begin")
	return nil
}

func (r *recorder) Write(p []byte) (int, error) {
	r.order = append(r.order, "write")
	if r.failAt > 0 && len(r.writes)+1 == r.failAt {
		return 0, errors.New("write: broken pipe")
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) body() string { return strings.Join(r.writes, "") }

// fakeCredits is the in-memory credits store with reservations of the
// image tests (imagestest.Credits: strict about settlements, as the stores
// are), with the checks of these tests.
type fakeCredits struct{ *imagestest.Credits }

// cr is one credit.
const cr = credits.Credit

func newCredits(account string, balance credits.Amount) *fakeCredits {
	return &fakeCredits{imagestest.NewCredits(map[string]credits.Amount{account: balance})}
}

// check checks the account's position, and that every reservation was
// settled exactly once: nothing left held.
func (f *fakeCredits) check(t *testing.T, account string, balance credits.Amount) {
	t.Helper()
	a, err := f.Account(context.Background(), account)
	if err != nil || a.Balance != balance || a.Held != 0 || a.Available != balance {
		t.Errorf("account %s: %+v, %v; want balance %s, nothing held", account, a, err, balance)
	}
	settled := map[string]int{}
	ledger := f.Ledger()
	for _, e := range ledger {
		if rid, ok := credits.ReservationOf(e.ID); ok {
			settled[rid]++
		}
	}
	for _, e := range ledger {
		if e.Kind == credits.Reservation && settled[e.ID] != 1 {
			t.Errorf("reservation %s settled %d times; want once", e.ID, settled[e.ID])
		}
	}
}

// settlements returns the ledger's settlements, "<kind> <amount>/<hold>
// <job type> <model>", in order.
func (f *fakeCredits) settlements() []string {
	var out []string
	for _, e := range f.Ledger() {
		if e.Kind != credits.Reservation {
			out = append(out, fmt.Sprintf("%s %s/%s %s %s", e.Kind, e.Amount, e.HeldAmount(), e.JobType, e.Model))
		}
	}
	return out
}

// env is a Service over the test catalog with the three vendors (a: the
// OpenAI-like "oai", b: "eleven", c: "syn" and "fixed") and credits.
type env struct {
	svc     *Service
	a, b, c *vendor
	credits *fakeCredits
}

func newEnv(t *testing.T, balance credits.Amount, p route.Policy) *env {
	e := &env{a: &vendor{answer: audio("A1", "A2")}, b: &vendor{answer: audio("B1", "B2")}, c: &vendor{answer: audio("C1", "C2")},
		credits: newCredits("acct", balance)}
	if p.Backoff == 0 {
		p.Backoff = time.Millisecond
	}
	e.svc = &Service{Catalog: mustCatalog(t), Providers: map[string]Provider{"a": e.a, "b": e.b, "c": e.c},
		Router: route.New(p, nil), Credits: e.credits}
	return e
}

// "hello world": 11 characters; oai costs 50 per 1k (0.55 credits),
// eleven 200 (2.2), syn 100 (1.1): a request to oai holds 2.2.
var hello = Request{Model: "oai", Input: "hello world", Voice: "alloy"}

// TestSpeakStreams: the audio reaches the client as it arrives, each read
// written (and flushed) by itself after the answer began; the model that
// answered is charged, once.
func TestSpeakStreams(t *testing.T) {
	e := newEnv(t, 100*cr, route.Policy{})
	e.a.answer = audio("ID3", "frame1", "frame2", "frame3")
	w := &recorder{}
	r := hello
	r.ResponseFormat = "wav"
	if err := e.svc.Speak(context.Background(), "acct", &r, w); err != nil {
		t.Fatalf("Speak = %v", err)
	}
	if got := strings.Join(w.writes, "|"); got != "ID3|frame1|frame2|frame3" {
		t.Errorf("writes = %q; want each read written by itself, in order", got)
	}
	if strings.Join(w.order, " ") != "begin write write write write" {
		t.Errorf("client saw %v; want begin, then the writes", w.order)
	}
	want := Answer{ID: w.answer.ID, Model: "oai", Format: "wav", ContentType: "audio/wav", Attempts: []route.Attempt{{Model: "oai", Outcome: "200"}}, Cost: 550_000}
	if fmt.Sprint(*w.answer) != fmt.Sprint(want) || !strings.HasPrefix(w.answer.ID, "speech_") {
		t.Errorf("answer = %+v; want %+v, an id speech_..., the cost before the audio", *w.answer, want)
	}
	if got := e.a.calls[0]; got.Voice != "alloy" || got.Format != "wav" || got.Input != "hello world" {
		t.Errorf("vendor called with %+v", *got)
	}
	if got := e.credits.settlements(); fmt.Sprint(got) != "[capture 0.55/2.2 speech oai]" {
		t.Errorf("settlements = %v; want the capture of oai's price (0.55) of the 2.2 held", got)
	}
	e.credits.check(t, "acct", 99_450_000)
	// The record, with the capture: the answer's id, 11 characters at 50
	// per 1,000, the 0.55 captured.
	recs := e.credits.Records()
	if len(recs) != 1 {
		t.Fatalf("records = %+v; want one", recs)
	}
	if rec := recs[0]; rec.ID != w.answer.ID || rec.Kind != "speech" || rec.Model != "oai" || rec.Units != 11 || rec.UnitPrice != 50*cr ||
		rec.Cost != 550_000 || rec.Status != "completed" || rec.Attempts != "oai=200" || rec.FirstTokenMS > rec.LatencyMS {
		t.Errorf("record = %+v; want oai's 11 characters at 50 per 1,000, costing 0.55, completed", rec)
	}
}

// TestSpeakFallbackBeforeFirstByte: every failure before the first audio
// byte moves on to the next candidate, unseen by the client, which gets
// the fallback's audio; the fallback's price is charged.
func TestSpeakFallbackBeforeFirstByte(t *testing.T) {
	tests := []struct {
		name     string
		lead     func(ctx context.Context, c *Call) (io.ReadCloser, error)
		attempts string
	}{
		{"503", status(503), "oai=503, oai=503, oai=503, eleven=200"},
		{"404", status(404), "oai=404, eleven=200"},
		{"401", status(401), "oai=401, eleven=200"},
		{"dropped before any byte", func(ctx context.Context, c *Call) (io.ReadCloser, error) {
			return &body{ctx: ctx, err: chat.TransportError(ctx, "fake", "read audio", io.ErrUnexpectedEOF)}, nil
		}, "oai=dropped, oai=dropped, oai=dropped, eleven=200"},
		{"a bare read error", func(ctx context.Context, c *Call) (io.ReadCloser, error) {
			return &body{ctx: ctx, err: errors.New("connection reset")}, nil
		}, "oai=dropped, oai=dropped, oai=dropped, eleven=200"},
		{"no audio at all", audio(), "oai=empty, oai=empty, oai=empty, eleven=200"},
		{"stalled", func(ctx context.Context, c *Call) (io.ReadCloser, error) {
			return &body{ctx: ctx, block: true}, nil
		}, "oai=stall, oai=stall, oai=stall, eleven=200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A stall is cut at FirstToken (the blocked body never
			// answers), and retried as a transient failure.
			e := newEnv(t, 100*cr, route.Policy{FirstToken: 20 * time.Millisecond, MaxWait: time.Second})
			e.a.answer = tt.lead
			w := &recorder{}
			if err := e.svc.Speak(context.Background(), "acct", &hello, w); err != nil {
				t.Fatalf("Speak = %v", err)
			}
			if w.body() != "B1B2" || w.answer.Model != "eleven" {
				t.Errorf("client got %q from %s; want the fallback's B1B2", w.body(), w.answer.Model)
			}
			if got := route.FormatAttempts(w.answer.Attempts); got != tt.attempts {
				t.Errorf("attempts = %s; want %s", got, tt.attempts)
			}
			if c := e.b.calls[0]; c.Voice != "AAAAAAAAAAAAAAAAAAAA" || c.Model.ID != "eleven" {
				t.Errorf("fallback called with voice %q on %s; want alloy mapped to AAAAAAAAAAAAAAAAAAAA", c.Voice, c.Model.ID)
			}
			if got := e.credits.settlements(); fmt.Sprint(got) != "[capture 2.2/2.2 speech eleven]" {
				t.Errorf("settlements = %v; want eleven's price (2.2) captured", got)
			}
			e.credits.check(t, "acct", 97_800_000)
		})
	}
}

// TestSpeakNoFallbackAfterFirstByte: once audio reached the client, a
// vendor failure ends the response (the error says Committed), no other
// candidate is tried, and nothing is charged.
func TestSpeakNoFallbackAfterFirstByte(t *testing.T) {
	e := newEnv(t, 100*cr, route.Policy{})
	e.a.answer = func(ctx context.Context, c *Call) (io.ReadCloser, error) {
		return &body{ctx: ctx, chunks: [][]byte{[]byte("A1")}, err: chat.TransportError(ctx, "fake", "read audio", io.ErrUnexpectedEOF)}, nil
	}
	w := &recorder{}
	err := e.svc.Speak(context.Background(), "acct", &hello, w)
	var ae *route.AttemptsError
	if !errors.As(err, &ae) || !Committed(err) {
		t.Fatalf("Speak = %v; want a committed *route.AttemptsError", err)
	}
	if w.body() != "A1" || e.a.count() != 1 || e.b.count()+e.c.count() != 0 {
		t.Errorf("client got %q; calls: lead %d, fallbacks %d; want A1 from one call to the lead and none elsewhere", w.body(), e.a.count(), e.b.count()+e.c.count())
	}
	if got := e.credits.settlements(); fmt.Sprint(got) != "[release 2.2/2.2 speech oai]" {
		t.Errorf("settlements = %v; want the 2.2 held released", got)
	}
	e.credits.check(t, "acct", 100*cr)
	wantRecord(t, e.credits.Credits, "upstream_error", "oai", 0)
}

// wantRecord checks the one record written with a settlement: its
// status, model and cost.
func wantRecord(t *testing.T, c *imagestest.Credits, status, model string, cost credits.Amount) {
	t.Helper()
	recs := c.Records()
	if len(recs) != 1 {
		t.Fatalf("records = %+v; want one", recs)
	}
	if r := recs[0]; r.Status != status || r.Model != model || r.Cost != cost || r.Kind != "speech" || r.ModelAsked != "oai" || r.Partial != (status == "client_closed" || status == "upstream_error") {
		t.Errorf("record = %+v; want status %s, model %q, cost %s", r, status, model, cost)
	}
}

// TestSpeakClientGone: a client that leaves after the audio began is
// charged (the vendor took the whole text); one that leaves before the
// first byte is not.
func TestSpeakClientGone(t *testing.T) {
	t.Run("after the first byte", func(t *testing.T) {
		e := newEnv(t, 100*cr, route.Policy{})
		e.a.answer = audio("A1", "A2", "A3")
		w := &recorder{failAt: 2}
		err := e.svc.Speak(context.Background(), "acct", &hello, w)
		if !Committed(err) || e.b.count() != 0 {
			t.Fatalf("Speak = %v (fallback calls %d); want a committed error, no fallback", err, e.b.count())
		}
		if got := e.credits.settlements(); fmt.Sprint(got) != "[capture 0.55/2.2 speech oai]" {
			t.Errorf("settlements = %v; want oai's price captured", got)
		}
		e.credits.check(t, "acct", 99_450_000)
		wantRecord(t, e.credits.Credits, "client_closed", "oai", 550_000)
	})
	t.Run("cancelled after the first byte", func(t *testing.T) {
		e := newEnv(t, 100*cr, route.Policy{})
		ctx, cancel := context.WithCancel(context.Background())
		e.a.answer = func(actx context.Context, c *Call) (io.ReadCloser, error) {
			return &body{ctx: actx, chunks: [][]byte{[]byte("A1")}, block: true}, nil
		}
		w := &cancelling{cancel: cancel}
		if err := e.svc.Speak(ctx, "acct", &hello, w); err == nil {
			t.Fatal("Speak = nil; want the cancellation")
		}
		if got := e.credits.settlements(); fmt.Sprint(got) != "[capture 0.55/2.2 speech oai]" {
			t.Errorf("settlements = %v; want oai's price captured", got)
		}
		e.credits.check(t, "acct", 99_450_000)
	})
	t.Run("before the first byte", func(t *testing.T) {
		e := newEnv(t, 100*cr, route.Policy{})
		ctx, cancel := context.WithCancel(context.Background())
		e.a.answer = func(actx context.Context, c *Call) (io.ReadCloser, error) {
			cancel() // the client hangs up while the vendor thinks
			return &body{ctx: actx, block: true}, nil
		}
		w := &recorder{}
		if err := e.svc.Speak(ctx, "acct", &hello, w); err == nil || w.answer != nil {
			t.Fatalf("Speak = %v, answer %v; want the cancellation, no answer", err, w.answer)
		}
		if e.b.count() != 0 {
			t.Errorf("the fallback was called %d times for a client that left", e.b.count())
		}
		if got := e.credits.settlements(); fmt.Sprint(got) != "[release 2.2/2.2 speech oai]" {
			t.Errorf("settlements = %v; want the hold released", got)
		}
		e.credits.check(t, "acct", 100*cr)
		wantRecord(t, e.credits.Credits, "failed", "", 0)
	})
}

// cancelling is a client that hangs up (cancels) after its first write.
type cancelling struct {
	recorder
	cancel func()
}

func (c *cancelling) Write(p []byte) (int, error) {
	n, err := c.recorder.Write(p)
	c.cancel()
	return n, err
}

// TestSpeakRefused: a refusal of the request (a content policy, a 400) is
// the answer: no retry, no fallback, nothing charged.
func TestSpeakRefused(t *testing.T) {
	tests := []struct {
		name string
		lead func(ctx context.Context, c *Call) (io.ReadCloser, error)
		code string
	}{
		{"content policy", func(ctx context.Context, c *Call) (io.ReadCloser, error) {
			return nil, ContentPolicy("The input violates the usage policies.", errors.New("HTTP 400"))
		}, "content_policy"},
		{"400", status(400), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 100*cr, route.Policy{})
			e.a.answer = tt.lead
			err := e.svc.Speak(context.Background(), "acct", &hello, &recorder{})
			var ue *chat.UpstreamError
			switch {
			case tt.code != "" && (apierr.As(err) == nil || apierr.As(err).Code != tt.code):
				t.Errorf("Speak = %v; want %s", err, tt.code)
			case tt.code == "" && (!errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest):
				t.Errorf("Speak = %v; want the vendor's 400", err)
			}
			if Committed(err) || e.a.count() != 1 || e.b.count()+e.c.count() != 0 {
				t.Errorf("calls: lead %d, fallbacks %d; want the lead once, no fallback", e.a.count(), e.b.count()+e.c.count())
			}
			if got := e.credits.settlements(); fmt.Sprint(got) != "[release 2.2/2.2 speech oai]" {
				t.Errorf("settlements = %v; want the hold released", got)
			}
			e.credits.check(t, "acct", 100*cr)
		})
	}
}

// TestSpeakEveryCandidateFails: the last failure is the error, with every
// attempt; nothing is charged.
func TestSpeakEveryCandidateFails(t *testing.T) {
	e := newEnv(t, 100*cr, route.Policy{Retries: -1})
	e.a.answer, e.b.answer, e.c.answer = status(503), status(429), status(502)
	err := e.svc.Speak(context.Background(), "acct", &hello, &recorder{})
	var ae *route.AttemptsError
	if !errors.As(err, &ae) || route.FormatAttempts(ae.Attempts) != "oai=503, eleven=429, syn=502" {
		t.Fatalf("Speak = %v; want the attempts oai=503, eleven=429, syn=502", err)
	}
	e.credits.check(t, "acct", 100*cr)
}

// TestSpeakCandidates: a fallback that cannot take the request as it is
// is not a candidate, and its price is not held.
func TestSpeakCandidates(t *testing.T) {
	e := newEnv(t, 100*cr, route.Policy{Retries: -1})
	e.a.answer = status(503)
	r := hello
	r.ResponseFormat = "flac" // eleven and syn make no flac
	err := e.svc.Speak(context.Background(), "acct", &r, &recorder{})
	var ae *route.AttemptsError
	if !errors.As(err, &ae) || route.FormatAttempts(ae.Attempts) != "oai=503" {
		t.Fatalf("Speak = %v; want one attempt, on oai", err)
	}
	if got := e.credits.settlements(); fmt.Sprint(got) != "[release 0.55/0.55 speech oai]" {
		t.Errorf("settlements = %v; want oai's price alone held and released", got)
	}
	// No voice: each model speaks in its own default.
	e = newEnv(t, 100*cr, route.Policy{Retries: -1})
	e.a.answer = status(503)
	r = Request{Model: "syn", Input: "hi"}
	if err := e.svc.Speak(context.Background(), "acct", &r, &recorder{}); err != nil || e.c.calls[0].Voice != "alloy" {
		t.Errorf("Speak(syn, no voice) = %v; want syn's default voice", err)
	}
}

// TestSpeakInsufficient: a request the account cannot pay is a 402
// saying the price and what the account has, before any vendor call.
func TestSpeakInsufficient(t *testing.T) {
	e := newEnv(t, 2*cr, route.Policy{})
	err := e.svc.Speak(context.Background(), "acct", &hello, &recorder{})
	ae := apierr.As(err)
	if ae == nil || ae.Kind != apierr.InsufficientQuota || ae.Code != "insufficient_credits" ||
		!strings.Contains(ae.Message, "up to 2.2 credits") || !strings.Contains(ae.Message, "2 available") {
		t.Fatalf("Speak = %v; want a 402 naming the 2.2 credits held and the 2 available", err)
	}
	if e.a.count()+e.b.count()+e.c.count() != 0 {
		t.Errorf("a vendor was called for a request the account cannot pay")
	}
	err = e.svc.Speak(context.Background(), "nobody", &hello, &recorder{})
	if ae := apierr.As(err); ae == nil || ae.Kind != apierr.InsufficientQuota || !strings.Contains(ae.Message, "has none") {
		t.Errorf("Speak(unknown account) = %v; want a 402", err)
	}
	e.credits.check(t, "acct", 2*cr)
}

// TestSpeakFreeAndUncharged: a free model reserves nothing, and a
// Service without Credits charges nothing.
func TestSpeakFreeAndUncharged(t *testing.T) {
	e := newEnv(t, 0, route.Policy{})
	if err := e.svc.Speak(context.Background(), "acct", &Request{Model: "fixed", Input: "hi", Voice: "alloy"}, &recorder{}); err != nil {
		t.Fatalf("Speak(free model) = %v", err)
	}
	if got := e.credits.settlements(); len(got) != 0 {
		t.Errorf("a free speech settled %v", got)
	}
	// Its record is written alone, when the service has a writer.
	recs := &recordWriter{}
	e.svc.Records = recs
	if err := e.svc.Speak(context.Background(), "acct", &Request{Model: "fixed", Input: "hi", Voice: "alloy"}, &recorder{}); err != nil {
		t.Fatalf("Speak(free model) = %v", err)
	}
	if len(recs.rs) != 1 || recs.rs[0].Cost != 0 || recs.rs[0].Status != "completed" || recs.rs[0].Model != "fixed" {
		t.Errorf("records written alone = %+v; want the free speech's", recs.rs)
	}
	e.svc.Credits = nil
	w := &recorder{}
	if err := e.svc.Speak(context.Background(), "acct", &hello, w); err != nil || w.body() != "A1A2" {
		t.Errorf("Speak without Credits = %v, %q; want the audio", err, w.body())
	}
}

// TestSpeakParallelNeverOverdraws: 40 requests at once on an account
// that can pay 10: exactly 10 are spoken and charged, the others are
// refused with a 402, and nothing is left held.
func TestSpeakParallelNeverOverdraws(t *testing.T) {
	e := newEnv(t, 10*cr, route.Policy{})
	r := Request{Model: "eleven", Input: strings.Repeat("x", 5), Voice: "alloy"} // 1 credit
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.svc.Speak(context.Background(), "acct", &r, &recorder{})
		}()
	}
	wg.Wait()
	ok, short := 0, 0
	for _, err := range errs {
		switch ae := apierr.As(err); {
		case err == nil:
			ok++
		case ae != nil && ae.Code == "insufficient_credits":
			short++
		default:
			t.Errorf("Speak = %v", err)
		}
	}
	if ok != 10 || short != n-10 {
		t.Errorf("%d spoken, %d refused; want 10 and %d", ok, short, n-10)
	}
	e.credits.check(t, "acct", 0)
}

// TestSpeakReadsAll: the whole answer is copied however it is cut, and a
// vendor body is always closed.
func TestSpeakReadsAll(t *testing.T) {
	e := newEnv(t, 100*cr, route.Policy{})
	big := bytes.Repeat([]byte("0123456789"), 20000) // 200 KB: several reads
	var b *body
	e.a.answer = func(ctx context.Context, c *Call) (io.ReadCloser, error) {
		b = &body{ctx: ctx, chunks: [][]byte{big[:1], big[1:100000], big[100000:]}}
		return b, nil
	}
	w := &recorder{}
	if err := e.svc.Speak(context.Background(), "acct", &hello, w); err != nil {
		t.Fatal(err)
	}
	if w.body() != string(big) || !b.closed {
		t.Errorf("client got %d bytes (closed %v); want all %d, the body closed", len(w.body()), b.closed, len(big))
	}
}

// recordWriter is a credits.RecordWriter keeping what it is given.
type recordWriter struct{ rs []credits.Record }

func (w *recordWriter) AddRecords(_ context.Context, rs []credits.Record) []error {
	w.rs = append(w.rs, rs...)
	return make([]error, len(rs))
}
