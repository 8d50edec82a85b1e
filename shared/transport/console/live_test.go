package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// fakeMedia links every key under https://media.example/.
type fakeMedia struct{}

func (fakeMedia) Put(context.Context, string, string, io.Reader, int64) error { return nil }
func (fakeMedia) Delete(context.Context, string) error                        { return nil }
func (fakeMedia) URL(_ context.Context, key string, _ time.Duration) (string, error) {
	return "https://media.example/" + key + "?sig=x", nil
}

// live is a console with jobs (a real jobs.Service on an embedded store),
// chat (a gateway over the synthetic provider), and images and speech
// (the real services over the synthetic providers, with the embedded
// store's credit reservations).
type live struct {
	srv   *httptest.Server
	op    *fakeOperator
	svc   *jobs.Service
	store *localstore.Store
}

func liveServer(t *testing.T) *live {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	st, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, a := range []string{"acme", "dev"} {
		if _, err := st.Grant(ctx, a, 100000*credits.Credit, time.Now().Unix()); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	svc := &jobs.Service{Store: st, Queue: st, Media: fakeMedia{}, Catalog: cat, Log: log}
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": synthetic.NewChat()}, Log: log})
	router := route.New(route.Policy{Backoff: time.Millisecond, NoBreakers: true}, log)
	imgs := &images.Service{Catalog: cat, Providers: map[string]images.Provider{"synthetic": synthetic.Images{}}, Router: router,
		Credits: st, Media: fakeMedia{}, Log: log}
	voices := &speech.Service{Catalog: cat, Providers: map[string]speech.Provider{"synthetic": synthetic.Speech{}}, Router: router, Credits: st, Log: log}
	op := newFake()
	op.accts["acme"] = credits.Account{ID: "acme", Balance: 100000, Available: 100000}
	op.accts["dev"] = credits.Account{ID: "dev", Balance: 100000, Available: 100000}
	c, err := New(withSessions(t, Config{Operator: op, Verifier: admin.NewVerifier(testToken), Catalog: cat, JobService: svc, Chat: gw,
		Images: imgs, Speech: voices, Configured: func(p string) bool { return p == "synthetic" }}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &live{srv: srv, op: op, svc: svc, store: st}
}

// job makes a job of account directly through the service.
func (l *live) job(t *testing.T, account, typ, model, prompt string, lyrics *string) *jobs.Job {
	t.Helper()
	d := 2
	req := &jobs.CreateRequest{Type: typ, Model: model, Prompt: prompt, Duration: &d, Lyrics: lyrics}
	if lyrics != nil {
		mode := "LYRICS"
		req.Mode = &mode
	}
	j, err := l.svc.Create(context.Background(), account, req, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// complete moves j to completed with an output of contentType.
func (l *live) complete(t *testing.T, j *jobs.Job, contentType string) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.store.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{Updated: time.Now().Unix(), IncAttempts: true}); err != nil {
		t.Fatal(err)
	}
	out := &jobs.Output{Key: "out/" + j.ID, ContentType: contentType, Bytes: 1234, Duration: 2}
	if _, err := l.store.Transition(ctx, j.ID, jobs.Processing, jobs.Completed, jobs.Patch{Output: out, Updated: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
}

// postJSON posts body as JSON with the CSRF header (none if csrf is "").
func postJSON(t *testing.T, c *http.Client, u, csrf string, body any) (*http.Response, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", u, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func getJSON(t *testing.T, c *http.Client, u string, v any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp
}

func TestLiveRoutesNeedSignIn(t *testing.T) {
	l := liveServer(t)
	j := l.job(t, "acme", "sfx", "synthetic-sfx", "beep", nil)
	c := browser(t)
	for _, page := range []string{"/console/jobs", "/console/jobs/" + j.ID, "/console/usage", "/console/playground"} {
		if resp, _ := get(t, c, l.srv.URL+page); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
			t.Errorf("GET %s signed out: %d to %q; want 303 to sign in", page, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, u := range []string{"/console/jobs.json", "/console/jobs/" + j.ID + "/status"} {
		if resp := getJSON(t, c, l.srv.URL+u, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s (JSON) signed out: %d; want 401", u, resp.StatusCode)
		}
	}
	for _, u := range []string{"/console/playground/chat", "/console/playground/job", "/console/playground/image", "/console/playground/speech", "/console/jobs/" + j.ID + "/cancel"} {
		if resp, _ := postJSON(t, c, l.srv.URL+u, "", map[string]string{}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s signed out: %d; want 401", u, resp.StatusCode)
		}
	}
}

func TestLiveRoutesNeedCSRF(t *testing.T) {
	l := liveServer(t)
	j := l.job(t, "acme", "sfx", "synthetic-sfx", "beep", nil)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	chatBody := map[string]any{"account": "acme", "model": "synthetic/echo", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	jobBody := map[string]any{"account": "acme", "type": "sfx", "model": "synthetic-sfx", "prompt": "x", "duration": 1}
	for _, tok := range []string{"", "wrong" + csrf} {
		if resp, _ := postJSON(t, c, l.srv.URL+"/console/playground/chat", tok, chatBody); resp.StatusCode != http.StatusForbidden {
			t.Errorf("chat with CSRF %q: %d; want 403", tok, resp.StatusCode)
		}
		if resp, _ := postJSON(t, c, l.srv.URL+"/console/playground/job", tok, jobBody); resp.StatusCode != http.StatusForbidden {
			t.Errorf("job with CSRF %q: %d; want 403", tok, resp.StatusCode)
		}
		if resp, _ := postJSON(t, c, l.srv.URL+"/console/playground/image", tok, map[string]any{"account": "acme", "model": "synthetic-image", "prompt": "x"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("image with CSRF %q: %d; want 403", tok, resp.StatusCode)
		}
		if resp, _ := postJSON(t, c, l.srv.URL+"/console/playground/speech", tok, map[string]any{"account": "acme", "model": "synthetic-speech", "input": "x"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("speech with CSRF %q: %d; want 403", tok, resp.StatusCode)
		}
		if resp, _ := post(t, c, l.srv.URL+"/console/jobs/"+j.ID+"/cancel", url.Values{"csrf": {tok}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("cancel with CSRF %q: %d; want 403", tok, resp.StatusCode)
		}
	}
	js, _, err := l.store.List(context.Background(), jobs.ListQuery{Limit: 10})
	if err != nil || len(js) != 1 || js[0].Status != jobs.Queued {
		t.Errorf("jobs after refused requests: %v, %v; want the one queued job", js, err)
	}
}

func TestJobsPages(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	evil := `<script>alert("p")</script> & <b>bold</b>`
	lyrics := `<img src=x onerror=alert(1)>`
	music := l.job(t, "acme", "music", "synthetic-music", evil, &lyrics)
	sfx := l.job(t, "dev", "sfx", "synthetic-sfx", "a door", nil)
	video := l.job(t, "acme", "video", "synthetic-video", "shapes", nil)
	l.complete(t, sfx, "audio/mpeg")
	l.complete(t, video, "video/mp4")

	// The list: newest first, every account, prompts escaped.
	resp, body := get(t, c, l.srv.URL+"/console/jobs")
	if resp.StatusCode != 200 {
		t.Fatalf("jobs page: %d", resp.StatusCode)
	}
	for _, id := range []string{music.ID, sfx.ID, video.ID} {
		if !strings.Contains(body, id) {
			t.Errorf("jobs page lacks %s", id)
		}
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert") {
		t.Error("jobs page: the prompt is not escaped")
	}
	if !strings.Contains(body, "jobs.js") {
		t.Error("jobs page does not load jobs.js")
	}
	// Filters, on the page and in the JSON the script polls.
	var list struct {
		Jobs []jobRow `json:"jobs"`
		Next string   `json:"next"`
	}
	if resp := getJSON(t, c, l.srv.URL+"/console/jobs.json?status=completed&account=acme", &list); resp.StatusCode != 200 {
		t.Fatalf("jobs.json: %d", resp.StatusCode)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != video.ID || list.Next != "" {
		t.Errorf("completed jobs of acme = %+v; want the video job only", list)
	}
	getJSON(t, c, l.srv.URL+"/console/jobs.json?type=music", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != music.ID || list.Jobs[0].Prompt == "" {
		t.Errorf("music jobs = %+v; want the music job with its prompt", list)
	}
	if resp, body := get(t, c, l.srv.URL+"/console/jobs?status=bogus"); resp.StatusCode != 400 || !strings.Contains(body, "status must be") {
		t.Errorf("bad status filter: %d; want 400 saying why", resp.StatusCode)
	}
	if resp := getJSON(t, c, l.srv.URL+"/console/jobs.json?after=garbage", nil); resp.StatusCode != 400 {
		t.Errorf("bad cursor in jobs.json: %d; want 400", resp.StatusCode)
	}

	// A queued job's page: input escaped, timeline, a cancel button.
	resp, body = get(t, c, l.srv.URL+"/console/jobs/"+music.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("job page: %d", resp.StatusCode)
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || !strings.Contains(body, "&lt;img src=x") {
		t.Error("job page: prompt or lyrics not escaped")
	}
	if !strings.Contains(body, `action="/console/jobs/`+music.ID+`/cancel"`) || !strings.Contains(body, `class="timeline"`) {
		t.Error("queued job page lacks the cancel form or the timeline")
	}
	if strings.Contains(body, "<audio") {
		t.Error("a queued job has a player")
	}
	// A completed job's page: a player and a download link, no cancel.
	_, body = get(t, c, l.srv.URL+"/console/jobs/"+sfx.ID)
	link := "https://media.example/out/" + sfx.ID + "?sig=x"
	if !strings.Contains(body, `<audio id="player" controls preload="metadata" src="`+link+`">`) || !strings.Contains(body, `href="`+link+`" download`) {
		t.Errorf("completed audio job page lacks the player or download link:\n%s", body)
	}
	if strings.Contains(body, "/cancel") {
		t.Error("a completed job can be cancelled")
	}
	if n := strings.Count(body, "<li>"); n != 3 {
		t.Errorf("timeline has %d entries; want queued, processing, completed", n)
	}
	if _, body = get(t, c, l.srv.URL+"/console/jobs/"+video.ID); !strings.Contains(body, "<video id=\"player\" controls") {
		t.Error("completed video job page lacks a video player")
	}
	// The status JSON the scripts poll.
	var st jobState
	getJSON(t, c, l.srv.URL+"/console/jobs/"+sfx.ID+"/status", &st)
	if st.Status != jobs.Completed || st.URL != link || st.Kind != "audio" || len(st.Timeline) != 3 {
		t.Errorf("status JSON = %+v", st)
	}
	for _, id := range []string{"job_music_nope", "x"} {
		if resp, _ := get(t, c, l.srv.URL+"/console/jobs/"+id); resp.StatusCode != 404 {
			t.Errorf("job %s: %d; want 404", id, resp.StatusCode)
		}
	}

	// Cancel: the job fails as cancelled, and the audit log says who.
	if resp, _ := post(t, c, l.srv.URL+"/console/jobs/"+music.ID+"/cancel", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	got, _ := l.store.Get(context.Background(), music.ID)
	if got.Status != jobs.Failed || got.Error == nil || got.Error.Code != jobs.CodeCancelled {
		t.Errorf("cancelled job = %+v", got)
	}
	if _, audit := get(t, c, l.srv.URL+"/console/audit"); !strings.Contains(audit, "jobs.cancel") {
		t.Error("the audit log lacks the cancel")
	}
	// Cancelling it again is a conflict, said on the error page.
	if resp, body := post(t, c, l.srv.URL+"/console/jobs/"+music.ID+"/cancel", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already failed") {
		t.Errorf("cancel a failed job: %d; want 409 saying why", resp.StatusCode)
	}

	// A job that failed for the operator's account at its vendor: the
	// client's generic message, and the vendor's own words (escaped),
	// which only the operator sees.
	refused := l.job(t, "acme", "sfx", "synthetic-sfx", "a bell", nil)
	jerr := &jobs.JobError{Code: jobs.CodeUpstream, Message: "The elevenlabs provider failed; no credits were charged.",
		Vendor: "Incorrect API key provided: el-UPSTREAM<b>1</b>"}
	if _, err := l.store.Transition(context.Background(), refused.ID, jobs.Queued, jobs.Failed, jobs.Patch{Error: jerr, Updated: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, c, l.srv.URL+"/console/jobs/"+refused.ID)
	if !strings.Contains(body, "The elevenlabs provider failed") || !strings.Contains(body, "Incorrect API key provided: el-UPSTREAM&lt;b&gt;1") {
		t.Errorf("a job failed for the operator's account: the page lacks the message or the vendor's words (escaped):\n%s", body)
	}
}

func TestJobsPagination(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	for i := range jobsPageSize + 3 {
		l.job(t, "acme", "sfx", "synthetic-sfx", fmt.Sprint("job ", i), nil)
	}
	_, body := get(t, c, l.srv.URL+"/console/jobs?account=acme")
	m := regexp.MustCompile(`id="jobs-next" href="/console/jobs\?([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no next page link on a full page")
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	if !strings.Contains(next, "account=acme") || !strings.Contains(next, "after=") {
		t.Errorf("next page link %q drops the filter or the cursor", next)
	}
	_, body2 := get(t, c, l.srv.URL+"/console/jobs?"+next)
	if n := strings.Count(body2, `<tr><td><a href="/console/jobs/`); n != 3 {
		t.Errorf("second page has %d jobs; want 3", n)
	}
	if !strings.Contains(body2, `id="jobs-next" href="/console/jobs" hidden`) {
		t.Error("the last page offers a next page")
	}
}

// sseEvent is one event of a playground stream.
type sseEvent struct {
	Name string
	Data map[string]any
}

// chatStream posts a playground chat turn and reads its events.
func chatStream(t *testing.T, c *http.Client, base, csrf string, body any) (*http.Response, []sseEvent, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+"/console/playground/chat", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		return resp, nil, string(raw)
	}
	var evs []sseEvent
	ev := sseEvent{Name: "message"}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case line == "data: [DONE]":
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		case line == "":
			evs = append(evs, ev)
			ev = sseEvent{Name: "message"}
		}
	}
	return resp, evs, ""
}

// tinyPNG is a 1x1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func TestPlaygroundChat(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	msgs := []map[string]string{{"role": "user", "content": "first"}, {"role": "assistant", "content": "You said: first"}, {"role": "user", "content": "hello <b>there</b> friend"}}
	resp, evs, raw := chatStream(t, c, l.srv.URL, csrf, map[string]any{"account": "dev", "model": "synthetic/thinker", "messages": msgs,
		"reasoning_effort": "medium", "image": "data:image/png;base64," + tinyPNG})
	if resp.StatusCode != 200 || evs == nil {
		t.Fatalf("chat: %d %s", resp.StatusCode, raw)
	}
	// The API's chat completion chunks (the playground runs
	// httpapi.ChatCompletions).
	var content, reasoning strings.Builder
	deltas := 0
	var end map[string]any
	for _, e := range evs {
		if e.Data == nil {
			continue // [DONE]
		}
		if e.Data["error"] != nil {
			t.Fatalf("error event: %v", e.Data)
		}
		choices, _ := e.Data["choices"].([]any)
		if len(choices) == 0 {
			continue
		}
		ch, _ := choices[0].(map[string]any)
		d, _ := ch["delta"].(map[string]any)
		c, _ := d["content"].(string)
		r, _ := d["reasoning_content"].(string)
		if c != "" || r != "" {
			deltas++
		}
		content.WriteString(c)
		reasoning.WriteString(r)
		if ch["finish_reason"] != nil {
			end = ch
		}
	}
	if got := content.String(); !strings.HasPrefix(got, "You said: hello <b>there</b> friend") || !strings.Contains(got, "image/png, 1x1 pixels") {
		t.Errorf("content = %q", got)
	}
	if !strings.Contains(reasoning.String(), "The conversation has 3 messages.") {
		t.Errorf("reasoning = %q; want two sentences for medium effort", reasoning.String())
	}
	if deltas < 5 {
		t.Errorf("%d deltas; want one per word", deltas)
	}
	if end == nil || end["finish_reason"] != "stop" {
		t.Errorf("end event = %v", end)
	}
	if _, audit := get(t, c, l.srv.URL+"/console/audit"); !strings.Contains(audit, "playground.chat") {
		t.Error("the audit log lacks the playground chat")
	}

	// Refused before the stream: JSON errors with their status.
	for _, tc := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"no such account", map[string]any{"account": "nobody", "model": "synthetic/echo", "messages": msgs}, 404},
		{"no account", map[string]any{"model": "synthetic/echo", "messages": msgs}, 400},
		{"no such model", map[string]any{"account": "dev", "model": "nope/nope", "messages": msgs}, 404},
		{"no messages", map[string]any{"account": "dev", "model": "synthetic/echo"}, 400},
		{"bad role", map[string]any{"account": "dev", "model": "synthetic/echo", "messages": []map[string]string{{"role": "system", "content": "x"}}}, 400},
		{"unknown field", map[string]any{"account": "dev", "model": "synthetic/echo", "messages": msgs, "temperature": 2}, 400},
	} {
		resp, evs, raw := chatStream(t, c, l.srv.URL, csrf, tc.body)
		if resp.StatusCode != tc.want || evs != nil || !strings.Contains(raw, `"message"`) {
			t.Errorf("%s: %d %q; want %d with a JSON message", tc.name, resp.StatusCode, raw, tc.want)
		}
	}
	// Not JSON: 415.
	req, _ := http.NewRequest("POST", l.srv.URL+"/console/playground/chat", strings.NewReader("a=b"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", csrf)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form-encoded chat: %v %v; want 415", resp.StatusCode, err)
	}
	// A failure after the stream started is the API's error event, last.
	_, evs, _ = chatStream(t, c, l.srv.URL, csrf, map[string]any{"account": "dev", "model": "synthetic/echo",
		"messages": []map[string]string{{"role": "user", "content": synthetic.FailPrefix + " now"}}})
	if len(evs) == 0 || !strings.Contains(fmt.Sprint(evs[len(evs)-1].Data["error"]), "synthetic") {
		t.Errorf("failing stream events = %v; want an error event last", evs)
	}
}

func TestPlaygroundJob(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	resp, body := postJSON(t, c, l.srv.URL+"/console/playground/job", csrf, map[string]any{"account": "dev", "type": "sfx", "model": "synthetic-sfx", "prompt": "<b>door</b>", "duration": 2})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create job: %d %s", resp.StatusCode, body)
	}
	var st jobState
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Status != jobs.Queued || st.Account != "dev" {
		t.Fatalf("created = %s (%v)", body, err)
	}
	j, err := l.store.Get(context.Background(), st.ID)
	if err != nil || j.Input.Prompt != "<b>door</b>" || j.Input.Duration != 2 || j.Price != 2*credits.Credit {
		t.Errorf("stored job = %+v, %v", j, err)
	}
	// Its page escapes the prompt.
	if _, page := get(t, c, l.srv.URL+"/console/jobs/"+st.ID); strings.Contains(page, "<b>door") || !strings.Contains(page, "&lt;b&gt;door") {
		t.Error("job page: prompt not escaped")
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"too long", map[string]any{"account": "dev", "type": "sfx", "model": "synthetic-sfx", "prompt": "x", "duration": 9999}, 400},
		{"wrong type", map[string]any{"account": "dev", "type": "music", "model": "synthetic-sfx", "prompt": "x"}, 400},
		{"no account", map[string]any{"account": "ghost", "type": "sfx", "model": "synthetic-sfx", "prompt": "x"}, 404},
	} {
		if resp, body := postJSON(t, c, l.srv.URL+"/console/playground/job", csrf, tc.body); resp.StatusCode != tc.want || !strings.Contains(body, `"message"`) {
			t.Errorf("%s: %d %s; want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
}

func TestPlaygroundPage(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	_, body := get(t, c, l.srv.URL+"/console/playground")
	for _, want := range []string{
		`<option value="synthetic/thinker" data-vision data-reasoning>`, `<option value="synthetic/echo">`,
		`data-type="sfx"`, `<option selected>dev</option>`, `id="chat-image" name="image" type="file"`, "playground.js",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("playground lacks %s", want)
		}
	}
	if strings.Contains(body, "openai/") {
		t.Error("playground offers a model that is not configured")
	}
}

func TestUsagePage(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	today := time.Now().UTC()
	day := func(n int) string { return today.AddDate(0, 0, -n).Format(time.DateOnly) }
	evil := `<script>alert(9)</script>`
	l.op.usage = []admin.DayUsage{
		{Account: "acme", Day: day(0), Kind: "chat", Model: "synthetic/echo", Requests: 3, PromptTokens: 30, CompletionTokens: 40, Credits: 5_250_000},
		{Account: "dev", Day: day(1), Kind: "chat", Model: evil, Requests: 7, PromptTokens: 70, CompletionTokens: 10},
		{Account: "acme", Day: day(40), Kind: "chat", Model: "synthetic/echo", Requests: 100},
		{Account: "acme", Day: day(0), Kind: "video", Model: "veo-3.1", Jobs: 2, Credits: 640 * credits.Credit},
		{Account: "dev", Day: day(2), Kind: "sfx", Model: "synthetic-sfx", Jobs: 3, Credits: 15 * credits.Credit},
		// One image request of 3 images; two speech requests.
		{Account: "acme", Day: day(0), Kind: "image", Model: "synthetic-image", Jobs: 1, Credits: 3 * credits.Credit},
		{Account: "dev", Day: day(1), Kind: "speech", Model: "synthetic-speech", Jobs: 2, Credits: 4 * credits.Credit},
	}
	bars := func(body, chart string) int {
		t.Helper()
		_, svg, ok := strings.Cut(body, `<svg id="`+chart+`"`)
		svg, _, _ = strings.Cut(svg, "</svg>")
		if !ok {
			t.Fatalf("no chart %s", chart)
		}
		return strings.Count(svg, `<rect class="bar`)
	}
	tests := []struct {
		name, query     string
		credits, counts int      // bars in each chart
		want            []string // in the page
		rows            int      // rows of the table
	}{
		{"default: credits of every kind, chat tokens", "", 5, 2,
			[]string{"Credits (chat, jobs, images and speech), ", "667.25 in all, at most 648.25 in a day.", "Chat tokens (prompt &#43; completion), ", "150 in all, at most 80 in a day.",
				`<td class="num">640</td>`, `<th scope="row" colspan="4">Total</th><td class="num">10</td><td class="num">100</td><td class="num">50</td><td class="num">8</td><td class="num">667.25</td>`,
				`<th scope="col">Jobs and generations</th>`, `an image request (one, whatever its <code>n</code>`}, 6},
		{"chat requests of acme", "metric=requests&account=acme", 3, 1, []string{"3 in all, at most 3 in a day.", "648.25 in all"}, 3},
		{"completed jobs and generations", "metric=jobs", 5, 4, []string{"Completed jobs and generations, ", "8 in all, at most 3 in a day."}, 6},
		{"a job kind charts its jobs", "kind=video", 1, 1, []string{"Completed jobs and generations, ", "2 in all", "640 in all"}, 1},
		{"images: a request counts once, whatever its n", "kind=image", 1, 1, []string{"Completed jobs and generations, ", "1 in all", "3 in all"}, 1},
		{"speech", "kind=speech", 1, 1, []string{"Completed jobs and generations, ", "2 in all", "4 in all", `<option selected>speech</option>`}, 1},
		{"chat only", "kind=chat", 1, 2, []string{"5.25 in all, at most 5.25 in a day.", "150 in all"}, 2},
		{"nothing of a kind", "kind=music", 0, 0, []string{"No credits spent in this range.", "No completed jobs and generations in this range.", "No usage in this range."}, 0},
		{"a model over a longer range", "model=synthetic/echo&metric=requests&from=" + day(45), 1, 2, []string{"103 in all"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, c, l.srv.URL+"/console/usage?"+tt.query)
			if resp.StatusCode != 200 {
				t.Fatalf("usage?%s: %d", tt.query, resp.StatusCode)
			}
			if strings.Contains(body, "<script>alert") {
				t.Error("usage page renders a model name unescaped")
			}
			if n := bars(body, "credits-chart"); n != tt.credits {
				t.Errorf("usage?%s: the credits chart has %d bars; want %d", tt.query, n, tt.credits)
			}
			if n := bars(body, "usage-chart"); n != tt.counts {
				t.Errorf("usage?%s: the second chart has %d bars; want %d", tt.query, n, tt.counts)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("usage?%s lacks %q", tt.query, w)
				}
			}
			_, table, _ := strings.Cut(body, `<table id="usage-table">`)
			table, _, _ = strings.Cut(table, "</tbody>")
			if n := strings.Count(table, `<tr><td class="day">`); n != tt.rows {
				t.Errorf("usage?%s: the table has %d rows; want %d", tt.query, n, tt.rows)
			}
		})
	}
	for _, q := range []string{"from=yesterday", "from=" + day(0) + "&to=" + day(2), "from=2000-01-01", "kind=job"} {
		if resp, _ := get(t, c, l.srv.URL+"/console/usage?"+q); resp.StatusCode != 400 {
			t.Errorf("usage?%s: %d; want 400", q, resp.StatusCode)
		}
	}
}

func TestLivePagesSecureAndSmall(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	j := l.job(t, "acme", "music", "synthetic-music", `"><script>alert(1)</script>`, nil)
	scriptRE := regexp.MustCompile(`<script src="([^"]+)"`)
	styleRE := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)"`)
	for _, page := range []string{"/console/jobs", "/console/jobs/" + j.ID, "/console/usage", "/console/playground", "/console/models", "/console/accounts", "/console/accounts/acme", "/console/keys", "/console/audit"} {
		resp, body := get(t, c, l.srv.URL+page)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", page, resp.StatusCode)
			continue
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "style-src 'self'") {
			t.Errorf("%s: CSP %q", page, csp)
		}
		if regexp.MustCompile(`<script(?: [^>]*)?>[^<]|<script>|\sstyle="|\son[a-z]+="`).MatchString(body) {
			t.Errorf("%s has inline script, style or handlers", page)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s renders the prompt unescaped", page)
		}
		// Page weight: the HTML and every script and style it loads.
		weight := len(body)
		var refs []string
		for _, m := range append(scriptRE.FindAllStringSubmatch(body, -1), styleRE.FindAllStringSubmatch(body, -1)...) {
			refs = append(refs, strings.ReplaceAll(m[1], "&amp;", "&"))
		}
		for _, ref := range refs {
			r, b := get(t, c, l.srv.URL+ref)
			if r.StatusCode != 200 || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
				t.Errorf("%s: %s: %d, Cache-Control %q", page, ref, r.StatusCode, r.Header.Get("Cache-Control"))
			}
			weight += len(b)
		}
		if weight > 100<<10 {
			t.Errorf("%s weighs %d bytes with its scripts and styles; the budget is 100 KB", page, weight)
		}
		t.Logf("%s: %d bytes (HTML %d, %d files)", page, weight, len(body), len(refs))
	}
	_ = csrf
	// A static file without the current version is not cached for good.
	if r, _ := get(t, c, l.srv.URL+"/console/static/app.js"); r.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("unversioned static file: Cache-Control %q", r.Header.Get("Cache-Control"))
	}
}

func TestLayoutChart(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	points := []point{
		{Day: "2026-01-01", Model: "a", Kind: "chat", Value: 4},
		{Day: "2026-01-01", Model: "b", Kind: "sfx", Value: 6},
		{Day: "2026-01-03", Model: "b", Kind: "sfx", Value: 3},
		{Day: "2026-01-02", Model: "c", Kind: "chat", Value: 0}, // nothing to draw
	}
	class := seriesClasses(points)
	ch := layoutChart("x", points, from, 3, "Requests", class, countUnits)
	if len(ch.Bars) != 3 || len(ch.Legend) != 2 || ch.Legend[0].Model != "b" || ch.Legend[0].Total != "9" || ch.Legend[0].Kind != "sfx" {
		t.Fatalf("chart = %+v", ch)
	}
	// Day 1 stacks b (6, the bigger series) under a (4) up to the top (10).
	b, a := ch.Bars[0], ch.Bars[1]
	plot := ch.Bottom - ch.Top
	if b.Class != "s0" || a.Class != "s1" || b.Y+b.H != ch.Bottom || a.Y+a.H != b.Y || abs(a.Y-ch.Top) > 0.01 || abs(b.H-0.6*plot) > 0.01 {
		t.Errorf("stack = %+v, %+v", b, a)
	}
	if !strings.Contains(b.Title, "b (sfx): 6") {
		t.Errorf("bar title %q; want the model, its kind and the value", b.Title)
	}
	for n, want := range map[int64]int64{0: 1, 1: 1, 7: 8, 9: 10, 10: 10, 11: 20, 250: 300, 288: 300, 301: 400, 777: 800, 801: 1000, 1001: 2000, 277257: 300000} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d; want %d", n, got, want)
		}
	}
	for n, want := range map[int64]string{950: "950", 15000: "15k", 1250000: "1.2M", 3e9: "3G"} {
		if got := compact(n); got != want {
			t.Errorf("compact(%d) = %q; want %q", n, got, want)
		}
	}
	if len(ch.YTicks) != 3 || ch.YTicks[1].Label != "5" || ch.YTicks[2].Label != "10" {
		t.Errorf("y ticks of a chart up to 10 = %+v; want 0, 5, 10", ch.YTicks)
	}
	if one := layoutChart("x", []point{{Day: "2026-01-01", Model: "a", Value: 1}}, from, 3, "Requests", class, countUnits); len(one.YTicks) != 2 || one.YTicks[1].Label != "1" {
		t.Errorf("y ticks of a chart up to 1 = %+v; want 0 and 1 only", one.YTicks)
	}
	if e := layoutChart("x", nil, from, 30, "Credits", class, creditUnits); !e.Empty || len(e.Bars) != 0 || len(e.XTicks) == 0 {
		t.Errorf("empty chart = %+v", e)
	}
	// Credits are micro-credits, written as decimal credits: 0.000015 and
	// 2.5 on one day, axis up to 3.
	cr := layoutChart("x", []point{{Day: "2026-01-01", Model: "a", Kind: "chat", Value: 15}, {Day: "2026-01-01", Model: "b", Kind: "image", Value: 2_500_000}},
		from, 3, "Credits", class, creditUnits)
	if len(cr.YTicks) != 3 || cr.YTicks[1].Label != "1.5" || cr.YTicks[2].Label != "3" || cr.Legend[1].Total != "0.000015" || !strings.Contains(cr.Summary, "2.500015 in all") {
		t.Errorf("credits chart: ticks %+v, legend %+v, summary %q; want ticks to 3, a's total 0.000015, 2.500015 in all", cr.YTicks, cr.Legend, cr.Summary)
	}
	for n, want := range map[int64]string{15: "0.000015", 2_500_000: "2.5", 9_500_000_000: "9500", 12_000_000_000: "12k"} {
		if got := compactCredits(n); got != want {
			t.Errorf("compactCredits(%d) = %q; want %q", n, got, want)
		}
	}
}

// TestSeriesClasses: a model has one colour in both charts, the models
// that spent the most first, then those that counted the most; the ninth
// and later share the last colour.
func TestSeriesClasses(t *testing.T) {
	spent := []point{{Model: "veo", Value: 640}, {Model: "sfx", Value: 15}, {Model: "echo", Value: 0}}
	counted := []point{{Model: "echo", Value: 150}, {Model: "thinker", Value: 900}, {Model: "sfx", Value: 3}}
	got := seriesClasses(spent, counted)
	want := map[string]string{"veo": "s0", "sfx": "s1", "thinker": "s2", "echo": "s3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("seriesClasses = %v; want %v", got, want)
	}
	var many []point
	for i := range 10 {
		many = append(many, point{Model: fmt.Sprintf("m%d", i), Value: int64(100 - i)})
	}
	got = seriesClasses(many)
	if got["m0"] != "s0" || got["m6"] != "s6" || got["m7"] != "s7" || got["m9"] != "s7" {
		t.Errorf("seriesClasses of 10 models = %v; want s0..s7, the last ones sharing s7", got)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestJobServedByFallback: a job completed by one of its model's
// fallbacks shows it in the jobs table (and jobs.json) and on its page,
// with the charge and what was released of the hold.
func TestJobServedByFallback(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	ctx := context.Background()
	id, err := jobs.NewID(jobs.TypeSFX)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	j := &jobs.Job{ID: id, Account: "acme", Type: jobs.TypeSFX, Model: "lead-sfx", Input: jobs.Input{Prompt: "rain", Duration: 2, Format: "mp3"},
		Price: 50 * credits.Credit, Hold: 50 * credits.Credit, Candidates: []jobs.Candidate{{Model: "lead-sfx", Price: 50 * credits.Credit}, {Model: "cheap-sfx", Price: 20_500_000}}, Created: now, Updated: now}
	if _, err := l.store.Create(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	zero, one, charge := 0, 1, credits.Amount(20_500_000)
	for _, s := range []struct {
		from, to jobs.Status
		p        jobs.Patch
	}{
		{jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, IfRuns: &zero, NextRun: now}},
		{jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1, IfRuns: &one, NextRun: now}},
		{jobs.Processing, jobs.Completed, jobs.Patch{Price: &charge, Output: &jobs.Output{Key: "out/" + id, ContentType: "audio/mpeg", Bytes: 9, Duration: 2}}},
	} {
		if _, err := l.store.Transition(ctx, id, s.from, s.to, s.p); err != nil {
			t.Fatal(err)
		}
	}
	_, body := get(t, c, l.srv.URL+"/console/jobs")
	if !strings.Contains(body, `<code>lead-sfx</code> → <code>cheap-sfx</code>`) {
		t.Errorf("jobs table lacks lead-sfx → cheap-sfx")
	}
	var list struct {
		Jobs []jobRow `json:"jobs"`
	}
	getJSON(t, c, l.srv.URL+"/console/jobs.json", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ServedBy != "cheap-sfx" || list.Jobs[0].Price != 20_500_000 {
		t.Errorf("jobs.json = %+v; want the job served by cheap-sfx at 20.5", list.Jobs)
	}
	_, body = get(t, c, l.srv.URL+"/console/jobs/"+id)
	for _, want := range []string{"<dt>Served by</dt><dd><code>cheap-sfx</code></dd>", "<code>lead-sfx</code> (50), <code>cheap-sfx</code> (20.5)",
		"20.5 credits (charged; 50 were held, the rest released)"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
}
