package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hajimehoshi/go-mp3"
)

// testKey is the dev key the tests give the server.
const testKey = "sk_live_testtesttesttesttesttesttesttest0001"

// lineWriter is an io.Writer that hands complete lines to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case w.lines <- strings.TrimRight(line, "\n"):
		default:
		}
	}
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)/v1`)

// server is a genway serve running in-process.
type server struct {
	base string // http://127.0.0.1:port
	key  string
	stop func()
}

func testEnv(dir string, extra map[string]string) func(string) string {
	env := map[string]string{
		"GENWAY_ADDR":        "127.0.0.1:0",
		"GENWAY_DATA_DIR":    dir,
		"GENWAY_DEV_KEY":     testKey,
		"GENWAY_DEV_CREDITS": "100000",
	}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// startServer runs `genway serve` in-process on a free port over dir.
func startServer(t testing.TB, dir string, extra map[string]string) *server {
	t.Helper()
	return startServerLog(t, dir, extra, io.Discard)
}

// startServerLog is startServer with the server's log written to logw.
func startServerLog(t testing.TB, dir string, extra map[string]string, logw io.Writer) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lineWriter{lines: make(chan string, 100)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, testEnv(dir, extra), out, logw) }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line := <-out.lines:
			if m := servingRE.FindStringSubmatch(line); m != nil {
				s := &server{base: m[1], key: testKey}
				// Once: a test may stop it early; the cleanup then does nothing.
				s.stop = sync.OnceFunc(func() {
					cancel()
					select {
					case err := <-done:
						if err != nil {
							t.Errorf("serve returned %v", err)
						}
					case <-time.After(15 * time.Second):
						t.Error("serve did not stop within 15 s")
					}
				})
				t.Cleanup(s.stop)
				return s
			}
		case err := <-done:
			cancel()
			t.Fatalf("serve exited early: %v", err)
		case <-deadline:
			cancel()
			t.Fatal("serve did not start within 20 s")
		}
	}
}

// do sends a request with the server's key and decodes a JSON answer.
func (s *server) do(t *testing.T, method, path string, body any, hdr map[string]string, out any) (int, http.Header) {
	t.Helper()
	code, h, err := doRequest(s, method, path, body, hdr, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, h
}

// doRequest sends a request with the server's key and decodes a JSON answer
// into out (if not nil).
func doRequest(s *server, method, path string, body any, hdr map[string]string, out any) (int, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("status %d, body %q: %w", resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

type jobResp struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Type   string `json:"type"`
	Status string `json:"status"`
	Output *struct {
		URL         string `json:"url"`
		ContentType string `json:"content_type"`
		Bytes       int64  `json:"bytes"`
		Duration    int    `json:"duration"`
	} `json:"output"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Created  int64  `json:"created"`
	Model    string `json:"model"`
	ServedBy string `json:"served_by"`
	Input    struct {
		Duration int `json:"duration"`
	} `json:"input"`
}

// waitJob polls until the job is final, recording every status seen.
func (s *server) waitJob(t *testing.T, id string, limit time.Duration) (jobResp, []string) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var j jobResp
		if code, _ := s.do(t, "GET", "/v1/jobs/"+id, nil, nil, &j); code != 200 {
			t.Fatalf("GET job %s = %d", id, code)
		}
		if len(seen) == 0 || seen[len(seen)-1] != j.Status {
			seen = append(seen, j.Status)
		}
		if j.Status == "completed" || j.Status == "failed" {
			return j, seen
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s not final after %v (statuses %v)", id, limit, seen)
	return jobResp{}, nil
}

func TestEndToEndJobs(t *testing.T) {
	s := startServer(t, t.TempDir(), nil)

	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	if code, _ := s.do(t, "GET", "/v1/models", nil, nil, &models); code != 200 || models.Object != "list" {
		t.Fatalf("GET /v1/models = %d %+v", code, models)
	}
	ids := map[string]string{}
	for _, m := range models.Data {
		ids[m.ID] = m.Type
	}
	for id, typ := range map[string]string{"synthetic-music": "music", "synthetic-sfx": "sfx", "synthetic-video": "video", "synthetic/echo": "chat"} {
		if ids[id] != typ {
			t.Errorf("models list has %q as %q; want %q", id, ids[id], typ)
		}
	}
	if _, ok := ids["openai/gpt-4o"]; ok {
		t.Error("models list shows openai models with no OPENAI_API_KEY")
	}
	// A vendor's model with no key is neither listed nor accepted.
	if _, ok := ids["veo-3.1"]; ok {
		t.Error("models list shows Veo with no GEMINI_API_KEY")
	}
	var e struct {
		Error struct{ Code, Param string } `json:"error"`
	}
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": "veo-3.1", "prompt": "p"}, nil, &e); code != 404 || e.Error.Code != "model_not_found" {
		t.Errorf("a job on an unconfigured vendor = %d %+v; want 404 model_not_found", code, e)
	}

	tests := []struct {
		name        string
		req         map[string]any
		contentType string
		duration    float64
		codec       string
		size        string
	}{
		{"music mp3", map[string]any{"type": "music", "model": "synthetic-music", "prompt": "a calm piano tune", "duration": 4}, "audio/mpeg", 4, "mp3", ""},
		{"music wav", map[string]any{"type": "music", "model": "synthetic-music", "prompt": "drums", "duration": 3, "format": "wav"}, "audio/wav", 3, "pcm_s16le", ""},
		{"sfx default", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "door slam"}, "audio/mpeg", 5, "mp3", ""},
		{"video", map[string]any{"type": "video", "model": "synthetic-video", "prompt": "bouncing ball", "duration": 2, "size": "320x240"}, "video/mp4", 2, "h264", "320x240"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var created jobResp
			code, hdr := s.do(t, "POST", "/v1/jobs", tt.req, nil, &created)
			if code != 200 || created.Status != "queued" || created.Object != "job" || created.Output != nil || created.Error != nil || created.Created == 0 {
				t.Fatalf("POST /v1/jobs = %d %+v; want 200 queued", code, created)
			}
			if hdr.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if !strings.HasPrefix(created.ID, "job_"+tt.req["type"].(string)+"_") {
				t.Errorf("id %q has the wrong shape", created.ID)
			}
			j, seen := s.waitJob(t, created.ID, 60*time.Second)
			if j.Status != "completed" {
				t.Fatalf("job ended %s (%+v)", j.Status, j.Error)
			}
			for i := 1; i < len(seen); i++ {
				if rank(seen[i]) < rank(seen[i-1]) {
					t.Errorf("statuses went backwards: %v", seen)
				}
			}
			if j.Output == nil || j.Output.ContentType != tt.contentType || j.Output.Duration != int(tt.duration) {
				t.Fatalf("output = %+v; want %s of %v s", j.Output, tt.contentType, tt.duration)
			}
			// The raw answer has the link as it is, pasteable: "&", not "\u0026".
			req, _ := http.NewRequest("GET", s.base+"/v1/jobs/"+created.ID, nil)
			req.Header.Set("Authorization", "Bearer "+s.key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if bytes.Contains(raw, []byte(`\u0026`)) || !bytes.Contains(raw, []byte("&sig=")) {
					t.Errorf("GET job body has an escaped link: %s", raw)
				}
			}
			data := download(t, j.Output.URL)
			if int64(len(data)) != j.Output.Bytes {
				t.Errorf("downloaded %d bytes; output.bytes says %d", len(data), j.Output.Bytes)
			}
			checkMedia(t, data, tt.contentType, tt.duration)
			probe(t, data, tt.codec, tt.duration, tt.size)
		})
	}
}

func rank(status string) int {
	return map[string]int{"queued": 0, "processing": 1, "completed": 2, "failed": 2}[status]
}

func download(t *testing.T, url string) []byte {
	t.Helper()
	return downloadFrom(t, url, "http://127.0.0.1:")
}

// downloadFrom fetches url, which must start with prefix (an absolute link).
func downloadFrom(t *testing.T, url, prefix string) []byte {
	t.Helper()
	if !strings.HasPrefix(url, prefix) {
		t.Fatalf("output url %q is not an absolute local link", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d, %v", url, resp.StatusCode, err)
	}
	return b
}

// checkMedia checks the file with Go decoders, whether or not ffprobe exists.
func checkMedia(t *testing.T, data []byte, contentType string, seconds float64) {
	t.Helper()
	switch contentType {
	case "audio/mpeg":
		d, err := mp3.NewDecoder(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("mp3 decode: %v", err)
		}
		n, _ := io.Copy(io.Discard, d)
		got := float64(n) / 4 / float64(d.SampleRate())
		if got < seconds-0.1 || got > seconds+0.2 {
			t.Errorf("mp3 decodes to %.3f s; want %v", got, seconds)
		}
	case "audio/wav":
		if len(data) < 44 || string(data[:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
			t.Fatalf("not a WAV file")
		}
	case "video/mp4":
		if len(data) < 12 || string(data[4:8]) != "ftyp" {
			t.Fatalf("not an MP4 file")
		}
	}
}

// probe checks the file with ffprobe when it is installed (scripts/test.sh
// installs it; CI requires it).
func probe(t *testing.T, data []byte, codec string, seconds float64, size string) {
	t.Helper()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ffprobe is required in CI (scripts/test.sh installs ffmpeg)")
		}
		t.Log("ffprobe not installed; skipping the ffprobe check")
		return
	}
	f := filepath.Join(t.TempDir(), "media")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name,width,height", "-of", "json", f).Output()
	if err != nil {
		t.Fatalf("ffprobe refused the file: %v", err)
	}
	var p struct {
		Streams []struct {
			CodecName string `json:"codec_name"`
			Width     int    `json:"width"`
			Height    int    `json:"height"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) == 0 {
		t.Fatalf("ffprobe output %s: %v", out, err)
	}
	var d float64
	fmt.Sscanf(p.Format.Duration, "%g", &d)
	if p.Streams[0].CodecName != codec || d < seconds-0.1 || d > seconds+0.15 {
		t.Errorf("ffprobe: codec %s, duration %v; want %s, %v", p.Streams[0].CodecName, d, codec, seconds)
	}
	if size != "" {
		if got := fmt.Sprintf("%dx%d", p.Streams[0].Width, p.Streams[0].Height); got != size {
			t.Errorf("ffprobe: size %s; want %s", got, size)
		}
	}
}

// scanLines is used by the process tests to read a child's output.
func scanLines(r io.Reader, lines chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		default:
		}
	}
	close(lines)
}
