package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localmedia"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/providers/synthetic"
)

// vtRetention is the media retention of the videos tests' service.
const vtRetention = 24 * time.Hour

// vtEnv is the Videos API and the jobs API over one embedded store and
// local media, with accounts "a" and "b", and the synthetic provider's
// worker run on demand.
type vtEnv struct {
	srv    *httptest.Server
	svc    *jobs.Service
	store  *localstore.Store
	worker *jobs.Worker
	clock  *jtClock
}

// vtServer serves the video and job routes and the media links on one
// server; the account is the X-Test-Account header. wrap, if not nil,
// wraps the store the service reads (the worker uses the store itself).
func vtServer(t *testing.T, wrap func(jobs.Store) jobs.Store) *vtEnv {
	t.Helper()
	s, cat := jtStore(t, 1000)
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	media := localmedia.New(t.TempDir(), srv.URL, bytes.Repeat([]byte{1}, localmedia.SecretSize))
	c := &jtClock{t: time.Now().Truncate(time.Second)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var st jobs.Store = s
	if wrap != nil {
		st = wrap(s)
	}
	svc := &jobs.Service{Store: st, Queue: s, Media: media, Catalog: cat, Log: log, Now: c.now,
		Deletes: s, Credits: s, Retention: vtRetention}
	worker := &jobs.Worker{Store: s, Queue: s, Media: media, Catalog: cat, Log: log,
		Providers: map[string]jobs.Provider{"synthetic": synthetic.Media{}}, Now: c.now}
	as := asTestAccount
	h = NewMux(log,
		Route{Method: "POST", Pattern: "/v1/videos", Handler: as(CreateVideo(svc, log))},
		Route{Method: "GET", Pattern: "/v1/videos", Handler: as(ListVideos(svc, log))},
		Route{Method: "GET", Pattern: "/v1/videos/{id}", Handler: as(GetVideo(svc, log))},
		Route{Method: "DELETE", Pattern: "/v1/videos/{id}", Handler: as(DeleteVideo(svc, log))},
		Route{Method: "GET", Pattern: "/v1/videos/{id}/content", Handler: as(VideoContent(svc, log))},
		Route{Method: "POST", Pattern: "/v1/jobs", Handler: as(CreateJob(svc, log))},
		Route{Method: "GET", Pattern: "/v1/jobs/{id}", Handler: as(GetJob(svc, log))},
		Route{Method: "POST", Pattern: "/v1/jobs/{id}/cancel", Handler: as(CancelJob(svc, log))},
		Route{Method: "GET", Pattern: "/files/{key...}", Handler: media.Handler()},
	)
	return &vtEnv{srv: srv, svc: svc, store: s, worker: worker, clock: c}
}

// vtResp is an answer: its status, headers and body.
type vtResp struct {
	status int
	header http.Header
	body   []byte
}

// send sends method path as account with body of contentType (none if
// ""), with extra headers, not following redirects.
func (e *vtEnv) send(t *testing.T, account, method, path, contentType string, body []byte, hdr ...string) vtResp {
	t.Helper()
	return sendAs(t, e.srv.URL, account, method, path, contentType, body, hdr...)
}

// sendAs sends method path to the server at base as account (the
// X-Test-Account header, see asTestAccount) with body of contentType
// (none if ""), with extra headers (name, value pairs), not following
// redirects.
func sendAs(t *testing.T, base, account, method, path, contentType string, body []byte, hdr ...string) vtResp {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test-Account", account)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return vtResp{resp.StatusCode, resp.Header, b}
}

// form is a multipart/form-data body of fields (name, value pairs, in
// order), as OpenAI's clients send it, with a fresh boundary.
func form(t *testing.T, fields ...string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := w.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), b.Bytes()
}

// video is a decoded video object; the raw JSON keeps what it has.
type video struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Model       string  `json:"model"`
	Status      string  `json:"status"`
	Progress    int     `json:"progress"`
	CreatedAt   int64   `json:"created_at"`
	CompletedAt *int64  `json:"completed_at"`
	ExpiresAt   *int64  `json:"expires_at"`
	Prompt      string  `json:"prompt"`
	Seconds     string  `json:"seconds"`
	Size        string  `json:"size"`
	ServedBy    string  `json:"served_by"`
	Remixed     *string `json:"remixed_from_video_id"`
	Error       *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw map[string]json.RawMessage
}

// decodeVideo wants r to be a 200 video object.
func decodeVideo(t *testing.T, r vtResp) video {
	t.Helper()
	var v video
	if err := json.Unmarshal(r.body, &v); r.status != 200 || err != nil || v.Object != "video" {
		t.Fatalf("answer %d %s; want 200 and a video", r.status, r.body)
	}
	json.Unmarshal(r.body, &v.raw)
	// Every field of OpenAI's Video object is there, null or not.
	for _, f := range []string{"id", "object", "model", "status", "progress", "created_at", "completed_at", "expires_at",
		"prompt", "seconds", "size", "error", "remixed_from_video_id"} {
		if _, ok := v.raw[f]; !ok {
			t.Errorf("video %s has no %s", r.body, f)
		}
	}
	return v
}

// apiError is the OpenAI error envelope.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantError wants r to be an error of status naming param with code.
func wantError(t *testing.T, what string, r vtResp, status int, param, code string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != status {
		t.Errorf("%s = %d %s; want %d", what, r.status, r.body, status)
		return
	}
	gotParam, gotCode := "", ""
	if e.Error.Param != nil {
		gotParam = *e.Error.Param
	}
	if e.Error.Code != nil {
		gotCode = *e.Error.Code
	}
	if gotParam != param || gotCode != code || e.Error.Message == "" {
		t.Errorf("%s = %d param %q code %q (%q); want param %q code %q", what, r.status, gotParam, gotCode, e.Error.Message, param, code)
	}
}

func TestCreateVideo(t *testing.T) {
	e := vtServer(t, nil)
	const js = "application/json"
	// A file part, as the SDK sends an uploaded input_reference.
	var fileBody bytes.Buffer
	fw := multipart.NewWriter(&fileBody)
	fw.WriteField("model", "synthetic-video")
	fw.WriteField("prompt", "a ball")
	part, _ := fw.CreateFormFile("input_reference", "ref.png")
	part.Write([]byte("\x89PNG"))
	fw.Close()
	var promptFile bytes.Buffer
	pw := multipart.NewWriter(&promptFile)
	part, _ = pw.CreateFormFile("prompt", "prompt.txt")
	part.Write([]byte("a ball"))
	pw.Close()

	tests := []struct {
		name  string
		ct    string
		body  []byte
		want  video // status 200: these fields
		err   int   // else this status
		param string
		code  string
	}{
		{name: "multipart", body: nil, want: video{Model: "synthetic-video", Prompt: "a ball", Seconds: "2", Size: "320x240"}},
		{name: "JSON, seconds a string", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"a ball","seconds":"2","size":"320x240"}`),
			want: video{Model: "synthetic-video", Prompt: "a ball", Seconds: "2", Size: "320x240"}},
		{name: "JSON, seconds a number", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"a ball","seconds":3}`),
			want: video{Model: "synthetic-video", Prompt: "a ball", Seconds: "3", Size: "640x360"}},
		{name: "defaults of the model", ct: js, body: []byte(`{"model":"veo-3.1","prompt":"a ball","size":null}`),
			want: video{Model: "veo-3.1", Prompt: "a ball", Seconds: "8", Size: "1280x720"}},
		{name: "OpenAI's portrait size", ct: js, body: []byte(`{"model":"veo-3.1-fast","prompt":"a ball","seconds":"4","size":"720x1280"}`),
			want: video{Model: "veo-3.1-fast", Prompt: "a ball", Seconds: "4", Size: "720x1280"}},
		{name: "form-urlencoded", ct: "application/x-www-form-urlencoded", body: []byte(`model=synthetic-video&prompt=a+ball&seconds=4`),
			want: video{Model: "synthetic-video", Prompt: "a ball", Seconds: "4", Size: "640x360"}},

		{name: "webhook_url where webhooks are off", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"a ball","webhook_url":"https://h.example/x"}`),
			err: 400, param: "webhook_url", code: "unsupported_parameter"},
		{name: "no model", ct: js, body: []byte(`{"prompt":"a ball"}`), err: 400, param: "model", code: "missing_field"},
		{name: "null model", ct: js, body: []byte(`{"model":null,"prompt":"a ball"}`), err: 400, param: "model", code: "missing_field"},
		{name: "OpenAI's default model", ct: js, body: []byte(`{"model":"sora-2","prompt":"a ball"}`), err: 404, param: "model", code: "model_not_found"},
		{name: "not a video model", ct: js, body: []byte(`{"model":"synthetic-music","prompt":"a ball"}`), err: 400, param: "model", code: "model_type_mismatch"},
		{name: "no prompt", ct: js, body: []byte(`{"model":"synthetic-video"}`), err: 400, param: "prompt", code: "missing_field"},
		{name: "seconds not a number", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","seconds":"four"}`), err: 400, param: "seconds", code: "invalid_value"},
		{name: "seconds negative", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","seconds":"-4"}`), err: 400, param: "seconds", code: "invalid_value"},
		{name: "seconds a boolean", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","seconds":true}`), err: 400, param: "seconds", code: "invalid_type"},
		{name: "seconds over the model's most", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","seconds":"30"}`), err: 400, param: "seconds", code: "invalid_value"},
		{name: "seconds the model cannot make", ct: js, body: []byte(`{"model":"veo-3.1","prompt":"p","seconds":"5"}`), err: 400, param: "seconds", code: "invalid_value"},
		{name: "seconds the size cannot have", ct: js, body: []byte(`{"model":"veo-3.1","prompt":"p","seconds":"4","size":"1920x1080"}`), err: 400, param: "seconds", code: "invalid_value"},
		{name: "size malformed", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","size":"big"}`), err: 400, param: "size", code: "invalid_value"},
		{name: "size the model cannot make", ct: js, body: []byte(`{"model":"veo-3.1","prompt":"p","size":"1792x1024"}`), err: 400, param: "size", code: "invalid_value"},
		{name: "size a number", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","size":720}`), err: 400, param: "size", code: "invalid_type"},
		{name: "input_reference in JSON", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","input_reference":{"image_url":"https://example.com/a.png"}}`),
			err: 400, param: "input_reference", code: "unsupported_parameter"},
		{name: "input_reference a file", ct: fw.FormDataContentType(), body: fileBody.Bytes(), err: 400, param: "input_reference", code: "unsupported_parameter"},
		{name: "unknown field", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","quality":"high"}`), err: 400, param: "quality", code: "unknown_parameter"},
		{name: "a jobs API field", ct: js, body: []byte(`{"model":"synthetic-video","prompt":"p","duration":4}`), err: 400, param: "duration", code: "unknown_parameter"},
		{name: "a text field as a file", ct: pw.FormDataContentType(), body: promptFile.Bytes(), err: 400, param: "prompt", code: "invalid_type"},
		{name: "multipart without a boundary", ct: "multipart/form-data", body: []byte("x"), err: 400, param: "", code: "invalid_body"},
		{name: "not JSON", ct: js, body: []byte(`{"model":`), err: 400, param: "", code: "invalid_json"},
		{name: "not an object", ct: js, body: []byte(`["model"]`), err: 400, param: "", code: "invalid_json"},
		{name: "another media type", ct: "text/plain", body: []byte(`model=x`), err: 415, param: "", code: "unsupported_media_type"},
	}
	// Multipart variants of some refusals: the same names come back.
	multipartErrs := []struct {
		name        string
		fields      []string
		param, code string
	}{
		{"multipart: unknown field", []string{"model", "synthetic-video", "prompt", "p", "n", "2"}, "n", "unknown_parameter"},
		{"multipart: twice", []string{"model", "synthetic-video", "prompt", "p", "prompt", "q"}, "prompt", "invalid_value"},
		{"multipart: input_reference object", []string{"model", "synthetic-video", "prompt", "p", "input_reference[image_url]", "https://example.com/a.png"}, "input_reference", "unsupported_parameter"},
		{"multipart: seconds", []string{"model", "synthetic-video", "prompt", "p", "seconds", "4.5"}, "seconds", "invalid_value"},
		{"multipart: size", []string{"model", "kling-2.5-turbo", "prompt", "p", "size", "720x1280"}, "size", "invalid_value"},
	}
	before, err := e.store.Account(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var held credits.Amount
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := tt.ct, tt.body
			if body == nil {
				ct, body = form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "2", "size", "320x240")
			}
			r := e.send(t, "a", "POST", "/v1/videos", ct, body)
			if tt.err != 0 {
				wantError(t, "POST /v1/videos "+string(body), r, tt.err, tt.param, tt.code)
				return
			}
			v := decodeVideo(t, r)
			if v.Model != tt.want.Model || v.Prompt != tt.want.Prompt || v.Seconds != tt.want.Seconds || v.Size != tt.want.Size ||
				v.Status != "queued" || v.Progress != 0 || v.CompletedAt != nil || v.ExpiresAt != nil || v.Error != nil || v.Remixed != nil ||
				v.CreatedAt != e.clock.now().Unix() || !strings.HasPrefix(v.ID, "job_video_") {
				t.Errorf("POST /v1/videos %s = %s; want a queued video of %+v", body, r.body, tt.want)
			}
			// The same job under the jobs API.
			var j struct {
				ID, Type, Status string
				Input            jobs.Input
			}
			if r := e.send(t, "a", "GET", "/v1/jobs/"+v.ID, "", nil); r.status != 200 || json.Unmarshal(r.body, &j) != nil ||
				j.ID != v.ID || j.Type != "video" || j.Status != "queued" || j.Input.Prompt != v.Prompt || j.Input.Size != v.Size {
				t.Errorf("GET /v1/jobs/%s = %d %s; want the same job", v.ID, r.status, r.body)
			}
			got, err := e.store.Get(context.Background(), v.ID)
			if err != nil {
				t.Fatal(err)
			}
			held += got.Price
		})
	}
	for _, tt := range multipartErrs {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := form(t, tt.fields...)
			wantError(t, tt.name, e.send(t, "a", "POST", "/v1/videos", ct, body), 400, tt.param, tt.code)
		})
	}
	// What was created holds its price; what was refused holds nothing.
	after, err := e.store.Account(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if after.Held-before.Held != held || after.Balance != before.Balance {
		t.Errorf("account %+v -> %+v; want %s more held (the created videos' prices) and nothing else", before, after, held)
	}
}

func TestCreateVideoIdempotency(t *testing.T) {
	e := vtServer(t, nil)
	key := []string{"Idempotency-Key", "retry-1"}
	// A retry sends the same fields with another boundary: the same video.
	ct1, b1 := form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "2")
	ct2, b2 := form(t, "prompt", "a ball", "seconds", "2", "model", "synthetic-video")
	v1 := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct1, b1, key...))
	v2 := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct2, b2, key...))
	v3 := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", "application/json", []byte(`{"model":"synthetic-video","prompt":"a ball","seconds":2}`), key...))
	if v1.ID != v2.ID || v1.ID != v3.ID {
		t.Errorf("the same request thrice with one Idempotency-Key made %s, %s, %s; want one video", v1.ID, v2.ID, v3.ID)
	}
	ct, b := form(t, "model", "synthetic-video", "prompt", "another", "seconds", "2")
	wantError(t, "another body, same key", e.send(t, "a", "POST", "/v1/videos", ct, b, key...), 409, "", "idempotency_key_reused")
	// The jobs API's body under the same key is another request too.
	r := e.send(t, "a", "POST", "/v1/jobs", "application/json", []byte(`{"type":"video","model":"synthetic-video","prompt":"a ball","duration":2}`), key...)
	wantError(t, "POST /v1/jobs, same key", r, 409, "", "idempotency_key_reused")
	a, err := e.store.Account(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Held != 2*credits.Credit { // one synthetic video of 2 s at 1 credit a second
		t.Errorf("held %s; want 2 (one video)", a.Held)
	}
	// Once the video is deleted, a replay does not bring it back.
	if err := e.worker.Process(context.Background(), v1.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.send(t, "a", "DELETE", "/v1/videos/"+v1.ID, "", nil); r.status != 200 {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	wantError(t, "a replay after the delete", e.send(t, "a", "POST", "/v1/videos", ct1, b1, key...), 409, "", "idempotency_key_reused")
}

// mp4Seconds returns an MP4's duration from its mvhd box (version 0).
func mp4Seconds(t *testing.T, b []byte) float64 {
	t.Helper()
	i := bytes.Index(b, []byte("mvhd"))
	if !bytes.HasPrefix(b[4:], []byte("ftyp")) || i < 0 || len(b) < i+24 {
		t.Fatalf("not an MP4 with an mvhd box: %q...", b[:min(len(b), 16)])
	}
	return float64(binary.BigEndian.Uint32(b[i+20:])) / float64(binary.BigEndian.Uint32(b[i+16:]))
}

func TestVideoLifecycle(t *testing.T) {
	e := vtServer(t, nil)
	ctx := context.Background()
	ct, body := form(t, "model", "synthetic-video", "prompt", "a red ball", "seconds", "3", "size", "320x240")
	v := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct, body))
	if g := decodeVideo(t, e.send(t, "a", "GET", "/v1/videos/"+v.ID, "", nil)); g.Status != "queued" || g.Progress != 0 {
		t.Errorf("GET queued video = %+v; want queued at 0", g)
	}
	wantError(t, "content of a queued video", e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content", "", nil), 404, "", "video_not_ready")
	wantError(t, "delete of a queued video", e.send(t, "a", "DELETE", "/v1/videos/"+v.ID, "", nil), 409, "", "job_not_final")

	// Another account, a malformed id, a job of another type: not found.
	r := e.send(t, "a", "POST", "/v1/jobs", "application/json", []byte(`{"type":"sfx","model":"synthetic-sfx","prompt":"rain","duration":1}`))
	var sfx struct{ ID string }
	if json.Unmarshal(r.body, &sfx) != nil || sfx.ID == "" {
		t.Fatalf("POST /v1/jobs = %d %s", r.status, r.body)
	}
	for _, c := range []struct{ account, id string }{{"b", v.ID}, {"a", "job_video_nope"}, {"a", "video_123"}, {"a", sfx.ID}} {
		for _, m := range []struct{ method, suffix string }{{"GET", ""}, {"GET", "/content"}, {"DELETE", ""}} {
			wantError(t, m.method+" "+c.id+m.suffix+" as "+c.account, e.send(t, c.account, m.method, "/v1/videos/"+c.id+m.suffix, "", nil), 404, "", "video_not_found")
		}
	}

	// The worker makes it: completed, with its content.
	e.clock.add(3 * time.Second)
	if err := e.worker.Process(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	g := decodeVideo(t, e.send(t, "a", "GET", "/v1/videos/"+v.ID, "", nil))
	end := e.clock.now().Unix()
	if g.Status != "completed" || g.Progress != 100 || g.CompletedAt == nil || *g.CompletedAt != end ||
		g.ExpiresAt == nil || *g.ExpiresAt != end+int64(vtRetention/time.Second) || g.Error != nil || g.ServedBy != "synthetic-video" {
		t.Errorf("GET completed video = %+v; want completed at 100, completed_at %d, expires_at a retention later", g, end)
	}
	for _, q := range []string{"", "?variant=video"} {
		r := e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content"+q, "", nil)
		loc := r.header.Get("Location")
		if r.status != http.StatusFound || !strings.HasPrefix(loc, e.srv.URL+"/files/") || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET content%s = %d, Location %q; want a 302 to our media link", q, r.status, loc)
		}
	}
	// Following the redirect, as OpenAI's clients do, gives the MP4.
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/videos/"+v.ID+"/content", nil)
	req.Header.Set("X-Test-Account", "a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mp4, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "video/mp4" || resp.ContentLength != int64(len(mp4)) {
		t.Fatalf("content, redirect followed = %d %s, %d bytes (Content-Length %d); want 200 video/mp4", resp.StatusCode, resp.Header.Get("Content-Type"), len(mp4), resp.ContentLength)
	}
	if s := mp4Seconds(t, mp4); s != 3 {
		t.Errorf("the MP4 lasts %v s; want 3", s)
	}
	link := e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content", "", nil).header.Get("Location")
	for _, variant := range []string{"thumbnail", "spritesheet"} {
		wantError(t, "variant "+variant, e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content?variant="+variant, "", nil), 400, "variant", "unsupported_value")
	}
	wantError(t, "variant gif", e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content?variant=gif", "", nil), 400, "variant", "invalid_value")

	// Deleted: its content gone, not found under either API; its charge stands.
	r = e.send(t, "a", "DELETE", "/v1/videos/"+v.ID, "", nil)
	var del map[string]any
	if json.Unmarshal(r.body, &del) != nil || r.status != 200 || del["id"] != v.ID || del["object"] != "video.deleted" || del["deleted"] != true || len(del) != 3 {
		t.Errorf("DELETE = %d %s; want {id, object: video.deleted, deleted: true}", r.status, r.body)
	}
	wantError(t, "GET deleted", e.send(t, "a", "GET", "/v1/videos/"+v.ID, "", nil), 404, "", "video_not_found")
	wantError(t, "GET deleted content", e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content", "", nil), 404, "", "video_not_found")
	wantError(t, "DELETE again", e.send(t, "a", "DELETE", "/v1/videos/"+v.ID, "", nil), 404, "", "video_not_found")
	wantError(t, "GET /v1/jobs of a deleted video", e.send(t, "a", "GET", "/v1/jobs/"+v.ID, "", nil), 404, "", "job_not_found")
	if resp, err := http.Get(link); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET of the link given before the delete = %v, %v; want 404 (the file is gone)", resp, err)
	} else {
		resp.Body.Close()
	}
	// No change feed runs here: the delete settled the video (a capture
	// of its 3 credits), and settling again changes nothing.
	a, err := e.store.Account(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	sfxJob, _ := e.store.Get(ctx, sfx.ID)
	if a.Balance != (1000-3)*credits.Credit || a.Held != sfxJob.Price {
		t.Errorf("account a = %+v; want balance 997 (the video charged once) and only the sfx job held", a)
	}
}

func TestVideoFailedAndCancelled(t *testing.T) {
	e := vtServer(t, nil)
	ctx := context.Background()
	create := func(prompt string) video {
		ct, body := form(t, "model", "synthetic-video", "prompt", prompt, "seconds", "2", "size", "320x240")
		return decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct, body))
	}
	failed, cancelled := create("fail: on purpose"), create("a ball")
	if err := e.worker.Process(ctx, failed.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.send(t, "a", "POST", "/v1/jobs/"+cancelled.ID+"/cancel", "", nil); r.status != 200 {
		t.Fatalf("cancel = %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		v        video
		code     string
		progress int
	}{{failed, jobs.CodeUpstream, 50}, {cancelled, jobs.CodeCancelled, 0}} {
		g := decodeVideo(t, e.send(t, "a", "GET", "/v1/videos/"+c.v.ID, "", nil))
		if g.Status != "failed" || g.Error == nil || g.Error.Code != c.code || g.Error.Message == "" || g.Progress != c.progress ||
			g.CompletedAt == nil || g.ExpiresAt != nil || g.ServedBy != "" {
			t.Errorf("GET failed video = %s; want failed with error code %s, progress %d, completed_at set, no expires_at", e.send(t, "a", "GET", "/v1/videos/"+c.v.ID, "", nil).body, c.code, c.progress)
		}
		wantError(t, "content of a failed video", e.send(t, "a", "GET", "/v1/videos/"+c.v.ID+"/content", "", nil), 404, "", "video_failed")
		if r := e.send(t, "a", "DELETE", "/v1/videos/"+c.v.ID, "", nil); r.status != 200 {
			t.Errorf("DELETE failed video = %d %s; want 200", r.status, r.body)
		}
	}
	// Nothing charged, nothing held.
	if a, err := e.store.Account(ctx, "a"); err != nil || a.Balance != 1000*credits.Credit || a.Held != 0 {
		t.Errorf("account a = %+v, %v; want 1000, nothing held", a, err)
	}
}

func TestVideoExpired(t *testing.T) {
	e := vtServer(t, nil)
	ct, body := form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "1", "size", "320x240")
	v := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct, body))
	if err := e.worker.Process(context.Background(), v.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.add(vtRetention)
	wantError(t, "content past expires_at", e.send(t, "a", "GET", "/v1/videos/"+v.ID+"/content", "", nil), 404, "", "video_expired")
}

// videoPage is a GET /v1/videos answer.
type videoPage struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// listVideos pages through GET /v1/videos?query with limit as a client
// does (after = last_id while has_more) and returns the ids and the pages.
func (e *vtEnv) listVideos(t *testing.T, account string, query url.Values) (ids []string, pages int) {
	t.Helper()
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for pages = 1; pages < 100; pages++ {
		r := e.send(t, account, "GET", "/v1/videos?"+q.Encode(), "", nil)
		var p videoPage
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 || p.Object != "list" || p.Data == nil {
			t.Fatalf("GET /v1/videos?%s = %d %s; want a list", q.Encode(), r.status, r.body)
		}
		var first, last string
		for i, d := range p.Data {
			v := decodeVideo(t, vtResp{status: 200, body: d})
			ids = append(ids, v.ID)
			if i == 0 {
				first = v.ID
			}
			last = v.ID
		}
		if (first == "") != (p.FirstID == nil) || (p.FirstID != nil && *p.FirstID != first) ||
			(last != "" && (p.LastID == nil || *p.LastID != last)) {
			t.Fatalf("page %s: first_id/last_id do not name its first and last video", r.body)
		}
		if !p.HasMore {
			return ids, pages
		}
		if p.LastID == nil {
			t.Fatalf("page %s has more but no last_id", r.body)
		}
		q.Set("after", *p.LastID)
	}
	t.Fatalf("GET /v1/videos?%s: more than 100 pages", query.Encode())
	return nil, 0
}

func TestListVideos(t *testing.T) {
	e := vtServer(t, nil)
	var mine []string
	create := func(account, typ string) string {
		e.clock.add(time.Second)
		if typ == "sfx" {
			r := e.send(t, account, "POST", "/v1/jobs", "application/json", []byte(`{"type":"sfx","model":"synthetic-sfx","prompt":"rain","duration":1}`))
			var j struct{ ID string }
			json.Unmarshal(r.body, &j)
			return j.ID
		}
		ct, body := form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "1", "size", "320x240")
		return decodeVideo(t, e.send(t, account, "POST", "/v1/videos", ct, body)).ID
	}
	if ids, _ := e.listVideos(t, "a", nil); len(ids) != 0 {
		t.Errorf("no videos: listed %v", ids)
	}
	r := e.send(t, "a", "GET", "/v1/videos", "", nil)
	if !bytes.Contains(r.body, []byte(`"first_id":null`)) || !bytes.Contains(r.body, []byte(`"last_id":null`)) || !bytes.Contains(r.body, []byte(`"has_more":false`)) {
		t.Errorf("empty list = %s; want first_id and last_id null, has_more false", r.body)
	}
	for i := range 7 {
		if i == 2 || i == 5 {
			create("a", "sfx")
		}
		mine = append(mine, create("a", "video"))
		create("b", "video")
	}
	// A video made through the jobs API is a video too.
	e.clock.add(time.Second)
	r = e.send(t, "a", "POST", "/v1/jobs", "application/json", []byte(`{"type":"video","model":"synthetic-video","prompt":"waves","duration":1}`))
	var viaJobs struct{ ID string }
	json.Unmarshal(r.body, &viaJobs)
	mine = append(mine, viaJobs.ID)
	// A deleted one is listed no more.
	if err := e.worker.Process(context.Background(), mine[3]); err != nil {
		t.Fatal(err)
	}
	if r := e.send(t, "a", "DELETE", "/v1/videos/"+mine[3], "", nil); r.status != 200 {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	deleted := mine[3]
	mine = slices.Delete(mine, 3, 4)
	newest := slices.Clone(mine)
	slices.Reverse(newest)

	for _, tt := range []struct {
		query url.Values
		want  []string
		pages int
	}{
		{nil, newest, 1},
		{url.Values{"limit": {"3"}}, newest, 3},
		{url.Values{"limit": {"1"}, "order": {"desc"}}, newest, 7},
		{url.Values{"limit": {"2"}, "order": {"asc"}}, mine, 4},
		{url.Values{"limit": {"100"}, "order": {"asc"}}, mine, 1},
		{url.Values{"after": {mine[4]}}, []string{mine[3], mine[2], mine[1], mine[0]}, 1},
		{url.Values{"after": {mine[1]}, "order": {"asc"}, "limit": {"2"}}, mine[2:], 3},
		// after a deleted video: it keeps its place.
		{url.Values{"after": {deleted}, "limit": {"2"}}, []string{mine[2], mine[1], mine[0]}, 2},
		{url.Values{"after": {deleted}, "order": {"asc"}}, mine[3:], 1},
	} {
		ids, pages := e.listVideos(t, "a", tt.query)
		if !slices.Equal(ids, tt.want) || pages != tt.pages {
			t.Errorf("GET /v1/videos?%s paged = %v in %d pages; want %v in %d", tt.query.Encode(), ids, pages, tt.want, tt.pages)
		}
	}
	bTheirs, _ := e.listVideos(t, "b", nil)
	for _, tt := range []struct{ query, param string }{
		{"after=" + bTheirs[0], "after"},
		{"after=job_video_nope", "after"},
		{"after=", "after"},
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=ten", "limit"},
		{"limit=1&limit=2", "limit"},
		{"order=newest", "order"},
	} {
		wantError(t, "GET /v1/videos?"+tt.query, e.send(t, "a", "GET", "/v1/videos?"+tt.query, "", nil), 400, tt.param, "invalid_value")
	}
}

// oneAtATime is a store whose List examines one index entry per call, as
// a store whose page stops at its scan bound does (jobs.Store.List): a
// page of a filtered listing may then be short, or empty with a cursor.
type oneAtATime struct{ jobs.Store }

func (s oneAtATime) List(ctx context.Context, q jobs.ListQuery) ([]*jobs.Job, string, error) {
	all := q
	all.Type, all.Limit = "", 1
	js, next, err := s.Store.List(ctx, all)
	if err != nil || len(js) == 0 {
		return nil, "", err
	}
	c := jobs.CursorOf(js[0]).Encode()
	if next == "" {
		c = ""
	}
	if q.Match(js[0]) {
		return js, c, nil
	}
	return nil, c, nil
}

func TestListVideosScanBound(t *testing.T) {
	e := vtServer(t, func(s jobs.Store) jobs.Store { return oneAtATime{s} })
	var videos []string
	for i := range 3 {
		for range 2 + 6*i { // runs of sfx jobs longer than a page's rounds
			e.clock.add(time.Second)
			if r := e.send(t, "a", "POST", "/v1/jobs", "application/json", []byte(`{"type":"sfx","model":"synthetic-sfx","prompt":"rain","duration":1}`)); r.status != 200 {
				t.Fatalf("POST /v1/jobs = %d %s", r.status, r.body)
			}
		}
		e.clock.add(time.Second)
		ct, body := form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "1", "size", "320x240")
		videos = append(videos, decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct, body)).ID)
	}
	slices.Reverse(videos)
	ids, pages := e.listVideos(t, "a", url.Values{"limit": {"2"}})
	if !slices.Equal(ids, videos) || pages < 3 {
		t.Errorf("paged through a store with a scan bound: %v in %d pages; want %v, pages that stop short", ids, pages, videos)
	}
}

// FuzzDecodeCreateVideo checks that any body, multipart or JSON, either
// decodes or yields a 400 *apierr.Error, never a panic or another error.
func FuzzDecodeCreateVideo(f *testing.F) {
	const boundary = "openai-x1"
	mp := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na ball\r\n--" + boundary + "--\r\n"
	for _, s := range []struct {
		multipart bool
		body      string
	}{
		{false, `{"model":"synthetic-video","prompt":"p","seconds":"4","size":"720x1280"}`},
		{false, `{"seconds":4.0}`}, {false, `{}`}, {false, `[`}, {false, `{"input_reference":{}}`},
		{true, mp}, {true, "--" + boundary + "\r\n"}, {true, ""},
	} {
		f.Add(s.multipart, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, isMultipart bool, body []byte) {
		ct := "application/json"
		if isMultipart {
			ct = "multipart/form-data; boundary=" + boundary
		}
		v, err := decodeCreateVideo(ct, body)
		if err == nil {
			if v == nil {
				t.Fatal("nil request without error")
			}
			if _, err := v.jobRequest(); err != nil && apierr.As(err) == nil {
				t.Fatalf("jobRequest of %q = %v; want nil or a 400", body, err)
			}
			return
		}
		if e := apierr.As(err); e == nil || e.Kind != apierr.Invalid {
			t.Fatalf("decodeCreateVideo(%q) = %v; want a 400 *apierr.Error", body, err)
		}
	})
}

// getCounter is a store that counts its Get calls.
type getCounter struct {
	jobs.Store
	gets *atomic.Int32
}

func (s getCounter) Get(ctx context.Context, id string) (*jobs.Job, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// TestDeleteVideoReadsOnce: DELETE /v1/videos/{id} reads the job once
// (the type check and the delete share the read).
func TestDeleteVideoReadsOnce(t *testing.T) {
	var gets atomic.Int32
	e := vtServer(t, func(s jobs.Store) jobs.Store { return getCounter{s, &gets} })
	ct, body := form(t, "model", "synthetic-video", "prompt", "a ball", "seconds", "1", "size", "320x240")
	v := decodeVideo(t, e.send(t, "a", "POST", "/v1/videos", ct, body))
	if err := e.worker.Process(context.Background(), v.ID); err != nil {
		t.Fatal(err)
	}
	gets.Store(0)
	if r := e.send(t, "a", "DELETE", "/v1/videos/"+v.ID, "", nil); r.status != 200 {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("DELETE read the job %d times; want 1", n)
	}
}
