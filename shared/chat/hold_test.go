package chat_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
)

// holdStore is an embedded store with account "acct" (balance credits)
// and a key of it limited to limit credits, as principal.
func holdStore(t testing.TB, balance, limit credits.Amount) (*localstore.Store, auth.Principal) {
	t.Helper()
	s, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, err := s.Grant(ctx, "acct", balance, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	r := auth.NewRecord(k, "acct", time.Now())
	r.CreditLimit = &limit
	if err := s.PutKey(ctx, r); err != nil {
		t.Fatal(err)
	}
	return s, auth.Principal{Account: "acct", KeyID: r.ID, Limited: true}
}

// holdKinds are the Holds a gateway may have on the embedded store: the
// store itself (a commit per hold, release and record, as DynamoDB's
// conditional writes) and its MemoryHolds (what genway serve uses).
var holdKinds = []struct {
	name  string
	holds func(s *localstore.Store) chat.Holds
}{
	{"store", func(s *localstore.Store) chat.Holds { return s }},
	{"memory", func(s *localstore.Store) chat.Holds { return s.MemoryHolds() }},
}

// keyState returns the key's spent and held credits and the account's
// available ones.
func keyState(t *testing.T, s *localstore.Store, key string) (spent, held, available credits.Amount) {
	t.Helper()
	r, err := s.KeyByID(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Account(context.Background(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	return r.Spent, r.Held, a.Available
}

func hi(maxTokens string) *chat.Params {
	p := &chat.Params{Model: "synthetic/priced", Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}}
	if maxTokens != "" {
		p.MaxTokens = []byte(maxTokens)
	}
	return p
}

// TestHoldLimitedKey: a priced completion of a key with a credit limit
// holds its most possible cost before the call (the input's bound and
// max_tokens, else HeldOutputTokens, sent upstream so that the bound
// holds), is charged its usage, written at once, and leaves nothing held;
// one whose most possible cost does not fit what the key has left is a
// 402 key_credit_limit before any call, with nothing written; a failed
// completion is charged nothing and releases its hold.
func TestHoldLimitedKey(t *testing.T) {
	// synthetic/priced: 1,000 credits per million input tokens, 3,000 per
	// million output tokens. "hi" is bound at 20 input tokens.
	const cr = credits.Credit
	tests := []struct {
		name          string
		limit         credits.Amount
		params        *chat.Params
		upstreamErr   error
		usage         chat.Usage // the provider's answer's
		wantMaxTokens int        // what the provider is asked for; -1: not called
		wantErr       error
		wantSpent     credits.Amount
	}{
		{"max_tokens fits", 10 * cr, hi("1000"), nil, chat.Usage{PromptTokens: 1000, CompletionTokens: 1000}, 1000, nil, 4 * cr},
		// 0.01 + 6 credits, exactly (not rounded up to 7).
		{"no max_tokens: the held bound is sent", 20 * cr, hi(""), nil, chat.Usage{PromptTokens: 10, CompletionTokens: 2000}, chat.HeldOutputTokens, nil, 6_010_000},
		// The bound: 20 x 0.001 + 4096 x 0.003 = 12.308 credits, one
		// micro-credit past the first limit, within the second.
		{"no max_tokens does not fit", 12_307_999, hi(""), nil, chat.Usage{}, -1, credits.ErrKeyLimit, 0},
		{"no max_tokens just fits", 12_308_000, hi(""), nil, chat.Usage{PromptTokens: 1, CompletionTokens: 1}, chat.HeldOutputTokens, nil, 4000},
		{"max_tokens does not fit", 10 * cr, hi("4000"), nil, chat.Usage{}, -1, credits.ErrKeyLimit, 0},
		{"upstream fails", 10 * cr, hi("1000"), &chat.UpstreamError{Kind: chat.UpstreamBadRequest, Status: 400, Message: "no"}, chat.Usage{}, 1000, &chat.UpstreamError{}, 0},
	}
	for _, kind := range holdKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				s, pr := holdStore(t, 1000*cr, tt.limit)
				prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: tt.usage}, err: tt.upstreamErr}
				gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov},
					Balances: s, Holds: kind.holds(s), Usage: failingRecorder{t}})
				pp := *tt.params
				p := &pp
				p.ID = "chatcmpl-held-" + strings.ReplaceAll(tt.name, " ", "-")
				err := gw.Run(auth.WithPrincipal(context.Background(), pr), "acct", p, &sink{})
				switch want := tt.wantErr.(type) {
				case nil:
					if err != nil {
						t.Fatalf("Run = %v; want nil", err)
					}
				case *chat.UpstreamError:
					if !errors.As(err, &want) {
						t.Fatalf("Run = %v; want the upstream's error", err)
					}
				default:
					e := apierr.As(err)
					if !errors.Is(err, want) || e == nil || e.Kind != apierr.InsufficientQuota || !strings.Contains(e.Message, "max_tokens") {
						t.Fatalf("Run = %v; want a 402 matching %v that names max_tokens", err, want)
					}
				}
				prov.mu.Lock()
				got := prov.got
				prov.mu.Unlock()
				switch {
				case tt.wantMaxTokens < 0 && len(got) != 0:
					t.Errorf("the provider was called %d times; want none", len(got))
				case tt.wantMaxTokens >= 0 && (len(got) != 1 || got[0].MaxTokens != tt.wantMaxTokens):
					t.Errorf("the provider got %d requests; want one with max_tokens %d", len(got), tt.wantMaxTokens)
				}
				spent, held, avail := keyState(t, s, pr.KeyID)
				if spent != tt.wantSpent || held != 0 || avail != 1000*cr-tt.wantSpent {
					t.Errorf("key spent %s held %s, account available %s; want %s, 0, %s", spent, held, avail, tt.wantSpent, 1000*cr-tt.wantSpent)
				}
				if open, err := s.OpenReservations(context.Background(), time.Now().Unix()+1, 10); err != nil || len(open) != 0 {
					t.Errorf("open reservations %v, %v; want none", open, err)
				}
				// The record is written at once, with the charge: answered,
				// failed at the upstream, or none for a refusal before any call.
				r, err := s.Record(context.Background(), p.ID)
				switch {
				case tt.wantMaxTokens < 0:
					if !errors.Is(err, credits.ErrRecordNotFound) {
						t.Errorf("Record(%q) = %+v, %v; want none for a refusal", p.ID, r, err)
					}
				case tt.upstreamErr != nil:
					if err != nil || r.Status != credits.StatusFailed || r.Cost != 0 || r.Key != pr.KeyID {
						t.Errorf("Record(%q) = %+v, %v; want a failed record of the key, no cost", p.ID, r, err)
					}
				case err != nil || r.Cost != tt.wantSpent || r.Key != pr.KeyID || r.Status != credits.StatusCompleted:
					t.Errorf("Record(%q) = %+v, %v; want a completed record of the key costing %s", p.ID, r, err, tt.wantSpent)
				}
			})
		}
	}
}

// TestHoldParallel: 50 parallel priced completions, each holding 3.02
// credits (at max_tokens 1000) and charged 2.71, on a key limited to 10
// never take it past its limit: the successes are charged, the others
// refused with the key's 402, and nothing stays held.
func TestHoldParallel(t *testing.T) {
	for _, kind := range holdKinds {
		t.Run(kind.name, func(t *testing.T) { testHoldParallel(t, kind.holds) })
	}
}

func testHoldParallel(t *testing.T, holds func(*localstore.Store) chat.Holds) {
	s, pr := holdStore(t, 1000*credits.Credit, 10*credits.Credit)
	// 20 input and 1000 output tokens hold 3.02; the provider reports 10
	// and 900: 0.01 + 2.7 = 2.71 credits charged.
	prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 10, CompletionTokens: 900}}}
	gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov}, Balances: s, Holds: holds(s)})
	ctx := auth.WithPrincipal(context.Background(), pr)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := gw.Run(ctx, "acct", hi("1000"), &sink{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, credits.ErrKeyLimit):
				refused++
			default:
				t.Errorf("Run = %v; want nil or the key's 402", err)
			}
		}()
	}
	wg.Wait()
	spent, held, _ := keyState(t, s, pr.KeyID)
	if spent > 10*credits.Credit || held != 0 || spent != credits.Amount(ok)*2_710_000 || ok+refused != 50 || ok == 0 {
		t.Errorf("%d answered, %d refused: key spent %s held %s; want at most 10 spent (2.71 per answer), 0 held", ok, refused, spent, held)
	}
	t.Logf("%d answered, %d refused, %s spent of 10", ok, refused, spent)
}

// TestHoldNotLimited: without a key limit (no key, a key without one) or
// for an unpriced model nothing is held and usage goes through the
// gateway's recorder as before.
func TestHoldNotLimited(t *testing.T) {
	tests := []struct {
		name  string
		pr    *auth.Principal
		model string
	}{
		{"no key", nil, "synthetic/priced"},
		{"key without a limit", &auth.Principal{Account: "acct", KeyID: "key_x"}, "synthetic/priced"},
		{"unpriced model", &auth.Principal{Account: "acct", KeyID: "key_x", Limited: true}, "synthetic/echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := holdStore(t, 1000*credits.Credit, 10*credits.Credit)
			rec := &countingRecorder{}
			prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 10, CompletionTokens: 10}}}
			gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov}, Balances: s, Holds: s, Usage: rec})
			ctx := context.Background()
			if tt.pr != nil {
				ctx = auth.WithPrincipal(ctx, *tt.pr)
			}
			p := hi("")
			p.Model = tt.model
			if err := gw.Run(ctx, "acct", p, &sink{}); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if rec.n != 1 || prov.got[0].MaxTokens != 0 {
				t.Errorf("recorder called %d times, max_tokens %d; want once, 0 (the provider's default)", rec.n, prov.got[0].MaxTokens)
			}
		})
	}
}

// TestHoldNeedsHolds: a limited key's priced completion on a gateway with
// Balances and no Holds is refused before any upstream call (its limit
// cannot be kept), never run unheld; an unpriced one runs. Without
// Balances either, credits are off: it runs unheld.
func TestHoldNeedsHolds(t *testing.T) {
	tests := []struct {
		name     string
		balances bool
		model    string
		wantErr  bool
	}{
		{"balances, no holds, priced", true, "synthetic/priced", true},
		{"balances, no holds, unpriced", true, "synthetic/echo", false},
		{"no balances, no holds, priced", false, "synthetic/priced", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, pr := holdStore(t, 1000*credits.Credit, 10*credits.Credit)
			prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 10, CompletionTokens: 10}}}
			cfg := chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov}, Usage: &countingRecorder{}}
			if tt.balances {
				cfg.Balances = s
			}
			gw := chat.NewGateway(cfg)
			p := hi("1000")
			p.Model = tt.model
			err := gw.Run(auth.WithPrincipal(context.Background(), pr), "acct", p, &sink{})
			if (err != nil) != tt.wantErr || len(prov.got) != map[bool]int{true: 0, false: 1}[tt.wantErr] {
				t.Errorf("Run = %v with %d upstream calls; want an error %v, with a call %v", err, len(prov.got), tt.wantErr, !tt.wantErr)
			}
			if spent, held, _ := keyState(t, s, pr.KeyID); spent != 0 || held != 0 {
				t.Errorf("key spent %s, held %s; want nothing (no Holds)", spent, held)
			}
		})
	}
}

// failingRecorder fails the test if the gateway's recorder is used: a held
// completion's usage is written to the store at once instead.
type failingRecorder struct{ t *testing.T }

func (failingRecorder) InMemory() bool                         { return false }
func (failingRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

func (f failingRecorder) Record(context.Context, credits.Record) error {
	f.t.Error("the gateway's UsageRecorder was called for a held completion")
	return nil
}

type countingRecorder struct {
	mu sync.Mutex
	n  int
}

func (*countingRecorder) InMemory() bool                         { return false }
func (*countingRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

func (c *countingRecorder) Record(context.Context, credits.Record) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

// answering is a provider that answers every request with resp.
type answering struct{ resp chat.Response }

func (a answering) Complete(context.Context, *chat.Request) (*chat.Response, error) {
	r := a.resp
	return &r, nil
}

func (a answering) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	return nil, errors.New("answering: no streams")
}

// BenchmarkRunHeld: what a key's credit limit adds to a priced completion
// in the gateway, as genway serve runs it (records kept by a
// BufferedRecorder; the limited key's held in the embedded store's
// MemoryHolds and written behind), against the same completion by a key
// without a limit.
//
//	go test ./shared/chat -run '^$' -bench RunHeld -benchmem
func BenchmarkRunHeld(b *testing.B) {
	s, limited := holdStore(b, 1_000_000_000*credits.Credit, 1_000_000_000*credits.Credit)
	rec := chat.NewBufferedRecorder(s, 100*time.Millisecond, nil)
	defer rec.Close(context.Background())
	// Within the hold of hi("16") (16 output tokens), as a real answer
	// is: an answer over its hold is logged, which is not what is measured.
	prov := answering{chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 10, CompletionTokens: 16}}}
	gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(b), Providers: map[string]chat.Provider{"synthetic": prov},
		Balances: s, Holds: s.MemoryHolds(), Usage: rec})
	unlimited := limited
	unlimited.Limited = false
	for _, k := range []struct {
		name string
		pr   auth.Principal
	}{{"account-key", unlimited}, {"limited-key", limited}} {
		b.Run(k.name, func(b *testing.B) {
			ctx := auth.WithPrincipal(context.Background(), k.pr)
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := gw.Run(ctx, "acct", hi("16"), &sink{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
