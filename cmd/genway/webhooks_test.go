package main

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// hookReceiver is a webhook endpoint on 127.0.0.1. Every request is
// verified with the Standard Webhooks authors' Go library (an
// implementation of the spec independent of Genway's) against each
// secret in secrets: all of them must verify it. Paths choose the answer:
// /ok 200; /flaky 500 to the first request of each webhook-id, then 200;
// /hang waits until release is closed (or the request is cancelled);
// /down 503 while down is set.
type hookReceiver struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	secrets []string
	got     []hookDelivery
	down    bool
	release chan struct{}
	arrived chan string // the path of each request, as it arrives
}

type hookDelivery struct {
	path, id string
	sigs     int
	code     int
	event    struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Created int64           `json:"created"`
		Data    json.RawMessage `json:"data"`
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{t: t, release: make(chan struct{}), arrived: make(chan string, 100)}
	r.srv = httptest.NewServer(r)
	t.Cleanup(func() {
		r.mu.Lock()
		select {
		case <-r.release:
		default:
			close(r.release)
		}
		r.mu.Unlock()
		r.srv.Close()
	})
	return r
}

func (r *hookReceiver) url(path string) string { return r.srv.URL + path }

func (r *hookReceiver) setSecrets(s ...string) {
	r.mu.Lock()
	r.secrets = s
	r.mu.Unlock()
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := hookDelivery{path: req.URL.Path, id: req.Header.Get("webhook-id"), sigs: len(strings.Fields(req.Header.Get("webhook-signature")))}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("delivery %s %s, Content-Type %q; want a JSON POST", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
	}
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	if len(secrets) == 0 {
		r.t.Errorf("delivery %s before the test knew its secret", d.id)
	}
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := wh.Verify(body, req.Header); err != nil {
			r.t.Errorf("delivery %s to %s does not verify with %.10s…: %v", d.id, d.path, s, err)
		}
	}
	if err := json.Unmarshal(body, &d.event); err != nil {
		r.t.Errorf("delivery %s: body %q: %v", d.id, body, err)
	}
	if d.event.ID != d.id {
		r.t.Errorf("event id %q, webhook-id %q; want the same", d.event.ID, d.id)
	}
	r.arrived <- d.path
	r.mu.Lock()
	d.code = http.StatusOK
	switch d.path {
	case "/flaky":
		seen := false
		for _, g := range r.got {
			seen = seen || g.id == d.id
		}
		if !seen {
			d.code = http.StatusInternalServerError
		}
	case "/down":
		if r.down {
			d.code = http.StatusServiceUnavailable
		}
	}
	r.got = append(r.got, d)
	r.mu.Unlock()
	if d.path == "/hang" {
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		return
	}
	w.WriteHeader(d.code)
	io.WriteString(w, `{"received": true}`)
}

// deliveries returns what arrived for webhook-id id.
func (r *hookReceiver) deliveries(id string) []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookDelivery
	for _, d := range r.got {
		if d.id == id {
			out = append(out, d)
		}
	}
	return out
}

// waitFor polls until id has n deliveries, the last answered 2xx
// (bounded by limit).
func (r *hookReceiver) waitFor(t *testing.T, id string, n int, limit time.Duration) []hookDelivery {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ds := r.deliveries(id)
		if len(ds) >= n && ds[len(ds)-1].code/100 == 2 {
			return ds
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("webhook %s: %d deliveries after %v; want %d, the last 2xx", id, len(r.deliveries(id)), limit, n)
	return nil
}

func eventID(jobID string) string { return "evt_" + strings.TrimPrefix(jobID, "job_") }

func secretOf(t *testing.T, s *server) string {
	t.Helper()
	var sec struct{ Object, Secret string }
	if code, _ := s.do(t, "GET", "/v1/webhooks/secret", nil, nil, &sec); code != 200 || sec.Object != "webhook_secret" || !strings.HasPrefix(sec.Secret, "whsec_") {
		t.Fatalf("GET /v1/webhooks/secret = %d %+v", code, sec)
	}
	return sec.Secret
}

// TestWebhooks runs the webhook story on both backends: signed deliveries
// verified by an independent implementation, the retry of a 500 under the
// same webhook-id, a hanging receiver that holds no job worker, failed
// jobs, POST /v1/videos, the account's default URL, rotation (two
// signatures) and a resend through the admin API.
func TestWebhooks(t *testing.T) {
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			dir := t.TempDir()
			if backend == "aws" {
				if testing.Short() {
					t.Skip("starts moto_server")
				}
				_, env, dir = awsServe(t)
			}
			env = maps.Clone(env)
			env["GENWAY_WEBHOOK_ALLOW_PRIVATE"], env["GENWAY_WORKERS"], env["GENWAY_ADMIN_TOKEN"] = "1", "1", testAdminToken
			s := startServer(t, dir, env)
			testWebhooks(t, s)
		})
	}
}

func testWebhooks(t *testing.T, s *server) {
	rcv := newHookReceiver(t)
	secret := secretOf(t, s)
	if again := secretOf(t, s); again != secret {
		t.Fatalf("the secret changed between two reads")
	}
	rcv.setSecrets(secret)
	admin := &server{base: s.base, key: testAdminToken}
	music := func(prompt, hook string) map[string]any {
		r := map[string]any{"type": "music", "model": "synthetic-music", "prompt": prompt, "duration": 2}
		if hook != "" {
			r["webhook_url"] = hook
		}
		return r
	}

	// Bad URLs are a 400 on webhook_url.
	for _, u := range []string{"http://hooks.example.com/x", "ftp://hooks.example.com/x", "not a url"} {
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		if code, _ := s.do(t, "POST", "/v1/jobs", music("x", u), nil, &e); code != 400 || e.Error.Param != "webhook_url" {
			t.Errorf("POST /v1/jobs webhook_url %q = %d %+v; want 400 on webhook_url", u, code, e.Error)
		}
	}

	// A receiver that hangs holds its delivery, not the one job worker
	// (GENWAY_WORKERS=1): a later job completes while it hangs.
	var hung jobResp
	s.do(t, "POST", "/v1/jobs", music("hang", rcv.url("/hang")), nil, &hung)
	select {
	case p := <-rcv.arrived:
		if p != "/hang" {
			t.Fatalf("first delivery to %s; want /hang", p)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the hanging receiver got nothing in 60 s")
	}
	var after jobResp
	s.do(t, "POST", "/v1/jobs", music("after", ""), nil, &after)
	if j, _ := s.waitJob(t, after.ID, 60*time.Second); j.Status != "completed" {
		t.Fatalf("job after the hang ended %s", j.Status)
	}
	if len(rcv.deliveries(eventID(hung.ID))) != 1 {
		t.Errorf("the hanging delivery was retried before its timeout")
	}
	rcv.mu.Lock()
	close(rcv.release)
	rcv.mu.Unlock()

	// 500 once: the retry comes under the same webhook-id, and the event
	// is the job as GET /v1/jobs/{id} answers it.
	var flaky jobResp
	s.do(t, "POST", "/v1/jobs", music("flaky", rcv.url("/flaky")), nil, &flaky)
	ds := rcv.waitFor(t, eventID(flaky.ID), 2, 60*time.Second)
	if ds[0].code != 500 || ds[1].id != ds[0].id || ds[1].event.Type != "job.completed" || ds[1].event.Created == 0 {
		t.Errorf("flaky deliveries %+v; want a 500, then the same id, job.completed", ds)
	}
	var got, want map[string]any
	json.Unmarshal(ds[1].event.Data, &got)
	s.do(t, "GET", "/v1/jobs/"+flaky.ID, nil, nil, &want)
	for _, k := range []string{"id", "object", "status", "model", "created", "webhook_url"} {
		if got[k] != want[k] {
			t.Errorf("event data %s = %v; GET /v1/jobs/{id} says %v", k, got[k], want[k])
		}
	}
	if o, _ := got["output"].(map[string]any); o == nil || o["url"] == "" {
		t.Errorf("event data output %v; want the output with its link", got["output"])
	}
	var list struct {
		Data []struct {
			ID       string `json:"id"`
			Status   string `json:"status"`
			Attempts int    `json:"attempts"`
			LastCode int    `json:"last_code"`
			Excerpt  string `json:"excerpt"`
		} `json:"data"`
	}
	// The receiver keeps a delivery before it answers: the attempt is
	// recorded once Genway has read the answer.
	code := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, _ = admin.do(t, "GET", "/admin/v1/jobs/"+flaky.ID+"/deliveries", nil, nil, &list); code != 200 || len(list.Data) != 1 || list.Data[0].Status != "pending" {
			break
		}
	}
	if code != 200 || len(list.Data) != 1 ||
		list.Data[0].Status != "delivered" || list.Data[0].Attempts != 2 || list.Data[0].LastCode != 200 || list.Data[0].Excerpt != `{"received": true}` {
		t.Errorf("admin deliveries of %s = %d %+v; want delivered after 2 attempts, code 200, the answer's excerpt", flaky.ID, code, list.Data)
	}

	// A failed job, and a video made through POST /v1/videos.
	var failed jobResp
	s.do(t, "POST", "/v1/jobs", music("fail: on purpose", rcv.url("/ok")), nil, &failed)
	if ds := rcv.waitFor(t, eventID(failed.ID), 1, 60*time.Second); ds[0].event.Type != "job.failed" {
		t.Errorf("failed job's event type %q; want job.failed", ds[0].event.Type)
	}
	var video struct{ ID string }
	if code, _ := s.do(t, "POST", "/v1/videos", map[string]any{"model": "synthetic-video", "prompt": "ball", "seconds": "2", "size": "320x240",
		"webhook_url": rcv.url("/ok")}, nil, &video); code != 200 {
		t.Fatalf("POST /v1/videos with webhook_url = %d", code)
	}
	rcv.waitFor(t, eventID(video.ID), 1, 60*time.Second)

	// The account's default URL, and a rotated secret: both sign for 24 h.
	if code, _ := admin.do(t, "POST", "/admin/v1/accounts/dev/webhook", map[string]any{"url": rcv.url("/ok")}, nil, nil); code != 200 {
		t.Fatalf("set the default URL = %d", code)
	}
	var rot struct {
		PreviousUntil int64 `json:"previous_until"`
	}
	if code, _ := admin.do(t, "POST", "/admin/v1/accounts/dev/webhook/rotate", nil, nil, &rot); code != 200 || rot.PreviousUntil == 0 {
		t.Fatalf("rotate = %d %+v", code, rot)
	}
	newSecret := secretOf(t, s)
	if newSecret == secret {
		t.Fatal("rotate kept the secret")
	}
	rcv.setSecrets(secret, newSecret) // each must verify
	var byDefault jobResp
	s.do(t, "POST", "/v1/jobs", music("default url", ""), nil, &byDefault)
	if ds := rcv.waitFor(t, eventID(byDefault.ID), 1, 60*time.Second); ds[0].sigs != 2 || ds[0].path != "/ok" {
		t.Errorf("delivery after rotation to %s with %d signatures; want the default URL, 2 signatures", ds[0].path, ds[0].sigs)
	}

	// Resend: once more, same id.
	if code, _ := admin.do(t, "POST", "/admin/v1/jobs/"+flaky.ID+"/deliveries/resend", nil, nil, nil); code != 200 {
		t.Fatalf("resend = %d", code)
	}
	rcv.waitFor(t, eventID(flaky.ID), 3, 60*time.Second)
}

// TestWebhookSurvivesKill kills `genway serve` (SIGKILL, a child
// process) while a finished job's delivery is in flight, and checks that
// the restarted server delivers it, under the same webhook-id: on the
// embedded store (the webhook queue's lease ends at Open) and on the
// AWS-backed mode (the stream is read again and the delivery's claim
// runs out).
func TestWebhookSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real server")
	}
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			dir := t.TempDir()
			if backend == "aws" {
				_, env, dir = awsServe(t)
			}
			env = maps.Clone(env)
			env["GENWAY_WEBHOOK_ALLOW_PRIVATE"] = "1"
			s, cmd := startProcess(t, dir, env)
			rcv := newHookReceiver(t)
			rcv.setSecrets(secretOf(t, s))
			rcv.mu.Lock()
			rcv.down = true
			rcv.mu.Unlock()
			var j jobResp
			s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "door", "duration": 1,
				"webhook_url": rcv.url("/down")}, nil, &j)
			// The job completed and its first attempt was answered 503:
			// the delivery is owed. Kill the server then.
			select {
			case <-rcv.arrived:
			case <-time.After(60 * time.Second):
				t.Fatal("no delivery attempt in 60 s")
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			rcv.mu.Lock()
			rcv.down = false
			rcv.mu.Unlock()
			startProcess(t, dir, env)
			ds := rcv.waitFor(t, eventID(j.ID), 2, 90*time.Second)
			if ds[0].code != 503 || ds[len(ds)-1].id != ds[0].id {
				t.Errorf("deliveries %+v; want a 503 before the kill, then the same id answered 200 after", ds)
			}
		})
	}
}

// TestWebhooksCLI: genway webhooks on the three ways to reach a store:
// the admin socket of a running server, its admin API (GENWAY_URL), and
// the store file itself once the server is gone.
func TestWebhooksCLI(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GENWAY_ADMIN_TOKEN": testAdminToken, "GENWAY_WEBHOOK_ALLOW_PRIVATE": "1"}
	s := startServer(t, dir, env)
	rcv := newHookReceiver(t)
	rcv.setSecrets(secretOf(t, s))
	cli := func(getenv func(string) string, args ...string) string {
		t.Helper()
		var out strings.Builder
		if err := run(t.Context(), args, getenv, &out, io.Discard); err != nil {
			t.Fatalf("genway %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	socket := testEnv(dir, env)
	remote := testEnv(t.TempDir(), map[string]string{"GENWAY_URL": s.base + "/v1", "GENWAY_ADMIN_TOKEN": testAdminToken})

	if out := cli(socket, "webhooks", "url", "--account", "dev", rcv.url("/ok")); !strings.Contains(out, rcv.url("/ok")) || !strings.Contains(out, "whsec_") {
		t.Errorf("webhooks url (socket) = %q", out)
	}
	var j jobResp
	s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "door", "duration": 1}, nil, &j)
	rcv.waitFor(t, eventID(j.ID), 1, 60*time.Second)
	for name, getenv := range map[string]func(string) string{"socket": socket, "remote": remote} {
		if out := cli(getenv, "webhooks", "deliveries", j.ID); !strings.Contains(out, eventID(j.ID)) || !strings.Contains(out, "delivered") {
			t.Errorf("webhooks deliveries (%s) = %q", name, out)
		}
	}
	if out := cli(remote, "webhooks", "rotate", "--account", "dev"); !strings.Contains(out, "previous secret signs too until") {
		t.Errorf("webhooks rotate (remote) = %q", out)
	}
	rcv.setSecrets(secretOf(t, s))
	if out := cli(remote, "webhooks", "resend", j.ID); !strings.Contains(out, "pending") {
		t.Errorf("webhooks resend (remote) = %q", out)
	}
	rcv.waitFor(t, eventID(j.ID), 2, 60*time.Second)
	var bad strings.Builder
	if err := run(t.Context(), []string{"webhooks", "url", "--account", "dev", "http://hooks.example.com/x"}, remote, &bad, io.Discard); err == nil {
		t.Error("webhooks url accepted an http URL")
	}
	// The server gone, on the store file.
	s.stop()
	if out := cli(socket, "webhooks", "show", "--account", "dev"); !strings.Contains(out, rcv.url("/ok")) || !strings.Contains(out, "signs too until") {
		t.Errorf("webhooks show (store file) = %q", out)
	}
}

// TestWebhooksCLIAWS: genway webhooks on the AWS tables (moto), with no
// server running.
func TestWebhooksCLIAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	_, env, dir := awsServe(t)
	getenv := testEnv(dir, env)
	cli := func(args ...string) (string, error) {
		var out strings.Builder
		err := run(t.Context(), args, getenv, &out, io.Discard)
		return out.String(), err
	}
	if _, err := cli("webhooks", "url", "--account", "acme", "https://hooks.example.com/genway"); err == nil {
		t.Error("webhooks url for an account that does not exist succeeded")
	}
	if out, err := cli("accounts", "create", "--account", "acme", "--credits", "5"); err != nil {
		t.Fatalf("accounts create = %q, %v", out, err)
	}
	if out, err := cli("webhooks", "url", "--account", "acme", "https://hooks.example.com/genway"); err != nil || !strings.Contains(out, "https://hooks.example.com/genway") {
		t.Errorf("webhooks url = %q, %v", out, err)
	}
	if out, err := cli("webhooks", "rotate", "--account", "acme"); err != nil || !strings.Contains(out, "signs too until") {
		t.Errorf("webhooks rotate = %q, %v", out, err)
	}
	if out, err := cli("webhooks", "deliveries", "job_music_00000000000000000000"); err != nil || !strings.Contains(out, "no webhook delivery") {
		t.Errorf("webhooks deliveries of an unknown job = %q, %v", out, err)
	}
}
