package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/webhooks"
)

const adminTestToken = "gwop_admintestadmintestadmintestadmintest"

// adminEnv is the admin API over the jobs test environment's store.
type adminEnv struct {
	*jtEnv
	admin *httptest.Server
}

func adminServer(t *testing.T) *adminEnv {
	t.Helper()
	e := jtServer(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	op := &admin.Service{Store: e.store}
	h := AdminAPI(AdminConfig{Operator: op, Catalog: cat, Configured: func(p string) bool { return p == "synthetic" },
		Verifier: admin.NewVerifier(adminTestToken), Jobs: e.svc, Webhooks: &webhooks.Service{Store: e.store, Jobs: e.store},
		Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &adminEnv{jtEnv: e, admin: srv}
}

// call sends method path with the Authorization header auth ("" none)
// and decodes a JSON answer into out (if not nil).
func (e *adminEnv) call(t *testing.T, auth, method, path, body string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.admin.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

const bearer = "Bearer " + adminTestToken

// TestAdminAuth: every route needs the operator token; no token, a wrong
// one and an API key are all 401 with the envelope, and nothing changes.
func TestAdminAuth(t *testing.T) {
	e := adminServer(t)
	routes := []struct{ method, path, body string }{
		{"GET", "/admin/v1/accounts", ""}, {"POST", "/admin/v1/accounts", `{"id":"x"}`}, {"GET", "/admin/v1/accounts/a", ""},
		{"POST", "/admin/v1/accounts/a/grants", `{"amount":5}`}, {"POST", "/admin/v1/accounts/a/rate_limit", `{"rpm":5}`},
		{"GET", "/admin/v1/accounts/a/ledger", ""}, {"GET", "/admin/v1/keys", ""}, {"POST", "/admin/v1/keys", `{"account":"a"}`},
		{"POST", "/admin/v1/keys/key_x/revoke", ""}, {"GET", "/admin/v1/models", ""}, {"GET", "/admin/v1/usage", ""},
		{"GET", "/admin/v1/audit", ""}, {"GET", "/admin/v1/jobs", ""}, {"GET", "/admin/v1/jobs/job_sfx_x", ""},
		{"POST", "/admin/v1/jobs/job_sfx_x/cancel", ""}, {"GET", "/admin/v1/reservations", ""},
	}
	for _, rt := range routes {
		for _, auth := range []string{"", "Bearer gwop_wrong", "Bearer sk_live_abcdefghijklmnopqrstuvwxyz0123456789ab", adminTestToken, "Basic " + adminTestToken} {
			status, body := e.call(t, auth, rt.method, rt.path, rt.body, nil)
			if status != 401 || !strings.Contains(body, `"code":"invalid_admin_token"`) {
				t.Errorf("%s %s with %q: %d %s; want 401 invalid_admin_token", rt.method, rt.path, auth, status, body)
			}
		}
	}
	if _, err := e.store.Account(context.Background(), "x"); err == nil {
		t.Error("an unauthenticated request made an account")
	}
}

func TestAdminAccountsAndKeys(t *testing.T) {
	e := adminServer(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, param        string
	}{
		{"POST", "/admin/v1/accounts", `{"id":"bad name"}`, 400, "invalid_value", "account"},
		{"POST", "/admin/v1/accounts", `{"id":"c","credits":-1}`, 400, "invalid_value", "credits"},
		{"POST", "/admin/v1/accounts", `{"id":"a"}`, 409, "account_exists", "id"},
		{"POST", "/admin/v1/accounts", `{"id":3}`, 400, "invalid_type", "id"},
		{"POST", "/admin/v1/accounts/a/grants", `{"amount":0}`, 400, "invalid_value", "amount"},
		{"POST", "/admin/v1/accounts/zz/grants", `{"amount":5}`, 404, "account_not_found", ""},
		{"POST", "/admin/v1/accounts/a/rate_limit", `{}`, 400, "missing_field", "rpm"},
		{"GET", "/admin/v1/accounts/zz", "", 404, "account_not_found", ""},
		{"GET", "/admin/v1/accounts?limit=0", "", 400, "invalid_value", "limit"},
		{"POST", "/admin/v1/keys/key_nope/revoke", "", 404, "key_not_found", ""},
		{"GET", "/admin/v1/usage?from=yesterday", "", 400, "invalid_value", "from"},
		{"GET", "/admin/v1/reservations?account=zz", "", 404, "account_not_found", ""},
		{"GET", "/admin/v1/reservations?limit=0", "", 400, "invalid_value", "limit"},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":"https://hooks.example.com/a"}`, 200, "", ""},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":""}`, 200, "", ""},
		{"POST", "/admin/v1/accounts/a/webhook", `{}`, 400, "invalid_value", "url"},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":5}`, 400, "invalid_type", "url"},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":`, 400, "invalid_json", ""},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":"ftp://hooks.example.com/a"}`, 400, "invalid_webhook_url", "url"},
		{"POST", "/admin/v1/accounts/zz/webhook", `{"url":""}`, 404, "account_not_found", ""},
		// A field the route does not take is refused by name, and nothing
		// is made: a typo must not, say, make a key without its scope.
		{"POST", "/admin/v1/accounts", `{"id":"d","credit":5}`, 400, "unknown_parameter", "credit"},
		{"GET", "/admin/v1/accounts/d", "", 404, "account_not_found", ""},
		{"POST", "/admin/v1/accounts/a/grants", `{"amout":6}`, 400, "unknown_parameter", "amout"},
		{"POST", "/admin/v1/keys", `{"account":"a","modles":"synthetic/*"}`, 400, "unknown_parameter", "modles"},
		{"PATCH", "/admin/v1/keys/key_nope", `{"credit_limt":5}`, 400, "unknown_parameter", "credit_limt"},
		{"POST", "/admin/v1/accounts/a/webhook", `{"url":"","urls":[]}`, 400, "unknown_parameter", "urls"},
		{"POST", "/admin/v1/credits/reconcile", `{"day":3}`, 400, "unknown_parameter", "day"},
		{"POST", "/admin/v1/accounts", `{"ID":"b"}`, 409, "account_exists", "id"}, // a name in other case is the field, as encoding/json matches it
		{"POST", "/admin/v1/accounts", `{"id":"z"} {"id":"y"}`, 400, "invalid_json", ""},
		{"GET", "/admin/v1/accounts/z", "", 404, "account_not_found", ""},
	} {
		status, body := e.call(t, bearer, tc.method, tc.path, tc.body, nil)
		var env struct {
			Error struct {
				Code  string  `json:"code"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(body), &env)
		param := ""
		if env.Error.Param != nil {
			param = *env.Error.Param
		}
		if status != tc.status || env.Error.Code != tc.code || param != tc.param {
			t.Errorf("%s %s %s: %d %s; want %d %s param %q", tc.method, tc.path, tc.body, status, body, tc.status, tc.code, tc.param)
		}
	}
	// Make accounts c..g, then page through all of them two at a time.
	for _, id := range []string{"c", "d", "e", "f", "g"} {
		if status, body := e.call(t, bearer, "POST", "/admin/v1/accounts", `{"id":"`+id+`","credits":7,"note":"<b>trial</b>"}`, nil); status != 200 {
			t.Fatalf("create %s: %d %s", id, status, body)
		}
	}
	var seen []string
	after := ""
	for range 10 {
		var page struct {
			Data []struct {
				ID        string `json:"id"`
				Available int64  `json:"available"`
				Keys      int    `json:"keys"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		e.call(t, bearer, "GET", "/admin/v1/accounts?limit=2&after="+after, "", &page)
		for _, a := range page.Data {
			seen = append(seen, a.ID)
		}
		if !page.HasMore {
			break
		}
		after = page.Data[len(page.Data)-1].ID
	}
	if strings.Join(seen, ",") != "a,b,c,d,e,f,g" {
		t.Errorf("paged accounts = %v; want a..g once each, in order", seen)
	}
	// A key: shown once, then only its prefix.
	var created struct {
		Key, ID, Prefix, Status string
	}
	e.call(t, bearer, "POST", "/admin/v1/keys", `{"account":"c"}`, &created)
	if !strings.HasPrefix(created.Key, "sk_live_") || created.Status != "live" || !strings.HasPrefix(created.Key, created.Prefix) {
		t.Fatalf("created key = %+v", created)
	}
	_, list := e.call(t, bearer, "GET", "/admin/v1/keys?account=c", "", nil)
	if strings.Contains(list, created.Key) || strings.Contains(list, `"hash"`) {
		t.Errorf("key list shows the key or its hash: %s", list)
	}
	var revoked struct{ Status string }
	if e.call(t, bearer, "POST", "/admin/v1/keys/"+created.Prefix+"/revoke", "", &revoked); revoked.Status != "revoked" {
		t.Errorf("revoke by prefix: %+v", revoked)
	}
	var acct struct{ Balance int64 }
	e.call(t, bearer, "POST", "/admin/v1/accounts/c/grants", `{"amount":5,"note":"bonus"}`, &acct)
	if acct.Balance != 12 {
		t.Errorf("balance after grant = %d; want 12", acct.Balance)
	}
	// The audit log has every change, by "token", newest first.
	var audit struct {
		Data []admin.AuditEntry `json:"data"`
	}
	e.call(t, bearer, "GET", "/admin/v1/audit?limit=3", "", &audit)
	if len(audit.Data) != 3 || audit.Data[0].Action != "credits.grant" || audit.Data[1].Action != "keys.revoke" || audit.Data[2].Action != "keys.create" || audit.Data[0].Actor != "token" {
		t.Errorf("audit = %+v", audit.Data)
	}
	var models struct {
		Data []struct {
			ID         string `json:"id"`
			Configured bool   `json:"configured"`
		} `json:"data"`
	}
	e.call(t, bearer, "GET", "/admin/v1/models", "", &models)
	conf := map[string]bool{}
	for _, m := range models.Data {
		conf[m.ID] = m.Configured
	}
	if !conf["synthetic/echo"] || conf["openai/gpt-4o"] || len(models.Data) < 20 {
		t.Errorf("models: %d, configured %v", len(models.Data), conf)
	}
}

func TestAdminJobs(t *testing.T) {
	e := adminServer(t)
	ja := e.create(t, "a", "sfx")
	jb := e.create(t, "b", "music")
	var all struct {
		Data []struct {
			ID, Account string
			History     []any `json:"history"`
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	e.call(t, bearer, "GET", "/admin/v1/jobs", "", &all)
	if len(all.Data) != 2 || all.Data[0].ID != jb || all.Data[1].ID != ja || all.Data[0].Account != "b" || len(all.Data[0].History) == 0 {
		t.Fatalf("every account's jobs = %+v; want b's then a's, newest first, with history", all.Data)
	}
	e.call(t, bearer, "GET", "/admin/v1/jobs?account=a", "", &all)
	if len(all.Data) != 1 || all.Data[0].ID != ja {
		t.Errorf("a's jobs = %+v", all.Data)
	}
	if status, _ := e.call(t, bearer, "GET", "/admin/v1/jobs?status=done", "", nil); status != 400 {
		t.Errorf("bad status filter: %d; want 400", status)
	}
	var one struct {
		ID, Account, Status string
		Price               int64
		Input               struct{ Prompt string }
		Error               *struct{ Code string }
	}
	e.call(t, bearer, "GET", "/admin/v1/jobs/"+ja, "", &one)
	if one.ID != ja || one.Account != "a" || one.Input.Prompt == "" || one.Price <= 0 {
		t.Errorf("job = %+v", one)
	}
	e.call(t, bearer, "POST", "/admin/v1/jobs/"+ja+"/cancel", "", &one)
	if one.Status != "failed" || one.Error == nil || one.Error.Code != "cancelled" {
		t.Errorf("cancelled job = %+v", one)
	}
	if status, body := e.call(t, bearer, "POST", "/admin/v1/jobs/"+ja+"/cancel", "", nil); status != 409 || !strings.Contains(body, "job_final") {
		t.Errorf("cancel again: %d %s; want 409 job_final", status, body)
	}
	if status, _ := e.call(t, bearer, "GET", "/admin/v1/jobs/job_sfx_nope0000000000000000", "", nil); status != 404 {
		t.Errorf("unknown job: %d; want 404", status)
	}
}

// TestAdminUsage: GET /admin/v1/usage lists chat usage and, once the
// change feed has settled them, completed jobs (by type and model, with
// their credits); a cancelled job is not counted.
func TestAdminUsage(t *testing.T) {
	e := adminServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	fed := make(chan error, 1)
	go func() {
		fed <- e.store.Feed(ctx, func(ctx context.Context, c credits.Change) error { return credits.Apply(ctx, e.store, c) })
	}()
	t.Cleanup(func() { cancel(); <-fed })
	for i, tokens := range [][2]int64{{1, 3}, {2, 1}} {
		r := credits.Record{ID: fmt.Sprintf("chatcmpl-u%d", i), Kind: credits.KindChat, Account: "a", ModelAsked: "synthetic/echo", Model: "synthetic/echo",
			Tokens: credits.Tokens{Prompt: tokens[0], Completion: tokens[1]}, Status: credits.StatusCompleted, At: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()}
		if err := e.store.AddRecords(ctx, []credits.Record{r})[0]; err != nil {
			t.Fatal(err)
		}
	}
	e.complete(t, e.create(t, "a", "sfx"))
	e.complete(t, e.create(t, "a", "sfx"))
	e.complete(t, e.create(t, "b", "video"))
	if status, body := e.call(t, bearer, "POST", "/admin/v1/jobs/"+e.create(t, "a", "music")+"/cancel", "", nil); status != 200 {
		t.Fatalf("cancel: %d %s", status, body)
	}
	type row struct {
		Account          string `json:"account"`
		Day              string `json:"day"`
		Kind             string `json:"kind"`
		Model            string `json:"model"`
		Requests         int64  `json:"requests"`
		PromptTokens     int64  `json:"prompt_tokens"`
		CompletionTokens int64  `json:"completion_tokens"`
		Jobs             int64  `json:"jobs"`
		Credits          int64  `json:"credits"`
	}
	var got struct {
		Object string `json:"object"`
		Data   []row  `json:"data"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if status, body := e.call(t, bearer, "GET", "/admin/v1/usage", "", &got); status != 200 {
			t.Fatalf("GET /admin/v1/usage = %d %s", status, body)
		}
		if len(got.Data) == 3 || time.Now().After(deadline) {
			break
		}
	}
	// Jobs count on the UTC day they ended: today, give or take a midnight.
	for i := range got.Data {
		if got.Data[i].Kind != "chat" {
			if credits.CheckDay(got.Data[i].Day) != nil {
				t.Errorf("row %+v: day is not YYYY-MM-DD", got.Data[i])
			}
			got.Data[i].Day = "today"
		}
	}
	// synthetic-sfx and synthetic-video cost 1 credit a second; the jobs
	// are 2 seconds long.
	want := []row{
		{Account: "a", Day: "2025-06-01", Kind: "chat", Model: "synthetic/echo", Requests: 2, PromptTokens: 3, CompletionTokens: 4},
		{Account: "a", Day: "today", Kind: "sfx", Model: "synthetic-sfx", Jobs: 2, Credits: 4},
		{Account: "b", Day: "today", Kind: "video", Model: "synthetic-video", Jobs: 1, Credits: 2},
	}
	if got.Object != "list" || fmt.Sprint(got.Data) != fmt.Sprint(want) {
		t.Errorf("GET /admin/v1/usage = %s %+v; want list %+v", got.Object, got.Data, want)
	}
	if status, body := e.call(t, bearer, "GET", "/admin/v1/usage?account=a&from=2025-06-02&to=2025-06-01", "", nil); status != 400 || !strings.Contains(body, `"param":"from"`) {
		t.Errorf("from after to: %d %s; want a 400 naming from", status, body)
	}
}
