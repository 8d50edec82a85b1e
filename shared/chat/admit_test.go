package chat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// fakeBalances is a chat.Balances answering with Fn and counting calls.
type fakeBalances struct {
	Fn    func(ctx context.Context, id string) (credits.Account, error)
	mu    sync.Mutex
	calls []string
}

func (f *fakeBalances) Account(ctx context.Context, id string) (credits.Account, error) {
	f.mu.Lock()
	f.calls = append(f.calls, id)
	f.mu.Unlock()
	return f.Fn(ctx, id)
}

// available is a fakeBalances whose account has n credits available.
func available(n credits.Amount) *fakeBalances {
	return &fakeBalances{Fn: func(_ context.Context, id string) (credits.Account, error) {
		return credits.Account{ID: id, Balance: n, Available: n}, nil
	}}
}

// failing is a fakeBalances that fails the test if it is read at all.
func failing(t *testing.T) *fakeBalances {
	return &fakeBalances{Fn: func(_ context.Context, id string) (credits.Account, error) {
		t.Errorf("Balances.Account(%q) called; want no store read", id)
		return credits.Account{}, errors.New("unexpected read")
	}}
}

func admitCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load("testdata/priced_catalog.json", catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// admitCall prepares a one-message call of model on gw.
func admitCall(t testing.TB, gw *chat.Gateway, model string) *chat.Call {
	t.Helper()
	c, err := gw.Prepare(context.Background(), &chat.Params{Model: model,
		Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}})
	if err != nil {
		t.Fatalf("Prepare(%q) = %v", model, err)
	}
	return c
}

func TestAdmit(t *testing.T) {
	errStore := errors.New("store unreachable")
	tests := []struct {
		name     string
		model    string
		balances func(t *testing.T) *fakeBalances // nil: no Balances configured
		// wantKind is the apierr kind of the error; -1: no error; Internal:
		// a plain (non-apierr) error wrapping errStore.
		wantKind  apierr.Kind
		wantReads int
	}{
		{"priced, available 0", "synthetic/priced", func(*testing.T) *fakeBalances { return available(0) }, apierr.InsufficientQuota, 1},
		{"priced, available -5", "synthetic/priced", func(*testing.T) *fakeBalances { return available(-5) }, apierr.InsufficientQuota, 1},
		{"priced, available 1", "synthetic/priced", func(*testing.T) *fakeBalances { return available(1) }, -1, 1},
		{"output-priced, available 0", "synthetic/priced-out", func(*testing.T) *fakeBalances { return available(0) }, apierr.InsufficientQuota, 1},
		{"output-priced, available 7", "synthetic/priced-out", func(*testing.T) *fakeBalances { return available(7) }, -1, 1},
		{"priced, unknown account", "synthetic/priced", func(*testing.T) *fakeBalances {
			return &fakeBalances{Fn: func(context.Context, string) (credits.Account, error) {
				return credits.Account{}, fmt.Errorf("get account: %w", credits.ErrAccountNotFound)
			}}
		}, apierr.InsufficientQuota, 1},
		{"priced, store error", "synthetic/priced", func(*testing.T) *fakeBalances {
			return &fakeBalances{Fn: func(context.Context, string) (credits.Account, error) { return credits.Account{}, errStore }}
		}, apierr.Internal, 1},
		{"priced, no Balances", "synthetic/priced", nil, -1, 0},
		{"unpriced, no price", "synthetic/echo", failing, -1, 0},
		{"unpriced, zero price", "synthetic/zero", failing, -1, 0},
		{"unpriced, job price only", "synthetic/per-job", failing, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}}
			var fb *fakeBalances
			if tt.balances != nil {
				fb = tt.balances(t)
				cfg.Balances = fb
			}
			gw := chat.NewGateway(cfg)
			err := gw.Admit(context.Background(), "acct", admitCall(t, gw, tt.model))
			switch tt.wantKind {
			case -1:
				if err != nil {
					t.Errorf("Admit(%q) = %v; want nil", tt.model, err)
				}
			case apierr.Internal:
				if !errors.Is(err, errStore) || apierr.As(err) != nil {
					t.Errorf("Admit(%q) = %v; want a plain error wrapping %v", tt.model, err, errStore)
				}
			default:
				e := apierr.As(err)
				if e == nil || e.Kind != tt.wantKind || e.Code != "insufficient_credits" || !errors.Is(err, chat.ErrInsufficientCredits) {
					t.Fatalf("Admit(%q) = %#v; want kind %v, code insufficient_credits", tt.model, err, tt.wantKind)
				}
				if want := fmt.Sprintf("The account has no credits left for priced model %q", tt.model); len(e.Message) < len(want) || e.Message[:len(want)] != want {
					t.Errorf("Admit(%q) message = %q; want it to start with %q", tt.model, e.Message, want)
				}
			}
			if fb == nil {
				return
			}
			fb.mu.Lock()
			defer fb.mu.Unlock()
			if len(fb.calls) != tt.wantReads || (tt.wantReads > 0 && fb.calls[0] != "acct") {
				t.Errorf("Admit(%q) read accounts %q; want %d read(s) of \"acct\"", tt.model, fb.calls, tt.wantReads)
			}
		})
	}
}

// TestAdmitUnpricedAllocs: for an unpriced model, Admit adds no allocation
// (and, see TestAdmit, no store read) to the hot path.
func TestAdmitUnpricedAllocs(t *testing.T) {
	gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}},
		Balances: failing(t)})
	c := admitCall(t, gw, "synthetic/echo")
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { gw.Admit(ctx, "acct", c) }); n != 0 {
		t.Errorf("Admit(synthetic/echo) allocs = %v; want 0", n)
	}
}

// BenchmarkAdmit measures Admit for an unpriced model (no store read) and a
// priced one (one read of an in-memory fake store).
//
//	go test ./shared/chat -run '^$' -bench Admit
func BenchmarkAdmit(b *testing.B) {
	for _, model := range []string{"synthetic/echo", "synthetic/priced"} {
		b.Run(model, func(b *testing.B) {
			gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(b), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}},
				Balances: chatBalancesFunc(func(context.Context, string) (credits.Account, error) { return credits.Account{Available: 1}, nil })})
			c := admitCall(b, gw, model)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := gw.Admit(ctx, "acct", c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// chatBalancesFunc is a func satisfying chat.Balances.
type chatBalancesFunc func(ctx context.Context, id string) (credits.Account, error)

func (f chatBalancesFunc) Account(ctx context.Context, id string) (credits.Account, error) {
	return f(ctx, id)
}

// heldRecorder is a UsageRecorder holding n unwritten credits for every
// account, as a BufferedRecorder does between flushes.
type heldRecorder struct{ n credits.Amount }

func (h heldRecorder) Record(context.Context, credits.Record) error {
	return nil
}

func (h heldRecorder) UnwrittenCredits(string) credits.Amount { return h.n }

func (heldRecorder) InMemory() bool { return false }

// TestAdmitCountsUnwrittenCredits: charges the recorder holds and has not
// written yet count against the available credits the store shows.
func TestAdmitCountsUnwrittenCredits(t *testing.T) {
	tests := []struct {
		available, held credits.Amount
		refused         bool
	}{
		{5, 0, false}, {5, 4, false}, {5, 5, true}, {5, 9, true}, {0, 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("available %d held %d", tt.available, tt.held), func(t *testing.T) {
			gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}},
				Balances: available(tt.available), Usage: heldRecorder{tt.held}})
			err := gw.Admit(context.Background(), "acct", admitCall(t, gw, "synthetic/priced"))
			if got := errors.Is(err, chat.ErrInsufficientCredits); got != tt.refused {
				t.Errorf("Admit = %v; want refused %v", err, tt.refused)
			}
		})
	}
}

// TestAdmitTTL: Admit reads an account's credits from the store at most
// once per AdmitTTL (other accounts apart); past it, or with a negative
// AdmitTTL, it reads them again.
func TestAdmitTTL(t *testing.T) {
	tests := []struct {
		name  string
		ttl   time.Duration
		pause time.Duration // between the second and the third call
		reads int           // of acct, over three calls
	}{
		{"within the TTL", time.Hour, 0, 1},
		{"past the TTL", 20 * time.Millisecond, 40 * time.Millisecond, 2},
		{"no cache", -1, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := available(5 * credits.Credit)
			gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}, Balances: b, AdmitTTL: tt.ttl})
			c := admitCall(t, gw, "synthetic/priced")
			for i := range 3 {
				if i == 2 {
					time.Sleep(tt.pause)
				}
				if err := gw.Admit(context.Background(), "acct", c); err != nil {
					t.Fatalf("Admit #%d = %v", i+1, err)
				}
			}
			if err := gw.Admit(context.Background(), "other", c); err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			n := 0
			for _, id := range b.calls {
				if id == "acct" {
					n++
				}
			}
			if n != tt.reads || len(b.calls) != tt.reads+1 {
				t.Errorf("store reads = %q; want %d of acct and one of other", b.calls, tt.reads)
			}
		})
	}
}
