package jobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// fallbackCatalog is testdata/fallback_catalog.json: lead-video (Veo-like:
// 4, 6, 8 s; three sizes; 40 credits/s) whose fallbacks each lack
// something but fb-video (10/s) and fb-dear (50/s); lead-music whose
// fallbacks lack LYRICS, wav, or length but fb-music.
func fallbackCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Load("testdata/fallback_catalog.json", catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// notOff is Service.Configured with the provider "off" not configured.
func notOff(provider string) bool { return provider != "off" }

func strp(s string) *string { return &s }
func intp(n int) *int       { return &n }

func TestCandidates(t *testing.T) {
	cat := fallbackCatalog(t)
	svc := &Service{Catalog: cat, Configured: notOff}
	video := func(r CreateRequest) CreateRequest {
		r.Type, r.Model, r.Prompt = TypeVideo, "lead-video", "a fox"
		return r
	}
	music := func(r CreateRequest) CreateRequest {
		r.Type, r.Model, r.Prompt = TypeMusic, "lead-music", "a tune"
		return r
	}
	tests := []struct {
		name string
		req  CreateRequest
		want []Candidate
	}{
		// fb-lengths takes 5 or 10 s, fb-sizes 1920x1080 only, fb-off's
		// provider is not configured.
		{"video at the lead's defaults (8 s, 1280x720)", video(CreateRequest{}),
			[]Candidate{{"lead-video", 320 * credits.Credit}, {"fb-video", 80 * credits.Credit}, {"fb-dear", 400 * credits.Credit}}},
		{"video 1920x1080 at 8 s", video(CreateRequest{Size: strp("1920x1080")}),
			[]Candidate{{"lead-video", 320 * credits.Credit}, {"fb-sizes", 48 * credits.Credit}, {"fb-video", 80 * credits.Credit}, {"fb-dear", 400 * credits.Credit}}},
		{"video by resolution at 4 s", video(CreateRequest{Resolution: strp("720p"), Duration: intp(4)}),
			[]Candidate{{"lead-video", 160 * credits.Credit}, {"fb-video", 40 * credits.Credit}, {"fb-dear", 200 * credits.Credit}}},
		{"portrait video at 6 s", video(CreateRequest{Size: strp("720x1280"), Duration: intp(6)}),
			[]Candidate{{"lead-video", 240 * credits.Credit}, {"fb-video", 60 * credits.Credit}, {"fb-dear", 300 * credits.Credit}}},
		// fb-short makes at most 20 s, fb-mp3 no wav, fb-nolyrics no
		// LYRICS mode.
		{"music from a description (30 s mp3)", music(CreateRequest{}),
			[]Candidate{{"lead-music", 30 * credits.Credit}, {"fb-nolyrics", 30 * credits.Credit}, {"fb-mp3", 60 * credits.Credit}, {"fb-music", 90 * credits.Credit}}},
		{"music short enough for every fallback", music(CreateRequest{Duration: intp(15)}),
			[]Candidate{{"lead-music", 15 * credits.Credit}, {"fb-nolyrics", 15 * credits.Credit}, {"fb-mp3", 30 * credits.Credit}, {"fb-short", 15 * credits.Credit}, {"fb-music", 45 * credits.Credit}}},
		{"music with lyrics", music(CreateRequest{Mode: strp("LYRICS"), Lyrics: strp("la la la")}),
			[]Candidate{{"lead-music", 30 * credits.Credit}, {"fb-mp3", 60 * credits.Credit}, {"fb-music", 90 * credits.Credit}}},
		{"music as wav", music(CreateRequest{Format: strp("wav"), Duration: intp(15)}),
			[]Candidate{{"lead-music", 15 * credits.Credit}, {"fb-nolyrics", 15 * credits.Credit}, {"fb-short", 15 * credits.Credit}, {"fb-music", 45 * credits.Credit}}},
		{"a model without fallbacks", CreateRequest{Type: TypeVideo, Model: "fb-video", Prompt: "p", Duration: intp(3)},
			[]Candidate{{"fb-video", 30 * credits.Credit}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, in, err := Validate(cat, &tt.req)
			if err != nil {
				t.Fatalf("Validate = %v", err)
			}
			if got := svc.candidates(context.Background(), m, &tt.req, in); !slices.Equal(got, tt.want) {
				t.Errorf("candidates = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestCandidatesKeyScope: a catalog fallback the caller's key may not use
// is skipped, not an error.
func TestCandidatesKeyScope(t *testing.T) {
	cat := fallbackCatalog(t)
	svc := &Service{Catalog: cat, Configured: notOff}
	req := CreateRequest{Type: TypeVideo, Model: "lead-video", Prompt: "a fox"}
	m, in, err := Validate(cat, &req)
	if err != nil {
		t.Fatalf("Validate = %v", err)
	}
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Account: "a", KeyID: "key_1", Models: []string{"lead-*", "fb-dear"}})
	want := []Candidate{{"lead-video", 320 * credits.Credit}, {"fb-dear", 400 * credits.Credit}}
	if got := svc.candidates(ctx, m, &req, in); !slices.Equal(got, want) {
		t.Errorf("candidates for a key limited to lead-*, fb-dear = %v; want %v", got, want)
	}
}

// TestCreateHold: the hold is the highest price among the candidates, the
// lead alone decides what is refused, and a job without fallbacks holds
// its price as before.
func TestCreateHold(t *testing.T) {
	ctx := context.Background()
	cat := fallbackCatalog(t)
	st := newMemStore()
	svc := &Service{Store: st, Queue: &memQueue{}, Catalog: cat, Configured: notOff, Log: discard()}
	j, err := svc.Create(ctx, "a", &CreateRequest{Type: TypeVideo, Model: "lead-video", Prompt: "p"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Candidate{{"lead-video", 320 * credits.Credit}, {"fb-video", 80 * credits.Credit}, {"fb-dear", 400 * credits.Credit}}
	if j.Price != 400*credits.Credit || j.Hold != 400*credits.Credit || !slices.Equal(j.Candidates, want) || j.Candidate != 0 || j.Model != "lead-video" {
		t.Errorf("Create = price %s, hold %s, candidates %v at %d; want 400 held over %v, at 0", j.Price, j.Hold, j.Candidates, j.Candidate, want)
	}
	if stored, _ := st.Get(ctx, j.ID); stored.Hold != 400*credits.Credit || len(stored.Candidates) != 3 {
		t.Errorf("stored job = %+v; want the hold and the candidates", stored)
	}
	// 5 s suits fb-lengths, not the lead: refused, naming the field.
	_, err = svc.Create(ctx, "a", &CreateRequest{Type: TypeVideo, Model: "lead-video", Prompt: "p", Duration: intp(5)}, "", "")
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Param != "duration" {
		t.Errorf("Create(5 s on the lead) = %v; want a 400 naming duration", err)
	}
	j, err = svc.Create(ctx, "a", &CreateRequest{Type: TypeVideo, Model: "fb-video", Prompt: "p", Duration: intp(2)}, "", "")
	if err != nil || j.Price != 20*credits.Credit || j.Hold != 20*credits.Credit || len(j.Candidates) != 1 {
		t.Errorf("Create(no fallbacks) = %+v, %v; want price = hold = 20, one candidate", j, err)
	}
	// An account short of the hold: the 402 says it is the highest price.
	svc.Store = brokeStore{st}
	_, err = svc.Create(ctx, "a", &CreateRequest{Type: TypeVideo, Model: "lead-video", Prompt: "p"}, "", "")
	if !errors.As(err, &ae) || ae.Code != ErrInsufficientCredits.Code || !strings.Contains(ae.Message, "up to 400 credits") {
		t.Errorf("Create(short of the hold) = %v; want 402 saying the job costs up to 400 credits", err)
	}
}

// brokeStore is a memStore whose accounts can pay for nothing.
type brokeStore struct{ *memStore }

func (brokeStore) Create(context.Context, *Job, *Idempotency) (*Job, error) {
	return nil, ErrInsufficientCredits
}

// TestFailure: the classification of failed submits, and which of them
// are definite refusals (the vendor did not take the job).
func TestFailure(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	status := func(code int, r Refusal) error { return StatusError("submit", code, http.Header{}, r) }
	tests := []struct {
		name    string
		err     error
		class   route.Class
		refused bool
	}{
		{"429", status(429, Refusal{}), route.RateLimited, true},
		{"429 with a daily quota", status(429, Refusal{Account: true}), route.KeyRefused, true},
		{"401", status(401, Refusal{}), route.KeyRefused, true},
		{"403", status(403, Refusal{}), route.KeyRefused, true},
		{"402 payment required", status(402, Refusal{}), route.KeyRefused, true},
		{"400 with a bad key (Gemini)", status(400, Refusal{Account: true}), route.KeyRefused, true},
		{"404", status(404, Refusal{}), route.Unsupported, true},
		{"500", status(500, Refusal{}), route.Transient, true},
		{"503", status(503, Refusal{}), route.Transient, true},
		{"408", status(408, Refusal{}), route.Transient, true},
		{"502", status(502, Refusal{}), route.Transient, false},
		{"504", status(504, Refusal{}), route.Transient, false},
		{"400", status(400, Refusal{}), route.Final, false},
		{"422 content policy", status(422, Refusal{Code: CodeContentPolicy}), route.Final, false},
		{"an unusable answer", &ProviderError{Code: CodeUpstream, Message: "garbage"}, route.Final, false},
		{"connection refused", &TransientError{Err: fmt.Errorf("submit: %w", dial)}, route.Transient, true},
		{"unknown host", &TransientError{Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, route.Transient, true},
		{"connection reset after sending", &TransientError{Err: read}, route.Transient, false},
		{"timeout after sending", &TransientError{Err: timeout}, route.Transient, false},
		{"any other error", errors.New("boom"), route.Transient, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, refused := Failure(tt.err)
			if f.Class != tt.class || refused != tt.refused {
				t.Errorf("Failure(%v) = %v (%+v), refused %v; want %v, refused %v", tt.err, f.Class, f, refused, tt.class, tt.refused)
			}
		})
	}
	if f, _ := Failure(status(429, Refusal{RetryAfter: 41 * time.Second})); f.RetryAfter != 41*time.Second || f.Status != 429 {
		t.Errorf("Failure(429 with a body's retry delay) = %+v; want its 41 s and the status", f)
	}
}

const rtID = "job_video_rrrrrrrrrrrrrrrrrrrr"

// routed sets up a job of lead-video (on provider "veo", 320 credits)
// with the fallback fb-video (on "fal", 80 credits), on a worker with an
// SQS-like lease and a settable clock.
func routed(t *testing.T, veo, fal Provider) (*Worker, *memStore, *memQueue, *clock) {
	t.Helper()
	st := newMemStore(Job{ID: rtID, Account: "a", Type: TypeVideo, Model: "lead-video", Status: Queued,
		Input: Input{Prompt: "p", Duration: 8, Size: "1280x720"}, Price: 320 * credits.Credit, Hold: 320 * credits.Credit,
		Candidates: []Candidate{{"lead-video", 320 * credits.Credit}, {"fb-video", 80 * credits.Credit}}, Created: 1000, Updated: 1000})
	q := &memQueue{}
	c := &clock{t: time.Unix(1000, 0)}
	w := &Worker{Store: st, Queue: q, Media: &memMedia{}, Catalog: fallbackCatalog(t), Providers: map[string]Provider{"veo": veo, "fal": fal},
		Log: discard(), Lease: 2 * time.Minute, Now: c.now, PollInterval: 10 * time.Second, RetryBase: time.Second}
	return w, st, q, c
}

// drive delivers the job's messages as the queue would, each when it is
// due, until the job is final (at most n deliveries), and returns it.
func drive(t *testing.T, w *Worker, st *memStore, q *memQueue, c *clock, n int) *Job {
	t.Helper()
	for range n {
		j, _ := st.Get(context.Background(), rtID)
		if j.Status.Final() {
			return j
		}
		_, delay, _ := q.last()
		c.t = c.t.Add(delay)
		if err := w.Process(context.Background(), rtID); err != nil {
			t.Fatalf("Process = %v", err)
		}
	}
	j, _ := st.Get(context.Background(), rtID)
	return j
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// TestRouting: each failed submit is decided by the routing policy: a
// definite refusal (a long 429, a used-up quota, a refused key, a missing
// model, 5xx after retries) moves the job to its fallback, charged at the
// fallback's price; the request's own fault fails it; a failure after
// which the vendor may have taken the job never moves it.
func TestRouting(t *testing.T) {
	dial := &TransientError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	afterSend := &TransientError{Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}
	tests := []struct {
		name         string
		veo, fal     []error // each Start's answer in turn (nil or past the end: accepted)
		wantStatus   Status
		wantCode     string
		wantVeo      int // submits
		wantFal      int
		wantServedBy string
		wantPrice    int64 // credits
	}{
		{"429 with a long Retry-After moves on at once", []error{&TransientError{Status: 429, RetryAfter: 30 * time.Second, Err: errors.New("429")}}, nil,
			Completed, "", 1, 1, "fb-video", 80},
		{"a used-up quota moves on at once", []error{&TransientError{Status: 429, Account: true, Err: errors.New("429 daily")}}, nil,
			Completed, "", 1, 1, "fb-video", 80},
		{"a refused key moves on", []error{&ProviderError{Code: CodeUpstream, Message: "bad key", Status: 401}}, nil,
			Completed, "", 1, 1, "fb-video", 80},
		{"402 moves on", []error{&ProviderError{Code: CodeUpstream, Message: "pay", Status: 402}}, nil,
			Completed, "", 1, 1, "fb-video", 80},
		{"404 moves on", []error{&ProviderError{Code: CodeUpstream, Message: "no such model", Status: 404}}, nil,
			Completed, "", 1, 1, "fb-video", 80},
		{"503 is retried, then moves on", repeat(&TransientError{Status: 503, Err: errors.New("503")}, 3), nil,
			Completed, "", 3, 1, "fb-video", 80},
		{"503 once, then accepted: stays", []error{&TransientError{Status: 503, Err: errors.New("503")}}, nil,
			Completed, "", 2, 0, "lead-video", 320},
		{"a refused connection is retried, then moves on", repeat(dial, 3), nil,
			Completed, "", 3, 1, "fb-video", 80},
		{"a refused prompt fails the job", []error{&ProviderError{Code: CodeContentPolicy, Message: "no", Status: 400}}, nil,
			Failed, CodeContentPolicy, 1, 0, "", 320},
		{"a timeout after sending never moves on", repeat(afterSend, 4), nil,
			Failed, CodeUpstream, 4, 0, "", 320},
		{"502 never moves on", repeat(&TransientError{Status: 502, Err: errors.New("502")}, 4), nil,
			Failed, CodeUpstream, 4, 0, "", 320},
		{"the last candidate's refusal fails the job", []error{&ProviderError{Code: CodeUpstream, Message: "bad key", Status: 401}},
			[]error{&ProviderError{Code: CodeUpstream, Message: "fal: bad key", Status: 401}},
			Failed, CodeUpstream, 1, 1, "", 320},
		{"the last candidate keeps the old patience", []error{&ProviderError{Code: CodeUpstream, Message: "bad key", Status: 401}},
			repeat(&TransientError{Status: 503, Err: errors.New("503")}, 4),
			Failed, CodeUpstream, 1, 4, "", 320},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			veo := &fakeVendor{startErr: tt.veo, script: []pollAnswer{{done: true, body: "veo"}}}
			fal := &fakeVendor{startErr: tt.fal, script: []pollAnswer{{done: true, body: "fal"}}}
			w, st, q, c := routed(t, veo, fal)
			j := drive(t, w, st, q, c, 30)
			veoSubmits, _, _ := veo.counts()
			falSubmits, _, _ := fal.counts()
			if j.Status != tt.wantStatus || veoSubmits != tt.wantVeo || falSubmits != tt.wantFal {
				t.Fatalf("job %s (%+v), submits veo %d fal %d; want %s, %d, %d", j.Status, j.Error, veoSubmits, falSubmits, tt.wantStatus, tt.wantVeo, tt.wantFal)
			}
			if tt.wantCode != "" && (j.Error == nil || j.Error.Code != tt.wantCode) {
				t.Errorf("error = %+v; want code %s", j.Error, tt.wantCode)
			}
			if j.ServedBy() != tt.wantServedBy || j.Price != credits.Amount(tt.wantPrice)*credits.Credit || j.Hold != 320*credits.Credit {
				t.Errorf("served by %q, price %s, hold %s; want %q, %d, 320", j.ServedBy(), j.Price, j.Hold, tt.wantServedBy, tt.wantPrice)
			}
			if tt.wantFal > 0 && (j.Candidate != 1 || j.Tries() != tt.wantFal) {
				t.Errorf("candidate %d after %d tries there; want 1 after %d", j.Candidate, j.Tries(), tt.wantFal)
			}
		})
	}
}

// TestNoFallbackAfterHandle: once the vendor answered with a handle, its
// failures stay its own: polls are retried there or fail the job, and the
// fallback is never submitted to.
func TestNoFallbackAfterHandle(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script []pollAnswer
		want   Status
	}{
		{"a poll the vendor refuses fails the job", []pollAnswer{{err: &ProviderError{Code: CodeUpstream, Message: "bad key", Status: 401}}}, Failed},
		{"poll faults are retried at the vendor", []pollAnswer{{err: &TransientError{Status: 503, Err: errors.New("503")}}, {done: true, body: "x"}}, Completed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			veo, fal := &fakeVendor{script: tt.script}, &fakeVendor{script: []pollAnswer{{done: true, body: "fal"}}}
			w, st, q, c := routed(t, veo, fal)
			j := drive(t, w, st, q, c, 10)
			veoSubmits, _, _ := veo.counts()
			falSubmits, _, _ := fal.counts()
			if j.Status != tt.want || veoSubmits != 1 || falSubmits != 0 || j.Candidate != 0 {
				t.Errorf("job %s at candidate %d, submits veo %d fal %d; want %s at 0, 1 and 0", j.Status, j.Candidate, veoSubmits, falSubmits, tt.want)
			}
		})
	}
}

// TestRedeliveryAfterMove: after the move to the fallback, duplicate
// deliveries and a restarted worker continue there: one submit to each
// vendor.
func TestRedeliveryAfterMove(t *testing.T) {
	ctx := context.Background()
	veo := &fakeVendor{startErr: []error{&ProviderError{Code: CodeUpstream, Message: "bad key", Status: 403}}}
	fal := &fakeVendor{script: []pollAnswer{{done: true, body: "fal"}}}
	w, st, q, c := routed(t, veo, fal)
	if err := w.Process(ctx, rtID); err != nil {
		t.Fatal(err)
	}
	j, _ := st.Get(ctx, rtID)
	if id, delay, n := q.last(); j.Candidate != 1 || j.AttemptsBefore != 1 || j.Status != Processing || id != rtID || delay != 0 || n != 1 {
		t.Fatalf("after the refusal: candidate %d (attempts before %d), %s, message %q after %v (%d); want moved to 1, a message at once",
			j.Candidate, j.AttemptsBefore, j.Status, id, delay, n)
	}
	// Eight deliveries at once (the message and its duplicates), then
	// the same again from a restarted worker (nothing in memory).
	for _, wk := range []*Worker{w, {Store: st, Queue: q, Media: w.Media, Catalog: w.Catalog, Providers: w.Providers, Log: discard(),
		Lease: w.Lease, Now: c.now, PollInterval: w.PollInterval, RetryBase: w.RetryBase}} {
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wk.Process(ctx, rtID) // losers: ErrBusy or dropped
			}()
		}
		wg.Wait()
	}
	veoSubmits, _, _ := veo.counts()
	falSubmits, _, _ := fal.counts()
	if veoSubmits != 1 || falSubmits != 1 {
		t.Fatalf("submits veo %d, fal %d; want one each", veoSubmits, falSubmits)
	}
	if j = drive(t, w, st, q, c, 5); j.Status != Completed || j.ServedBy() != "fb-video" || j.Price != 80*credits.Credit || st.completions != 1 {
		t.Errorf("job %s served by %q at %s (%d completions); want completed once by fb-video at 80", j.Status, j.ServedBy(), j.Price, st.completions)
	}
}

// keyedVendor is a fakeVendor with a key pool: it records the key each
// call carries (route.KeyFrom) and refuses the first submit with a 429.
type keyedVendor struct {
	*fakeVendor
	ids  []string
	mu   sync.Mutex
	used []string // "start:<key>", "poll:<key>"
}

func (k *keyedVendor) KeyIDs() []string { return k.ids }

func (k *keyedVendor) note(s string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.used = append(k.used, s)
	return len(k.used)
}

func (k *keyedVendor) Start(ctx context.Context, m *catalog.Model, j *Job) (*Step, error) {
	if k.note("start:"+route.KeyFrom(ctx)) == 1 {
		return nil, &TransientError{Status: 429, Err: errors.New("429: this key's limit")}
	}
	return k.fakeVendor.Start(ctx, m, j)
}

func (k *keyedVendor) Poll(ctx context.Context, m *catalog.Model, j *Job) (*Result, error) {
	k.note("poll:" + route.KeyFrom(ctx))
	return k.fakeVendor.Poll(ctx, m, j)
}

// TestSubmitKeyPool: a 429 on one key of the pool tries another at once,
// in the same run (not a retry); the key that submitted is stored with
// the handle and every poll uses it; the refused key rests in the Router.
func TestSubmitKeyPool(t *testing.T) {
	veo := &keyedVendor{fakeVendor: &fakeVendor{script: []pollAnswer{{}, {done: true, body: "veo"}}}, ids: []string{"k1", "k2"}}
	w, st, q, c := routed(t, veo, &fakeVendor{})
	w.Router = route.New(route.Policy{}, nil)
	if err := w.Process(context.Background(), rtID); err != nil {
		t.Fatal(err)
	}
	j, _ := st.Get(context.Background(), rtID)
	if len(veo.used) != 2 || veo.used[0] == veo.used[1] || j.Handle == nil || "start:"+j.Handle.KeyID != veo.used[1] || j.Attempts != 1 {
		t.Fatalf("starts %v, handle %+v after %d attempts; want two keys in one run, the second stored with the handle", veo.used, j.Handle, j.Attempts)
	}
	first := veo.used[0][len("start:"):]
	target := route.Target{Model: "lead-video", Provider: "veo", Keys: veo.ids}
	if got := w.Router.Key(target, nil); got == first {
		t.Errorf("Router.Key = %q, the key that was rate-limited; want the other while it rests", got)
	}
	j = drive(t, w, st, q, c, 5)
	if j.Status != Completed || j.ServedBy() != "lead-video" {
		t.Fatalf("job %s served by %q; want completed by lead-video", j.Status, j.ServedBy())
	}
	for _, u := range veo.used[2:] {
		if u != "poll:"+j.Handle.KeyID {
			t.Errorf("call %q; want every poll with the submitting key %s", u, j.Handle.KeyID)
		}
	}
	if s := w.Router.State("lead-video"); s.Calls != 2 || s.Failures != 1 {
		t.Errorf("breaker %+v; want the two submits counted, one failed", s)
	}
}

// handleLost is a memStore that cannot store a vendor's handle: the
// crash window between a vendor taking the job and the handle's write.
type handleLost struct{ *memStore }

func (s handleLost) Transition(ctx context.Context, id string, from, to Status, p Patch) (*Job, error) {
	if p.Handle != nil {
		return nil, errors.New("store unavailable")
	}
	return s.memStore.Transition(ctx, id, from, to, p)
}

// TestLostHandleStays: when the vendor took the job but its handle was
// not stored (a crash, a store down), the job may have been accepted:
// after the lease it is started again at the same candidate, as before
// fallbacks existed, never at the fallback.
func TestLostHandleStays(t *testing.T) {
	ctx := context.Background()
	veo, fal := &fakeVendor{script: []pollAnswer{{done: true, body: "veo"}}}, &fakeVendor{}
	w, st, _, c := routed(t, veo, fal)
	w.Store = handleLost{st}
	if err := w.Process(ctx, rtID); err == nil {
		t.Fatal("Process with the handle lost = nil; want an error (the message comes back)")
	}
	w.Store = st
	c.t = c.t.Add(w.Lease + time.Second) // the claim's lease is over
	if err := w.Process(ctx, rtID); err != nil {
		t.Fatal(err)
	}
	j, _ := st.Get(ctx, rtID)
	veoSubmits, _, _ := veo.counts()
	falSubmits, _, _ := fal.counts()
	if j.Candidate != 0 || j.Handle == nil || veoSubmits != 2 || falSubmits != 0 {
		t.Errorf("candidate %d, handle %+v, submits veo %d fal %d; want the same candidate again (2 submits there), none to the fallback",
			j.Candidate, j.Handle, veoSubmits, falSubmits)
	}
}
