package upstreams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/secrets"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// fakeSSM answers GetParameter from values; fail makes it fail.
type fakeSSM struct {
	mu     sync.Mutex
	values map[string]string
	fail   bool
	calls  atomic.Int32
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("ThrottlingException: rate exceeded")
	}
	v, ok := f.values[aws.ToString(in.Name)]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(v)}}, nil
}

func (f *fakeSSM) set(name, value string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values[name] = value
	f.fail = fail
}

// authRecorder is an upstream that records each request's Authorization
// header and answers as OpenAI's images (/v1/images/generations), speech
// (/v1/audio/speech) or, at any other path, a chat completion (and a
// Replicate cancel).
type authRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newAuthRecorder(t *testing.T) *authRecorder {
	a := &authRecorder{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		a.mu.Lock()
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		a.mu.Unlock()
		switch r.URL.Path {
		case "/v1/images/generations":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"created":1,"data":[{"b64_json":"iVBORw0KGgo="}]}`)
		case "/v1/audio/speech":
			w.Header().Set("Content-Type", "audio/mpeg")
			w.Write([]byte{0xff, 0xfb, 0x90, 0x00})
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *authRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.auth) == 0 {
		return ""
	}
	return a.auth[len(a.auth)-1]
}

// clock is a settable now for a Rotating.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixClock makes r's clock c, starting now (r read its keys before: its
// next read is due a TTL after that, so no later than a TTL after now).
func fixClock[T any](r *Rotating[T]) *clock {
	c := &clock{t: time.Now()}
	r.now = c.now
	return c
}

// rotationEnv is a function's environment and its keys in SSM, read
// through a secrets.Cache that keeps nothing (its own TTL is tested in
// package secrets): what a re-read sees is up to the Rotating's TTL.
func rotationEnv(t *testing.T, env map[string]string, params map[string]string) (*fakeSSM, Rotation, *bytes.Buffer) {
	t.Helper()
	f := &fakeSSM{values: params}
	cache := secrets.New(f, time.Nanosecond)
	vars, byParam := map[string]string{}, map[string]string{}
	for k, v := range env {
		if n, ok := strings.CutSuffix(k, secrets.ParameterSuffix); ok {
			byParam[n] = v
		} else {
			vars[k] = v
		}
	}
	var logs bytes.Buffer
	return f, Rotation{Settings: settingsOf(vars), Key: secrets.Lookup(byParam, vars, cache), TTL: time.Minute,
		Log: slog.New(slog.NewJSONHandler(&logs, nil))}, &logs
}

// checkRotation rotates SSM parameter param of f from oldKey to newKey
// and checks that call, made at each step, sends the old key until the
// TTL has passed and the new one after it: last returns the
// Authorization header the upstream saw last.
func checkRotation(t *testing.T, f *fakeSSM, clk *clock, param, oldKey, newKey string, call func() error, last func() string) {
	t.Helper()
	for _, step := range []struct {
		rotate  string
		advance time.Duration
		want    string
	}{
		{"", 0, "Bearer " + oldKey},
		{newKey, time.Second, "Bearer " + oldKey},
		{"", 2 * time.Minute, "Bearer " + newKey},
	} {
		if step.rotate != "" {
			f.set(param, step.rotate, false)
		}
		clk.advance(step.advance)
		if err := call(); err != nil {
			t.Fatal(err)
		}
		if got := last(); got != step.want {
			t.Fatalf("after %v: sent %q; want %q", step.advance, got, step.want)
		}
	}
}

func TestRotatingChatKeyRotation(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	const oldKey, newKey = "sk-OLD-secret-value", "sk-NEW-secret-value"
	f, rot, logs := rotationEnv(t,
		map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "OPENAI_BASE_URL": up.URL + "/v1"},
		map[string]string{"/genway/openai": oldKey})
	r, err := NewRotating(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk := fixClock(r)
	p := r.Providers()["openai"]
	if p == nil {
		t.Fatalf("Providers() = %v; want openai (its key is in SSM)", r.Providers())
	}
	m, _ := cat.Model("openai/gpt-4o-mini")
	complete := func() {
		t.Helper()
		if _, err := p.Complete(context.Background(), &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
			t.Fatalf("Complete = %v", err)
		}
	}
	for _, step := range []struct {
		name    string
		rotate  string        // the parameter's new value, if any
		advance time.Duration // before the call
		want    string        // the Authorization header sent
		reads   int32         // SSM reads so far
	}{
		{"start", "", 0, "Bearer " + oldKey, 1},
		{"rotated, keys still fresh", newKey, 30 * time.Second, "Bearer " + oldKey, 1},
		{"past the TTL", "", 31 * time.Second, "Bearer " + newKey, 2},
		{"fresh again", "", 10 * time.Second, "Bearer " + newKey, 2},
		{"unchanged after another TTL", "", time.Minute, "Bearer " + newKey, 3},
	} {
		if step.rotate != "" {
			f.set("/genway/openai", step.rotate, false)
		}
		clk.advance(step.advance)
		complete()
		if got := up.last(); got != step.want || f.calls.Load() != step.reads {
			t.Fatalf("%s: upstream saw %q after %d SSM reads; want %q after %d", step.name, got, f.calls.Load(), step.want, step.reads)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "providers rebuilt") || !strings.Contains(out, "OPENAI_API_KEY") || strings.Count(out, "providers rebuilt") != 1 {
		t.Errorf("logs = %s; want one rebuild naming OPENAI_API_KEY", out)
	}
	if strings.Contains(out, "secret-value") {
		t.Errorf("logs show a key: %s", out)
	}
}

func TestRotatingMediaKeyRotation(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, rot, _ := rotationEnv(t,
		map[string]string{"REPLICATE_API_TOKEN_PARAMETER": "/genway/replicate", "GENWAY_SYNTHETIC": "off"},
		map[string]string{"/genway/replicate": "r8_old"})
	r, err := NewRotatingMedia(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk := fixClock(r)
	if c := jobs.Capabilities(r.Providers()["replicate"]).Canceller; c == nil || len(r.Providers()) != 1 {
		t.Fatalf("Providers() = %v; want replicate alone, a jobs.Canceller", r.Providers())
	}
	j := &jobs.Job{Handle: &jobs.Handle{ID: "p1", CancelURL: up.URL + "/v1/predictions/p1/cancel"}}
	// Each cancel finds the Canceller as the worker does, at the call.
	cancel := func() error {
		return jobs.Capabilities(r.Providers()["replicate"]).Canceller.Cancel(context.Background(), nil, j)
	}
	checkRotation(t, f, clk, "/genway/replicate", "r8_old", "r8_new", cancel, up.last)
}

// TestRotatingImagesAndSpeechKeyRotation: OpenAI's image and speech
// providers behind a Rotating take a rotated key in SSM at the first call
// a TTL after their last read, as chat's do.
func TestRotatingImagesAndSpeechKeyRotation(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	img, _ := cat.Model("gpt-image-1.5")
	tts, _ := cat.Model("tts-1")
	if img == nil || tts == nil {
		t.Fatal("the catalog has no gpt-image-1.5 or tts-1")
	}
	tests := []struct {
		name string
		// start builds the Rotating and returns its clock and one call of
		// its openai provider.
		start func(rot Rotation) (*clock, func() error, error)
	}{
		{"images", func(rot Rotation) (*clock, func() error, error) {
			r, err := NewRotatingImages(context.Background(), cat, rot, up.Client())
			if err != nil {
				return nil, nil, err
			}
			p := r.Providers()["openai"]
			if p == nil {
				return nil, nil, fmt.Errorf("Providers() = %v; want openai", r.Providers())
			}
			return fixClock(r), func() error {
				o, err := p.Generate(context.Background(), img, &images.Params{Prompt: "a fox", N: 1, Size: "1024x1024", Format: "png"})
				if err == nil && len(o.Images) != 1 {
					err = fmt.Errorf("Generate made %d images; want 1", len(o.Images))
				}
				return err
			}, nil
		}},
		{"speech", func(rot Rotation) (*clock, func() error, error) {
			r, err := NewRotatingSpeech(context.Background(), cat, rot, up.Client())
			if err != nil {
				return nil, nil, err
			}
			p := r.Providers()["openai"]
			if p == nil {
				return nil, nil, fmt.Errorf("Providers() = %v; want openai", r.Providers())
			}
			return fixClock(r), func() error {
				rc, err := p.Speak(context.Background(), &speech.Call{Model: tts, Input: "hello", Voice: "alloy", Format: "mp3"})
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
				return err
			}, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, rot, logs := rotationEnv(t,
				map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "OPENAI_BASE_URL": up.URL + "/v1", "GENWAY_SYNTHETIC": "off"},
				map[string]string{"/genway/openai": "sk-old-secret-value"})
			clk, call, err := tt.start(rot)
			if err != nil {
				t.Fatal(err)
			}
			checkRotation(t, f, clk, "/genway/openai", "sk-old-secret-value", "sk-new-secret-value", call, up.last)
			if strings.Contains(logs.String(), "secret-value") {
				t.Errorf("logs show a key: %s", logs.String())
			}
		})
	}
}

// TestRotatingReadFailure: a re-read that fails keeps the last key, logs
// the parameter (never a value) and is tried again only a TTL later.
func TestRotatingReadFailure(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, rot, logs := rotationEnv(t,
		map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "OPENAI_BASE_URL": up.URL + "/v1"},
		map[string]string{"/genway/openai": "sk-kept-secret-value"})
	r, err := NewRotating(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk := fixClock(r)
	f.set("/genway/openai", "sk-unreadable-secret-value", true)
	m, _ := cat.Model("openai/gpt-4o-mini")
	req := &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}
	clk.advance(2 * time.Minute)
	for i := 0; i < 3; i++ {
		if _, err := r.Providers()["openai"].Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if got := up.last(); got != "Bearer sk-kept-secret-value" || f.calls.Load() != 2 {
		t.Errorf("during an SSM outage: upstream saw %q after %d SSM reads; want the last key after 2 reads (one retry per TTL)", got, f.calls.Load())
	}
	out := logs.String()
	if !strings.Contains(out, "/genway/openai") || !strings.Contains(out, "OPENAI_API_KEY") {
		t.Errorf("logs = %s; want the failed re-read naming the variable and the parameter", out)
	}
	if strings.Contains(out, "secret-value") {
		t.Errorf("logs show a key: %s", out)
	}
}

// TestRotatingStartErrors: a key that cannot be read at start fails it,
// naming the variable and the parameter, never a value.
func TestRotatingStartErrors(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	_, rot, _ := rotationEnv(t,
		map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "ANTHROPIC_API_KEY_PARAMETER": "/genway/missing"},
		map[string]string{"/genway/openai": "sk-readable-secret-value"})
	_, err = NewRotating(context.Background(), cat, rot, nil)
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "/genway/missing") {
		t.Fatalf("NewRotating = %v; want an error naming ANTHROPIC_API_KEY and /genway/missing", err)
	}
	if strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "/genway/openai") {
		t.Errorf("error %q mentions the key that was read", err)
	}
	// The media vendors' keys are not the chat function's business: a
	// parameter it cannot read for one of them does not stop it.
	_, rot, _ = rotationEnv(t, map[string]string{"FAL_KEY_PARAMETER": "/genway/missing"}, nil)
	if _, err := NewRotating(context.Background(), cat, rot, nil); err != nil {
		t.Errorf("NewRotating with a media key parameter = %v; want it ignored", err)
	}
}

// TestRotatingKeepsVendors: a rebuild that would drop a vendor (its key
// read as empty) keeps the current providers.
func TestRotatingKeepsVendors(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	var key atomic.Value
	key.Store("sk-first")
	var logs bytes.Buffer
	rot := Rotation{
		Settings: Settings{Setup: catalog.Setup{Vars: map[string]string{"OPENAI_BASE_URL": up.URL + "/v1"}}},
		Key: func(_ context.Context, name string) (string, error) {
			if name == "OPENAI_API_KEY" {
				return key.Load().(string), nil
			}
			return "", nil
		},
		TTL: time.Minute, Log: slog.New(slog.NewJSONHandler(&logs, nil)),
	}
	r, err := NewRotating(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk := fixClock(r)
	key.Store("")
	clk.advance(2 * time.Minute)
	m, _ := cat.Model("openai/gpt-4o-mini")
	if _, err := r.Providers()["openai"].Complete(context.Background(), &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := up.last(); got != "Bearer sk-first" || !strings.Contains(logs.String(), "new container") {
		t.Errorf("after the key went empty: upstream saw %q, logs %s; want the first key kept and the refusal logged", got, logs.String())
	}
}

// TestRotatingInterfaces: through each delegate, the domain's
// Capabilities finds exactly the optional interfaces of the provider it
// stands for, and they answer as the provider's do (features, image
// bytes, cache rules, native APIs, token counts; a media delegate's
// polling and cancelling; an image delegate's features).
func TestRotatingInterfaces(t *testing.T) {
	isolate(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k", "GROQ_API_KEY": "k",
		"ELEVENLABS_API_KEY": "k", "FAL_KEY": "k", "REPLICATE_API_TOKEN": "k",
		"GOOGLE_VERTEX_CREDENTIALS": vertextest.NewServer(t).Credentials()} // Vertex AI's Veo: a Poller, not a Canceller
	settings := Settings{Setup: catalog.Setup{Vars: env, Bedrock: true}, AWS: awsenv.Settings{Region: "us-east-1"}}
	rot := Rotation{Settings: settings, Key: func(_ context.Context, k string) (string, error) { return env[k], nil }, TTL: time.Minute}

	direct, err := New(cat, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := NewRotating(context.Background(), cat, rot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Providers()) != len(direct) || len(direct) < 6 {
		t.Fatalf("Rotating chat providers %v; want those of New, %v", rc.Providers(), direct)
	}
	claude, _ := cat.Model("anthropic/claude-haiku-4-5")
	for name, want := range direct {
		wc, gc := chat.Capabilities(want), chat.Capabilities(rc.Providers()[name])
		wantF, wantI, wantC := chat.AllFeatures, false, chat.CacheRules{}
		if f, ok := want.(chat.FeatureProvider); ok {
			wantF = f.Features()
		}
		if nb, ok := want.(chat.ImageBytesNeeder); ok {
			wantI = nb.NeedsImageBytes()
		}
		if cp, ok := want.(chat.CacheProvider); ok {
			wantC = cp.CacheRules(claude)
		}
		if (gc.Features != nil) != (wc.Features != nil) || (gc.ImageBytes != nil) != (wc.ImageBytes != nil) ||
			(gc.Cache != nil) != (wc.Cache != nil) || (gc.Counter != nil) != (wc.Counter != nil) || (gc.Native != nil) != (wc.Native != nil) {
			t.Errorf("%s: Capabilities(delegate) = %+v; want those of the provider, %+v", name, gc, wc)
			continue
		}
		gotF, gotI, gotC := chat.AllFeatures, false, chat.CacheRules{}
		if gc.Features != nil {
			gotF = gc.Features.Features()
		}
		if gc.ImageBytes != nil {
			gotI = gc.ImageBytes.NeedsImageBytes()
		}
		if gc.Cache != nil {
			gotC = gc.Cache.CacheRules(claude)
		}
		if fmt.Sprint(gotF) != fmt.Sprint(wantF) {
			t.Errorf("%s: Features() = %+v; want %+v", name, gotF, wantF)
		}
		if gotI != wantI {
			t.Errorf("%s: NeedsImageBytes() = %v; want %v", name, gotI, wantI)
		}
		if gotC != wantC {
			t.Errorf("%s: CacheRules() = %+v; want %+v", name, gotC, wantC)
		}
		wantN := []bool{false, false}
		if np, ok := want.(chat.NativeProvider); ok {
			wantN = []bool{np.Speaks(chat.APIResponses), np.Speaks(chat.APIMessages)}
		}
		if gn := gc.Native; gn != nil && (gn.Speaks(chat.APIResponses) != wantN[0] || gn.Speaks(chat.APIMessages) != wantN[1]) {
			t.Errorf("%s: the delegate's NativeProvider speaks responses %v, messages %v; want %v, %v", name,
				gn.Speaks(chat.APIResponses), gn.Speaks(chat.APIMessages), wantN[0], wantN[1])
		}
		if _, counts := want.(chat.TokenCounter); !counts && gc.Counter != nil {
			t.Errorf("%s: the delegate has a TokenCounter; want none (the gateway estimates)", name)
		}
	}
	if _, ok := direct["anthropic"].(chat.TokenCounter); !ok {
		t.Errorf("the anthropic provider is not a TokenCounter")
	}

	directMedia, err := NewMedia(cat, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := NewRotatingMedia(context.Background(), cat, rot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Providers()) != len(directMedia) || len(directMedia) < 5 {
		t.Fatalf("Rotating media providers %v; want those of NewMedia, %v", rm.Providers(), directMedia)
	}
	for name, want := range directMedia {
		got := jobs.Capabilities(rm.Providers()[name])
		_, wantP := want.(jobs.Poller)
		gotP := got.Poller != nil
		_, wantC := want.(jobs.Canceller)
		gotC := got.Canceller != nil
		if gotP != wantP || gotC != wantC {
			t.Errorf("%s: delegate is Poller %v, Canceller %v; want %v, %v", name, gotP, gotC, wantP, wantC)
		}
	}

	directImages, err := NewImages(cat, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := NewRotatingImages(context.Background(), cat, rot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ri.Providers()) != len(directImages) || len(directImages) < 5 {
		t.Fatalf("Rotating image providers %v; want those of NewImages, %v", ri.Providers(), directImages)
	}
	for name, want := range directImages {
		wf, wantF := want.(images.FeatureProvider)
		gf := images.Capabilities(ri.Providers()[name]).Features
		gotF := gf != nil
		if gotF != wantF || (wantF && gf.Features() != wf.Features()) {
			t.Errorf("%s: delegate is FeatureProvider %v; want %v, with the same Features", name, gotF, wantF)
		}
	}
	directSpeech, err := NewSpeech(cat, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := NewRotatingSpeech(context.Background(), cat, rot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Providers()) != len(directSpeech) || len(directSpeech) < 3 {
		t.Fatalf("Rotating speech providers %v; want those of NewSpeech, %v", rs.Providers(), directSpeech)
	}
	for name := range directSpeech {
		if _, ok := rs.Providers()[name].(route.Keyed); !ok {
			t.Errorf("%s: speech delegate is not a route.Keyed", name)
		}
	}
}

// TestRotatingConcurrent: calls racing a rotation each use one whole
// generation (run with -race).
func TestRotatingConcurrent(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, rot, _ := rotationEnv(t,
		map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "OPENAI_BASE_URL": up.URL + "/v1"},
		map[string]string{"/genway/openai": "sk-0"})
	r, err := NewRotating(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk := fixClock(r)
	m, _ := cat.Model("openai/gpt-4o-mini")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if g == 0 && i%5 == 0 {
					f.set("/genway/openai", fmt.Sprintf("sk-%d", i/5+1), false)
					clk.advance(2 * time.Minute)
				}
				if _, err := r.Providers()["openai"].Complete(context.Background(), &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, a := range up.auth {
		if !strings.HasPrefix(a, "Bearer sk-") {
			t.Fatalf("upstream saw %q", a)
		}
	}
}

// TestRotatingBehindSameTTLCache: the keys sit behind a cache with the
// Rotating's own TTL, and each read takes time. Every rotation still shows
// at the Rotating's next read of the keys (not a TTL later still, as it
// would if the Rotating counted its TTL from before the cache's read).
func TestRotatingBehindSameTTLCache(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute
	clk := &clock{t: time.Now()}
	var mu sync.Mutex
	stored, cached, readAt := "sk-0", "", time.Time{}
	// key is secrets.Cache's rule on clk: a value younger than the TTL is
	// served, else read again; a read takes a second.
	key := func(_ context.Context, name string) (string, error) {
		if name != "OPENAI_API_KEY" {
			return "", nil
		}
		mu.Lock()
		defer mu.Unlock()
		if cached != "" && clk.now().Sub(readAt) < ttl {
			return cached, nil
		}
		clk.advance(time.Second)
		cached, readAt = stored, clk.now()
		return cached, nil
	}
	rot := Rotation{Settings: Settings{Setup: catalog.Setup{Vars: map[string]string{"OPENAI_BASE_URL": up.URL + "/v1"}}},
		Key: key, TTL: ttl, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	r, err := newRotatingAt(cat, rot, up.Client(), clk.now)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cat.Model("openai/gpt-4o-mini")
	for i := 1; i <= 3; i++ {
		mu.Lock()
		stored = fmt.Sprintf("sk-%d", i)
		mu.Unlock()
		// The first moment the Rotating reads again.
		clk.mu.Lock()
		clk.t = time.Unix(0, r.next.Load())
		clk.mu.Unlock()
		if _, err := r.Providers()["openai"].Complete(context.Background(), &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
			t.Fatal(err)
		}
		if got, want := up.last(), "Bearer "+stored; got != want {
			t.Fatalf("rotation %d, at the next read: upstream saw %q; want %q", i, got, want)
		}
	}
}

// newRotatingAt is NewRotating with the clock now from the start.
func newRotatingAt(cat *catalog.Catalog, rot Rotation, hc *http.Client, now func() time.Time) (*Rotating[chat.Provider], error) {
	return newRotating(context.Background(), cat, rot, chatTypes, func(s Settings) (map[string]chat.Provider, error) {
		return New(cat, s, hc)
	}, wrapChat, now)
}

// TestRotatingKeyPool: the delegates forward the current provider's key
// pool (route.Keyed), so that a rotated list in SSM takes effect: a pool
// rotated from "a,b" to "b,c" is the router's "b,c" after the TTL, and a
// call naming c sends c.
func TestRotatingKeyPool(t *testing.T) {
	up := newAuthRecorder(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, rot, logs := rotationEnv(t,
		map[string]string{"OPENAI_API_KEY_PARAMETER": "/genway/openai", "OPENAI_BASE_URL": up.URL + "/v1",
			"REPLICATE_API_TOKEN_PARAMETER": "/genway/replicate"},
		map[string]string{"/genway/openai": "sk-a-secret-value,sk-b-secret-value", "/genway/replicate": "r8_a,r8_b"})
	r, err := NewRotating(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	media, err := NewRotatingMedia(context.Background(), cat, rot, up.Client())
	if err != nil {
		t.Fatal(err)
	}
	clk, mclk := fixClock(r), fixClock(media)
	ids := func(keys ...string) []string {
		var out []string
		for _, k := range keys {
			out = append(out, route.KeyID(k))
		}
		return out
	}
	p, ok := r.Providers()["openai"].(route.Keyed)
	if !ok {
		t.Fatalf("the openai delegate %T is not route.Keyed", r.Providers()["openai"])
	}
	rep, ok := media.Providers()["replicate"].(route.Keyed)
	if !ok {
		t.Fatalf("the replicate delegate %T is not route.Keyed", media.Providers()["replicate"])
	}
	if got := p.KeyIDs(); !slices.Equal(got, ids("sk-a-secret-value", "sk-b-secret-value")) {
		t.Errorf("openai KeyIDs() = %v; want a, b", got)
	}
	if got := rep.KeyIDs(); !slices.Equal(got, ids("r8_a", "r8_b")) {
		t.Errorf("replicate KeyIDs() = %v; want a, b", got)
	}
	if s, ok := r.Providers()["synthetic"].(route.Keyed); !ok || s.KeyIDs() != nil {
		t.Errorf("synthetic delegate: KeyIDs %v; want none (it takes no key)", s)
	}

	f.set("/genway/openai", "sk-b-secret-value,sk-c-secret-value", false)
	f.set("/genway/replicate", "r8_b,r8_c", false)
	clk.advance(2 * time.Minute)
	mclk.advance(2 * time.Minute)
	if got := p.KeyIDs(); !slices.Equal(got, ids("sk-b-secret-value", "sk-c-secret-value")) {
		t.Errorf("openai KeyIDs() after the rotation = %v; want b, c", got)
	}
	if got := rep.KeyIDs(); !slices.Equal(got, ids("r8_b", "r8_c")) {
		t.Errorf("replicate KeyIDs() after the rotation = %v; want b, c", got)
	}
	m, _ := cat.Model("openai/gpt-4o-mini")
	ctx := route.WithKey(context.Background(), route.KeyID("sk-c-secret-value"))
	if _, err := r.Providers()["openai"].Complete(ctx, &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := up.last(); got != "Bearer sk-c-secret-value" {
		t.Errorf("a call naming c sent %q; want c", got)
	}
	if strings.Contains(logs.String(), "secret-value") {
		t.Errorf("logs show a key: %s", logs.String())
	}
}
