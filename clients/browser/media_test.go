package browser

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// signIn signs the browser in with the operator token.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.open("/console/signin")
	b.do("type the token", chromedp.SendKeys(chromedp.ID("token"), token))
	b.submit("sign in", `form[action="/console/signin"] button`, 200)
}

// options are the values of the select sel's options.
func (b *browser) options(sel string) []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll(`+jsString(sel+" option")+`)].map((o) => o.value)`)
}

// imageShown is what the page shows of the image form's answer.
type imageShown struct {
	Count         int
	Widths        []int // each <img>'s decoded naturalWidth
	Heights       []int
	Srcs          []string // each src, cut to 40 characters
	Status, Error string
}

const imagesJS = `(() => {
  const imgs = [...document.querySelectorAll("#image-gallery img")];
  const err = document.querySelector("#image-status .error");
  return {count: imgs.length, widths: imgs.map((i) => i.naturalWidth), heights: imgs.map((i) => i.naturalHeight),
    srcs: imgs.map((i) => i.src.slice(0, 40)), status: document.getElementById("image-status").textContent, error: err ? err.textContent : ""};
})()`

// generate fills the image form and waits for its answer: every image
// decoded, or an error.
func (b *browser) generate(size, n, rf, prompt string) imageShown {
	b.t.Helper()
	b.choose("#image-size", size)
	b.choose("#image-rf", rf)
	b.do("fill the image form", chromedp.SetValue(chromedp.ID("image-n"), n), chromedp.SetValue(chromedp.ID("image-prompt"), prompt), click("#image-send"))
	b.waitJS("the images or an error", `(() => {
  if (document.getElementById("image-send").disabled) return false;
  if (document.querySelector("#image-status .error")) return true;
  const imgs = [...document.querySelectorAll("#image-gallery img")];
  return imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0);
})()`)
	return eval[imageShown](b, imagesJS)
}

// appendsJS records each piece the page appends to a MediaSource buffer:
// its bytes, and how much audio the buffer held before it (seconds).
const appendsJS = `(() => {
  window.appends = [];
  const append = SourceBuffer.prototype.appendBuffer;
  SourceBuffer.prototype.appendBuffer = function (data) {
    window.appends.push({bytes: data.byteLength, before: this.buffered.length ? this.buffered.end(this.buffered.length - 1) : 0});
    return append.call(this, data);
  };
  return true;
})()`

// appended is one recorded append.
type appended struct {
	Bytes  int
	Before float64
}

// speechShown is what the page shows of the speech form's answer.
type speechShown struct {
	Mode, Src          string // the player's: "stream" (MediaSource) or "blob"; its src's scheme
	Time, Buffered     float64
	Duration           float64
	Ready              int
	Paused             bool
	FirstByteMS        string
	Status, Error      string
	Download, Filename string
}

const speechJS = `(() => {
  const a = document.getElementById("speech-audio");
  const p = document.getElementById("speech-player");
  const dl = document.querySelector("#speech-player a[download]");
  const err = document.querySelector("#speech-status .error");
  return {mode: a ? a.dataset.mode : "", src: a ? a.src.split(":")[0] : "", time: a ? a.currentTime : 0,
    buffered: a && a.buffered.length ? a.buffered.end(a.buffered.length - 1) : 0, duration: a && isFinite(a.duration) ? a.duration : 0,
    ready: a ? a.readyState : 0, paused: a ? a.paused : true, firstByteMS: p.dataset.firstByteMs || "",
    status: document.getElementById("speech-status").textContent, error: err ? err.textContent : "",
    download: dl ? dl.href.split(":")[0] : "", filename: dl ? dl.download : ""};
})()`

// speak fills the speech form and sends it.
func (b *browser) speak(format, voice, input string) {
	b.t.Helper()
	b.choose("#speech-format", format)
	b.choose("#speech-voice", voice)
	b.do("fill the speech form", chromedp.SetValue(chromedp.ID("speech-input"), input), click("#speech-send"))
}

// TestConsolePlaygroundMedia drives the playground's image and speech
// forms in Chromium against genway serve: the image form shows
// synthetic-image's pictures at the size asked for (decoded by the
// browser, as bytes and as our links); the speech form plays
// synthetic-speech's MP3 as it streams (MediaSource, fed piece by piece,
// the clock moving), plays WAV from the whole file, and shows the time to
// the first audio byte; errors show the API's message in the form. Image
// and speech models are nowhere in the job form or the jobs filter, and
// the usage page counts the requests. Screenshots of the two forms are
// the docs' (docs/console-playground-image.png, -speech.png).
func TestConsolePlaygroundMedia(t *testing.T) {
	chromium := findChromium(t)
	srv := startGenway(t, buildGenway(t), pacedCatalog(t))
	b := newBrowser(t, chromium, srv.URL, screenshotDir(t))
	b.signIn(srv.Token)
	b.open("/console/playground")

	// The job form offers job types and their models only.
	mediaModels := []string{"synthetic-image", "synthetic-speech"}
	if types := b.options("#job-type"); !slices.Equal(types, []string{"music", "sfx", "video"}) {
		t.Errorf("the job form's types are %v; want music, sfx, video", types)
	}
	jobModels := b.options("#job-model")
	for _, m := range mediaModels {
		if slices.Contains(jobModels, m) {
			t.Errorf("the job form offers %s (%v)", m, jobModels)
		}
	}
	if !slices.Contains(jobModels, "synthetic-sfx") {
		t.Errorf("the job form's models %v lack synthetic-sfx", jobModels)
	}

	// Images: the pickers offer what the model takes; a link to our
	// storage, a refusal, then two images as bytes, each decoded at the
	// size asked for.
	b.choose("#image-model", "synthetic-image")
	if sizes := b.options("#image-size"); !slices.Equal(sizes, []string{"256x256", "512x512", "1024x1024", "1536x1024", "1024x1536", "1792x1024", "1024x1792"}) {
		t.Errorf("image sizes %v", sizes)
	}
	if f := b.options("#image-format"); !slices.Equal(f, []string{"png", "jpeg"}) {
		t.Errorf("image formats %v", f)
	}
	if !eval[bool](b, `document.getElementById("image-quality-field").hidden`) {
		t.Error("synthetic-image takes no quality, but the form offers one")
	}
	got := b.generate("256x256", "1", "url", "a lighthouse at dusk")
	t.Logf("image as a link: %+v", got)
	if got.Count != 1 || got.Widths[0] != 256 || got.Heights[0] != 256 || !strings.HasPrefix(got.Srcs[0], srv.URL+"/files/") {
		t.Errorf("the url answer shows %+v; want one 256x256 image from %s/files/", got, srv.URL)
	}
	got = b.generate("512x512", "2", "b64_json", "fail:policy")
	if got.Count != 0 || !strings.Contains(got.Error, "refused this prompt") {
		t.Errorf("a refused prompt shows %+v; want the API's message", got)
	}
	got = b.generate("512x512", "2", "b64_json", "A red fox in the snow, <b>watercolour</b>")
	t.Logf("images as bytes: %+v (%s)", got, got.Status)
	if got.Count != 2 || !slices.Equal(got.Widths, []int{512, 512}) || !slices.Equal(got.Heights, []int{512, 512}) || !strings.HasPrefix(got.Srcs[0], "data:image/png;base64,") {
		t.Errorf("the b64_json answer shows %+v; want two 512x512 PNGs", got)
	}
	if !strings.HasPrefix(got.Status, "2 images from synthetic-image, 512x512, png") {
		t.Errorf("image status %q", got.Status)
	}
	b.shotOf("playground-image", `section[aria-labelledby="image-h"]`)

	// Speech: MP3 plays as it streams, through MediaSource: the page
	// appends piece after piece, the buffer holds audio before the last
	// one comes, and the clock moves.
	b.choose("#speech-model", "synthetic-speech")
	if v := b.options("#speech-voice"); len(v) != 13 || v[0] != "alloy" || eval[string](b, `document.getElementById("speech-voice").value`) != "alloy" {
		t.Errorf("voices %v; want synthetic-speech's 13, alloy (its default) chosen", v)
	}
	if f := b.options("#speech-format"); !slices.Equal(f, []string{"mp3", "wav", "pcm"}) {
		t.Errorf("speech formats %v", f)
	}
	eval[bool](b, appendsJS)
	text := strings.Repeat("Hello from the Genway console, speaking as the audio arrives. ", 12)
	b.speak("mp3", "nova", text)
	b.waitJS("the stream to end", `document.getElementById("speech-status").textContent.startsWith("Done") || !!document.querySelector("#speech-status .error")`)
	b.waitJS("the audio's clock to move", `(() => { const a = document.getElementById("speech-audio"); return a && a.currentTime >= 0.5; })()`)
	sp := eval[speechShown](b, speechJS)
	appends := eval[[]appended](b, `window.appends`)
	var before []float64
	for _, a := range appends {
		before = append(before, a.Before)
	}
	t.Logf("speech mp3: %d appends (audio buffered before each, s: %v); %+v", len(appends), before, sp)
	t.Logf("speech mp3: time to the first audio byte, as the page measured it: %s ms", sp.FirstByteMS)
	if sp.Mode != "stream" || sp.Src != "blob" || sp.Error != "" || sp.FirstByteMS == "" {
		t.Errorf("the mp3 did not stream through MediaSource: %+v", sp)
	}
	if len(appends) < 3 || appends[len(appends)-1].Before <= 0 {
		t.Errorf("the page appended %d pieces, with %v s buffered before each; want several, audio buffered before the last", len(appends), before)
	}
	if sp.Buffered < 30 || sp.Time < 0.5 || sp.Filename != "speech.mp3" || sp.Download != "blob" {
		t.Errorf("speech player %+v; want about 50 s buffered, the clock moving, a download of speech.mp3", sp)
	}
	if !strings.Contains(sp.Status, "first audio byte after") || !strings.Contains(sp.Status, "Audio playing after") {
		t.Errorf("speech status %q lacks the time to the first audio byte, or to playing", sp.Status)
	}
	b.shotOf("playground-speech", `section[aria-labelledby="speech-h"]`)

	// WAV: played from the whole file at the end.
	b.speak("wav", "coral", "A short line in WAV.")
	b.waitJS("the wav", `document.getElementById("speech-status").textContent.startsWith("Done") || !!document.querySelector("#speech-status .error")`)
	b.waitJS("the wav to load", `(() => { const a = document.getElementById("speech-audio"); return a && a.readyState >= 1; })()`)
	sp = eval[speechShown](b, speechJS)
	t.Logf("speech wav: %+v", sp)
	if sp.Mode != "blob" || sp.Src != "blob" || sp.Duration < 1 || sp.Filename != "speech.wav" || !strings.Contains(sp.Status, "plays from the whole file") {
		t.Errorf("the wav %+v; want it loaded from a blob, about 1.3 s", sp)
	}
	// A refusal: the API's message, in the form.
	b.speak("mp3", "alloy", "fail:policy")
	b.waitJS("the refusal", `!!document.querySelector("#speech-status .error")`)
	if sp = eval[speechShown](b, speechJS); !strings.Contains(sp.Error, "refused this input") || sp.Mode != "" {
		t.Errorf("a refused input shows %+v; want the API's message and no player", sp)
	}

	// A failure after the first audio: the form says the audio was cut
	// short (the part that came stays in the player).
	b.speak("mp3", "alloy", "fail: "+text)
	b.waitJS("the cut", `!!document.querySelector("#speech-status .error")`)
	if sp = eval[speechShown](b, speechJS); !strings.Contains(sp.Error, "the audio was cut short after") || sp.Mode != "stream" {
		t.Errorf("a speech cut short shows %+v; want the cut said, the player kept", sp)
	}
	t.Logf("speech cut short: %s", sp.Error)

	// The jobs filter has no image or speech model either.
	b.open("/console/jobs")
	filter := b.options("#f-model")
	for _, m := range mediaModels {
		if slices.Contains(filter, m) {
			t.Errorf("the jobs filter offers %s", m)
		}
	}
	if types := b.options("#f-type"); slices.Contains(types, "image") || slices.Contains(types, "speech") {
		t.Errorf("the jobs filter's types %v", types)
	}

	// Usage: each successful request counts once (the two-image request
	// too), with its credits; the refusals cost nothing.
	b.open("/console/usage?kind=image")
	rows := eval[[][]string](b, `[...document.querySelectorAll("#usage-table tbody tr")].map((r) => [...r.cells].map((c) => c.textContent))`)
	t.Logf("usage of images: %v", rows)
	if len(rows) != 1 || rows[0][2] != "image" || rows[0][3] != "synthetic-image" || rows[0][7] != "2" || rows[0][8] != "3" {
		t.Errorf("image usage rows %v; want synthetic-image: 2 requests, 3 credits", rows)
	}
	b.open("/console/usage?kind=speech")
	rows = eval[[][]string](b, `[...document.querySelectorAll("#usage-table tbody tr")].map((r) => [...r.cells].map((c) => c.textContent))`)
	t.Logf("usage of speech: %v", rows)
	if len(rows) != 1 || rows[0][2] != "speech" || rows[0][3] != "synthetic-speech" || rows[0][7] != "2" {
		t.Errorf("speech usage rows %v; want synthetic-speech: 2 requests", rows)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		// The refusals' 400s and the speech cut short, which the browser
		// logs as failed loads.
		if strings.Contains(p, "/console/playground/") && (strings.Contains(p, "status of 400") || strings.Contains(p, "ERR_INCOMPLETE_CHUNKED_ENCODING")) {
			continue
		}
		t.Errorf("page problem: %s", p)
	}
}
