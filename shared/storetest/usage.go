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
// day and model (of single and multi-request increments), day ranges,
// concurrent increments, the charge of priced usage (debit and Chat ledger
// entry, atomically with the usage) and its idempotency (an id applied once
// with credits is not applied again; without credits it is); and the job
// usage that Settle counts: once per completed job however often it is
// settled (redelivered, concurrently, by the reconciler), never for a
// failed one, by UTC day, type and model. newBackend returns the backend
// for one subtest (it may return the same one every time).
func RunUsage(t *testing.T, newBackend func(t *testing.T) UsageBackend) {
	runAll(t, newBackend, []subtest[UsageBackend]{
		{"Sums", testUsageSums},
		{"Ranges", testUsageRanges},
		{"Requests", testUsageRequests},
		{"Charge", testUsageCharge},
		{"ChargeOnce", testUsageChargeOnce},
		{"ChargeOnceConcurrent", testUsageChargeOnceConcurrent},
		{"UnpricedRepeats", testUsageUnpricedRepeats},
		{"UnknownAccount", testUsageUnknownAccount},
		{"Invalid", testUsageInvalid},
		{"Concurrent", testUsageConcurrent},
		{"JobUsageOnce", testJobUsageOnce},
		{"JobUsageRanges", testJobUsageRanges},
		{"JobUsageConcurrent", testJobUsageConcurrent},
		{"JobUsageUnlabelled", testJobUsageUnlabelled},
		{"JobUsageReconcile", testJobUsageReconcile},
		{"JobUsageServedByFallback", testJobUsageServedByFallback},
	})
}

// record is one AddUsage call of one request.
type record struct {
	model, day         string
	prompt, completion int64
	credits            credits.Amount
}

// usage is r as the increment of acct's usage.
func (r record) usage(acct string) credits.Usage {
	return credits.Usage{Account: acct, Day: r.day, Model: r.model, Requests: 1, PromptTokens: r.prompt, CompletionTokens: r.completion, Credits: r.credits}
}

// newID returns a fresh AddUsage id.
func newID(t *testing.T) string {
	t.Helper()
	id, err := credits.NewUsageID()
	if err != nil {
		t.Fatalf("NewUsageID() = %v", err)
	}
	return id
}

// addAll adds each record with a fresh id.
func addAll(t *testing.T, b UsageBackend, acct string, rs []record) {
	t.Helper()
	for _, r := range rs {
		add(t, b, newID(t), r.usage(acct))
	}
}

func add(t *testing.T, b UsageBackend, id string, u credits.Usage) {
	t.Helper()
	if err := b.AddUsage(context.Background(), id, u); err != nil {
		t.Fatalf("AddUsage(%q, %+v) = %v; want nil", id, u, err)
	}
}

// chatEntries returns the account's Chat ledger entries.
func chatEntries(t *testing.T, b UsageBackend, acct string) []credits.Entry {
	t.Helper()
	l, err := b.Ledger(context.Background(), acct)
	if err != nil {
		t.Fatalf("Ledger(%q) = %v", acct, err)
	}
	var out []credits.Entry
	for _, e := range l {
		if e.Kind == credits.Chat {
			out = append(out, e)
		}
	}
	return out
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
	for i, want := range []credits.Amount{4, 70} {
		e := l[i+1]
		if e.Kind != credits.Chat || e.Amount != want || e.Account != acct || e.JobID != "" || !strings.HasPrefix(e.ID, credits.Chat+":") || e.At == 0 {
			t.Errorf("Ledger(%q)[%d] = %+v; want a chat entry of %s with id chat:...", acct, i+1, e, want)
		}
	}
	if l[1].ID == l[2].ID {
		t.Errorf("Ledger(%q) chat entry ids = %q, %q; want distinct", acct, l[1].ID, l[2].ID)
	}
}

// testUsageRequests adds increments of several requests: Requests is
// added as given, not counted as one.
func testUsageRequests(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 100)
	day, model := "2025-03-01", "priced-chat"
	add(t, b, newID(t), credits.Usage{Account: acct, Day: day, Model: model, Requests: 3, PromptTokens: 30, CompletionTokens: 12})
	add(t, b, newID(t), credits.Usage{Account: acct, Day: day, Model: model, Requests: 1, PromptTokens: 1, CompletionTokens: 1})
	add(t, b, newID(t), credits.Usage{Account: acct, Day: day, Model: model, Requests: 5, PromptTokens: 50, CompletionTokens: 20, Credits: 7})
	wantUsage(t, b, acct, "", "", []credits.Usage{
		{Account: acct, Day: day, Model: model, Requests: 9, PromptTokens: 81, CompletionTokens: 33, Credits: 7},
	})
	wantAccount(t, b, acct, 93, 0)
	if l := chatEntries(t, b, acct); len(l) != 1 || l[0].Amount != 7 {
		t.Errorf("Ledger(%q) chat entries = %+v; want one of 7", acct, l)
	}
}

// testUsageChargeOnce applies the same priced id twice (an ambiguous
// failure retried), even with other values the second time: the usage is
// counted and the account charged once, with one entry chat:<id>.
func testUsageChargeOnce(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 100)
	id := newID(t)
	u := credits.Usage{Account: acct, Day: "2025-03-01", Model: "priced-chat", Requests: 2, PromptTokens: 20, CompletionTokens: 10, Credits: 6}
	add(t, b, id, u)
	add(t, b, id, u)
	u2 := u
	u2.Requests, u2.Credits = 1, 50
	add(t, b, id, u2)
	wantUsage(t, b, acct, "", "", []credits.Usage{u})
	wantAccount(t, b, acct, 94, 0)
	l := chatEntries(t, b, acct)
	if len(l) != 1 || l[0].ID != credits.ChatEntryID(id) || l[0].Amount != 6 {
		t.Errorf("Ledger(%q) chat entries = %+v; want one of 6 with id %q", acct, l, credits.ChatEntryID(id))
	}
	// Another id is another charge.
	add(t, b, newID(t), u)
	wantAccount(t, b, acct, 88, 0)
}

// testUsageChargeOnceConcurrent applies one priced id from 8 goroutines at
// once: exactly one applies.
func testUsageChargeOnceConcurrent(t *testing.T, b UsageBackend) {
	const goroutines = 8
	acct := newAccount(t, b, 100)
	id := newID(t)
	u := credits.Usage{Account: acct, Day: "2025-03-01", Model: "priced-chat", Requests: 4, PromptTokens: 40, CompletionTokens: 8, Credits: 5}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.AddUsage(context.Background(), id, u)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("AddUsage(%q, %+v) = %v; want nil", id, u, err)
		}
	}
	wantUsage(t, b, acct, "", "", []credits.Usage{u})
	wantAccount(t, b, acct, 95, 0)
	if l := chatEntries(t, b, acct); len(l) != 1 {
		t.Errorf("Ledger(%q) chat entries = %+v; want one", acct, l)
	}
}

// testUsageUnpricedRepeats applies the same id twice without credits:
// there is no marker, so both add (documented: unpriced usage is
// statistics), and no ledger entry is written.
func testUsageUnpricedRepeats(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 10)
	id := newID(t)
	u := credits.Usage{Account: acct, Day: "2025-03-01", Model: "synthetic-chat", Requests: 2, PromptTokens: 5, CompletionTokens: 3}
	add(t, b, id, u)
	add(t, b, id, u)
	add(t, b, "", u) // no id is fine without credits
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: u.Day, Model: u.Model, Requests: 6, PromptTokens: 15, CompletionTokens: 9}})
	wantAccount(t, b, acct, 10, 0)
	if l := chatEntries(t, b, acct); len(l) != 0 {
		t.Errorf("Ledger(%q) chat entries = %+v; want none", acct, l)
	}
}

func testUsageUnknownAccount(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := "acct-test-nobody-" + randomSuffix(t)
	if err := b.AddUsage(ctx, newID(t), record{"priced-chat", "2025-03-01", 10, 10, 3}.usage(acct)); !errors.Is(err, credits.ErrAccountNotFound) {
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
	ok := credits.Usage{Account: acct, Day: "2025-03-01", Model: "m", Requests: 1, Credits: 1}
	with := func(f func(u *credits.Usage)) credits.Usage { u := ok; f(&u); return u }
	tests := []struct {
		name string
		id   string
		u    credits.Usage
	}{
		{"empty account", "id1", with(func(u *credits.Usage) { u.Account = "" })},
		{"empty model", "id1", with(func(u *credits.Usage) { u.Model = "" })},
		{"empty day", "id1", with(func(u *credits.Usage) { u.Day = "" })},
		{"bad day", "id1", with(func(u *credits.Usage) { u.Day = "2025-13-01" })},
		{"day with time", "id1", with(func(u *credits.Usage) { u.Day = "2025-03-01T00" })},
		{"no requests", "id1", with(func(u *credits.Usage) { u.Requests = 0 })},
		{"negative prompt", "id1", with(func(u *credits.Usage) { u.PromptTokens = -1 })},
		{"negative completion", "id1", with(func(u *credits.Usage) { u.CompletionTokens = -1 })},
		{"negative credits", "id1", with(func(u *credits.Usage) { u.Credits = -5 })},
		{"priced without id", "", ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.AddUsage(ctx, tt.id, tt.u); !errors.Is(err, credits.ErrInvalidUsage) {
				t.Errorf("AddUsage(%q, %+v) = %v; want ErrInvalidUsage", tt.id, tt.u, err)
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
	var charged credits.Amount
	var charges int64
	for g := range goroutines {
		for i := range each {
			w := &want[g%2]
			w.Requests++
			w.PromptTokens += int64(g + 1)
			w.CompletionTokens += int64(i + 1)
			w.Credits += credits.Amount(i % 2 * (g + 1))
			charged += credits.Amount(i % 2 * (g + 1))
			if i%2 == 1 {
				charges++
			}
		}
	}
	var idOf [goroutines][each]string
	for g := range goroutines {
		for i := range each {
			idOf[g][i] = newID(t)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				u := record{models[g%2], "2025-03-01", int64(g + 1), int64(i + 1), credits.Amount(i % 2 * (g + 1))}.usage(acct)
				if err := b.AddUsage(ctx, idOf[g][i], u); err != nil {
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
	var n int64
	var sum credits.Amount
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
		t.Errorf("Ledger(%q) chat entries = %d (%d distinct ids) summing to %s; want %d summing to %s", acct, n, len(ids), sum, charges, charged)
	}
}
