package chat_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/metrics"
)

// cutProvider streams deltas, then ends with err if it is set, else
// with final. Every error comes with cut (the usage reported so far).
// Between deltas it returns ctx's error once ctx is done, as a provider
// whose upstream read is cancelled does.
type cutProvider struct {
	deltas []chat.Delta
	cut    *chat.Response
	err    error
	final  chat.Response
	calls  atomic.Int32
}

func (f *cutProvider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	f.calls.Add(1)
	if f.err != nil {
		return f.cut, f.err
	}
	r := f.final
	return &r, nil
}

func (f *cutProvider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	f.calls.Add(1)
	for _, d := range f.deltas {
		if err := ctx.Err(); err != nil {
			return f.cut, &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Err: err}
		}
		if err := w.Delta(d); err != nil {
			return f.cut, err
		}
		if err := w.Flush(); err != nil {
			return f.cut, err
		}
	}
	if f.err != nil {
		return f.cut, f.err
	}
	r := f.final
	return &r, nil
}

// goneSink is a sink whose client goes away at its n-th delta (-1: at
// its start, before any): the
// delta fails with gone, or, with cancel set, the request's context is
// cancelled instead (the next read of the upstream fails).
type goneSink struct {
	sink
	n      int
	gone   error
	cancel context.CancelFunc
}

// Start cancels the request at once for n == -1 (the client goes away
// while the upstream works, before the first token).
func (s *goneSink) Start() error {
	if s.n == -1 && s.cancel != nil {
		s.cancel()
	}
	return s.sink.Start()
}

func (s *goneSink) Delta(d chat.Delta) error {
	s.sink.Delta(d)
	if s.n--; s.n == 0 {
		if s.cancel != nil {
			s.cancel()
			return nil
		}
		return s.gone
	}
	return nil
}

// estimatedCount reads genway_chat_usage_estimated_total{provider, reason}
// from the default registry.
func estimatedCount(t *testing.T, provider, reason string) int {
	t.Helper()
	var b bytes.Buffer
	if _, err := metrics.Default.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	prefix := `genway_chat_usage_estimated_total{provider="` + provider + `",reason="` + reason + `"} `
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			return n
		}
	}
	return 0
}

// TestRunCut: a stream cut short after its first token, by the upstream
// or by the client, is charged for its input and the output delivered:
// the counts the provider reported before the end, the rest estimated
// (input: "hello there, how are you" as sent, 26 bytes, is 7 tokens and
// 4 for its message; output: "Hello world again", 17 bytes, 5 tokens),
// at synthetic/priced's 1 credit an input and 2 an output token. The
// sink has no End; Run returns the AttemptsError.
func TestRunCut(t *testing.T) {
	cat, err := catalog.Parse([]byte(pricedCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	deltas := []chat.Delta{{Content: "Hello"}, {Content: " world"}, {Content: " again"}}
	broke := &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped, Message: "stream ended early"}
	gone := errors.New("write: broken pipe")
	body := func(model, extra string) string {
		return `{"model":"` + model + `","stream":true` + extra + `,"messages":[{"role":"user","content":"hello there, how are you"}]}`
	}
	tests := []struct {
		name      string
		body      string
		resp      *chat.Response // reported with the error
		err       error          // the provider's, after its deltas
		goneAt    int            // the client goes away at this delta (0: never)
		cancel    bool           // by its context, not a failed write
		want      string         // the recorder's call
		status    string
		estimated bool
	}{
		{"upstream broke, nothing reported", body("synthetic/priced", ""), nil, broke, 0, false,
			"acct synthetic/priced 11 5 21", credits.StatusUpstreamError, true},
		{"upstream broke, input reported", body("synthetic/priced", ""), &chat.Response{Usage: chat.Usage{PromptTokens: 30}}, broke, 0, false,
			"acct synthetic/priced 30 5 40", credits.StatusUpstreamError, true},
		{"upstream broke, all reported", body("synthetic/priced", ""), &chat.Response{Usage: chat.Usage{PromptTokens: 30, CompletionTokens: 4}}, broke, 0, false,
			"acct synthetic/priced 30 4 38", credits.StatusUpstreamError, false},
		// The client's write failed at the second delta: two delivered
		// ("Hello world", 11 bytes, 3 tokens).
		{"client write failed", body("synthetic/priced", ""), nil, nil, 2, false,
			"acct synthetic/priced 11 3 17", credits.StatusClientClosed, true},
		{"client cancelled", body("synthetic/priced", ""), nil, nil, 2, true,
			"acct synthetic/priced 11 3 17", credits.StatusClientClosed, true},
		// The client goes away before the first token, while the
		// upstream works: the input is charged (estimated, or as
		// reported), no output.
		{"client gone before the first token", body("synthetic/priced", ""), nil, nil, -1, true,
			"acct synthetic/priced 11 0 11", credits.StatusClientClosed, true},
		{"client gone before the first token, input reported", body("synthetic/priced", ""), &chat.Response{Usage: chat.Usage{PromptTokens: 30}}, nil, -1, true,
			"acct synthetic/priced 30 0 30", credits.StatusClientClosed, false},
		// max_tokens bounds the estimated output.
		{"max_tokens bounds the estimate", body("synthetic/priced", `,"max_tokens":2`), nil, broke, 0, false,
			"acct synthetic/priced 11 2 15", credits.StatusUpstreamError, true},
		// An unpriced model is recorded as reported, not estimated.
		{"unpriced", body("synthetic/free", ""), &chat.Response{Usage: chat.Usage{PromptTokens: 30}}, broke, 0, false,
			"acct synthetic/free 30 0 0", credits.StatusUpstreamError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			var logged bytes.Buffer
			prov := &cutProvider{deltas: deltas, cut: tt.resp, err: tt.err,
				final: chat.Response{FinishReason: chat.FinishStop, Usage: chat.Usage{PromptTokens: 99, CompletionTokens: 99}}}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov}, Usage: rec,
				Log: slog.New(slog.NewTextHandler(&logged, nil))})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &goneSink{n: tt.goneAt, gone: gone}
			if tt.cancel {
				s.cancel = cancel
			}
			reason := tt.status
			before := estimatedCount(t, "synthetic", reason)
			err := gw.Run(ctx, "acct", params(t, tt.body), s)
			var ae *chat.AttemptsError
			if !errors.As(err, &ae) {
				t.Fatalf("Run = %v; want an *AttemptsError", err)
			}
			if calls := strings.Join(s.calls, "|"); strings.Contains(calls, "end") {
				t.Errorf("sink calls %q; want no End for an answer cut short", calls)
			}
			if len(rec.calls) != 1 || rec.calls[0] != tt.want || rec.ctxErr != nil {
				t.Errorf("recorded %q (context error %v); want [%q]", rec.calls, rec.ctxErr, tt.want)
			}
			line := logged.String()
			for _, want := range []string{"status=" + tt.status, "partial=true", "estimated=" + strconv.FormatBool(tt.estimated)} {
				if !strings.Contains(line, want) {
					t.Errorf("log %q; want %s", line, want)
				}
			}
			wantCount := 0
			if tt.estimated {
				wantCount = 1
			}
			if got := estimatedCount(t, "synthetic", reason) - before; got != wantCount {
				t.Errorf("genway_chat_usage_estimated_total{reason=%q} went up by %d; want %d", reason, got, wantCount)
			}
			if prov.calls.Load() != 1 {
				t.Errorf("the provider was called %d times; want once (no attempt after the answer began)", prov.calls.Load())
			}
		})
	}
}

// TestRunNoUsage: an answer of a priced model that ends without usage is
// charged by the estimate, logged with its provider and model, and
// counted (reason no_usage); an unpriced model's is recorded as it came.
func TestRunNoUsage(t *testing.T) {
	cat, err := catalog.Parse([]byte(pricedCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, model string
		stream      bool
		want        string
		warned      bool
	}{
		// "hello there, how are you": 11 input tokens; "Hello world
		// again": 5 output tokens, delivered or whole.
		{"stream", "synthetic/priced", true, "acct synthetic/priced 11 5 21", true},
		{"whole", "synthetic/priced", false, "acct synthetic/priced 11 5 21", true},
		{"unpriced", "synthetic/free", true, "acct synthetic/free 0 0 0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			var logged bytes.Buffer
			prov := &cutProvider{deltas: []chat.Delta{{Content: "Hello"}, {Content: " world"}, {Content: " again"}},
				final: chat.Response{FinishReason: chat.FinishStop}}
			if !tt.stream {
				prov.final.Content = "Hello world again"
			}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov}, Usage: rec,
				Log: slog.New(slog.NewTextHandler(&logged, nil))})
			before := estimatedCount(t, "synthetic", "no_usage")
			body := `{"model":"` + tt.model + `","stream":` + strconv.FormatBool(tt.stream) + `,"messages":[{"role":"user","content":"hello there, how are you"}]}`
			s := &sink{}
			if err := gw.Run(context.Background(), "acct", params(t, body), s); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if len(rec.calls) != 1 || rec.calls[0] != tt.want {
				t.Errorf("recorded %q; want [%q]", rec.calls, tt.want)
			}
			warned := strings.Contains(logged.String(), "reported no usage") && strings.Contains(logged.String(), "model="+tt.model) &&
				strings.Contains(logged.String(), "provider=synthetic")
			if warned != tt.warned {
				t.Errorf("log %q; want a warning naming provider and model: %v", logged.String(), tt.warned)
			}
			want := map[bool]int{false: 0, true: 1}[tt.warned]
			if got := estimatedCount(t, "synthetic", "no_usage") - before; got != want {
				t.Errorf("genway_chat_usage_estimated_total{reason=no_usage} went up by %d; want %d", got, want)
			}
		})
	}
}

// blockingProvider answers a whole completion once released, and
// reports the error of its context then; fail makes it fail instead.
type blockingProvider struct {
	started chan struct{}
	release chan struct{}
	fail    error
	calls   atomic.Int32
	mu      sync.Mutex
	ctxErr  error
}

func (f *blockingProvider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	if f.calls.Add(1) == 1 {
		close(f.started)
	}
	<-f.release
	f.mu.Lock()
	f.ctxErr = ctx.Err()
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return &chat.Response{Content: "Hello", FinishReason: chat.FinishStop, Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 2}}, nil
}

func (f *blockingProvider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	return f.Complete(ctx, req)
}

// TestRunWholeClientGone: a whole answer whose client goes away while the
// upstream works runs on, detached from the client, and is charged its
// exact usage (status client_closed, not partial); an upstream failure
// then is not retried nor passed to a fallback: no attempt for nobody
// (the request leaves its failed record, charged nothing).
func TestRunWholeClientGone(t *testing.T) {
	cat, err := catalog.Parse([]byte(pricedCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		fail      error
		wantCalls int32
		want      []string
	}{
		{"charged exactly", nil, 1, []string{"acct synthetic/priced 3 2 7"}},
		// The request reached a provider: a failed record, no charge.
		{"no retry, no fallback", &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Status: 502}, 1, []string{"acct  0 0 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			var logged bytes.Buffer
			prov := &blockingProvider{started: make(chan struct{}), release: make(chan struct{}), fail: tt.fail}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov}, Usage: rec,
				Log: slog.New(slog.NewTextHandler(&logged, nil))})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			body := `{"model":"synthetic/priced","models":["synthetic/priced","synthetic/cheap"],"messages":[{"role":"user","content":"hi"}]}`
			s := &endSink{}
			go func() { done <- gw.Run(ctx, "acct", params(t, body), s) }()
			<-prov.started
			cancel() // the client goes away while the upstream works
			close(prov.release)
			err := <-done
			if tt.fail == nil && err != nil {
				t.Errorf("Run = %v; want nil (the sink took the answer)", err)
			}
			if tt.fail != nil && err == nil {
				t.Errorf("Run = nil; want the upstream's failure")
			}
			prov.mu.Lock()
			ctxErr := prov.ctxErr
			prov.mu.Unlock()
			if ctxErr != nil {
				t.Errorf("the upstream call's context = %v once the client left; want it running on", ctxErr)
			}
			if got := prov.calls.Load(); got != tt.wantCalls {
				t.Errorf("the provider was called %d times; want %d", got, tt.wantCalls)
			}
			if strings.Join(rec.calls, "|") != strings.Join(tt.want, "|") {
				t.Errorf("recorded %q; want %q", rec.calls, tt.want)
			}
			if r := s.resp; tt.fail == nil && (r == nil || r.Status != credits.StatusClientClosed || r.Partial || r.Estimated) {
				t.Errorf("the answer ended %+v; want status client_closed, not partial, not estimated", r)
			}
		})
	}
}

// endSink is a sink that keeps the Response it ended with.
type endSink struct {
	sink
	resp *chat.Response
}

func (s *endSink) End(r *chat.Response) error {
	s.resp = r
	return s.sink.End(r)
}

// TestHoldCut: a held completion (a key with a credit limit) cut short is
// charged what it produced, written at once (the key's spend shows it),
// and its hold released.
func TestHoldCut(t *testing.T) {
	for _, kind := range holdKinds {
		t.Run(kind.name, func(t *testing.T) { testHoldCut(t, kind.holds) })
	}
}

func testHoldCut(t *testing.T, holds func(*localstore.Store) chat.Holds) {
	const cr = credits.Credit
	s, pr := holdStore(t, 1000*cr, 10*cr)
	// synthetic/priced: 1,000 credits per million input tokens, 3,000
	// per million output. 20 input tokens reported, 3 output delivered
	// ("Hello world", 11 bytes): 0.02 + 0.009.
	prov := &cutProvider{deltas: []chat.Delta{{Content: "Hello"}, {Content: " world"}}, cut: &chat.Response{Usage: chat.Usage{PromptTokens: 20}},
		err: &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped}}
	gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov},
		Balances: s, Holds: holds(s), Usage: failingRecorder{t}})
	p := hi("1000")
	p.Stream = true
	err := gw.Run(auth.WithPrincipal(context.Background(), pr), "acct", p, &sink{})
	var ae *chat.AttemptsError
	if !errors.As(err, &ae) {
		t.Fatalf("Run = %v; want an *AttemptsError", err)
	}
	const want = 29_000
	spent, held, avail := keyState(t, s, pr.KeyID)
	if spent != want || held != 0 || avail != 1000*cr-want {
		t.Errorf("key spent %s held %s, account available %s; want %s, 0, %s", spent, held, avail, credits.Amount(want), 1000*cr-want)
	}
}
