package credits_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// at is 2025-03-01 12:00:00.250 UTC in Unix ms.
const at = 1740830400250

func chatRecord() credits.Record {
	return credits.Record{ID: "chatcmpl-1", Kind: credits.KindChat, Account: "acct", Key: "key1", ModelAsked: "m", Model: "m",
		Tokens: credits.Tokens{Prompt: 100, Cached: 40, CacheWrite: 10, Completion: 20, Reasoning: 5}, Cost: 3, Status: credits.StatusCompleted, At: at}
}

func TestCheckRecord(t *testing.T) {
	with := func(f func(r *credits.Record)) credits.Record { r := chatRecord(); f(&r); return r }
	long := make([]byte, credits.MaxRecordID+1)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		name string
		r    credits.Record
		ok   bool
	}{
		{"valid", chatRecord(), true},
		{"free", with(func(r *credits.Record) { r.Cost = 0 }), true},
		{"failed, no model", with(func(r *credits.Record) { r.Status, r.Model, r.Cost = credits.StatusFailed, "", 0 }), true},
		{"partial", with(func(r *credits.Record) { r.Status, r.Partial = credits.StatusClientClosed, true }), true},
		{"image", with(func(r *credits.Record) { r.Kind, r.Units, r.UnitPrice = credits.KindImage, 2, 4 }), true},
		{"no id", with(func(r *credits.Record) { r.ID = "" }), false},
		{"long id", with(func(r *credits.Record) { r.ID = string(long) }), false},
		{"no account", with(func(r *credits.Record) { r.Account = "" }), false},
		{"unknown kind", with(func(r *credits.Record) { r.Kind = "video" }), false},
		{"unknown status", with(func(r *credits.Record) { r.Status = "done" }), false},
		{"answered without a model", with(func(r *credits.Record) { r.Model = "" }), false},
		{"failed with a cost", with(func(r *credits.Record) { r.Status, r.Model = credits.StatusFailed, "" }), false},
		{"no time", with(func(r *credits.Record) { r.At = 0 }), false},
		{"negative cost", with(func(r *credits.Record) { r.Cost = -1 }), false},
		{"cost past the maximum", with(func(r *credits.Record) { r.Cost = credits.MaxAmount + 1 }), false},
		{"negative tokens", with(func(r *credits.Record) { r.Tokens.Cached = -1 }), false},
		{"negative latency", with(func(r *credits.Record) { r.LatencyMS = -1 }), false},
		{"nul in key", with(func(r *credits.Record) { r.Key = "k\x00" }), false},
		{"nul in model", with(func(r *credits.Record) { r.Model = "m\x00" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := credits.CheckRecord(tt.r)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, credits.ErrInvalidRecord)) {
				t.Errorf("CheckRecord(%+v) = %v; want ok %v (else ErrInvalidRecord)", tt.r, err, tt.ok)
			}
		})
	}
}

func TestCheckAddRecord(t *testing.T) {
	img := chatRecord()
	img.Kind, img.Units, img.UnitPrice = credits.KindImage, 1, 3
	if err := credits.CheckAddRecord(img); !errors.Is(err, credits.ErrInvalidRecord) {
		t.Errorf("CheckAddRecord(a charged image) = %v; want ErrInvalidRecord (its charge is its settlement's)", err)
	}
	img.Cost = 0
	if err := credits.CheckAddRecord(img); err != nil {
		t.Errorf("CheckAddRecord(a free image) = %v; want nil", err)
	}
	if err := credits.CheckAddRecord(chatRecord()); err != nil {
		t.Errorf("CheckAddRecord(a charged chat record) = %v; want nil", err)
	}
}

func TestCheckSettledRecord(t *testing.T) {
	r := chatRecord()
	r.Kind, r.ID = credits.KindImage, "img_1"
	capture := credits.Entry{ID: credits.SettlementID("img_1"), Account: "acct", Kind: credits.Capture, Amount: 3, Hold: 5}
	release := credits.Entry{ID: credits.SettlementID("img_1"), Account: "acct", Kind: credits.Release, Amount: 5}
	failed := r
	failed.Status, failed.Cost, failed.Model = credits.StatusFailed, 0, ""
	other := r
	other.Account = "other"
	tests := []struct {
		name string
		e    credits.Entry
		r    credits.Record
		ok   bool
	}{
		{"capture of its cost", capture, r, true},
		{"release of a failed request", release, failed, true},
		{"capture of another cost", capture, with(r, func(r *credits.Record) { r.Cost = 2 }), false},
		{"release of a cost", release, r, false},
		{"another account", capture, other, false},
	}
	for _, tt := range tests {
		if err := credits.CheckSettledRecord(tt.e, tt.r); (err == nil) != tt.ok || (err != nil && !errors.Is(err, credits.ErrInvalidRecord)) {
			t.Errorf("%s: CheckSettledRecord = %v; want ok %v (else ErrInvalidRecord)", tt.name, err, tt.ok)
		}
	}
}

func with(r credits.Record, f func(r *credits.Record)) credits.Record { f(&r); return r }

func TestUsageOfAndChargeOf(t *testing.T) {
	r := chatRecord()
	u, ok := credits.UsageOf(r)
	want := credits.Usage{Account: "acct", Day: "2025-03-01", Model: "m", Requests: 1, PromptTokens: 100, CompletionTokens: 20,
		CachedTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5, Credits: 3}
	if !ok || u != want {
		t.Errorf("UsageOf(%+v) = %+v, %v; want %+v, true", r, u, ok, want)
	}
	e, ok := credits.ChargeOf(r)
	wantE := credits.Entry{ID: "chat:chatcmpl-1", Account: "acct", Kind: credits.Chat, Amount: 3, Key: "key1", At: 1740830400}
	if !ok || e != wantE {
		t.Errorf("ChargeOf(%+v) = %+v, %v; want %+v, true", r, e, ok, wantE)
	}
	for _, tt := range []struct {
		name          string
		r             credits.Record
		usage, charge bool
	}{
		{"free chat", with(r, func(r *credits.Record) { r.Cost = 0 }), true, false},
		{"responses", with(r, func(r *credits.Record) { r.Kind = credits.KindResponses }), true, true},
		{"partial", with(r, func(r *credits.Record) { r.Status, r.Partial = credits.StatusUpstreamError, true }), true, true},
		{"failed", with(r, func(r *credits.Record) { r.Status, r.Cost, r.Model = credits.StatusFailed, 0, "" }), false, false},
		{"speech", with(r, func(r *credits.Record) { r.Kind = credits.KindSpeech }), false, false},
	} {
		_, u := credits.UsageOf(tt.r)
		_, c := credits.ChargeOf(tt.r)
		if u != tt.usage || c != tt.charge {
			t.Errorf("%s: UsageOf ok %v, ChargeOf ok %v; want %v, %v", tt.name, u, c, tt.usage, tt.charge)
		}
	}
}

func TestUsageAdd(t *testing.T) {
	a := credits.Usage{Requests: 1, PromptTokens: 10, CompletionTokens: 2, CachedTokens: 3, CacheWriteTokens: 4, CacheWrite1hTokens: 5, ReasoningTokens: 1, Credits: 7}
	got, err := a.Add(a)
	want := credits.Usage{Requests: 2, PromptTokens: 20, CompletionTokens: 4, CachedTokens: 6, CacheWriteTokens: 8, CacheWrite1hTokens: 10, ReasoningTokens: 2, Credits: 14}
	if err != nil || got != want {
		t.Errorf("Add = %+v, %v; want %+v", got, err, want)
	}
	if _, err := (credits.Usage{Credits: credits.MaxAmount}).Add(credits.Usage{Credits: 1}); !errors.Is(err, credits.ErrAmountRange) {
		t.Errorf("Add past the maximum = %v; want ErrAmountRange", err)
	}
}

func TestRecordExpiresAfter(t *testing.T) {
	r := chatRecord()
	if got := r.ExpiresAfter(24 * time.Hour); got != 1740830400+86400 {
		t.Errorf("ExpiresAfter(24h) = %d; want %d", got, 1740830400+86400)
	}
	r.Expires = 5
	if got := r.ExpiresAfter(24 * time.Hour); got != 5 || !r.Expired(5) || r.Expired(4) {
		t.Errorf("ExpiresAfter with Expires 5 = %d, Expired(5) %v, Expired(4) %v; want 5, true, false", got, r.Expired(5), r.Expired(4))
	}
}

func TestRecordQuery(t *testing.T) {
	tests := []struct {
		q     credits.RecordQuery
		param string // "" if valid
	}{
		{credits.RecordQuery{}, ""},
		{credits.RecordQuery{Status: "failed", Kind: "image", Limit: credits.MaxRecordLimit}, ""},
		{credits.RecordQuery{Status: "done"}, "status"},
		{credits.RecordQuery{Kind: "video"}, "kind"},
		{credits.RecordQuery{Limit: -1}, "limit"},
		{credits.RecordQuery{Limit: credits.MaxRecordLimit + 1}, "limit"},
		{credits.RecordQuery{Cursor: "nope"}, "after"},
		{credits.RecordQuery{Account: "a\x00"}, "account"},
	}
	for _, tt := range tests {
		q := tt.q
		err := q.Normalize()
		var ae *apierr.Error
		switch {
		case tt.param == "" && (err != nil || q.Limit == 0):
			t.Errorf("Normalize(%+v) = %v, limit %d; want nil and a limit", tt.q, err, q.Limit)
		case tt.param != "" && (!errors.As(err, &ae) || ae.Param != tt.param):
			t.Errorf("Normalize(%+v) = %v; want a 400 naming %q", tt.q, err, tt.param)
		}
	}
	r := chatRecord()
	r.ModelAsked = "alias"
	for _, tt := range []struct {
		q    credits.RecordQuery
		want bool
	}{
		{credits.RecordQuery{}, true},
		{credits.RecordQuery{Account: "acct", Key: "key1", Model: "m", Status: "completed", Kind: "chat"}, true},
		{credits.RecordQuery{Model: "alias"}, true},
		{credits.RecordQuery{Account: "other"}, false},
		{credits.RecordQuery{Key: "key2"}, false},
		{credits.RecordQuery{Status: "failed"}, false},
		{credits.RecordQuery{Kind: "responses"}, false},
	} {
		if got := tt.q.Match(r); got != tt.want {
			t.Errorf("%+v.Match = %v; want %v", tt.q, got, tt.want)
		}
	}
}

func TestRecordCursor(t *testing.T) {
	c := credits.CursorOf(chatRecord())
	got, err := credits.DecodeRecordCursor(c.Encode())
	if err != nil || got != c {
		t.Fatalf("DecodeRecordCursor(Encode(%+v)) = %+v, %v", c, got, err)
	}
	if !c.After(at-1, "z") || !c.After(at, "chatcmpl-0") || c.After(at, "chatcmpl-1") || c.After(at+1, "a") {
		t.Errorf("%+v.After is not the newest-first order", c)
	}
	if z, err := credits.DecodeRecordCursor(""); err != nil || !z.IsZero() || !z.After(at, "x") {
		t.Errorf(`DecodeRecordCursor("") = %+v, %v; want the zero cursor, before everything`, z, err)
	}
	for _, s := range []string{"!!", "e30", (credits.RecordCursor{At: 1}).Encode(), "eyJhIjoxLCJpIjoieCIsInoiOjF9"} {
		if _, err := credits.DecodeRecordCursor(s); err == nil {
			t.Errorf("DecodeRecordCursor(%q) = nil; want an error", s)
		}
	}
}

func TestExplain(t *testing.T) {
	in, cached, write, out := credits.Amount(150_000), credits.Amount(75_000), credits.Amount(187_500), credits.Amount(600_000)
	r := credits.Record{ID: "chatcmpl-1", Kind: credits.KindChat, Account: "a", Model: "m", Status: credits.StatusCompleted, At: at,
		Tokens: credits.Tokens{Prompt: 1007, Cached: 500, CacheWrite: 400, Completion: 33, Reasoning: 12},
		Rates:  credits.TokenRates{Input: in, CachedInput: cached, CacheWrite: write, CacheWrite1h: 300_000, Output: out}}
	// 107 x 0.15 + 500 x 0.075 + 400 x 0.1875 + 33 x 0.6 per million:
	// 16.05 + 37.5 + 75 + 19.8 = 148.35 micro-credits, rounded up to 149.
	r.Cost = 149
	c := r.Explain()
	want := []credits.ChargeLine{
		{Class: "input", Quantity: 107, Rate: in, Per: 1_000_000, Part: "0.00001605"},
		{Class: "cached input", Quantity: 500, Rate: cached, Per: 1_000_000, Part: "0.0000375"},
		{Class: "cache write (5 min)", Quantity: 400, Rate: write, Per: 1_000_000, Part: "0.000075"},
		{Class: "output", Quantity: 33, Rate: out, Per: 1_000_000, Part: "0.0000198", Note: "of which 12 reasoning"},
	}
	if len(c.Lines) != len(want) {
		t.Fatalf("Explain().Lines = %+v; want %+v", c.Lines, want)
	}
	for i := range want {
		if c.Lines[i] != want[i] {
			t.Errorf("Explain().Lines[%d] = %+v; want %+v", i, c.Lines[i], want[i])
		}
	}
	if c.Sum != "0.00014835" || c.Rounded != 149 || c.Cost != 149 || c.Entry != "chat:chatcmpl-1" {
		t.Errorf("Explain() = sum %s, rounded %s, cost %s, entry %q; want 0.00014835, 0.000149, 0.000149, chat:chatcmpl-1", c.Sum, c.Rounded, c.Cost, c.Entry)
	}

	speech := credits.Record{ID: "speech_1", Kind: credits.KindSpeech, Units: 1234, UnitPrice: 1_500_000, Cost: 1_851_000}
	c = speech.Explain()
	// 1234 characters at 1.5 per 1,000: 1.851 exactly.
	if len(c.Lines) != 1 || c.Lines[0].Part != "1.851" || c.Sum != "1.851" || c.Rounded != 1_851_000 || c.Entry != "reserved:speech_1" {
		t.Errorf("speech Explain() = %+v; want one line of 1.851 and the settlement's entry", c)
	}
	img := credits.Record{ID: "img_1", Kind: credits.KindImage, Units: 3, UnitPrice: 2_500_000}
	if c := img.Explain(); c.Sum != "7.5" || c.Rounded != 7_500_000 || c.Entry != "" {
		t.Errorf("image Explain() = %+v; want 7.5, and no entry for a record that cost nothing", c)
	}
}

func TestNewRecordID(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 1000 {
		id := credits.NewRecordID("chatcmpl-", t0.Add(time.Duration(i)*time.Millisecond))
		rest, ok := strings.CutPrefix(id, "chatcmpl-")
		if !ok || len(rest) != 26 || strings.Trim(rest, "0123456789ABCDEFGHJKMNPQRSTVWXYZ") != "" || seen[id] {
			t.Fatalf("NewRecordID = %q; want chatcmpl- and 26 fresh Crockford base32 characters", id)
		}
		// Later ids sort after earlier ones (their time leads).
		if id <= prev {
			t.Fatalf("NewRecordID at +%d ms = %q, not after %q", i, id, prev)
		}
		seen[id], prev = true, id
	}
	// The time is the first 10 characters: 2026-03-01T12:00Z is
	// 1772366400000 ms.
	if got := credits.NewRecordID("", t0)[:10]; got != "01KJMMA2G0" {
		t.Errorf("NewRecordID time part = %q; want 01KJMMA2G0", got)
	}
}
