package console

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// consoleRecords are the fake operator's records: a priced chat request
// with cached and reasoning tokens, a failed one, an image and a speech,
// newest first.
func consoleRecords() []credits.Record {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	return []credits.Record{
		{ID: "chatcmpl-priced", Kind: credits.KindChat, Account: "acme", Key: "key_1", ModelAsked: "fast", Model: "openai/gpt-4o-mini", Provider: "openai",
			Attempts: "openai/gpt-4o-mini=200", Tokens: credits.Tokens{Prompt: 1007, Cached: 500, CacheWrite: 400, Completion: 33, Reasoning: 12},
			Rates: credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 187_500, CacheWrite1h: 300_000, Output: 600_000},
			Cost:  149, Status: credits.StatusCompleted, FinishReason: "stop", Stream: true, LatencyMS: 1260, FirstTokenMS: 240, At: at, Expires: at/1000 + 86400},
		{ID: "chatcmpl-failed", Kind: credits.KindChat, Account: "acme", ModelAsked: "openai/gpt-4o", Attempts: "openai/gpt-4o=503",
			Status: credits.StatusFailed, LatencyMS: 900, At: at - 1000},
		{ID: "img_1", Kind: credits.KindImage, Account: "other", ModelAsked: "flux-dev", Model: "flux-dev", Units: 2, UnitPrice: 3_000_000,
			Cost: 6_000_000, Status: credits.StatusCompleted, LatencyMS: 4000, At: at - 2000},
		{ID: "speech_1", Kind: credits.KindSpeech, Account: "acme", ModelAsked: "tts-1", Model: "tts-1", Units: 1234, UnitPrice: 1_500_000,
			Cost: 1_851_000, Status: credits.StatusClientClosed, Partial: true, LatencyMS: 2000, At: at - 3000},
	}
}

// TestRequestsPage: the requests page lists the records newest first,
// filters them (the form's values reach the query), pages them, and links
// each to its detail; it is in the nav.
func TestRequestsPage(t *testing.T) {
	srv, op := server(t)
	op.recs = consoleRecords()
	c := browser(t)
	signIn(t, c, srv.URL)
	resp, body := get(t, c, srv.URL+"/console/requests")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/requests = %d", resp.StatusCode)
	}
	last := -1
	for _, id := range []string{"chatcmpl-priced", "chatcmpl-failed", "img_1", "speech_1"} {
		i := strings.Index(body, `href="/console/requests/`+id+`"`)
		if i < last {
			t.Errorf("requests page: %s missing or out of order", id)
		}
		last = i
	}
	for _, want := range []string{`<a href="/console/requests" aria-current="page">Requests</a>`, "1007 / 33", "0.000149", "2 image(s)", "1234 characters",
		"asked <code>fast</code>", "partial", "1.3 s"} {
		if !strings.Contains(body, want) {
			t.Errorf("requests page lacks %q", want)
		}
	}
	_, body = get(t, c, srv.URL+"/console/requests?account=acme&status=failed&kind=chat&model=openai%2Fgpt-4o&key=")
	if q := op.query; q.Account != "acme" || q.Status != "failed" || q.Kind != "chat" || q.Model != "openai/gpt-4o" || q.Limit != requestsPageSize {
		t.Errorf("query = %+v; want the form's filters", q)
	}
	if !strings.Contains(body, "chatcmpl-failed") || strings.Contains(body, "chatcmpl-priced") || !strings.Contains(body, `<option selected>failed</option>`) {
		t.Errorf("filtered page: want the failed request alone, its status selected")
	}
	if _, body = get(t, c, srv.URL+"/console/requests?account=nobody"); !strings.Contains(body, "No requests match these filters.") {
		t.Error("an empty filtered page does not say so")
	}
	if resp, body := get(t, c, srv.URL+"/console/requests?status=done"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "status") {
		t.Errorf("a bad status: %d; want a 400 naming it", resp.StatusCode)
	}
	// Paging: more records than a page.
	op.recs = nil
	for i := range requestsPageSize + 3 {
		op.recs = append(op.recs, credits.Record{ID: fmt.Sprintf("chatcmpl-%03d", 999-i), Kind: credits.KindChat, Account: "acme", ModelAsked: "m", Model: "m",
			Status: credits.StatusCompleted, At: int64(2_000_000_000_000 - i)})
	}
	_, body = get(t, c, srv.URL+"/console/requests")
	next := nextRE.FindStringSubmatch(body)
	if next == nil || strings.Count(body, `href="/console/requests/chatcmpl-`) != requestsPageSize {
		t.Fatalf("first page: want %d rows and a next link", requestsPageSize)
	}
	_, body = get(t, c, srv.URL+strings.ReplaceAll(next[1], "&amp;", "&"))
	if strings.Count(body, `href="/console/requests/chatcmpl-`) != 3 || !strings.Contains(body, "chatcmpl-947") {
		t.Errorf("second page: want the 3 oldest")
	}
}

var nextRE = regexp.MustCompile(`id="requests-next" href="([^"]+)"`)

// TestRequestPage: a request's detail explains its charge line by line
// (each class x its rate = its part, the exact sum, the one rounding,
// the charge, the ledger entry); a failed request says nothing was
// charged; an unknown id is a 404.
func TestRequestPage(t *testing.T) {
	srv, op := server(t)
	op.recs = consoleRecords()
	c := browser(t)
	signIn(t, c, srv.URL)
	resp, body := get(t, c, srv.URL+"/console/requests/chatcmpl-priced")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET detail = %d", resp.StatusCode)
	}
	for _, want := range []string{
		"<td>input</td><td class=\"num\">107</td><td class=\"num\">0.15</td><td class=\"num\">0.00001605</td>",
		"<td>cached input</td><td class=\"num\">500</td><td class=\"num\">0.075</td><td class=\"num\">0.0000375</td>",
		"<td>cache write (5 min)</td><td class=\"num\">400</td><td class=\"num\">0.1875</td><td class=\"num\">0.000075</td>",
		"output <span class=\"muted\">(of which 12 reasoning)</span></td><td class=\"num\">33</td><td class=\"num\">0.6</td><td class=\"num\">0.0000198</td>",
		"Sum, exact</th><td class=\"num\">0.00014835</td>",
		"Rounded up once, to the millionth of a credit</th><td class=\"num\">0.000149</td>",
		"<strong>0.000149</strong>", "<code>chat:chatcmpl-priced</code>", "credits per 1M tokens",
		"first token after 240 ms", "<code>openai/gpt-4o-mini=200</code>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	_, body = get(t, c, srv.URL+"/console/requests/chatcmpl-failed")
	if !strings.Contains(body, "No candidate answered: nothing was charged.") || strings.Contains(body, `id="charge"`) {
		t.Error("a failed request's page does not say nothing was charged")
	}
	_, body = get(t, c, srv.URL+"/console/requests/speech_1")
	if !strings.Contains(body, "credits per 1,000 characters") || !strings.Contains(body, "<td class=\"num\">1.851</td>") || !strings.Contains(body, "reserved:speech_1") {
		t.Error("a speech's page does not explain its charge per 1,000 characters, with its settlement")
	}
	if resp, _ := get(t, c, srv.URL+"/console/requests/chatcmpl-nothing"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown request: %d; want 404", resp.StatusCode)
	}
}
