package gemini

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
)

// TestVertexSDKContract checks VertexVideo against Google's own client:
// @google/genai 3.3.0 (clients/npm, unmodified) in Vertex AI mode makes
// each video of the table against the same fake, and
//
//   - sends the same calls as the adapter: the same methods, paths and
//     JSON bodies (predictLongRunning with the same instances and
//     parameters, fetchPredictOperation with the operation's name), with a
//     bearer token;
//   - reads the fake's answers as the adapter does: the inline video's
//     bytes, the Cloud Storage URI, the safety filter's count and reasons,
//     the operation's error.
//
// Without node or the package the test skips; in CI it fails.
func TestVertexSDKContract(t *testing.T) {
	dir, err := filepath.Abs("../../../clients/npm")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@google", "genai", "package.json"))
	}
	if err != nil {
		msg := "node and @google/genai are needed (scripts/test.sh runs npm ci in clients/npm): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	type vcase struct {
		Model           string `json:"model"`
		Prompt          string `json:"prompt"`
		AspectRatio     string `json:"aspectRatio"`
		Resolution      string `json:"resolution"`
		DurationSeconds int    `json:"durationSeconds"`
		OutputGcsURI    string `json:"outputGcsUri,omitempty"`
		size            string
	}
	cases := []vcase{
		{"veo-3.1-generate-001", "a fox in the snow", "16:9", "720p", 8, "", "1280x720"},
		{"veo-3.1-fast-generate-001", "a portrait of a city", "9:16", "1080p", 8, "", "1080x1920"},
		{"veo-3.1-generate-001", "a river, to storage", "16:9", "720p", 4, "gs://genway-veo/out/", "1280x720"},
		{"veo-3.1-generate-001", "forbidden scene", "16:9", "720p", 6, "", "1280x720"},
		{"veo-3.1-generate-001", "broken scene", "16:9", "720p", 6, "", "1280x720"},
	}
	fake := vertextest.NewServer(t)
	fake.Configure(func(s *vertextest.Server) { // the SDK is another process
		s.DonePolls = 2
		s.ExtraTokens = []string{"sdk-fixed-token"}
		s.Video = bytes.Repeat([]byte("\x00\x00\x00\x18ftypmp42"), 4000)
	})

	// The SDK, all cases; then the adapter, all cases.
	casesJSON, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "genai-vertex.mjs")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_PROXY=*",
		"VERTEX_BASE_URL=" + fake.URL + "/", "VERTEX_PROJECT=" + fake.Project, "VERTEX_REGION=" + fake.Region,
		"VERTEX_TOKEN=sdk-fixed-token", "VERTEX_CASES=" + string(casesJSON)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node genai-vertex.mjs: %v\n%s%s", err, out, stderr.String())
	}
	sdkCalls := fake.Requests()

	v := newVertex(t, fake, VertexConfig{})
	storage := newVertex(t, fake, VertexConfig{StorageURI: "gs://genway-veo/out/"})
	type outcome struct {
		video []byte
		err   error
	}
	var ours []outcome
	for _, c := range cases {
		a := v
		if c.OutputGcsURI != "" {
			a = storage
		}
		m := *vertexModel
		m.Upstream = c.Model
		j := vertexJob(c.Prompt, c.size, c.DurationSeconds)
		step, err := a.Start(context.Background(), &m, j)
		if err != nil {
			t.Fatalf("%s: Start = %v", c.Prompt, err)
		}
		j.Handle = step.Handle
		var o outcome
		for range 5 {
			res, err := a.Poll(context.Background(), &m, j)
			if err != nil {
				o.err = err
				break
			}
			if res != nil {
				o.video, _ = io.ReadAll(res.Body)
				res.Body.Close()
				break
			}
		}
		ours = append(ours, o)
	}
	ourCalls := fake.Requests()[len(sdkCalls):]

	// The same calls, in the same order: our token requests and our read of
	// the Cloud Storage video aside (the SDK leaves that to its user).
	norm := regexp.MustCompile(`operations/[0-9a-f]{8}-op\d+`)
	shape := func(reqs []vertextest.Request) []string {
		var out []string
		for _, r := range reqs {
			if r.Path == "/token" || strings.HasPrefix(r.Path, "/storage/") {
				continue
			}
			auth, _, _ := strings.Cut(r.Auth, " ")
			body := any(nil)
			if len(r.Body) > 0 {
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Errorf("%s %s: body %q is not JSON", r.Method, r.Path, r.Body)
				}
			}
			b, _ := json.Marshal(body) // sorted keys: key order is no difference
			out = append(out, norm.ReplaceAllString(r.Method+" "+r.Path+"?"+r.Query+" "+auth+" "+string(b), "operations/ID"))
		}
		return out
	}
	sdk, adapter := shape(sdkCalls), shape(ourCalls)
	if !reflect.DeepEqual(sdk, adapter) {
		t.Errorf("calls differ\n@google/genai:\n  %s\nadapter:\n  %s", strings.Join(sdk, "\n  "), strings.Join(adapter, "\n  "))
	}
	if len(sdk) != len(cases)*3 { // a submit and two polls each
		t.Errorf("the SDK made %d calls; want %d", len(sdk), len(cases)*3)
	}

	// What each client read from the same answers.
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for i, c := range cases {
		if !sc.Scan() {
			t.Fatalf("the SDK printed %d results; want %d\n%s", i, len(cases), out)
		}
		var got struct {
			Done  bool
			Error *struct {
				Code    int
				Message string
			}
			VideoBytes, URI         *string
			MimeType                *string
			RaiMediaFilteredCount   *int
			RaiMediaFilteredReasons []string
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("SDK result %q: %v", sc.Bytes(), err)
		}
		o := ours[i]
		var pe *jobs.ProviderError
		errors.As(o.err, &pe)
		switch {
		case strings.HasPrefix(c.Prompt, "forbidden"):
			if got.RaiMediaFilteredCount == nil || *got.RaiMediaFilteredCount != 1 || len(got.RaiMediaFilteredReasons) != 1 {
				t.Errorf("%s: the SDK read %s; want raiMediaFilteredCount 1 with a reason", c.Prompt, sc.Bytes())
			} else if pe == nil || pe.Code != jobs.CodeContentPolicy || !strings.Contains(pe.Message, got.RaiMediaFilteredReasons[0]) {
				t.Errorf("%s: adapter = %v; want content_policy with the SDK's reason %q", c.Prompt, o.err, got.RaiMediaFilteredReasons[0])
			}
		case strings.HasPrefix(c.Prompt, "broken"):
			if got.Error == nil || got.Error.Code != 13 {
				t.Errorf("%s: the SDK read %s; want error code 13", c.Prompt, sc.Bytes())
			} else if pe == nil || pe.Code != jobs.CodeUpstream || !strings.Contains(pe.Message, got.Error.Message) {
				t.Errorf("%s: adapter = %v; want upstream_error with the SDK's message %q", c.Prompt, o.err, got.Error.Message)
			}
		case c.OutputGcsURI != "":
			if !got.Done || got.URI == nil || !strings.HasPrefix(*got.URI, c.OutputGcsURI) || got.MimeType == nil || *got.MimeType != "video/mp4" {
				t.Errorf("%s: the SDK read %s; want a gs:// URI under %s, video/mp4", c.Prompt, sc.Bytes(), c.OutputGcsURI)
			}
			if o.err != nil || !bytes.Equal(o.video, fake.Video) {
				t.Errorf("%s: adapter = %d bytes, %v; want the video the SDK's URI names", c.Prompt, len(o.video), o.err)
			}
		default:
			if !got.Done || got.VideoBytes == nil || got.MimeType == nil || *got.MimeType != "video/mp4" {
				t.Fatalf("%s: the SDK read %s; want the video inline, video/mp4", c.Prompt, sc.Bytes())
			}
			sdkVideo, err := base64.StdEncoding.DecodeString(*got.VideoBytes)
			if err != nil || o.err != nil || !bytes.Equal(o.video, sdkVideo) || !bytes.Equal(sdkVideo, fake.Video) {
				t.Errorf("%s: adapter read %d bytes (%v), the SDK %d; want the same video", c.Prompt, len(o.video), o.err, len(sdkVideo))
			}
		}
	}
}
