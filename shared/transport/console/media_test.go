package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig of the jpeg answers
	_ "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/providers/synthetic"
)

// balance is account's available credits in the live server's store.
func (l *live) balance(t *testing.T, account string) credits.Amount {
	t.Helper()
	a, err := l.store.Account(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return a.Available
}

// playground posts body to the playground's form at path, as account dev
// unless body names another, and checks the answer's status and the
// credits dev spent; an error's body must be the API's envelope saying
// msg. It returns the answer, and whether it is a 200 for the caller to
// check further.
func (l *live) playground(t *testing.T, c *http.Client, csrf, path string, body map[string]any, status int, cost credits.Amount, msg string) (*http.Response, string, bool) {
	t.Helper()
	if _, ok := body["account"]; !ok {
		body["account"] = "dev"
	}
	before := l.balance(t, "dev")
	resp, got := postJSON(t, c, l.srv.URL+path, csrf, body)
	if resp.StatusCode != status {
		t.Fatalf("status %d %.200s; want %d", resp.StatusCode, got, status)
	}
	if spent := before - l.balance(t, "dev"); spent != cost {
		t.Errorf("dev spent %s credits; want %s", spent, cost)
	}
	if status != 200 {
		var e struct{ Error struct{ Message string } }
		if err := json.Unmarshal([]byte(got), &e); err != nil || !strings.Contains(e.Error.Message, msg) {
			t.Errorf("error %s; want the API's envelope saying %q", got, msg)
		}
		return resp, got, false
	}
	return resp, got, true
}

// TestPlaygroundImage runs the image form's requests through the API's
// images handler: images of the size and format asked for, as bytes or
// our links, charged per image to the account picked; every refusal is
// the API's error envelope with its status, and costs nothing.
func TestPlaygroundImage(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	tests := []struct {
		name   string
		body   map[string]any
		status int
		images int            // data entries
		size   string         // WxH of each image (b64_json)
		format string         // the decoded images' format
		url    bool           // answered as links
		cost   credits.Amount // taken from dev
		msg    string         // in the error message
	}{
		{name: "two PNGs as bytes", body: map[string]any{"model": "synthetic-image", "prompt": "<b>a cat</b>", "n": 2, "size": "256x256", "output_format": "png", "response_format": "b64_json"},
			status: 200, images: 2, size: "256x256", format: "png", cost: 2 * credits.Credit},
		{name: "a JPEG of the model's default size", body: map[string]any{"model": "synthetic-image", "prompt": "a dog", "output_format": "jpeg"},
			status: 200, images: 1, size: "1024x1024", format: "jpeg", cost: credits.Credit},
		{name: "links to our storage", body: map[string]any{"model": "synthetic-image", "prompt": "a bird", "size": "512x512", "response_format": "url"},
			status: 200, images: 1, url: true, cost: credits.Credit},
		{name: "a size the model does not make", body: map[string]any{"model": "synthetic-image", "prompt": "x", "size": "300x300"},
			status: 400, msg: "size must be one of"},
		{name: "more images than the model makes", body: map[string]any{"model": "synthetic-image", "prompt": "x", "n": 11},
			status: 400, msg: "n must be from 1 to 10"},
		{name: "a refused prompt", body: map[string]any{"model": "synthetic-image", "prompt": synthetic.FailPrefix + "policy"},
			status: 400, msg: "refused this prompt"},
		{name: "a failing vendor", body: map[string]any{"model": "synthetic-image", "prompt": synthetic.FailPrefix + "503"},
			status: 503, msg: "synthetic"},
		{name: "a speech model", body: map[string]any{"model": "synthetic-speech", "prompt": "x"},
			status: 400, msg: "not images"},
		{name: "an unknown field", body: map[string]any{"model": "synthetic-image", "prompt": "x", "style": "vivid"},
			status: 400, msg: "not valid JSON of the right shape"},
		{name: "an account that does not exist", body: map[string]any{"account": "ghost", "model": "synthetic-image", "prompt": "x"},
			status: 404, msg: "no account ghost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, body, ok := l.playground(t, c, csrf, "/console/playground/image", tt.body, tt.status, tt.cost, tt.msg)
			if !ok {
				return
			}
			var r struct {
				Model        string
				OutputFormat string `json:"output_format"`
				Data         []struct {
					B64JSON string `json:"b64_json"`
					URL     string `json:"url"`
				}
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Data) != tt.images {
				t.Fatalf("answer %.200s (%v); want %d images", body, err, tt.images)
			}
			for _, d := range r.Data {
				if tt.url {
					if !strings.HasPrefix(d.URL, "https://media.example/images/dev/") || d.B64JSON != "" {
						t.Errorf("url answer %+v; want our storage's link only", d)
					}
					continue
				}
				raw, err := base64.StdEncoding.DecodeString(d.B64JSON)
				if err != nil {
					t.Fatal(err)
				}
				cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
				if got := sizeString(cfg); err != nil || got != tt.size || format != tt.format {
					t.Errorf("image %s %s (%v); want %s %s", format, got, err, tt.size, tt.format)
				}
			}
		})
	}
	_, audit := get(t, c, l.srv.URL+"/console/audit")
	if !strings.Contains(audit, "playground.image") {
		t.Error("the audit log lacks the playground's images")
	}
}

func sizeString(c image.Config) string { return fmt.Sprintf("%dx%d", c.Width, c.Height) }

// TestPlaygroundSpeech runs the speech form's requests through the API's
// speech handler: the audio of the format asked for, streamed (no
// length: chunked), charged per character; refusals are the API's error
// envelope and cost nothing.
func TestPlaygroundSpeech(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	csrf := signIn(t, c, l.srv.URL)
	long := strings.Repeat("The quick brown fox. ", 60) // 1,260 characters: 1.26 credits at 1 per 1,000
	tests := []struct {
		name        string
		body        map[string]any
		status      int
		contentType string
		magic       string // the audio's first bytes
		cost        credits.Amount
		msg         string
	}{
		{name: "mp3, the default", body: map[string]any{"model": "synthetic-speech", "input": long, "voice": "nova"},
			status: 200, contentType: "audio/mpeg", cost: 1_260_000},
		{name: "wav", body: map[string]any{"model": "synthetic-speech", "input": "Hello there.", "voice": "alloy", "response_format": "wav"},
			status: 200, contentType: "audio/wav", magic: "RIFF", cost: 12_000}, // 12 characters
		{name: "the model's default voice", body: map[string]any{"model": "synthetic-speech", "input": "Hi."},
			status: 200, contentType: "audio/mpeg", cost: 3000},
		{name: "a voice the model does not have", body: map[string]any{"model": "synthetic-speech", "input": "Hi.", "voice": "nobody"},
			status: 400, msg: "voice"},
		{name: "a format the model does not make", body: map[string]any{"model": "synthetic-speech", "input": "Hi.", "response_format": "flac"},
			status: 400, msg: "does not stream flac"},
		{name: "a refused input", body: map[string]any{"model": "synthetic-speech", "input": synthetic.FailPrefix + "policy"},
			status: 400, msg: "refused this input"},
		{name: "an image model", body: map[string]any{"model": "synthetic-image", "input": "Hi."},
			status: 400, msg: "synthetic-image"},
		{name: "an account that does not exist", body: map[string]any{"account": "ghost", "model": "synthetic-speech", "input": "Hi."},
			status: 404, msg: "no account ghost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, ok := l.playground(t, c, csrf, "/console/playground/speech", tt.body, tt.status, tt.cost, tt.msg)
			if !ok {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("Content-Type %q; want %q", ct, tt.contentType)
			}
			if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
				t.Errorf("length %d, transfer encoding %v; want a chunked stream", resp.ContentLength, resp.TransferEncoding)
			}
			mp3 := len(body) > 2 && (strings.HasPrefix(body, "ID3") || body[0] == 0xFF && body[1]&0xE0 == 0xE0)
			if tt.magic != "" && !strings.HasPrefix(body, tt.magic) || tt.magic == "" && !mp3 {
				t.Errorf("audio begins % x; want %s", body[:min(len(body), 8)], tt.contentType)
			}
		})
	}
	// A failure after the first audio cuts the stream short (no clean
	// end a client could take for the whole), and costs nothing.
	before := l.balance(t, "dev")
	b, _ := json.Marshal(map[string]any{"account": "dev", "model": "synthetic-speech", "input": synthetic.FailPrefix + " " + long})
	req, _ := http.NewRequest("POST", l.srv.URL+"/console/playground/speech", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(got) == 0 || err == nil {
		t.Errorf("a speech failing after its first audio: %d, %d bytes, read error %v; want 200, some audio, then a cut", resp.StatusCode, len(got), err)
	}
	if spent := before - l.balance(t, "dev"); spent != 0 {
		t.Errorf("a speech cut short cost %s credits; want 0", spent)
	}
	_, audit := get(t, c, l.srv.URL+"/console/audit")
	if !strings.Contains(audit, "playground.speech") {
		t.Error("the audit log lacks the playground's speech")
	}
}

// TestPlaygroundMediaForms checks the playground's forms: image and
// speech models in their own forms with what each takes, never in the
// job form or the jobs filter; a console without the services has no
// such forms and refuses their requests.
func TestPlaygroundMediaForms(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	_, page := get(t, c, l.srv.URL+"/console/playground")
	jobForm := between(page, `<form id="job-form"`, "</form>")
	imageForm := between(page, `<form id="image-form"`, "</form>")
	speechForm := between(page, `<form id="speech-form"`, "</form>")
	_, jobsPage := get(t, c, l.srv.URL+"/console/jobs")
	jobFilter := between(jobsPage, `<select id="f-model"`, "</select>")
	tests := []struct {
		name, where, in string
		want, not       []string
	}{
		{"the image form", "image form", imageForm,
			[]string{`<option value="synthetic-image" data-sizes="256x256 512x512 1024x1024 1536x1024 1024x1536 1792x1024 1024x1792" data-size="1024x1024" data-qualities="" data-formats="png jpeg" data-max="10" data-rf="b64_json">`,
				`id="image-n"`, `id="image-size"`, `id="image-quality"`, `id="image-format"`, `id="image-prompt"`, `<option selected>dev</option>`},
			[]string{"synthetic-speech", "synthetic-sfx", "gpt-image"}},
		{"the speech form", "speech form", speechForm,
			[]string{`<option value="synthetic-speech" data-voices="alloy ash ballad coral echo fable nova onyx sage shimmer verse marin cedar" data-voice="alloy" data-formats="mp3 wav pcm" data-max="4096">`,
				`id="speech-voice"`, `id="speech-format"`, `id="speech-input"`},
			[]string{"synthetic-image", "tts-1"}},
		{"the job form", "job form", jobForm,
			[]string{`data-type="sfx"`, `data-type="music"`, `data-type="video"`},
			[]string{"synthetic-image", "synthetic-speech", `data-type="image"`, `data-type="speech"`, "<option>image", "<option>speech"}},
		{"the jobs filter", "jobs page's model filter", jobFilter,
			[]string{"<option>synthetic-sfx</option>"},
			[]string{"synthetic-image", "synthetic-speech", "gpt-image-1.5", "tts-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.in == "" {
				t.Fatalf("no %s", tt.where)
			}
			for _, w := range tt.want {
				if !strings.Contains(tt.in, w) {
					t.Errorf("the %s lacks %s", tt.where, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(tt.in, n) {
					t.Errorf("the %s has %s", tt.where, n)
				}
			}
		})
	}

	// Without the services: no forms, and their requests are 404s.
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	bare, err := New(withSessions(t, Config{Operator: l.op, Verifier: admin.NewVerifier(testToken), Catalog: cat, JobService: l.svc}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(bare)
	defer srv.Close()
	c2 := browser(t)
	csrf := signIn(t, c2, srv.URL)
	_, page = get(t, c2, srv.URL+"/console/playground")
	if strings.Contains(page, `id="image-form"`) || strings.Contains(page, `id="speech-form"`) || !strings.Contains(page, "No image model is configured here") {
		t.Error("a console without the images and speech services offers their forms")
	}
	for path, body := range map[string]map[string]any{
		"image":  {"account": "dev", "model": "synthetic-image", "prompt": "x"},
		"speech": {"account": "dev", "model": "synthetic-speech", "input": "x"},
	} {
		resp, body := postJSON(t, c2, srv.URL+"/console/playground/"+path, csrf, body)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not available on this server") {
			t.Errorf("%s without the service: %d %s; want 404", path, resp.StatusCode, body)
		}
	}
}

// between is the part of s from the first start to the next end after
// it ("" if start is not in s).
func between(s, start, end string) string {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(rest, end)
	return in
}

// TestAccountLedgerLinks checks the account page's ledger: a job's entry
// links to the job's page; an image or speech request's, which has no
// page, names its kind and id.
func TestAccountLedgerLinks(t *testing.T) {
	l := liveServer(t)
	c := browser(t)
	signIn(t, c, l.srv.URL)
	tests := []struct {
		name  string
		entry credits.Entry
		want  string
		not   string
	}{
		{"a job", credits.Entry{ID: "job:job_sfx_1", Kind: credits.Capture, Amount: 2, JobID: "job_sfx_1", JobType: "sfx", Model: "synthetic-sfx"},
			`<a href="/console/jobs/job_sfx_1">job_sfx_1</a>`, ""},
		{"a job settled before types were recorded", credits.Entry{ID: "job:job_music_2", Kind: credits.Capture, Amount: 3, JobID: "job_music_2"},
			`<a href="/console/jobs/job_music_2">job_music_2</a>`, ""},
		{"an image request", credits.Entry{ID: "settle:img_3", Kind: credits.Capture, Amount: 2, JobID: "img_3", JobType: "image", Model: "synthetic-image"},
			`image <code>img_3</code>`, `href="/console/jobs/img_3"`},
		{"a speech request", credits.Entry{ID: "settle:sp_4", Kind: credits.Release, Amount: 1, JobID: "sp_4", JobType: "speech", Model: "synthetic-speech"},
			`speech <code>sp_4</code>`, `href="/console/jobs/sp_4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.entry
			e.Account = "acme"
			l.op.mu.Lock()
			l.op.ledger = []credits.Entry{e}
			l.op.mu.Unlock()
			resp, body := get(t, c, l.srv.URL+"/console/accounts/acme")
			if resp.StatusCode != 200 {
				t.Fatalf("account page: %d", resp.StatusCode)
			}
			if !strings.Contains(body, tt.want) || tt.not != "" && strings.Contains(body, tt.not) {
				t.Errorf("ledger shows %q; want %s, not %s", between(body, "<h2>Ledger", "</table>"), tt.want, tt.not)
			}
		})
	}
}

// TestMediaPickers checks what the image and speech forms offer of a
// catalog model: its own sizes, qualities, formats and voices, mp3 first,
// and "model default" where the model's default voice is a vendor's id.
func TestMediaPickers(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	model := func(id string) *catalog.Model {
		t.Helper()
		m, ok := cat.Model(id)
		if !ok {
			t.Fatalf("no model %s in the catalog", id)
		}
		return m
	}
	tests := []struct {
		name string
		got  playModel
		want playModel
	}{
		{"synthetic-image", imageModel(model("synthetic-image")), playModel{ID: "synthetic-image", Type: "image",
			Sizes: "256x256 512x512 1024x1024 1536x1024 1024x1536 1792x1024 1024x1792", Formats: "png jpeg", DefaultSize: "1024x1024", DefaultRF: "b64_json", MaxImages: 10}},
		{"an image model with qualities and auto", imageModel(model("gpt-image-1.5")), playModel{ID: "gpt-image-1.5", Type: "image",
			Sizes: "1024x1024 1536x1024 1024x1536 auto", Qualities: "low medium high auto", Formats: "png jpeg webp", DefaultSize: "auto", DefaultRF: "b64_json", MaxImages: 10}},
		{"an image model that says nothing of n or answers", imageModel(&catalog.Model{ID: "m", Type: "image", Sizes: []string{"64x64"}, Formats: []string{"png"}}),
			playModel{ID: "m", Type: "image", Sizes: "64x64", Formats: "png", DefaultRF: "b64_json", MaxImages: 1}},
		{"an image model answering links", imageModel(&catalog.Model{ID: "d", Type: "image", Image: catalog.Image{DefaultResponseFormat: "url", MaxImages: 4}}),
			playModel{ID: "d", Type: "image", DefaultRF: "url", MaxImages: 4}},
		{"synthetic-speech", speechModel(model("synthetic-speech")), playModel{ID: "synthetic-speech", Type: "speech",
			Voices: "alloy ash ballad coral echo fable nova onyx sage shimmer verse marin cedar", Voice: "alloy", Formats: "mp3 wav pcm", MaxInput: 4096}},
		{"a default voice that is a vendor's id", speechModel(model("eleven-multilingual-v2")), playModel{ID: "eleven-multilingual-v2", Type: "speech",
			Voices: "alloy ash ballad coral echo fable nova onyx sage shimmer verse marin cedar", Formats: "mp3 wav pcm", MaxInput: 10000}},
		{"mp3 first", speechModel(&catalog.Model{ID: "s", Type: "speech", Formats: []string{"wav", "opus", "mp3"}, Speech: catalog.Speech{Voices: []string{"a"}, MaxInput: 9}}),
			playModel{ID: "s", Type: "speech", Voices: "a", Formats: "mp3 wav opus", MaxInput: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got  %+v\nwant %+v", tt.got, tt.want)
			}
		})
	}
}
