package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/webhooks"
)

// The signature is checked with the Standard Webhooks authors' own Go
// library, an implementation independent of ours.
func TestSignatureVerifiesWithStandardWebhooks(t *testing.T) {
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	old, _ := webhooks.NewSecret()
	now := time.Now()
	body := []byte(`{"id":"evt_x","type":"job.completed"}`)
	tests := []struct {
		name   string
		cfg    webhooks.Config
		verify []string // secrets that must verify
		sigs   int
	}{
		{"one secret", webhooks.Config{Secret: secret}, []string{secret}, 1},
		{"rotated, in grace", webhooks.Config{Secret: secret, Previous: old, PreviousUntil: now.Add(time.Hour).Unix()}, []string{secret, old}, 2},
		{"rotated, grace over", webhooks.Config{Secret: secret, Previous: old, PreviousUntil: now.Add(-time.Second).Unix()}, []string{secret}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := tt.cfg.Signature("evt_x", now.Unix(), body, now)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(strings.Fields(sig)); n != tt.sigs {
				t.Errorf("Signature = %q: %d signatures; want %d", sig, n, tt.sigs)
			}
			h := http.Header{}
			h.Set("webhook-id", "evt_x")
			h.Set("webhook-timestamp", timestamp(now))
			h.Set("webhook-signature", sig)
			for _, s := range tt.verify {
				wh, err := standardwebhooks.NewWebhook(s)
				if err != nil {
					t.Fatal(err)
				}
				if err := wh.Verify(body, h); err != nil {
					t.Errorf("standardwebhooks Verify(%s…) = %v", s[:10], err)
				}
			}
			if tt.sigs == 1 && tt.cfg.Previous != "" {
				wh, _ := standardwebhooks.NewWebhook(tt.cfg.Previous)
				if err := wh.Verify(body, h); err == nil {
					t.Errorf("the previous secret still verifies after its grace period")
				}
			}
		})
	}
}

func timestamp(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url          string
		allowPrivate bool
		ok           bool
	}{
		{"https://hooks.example.com/genway", false, true},
		{"https://hooks.example.com:8443/a?b=c", false, true},
		{"http://hooks.example.com/genway", false, false},
		{"https://127.0.0.1/x", false, false},
		{"https://10.1.2.3/x", false, false},
		{"https://[::1]/x", false, false},
		{"https://169.254.169.254/latest/meta-data", false, false},
		{"https://localhost/x", false, false},
		{"https://printer.local/x", false, false},
		{"https://intranet/x", false, false},
		{"https://user:pw@hooks.example.com/x", false, false},
		{"ftp://hooks.example.com/x", false, false},
		{"hooks.example.com/x", false, false},
		{"https://hooks.example.com/x#frag", false, false},
		{"http://127.0.0.1:8080/x", true, true},
		{"http://localhost:8080/x", true, true},
		{"https://10.1.2.3/x", true, true},
		{"http://10.1.2.3/x", true, false},
		{"https://" + strings.Repeat("a", webhooks.MaxURLChars) + ".com/", false, false},
		// IPv6 forms that embed an internal IPv4 address.
		{"https://[::127.0.0.1]/x", false, false},                          // IPv4-compatible ::/96
		{"https://[::ffff:127.0.0.1]/x", false, false},                     // IPv4-mapped
		{"https://[::ffff:0:127.0.0.1]/x", false, false},                   // IPv4-translated ::ffff:0:0:0/96
		{"https://[::ffff:0:a00:1]/x", false, false},                       // the same, 10.0.0.1
		{"https://[64:ff9b::a9fe:a9fe]/x", false, false},                   // NAT64 of 169.254.169.254
		{"https://[2002:7f00:1::]/x", false, false},                        // 6to4 of 127.0.0.1
		{"https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x", false, false}, // Teredo
		{"https://[fe80::1%25eth0]/x", false, false},                       // link-local with a zone
		{"https://[2606:4700:4700::1111]/x", false, true},
		// Numbers that resolvers and browsers read as IPv4, not canonical.
		{"https://127.1/x", false, false},
		{"https://0177.0.0.1/x", false, false},
		{"https://0x7f.0.0.1/x", false, false},
		{"https://0x7f000001/x", false, false},
		{"https://2130706433/x", false, false},
		{"https://8.8.8.08/x", false, false},
		{"https://1.2.3.4.5/x", false, false},
		{"https://127.0.0.1./x", false, false},
		{"https://8.8.8.8/x", false, true},
		{"https://8.8.8.8./x", false, true},
		{"https://cdn1.example.com/x", false, true},
		{"https://1.example.com/x", false, true},
		{"https://example.com.0x/x", false, false}, // WHATWG reads a bare 0x as the number 0
	}
	for _, tt := range tests {
		err := webhooks.CheckURL("webhook_url", tt.url, tt.allowPrivate)
		if (err == nil) != tt.ok {
			t.Errorf("CheckURL(%.60q, allowPrivate=%v) = %v; want ok=%v", tt.url, tt.allowPrivate, err, tt.ok)
		}
		if e := apierr.As(err); err != nil && (e == nil || e.Kind != apierr.Invalid || e.Param != "webhook_url") {
			t.Errorf("CheckURL(%.60q) error %v is not a 400 on webhook_url", tt.url, err)
		}
	}
}

// TestNewClientRefusesAtDial: a delivery's connection to an internal
// address is refused before it is made, whatever form the address takes
// in the URL or whatever a name resolves to; with allowPrivate it is made.
func TestNewClientRefusesAtDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "[::127.0.0.1]", "[::ffff:127.0.0.1]",
		"[::ffff:0:127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[2001::7f00:1]", "10.0.0.1", "169.254.169.254"} {
		u := "http://" + host + ":" + port + "/"
		_, err := webhooks.NewClient(false).Get(u)
		if !errors.Is(err, chat.ErrRefusedAddr) {
			t.Errorf("NewClient(false).Get(%s) = %v; want refused at dial (chat.ErrRefusedAddr)", u, err)
		}
	}
	resp, err := webhooks.NewClient(true).Get(srv.URL)
	if err != nil {
		t.Fatalf("NewClient(true).Get(%s) = %v; want it served", srv.URL, err)
	}
	resp.Body.Close()
}

func TestExcerpt(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ok", "ok"},
		{"  line1\r\n\tline2\x00\x1b[31m  ", "line1 line2 [31m"},
		{"bad \xff utf8", "bad utf8"},
		{strings.Repeat("é", 500), strings.Repeat("é", webhooks.ExcerptChars)},
	}
	for _, tt := range tests {
		if got := webhooks.Excerpt([]byte(tt.in)); got != tt.want {
			t.Errorf("Excerpt(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// TestBackoff: whatever the jitter, the first retry comes within 10 s,
// each delay is within JitterFraction of its step, and the retries grow.
func TestBackoff(t *testing.T) {
	steps := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 8 * time.Hour, 8 * time.Hour}
	for _, jitter := range []float64{0, 0.25, 0.5, 0.75, 0.999999, 1} {
		if d := webhooks.Backoff(1, jitter); d <= 0 || d > 10*time.Second {
			t.Errorf("Backoff(1, %g) = %v; want the first retry within 10 s", jitter, d)
		}
		for i, step := range steps {
			n := i + 1
			d := webhooks.Backoff(n, jitter)
			lo := time.Duration((1 - webhooks.JitterFraction) * float64(step))
			hi := time.Duration((1 + webhooks.JitterFraction) * float64(step))
			if d < lo || d > hi {
				t.Errorf("Backoff(%d, %g) = %v; want within [%v, %v]", n, jitter, d, lo, hi)
			}
			if jitter == 0.5 && d != step {
				t.Errorf("Backoff(%d, 0.5) = %v; want the step itself, %v", n, d, step)
			}
			if n > 1 && d < webhooks.Backoff(n-1, jitter) {
				t.Errorf("Backoff(%d, %g) = %v < Backoff(%d) = %v", n, jitter, d, n-1, webhooks.Backoff(n-1, jitter))
			}
			// The spreads of two steps do not overlap: a delivery's retries
			// grow whatever the draws.
			if n > 1 && steps[i-1] != step && webhooks.Backoff(n-1, 1) >= webhooks.Backoff(n, 0) {
				t.Errorf("Backoff(%d, 1) = %v is not below Backoff(%d, 0) = %v", n-1, webhooks.Backoff(n-1, 1), n, webhooks.Backoff(n, 0))
			}
		}
	}
	tests := []struct {
		n      int
		jitter float64
		want   time.Duration
	}{
		{0, 0.5, 5 * time.Second}, // before the first: the first
		{1, 0, 4 * time.Second},
		{1, 1, 6 * time.Second},
		{1, -3, 4 * time.Second}, // out of [0, 1]: its nearest end
		{1, 7, 6 * time.Second},
		{100, 0.5, 8 * time.Hour},
	}
	for _, tt := range tests {
		if got := webhooks.Backoff(tt.n, tt.jitter); got != tt.want {
			t.Errorf("Backoff(%d, %g) = %v; want %v", tt.n, tt.jitter, got, tt.want)
		}
	}
}

// TestDeliverSpreadsRetries: the retry after a failed attempt is the
// schedule's step spread by the service's Jitter.
func TestDeliverSpreadsRetries(t *testing.T) {
	for _, jitter := range []float64{0, 0.5, 0.99} {
		f := newFixture(t)
		f.svc.Jitter = func() float64 { return jitter }
		ctx := context.Background()
		rcv := &receiver{t: t, answers: []int{503}, secret: func() string { s, _ := f.svc.Secret(ctx, "acme"); return s }}
		srv := httptest.NewServer(rcv)
		j := f.endJob(t, "acme", srv.URL, jobs.Completed)
		retry, err := f.svc.Deliver(ctx, j.ID)
		srv.Close()
		if want := webhooks.Backoff(1, jitter); err != nil || retry != want {
			t.Errorf("jitter %g: Deliver after a 503 = %v, %v; want a retry after %v", jitter, retry, err, want)
		}
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// queue records SendWebhook calls.
type queue struct {
	mu   sync.Mutex
	sent []string
}

func (q *queue) SendWebhook(ctx context.Context, id string, delay time.Duration) error {
	q.mu.Lock()
	q.sent = append(q.sent, id)
	q.mu.Unlock()
	return nil
}

// receiver is a webhook endpoint that verifies every request with the
// standardwebhooks library and answers with the statuses of answers in
// turn (then 200).
type receiver struct {
	t       *testing.T
	secret  func() string
	answers []int
	hang    chan struct{} // if not nil, requests wait on it
	// anyTime skips the timestamp's tolerance (a test clock far ahead).
	anyTime bool
	mu      sync.Mutex
	got     []got
}

type got struct {
	id    string
	body  map[string]any
	valid bool
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	wh, err := standardwebhooks.NewWebhook(r.secret())
	if err != nil {
		r.t.Error(err)
	}
	verify := wh.Verify
	if r.anyTime {
		verify = wh.VerifyIgnoringTimestamp
	}
	verr := verify(body, req.Header)
	if verr != nil {
		r.t.Errorf("delivery %s does not verify: %v", req.Header.Get("webhook-id"), verr)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		r.t.Errorf("body is not JSON: %v", err)
	}
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, got{id: req.Header.Get("webhook-id"), body: m, valid: verr == nil})
	r.mu.Unlock()
	if r.hang != nil {
		select {
		case <-r.hang:
		case <-req.Context().Done():
		}
		return
	}
	code := 200
	if n < len(r.answers) {
		code = r.answers[n]
	}
	w.WriteHeader(code)
	io.WriteString(w, "answer \x1b[31m"+http.StatusText(code)+"\n"+strings.Repeat("x", 1000))
}

func (r *receiver) deliveries() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]got(nil), r.got...)
}

type fixture struct {
	st    *localstore.Store
	svc   *webhooks.Service
	clock *clock
	queue *queue
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Now()}
	q := &queue{}
	rng := rand.New(rand.NewPCG(1, 2)) // the retries' spread: the same draws every run
	var mu sync.Mutex
	svc := &webhooks.Service{Store: st, Jobs: st, Queue: q, AllowPrivate: true, Now: c.Now,
		Jitter: func() float64 { mu.Lock(); defer mu.Unlock(); return rng.Float64() },
		Render: func(ctx context.Context, j *jobs.Job) (any, error) {
			return map[string]any{"id": j.ID, "object": "job", "status": j.Status}, nil
		}}
	return &fixture{st: st, svc: svc, clock: c, queue: q}
}

// endJob stores a job of account with url and moves it to status.
func (f *fixture) endJob(t testing.TB, account, url string, status jobs.Status) *jobs.Job {
	t.Helper()
	ctx := context.Background()
	if _, err := f.st.Grant(ctx, account, 100, f.clock.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	id, _ := jobs.NewID(jobs.TypeMusic)
	now := f.clock.Now().Unix()
	j := &jobs.Job{ID: id, Account: account, Type: jobs.TypeMusic, Model: "synthetic-music", Status: jobs.Queued, Price: 1, Hold: 1,
		Created: now, Updated: now, WebhookURL: url}
	if _, err := f.st.Create(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{Updated: now}); err != nil {
		t.Fatal(err)
	}
	p := jobs.Patch{Updated: now}
	if status == jobs.Failed {
		p.Error = &jobs.JobError{Code: jobs.CodeUpstream, Message: "no"}
	}
	got, err := f.st.Transition(ctx, id, jobs.Processing, status, p)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestDeliverRetriesUnderTheSameID(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rcv := &receiver{t: t, answers: []int{500}, secret: func() string { s, _ := f.svc.Secret(ctx, "acme"); return s }}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	j := f.endJob(t, "acme", srv.URL+"/hook", jobs.Completed)

	if err := f.svc.Schedule(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if len(f.queue.sent) != 1 || f.queue.sent[0] != j.ID {
		t.Fatalf("Schedule sent %v; want [%s]", f.queue.sent, j.ID)
	}
	retry, err := f.svc.Deliver(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if retry <= 0 || retry > 10*time.Second {
		t.Fatalf("after a 500, Deliver retry = %v; want within 10 s", retry)
	}
	d, _ := f.st.Delivery(ctx, j.ID)
	if d.Status != webhooks.Pending || d.Attempts != 1 || d.LastCode != 500 {
		t.Errorf("after a 500: delivery %+v; want pending, 1 attempt, code 500", d)
	}
	if len(d.Excerpt) > webhooks.ExcerptChars || strings.ContainsAny(d.Excerpt, "\x1b\n") {
		t.Errorf("excerpt %q is not short and sanitized", d.Excerpt)
	}
	// Early: nothing sent, only the wait.
	if r, err := f.svc.Deliver(ctx, j.ID); err != nil || r <= 0 || len(rcv.deliveries()) != 1 {
		t.Errorf("Deliver before the retry's time = %v, %v, %d sent; want a wait and no request", r, err, len(rcv.deliveries()))
	}
	f.clock.Add(retry)
	if retry, err = f.svc.Deliver(ctx, j.ID); err != nil || retry != 0 {
		t.Fatalf("second Deliver = %v, %v; want 0, nil (delivered)", retry, err)
	}
	got := rcv.deliveries()
	if len(got) != 2 || got[0].id != got[1].id || got[0].id != webhooks.EventID(j.ID) {
		t.Fatalf("deliveries %+v; want two under webhook-id %s", got, webhooks.EventID(j.ID))
	}
	b := got[1].body
	if b["id"] != got[1].id || b["type"] != webhooks.TypeCompleted || b["created"] == nil {
		t.Errorf("event %v; want id, type job.completed, created", b)
	}
	if data, _ := b["data"].(map[string]any); data["id"] != j.ID || data["status"] != "completed" {
		t.Errorf("event data %v; want the job", b["data"])
	}
	d, _ = f.st.Delivery(ctx, j.ID)
	if d.Status != webhooks.Delivered || d.Attempts != 2 || d.LastCode != 200 {
		t.Errorf("delivery %+v; want delivered after 2 attempts, code 200", d)
	}
	// Delivered: a redelivered message sends nothing.
	if retry, err = f.svc.Deliver(ctx, j.ID); err != nil || retry != 0 || len(rcv.deliveries()) != 2 {
		t.Errorf("Deliver of a delivered webhook = %v, %v (%d sent); want nothing sent", retry, err, len(rcv.deliveries()))
	}
	// Resend: once more, same id.
	if _, err := f.svc.Resend(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Deliver(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if got := rcv.deliveries(); len(got) != 3 || got[2].id != got[0].id {
		t.Errorf("after Resend: %d deliveries; want a third under the same id", len(got))
	}
}

func TestDeliverGivesUpAfterMaxAge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rcv := &receiver{t: t, answers: make([]int, 100), anyTime: true, secret: func() string { s, _ := f.svc.Secret(ctx, "acme"); return s }}
	for i := range rcv.answers {
		rcv.answers[i] = 503
	}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	j := f.endJob(t, "acme", srv.URL, jobs.Failed)
	start := f.clock.Now()
	var d *webhooks.Delivery
	for i := 0; i < 50; i++ {
		retry, err := f.svc.Deliver(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if retry == 0 {
			break
		}
		f.clock.Add(retry)
	}
	d, _ = f.st.Delivery(ctx, j.ID)
	if d.Status != webhooks.Failed {
		t.Fatalf("after 50 rounds of 503: %+v; want failed", d)
	}
	if age := f.clock.Now().Sub(start); age < webhooks.MaxAge-time.Second || age > webhooks.MaxAge+time.Minute {
		t.Errorf("gave up after %v; want %v", age, webhooks.MaxAge)
	}
	if got := rcv.deliveries(); got[0].body["type"] != webhooks.TypeFailed {
		t.Errorf("type = %v; want job.failed", got[0].body["type"])
	}
	t.Logf("%d attempts over %v", d.Attempts, f.clock.Now().Sub(start))
}

// A receiver that never answers costs its attempt the timeout, recorded
// as no answer, and is retried.
func TestDeliverTimeout(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.svc.Timeout = 100 * time.Millisecond
	rcv := &receiver{t: t, hang: make(chan struct{}), secret: func() string { s, _ := f.svc.Secret(ctx, "acme"); return s }}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	defer close(rcv.hang)
	j := f.endJob(t, "acme", srv.URL, jobs.Completed)
	retry, err := f.svc.Deliver(ctx, j.ID)
	if err != nil || retry <= 0 {
		t.Fatalf("Deliver to a hanging receiver = %v, %v; want a retry", retry, err)
	}
	d, _ := f.st.Delivery(ctx, j.ID)
	if d.Status != webhooks.Pending || d.LastCode != 0 || !strings.Contains(d.LastError, "no answer") {
		t.Errorf("delivery %+v; want pending, no code, no answer", d)
	}
}

func TestScheduleAndDefaults(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// No URL anywhere: nothing scheduled, no delivery.
	j := f.endJob(t, "acme", "", jobs.Completed)
	if err := f.svc.Schedule(ctx, j.ID); err != nil || len(f.queue.sent) != 0 {
		t.Fatalf("Schedule without a URL = %v, sent %v; want nothing", err, f.queue.sent)
	}
	if _, err := f.svc.Resend(ctx, j.ID); !errors.Is(err, webhooks.ErrNoURL) {
		t.Errorf("Resend without a URL = %v; want ErrNoURL", err)
	}
	// The account's default URL.
	if _, err := f.svc.SetURL(ctx, "acme", "https://127.0.0.1/x"); err != nil {
		t.Fatal(err) // AllowPrivate
	}
	f.svc.AllowPrivate = false
	if _, err := f.svc.SetURL(ctx, "acme", "https://127.0.0.1/x"); err == nil {
		t.Errorf("SetURL(loopback) without AllowPrivate = nil; want refused")
	}
	if err := f.svc.Schedule(ctx, j.ID); err != nil || len(f.queue.sent) != 1 {
		t.Fatalf("Schedule with a default URL = %v, sent %v", err, f.queue.sent)
	}
	// Secrets: one per account, stable; rotation keeps the old one for 24 h.
	s1, _ := f.svc.Secret(ctx, "acme")
	s2, _ := f.svc.Secret(ctx, "acme")
	if s1 != s2 || !strings.HasPrefix(s1, "whsec_") {
		t.Errorf("Secret = %q then %q; want one whsec_ secret", s1, s2)
	}
	c, err := f.svc.Rotate(ctx, "acme")
	if err != nil || c.Secret == s1 || c.Previous != s1 || c.PreviousUntil != f.clock.Now().Add(webhooks.RotationGrace).Unix() {
		t.Errorf("Rotate = %+v, %v; want a new secret, the old one previous for 24 h", c, err)
	}
}

// A URL whose host resolves to a refused address (here a loopback one,
// stored before the operator turned GENWAY_WEBHOOK_ALLOW_PRIVATE off) is
// refused when dialled: nothing reaches it, and the attempt says why.
func TestDeliverRefusesInternalAddressAtDial(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer srv.Close()
	j := f.endJob(t, "acme", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), jobs.Completed)
	f.svc.AllowPrivate = false
	if retry, err := f.svc.Deliver(ctx, j.ID); err != nil || retry <= 0 {
		t.Fatalf("Deliver = %v, %v; want a retry", retry, err)
	}
	d, _ := f.st.Delivery(ctx, j.ID)
	if hit || d.LastCode != 0 || !strings.Contains(d.LastError, "not allowed") {
		t.Errorf("delivery %+v (receiver hit: %v); want refused at dial, nothing sent", d, hit)
	}
}

// pendingFunc is a webhooks.PendingStore.
type pendingFunc func(ctx context.Context, before time.Time, limit int) ([]string, error)

func (f pendingFunc) PendingDeliveries(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return f(ctx, before, limit)
}

// TestRequeueAfterALostMessage: a delivery whose attempt died with its
// process (claimed, never recorded) is sent again by Requeue, and the
// messages it makes attempt it once however many there are: each attempt
// is claimed with a conditional write.
func TestRequeueAfterALostMessage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hang := make(chan struct{})
	rcv := &receiver{t: t, hang: hang, secret: func() string { s, _ := f.svc.Secret(ctx, "acme"); return s }}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	j := f.endJob(t, "acme", srv.URL+"/hook", jobs.Completed)
	// The killed process: it made the delivery and claimed its first
	// attempt (a lease of Timeout + 5 s), and died before the POST.
	d, err := f.st.AddDelivery(ctx, &webhooks.Delivery{ID: webhooks.EventID(j.ID), JobID: j.ID, Account: "acme", URL: srv.URL + "/hook",
		Type: webhooks.TypeCompleted, Created: f.clock.Now().Unix(), Status: webhooks.Pending, NextAt: f.clock.Now().Unix(),
		Deadline: f.clock.Now().Add(webhooks.MaxAge).Unix(), Updated: f.clock.Now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	claimed := *d
	claimed.Attempts, claimed.NextAt = 1, f.clock.Now().Add(webhooks.Timeout+5*time.Second).Unix()
	if err := f.st.SaveDelivery(ctx, &claimed, 0); err != nil {
		t.Fatal(err)
	}

	var asked time.Time
	ps := pendingFunc(func(_ context.Context, before time.Time, limit int) ([]string, error) {
		asked = before
		return []string{j.ID}, nil
	})
	before := f.clock.Now().Add(webhooks.Timeout + 10*time.Second)
	if n, err := f.svc.Requeue(ctx, ps, before); err != nil || n != 1 || !asked.Equal(before) {
		t.Fatalf("Requeue = %d, %v (asked for those due before %v); want 1 sent for those due before %v", n, err, asked, before)
	}
	if f.queue.sent[len(f.queue.sent)-1] != j.ID {
		t.Errorf("Requeue sent %v; want %s", f.queue.sent, j.ID)
	}
	// Its message, and a duplicate, come once the lease is over: one
	// attempt is made.
	f.clock.Add(webhooks.Timeout + 6*time.Second)
	results := make(chan error, 2)
	for range 2 {
		go func() { _, err := f.svc.Deliver(ctx, j.ID); results <- err }()
	}
	if err := <-results; err != nil { // the one that lost the claim returns at once
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(rcv.deliveries()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the attempt holding the claim sent nothing within 10 s")
		}
	}
	close(hang)
	if err := <-results; err != nil {
		t.Fatal(err)
	}
	if got := rcv.deliveries(); len(got) != 1 {
		t.Errorf("two messages made %d attempts; want 1", len(got))
	}
	if d, _ := f.st.Delivery(ctx, j.ID); d.Attempts != 2 {
		t.Errorf("delivery after the attempt: %+v; want 2 attempts counted (the dead one and this one)", d)
	}

	failing := pendingFunc(func(context.Context, time.Time, int) ([]string, error) { return nil, errors.New("scan throttled") })
	if _, err := f.svc.Requeue(ctx, failing, before); err == nil {
		t.Error("Requeue with a failing store = nil error; want it")
	}
}
