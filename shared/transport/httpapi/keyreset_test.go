package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// TestAdminKeyReset: POST and PATCH /admin/v1/keys take
// credit_limit_reset; the key view shows it with its period and
// resets_at; a reset without a limit or of an unknown kind is a 400
// naming credit_limit_reset; "none" removes it.
func TestAdminKeyReset(t *testing.T) {
	e := adminServer(t)
	type view struct {
		ID, Prefix, Period string
		Reset              string          `json:"credit_limit_reset"`
		CreditLimit        *credits.Amount `json:"credit_limit"`
		ResetsAt           int64           `json:"resets_at"`
	}
	type errEnv struct {
		Error struct{ Code, Param string }
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/keys", `{"account":"a","credit_limit_reset":"monthly"}`},
		{"POST", "/admin/v1/keys", `{"account":"a","credit_limit":5,"credit_limit_reset":"yearly"}`},
	} {
		var env errEnv
		status, body := e.call(t, bearer, tc.method, tc.path, tc.body, nil)
		if json.Unmarshal([]byte(body), &env); status != 400 || env.Error.Param != "credit_limit_reset" {
			t.Errorf("%s %s %s = %d %s; want 400 naming credit_limit_reset", tc.method, tc.path, tc.body, status, body)
		}
	}
	now := time.Now()
	var k view
	if status, body := e.call(t, bearer, "POST", "/admin/v1/keys", `{"account":"a","credit_limit":5,"credit_limit_reset":"weekly"}`, &k); status != 200 ||
		k.Reset != "weekly" || k.Period != auth.Period(auth.ResetWeekly, now) || k.ResetsAt != auth.NextReset(auth.ResetWeekly, now).Unix() {
		t.Fatalf("create a weekly key = %d %s; want weekly, period %s, resets_at %d", status, body, auth.Period(auth.ResetWeekly, now), auth.NextReset(auth.ResetWeekly, now).Unix())
	}
	var env errEnv
	status, body := e.call(t, bearer, "PATCH", "/admin/v1/keys/"+k.ID, `{"credit_limit_reset":"hourly"}`, nil)
	if json.Unmarshal([]byte(body), &env); status != 400 || env.Error.Param != "credit_limit_reset" {
		t.Errorf("PATCH reset hourly = %d %s; want 400 naming credit_limit_reset", status, body)
	}
	var got view
	if status, body := e.call(t, bearer, "PATCH", "/admin/v1/keys/"+k.Prefix, `{"credit_limit_reset":"daily"}`, &got); status != 200 || got.Reset != "daily" || *got.CreditLimit != 5*credits.Credit {
		t.Errorf("PATCH reset daily = %d %s; want daily, limit 5", status, body)
	}
	got = view{}
	if status, body := e.call(t, bearer, "PATCH", "/admin/v1/keys/"+k.Prefix, `{"credit_limit_reset":"none"}`, &got); status != 200 || got.Reset != "" || got.Period != "" || got.ResetsAt != 0 {
		t.Errorf("PATCH reset none = %d %s; want no reset, period or resets_at", status, body)
	}
}

// TestAdminKeyJobs: POST and PATCH /admin/v1/keys take jobs ("own",
// "account"); the key view shows "own" and omits the default; an unknown
// value is a 400 naming jobs.
func TestAdminKeyJobs(t *testing.T) {
	e := adminServer(t)
	type view struct {
		ID, Prefix string
		Jobs       *string `json:"jobs"`
	}
	var k view
	if status, body := e.call(t, bearer, "POST", "/admin/v1/keys", `{"account":"a","jobs":"own"}`, &k); status != 200 || k.Jobs == nil || *k.Jobs != "own" {
		t.Fatalf("create a key with jobs own = %d %s; want jobs own", status, body)
	}
	var env struct {
		Error struct{ Code, Param string }
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/keys", `{"account":"a","jobs":"mine"}`},
		{"PATCH", "/admin/v1/keys/" + k.ID, `{"jobs":"everything"}`},
	} {
		status, body := e.call(t, bearer, tc.method, tc.path, tc.body, nil)
		if json.Unmarshal([]byte(body), &env); status != 400 || env.Error.Param != "jobs" {
			t.Errorf("%s %s %s = %d %s; want 400 naming jobs", tc.method, tc.path, tc.body, status, body)
		}
	}
	var got view
	if status, body := e.call(t, bearer, "PATCH", "/admin/v1/keys/"+k.Prefix, `{"jobs":"account"}`, &got); status != 200 || got.Jobs != nil {
		t.Errorf("PATCH jobs account = %d %s; want no jobs in the view (every job of the account)", status, body)
	}
}

// TestCreditsKeyReset: GET /v1/credits of a key whose limit resets shows
// the reset, the period its spend counts and when the next starts; a
// period that ended (the key not rolled yet) shows as the current one,
// nothing spent.
func TestCreditsKeyReset(t *testing.T) {
	e := jtServer(t)
	ctx := context.Background()
	if _, err := e.store.Grant(ctx, "acct", 100*credits.Credit, 1); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	lim := 10 * credits.Credit
	for _, tt := range []struct {
		name, period string
		spent        credits.Amount
	}{
		{"current", auth.Period(auth.ResetMonthly, now), 7_250_000},
		{"ended", "2020-01", 0},
	} {
		k, _ := auth.NewKey()
		r := auth.NewRecord(k, "acct", now)
		r.Controls = auth.Controls{CreditLimit: &lim, CreditLimitReset: auth.ResetMonthly}
		r.Spent, r.Period = 7_250_000, tt.period
		if err := e.store.PutKey(ctx, r); err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/v1/credits", nil)
		req = req.WithContext(auth.WithPrincipal(ctx, auth.Principal{Account: "acct", KeyID: r.ID, Limited: true}))
		w := httptest.NewRecorder()
		GetCredits(e.store, slog.New(slog.DiscardHandler)).ServeHTTP(w, req)
		var out struct{ Key keyCredits }
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &out) != nil {
			t.Fatalf("%s: GET /v1/credits = %d %s", tt.name, w.Code, w.Body)
		}
		want := keyCredits{ID: r.ID, CreditLimit: lim, Spent: tt.spent, Left: lim - tt.spent, Reset: "monthly",
			Period: auth.Period(auth.ResetMonthly, now), ResetsAt: auth.NextReset(auth.ResetMonthly, now).Unix()}
		if out.Key != want {
			t.Errorf("%s: key = %+v; want %+v", tt.name, out.Key, want)
		}
	}
}
