package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
)

const testToken = "gwop_testtokentesttokentesttokentesttoken"

// testSessionSecret is the console session secret of the tests' consoles.
const testSessionSecret = "0123456789abcdef0123456789abcdef-test-session-secret"

// memSessions is an in-memory admin.SessionStore; with down set, every
// call fails.
type memSessions struct {
	mu   sync.Mutex
	live map[string]int64
	down bool
}

func newMemSessions() *memSessions { return &memSessions{live: map[string]int64{}} }

var errSessionsDown = errors.New("session store down")

func (m *memSessions) AddSession(_ context.Context, id string, expires int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errSessionsDown
	}
	m.live[id] = expires
	return nil
}

func (m *memSessions) SessionLive(_ context.Context, id string, now int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return false, errSessionsDown
	}
	exp, ok := m.live[id]
	return ok && exp > now, nil
}

func (m *memSessions) EndSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errSessionsDown
	}
	delete(m.live, id)
	return nil
}

// withSessions gives cfg session keys (testSessionSecret and its
// verifier's token) and an in-memory session store.
func withSessions(t *testing.T, cfg Config) Config {
	t.Helper()
	keys, err := admin.NewSessionKeys(cfg.Verifier, []byte(testSessionSecret))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SessionKeys, cfg.Sessions = keys, newMemSessions()
	return cfg
}

func timeNow() time.Time { return time.Now() }

// fakeOperator is an in-memory admin.Operator: accounts, keys, audit.
type fakeOperator struct {
	mu     sync.Mutex
	accts  map[string]credits.Account
	keys   []auth.Record
	audit  []admin.AuditEntry
	usage  []admin.DayUsage
	ledger []credits.Entry
	recs   []credits.Record // newest first
	query  credits.RecordQuery
}

func newFake() *fakeOperator { return &fakeOperator{accts: map[string]credits.Account{}} }

func (f *fakeOperator) rec(ctx context.Context, action, target string) {
	f.audit = append(f.audit, admin.AuditEntry{Actor: admin.Actor(ctx), Action: action, Target: target})
}
func (f *fakeOperator) CreateKey(ctx context.Context, account string, n credits.Amount, c auth.Controls) (auth.Key, auth.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, _ := auth.NewKey()
	r := auth.NewRecord(k, account, timeNow())
	r.Controls = c
	f.keys = append(f.keys, r)
	if _, ok := f.accts[account]; !ok {
		f.accts[account] = credits.Account{ID: account}
	}
	f.rec(ctx, "keys.create", r.Prefix)
	return k, r, nil
}
func (f *fakeOperator) ImportKey(context.Context, string, auth.Key) (auth.Record, error) {
	return auth.Record{}, nil
}
func (f *fakeOperator) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []auth.Record
	for _, k := range f.keys {
		if account == "" || k.Account == account {
			out = append(out, k)
		}
	}
	return out, nil
}
func (f *fakeOperator) UpdateKey(ctx context.Context, id string, ch auth.Change) (auth.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.keys {
		if f.keys[i].ID == id {
			f.keys[i].Controls = ch.Apply(f.keys[i].Controls)
			f.rec(ctx, "keys.update", f.keys[i].Prefix)
			return f.keys[i], nil
		}
	}
	return auth.Record{}, auth.ErrKeyNotFound
}
func (f *fakeOperator) RevokeKey(ctx context.Context, id string) (auth.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.keys {
		if f.keys[i].ID == id {
			f.keys[i].Revoked = 1
			f.rec(ctx, "keys.revoke", f.keys[i].Prefix)
			return f.keys[i], nil
		}
	}
	return auth.Record{}, auth.ErrKeyNotFound
}
func (f *fakeOperator) Grant(ctx context.Context, account string, n credits.Amount, note string) (credits.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accts[account]
	if !ok {
		return a, credits.ErrAccountNotFound
	}
	a.Balance += n
	a.Available += n
	f.accts[account] = a
	f.rec(ctx, "credits.grant", account)
	return a, nil
}
func (f *fakeOperator) CreateAccount(ctx context.Context, account string, n credits.Amount, note string) (credits.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.accts[account]; ok {
		return credits.Account{}, admin.ErrAccountExists
	}
	f.accts[account] = credits.Account{ID: account, Balance: n, Available: n}
	f.rec(ctx, "accounts.create", account)
	return f.accts[account], nil
}
func (f *fakeOperator) Account(ctx context.Context, account string) (credits.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accts[account]
	if !ok {
		return a, credits.ErrAccountNotFound
	}
	return a, nil
}
func (f *fakeOperator) Accounts(ctx context.Context) ([]admin.AccountInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []admin.AccountInfo
	for _, a := range f.accts {
		out = append(out, admin.AccountInfo{Account: a})
	}
	return out, nil
}
func (f *fakeOperator) Reconcile(context.Context, int) (jobs.ReconcileResult, error) {
	return jobs.ReconcileResult{}, nil
}
func (f *fakeOperator) Reservations(context.Context, string) ([]credits.Entry, error) {
	return nil, nil
}
func (f *fakeOperator) Ledger(_ context.Context, account string) ([]credits.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []credits.Entry
	for _, e := range f.ledger {
		if e.Account == account {
			out = append(out, e)
		}
	}
	return out, nil
}
func (f *fakeOperator) SetRateLimit(ctx context.Context, account string, rpm int) (credits.Account, error) {
	return f.Account(ctx, account)
}
func (f *fakeOperator) Usage(_ context.Context, account, from, to string) ([]admin.DayUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []admin.DayUsage
	for _, u := range f.usage {
		if (account == "" || u.Account == account) && (from == "" || u.Day >= from) && (to == "" || u.Day <= to) {
			out = append(out, u)
		}
	}
	return out, nil
}

// Record implements the console's recorder (admin.Service's audit).
func (f *fakeOperator) Record(ctx context.Context, action, target, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audit = append(f.audit, admin.AuditEntry{Actor: admin.Actor(ctx), Action: action, Target: target, Detail: detail})
}

// Requests pages f.recs (newest first) as the stores do, and keeps q.
func (f *fakeOperator) Requests(_ context.Context, q credits.RecordQuery) ([]credits.Record, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	f.query = q
	cur, _ := credits.DecodeRecordCursor(q.Cursor)
	var out []credits.Record
	for _, r := range f.recs {
		if !q.Match(r) || !cur.After(r.At, r.ID) {
			continue
		}
		if len(out) == q.Limit {
			return out, credits.CursorOf(out[len(out)-1]).Encode(), nil
		}
		out = append(out, r)
	}
	return out, "", nil
}
func (f *fakeOperator) Request(_ context.Context, id string) (credits.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.recs {
		if r.ID == id {
			return r, nil
		}
	}
	return credits.Record{}, admin.ErrRecordNotFound
}
func (f *fakeOperator) Audit(context.Context, string, int) ([]admin.AuditEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]admin.AuditEntry(nil), f.audit...), nil
}

// server is the console over a fake operator, on loopback.
func server(t *testing.T) (*httptest.Server, *fakeOperator) {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	op := newFake()
	c, err := New(withSessions(t, Config{Operator: op, Verifier: admin.NewVerifier(testToken), Catalog: cat}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, op
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects (so tests see them).
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

// signIn signs c in and returns the session's CSRF token.
func signIn(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, _ := post(t, c, base+"/console/signin", url.Values{"token": {testToken}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: status %d; want 303", resp.StatusCode)
	}
	_, body := get(t, c, base+"/console/models")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the models page")
	}
	return m[1]
}

func TestSignIn(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	// Not signed in: pages send to sign-in.
	if resp, _ := get(t, c, srv.URL+"/console/keys"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
		t.Errorf("keys before sign-in: %d to %q; want 303 to /console/signin", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A wrong token, and an API key, are refused.
	for _, tok := range []string{"nope", "sk_live_abcdefghijklmnopqrstuvwxyz0123456789", ""} {
		if resp, _ := post(t, c, srv.URL+"/console/signin", url.Values{"token": {tok}}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("sign in with %q: %d; want 401", tok, resp.StatusCode)
		}
	}
	// The right one: a cookie with the flags.
	resp, _ := post(t, c, srv.URL+"/console/signin", url.Values{"token": {testToken}})
	var ck *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == cookieName {
			ck = x
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" || ck.MaxAge <= 0 {
		t.Fatalf("session cookie = %+v; want HttpOnly, SameSite=Strict, path /console/, an expiry", ck)
	}
	if ck.Secure {
		t.Error("cookie is Secure over plain http: the browser would drop it")
	}
	// Over https (API Gateway says so), the cookie is Secure.
	req, _ := http.NewRequest("POST", srv.URL+"/console/signin", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp2, err := browser(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if cs := resp2.Cookies(); len(cs) == 0 || !cs[0].Secure {
		t.Errorf("cookie over https = %+v; want Secure", cs)
	}
	// The sign-in link works once and leaves no token in the URL.
	c2 := browser(t)
	resp3, _ := get(t, c2, srv.URL+"/console/signin?token="+testToken)
	if resp3.StatusCode != http.StatusSeeOther || strings.Contains(resp3.Header.Get("Location"), "token") {
		t.Errorf("sign-in link: %d to %q; want 303 to a URL without the token", resp3.StatusCode, resp3.Header.Get("Location"))
	}
	if r, _ := get(t, c2, srv.URL+"/console/models"); r.StatusCode != 200 {
		t.Errorf("after the sign-in link: models %d", r.StatusCode)
	}
	_ = op
}

func TestSignInRateLimited(t *testing.T) {
	srv, _ := server(t)
	c := browser(t)
	got429 := false
	for range 20 {
		resp, _ := post(t, c, srv.URL+"/console/signin", url.Values{"token": {"wrong"}})
		if resp.StatusCode == http.StatusTooManyRequests {
			got429 = true
			break
		}
	}
	if !got429 {
		t.Fatal("20 wrong sign-ins in a row were never refused with 429")
	}
	// Even the right token waits now: guessing gets no faster.
	if resp, _ := post(t, c, srv.URL+"/console/signin", url.Values{"token": {testToken}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("right token while limited: %d; want 429", resp.StatusCode)
	}
}

func TestCSRF(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	for _, tc := range []struct {
		name string
		form url.Values
		want int
	}{
		{"no token", url.Values{"id": {"acme"}}, http.StatusForbidden},
		{"wrong token", url.Values{"id": {"acme"}, "csrf": {"x" + csrf}}, http.StatusForbidden},
		{"right token", url.Values{"id": {"acme"}, "csrf": {csrf}}, http.StatusSeeOther},
	} {
		resp, _ := post(t, c, srv.URL+"/console/accounts", tc.form)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if len(op.accts) != 1 {
		t.Errorf("accounts = %v; want only the one made with the right token", op.accts)
	}
	// Another session's token is not this one's.
	c2 := browser(t)
	signIn(t, c2, srv.URL)
	if resp, _ := post(t, c2, srv.URL+"/console/accounts", url.Values{"id": {"other"}, "csrf": {csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d; want 403", resp.StatusCode)
	}
}

func TestHeadersAndEscaping(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	evil := `<script>alert(1)</script>`
	op.accts[evil] = credits.Account{ID: evil}
	op.audit = append(op.audit, admin.AuditEntry{Actor: "x", Action: "credits.grant", Target: evil, Detail: `<img src=x onerror=alert(2)>`})
	for _, page := range []string{"/console/models", "/console/accounts", "/console/keys", "/console/audit", "/console/signin", "/console/nope"} {
		resp, body := get(t, c, srv.URL+page)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q; want script-src 'self', no unsafe-inline, frame-ancestors 'none'", page, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: missing nosniff / no-referrer", page)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("%s renders user text unescaped", page)
		}
		if strings.Contains(body, "<script>") || regexp.MustCompile(`<script(?: [^>]*)?>[^<]`).MatchString(body) {
			t.Errorf("%s has an inline script", page)
		}
	}
	_ = csrf
}

func TestKeyShownOnce(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	resp, body := post(t, c, srv.URL+"/console/keys", url.Values{"account": {"acme"}, "csrf": {csrf}})
	if resp.StatusCode != 200 {
		t.Fatalf("create key: %d", resp.StatusCode)
	}
	key := regexp.MustCompile(`sk_live_[A-Za-z0-9]+`).FindString(body)
	if key == "" || !strings.Contains(body, "shown this once") {
		t.Fatalf("create key page shows no key and warning")
	}
	if _, again := get(t, c, srv.URL+"/console/keys"); strings.Contains(again, key) {
		t.Error("the key is shown again on the next visit")
	}
	// Revoke: the operator sees it revoked and the audit log has both.
	id := op.keys[0].ID
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+id+"/revoke", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if op.keys[0].Revoked == 0 {
		t.Error("key not revoked")
	}
	_, audit := get(t, c, srv.URL+"/console/audit")
	if !strings.Contains(audit, "keys.create") || !strings.Contains(audit, "keys.revoke") || !strings.Contains(audit, "console:") {
		t.Errorf("audit page lacks the actions or the console actor")
	}
}

// TestKeyControlsForm creates a key with every control from the key
// form, sees them (and the spend) in the list and on the key's page, and
// changes them there without re-issuing the key.
func TestKeyControlsForm(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	form := url.Values{"account": {"acme"}, "csrf": {csrf}, "name": {"intern"}, "models": {"synthetic/*, openai/gpt-4o-mini"},
		"expires": {"30d"}, "credit_limit": {"10.5"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys", form); resp.StatusCode != 200 {
		t.Fatalf("create key with controls: %d", resp.StatusCode)
	}
	k := op.keys[0]
	if k.Name != "intern" || len(k.Models) != 2 || k.Models[1] != "openai/gpt-4o-mini" || k.CreditLimit == nil || *k.CreditLimit != 10_500_000 ||
		k.ExpiresAt < timeNow().Add(29*24*time.Hour).Unix() {
		t.Fatalf("created key = %+v; want name intern, 2 model patterns, limit 10.5, expiry in 30 days", k)
	}
	_, list := get(t, c, srv.URL+"/console/keys")
	for _, want := range []string{"intern", "synthetic/*, openai/gpt-4o-mini", "0 / 10.5", "/console/keys/" + k.ID} {
		if !strings.Contains(list, want) {
			t.Errorf("keys page lacks %q", want)
		}
	}
	if _, page := get(t, c, srv.URL+"/console/keys/"+k.ID); !strings.Contains(page, `value="intern"`) || !strings.Contains(page, "10.5 left") {
		t.Errorf("key page lacks the form's current name or the credits left")
	}
	upd := url.Values{"csrf": {csrf}, "name": {"renamed"}, "models": {""}, "expires": {""}, "credit_limit": {"25"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, upd); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("update key: %d", resp.StatusCode)
	}
	k = op.keys[0]
	if k.Name != "renamed" || len(k.Models) != 0 || k.ExpiresAt != 0 || k.CreditLimit == nil || *k.CreditLimit != 25*credits.Credit {
		t.Errorf("updated key = %+v; want renamed, every model, no expiry, limit 25", k)
	}
	upd.Set("credit_limit", "")
	post(t, c, srv.URL+"/console/keys/"+k.ID, upd)
	if op.keys[0].CreditLimit != nil {
		t.Errorf("limit after an empty credit_limit = %v; want none", *op.keys[0].CreditLimit)
	}
	for _, bad := range []url.Values{
		{"csrf": {csrf}, "expires": {"soon"}},
		{"csrf": {csrf}, "credit_limit": {"-3"}},
		{"csrf": {csrf}, "credit_limit": {"0.0000001"}},
		{"csrf": {csrf}, "credit_limit": {"1e13"}},
		{"csrf": {csrf}, "models": {"a b"}},
	} {
		if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("update with %v: %d; want 400", bad, resp.StatusCode)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/console/keys/key_nosuch"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown key page: %d; want 404", resp.StatusCode)
	}
}

// TestKeyResetForm: the key form and the edit form have a select of
// credit limit resets; the list and the key's page show the reset and
// its period; a reset without a limit, or of an unknown kind, is a 400.
func TestKeyResetForm(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	form := url.Values{"account": {"acme"}, "csrf": {csrf}, "credit_limit": {"10"}, "credit_limit_reset": {"monthly"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys", form); resp.StatusCode != 200 {
		t.Fatalf("create key with a monthly limit: %d", resp.StatusCode)
	}
	op.mu.Lock()
	op.keys[0].Period = "2026-11"
	k := op.keys[0]
	op.mu.Unlock()
	if k.CreditLimitReset != auth.ResetMonthly {
		t.Fatalf("created key = %+v; want reset monthly", k)
	}
	if _, list := get(t, c, srv.URL+"/console/keys"); !strings.Contains(list, "0 / 10 monthly (2026-11)") || !strings.Contains(list, `name="credit_limit_reset"`) {
		t.Errorf("keys page lacks the key's reset and period, or the form's select")
	}
	if _, page := get(t, c, srv.URL+"/console/keys/"+k.ID); !strings.Contains(page, `<option value="monthly" selected>`) ||
		!strings.Contains(page, "monthly: spent counts period 2026-11, the next starts 2026-12-01 00:00:00") {
		t.Errorf("key page lacks the selected reset or its period")
	}
	upd := url.Values{"csrf": {csrf}, "credit_limit": {"10"}, "credit_limit_reset": {"weekly"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, upd); resp.StatusCode != http.StatusSeeOther || op.keys[0].CreditLimitReset != auth.ResetWeekly {
		t.Errorf("update to weekly: %d, %+v; want 303 and weekly", resp.StatusCode, op.keys[0].Controls)
	}
	upd.Set("credit_limit_reset", "")
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, upd); resp.StatusCode != http.StatusSeeOther || op.keys[0].CreditLimitReset != auth.ResetNever {
		t.Errorf("update to never: %d, %+v; want 303 and no reset", resp.StatusCode, op.keys[0].Controls)
	}
	for _, bad := range []url.Values{
		{"csrf": {csrf}, "credit_limit_reset": {"monthly"}},
		{"csrf": {csrf}, "credit_limit": {"5"}, "credit_limit_reset": {"yearly"}},
	} {
		if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("update with %v: %d; want 400", bad, resp.StatusCode)
		}
	}
}

// TestKeyJobsForm: the key forms have a select of the jobs a key sees;
// the list and the key's page show a key limited to its own jobs; an
// unknown value is a 400.
func TestKeyJobsForm(t *testing.T) {
	srv, op := server(t)
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	if _, list := get(t, c, srv.URL+"/console/keys"); !strings.Contains(list, `<select id="key-jobs" name="jobs">`) {
		t.Errorf("the new key form has no jobs select")
	}
	form := url.Values{"account": {"acme"}, "csrf": {csrf}, "jobs": {"own"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys", form); resp.StatusCode != 200 {
		t.Fatalf("create key limited to its own jobs: %d", resp.StatusCode)
	}
	op.mu.Lock()
	k := op.keys[0]
	op.mu.Unlock()
	if k.Jobs != auth.JobsOwn {
		t.Fatalf("created key = %+v; want jobs own", k.Controls)
	}
	if _, list := get(t, c, srv.URL+"/console/keys"); !strings.Contains(list, "own jobs only") {
		t.Errorf("keys page does not say the key sees only its own jobs")
	}
	if _, page := get(t, c, srv.URL+"/console/keys/"+k.ID); !strings.Contains(page, `<option value="own" selected>`) ||
		!strings.Contains(page, `<dd id="jobs">only the jobs it created</dd>`) {
		t.Errorf("key page lacks the selected jobs control")
	}
	upd := url.Values{"csrf": {csrf}, "jobs": {"account"}}
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, upd); resp.StatusCode != http.StatusSeeOther || op.keys[0].Jobs != auth.JobsAccount {
		t.Errorf("update to account: %d, %+v; want 303 and every job of the account", resp.StatusCode, op.keys[0].Controls)
	}
	if resp, _ := post(t, c, srv.URL+"/console/keys/"+k.ID, url.Values{"csrf": {csrf}, "jobs": {"mine"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("update with jobs=mine: %d; want 400", resp.StatusCode)
	}
}

// TestSignOut: signing out ends the session on the server: its cookie,
// replayed from anywhere, is refused, and its CSRF token changes nothing.
func TestSignOut(t *testing.T) {
	srv, op := server(t)
	op.accts["acme"] = credits.Account{ID: "acme"}
	c := browser(t)
	csrf := signIn(t, c, srv.URL)
	u, _ := url.Parse(srv.URL + "/console/")
	stolen := c.Jar.Cookies(u)
	if resp, _ := post(t, c, srv.URL+"/console/signout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, srv.URL+"/console/models"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after sign-out: %d; want a redirect to sign in", resp.StatusCode)
	}
	replay := browser(t)
	replay.Jar.SetCookies(u, stolen)
	if resp, _ := get(t, replay, srv.URL+"/console/models"); resp.StatusCode != http.StatusSeeOther || len(stolen) != 1 {
		t.Errorf("the signed-out cookie replayed: %d; want a redirect to sign in", resp.StatusCode)
	}
	if resp, _ := post(t, replay, srv.URL+"/console/accounts/acme/grant", url.Values{"csrf": {csrf}, "amount": {"777"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a grant with the signed-out cookie: %d; want 401", resp.StatusCode)
	}
	if a, _ := op.Account(context.Background(), "acme"); a.Balance != 0 {
		t.Errorf("acme's balance = %d after a grant with a signed-out session; want 0", a.Balance)
	}
}

// TestForgedSessionRefused: with what genway serve keeps of the operator
// token (admin-token.sha256: the token's SHA-256), a cookie and CSRF
// token made as sessions were signed before (keys derived from that
// hash) grant nothing; nor does a cookie signed with the right keys for
// a session the store never had.
func TestForgedSessionRefused(t *testing.T) {
	srv, op := server(t)
	op.accts["acme"] = credits.Account{ID: "acme"}
	hash := sha256.Sum256([]byte(testToken)) // the file's content
	oldKey := func(purpose string) []byte {
		k := sha256.Sum256(append([]byte("genway console "+purpose+"\x00"), hash[:]...))
		return k[:]
	}
	keys, _ := admin.NewSessionKeys(admin.NewVerifier(testToken), []byte(testSessionSecret))
	sign := func(key []byte, msg string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	const id = "forgedforgedforgedforged"
	payload := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + "." + id
	for name, key := range map[string]func(string) []byte{"from the token's hash": oldKey, "right keys, no such session": keys.Key} {
		c := browser(t)
		u, _ := url.Parse(srv.URL + "/console/")
		c.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: payload + "." + sign(key("session"), payload), Path: "/console/"}})
		if resp, _ := get(t, c, srv.URL+"/console/models"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: GET /console/models = %d; want a redirect to sign in", name, resp.StatusCode)
		}
		form := url.Values{"csrf": {sign(key("csrf"), id)}, "amount": {"777"}, "note": {"forged"}}
		if resp, _ := post(t, c, srv.URL+"/console/accounts/acme/grant", form); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: the forged grant = %d; want 401", name, resp.StatusCode)
		}
	}
	if a, _ := op.Account(context.Background(), "acme"); a.Balance != 0 {
		t.Errorf("acme's balance = %d after forged grants; want 0", a.Balance)
	}
}

// TestRotationSignsOut: a new operator token, or a new session secret,
// ends every session (their cookies no longer verify); the new token
// signs in.
func TestRotationSignsOut(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	token, secret := testToken, testSessionSecret
	read := func(p *string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			return *p, nil
		}
	}
	// A TTL of a nanosecond: every use reads the value again.
	v, err := admin.LoadingVerifier(context.Background(), read(&token), time.Nanosecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admin.LoadingSessionKeys(context.Background(), v, read(&secret), time.Nanosecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Operator: newFake(), Verifier: v, SessionKeys: keys, Sessions: newMemSessions(), Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	for _, rotate := range []func(){
		func() { token = "gwop_rotatedrotatedrotatedrotatedrotated" },
		func() { secret = "fedcba9876543210fedcba9876543210-rotated-secret" },
	} {
		b := browser(t)
		mu.Lock()
		tok := token
		mu.Unlock()
		if resp, _ := post(t, b, srv.URL+"/console/signin", url.Values{"token": {tok}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", resp.StatusCode)
		}
		if resp, _ := get(t, b, srv.URL+"/console/models"); resp.StatusCode != 200 {
			t.Fatalf("signed in: %d", resp.StatusCode)
		}
		mu.Lock()
		rotate()
		mu.Unlock()
		if resp, _ := get(t, b, srv.URL+"/console/models"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after a rotation: %d; want the session ended (a redirect to sign in)", resp.StatusCode)
		}
	}
}

// TestSessionStoreDown: a session the store cannot be asked about lets
// nobody in (503), and no sign-in is made without its record.
func TestSessionStoreDown(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg := withSessions(t, Config{Operator: newFake(), Verifier: admin.NewVerifier(testToken), Catalog: cat})
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	b := browser(t)
	signIn(t, b, srv.URL)
	cfg.Sessions.(*memSessions).down = true
	if resp, _ := get(t, b, srv.URL+"/console/models"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a page with the store down: %d; want 503", resp.StatusCode)
	}
	if resp, _ := post(t, browser(t), srv.URL+"/console/signin", url.Values{"token": {testToken}}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a sign-in with the store down: %d; want 503", resp.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	now := timeNow()
	keys, err := admin.NewSessionKeys(admin.NewVerifier(testToken), []byte(testSessionSecret))
	if err != nil {
		t.Fatal(err)
	}
	s := &sessions{keys: keys, store: newMemSessions(), now: func() time.Time { return now }}
	w := httptest.NewRecorder()
	if _, err := s.issue(context.Background(), w, false); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/console/models", nil)
	for _, ck := range w.Result().Cookies() {
		r.AddCookie(ck)
	}
	if _, ok, _ := s.get(r); !ok {
		t.Fatal("fresh session refused")
	}
	now = now.Add(sessionTTL + time.Second)
	if _, ok, _ := s.get(r); ok {
		t.Error("expired session accepted")
	}
	// A tampered cookie is refused.
	r2 := httptest.NewRequest("GET", "/console/models", nil)
	for _, ck := range w.Result().Cookies() {
		ck.Value = "9" + ck.Value
		r2.AddCookie(ck)
	}
	now = now.Add(-sessionTTL)
	if _, ok, _ := s.get(r2); ok {
		t.Error("tampered session accepted")
	}
}

// TestModelsPageAlias: the models page shows an alias with its weighted
// targets, configured as one of its targets is, priced as the target that
// answers, with no breaker of its own.
func TestModelsPageAlias(t *testing.T) {
	def, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	def.Models = append(def.Models, catalog.Model{ID: "balanced", Type: catalog.TypeChat,
		Targets: []catalog.Target{{Model: "synthetic/echo", Weight: 3}, {Model: "openai/gpt-4o-mini", Weight: 1}}})
	b, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse(b, catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(withSessions(t, Config{Operator: newFake(), Verifier: admin.NewVerifier(testToken), Catalog: cat,
		Configured: func(p string) bool { return p == "synthetic" }, Router: route.New(route.DefaultPolicy, nil)}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	br := browser(t)
	signIn(t, br, srv.URL)
	resp, body := get(t, br, srv.URL+"/console/models")
	if resp.StatusCode != 200 {
		t.Fatalf("models page %d", resp.StatusCode)
	}
	i := strings.Index(body, "<code>balanced</code>")
	if i < 0 {
		t.Fatalf("no alias on the models page:\n%s", body)
	}
	row := body[i : i+strings.Index(body[i:], "</tr>")]
	for _, want := range []string{"alias of synthetic/echo ×3, openai/gpt-4o-mini ×1", "the answering target&#39;s", `<span class="ok">yes</span>`} {
		if !strings.Contains(row, want) {
			t.Errorf("alias row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "closed") {
		t.Errorf("alias row shows a breaker of its own:\n%s", row)
	}
}

// TestModelsPagePrices: the models page shows each model's price in
// credits (every token class, the service tiers, long context; free),
// its vendor's list price in US dollars, its source as a link, the date
// it was read and its note, and the credit value it was converted with.
func TestModelsPagePrices(t *testing.T) {
	pr, err := catalog.ParsePricing("0.003", "12.5")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load("", pr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(withSessions(t, Config{Operator: newFake(), Verifier: admin.NewVerifier(testToken), Catalog: cat}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	br := browser(t)
	signIn(t, br, srv.URL)
	_, body := get(t, br, srv.URL+"/console/models")
	if !strings.Contains(body, "1 credit = US$0.003, markup 12.5%") {
		t.Errorf("models page does not say the credit value and markup")
	}
	row := func(id string) string {
		i := strings.Index(body, "<code>"+id+"</code>")
		if i < 0 {
			t.Fatalf("no %s on the models page", id)
		}
		return body[i : i+strings.Index(body[i:], "</tr>")]
	}
	for _, tt := range []struct {
		id   string
		want []string
	}{
		// $1.25 x 1.125 / 0.003 = 468.75 credits per million input tokens.
		{"openai/gpt-5", []string{"468.75 in · 46.875 cached · 468.75 write · 468.75 write 1h · 3750 out credits / 1M tokens",
			"fast: 937.5 in", "flex: 234.375 in", "list: $1.25 in · 0.125 cached · 10 out / 1M tokens; fast: $2.5 in",
			`<a href="https://developers.openai.com/api/docs/pricing" rel="noreferrer">`, "read 2026-11-28", "shuts down 2026-12-11"}},
		{"gemini/gemini-2.5-pro", []string{"prompts over 200000 tokens: 937.5 in", "prompts over 200000 tokens: $2.5 in"}},
		{"elevenlabs-sfx", []string{"45 credits/job", "list: $0.12/job", "Third-party numbers"}},
		{"gpt-image-1.5", []string{"18.75 credits/image, auto 75, high 75, low 4.875, medium 18.75", "list: $0.05/image, auto $0.2"}},
		{"musicgen", []string{"1 credits/s", "Not a list price"}},
		{"synthetic/echo", []string{"<td>free"}},
		{"ollama/llama3.2", []string{"<td>free"}},
	} {
		r := row(tt.id)
		for _, w := range tt.want {
			if !strings.Contains(r, w) {
				t.Errorf("%s row lacks %q:\n%s", tt.id, w, r)
			}
		}
	}
}
