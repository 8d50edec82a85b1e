package browser

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// stepTimeout bounds every browser step and every wait.
const stepTimeout = 30 * time.Second

// pageBudget is the most a page may weigh: its HTML and every script and
// style sheet it loads.
const pageBudget = 100 << 10

// chatPace is the pace, in tokens a second, of the chat model the test
// streams from (synthetic/thinker, paced by the test's catalog): slow
// enough that the answer reaches the page in many pieces, as from a real
// model; its 230-odd words take about 2.3 s.
const chatPace = 100

// pricedModel is a priced copy of synthetic/thinker in the test's
// catalog, so that a request's page shows a charge.
const pricedModel = "synthetic/thinker-priced"

// tinyPNG is a 1x1 PNG, the image the vision model is shown.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// findChromium returns Debian's chromium (or chromium-browser). Without
// it the test skips, except in CI (CI set), where it fails.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed, and CI needs it: scripts/test.sh installs Debian's chromium package")
	}
	t.Skip("chromium is not installed: install Debian's chromium package (scripts/test.sh does, as root) to run the browser tests")
	return ""
}

// buildGenway builds the genway binary from this checkout (in the main
// module, with its own go.mod) into a temporary directory.
func buildGenway(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "genway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/genway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/genway: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is a running `genway serve`.
type server struct {
	URL    string // http://127.0.0.1:port
	Token  string // the operator token
	DevKey string // the dev account's API key
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)/v1`)

// pacedCatalog writes this checkout's catalog (shared/catalog/catalog.json,
// the one genway embeds) with synthetic/thinker paced at chatPace tokens
// a second (the catalog's tokens_per_second), and returns the file's path.
// On loopback an unpaced synthetic answer reaches the page in one read.
func pacedCatalog(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "catalog", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cat map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&cat); err != nil {
		t.Fatalf("catalog.json: %v", err)
	}
	models, _ := cat["models"].([]any)
	paced := false
	for _, m := range models {
		if m, ok := m.(map[string]any); ok && m["id"] == "synthetic/thinker" {
			m["tokens_per_second"] = chatPace
			paced = true
			// A priced copy, unpaced, whose records show a charge.
			priced := map[string]any{}
			for k, v := range m {
				priced[k] = v
			}
			delete(priced, "tokens_per_second")
			priced["id"], priced["upstream"] = pricedModel, "thinker"
			priced["price"] = map[string]any{"credits_per_million_input_tokens": 150, "credits_per_million_cached_input_tokens": 75,
				"credits_per_million_output_tokens": 600}
			models = append(models, priced)
		}
	}
	if !paced {
		t.Fatal("catalog.json has no synthetic/thinker")
	}
	cat["models"] = models
	out, err := json.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startGenway runs `genway serve` on a free loopback port with a fresh
// data directory, the embedded backend, the catalog at catalog, and an
// environment of only what it needs (no AWS_* or vendor keys: every model
// is the synthetic one), and extra variables ("NAME=value").
func startGenway(t *testing.T, bin, catalog string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{Token: "gwop_" + strings.ToLower(rand.Text()+rand.Text()), DevKey: "sk_live_" + strings.ToLower(rand.Text()+rand.Text())}
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(),
		"GENWAY_ADDR=127.0.0.1:0", "GENWAY_BACKEND=embedded", "GENWAY_DATA_DIR=" + filepath.Join(dir, "data"),
		"GENWAY_ADMIN_TOKEN=" + s.Token, "GENWAY_DEV_KEY=" + s.DevKey,
		"GENWAY_USAGE_FLUSH=100ms", // usage shows on the usage page at once
		"GENWAY_CATALOG=" + catalog,
	}
	cmd.Env = append(cmd.Env, extra...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("genway serve's log:\n%s", stderr.String())
		}
	})
	select {
	case s.URL = <-urls:
	case <-time.After(stepTimeout):
		t.Fatalf("genway serve did not start in %v; its log:\n%s", stepTimeout, stderr.String())
	}
	return s
}

// api calls the genway API with key and decodes the answer into v (if
// not nil and the status is 2xx); it returns the status.
func (s *server) api(t *testing.T, method, path, key, body string, v any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// screenshotDir is where the screenshots go: GENWAY_SCREENSHOTS if set,
// else the test's artifact directory (kept with go test -artifacts).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("GENWAY_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser drives one Chromium tab. It uses only stable DevTools protocol
// methods and parameters (none marked experimental), so that a new
// Chromium does not break it: the chromedp actions it calls were checked
// against Chromium 156's /json/protocol, and Click and FullScreenshot,
// which are not, are replaced by click and shot.
type browser struct {
	t      *testing.T
	ctx    context.Context
	base   string
	shots  string
	n      int   // screenshots taken, for their order
	width  int64 // the viewport, as set by viewport
	height int64
	mobile bool

	mu       sync.Mutex
	problems []string // exceptions and console errors of the pages
}

// newBrowser starts headless Chromium at path, answering every
// confirm() with OK and recording the pages' errors.
func newBrowser(t *testing.T, path, base, shots string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		// Loopback only: no name resolves, so nothing leaves the machine.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: shots, width: 1280, height: 900}
	// The first call starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	v, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		t.Fatalf("Browser.getVersion: %v", err)
	}
	t.Logf("browser: %s (DevTools protocol %s, %s), %s", v.Product, v.ProtocolVersion, v.Revision, path)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.logf("dialog %q: accepted", ev.Message)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.problem("exception at %s:%d: %s", d.URL, d.LineNumber, msg)
		}
	}()
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e.Level == cdplog.EntryLevelError {
				b.problem("console %s error: %s (%s)", e.Source, e.Text, e.URL)
			}
		}
	}()
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) logf(format string, args ...any) { b.t.Logf(format, args...) }

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// run runs one action with the step timeout; a failure ends the test.
func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// do runs steps with the step timeout.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	run(b, what, chromedp.Steps(steps...))
}

// open navigates to path and waits for the page to load.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
}

// click is a left mouse click at the centre of the first element sel
// matches (of its first box: a link that wraps has one per line, and the
// centre of them all may fall between its lines), scrolled into view, as
// chromedp.Click does but without its experimental DOM.getContentQuads:
// the page says where the element is.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		type point struct{ X, Y float64 }
		p, err := chromedp.Evaluate[*point](`(() => {
  const e = document.querySelector(`+jsString(sel)+`);
  if (!e) return null;
  e.scrollIntoView({block: "center", inline: "center"});
  const r = e.getClientRects()[0] || e.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
})()`)(ctx, tg)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("click: no element matches %s", sel)
		}
		_, err = chromedp.MouseClickXY(p.X, p.Y)(ctx, tg)
		return err
	})
}

// keyPage is the console page of key: /console/keys/ and its id, "key_"
// and the first 16 hex digits of its SHA-256.
func keyPage(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "/console/keys/key_" + hex.EncodeToString(sum[:])[:16]
}

// submit clicks sel and waits for the page it leads to; it fails the
// test unless that page's status is want.
func (b *browser) submit(what, sel string, want int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), click(sel))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	if resp.Status != want {
		b.t.Fatalf("%s: status %d; want %d", what, resp.Status, want)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise).
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return run(b, "evaluate "+expr, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// waitJS waits until the expression is truthy.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	run(b, "wait for "+what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// text is the text content of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return run(b, "text of "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

// shot saves a full-page PNG of the current page as name.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.shotOf(name, "")
}

// shotOf saves a PNG of the element sel matches, or of the whole page if
// sel is "", as name: the viewport is made as tall as the page for
// Page.captureScreenshot (with none of its experimental parameters, such
// as captureBeyondViewport; an element is cut out with the stable clip),
// then restored. A page whose height follows the viewport's (the chat log
// is at most 60vh) grows with it, so the height is measured again, a few
// times at most.
func (b *browser) shotOf(name, sel string) {
	b.t.Helper()
	height := b.height
	for range 4 {
		h := int64(eval[float64](b, `document.documentElement.scrollHeight`))
		if h <= height {
			break
		}
		height = h
		b.do("page-high viewport", b.emulate(b.width, height))
	}
	eval[bool](b, `(() => { window.scrollTo(0, 0); return true; })()`)
	var clip *page.Viewport
	if sel != "" {
		type rect struct{ X, Y, Width, Height float64 }
		r := eval[*rect](b, `(() => {
  const e = document.querySelector(`+jsString(sel)+`);
  if (!e) return null;
  const r = e.getBoundingClientRect();
  return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height};
})()`)
		if r == nil {
			b.t.Fatalf("screenshot %s: no element matches %s", name, sel)
		}
		const pad = 12
		clip = &page.Viewport{X: max(r.X-pad, 0), Y: max(r.Y-pad, 0), Width: r.Width + 2*pad, Height: r.Height + 2*pad, Scale: 1}
	}
	png := run(b, "screenshot "+name, chromedp.Action[[]byte](func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		r, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, Clip: clip})
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}))
	b.do("restore the viewport", b.emulate(b.width, b.height))
	b.n++
	file := filepath.Join(b.shots, fmt.Sprintf("%02d-%s.png", b.n, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// viewport sets the tab's width (375: a phone, emulated as mobile).
func (b *browser) viewport(width int64) {
	b.t.Helper()
	b.width, b.height, b.mobile = width, 900, width < 600
	if b.mobile {
		b.height = 812
	}
	b.do("viewport", b.emulate(b.width, b.height))
}

// emulate sets the viewport to width x height at scale 1, mobile if the
// last viewport call said so (Emulation.setDeviceMetricsOverride and
// setTouchEmulationEnabled, stable parameters only).
func (b *browser) emulate(width, height int64) chromedp.Action[chromedp.Void] {
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if b.mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	return chromedp.EmulateViewport(width, height, opts...)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// choose selects value in the select sel and fires its change event, as
// a person picking it does.
func (b *browser) choose(sel, value string) {
	b.t.Helper()
	ok := eval[bool](b, `(() => { const s = document.querySelector(`+jsString(sel)+`); s.value = `+jsString(value)+
		`; s.dispatchEvent(new Event("change", {bubbles: true})); return s.value === `+jsString(value)+`; })()`)
	if !ok {
		b.t.Fatalf("%s has no option %q", sel, value)
	}
}

// metrics is what the Performance API says of a page load.
type metrics struct {
	HTML  int64    `json:"html"`  // bytes of the document
	Files []int64  `json:"files"` // bytes of each script and style sheet
	Names []string `json:"names"`
	FCP   float64  `json:"fcp"` // first contentful paint, ms from navigation start; 0 if none
	DCL   float64  `json:"dcl"` // DOMContentLoaded's end, ms
}

const measureJS = `(async () => {
  const nav = performance.getEntriesByType("navigation")[0];
  let fcp = performance.getEntriesByName("first-contentful-paint")[0];
  for (let i = 0; !fcp && i < 50; i++) {
    await new Promise((r) => setTimeout(r, 20));
    fcp = performance.getEntriesByName("first-contentful-paint")[0];
  }
  const files = performance.getEntriesByType("resource").filter((r) => ["script", "link", "css"].includes(r.initiatorType));
  return { html: nav.decodedBodySize, files: files.map((r) => r.decodedBodySize), names: files.map((r) => r.name),
    fcp: fcp ? fcp.startTime : 0, dcl: nav.domContentLoadedEventEnd };
})()`

// weight is the page's bytes: its HTML and its scripts and styles.
func (m metrics) weight() int64 {
	w := m.HTML
	for _, f := range m.Files {
		w += f
	}
	return w
}

// TestConsole walks the console in Chromium as an operator does: sign
// in; make an account and a key, read it once, call the API with it;
// grant credits and see the balance; revoke the key and see the API
// refuse it; run jobs from the playground and see them complete with a
// player; stream a chat and see its text grow; then the jobs list
// updating itself, a job's page, usage and the audit log; and finally
// every page at 1280 and 375 px wide, weighed and timed.
func TestConsole(t *testing.T) {
	chromium := findChromium(t)
	srv := startGenway(t, buildGenway(t), pacedCatalog(t))
	b := newBrowser(t, chromium, srv.URL, screenshotDir(t))

	// Sign in.
	b.open("/console/signin")
	b.shot("signin")
	b.do("type the token", chromedp.SendKeys(chromedp.ID("token"), srv.Token))
	b.submit("sign in", `form[action="/console/signin"] button`, 200)
	if loc := run(b, "location", chromedp.Location()); loc != srv.URL+"/console/models" {
		t.Fatalf("after sign-in at %s; want the models page", loc)
	}
	if got := b.text("h1"); got != "Models" {
		t.Fatalf("after sign-in: h1 %q", got)
	}
	b.shot("models")

	// An account, and a key for it, shown once.
	b.open("/console/accounts")
	b.do("name the account", chromedp.SendKeys(chromedp.ID("new-id"), "acme"))
	b.submit("create account", `form[action="/console/accounts"] button`, 200)
	if got := b.text("h1"); got != "Account acme" {
		t.Fatalf("after creating the account: h1 %q", got)
	}
	b.open("/console/keys?account=acme")
	b.submit("create key", `form[action="/console/keys"] button`, 200)
	key := strings.TrimSpace(b.text("#new-key"))
	if !strings.HasPrefix(key, "sk_live_") || !strings.Contains(b.text(".newkey"), "shown this once") {
		t.Fatalf("new key %q, without the shown-once warning", key)
	}
	b.shot("key-created")
	b.open("/console/keys?account=acme")
	if eval[bool](b, `document.documentElement.outerHTML.includes(`+jsString(key)+`)`) {
		t.Fatal("the key is shown again")
	}

	// The API takes it.
	if st := srv.api(t, "GET", "/v1/models", key, "", nil); st != 200 {
		t.Fatalf("GET /v1/models with the new key: %d", st)
	}

	// A key with controls from the key form: a name, model patterns, an
	// expiry and a credit limit; the list shows them with the spend, and
	// the key's page changes them without re-issuing it.
	b.open("/console/keys?account=acme")
	b.do("fill the key form",
		chromedp.SendKeys(chromedp.ID("key-name"), "intern's laptop"),
		chromedp.SendKeys(chromedp.ID("key-models"), "synthetic/*, synthetic-sfx"),
		chromedp.SendKeys(chromedp.ID("key-expires"), "30d"),
		chromedp.SendKeys(chromedp.ID("key-limit"), "10"),
	)
	b.shot("key-form")
	b.submit("create key with controls", `form[action="/console/keys"] button`, 200)
	scoped := strings.TrimSpace(b.text("#new-key"))
	b.open("/console/keys?account=acme")
	if row := b.text("tbody"); !strings.Contains(row, "intern's laptop") || !strings.Contains(row, "synthetic/*, synthetic-sfx") || !strings.Contains(row, "0 / 10") {
		t.Fatalf("keys table lacks the new key's controls: %q", row)
	}
	b.shot("keys-controls")
	var models struct{ Data []struct{ ID string } }
	if st := srv.api(t, "GET", "/v1/models", scoped, "", &models); st != 200 || len(models.Data) == 0 {
		t.Fatalf("GET /v1/models with the scoped key: %d, %d models", st, len(models.Data))
	}
	for _, m := range models.Data {
		if !strings.HasPrefix(m.ID, "synthetic/") && m.ID != "synthetic-sfx" {
			t.Errorf("GET /v1/models with a synthetic/*, synthetic-sfx key lists %s", m.ID)
		}
	}
	b.open(keyPage(scoped))
	b.do("raise the limit", chromedp.SetValue(chromedp.ID("key-limit"), "25"))
	b.submit("save the key's controls", `form[action^="/console/keys/key_"] button`, 200)
	if got := b.text("#limit"); !strings.Contains(got, "25") {
		t.Fatalf("the key's limit after saving: %q; want 25", got)
	}
	b.shot("key-edit")

	var cr struct{ Balance int64 }
	if st := srv.api(t, "GET", "/v1/credits", key, "", &cr); st != 200 || cr.Balance != 0 {
		t.Fatalf("credits of the new key: %d, %+v; want 0", st, cr)
	}

	// Credits: grant, see the balance on the page and through the API.
	b.open("/console/accounts/acme")
	b.do("fill the grant",
		chromedp.SendKeys(chromedp.ID("amount"), "250"),
		chromedp.SendKeys(chromedp.ID("note"), "browser test <b>grant</b>"),
	)
	b.submit("grant", `form[action="/console/accounts/acme/grant"] button`, 200)
	if got := strings.TrimSpace(b.text("#balance")); got != "250" {
		t.Fatalf("balance after the grant: %q; want 250", got)
	}
	b.shot("account-granted")
	if srv.api(t, "GET", "/v1/credits", key, "", &cr); cr.Balance != 250 {
		t.Fatalf("API balance after the grant: %d; want 250", cr.Balance)
	}

	// Revoke (confirming the dialog): the API refuses the key within
	// the authenticator's cache time.
	b.open("/console/keys?account=acme")
	b.submit("revoke", `form[action="`+keyPage(key)+`/revoke"] button`, 200)
	if !strings.Contains(b.text("tbody"), "revoked") {
		t.Fatal("the key is not shown revoked")
	}
	b.shot("key-revoked")
	deadline := time.Now().Add(20 * time.Second)
	for srv.api(t, "GET", "/v1/models", key, "", nil) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the API still takes the revoked key after 20 s")
		}
		time.Sleep(250 * time.Millisecond)
	}

	// The playground's chat: a vision and reasoning model, an image, a
	// long message; the answer must grow on the page as it streams.
	img := filepath.Join(t.TempDir(), "pixel.png")
	raw, _ := base64.StdEncoding.DecodeString(tinyPNG)
	if err := os.WriteFile(img, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.open("/console/playground")
	if got := eval[string](b, `document.getElementById("chat-account").value`); got != "dev" {
		t.Errorf("the playground bills %q by default; want dev", got)
	}
	b.choose("#chat-model", "synthetic/thinker")
	b.do("vision and reasoning options",
		chromedp.WaitVisible(chromedp.ID("chat-effort")),
		chromedp.WaitVisible(chromedp.ID("chat-image")),
		chromedp.SetValue(chromedp.ID("chat-effort"), "high"),
		chromedp.SetUploadFiles(chromedp.ID("chat-image"), []string{img}),
	)
	words := make([]string, 200)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	msg := "<i>hello</i> " + strings.Join(words, " ")
	eval[bool](b, `(() => {
  window.lens = [];
  const log = document.getElementById("chat-log");
  new MutationObserver(() => {
    const a = log.querySelector(".msg.assistant:last-child .answer");
    if (a) window.lens.push(a.textContent.length);
  }).observe(log, { subtree: true, childList: true, characterData: true });
  return true;
})()`)
	b.do("write the message", chromedp.SetValue(chromedp.ID("chat-input"), msg), chromedp.Focus(chromedp.ID("chat-input")))
	// The model streams at chatPace tokens a second (the test's catalog
	// paces it), as a real one does, so the answer arrives in pieces the
	// page must show as they come. Ctrl+Enter sends, from the keyboard.
	b.do("send", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitJS("the chat to finish", `document.getElementById("chat-status").textContent.startsWith("Done")`)
	answer := b.text(".msg.assistant .answer")
	if !strings.HasPrefix(answer, "You said: <i>hello</i> word0 word1") || !strings.Contains(answer, "word199 Image 1 is image/png, 1x1 pixels") {
		t.Errorf("answer = %.120q…", answer)
	}
	if eval[int](b, `document.querySelectorAll("#chat-log i").length`) != 0 {
		t.Error("the model's text was rendered as HTML")
	}
	if r := b.text(".msg.assistant .reasoning"); !strings.Contains(r, "The conversation has 1 messages.") {
		t.Errorf("reasoning = %q", r)
	}
	lens := eval[[]int](b, `window.lens`)
	var growth []int
	for _, n := range lens {
		if n > 0 && n < len(answer) && (len(growth) == 0 || n > growth[len(growth)-1]) {
			growth = append(growth, n)
		}
	}
	t.Logf("chat: the answer (%d characters) grew through %d partial lengths on the page: %v", len(answer), len(growth), growth)
	if len(growth) < 3 {
		t.Errorf("the answer did not grow as it streamed: partial lengths %v", growth)
	}
	b.shot("playground-chat")

	// The playground's job form: an sfx job completes and plays.
	b.choose("#job-type", "sfx")
	b.do("fill the job",
		chromedp.SetValue(chromedp.ID("job-duration"), "2"),
		chromedp.SendKeys(chromedp.ID("job-prompt"), "<b>door</b> creak"),
		click("#job-send"),
		chromedp.WaitVisible(chromedp.CSS("#job-player audio")),
	)
	b.waitJS("the audio to load", `document.querySelector("#job-player audio").readyState >= 1`)
	if st := b.text("#job-status"); !strings.Contains(st, "completed") {
		t.Errorf("job status %q", st)
	}
	sfxID := b.text("#job-status code")
	dur := eval[float64](b, `document.querySelector("#job-player audio").duration`)
	t.Logf("sfx job %s: audio of %.2f s", sfxID, dur)
	if dur < 1.5 || dur > 3 {
		t.Errorf("the audio lasts %.2f s; want about 2", dur)
	}
	b.shot("playground-job")
	// And a video job, which must play: the player loads the H.264 file,
	// plays it (muted, as a page may without a gesture), decodes frames of
	// the clip's size, and its clock advances; a frame drawn on a canvas
	// is the scene (many colours, some bright), not a black box.
	b.choose("#job-type", "video")
	b.do("fill the video job",
		chromedp.SetValue(chromedp.ID("job-duration"), "2"),
		chromedp.SetValue(chromedp.ID("job-prompt"), "moving shapes"),
		click("#job-send"),
		chromedp.WaitVisible(chromedp.CSS("#job-player video")),
	)
	videoID := b.text("#job-status code")
	const video = `document.querySelector("#job-player video")`
	b.waitJS("the video's metadata, or an error", video+`.readyState >= 1 || `+video+`.error !== null`)
	if e := eval[string](b, `(() => { const e = `+video+`.error; return e ? e.code + " " + e.message : ""; })()`); e != "" {
		t.Fatalf("video job %s: the player cannot load the video: %s", videoID, e)
	}
	// play() rejects (and eval fails the test) if the video cannot play.
	eval[bool](b, `(async () => { const v = `+video+`; v.muted = true; await v.play(); return true; })()`)
	b.waitJS("a decoded frame", `(() => { const v = `+video+`; return v.readyState >= 2 && v.videoWidth > 0; })()`)
	b.waitJS("the video's clock to advance", video+`.currentTime >= 0.5`)
	type frame struct {
		Width, Height   int
		Duration, Time  float64
		Colours, Bright int
		Error           string
	}
	f := eval[frame](b, `(() => {
  const v = `+video+`;
  const c = document.createElement("canvas");
  c.width = v.videoWidth;
  c.height = v.videoHeight;
  const g = c.getContext("2d");
  g.drawImage(v, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const colours = new Set();
  let bright = 0;
  for (let i = 0; i < d.length; i += 4 * 7) {
    colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    if (Math.max(d[i], d[i + 1], d[i + 2]) >= 128) bright++;
  }
  return {width: v.videoWidth, height: v.videoHeight, duration: v.duration, time: v.currentTime,
    colours: colours.size, bright, error: v.error ? v.error.message : ""};
})()`)
	t.Logf("video job %s: %dx%d, %.2f s, playing at %.2f s; a frame has %d colours, %d bright samples", videoID,
		f.Width, f.Height, f.Duration, f.Time, f.Colours, f.Bright)
	if f.Width != 640 || f.Height != 360 || f.Duration < 1.9 || f.Duration > 2.1 || f.Error != "" {
		t.Errorf("the video is %dx%d, %.2f s, error %q; want 640x360 (the default size), 2 s, none", f.Width, f.Height, f.Duration, f.Error)
	}
	if f.Colours < 10 || f.Bright == 0 {
		t.Errorf("a frame of the video has %d colours and %d bright samples: not the scene", f.Colours, f.Bright)
	}
	b.shot("playground-video")
	// Opened on its own (where a download link leads), the file is a
	// media document under the headers every file link has (nosniff,
	// Content-Security-Policy: sandbox; default-src 'none'): it still
	// plays.
	// (The sandbox runs no page script, so this polls from here, not
	// with waitJS's in-page poll.)
	src := eval[string](b, video+`.currentSrc`)
	b.do("open the video's file", chromedp.Navigate(src))
	eval[bool](b, `(async () => { const v = document.querySelector("video"); v.muted = true; await v.play(); return true; })()`)
	for i := 0; !eval[bool](b, `document.querySelector("video").currentTime >= 0.5`); i++ {
		if i == 100 {
			t.Fatalf("the video opened from its link %s does not play", src)
		}
		b.do("wait", chromedp.Sleep(100*time.Millisecond))
	}
	b.shot("video-file")

	// The jobs list updates in place: a job made through the API shows up
	// without a reload.
	b.open("/console/jobs")
	for _, id := range []string{sfxID, videoID} {
		if !strings.Contains(b.text("#jobs-table tbody"), id) {
			t.Errorf("the jobs list lacks %s", id)
		}
	}
	eval[bool](b, `window.notReloaded = true`)
	var made struct{ ID string }
	if st := srv.api(t, "POST", "/v1/jobs", srv.DevKey, `{"type":"music","model":"synthetic-music","prompt":"live <u>update</u>","duration":1}`, &made); st != 200 && st != 201 && st != 202 {
		t.Fatalf("POST /v1/jobs: %d", st)
	}
	b.waitJS("the new job in the list", `document.querySelector("#jobs-table tbody").textContent.includes(`+jsString(made.ID)+`)`)
	if !eval[bool](b, `window.notReloaded === true`) || eval[int](b, `document.querySelectorAll("#jobs-table u").length`) != 0 {
		t.Error("the list reloaded, or rendered a prompt as HTML")
	}
	b.shot("jobs")
	b.open("/console/jobs?type=sfx&status=completed")
	if rows := eval[int](b, `document.querySelectorAll("#jobs-table tbody tr").length`); rows != 1 {
		t.Errorf("completed sfx jobs: %d rows; want 1", rows)
	}

	// A job's page: the player, the download link, the timeline, the
	// prompt as text.
	b.open("/console/jobs/" + sfxID)
	b.waitJS("the player to load", `document.getElementById("player").readyState >= 1`)
	if tag := eval[string](b, `document.getElementById("player").tagName`); tag != "AUDIO" {
		t.Errorf("player is %s; want AUDIO", tag)
	}
	if href := eval[string](b, `document.getElementById("download").href`); !strings.HasPrefix(href, srv.URL+"/files/") {
		t.Errorf("download link %q", href)
	}
	if n := eval[int](b, `document.querySelectorAll(".timeline li").length`); n < 3 {
		t.Errorf("timeline has %d entries; want queued, processing, completed", n)
	}
	if p := b.text("dd.text"); p != "<b>door</b> creak" || eval[int](b, `document.querySelectorAll("dd.text b").length`) != 0 {
		t.Errorf("prompt shown as %q, or as HTML", p)
	}
	b.shot("job")

	// Usage: the chat and the completed jobs show in the table and the
	// charts (credits: the jobs, as the synthetic chat is unpriced;
	// tokens: the chat).
	deadline = time.Now().Add(stepTimeout)
	for {
		b.open("/console/usage")
		if table := b.text("#usage-table"); strings.Contains(table, "synthetic/thinker") && strings.Contains(table, "synthetic-sfx") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the chat and the jobs never show on the usage page")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := eval[int](b, `document.querySelectorAll("#usage-chart rect.bar").length`); n < 1 {
		t.Error("the tokens chart has no bar")
	}
	if n := eval[int](b, `document.querySelectorAll("#credits-chart rect.bar").length`); n < 1 {
		t.Error("the credits chart has no bar")
	}
	b.shot("usage")
	b.open("/console/usage?metric=jobs")
	b.shot("usage-jobs")

	// Requests: the records of the API's requests, newest first, with
	// filters, and one's charge explained line by line.
	if st := srv.api(t, "POST", "/v1/images/generations", srv.DevKey, `{"model":"synthetic-image","prompt":"a lighthouse","size":"256x256","n":2}`, nil); st != 200 {
		t.Fatalf("an image request: %d", st)
	}
	if st := srv.api(t, "POST", "/v1/chat/completions", srv.DevKey, `{"model":"synthetic/echo","messages":[{"role":"user","content":"fail: on purpose"}]}`, nil); st != 502 {
		t.Fatalf("a failing chat completion: %d; want 502", st)
	}
	var priced struct {
		ID string `json:"id"`
	}
	if st := srv.api(t, "POST", "/v1/chat/completions", srv.DevKey,
		`{"model":"`+pricedModel+`","reasoning_effort":"high","messages":[{"role":"user","content":"Explain what a record of a request says, in a few words."}]}`, &priced); st != 200 || priced.ID == "" {
		t.Fatalf("a priced chat completion: %d", st)
	}
	deadline = time.Now().Add(stepTimeout)
	for {
		b.open("/console/requests")
		if strings.Contains(b.text("#requests-table"), priced.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the priced completion never shows on the requests page")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := b.text("#requests-table"); !strings.Contains(got, "synthetic/thinker") || !strings.Contains(got, "2 image(s)") || !strings.Contains(got, "failed") {
		t.Errorf("the requests page lacks the playground's chat, the image request or the failed one: %q", got)
	}
	b.shot("requests")
	b.choose("#r-model", pricedModel)
	b.submit("filter the requests", `form[aria-label="Filter requests"] button`, 200)
	if got := b.text("#requests-table"); !strings.Contains(got, priced.ID) || strings.Count(got, "chatcmpl-") != 1 {
		t.Errorf("the requests filtered by model: %q; want the priced completion alone", got)
	}
	b.submit("open the request", `a[href="/console/requests/`+priced.ID+`"]`, 200)
	charge := b.text("#charge")
	for _, want := range []string{"input", "output", "Sum, exact", "Rounded up once", "Charged"} {
		if !strings.Contains(charge, want) {
			t.Errorf("the request's charge lacks %q: %q", want, charge)
		}
	}
	if !strings.Contains(b.text("main"), "chat:"+priced.ID) {
		t.Error("the request's page does not name its ledger entry")
	}
	b.shot("request")

	// The audit log has the operator's actions.
	b.open("/console/audit")
	audit := b.text("tbody")
	for _, a := range []string{"console.signin", "accounts.create", "keys.create", "credits.grant", "keys.revoke", "playground.chat", "playground.job"} {
		if !strings.Contains(audit, a) {
			t.Errorf("the audit log lacks %s", a)
		}
	}
	b.shot("audit")

	// Every page at 1280 and 375 px: weight, first render, no sideways
	// scrolling on a phone.
	pages := []struct{ name, path string }{
		{"models", "/console/models"}, {"accounts", "/console/accounts"}, {"account", "/console/accounts/acme"},
		{"keys", "/console/keys"}, {"jobs", "/console/jobs"}, {"job", "/console/jobs/" + sfxID},
		{"job-video", "/console/jobs/" + videoID}, {"usage", "/console/usage"}, {"playground", "/console/playground"},
		{"audit", "/console/audit"}, {"requests", "/console/requests"}, {"request", "/console/requests/" + priced.ID},
	}
	var heaviest struct {
		name string
		m    metrics
	}
	for _, p := range pages {
		b.viewport(1280)
		b.do("clear the cache", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, network.ClearBrowserCache, cdp.Empty{})
			return err
		}))
		b.open(p.path)
		m := eval[metrics](b, measureJS)
		t.Logf("page %-10s %6d bytes (HTML %5d + %d files %v), first contentful paint %5.1f ms, DOMContentLoaded %5.1f ms",
			p.name, m.weight(), m.HTML, len(m.Files), m.Files, m.FCP, m.DCL)
		if m.weight() > pageBudget {
			t.Errorf("%s weighs %d bytes; the budget is %d", p.name, m.weight(), pageBudget)
		}
		if len(m.Files) < 2 || slices.Contains(m.Files, 0) {
			t.Errorf("%s: scripts and styles %v %v: not all measured", p.name, m.Names, m.Files)
		}
		if m.weight() > heaviest.m.weight() {
			heaviest.name, heaviest.m = p.name, m
		}
		b.shot(p.name + "-1280")
		b.viewport(375)
		b.open(p.path)
		if !eval[bool](b, `document.documentElement.scrollWidth <= 375`) {
			t.Errorf("%s scrolls sideways at 375 px (%d px wide)", p.name, eval[int](b, `document.documentElement.scrollWidth`))
		}
		b.shot(p.name + "-375")
	}
	t.Logf("heaviest page: %s, %d bytes, first contentful paint %.1f ms (DOMContentLoaded %.1f ms)",
		heaviest.name, heaviest.m.weight(), heaviest.m.FCP, heaviest.m.DCL)

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("page problem: %s", p)
	}
}
