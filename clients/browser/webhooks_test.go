package browser

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleWebhooks: a job's page shows its webhook deliveries (status,
// attempts, last answer) and resends one; an account's webhook page sets
// its default URL and rotates its secret. The job page's screenshot is
// the one in docs/console-job-deliveries.png (GENWAY_SCREENSHOTS keeps
// it).
func TestConsoleWebhooks(t *testing.T) {
	chromium := findChromium(t)
	// The receiver: /flaky answers 500 to each event's first delivery,
	// then 200; /down always 503.
	var mu sync.Mutex
	seen := map[string]int{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		id := r.Header.Get("webhook-id")
		seen[r.URL.Path+" "+id]++
		n := seen[r.URL.Path+" "+id]
		mu.Unlock()
		switch {
		case r.URL.Path == "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "<html><body>Service Unavailable\r\n\x1b[0m maintenance until 14:00</body></html>")
		case n == 1:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":"database is locked"}`)
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer rcv.Close()
	srv := startGenway(t, buildGenway(t), pacedCatalog(t), "GENWAY_WEBHOOK_ALLOW_PRIVATE=1")
	b := newBrowser(t, chromium, srv.URL, screenshotDir(t))

	var job struct{ ID string }
	if st := srv.api(t, "POST", "/v1/jobs", srv.DevKey, `{"type":"music","model":"synthetic-music","prompt":"a short tune","duration":2,"webhook_url":"`+rcv.URL+`/flaky"}`, &job); st != 200 {
		t.Fatalf("POST /v1/jobs with webhook_url: %d", st)
	}
	var down struct{ ID string }
	if st := srv.api(t, "POST", "/v1/jobs", srv.DevKey, `{"type":"sfx","model":"synthetic-sfx","prompt":"door","duration":1,"webhook_url":"`+rcv.URL+`/down"}`, &down); st != 200 {
		t.Fatalf("POST /v1/jobs: %d", st)
	}
	// Delivered after a 500 and its retry (within 10 s).
	deadline := time.Now().Add(60 * time.Second)
	for {
		var list struct {
			Data []struct{ Status string } `json:"data"`
		}
		srv.api(t, "GET", "/admin/v1/jobs/"+job.ID+"/deliveries", srv.Token, "", &list)
		if len(list.Data) == 1 && list.Data[0].Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook of %s is not delivered after 60 s: %+v", job.ID, list.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}

	b.signIn(srv.Token)

	b.open("/console/jobs/" + job.ID)
	row := b.text("#deliveries tbody tr")
	for _, want := range []string{"evt_" + strings.TrimPrefix(job.ID, "job_"), "job.completed", "delivered", "2", "200", `{"ok":true}`} {
		if !strings.Contains(row, want) {
			t.Errorf("the job page's delivery row %q lacks %q", row, want)
		}
	}
	b.shot("job-deliveries")
	b.submit("resend", `form[action$="/webhook/resend"] button`, 200)
	if !strings.Contains(b.text("body"), "webhook resent") {
		t.Error("no flash after the resend")
	}
	b.waitJS("the resent delivery", `(async () => { const r = await fetch(location.pathname); const t = await r.text(); return t.includes(">3</td>") && t.includes(">delivered<"); })()`)
	mu.Lock()
	if n := seen["/flaky evt_"+strings.TrimPrefix(job.ID, "job_")]; n != 3 {
		t.Errorf("the receiver got %d deliveries of the event; want 3 (500, its retry, the resend)", n)
	}
	mu.Unlock()

	// A receiver that keeps failing: pending, its last answer sanitized.
	// The page does not refresh itself once the job is final: the wait
	// reads it again until the first attempt's answer is on it.
	b.open("/console/jobs/" + down.ID)
	b.waitJS("a failed attempt", `(async () => { const r = await fetch(location.pathname); const t = await r.text(); return t.includes("<strong>503</strong>"); })()`)
	b.open("/console/jobs/" + down.ID)
	row = b.text("#deliveries tbody tr")
	if !strings.Contains(row, "pending") || !strings.Contains(row, "503") || strings.Contains(row, "\x1b") {
		t.Errorf("the failing delivery's row %q; want pending, 503, no control characters", row)
	}
	b.shot("job-deliveries-failing")

	// The account's webhook page: default URL, rotation.
	b.open("/console/accounts/dev/webhook")
	b.do("type the URL", chromedp.SendKeys(chromedp.ID("url"), rcv.URL+"/flaky"))
	b.submit("save the URL", `form[action="/console/accounts/dev/webhook"] button`, 200)
	if !strings.Contains(b.text("dl.facts"), rcv.URL+"/flaky") {
		t.Error("the default URL is not shown after saving it")
	}
	b.submit("rotate", `form[action="/console/accounts/dev/webhook/rotate"] button`, 200)
	if !strings.Contains(b.text("dl.facts"), "still signs") {
		t.Error("no previous secret shown after the rotation")
	}
	b.shot("account-webhook")
	var sec struct{ Secret string }
	srv.api(t, "GET", "/v1/webhooks/secret", srv.DevKey, "", &sec)
	if !strings.HasPrefix(sec.Secret, "whsec_") || strings.Contains(b.text("body"), sec.Secret) {
		t.Error("the console shows the whole secret")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Errorf("page errors: %v", b.problems)
	}
	if os.Getenv("GENWAY_SCREENSHOTS") == "" {
		t.Log("set GENWAY_SCREENSHOTS=dir to keep the screenshots")
	}
}
