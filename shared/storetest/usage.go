package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// UsageBackend is a Backend that also records chat usage.
type UsageBackend interface {
	Backend
	credits.UsageStore
}

// RunUsage runs the contract of credits.UsageStore: exact sums per account,
// day and model, day ranges, concurrent increments, and the charge of
// priced completions (debit and Chat ledger entry, atomically with the
// usage). newBackend returns the backend for one subtest (it may return the
// same one every time).
func RunUsage(t *testing.T, newBackend func(t *testing.T) UsageBackend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b UsageBackend)
	}{
		{"Sums", testUsageSums},
		{"Ranges", testUsageRanges},
		{"Charge", testUsageCharge},
		{"UnknownAccount", testUsageUnknownAccount},
		{"Invalid", testUsageInvalid},
		{"Concurrent", testUsageConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newBackend(t))
		})
	}
}

// record is one AddUsage call.
type record struct {
	model, day         string
	prompt, completion int
	credits            int64
}

func addAll(t *testing.T, b UsageBackend, acct string, rs []record) {
	t.Helper()
	for _, r := range rs {
		if err := b.AddUsage(context.Background(), acct, r.model, r.day, r.prompt, r.completion, r.credits); err != nil {
			t.Fatalf("AddUsage(%q, %+v) = %v; want nil", acct, r, err)
		}
	}
}

func wantUsage(t *testing.T, b UsageBackend, acct, from, to string, want []credits.Usage) {
	t.Helper()
	got, err := b.Usage(context.Background(), acct, from, to)
	if err != nil {
		t.Fatalf("Usage(%q, %q, %q) = %v; want nil", acct, from, to, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Usage(%q, %q, %q) = %+v; want %+v", acct, from, to, got, want)
	}
}

// usageRecords are the unpriced records Sums and Ranges add, across three
// days (one in another month) and models whose names hold '/', '#' and '.'.
var usageRecords = []record{
	{"synthetic-chat", "2025-03-02", 10, 5, 0},
	{"meta/llama-3.1", "2025-03-02", 1, 1, 0},
	{"synthetic-chat", "2025-03-01", 7, 0, 0},
	{"synthetic-chat", "2025-03-02", 3, 2, 0},
	{"org#model", "2025-04-01", 4, 4, 0},
}

func usageOf(acct string) []credits.Usage {
	return []credits.Usage{
		{Account: acct, Day: "2025-03-01", Model: "synthetic-chat", Requests: 1, PromptTokens: 7},
		{Account: acct, Day: "2025-03-02", Model: "meta/llama-3.1", Requests: 1, PromptTokens: 1, CompletionTokens: 1},
		{Account: acct, Day: "2025-03-02", Model: "synthetic-chat", Requests: 2, PromptTokens: 13, CompletionTokens: 7},
		{Account: acct, Day: "2025-04-01", Model: "org#model", Requests: 1, PromptTokens: 4, CompletionTokens: 4},
	}
}

func testUsageSums(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 50)
	other := newAccount(t, b, 50) // its usage stays apart
	addAll(t, b, acct, usageRecords)
	addAll(t, b, other, []record{{"synthetic-chat", "2025-03-02", 100, 100, 0}})
	wantUsage(t, b, acct, "", "", usageOf(acct))
	wantUsage(t, b, other, "", "", []credits.Usage{{Account: other, Day: "2025-03-02", Model: "synthetic-chat", Requests: 1, PromptTokens: 100, CompletionTokens: 100}})
	wantUsage(t, b, "acct-test-nobody-"+randomSuffix(t), "", "", nil)
	// Unpriced usage charges nothing and writes no ledger entry.
	wantAccount(t, b, acct, 50, 0)
	if l, err := b.Ledger(ctx, acct); err != nil || len(l) != 1 || l[0].Kind != credits.Grant {
		t.Errorf("Ledger(%q) = %+v, %v; want only the grant", acct, l, err)
	}
}

func testUsageRanges(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 0)
	addAll(t, b, acct, usageRecords)
	all := usageOf(acct)
	tests := []struct {
		from, to string
		want     []credits.Usage
	}{
		{"", "", all},
		{"2025-03-01", "2025-04-01", all},
		{"2025-03-02", "2025-03-02", all[1:3]},
		{"2025-03-02", "", all[1:]},
		{"", "2025-03-01", all[:1]},
		{"2025-03-03", "2025-03-31", nil},
		{"2025-04-02", "", nil},
		{"", "2025-02-28", nil},
	}
	for _, tt := range tests {
		t.Run(tt.from+".."+tt.to, func(t *testing.T) {
			wantUsage(t, b, acct, tt.from, tt.to, tt.want)
		})
	}
	for _, r := range [][2]string{{"2025-03-02", "2025-03-01"}, {"2025-3-1", ""}, {"", "yesterday"}} {
		if got, err := b.Usage(context.Background(), acct, r[0], r[1]); err == nil {
			t.Errorf("Usage(%q, %q, %q) = %+v, nil; want an error", acct, r[0], r[1], got)
		}
	}
}

func testUsageCharge(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	create(t, b, newJob(t, acct, 30)) // a hold that charging must leave alone
	addAll(t, b, acct, []record{
		{"priced-chat", "2025-03-01", 1000, 500, 4},
		{"priced-chat", "2025-03-01", 100, 50, 0}, // a priced model can round to 0
		// available is 66: the completion is charged in full, the
		// tokens having been spent already, and available goes below 0.
		{"priced-chat", "2025-03-02", 9000, 4000, 70},
	})
	wantAccount(t, b, acct, 26, 30)
	wantUsage(t, b, acct, "", "", []credits.Usage{
		{Account: acct, Day: "2025-03-01", Model: "priced-chat", Requests: 2, PromptTokens: 1100, CompletionTokens: 550, Credits: 4},
		{Account: acct, Day: "2025-03-02", Model: "priced-chat", Requests: 1, PromptTokens: 9000, CompletionTokens: 4000, Credits: 70},
	})
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	if len(l) != 3 {
		t.Fatalf("Ledger(%q) = %+v; want a grant and two chat entries", acct, l)
	}
	for i, want := range []int64{4, 70} {
		e := l[i+1]
		if e.Kind != credits.Chat || e.Amount != want || e.Account != acct || e.JobID != "" || !strings.HasPrefix(e.ID, "chat:") || e.At == 0 {
			t.Errorf("Ledger(%q)[%d] = %+v; want a chat entry of %d with id chat:...", acct, i+1, e, want)
		}
	}
	if l[1].ID == l[2].ID {
		t.Errorf("Ledger(%q) chat entry ids = %q, %q; want distinct", acct, l[1].ID, l[2].ID)
	}
}

func testUsageUnknownAccount(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := "acct-test-nobody-" + randomSuffix(t)
	if err := b.AddUsage(ctx, acct, "priced-chat", "2025-03-01", 10, 10, 3); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("AddUsage(%q, priced) = %v; want ErrAccountNotFound", acct, err)
	}
	wantUsage(t, b, acct, "", "", nil)
	if a, err := b.Account(ctx, acct); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Account(%q) after a refused charge = %+v, %v; want ErrAccountNotFound", acct, a, err)
	}
	if l, err := b.Ledger(ctx, acct); err != nil || len(l) != 0 {
		t.Errorf("Ledger(%q) = %+v, %v; want none", acct, l, err)
	}
}

func testUsageInvalid(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10)
	tests := []struct {
		name           string
		account, model string
		r              record
	}{
		{"empty account", "", "m", record{day: "2025-03-01"}},
		{"empty model", acct, "", record{day: "2025-03-01"}},
		{"empty day", acct, "m", record{}},
		{"bad day", acct, "m", record{day: "2025-13-01"}},
		{"day with time", acct, "m", record{day: "2025-03-01T00"}},
		{"negative prompt", acct, "m", record{day: "2025-03-01", prompt: -1}},
		{"negative completion", acct, "m", record{day: "2025-03-01", completion: -1}},
		{"negative credits", acct, "m", record{day: "2025-03-01", credits: -5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.AddUsage(ctx, tt.account, tt.model, tt.r.day, tt.r.prompt, tt.r.completion, tt.r.credits); err == nil {
				t.Errorf("AddUsage(%q, %q, %q, %d, %d, %d) = nil; want an error", tt.account, tt.model, tt.r.day, tt.r.prompt, tt.r.completion, tt.r.credits)
			}
		})
	}
	wantUsage(t, b, acct, "", "", nil)
	wantAccount(t, b, acct, 10, 0)
}

// testUsageConcurrent runs 20 goroutines of 5 records each, half of them
// priced, on two models: the sums, the balance and the ledger are exact.
func testUsageConcurrent(t *testing.T, b UsageBackend) {
	const goroutines, each, balance = 20, 5, 1000
	ctx := context.Background()
	acct := newAccount(t, b, balance)
	models := [2]string{"synthetic-chat", "priced-chat"}
	var want [2]credits.Usage
	var charged, charges int64
	for g := range goroutines {
		for i := range each {
			w := &want[g%2]
			w.Requests++
			w.PromptTokens += int64(g + 1)
			w.CompletionTokens += int64(i + 1)
			w.Credits += int64(i % 2 * (g + 1))
			charged += int64(i % 2 * (g + 1))
			if i%2 == 1 {
				charges++
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := b.AddUsage(ctx, acct, models[g%2], "2025-03-01", g+1, i+1, int64(i%2*(g+1))); err != nil {
					errs <- fmt.Errorf("goroutine %d record %d: %w", g, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddUsage = %v; want nil", err)
	}
	for i, m := range models {
		want[i].Account, want[i].Day, want[i].Model = acct, "2025-03-01", m
	}
	// "priced-chat" sorts before "synthetic-chat".
	wantUsage(t, b, acct, "", "", []credits.Usage{want[1], want[0]})
	wantAccount(t, b, acct, balance-charged, 0)
	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	var n, sum int64
	ids := map[string]bool{}
	for _, e := range l {
		if e.Kind != credits.Chat {
			continue
		}
		n++
		sum += e.Amount
		ids[e.ID] = true
	}
	if n != charges || sum != charged || int64(len(ids)) != charges {
		t.Errorf("Ledger(%q) chat entries = %d (%d distinct ids) summing to %d; want %d summing to %d", acct, n, len(ids), sum, charges, charged)
	}
}
