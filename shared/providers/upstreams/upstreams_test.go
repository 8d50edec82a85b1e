package upstreams

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
)

// isolate keeps the AWS SDK away from the machine's own configuration.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_PROFILE": "", "AWS_CA_BUNDLE": "", "AWS_ENDPOINT_URL": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// kinds lists provs as "name=type" pairs, sorted, separated by spaces.
func kinds[T any](provs map[string]T) string {
	var got []string
	for name, p := range provs {
		got = append(got, fmt.Sprintf("%s=%T", name, p))
	}
	sort.Strings(got)
	return strings.Join(got, " ")
}

func TestNew(t *testing.T) {
	isolate(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    string // provider=type, sorted
		wantErr string
	}{
		{"defaults", nil, "synthetic=*synthetic.Chat", ""},
		{"synthetic off", map[string]string{"GENWAY_SYNTHETIC": "off"}, "", ""},
		{"keys", map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k", "GROQ_API_KEY": "k", "OLLAMA_BASE_URL": "http://127.0.0.1:1/v1"},
			"anthropic=*anthropic.Provider groq=*openai.Provider ollama=*openai.Provider openai=*openai.Provider gemini=*gemini.Provider synthetic=*synthetic.Chat", ""},
		{"bedrock", map[string]string{"GENWAY_BEDROCK": "on", "AWS_REGION": "us-east-1"}, "bedrock=*bedrock.Provider synthetic=*synthetic.Chat", ""},
		{"bedrock without region", map[string]string{"GENWAY_BEDROCK": "on"}, "", "no region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provs, err := New(cat, settingsOf(tt.env), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v; want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New = %v", err)
			}
			want := strings.Fields(tt.want)
			sort.Strings(want)
			if got := kinds(provs); got != strings.Join(want, " ") {
				t.Errorf("New(%v) = %v; want %v", tt.env, got, want)
			}
		})
	}
}

// TestNewNative: OpenAI's and Anthropic's providers speak their own APIs
// natively, as the catalog says (an OpenAI-compatible server such as
// Groq's does not), unless GENWAY_NATIVE=off.
func TestNewNative(t *testing.T) {
	isolate(t)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GROQ_API_KEY": "k", "GEMINI_API_KEY": "k"}
	for _, off := range []bool{false, true} {
		env := maps.Clone(keys)
		if off {
			env["GENWAY_NATIVE"] = "off"
		}
		provs, err := New(cat, settingsOf(env), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			provider, api string
			want          bool
		}{{"openai", chat.APIResponses, true}, {"openai", chat.APIMessages, false}, {"anthropic", chat.APIMessages, true},
			{"anthropic", chat.APIResponses, false}, {"groq", chat.APIResponses, false}, {"gemini", chat.APIResponses, false}} {
			np, ok := provs[tt.provider].(chat.NativeProvider)
			if got := ok && np.Speaks(tt.api); got != (tt.want && !off) {
				t.Errorf("GENWAY_NATIVE off %t: %s speaks %s = %t; want %t", off, tt.provider, tt.api, got, tt.want && !off)
			}
		}
	}
}

// TestNewBaseURLAndKey: an OpenAI-compatible provider talks to the base URL
// of its env var, with its key.
func TestNewBaseURLAndKey(t *testing.T) {
	var gotAuth, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GROQ_API_KEY": "gsk_test", "GROQ_BASE_URL": srv.URL + "/openai/v1/"}
	provs, err := New(cat, settingsOf(env), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cat.Model("groq/llama-3.3-70b-versatile")
	resp, err := provs["groq"].Complete(context.Background(), &chat.Request{Model: m, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}})
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if resp.Content != "hi" || gotAuth != "Bearer gsk_test" || gotPath != "/openai/v1/chat/completions" {
		t.Errorf("Complete = %q via %s with %q; want hi via /openai/v1/chat/completions with Bearer gsk_test", resp.Content, gotPath, gotAuth)
	}
}

func TestNewMedia(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	key := vertextest.NewServer(t).Credentials()
	all := map[string]string{"ELEVENLABS_API_KEY": "k", "GEMINI_API_KEY": "k", "FAL_KEY": "k", "REPLICATE_API_TOKEN": "k", "OPENAI_API_KEY": "k",
		"GOOGLE_VERTEX_CREDENTIALS": key}
	tests := []struct {
		name    string
		env     map[string]string
		want    string // provider=type, sorted
		wantErr string
	}{
		{"defaults", nil, "synthetic=synthetic.Media", ""},
		{"synthetic off", map[string]string{"GENWAY_SYNTHETIC": "off"}, "", ""},
		// Gemini's key is a chat provider's only: the catalog's Veo models
		// are Vertex AI's.
		{"every vendor; chat-only and image-only providers skipped", all,
			"elevenlabs=*elevenlabs.Provider fal=*fal.Provider replicate=*replicate.Provider synthetic=synthetic.Media vertex=*gemini.VertexVideo", ""},
		{"an unusable Vertex AI key", map[string]string{"GOOGLE_VERTEX_CREDENTIALS": strings.Replace(key, "service_account", "authorized_user", 1)},
			"", "provider vertex: vertex credentials: not a service-account key"},
		{"an unusable Vertex AI region", map[string]string{"GOOGLE_VERTEX_CREDENTIALS": key, "GOOGLE_VERTEX_REGION": "us central"},
			"", "provider vertex: vertex: region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provs, err := NewMedia(cat, settingsOf(tt.env), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Fatalf("NewMedia = %v; want an error with %q, without the key", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewMedia = %v", err)
			}
			if got := kinds(provs); got != tt.want {
				t.Errorf("NewMedia(%v) = %v; want %v", tt.env, got, tt.want)
			}
		})
	}
	// A media vendor's key does not make it a chat provider.
	provs, err := New(cat, settingsOf(all), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"elevenlabs", "fal", "replicate"} {
		if _, ok := provs[name]; ok {
			t.Errorf("New built a chat provider for %s", name)
		}
	}
}

// TestNewImages: one image provider per configured provider with image
// models, of its kind's package; none for the others.
func TestNewImages(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string // provider=type, sorted
	}{
		{"defaults", nil, "synthetic=synthetic.Images"},
		{"synthetic off", map[string]string{"GENWAY_SYNTHETIC": "off"}, ""},
		{"every vendor", map[string]string{"OPENAI_API_KEY": "k", "GEMINI_API_KEY": "k", "FAL_KEY": "k", "REPLICATE_API_TOKEN": "k", "ELEVENLABS_API_KEY": "k", "ANTHROPIC_API_KEY": "k"},
			"fal=*fal.Provider gemini=*gemini.Images openai=*openai.Images replicate=*replicate.Provider synthetic=synthetic.Images"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provs, err := NewImages(cat, settingsOf(tt.env), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(provs); got != tt.want {
				t.Errorf("NewImages(%v) = %v; want %v", tt.env, got, tt.want)
			}
		})
	}
}

// TestPOSTNeverSentTwice: an upstream that reads a completion request on a
// reused connection and then drops it without answering sees that request
// once; the client gets an error, not a silent second attempt that the
// upstream could bill again.
func TestPOSTNeverSentTwice(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var posts int
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if req.Method == "POST" {
						mu.Lock()
						posts++
						mu.Unlock()
						return // read it all, answer nothing, drop the connection
					}
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	c := NewHTTPClient()
	defer c.CloseIdleConnections()
	base := "http://" + ln.Addr().String()
	resp, err := c.Get(base + "/warm") // leaves a keep-alive connection to reuse
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("POST to an upstream that dropped the connection = nil error")
	}
	mu.Lock()
	defer mu.Unlock()
	if posts != 1 {
		t.Errorf("the upstream received the POST %d times; want once", posts)
	}
}

// TestNewSpeech: a provider is a speech one for its speech models only,
// whatever else it serves.
func TestNewSpeech(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string // provider=type, sorted
	}{
		{"defaults", nil, "synthetic=synthetic.Speech"},
		{"synthetic off", map[string]string{"GENWAY_SYNTHETIC": "off"}, ""},
		{"every vendor; chat and media ones skipped", map[string]string{"OPENAI_API_KEY": "k", "ELEVENLABS_API_KEY": "k", "GROQ_API_KEY": "k", "FAL_KEY": "k", "ANTHROPIC_API_KEY": "k"},
			"elevenlabs=*elevenlabs.Provider openai=*openai.Provider synthetic=synthetic.Speech"},
	}
	for _, tt := range tests {
		provs, err := NewSpeech(cat, settingsOf(tt.env), nil)
		if err != nil {
			t.Fatalf("%s: NewSpeech = %v", tt.name, err)
		}
		if got := kinds(provs); got != tt.want {
			t.Errorf("%s: NewSpeech = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestOutputLinksGuarded: the job and image providers NewMedia and
// NewImages build fetch the files at links a vendor answers only from
// public addresses (NewDownloadClient): a link to loopback fails the job
// or the image, final and with no retry; GENWAY_MEDIA_ALLOW_PRIVATE=1
// lets tests and local vendors through. The vendors' own APIs (the
// configured base URLs) are reached either way.
func TestOutputLinksGuarded(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	var files *httptest.Server // the vendor's file host, on loopback like its API
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/status": // fal
			io.WriteString(w, `{"status":"COMPLETED"}`)
		case "/result":
			fmt.Fprintf(w, `{"video":{"url":%q,"content_type":"video/mp4"}}`, files.URL+"/out.mp4")
		case "/v1/images/generations": // OpenAI
			fmt.Fprintf(w, `{"created":1,"data":[{"url":%q}]}`, files.URL+"/img.png")
		default:
			http.NotFound(w, r)
		}
	}))
	defer vendor.Close()
	png := []byte("\x89PNG\r\n\x1a\n0000")
	fetched := 0
	var mu sync.Mutex
	files = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched++
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, ".png") {
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		io.WriteString(w, "....ftypisom")
	}))
	defer files.Close()
	kling, _ := cat.Model("kling-2.5-turbo")
	gptImage, _ := cat.Model("gpt-image-1.5")
	job := &jobs.Job{ID: "job_1", Type: jobs.TypeVideo, Input: jobs.Input{Duration: 5},
		Handle: &jobs.Handle{ID: "r1", StatusURL: vendor.URL + "/status", ResultURL: vendor.URL + "/result"}}
	for _, allow := range []string{"", "1"} {
		env := map[string]string{"FAL_KEY": "k", "FAL_BASE_URL": vendor.URL, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": vendor.URL + "/v1",
			"GENWAY_MEDIA_ALLOW_PRIVATE": allow}
		settings := settingsOf(env)
		media, err := NewMedia(cat, settings, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := media["fal"].(jobs.Poller).Poll(context.Background(), kling, job)
		imgs, err2 := NewImages(cat, settings, nil)
		if err2 != nil {
			t.Fatal(err2)
		}
		out, ierr := imgs["openai"].Generate(context.Background(), gptImage, &images.Params{Prompt: "p", N: 1, Format: "png"})
		if allow == "1" {
			if err != nil || res == nil || ierr != nil || len(out.Images) != 1 {
				t.Fatalf("with GENWAY_MEDIA_ALLOW_PRIVATE=1: fal Poll = %v, %v; openai Generate = %v, %v; want the files", res, err, out, ierr)
			}
			res.Body.Close()
			continue
		}
		for name, err := range map[string]error{"fal Poll": err, "openai Generate": ierr} {
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || pe.Code != jobs.CodeUpstream || !errors.Is(err, chat.ErrRefusedAddr) || strings.Contains(pe.Message, "127.0.0.1") {
				t.Errorf("%s of a loopback file link = %v; want a final upstream_error refused at dial, naming no address", name, err)
			}
		}
		mu.Lock()
		if fetched != 0 {
			t.Errorf("the file host was reached %d times; want none", fetched)
		}
		mu.Unlock()
	}
}

// settingsOf is the Settings an environment gives (as package app reads
// it), for the tests' fixtures: the switches, Vertex AI's and AWS's
// variables, and every other variable as a provider's.
func settingsOf(env map[string]string) Settings {
	s := Settings{Setup: catalog.Setup{Vars: env, NoSynthetic: env["GENWAY_SYNTHETIC"] == "off", Bedrock: env["GENWAY_BEDROCK"] == "on",
		NoNative: env["GENWAY_NATIVE"] == "off"}, AllowPrivateMedia: env["GENWAY_MEDIA_ALLOW_PRIVATE"] == "1",
		Vertex: Vertex{Project: env["GOOGLE_VERTEX_PROJECT"], Region: env["GOOGLE_VERTEX_REGION"], StorageURI: env["GOOGLE_VERTEX_STORAGE_URI"]},
		AWS:    awsenv.Settings{Region: env["AWS_REGION"]}}
	for _, n := range strings.Split(env["GENWAY_CONFIGURED"], ",") {
		if n = strings.TrimSpace(n); n != "" {
			s.Setup.Configured = append(s.Setup.Configured, n)
		}
	}
	return s
}
