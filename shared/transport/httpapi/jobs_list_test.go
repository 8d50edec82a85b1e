package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localstore"
)

// jtMedia signs fake links: the same key gives the same link.
type jtMedia struct{}

func (jtMedia) Put(context.Context, string, string, io.Reader, int64) error { return nil }
func (jtMedia) Delete(context.Context, string) error                        { return nil }

func (jtMedia) URL(_ context.Context, key string, _ time.Duration) (string, error) {
	return "https://media.example/" + key + "?sig=1", nil
}

// jtClock is a settable clock, one second per job created by default.
type jtClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *jtClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *jtClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// jtEnv is the jobs API over an embedded store, with accounts "a" and "b".
type jtEnv struct {
	srv   *httptest.Server
	svc   *jobs.Service
	store *localstore.Store
	clock *jtClock
}

// jtServer serves the jobs routes; the account is the X-Test-Account
// header (standing in for key authentication).
func jtServer(t *testing.T) *jtEnv {
	t.Helper()
	s, cat := jtStore(t, 1_000_000)
	c := &jtClock{t: time.Unix(1_750_000_000, 0)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &jobs.Service{Store: s, Queue: s, Media: jtMedia{}, Catalog: cat, Log: log, Now: c.now}
	as := asTestAccount
	mux := NewMux(log,
		Route{Method: "POST", Pattern: "/v1/jobs", Handler: as(CreateJob(svc, log))},
		Route{Method: "GET", Pattern: "/v1/jobs", Handler: as(ListJobs(svc, log))},
		Route{Method: "GET", Pattern: "/v1/jobs/{id}", Handler: as(GetJob(svc, log))},
		Route{Method: "POST", Pattern: "/v1/jobs/{id}/cancel", Handler: as(CancelJob(svc, log))},
	)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &jtEnv{srv: srv, svc: svc, store: s, clock: c}
}

// do sends method path (with body, if any) as account and returns the
// status and body.
func (e *jtEnv) do(t *testing.T, account, method, path, body string) (int, []byte) {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	r := sendAs(t, e.srv.URL, account, method, path, ct, []byte(body))
	return r.status, r.body
}

// jtStore opens an embedded store with accounts "a" and "b", each
// granted whole credits, and returns it with the default catalog.
func jtStore(t *testing.T, whole int64) (*localstore.Store, *catalog.Catalog) {
	t.Helper()
	s, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"a", "b"} {
		if _, err := s.Grant(context.Background(), a, credits.Amount(whole)*credits.Credit, 1); err != nil {
			t.Fatal(err)
		}
	}
	return s, cat
}

// asTestAccount serves h as the account in the X-Test-Account header
// (standing in for key authentication).
func asTestAccount(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), r.Header.Get("X-Test-Account"))))
	})
}

// create makes a job of typ as account, one second after the previous.
func (e *jtEnv) create(t *testing.T, account, typ string) string {
	t.Helper()
	e.clock.add(time.Second)
	body := map[string]string{
		jobs.TypeSFX:   `{"type":"sfx","model":"synthetic-sfx","prompt":"rain","duration":2}`,
		jobs.TypeMusic: `{"type":"music","model":"synthetic-music","prompt":"a tune","duration":3}`,
		jobs.TypeVideo: `{"type":"video","model":"synthetic-video","prompt":"waves","duration":2}`,
	}[typ]
	status, b := e.do(t, account, "POST", "/v1/jobs", body)
	var v struct{ ID string }
	if err := json.Unmarshal(b, &v); status != 200 || err != nil || v.ID == "" {
		t.Fatalf("POST /v1/jobs as %s = %d %s", account, status, b)
	}
	return v.ID
}

// complete moves job id through processing to completed with an output.
func (e *jtEnv) complete(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.store.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true}); err != nil {
		t.Fatal(err)
	}
	out := &jobs.Output{Key: "jobs/x/" + id + ".mp3", ContentType: "audio/mpeg", Bytes: 10, Duration: 2}
	if _, err := e.store.Transition(ctx, id, jobs.Processing, jobs.Completed, jobs.Patch{Output: out}); err != nil {
		t.Fatal(err)
	}
}

// jtPage is a GET /v1/jobs answer, its jobs kept raw.
type jtPage struct {
	Object     string            `json:"object"`
	Data       []json.RawMessage `json:"data"`
	HasMore    bool              `json:"has_more"`
	NextCursor *string           `json:"next_cursor"`
}

func (p jtPage) ids(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, d := range p.Data {
		var v struct{ ID string }
		if err := json.Unmarshal(d, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.ID)
	}
	return out
}

// list GETs /v1/jobs?query as account and wants a 200 list.
func (e *jtEnv) list(t *testing.T, account string, query url.Values) jtPage {
	t.Helper()
	status, b := e.do(t, account, "GET", "/v1/jobs?"+query.Encode(), "")
	var p jtPage
	if err := json.Unmarshal(b, &p); status != 200 || err != nil || p.Object != "list" || p.Data == nil {
		t.Fatalf("GET /v1/jobs?%s = %d %s; want 200 and a list", query.Encode(), status, b)
	}
	if p.HasMore != (p.NextCursor != nil) {
		t.Fatalf("GET /v1/jobs?%s: has_more %v with next_cursor %v", query.Encode(), p.HasMore, p.NextCursor)
	}
	if !p.HasMore && !bytes.Contains(b, []byte(`"next_cursor":null`)) {
		t.Errorf("last page %s; want next_cursor null", b)
	}
	return p
}

// listAll pages through GET /v1/jobs?query, calling between after each
// page but the last.
func (e *jtEnv) listAll(t *testing.T, account string, query url.Values, between func()) []string {
	t.Helper()
	var ids []string
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for pages := 0; ; pages++ {
		p := e.list(t, account, q)
		ids = append(ids, p.ids(t)...)
		if !p.HasMore || pages > 100 {
			return ids
		}
		if between != nil {
			between()
		}
		q.Set("after", *p.NextCursor)
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

func TestListJobsIsolationAndPages(t *testing.T) {
	e := jtServer(t)
	var mine, theirs []string
	for i := range 7 {
		mine = append(mine, e.create(t, "a", jobs.TypeSFX))
		if i%2 == 0 {
			theirs = append(theirs, e.create(t, "b", jobs.TypeMusic))
		}
	}
	if got := e.listAll(t, "a", nil, nil); !slices.Equal(got, reversed(mine)) {
		t.Errorf("a's jobs = %v; want %v (newest first, none of b's)", got, reversed(mine))
	}
	if got := e.listAll(t, "b", nil, nil); !slices.Equal(got, reversed(theirs)) {
		t.Errorf("b's jobs = %v; want %v", got, reversed(theirs))
	}
	if got := e.listAll(t, "c", nil, nil); len(got) != 0 {
		t.Errorf("an account without jobs lists %v; want none", got)
	}
	// A cursor is a position, not a capability: b's cursor in a's
	// listing still lists only a's jobs.
	p := e.list(t, "b", url.Values{"limit": {"1"}})
	if got := e.list(t, "a", url.Values{"after": {*p.NextCursor}}).ids(t); len(got) == 0 || slices.ContainsFunc(got, func(id string) bool { return slices.Contains(theirs, id) }) {
		t.Errorf("a's listing after b's cursor = %v; want only a's jobs", got)
	}

	// Pages of 2 while new jobs keep arriving (of both accounts): each
	// job that existed is listed once, in order; the new ones are newer
	// than every cursor, so on no later page.
	got := e.listAll(t, "a", url.Values{"limit": {"2"}}, func() {
		e.create(t, "a", jobs.TypeSFX)
		e.create(t, "b", jobs.TypeSFX)
	})
	if !slices.Equal(got, reversed(mine)) {
		t.Errorf("pages of 2 while creating = %v; want %v", got, reversed(mine))
	}
	first := e.list(t, "a", url.Values{"limit": {"3"}})
	if len(first.Data) != 3 || !first.HasMore {
		t.Errorf("first page of 3 = %d jobs, has_more %v; want 3 and more", len(first.Data), first.HasMore)
	}
	// 7, and 3 created between the 4 pages.
	if all := e.list(t, "a", url.Values{"limit": {"100"}}); len(all.Data) != 10 || all.HasMore {
		t.Errorf("page of 100 = %d jobs, has_more %v; want all 10, no more", len(all.Data), all.HasMore)
	}
	if def := e.list(t, "a", nil); len(def.Data) != 10 {
		t.Errorf("default page = %d jobs; want 10 (default limit 20)", len(def.Data))
	}
}

func TestListJobsFilters(t *testing.T) {
	e := jtServer(t)
	start := e.clock.now().Unix()
	sfx1 := e.create(t, "a", jobs.TypeSFX)     // start+1
	music := e.create(t, "a", jobs.TypeMusic)  // start+2
	video := e.create(t, "a", jobs.TypeVideo)  // start+3
	sfx2 := e.create(t, "a", jobs.TypeSFX)     // start+4
	e.create(t, "b", jobs.TypeMusic)           // start+5: another account's
	music2 := e.create(t, "a", jobs.TypeMusic) // start+6
	e.complete(t, sfx1)
	e.complete(t, music2)
	if code, b := e.do(t, "a", "POST", "/v1/jobs/"+video+"/cancel", ""); code != 200 {
		t.Fatalf("cancel = %d %s", code, b)
	}
	at := func(off int64) string { return fmt.Sprint(start + off) }
	tests := []struct {
		query url.Values
		want  []string
	}{
		{url.Values{"status": {"completed"}}, []string{music2, sfx1}},
		{url.Values{"status": {"failed"}}, []string{video}},
		{url.Values{"status": {"queued"}}, []string{sfx2, music}},
		{url.Values{"status": {"processing"}}, nil},
		{url.Values{"type": {"music"}}, []string{music2, music}},
		{url.Values{"type": {"sfx"}, "status": {"queued"}}, []string{sfx2}},
		{url.Values{"model": {"synthetic-video"}}, []string{video}},
		{url.Values{"model": {"no-such-model"}}, nil},
		{url.Values{"since": {at(3)}}, []string{music2, sfx2, video}},
		{url.Values{"until": {at(2)}}, []string{music, sfx1}},
		{url.Values{"since": {at(2)}, "until": {at(4)}}, []string{sfx2, video, music}},
		{url.Values{"since": {at(4)}, "until": {at(4)}}, []string{sfx2}},
		{url.Values{"since": {at(1)}, "type": {"music"}, "limit": {"1"}}, []string{music2, music}},
		{url.Values{"unknown": {"x"}}, []string{music2, sfx2, video, music, sfx1}}, // ignored
	}
	for _, tt := range tests {
		t.Run(tt.query.Encode(), func(t *testing.T) {
			got := e.listAll(t, "a", tt.query, nil)
			if !slices.Equal(got, tt.want) {
				t.Errorf("GET /v1/jobs?%s = %v; want %v", tt.query.Encode(), got, tt.want)
			}
		})
	}
}

// TestListJobsShape: each listed job is what GET /v1/jobs/{id} answers,
// output link included.
func TestListJobsShape(t *testing.T) {
	e := jtServer(t)
	done := e.create(t, "a", jobs.TypeSFX)
	e.complete(t, done)
	e.create(t, "a", jobs.TypeMusic)
	cancelled := e.create(t, "a", jobs.TypeVideo)
	e.do(t, "a", "POST", "/v1/jobs/"+cancelled+"/cancel", "")
	p := e.list(t, "a", nil)
	if len(p.Data) != 3 {
		t.Fatalf("list = %d jobs; want 3", len(p.Data))
	}
	for _, raw := range p.Data {
		var v struct {
			ID     string
			Output *struct{ URL string }
		}
		json.Unmarshal(raw, &v)
		code, b := e.do(t, "a", "GET", "/v1/jobs/"+v.ID, "")
		if code != 200 || !bytes.Equal(bytes.TrimSpace(b), raw) {
			t.Errorf("listed %s\nGET      %s; want the same", raw, b)
		}
		if v.ID == done && (v.Output == nil || !strings.HasPrefix(v.Output.URL, "https://media.example/jobs/")) {
			t.Errorf("completed job listed with output %+v; want its link", v.Output)
		}
	}
	var first struct {
		History []jobs.StatusChange `json:"history"`
		Error   *jobs.JobError      `json:"error"`
	}
	json.Unmarshal(p.Data[0], &first) // the newest: the cancelled video
	if len(first.History) != 2 || first.History[1].Status != jobs.Failed || first.History[1].ErrorCode != jobs.CodeCancelled ||
		first.Error == nil || first.Error.Code != jobs.CodeCancelled {
		t.Errorf("cancelled job: history %+v, error %+v; want queued then failed/cancelled", first.History, first.Error)
	}
}

func TestListJobsErrors(t *testing.T) {
	e := jtServer(t)
	e.create(t, "a", jobs.TypeSFX)
	tests := []struct {
		query string
		param string
	}{
		{"status=done", "status"},
		{"status=", "status"},
		{"status=queued&status=failed", "status"},
		{"type=image", "type"},
		{"model=" + strings.Repeat("m", 201), "model"},
		{"since=abc", "since"},
		{"since=-5", "since"},
		{"since=1.5", "since"},
		{"until=tomorrow", "until"},
		{"since=200&until=100", "until"},
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=ten", "limit"},
		{"limit=-1", "limit"},
		{"after=garbage!", "after"},
		{"after=" + url.QueryEscape(jobs.Cursor{Created: 1}.Encode()), "after"},
		{"after=", "after"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, b := e.do(t, "a", "GET", "/v1/jobs?"+tt.query, "")
			var env struct {
				Error struct {
					Type  string  `json:"type"`
					Param *string `json:"param"`
					Code  *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &env); code != 400 || err != nil || env.Error.Type != "invalid_request_error" ||
				env.Error.Param == nil || *env.Error.Param != tt.param || env.Error.Code == nil {
				t.Errorf("GET /v1/jobs?%s = %d %s; want 400 invalid_request_error naming %s", tt.query, code, b, tt.param)
			}
		})
	}
	// The other methods of the path.
	if code, b := e.do(t, "a", "DELETE", "/v1/jobs", ""); code != 405 || !strings.Contains(string(b), "method_not_allowed") {
		t.Errorf("DELETE /v1/jobs = %d %s; want 405", code, b)
	}
}

// TestDecodeListJobs checks the parameters' parsing alone.
func TestDecodeListJobs(t *testing.T) {
	q, err := DecodeListJobs(url.Values{"status": {"failed"}, "type": {"video"}, "model": {"m"}, "since": {"10"}, "until": {"20"}, "limit": {"5"}, "after": {"c"}})
	want := jobs.ListQuery{Status: jobs.Failed, Type: jobs.TypeVideo, Model: "m", Since: 10, Until: 20, Limit: 5, Cursor: "c"}
	if err != nil || q != want {
		t.Errorf("DecodeListJobs = %+v, %v; want %+v", q, err, want)
	}
	if q, err := DecodeListJobs(nil); err != nil || q != (jobs.ListQuery{}) {
		t.Errorf("DecodeListJobs(none) = %+v, %v; want the zero query", q, err)
	}
	if _, err := DecodeListJobs(url.Values{"limit": {"99999999999999999999"}}); err == nil {
		t.Error("DecodeListJobs(huge limit) = nil; want an error")
	}
}
