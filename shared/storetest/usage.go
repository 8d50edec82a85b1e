package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// UsageBackend is a Backend that also records chat usage.
type UsageBackend interface {
	Backend
	credits.UsageStore
}

// RunUsage runs the contract of credits.UsageStore's writes of chat
// records (RecordStore.AddRecords): exact usage sums per account, day and
// model, by token class, day ranges, concurrent records, the charge of a
// priced record (debit, key spend and Chat ledger entry, atomically with
// the record and its usage) and its idempotency (a record written once is
// not written, counted or charged again, priced or not), failed and media
// records (the record alone), a batch with a refused record in it; and the
// job usage that Settle counts: once per completed job however often it
// is settled (redelivered, concurrently, by the reconciler), never for a
// failed one, by UTC day, type and model. newBackend returns the backend
// for one subtest (it may return the same one every time).
func RunUsage(t *testing.T, newBackend func(t *testing.T) UsageBackend) {
	runAll(t, newBackend, []subtest[UsageBackend]{
		{"Sums", testUsageSums},
		{"Ranges", testUsageRanges},
		{"TokenClasses", testUsageTokenClasses},
		{"Charge", testUsageCharge},
		{"ChargeOnce", testUsageChargeOnce},
		{"ChargeOnceConcurrent", testUsageChargeOnceConcurrent},
		{"UnpricedOnce", testUsageUnpricedOnce},
		{"FailedAndMedia", testUsageFailedAndMedia},
		{"Batch", testUsageBatch},
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

// record is one chat request of a test: its model, UTC day, tokens and
// cost.
type record struct {
	model, day         string
	prompt, completion int64
	credits            credits.Amount
}

// of returns r as a completed chat record of acct with a fresh id, at
// noon of its day.
func (r record) of(t *testing.T, acct string) credits.Record {
	t.Helper()
	d, err := time.Parse(credits.DayLayout, r.day)
	if err != nil {
		t.Fatalf("day %q: %v", r.day, err)
	}
	return credits.Record{ID: newRecordID(t), Kind: credits.KindChat, Account: acct, ModelAsked: r.model, Model: r.model,
		Tokens: credits.Tokens{Prompt: r.prompt, Completion: r.completion}, Cost: r.credits, Status: credits.StatusCompleted,
		At: d.Add(12 * time.Hour).UnixMilli()}
}

// newRecordID returns a fresh record id, as a chat answer's.
func newRecordID(t *testing.T) string {
	t.Helper()
	return "chatcmpl-test-" + randomSuffix(t) + randomSuffix(t)
}

// addAll writes each record with a fresh id, one call each.
func addAll(t *testing.T, b UsageBackend, acct string, rs []record) {
	t.Helper()
	for _, r := range rs {
		add(t, b, r.of(t, acct))
	}
}

// add writes rs in one AddRecords call, every one of which must succeed.
func add(t *testing.T, b UsageBackend, rs ...credits.Record) {
	t.Helper()
	for i, err := range b.AddRecords(context.Background(), rs) {
		if err != nil {
			t.Fatalf("AddRecords(%+v)[%d] = %v; want nil", rs[i], i, err)
		}
	}
}

// addOne writes r alone and returns its error.
func addOne(b UsageBackend, r credits.Record) error {
	return b.AddRecords(context.Background(), []credits.Record{r})[0]
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

// testUsageTokenClasses: the usage sums count cached, cache-write and
// reasoning tokens apart, exactly.
func testUsageTokenClasses(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 100)
	r1 := record{"priced-chat", "2025-03-01", 100, 20, 7}.of(t, acct)
	r1.Tokens.Cached, r1.Tokens.CacheWrite, r1.Tokens.CacheWrite1h, r1.Tokens.Reasoning = 40, 10, 5, 8
	r2 := record{"priced-chat", "2025-03-01", 50, 30, 3}.of(t, acct)
	r2.Tokens.Cached, r2.Tokens.Reasoning = 50, 30
	add(t, b, r1, r2)
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: "2025-03-01", Model: "priced-chat", Requests: 2,
		PromptTokens: 150, CompletionTokens: 50, CachedTokens: 90, CacheWriteTokens: 10, CacheWrite1hTokens: 5, ReasoningTokens: 38, Credits: 10}})
	wantAccount(t, b, acct, 90, 0)
}

// testUsageChargeOnce writes the same priced record twice (an ambiguous
// failure retried), even with other values the second time: the record,
// its usage and its charge are written once, with one entry chat:<id>.
func testUsageChargeOnce(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 100)
	today := credits.Day(time.Now()) // read back: not expired
	r := record{"priced-chat", today, 20, 10, 6}.of(t, acct)
	add(t, b, r)
	add(t, b, r)
	r2 := r
	r2.Cost, r2.Tokens.Prompt = 50, 1
	add(t, b, r2)
	u, _ := credits.UsageOf(r)
	wantUsage(t, b, acct, "", "", []credits.Usage{u})
	wantAccount(t, b, acct, 94, 0)
	l := chatEntries(t, b, acct)
	if len(l) != 1 || l[0].ID != credits.ChatEntryID(r.ID) || l[0].Amount != 6 || l[0].At != r.At/1000 {
		t.Errorf("Ledger(%q) chat entries = %+v; want one of 6 with id %q at %d", acct, l, credits.ChatEntryID(r.ID), r.At/1000)
	}
	if got, err := b.Record(context.Background(), r.ID); err != nil || got.Cost != 6 || got.Tokens.Prompt != 20 {
		t.Errorf("Record(%q) = %+v, %v; want the first write's", r.ID, got, err)
	}
	// Another id is another charge.
	add(t, b, record{"priced-chat", today, 20, 10, 6}.of(t, acct))
	wantAccount(t, b, acct, 88, 0)
}

// testUsageChargeOnceConcurrent writes one priced record from 8
// goroutines at once: exactly one applies.
func testUsageChargeOnceConcurrent(t *testing.T, b UsageBackend) {
	const goroutines = 8
	acct := newAccount(t, b, 100)
	r := record{"priced-chat", "2025-03-01", 40, 8, 5}.of(t, acct)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- addOne(b, r)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("AddRecords(%+v) = %v; want nil", r, err)
		}
	}
	u, _ := credits.UsageOf(r)
	wantUsage(t, b, acct, "", "", []credits.Usage{u})
	wantAccount(t, b, acct, 95, 0)
	if l := chatEntries(t, b, acct); len(l) != 1 {
		t.Errorf("Ledger(%q) chat entries = %+v; want one", acct, l)
	}
}

// testUsageUnpricedOnce writes the same unpriced record twice: the record
// is the marker, so it counts once, and no ledger entry is written.
func testUsageUnpricedOnce(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 10)
	r := record{"synthetic-chat", "2025-03-01", 5, 3, 0}.of(t, acct)
	add(t, b, r)
	add(t, b, r)
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: "2025-03-01", Model: "synthetic-chat", Requests: 1, PromptTokens: 5, CompletionTokens: 3}})
	wantAccount(t, b, acct, 10, 0)
	if l := chatEntries(t, b, acct); len(l) != 0 {
		t.Errorf("Ledger(%q) chat entries = %+v; want none", acct, l)
	}
}

// testUsageFailedAndMedia: a failed request's record, and a free image's
// or speech's, are written alone: no usage, no ledger entry; a charged
// image record is refused (its charge is its settlement's).
func testUsageFailedAndMedia(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10)
	today := credits.Day(time.Now()) // read back: not expired
	failed := record{"", today, 0, 0, 0}.of(t, acct)
	failed.ModelAsked, failed.Status, failed.Attempts = "priced-chat", credits.StatusFailed, "priced-chat=503"
	speech := record{"tts", today, 0, 0, 0}.of(t, acct)
	speech.Kind, speech.Units, speech.ID = credits.KindSpeech, 120, "speech_"+randomSuffix(t)
	add(t, b, failed, speech)
	for _, r := range []credits.Record{failed, speech} {
		got, err := b.Record(ctx, r.ID)
		if err != nil || got.Status != r.Status || got.Kind != r.Kind || got.Attempts != r.Attempts || got.Units != r.Units || got.Expires <= r.At/1000 {
			t.Errorf("Record(%q) = %+v, %v; want it as written, with an expiry", r.ID, got, err)
		}
	}
	wantUsage(t, b, acct, "", "", nil)
	wantAccount(t, b, acct, 10, 0)
	img := speech
	img.ID, img.Kind, img.Units, img.UnitPrice, img.Cost = "img_"+randomSuffix(t), credits.KindImage, 1, 2, 2
	if err := addOne(b, img); !errors.Is(err, credits.ErrInvalidRecord) {
		t.Errorf("AddRecords(a charged image) = %v; want ErrInvalidRecord", err)
	}
	if _, err := b.Record(ctx, img.ID); !errors.Is(err, credits.ErrRecordNotFound) {
		t.Errorf("Record(%q) of a refused record = %v; want ErrRecordNotFound", img.ID, err)
	}
	wantAccount(t, b, acct, 10, 0)
}

// testUsageBatch writes records in one call with refused ones among
// them: each refused one is its own error and changes nothing, the others
// are written.
func testUsageBatch(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	nobody := "acct-test-nobody-" + randomSuffix(t)
	today := credits.Day(time.Now()) // read back: not expired
	good1 := record{"priced-chat", today, 10, 5, 4}.of(t, acct)
	bad := record{"priced-chat", today, 10, 5, 4}.of(t, acct)
	bad.Status = "done"
	orphan := record{"priced-chat", today, 10, 5, 4}.of(t, nobody)
	good2 := record{"priced-chat", today, 1, 1, 1}.of(t, acct)
	errs := b.AddRecords(ctx, []credits.Record{good1, bad, orphan, good2})
	if len(errs) != 4 || errs[0] != nil || !errors.Is(errs[1], credits.ErrInvalidRecord) || !errors.Is(errs[2], credits.ErrAccountNotFound) || errs[3] != nil {
		t.Fatalf("AddRecords(good, invalid, unknown account, good) = %v; want nil, ErrInvalidRecord, ErrAccountNotFound, nil", errs)
	}
	wantAccount(t, b, acct, 95, 0)
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: today, Model: "priced-chat", Requests: 2, PromptTokens: 11, CompletionTokens: 6, Credits: 5}})
	for _, r := range []credits.Record{bad, orphan} {
		if _, err := b.Record(ctx, r.ID); !errors.Is(err, credits.ErrRecordNotFound) {
			t.Errorf("Record(%q) of a refused record = %v; want ErrRecordNotFound", r.ID, err)
		}
	}
	if got := b.AddRecords(ctx, nil); len(got) != 0 {
		t.Errorf("AddRecords(nil) = %v; want no errors", got)
	}
}

func testUsageUnknownAccount(t *testing.T, b UsageBackend) {
	ctx := context.Background()
	acct := "acct-test-nobody-" + randomSuffix(t)
	r := record{"priced-chat", "2025-03-01", 10, 10, 3}.of(t, acct)
	if err := addOne(b, r); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("AddRecords(%q, priced) = %v; want ErrAccountNotFound", acct, err)
	}
	wantUsage(t, b, acct, "", "", nil)
	if a, err := b.Account(ctx, acct); !errors.Is(err, credits.ErrAccountNotFound) {
		t.Errorf("Account(%q) after a refused charge = %+v, %v; want ErrAccountNotFound", acct, a, err)
	}
	if l, err := b.Ledger(ctx, acct); err != nil || len(l) != 0 {
		t.Errorf("Ledger(%q) = %+v, %v; want none", acct, l, err)
	}
	// An unpriced record needs no account.
	add(t, b, record{"synthetic-chat", "2025-03-01", 1, 1, 0}.of(t, acct))
	wantUsage(t, b, acct, "", "", []credits.Usage{{Account: acct, Day: "2025-03-01", Model: "synthetic-chat", Requests: 1, PromptTokens: 1, CompletionTokens: 1}})
}

func testUsageInvalid(t *testing.T, b UsageBackend) {
	acct := newAccount(t, b, 10)
	ok := record{"m", "2025-03-01", 1, 1, 1}.of(t, acct)
	with := func(f func(r *credits.Record)) credits.Record { r := ok; r.ID = newRecordID(t); f(&r); return r }
	tests := []struct {
		name string
		r    credits.Record
	}{
		{"no id", with(func(r *credits.Record) { r.ID = "" })},
		{"empty account", with(func(r *credits.Record) { r.Account = "" })},
		{"no model", with(func(r *credits.Record) { r.Model = "" })},
		{"no time", with(func(r *credits.Record) { r.At = 0 })},
		{"unknown kind", with(func(r *credits.Record) { r.Kind = "video" })},
		{"negative prompt", with(func(r *credits.Record) { r.Tokens.Prompt = -1 })},
		{"negative cost", with(func(r *credits.Record) { r.Cost = -5 })},
		{"failed with a cost", with(func(r *credits.Record) { r.Status = credits.StatusFailed })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := addOne(b, tt.r); !errors.Is(err, credits.ErrInvalidRecord) {
				t.Errorf("AddRecords(%+v) = %v; want ErrInvalidRecord", tt.r, err)
			}
		})
	}
	wantUsage(t, b, acct, "", "", nil)
	wantAccount(t, b, acct, 10, 0)
}

// testUsageConcurrent runs 20 goroutines of 5 records each, half of them
// priced, on two models, some in batches: the sums, the balance and the
// ledger are exact.
func testUsageConcurrent(t *testing.T, b UsageBackend) {
	const goroutines, each, balance = 20, 5, 1000
	ctx := context.Background()
	acct := newAccount(t, b, balance)
	models := [2]string{"synthetic-chat", "priced-chat"}
	var want [2]credits.Usage
	var charged credits.Amount
	var charges int64
	var recs [goroutines][]credits.Record
	for g := range goroutines {
		for i := range each {
			w := &want[g%2]
			w.Requests++
			w.PromptTokens += int64(g + 1)
			w.CompletionTokens += int64(i + 1)
			cost := credits.Amount(i % 2 * (g + 1))
			w.Credits += cost
			charged += cost
			if cost > 0 {
				charges++
			}
			recs[g] = append(recs[g], record{models[g%2], "2025-03-01", int64(g + 1), int64(i + 1), cost}.of(t, acct))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%4 == 0 { // a batch
				for i, err := range b.AddRecords(ctx, recs[g]) {
					if err != nil {
						errs <- fmt.Errorf("goroutine %d record %d: %w", g, i, err)
					}
				}
				return
			}
			for i, r := range recs[g] {
				if err := addOne(b, r); err != nil {
					errs <- fmt.Errorf("goroutine %d record %d: %w", g, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddRecords = %v; want nil", err)
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
