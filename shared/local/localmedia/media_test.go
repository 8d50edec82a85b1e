package localmedia

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testSecret = bytes.Repeat([]byte{7}, SecretSize)

func newTest(t *testing.T) (*Media, string) {
	t.Helper()
	dir := t.TempDir()
	m := New(dir, "http://127.0.0.1:8080/", testSecret)
	m.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	return m, dir
}

func put(t *testing.T, m *Media, key, ct string, data []byte) {
	t.Helper()
	if err := m.Put(context.Background(), key, ct, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q) = %v; want nil", key, err)
	}
}

func TestPutWritesFile(t *testing.T) {
	m, dir := newTest(t)
	data := []byte("ID3 fake mp3 data")
	put(t, m, "jobs/acct/job_x-1.mp3", "audio/mpeg", data)
	got, err := os.ReadFile(filepath.Join(dir, "jobs", "acct", "job_x-1.mp3"))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("file = %q, %v; want %q", got, err, data)
	}
	put(t, m, "jobs/acct/job_x-1.mp3", "audio/mpeg", []byte("v2")) // overwrite
	if got, _ := os.ReadFile(filepath.Join(dir, "jobs", "acct", "job_x-1.mp3")); string(got) != "v2" {
		t.Errorf("file after overwrite = %q; want v2", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "jobs", "acct"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestPutRejects(t *testing.T) {
	m, dir := newTest(t)
	tests := []struct {
		name string
		key  string
		data string
		size int64
	}{
		{"parent", "../escape.mp3", "x", 1},
		{"inner parent", "jobs/../../escape.mp3", "x", 1},
		{"absolute", "/etc/escape.mp3", "x", 1},
		{"empty", "", "x", 1},
		{"empty part", "jobs//x.mp3", "x", 1},
		{"hidden", "jobs/.x.mp3.type", "x", 1},
		{"backslash", `jobs\..\x.mp3`, "x", 1},
		{"short body", "jobs/short.mp3", "abc", 10},
		{"long body", "jobs/long.mp3", "abcdef", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Put(context.Background(), tt.key, "audio/mpeg", strings.NewReader(tt.data), tt.size)
			if err == nil {
				t.Errorf("Put(%q, %d bytes of %d) = nil; want an error", tt.key, len(tt.data), tt.size)
			}
		})
	}
	if _, err := m.URL(context.Background(), "../x", time.Hour); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("URL(../x) = %v; want ErrInvalidKey", err)
	}
	var files []string
	filepath.WalkDir(filepath.Dir(dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("files after refused puts = %v; want none", files)
	}
}

func TestHandler(t *testing.T) {
	m, _ := newTest(t)
	data := bytes.Repeat([]byte("0123456789"), 100)
	put(t, m, "jobs/acct/job_x-1.mp3", "audio/mpeg", data)
	put(t, m, "jobs/acct/job_y-1.wav", "", []byte("RIFF...."))
	put(t, m, "jobs/acct/job_z-1.mp4", "video/mp4", []byte("....ftypisom"))
	ctx := context.Background()
	link := func(key string, ttl time.Duration) string {
		u, err := m.URL(ctx, key, ttl)
		if err != nil {
			t.Fatalf("URL(%q) = %v", key, err)
		}
		if !strings.HasPrefix(u, "http://127.0.0.1:8080/files/"+key+"?expires=") {
			t.Fatalf("URL(%q) = %q; want it under http://127.0.0.1:8080/files/", key, u)
		}
		return u
	}
	good := link("jobs/acct/job_x-1.mp3", time.Hour)
	expired := link("jobs/acct/job_x-1.mp3", -time.Second)
	missing := link("jobs/acct/nothing.mp3", time.Hour)
	tampered := strings.Replace(good, "job_x-1.mp3", "job_z-1.mp4", 1)
	u, _ := url.Parse(good)
	q := u.Query()
	q.Set("expires", "9999999999")
	u.RawQuery = q.Encode()
	extended := u.String()

	tests := []struct {
		name, method, url, rng string
		status                 int
		ctype                  string
		body                   []byte
	}{
		{"get", http.MethodGet, good, "", http.StatusOK, "audio/mpeg", data},
		{"head", http.MethodHead, good, "", http.StatusOK, "audio/mpeg", nil},
		{"range", http.MethodGet, good, "bytes=10-19", http.StatusPartialContent, "audio/mpeg", data[10:20]},
		{"wav by extension", http.MethodGet, link("jobs/acct/job_y-1.wav", time.Hour), "", http.StatusOK, "audio/wav", []byte("RIFF....")},
		{"mp4", http.MethodGet, link("jobs/acct/job_z-1.mp4", time.Hour), "", http.StatusOK, "video/mp4", []byte("....ftypisom")},
		{"expired", http.MethodGet, expired, "", http.StatusForbidden, "", nil},
		{"other key", http.MethodGet, tampered, "", http.StatusForbidden, "", nil},
		{"extended expiry", http.MethodGet, extended, "", http.StatusForbidden, "", nil},
		{"no signature", http.MethodGet, "http://127.0.0.1:8080/files/jobs/acct/job_x-1.mp3", "", http.StatusForbidden, "", nil},
		{"missing file", http.MethodGet, missing, "", http.StatusNotFound, "", nil},
		{"post", http.MethodPost, good, "", http.StatusMethodNotAllowed, "", nil},
	}
	h := m.Handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.url, nil)
			if tt.rng != "" {
				req.Header.Set("Range", tt.rng)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("%s %s = %d; want %d (%s)", tt.method, tt.url, res.StatusCode, tt.status, body)
			}
			if tt.ctype != "" && res.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type = %q; want %q", res.Header.Get("Content-Type"), tt.ctype)
			}
			if tt.body != nil && !bytes.Equal(body, tt.body) {
				t.Errorf("body = %q; want %q", body, tt.body)
			}
		})
	}
}

// TestHandlerHeaders: every file is served with nosniff, a sandbox CSP
// and a Content-Disposition; only an allowed media type is served as
// itself: HTML, SVG or a type stored before the allow-list (or none) is a
// download of application/octet-stream, so it never runs on this origin.
func TestHandlerHeaders(t *testing.T) {
	m, _ := newTest(t)
	tests := []struct {
		key, stored, wantType, wantDisposition string
	}{
		{"jobs/acct/job_x-1.mp3", "audio/mpeg", "audio/mpeg", `inline; filename="job_x-1.mp3"`},
		{"jobs/acct/job_x-2.wav", "audio/x-wav", "audio/wav", `inline; filename="job_x-2.wav"`},
		{"jobs/acct/job_v-1.mp4", "video/mp4; codecs=avc1", "video/mp4", `inline; filename="job_v-1.mp4"`},
		{"images/acct/img_1-0.png", "image/png", "image/png", `inline; filename="img_1-0.png"`},
		{"jobs/acct/job_h-1.bin", "text/html", "application/octet-stream", `attachment; filename="job_h-1.bin"`},
		{"jobs/acct/job_s-1.bin", "image/svg+xml", "application/octet-stream", `attachment; filename="job_s-1.bin"`},
		{"jobs/acct/job_h-2.html", "", "application/octet-stream", `attachment; filename="job_h-2.html"`},
		{"jobs/acct/job_q-1.mp3", `audio/mpeg"; x=1`, "application/octet-stream", `attachment; filename="job_q-1.mp3"`}, // unparsable
		{"jobs/a b/we\"ird;name.mp3", "audio/mpeg", "audio/mpeg", `inline; filename="we_ird_name.mp3"`},
	}
	for _, tt := range tests {
		put(t, m, tt.key, tt.stored, []byte("<html><script>alert(1)</script></html>"))
		u, err := m.URL(context.Background(), tt.key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		h := rec.Result().Header
		if rec.Code != http.StatusOK || h.Get("Content-Type") != tt.wantType || h.Get("Content-Disposition") != tt.wantDisposition {
			t.Errorf("GET %s (stored as %q) = %d, %q, %q; want 200, %q, %q", tt.key, tt.stored, rec.Code,
				h.Get("Content-Type"), h.Get("Content-Disposition"), tt.wantType, tt.wantDisposition)
		}
		if csp := h.Get("Content-Security-Policy"); h.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(csp, "sandbox ") ||
			!strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script") {
			t.Errorf("GET %s: X-Content-Type-Options %q, Content-Security-Policy %q; want nosniff and a sandbox that loads nothing",
				tt.key, h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"))
		}
	}
}

func TestDelete(t *testing.T) {
	m, dir := newTest(t)
	ctx := context.Background()
	const key = "videos/acct/job_video_x.mp4"
	put(t, m, key, "video/mp4", []byte("....ftypisom"))
	put(t, m, "videos/acct/job_video_y.mp4", "video/mp4", []byte("other"))
	link, err := m.URL(ctx, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // a key already gone is no error
		if err := m.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q) #%d = %v; want nil", key, i+1, err)
		}
	}
	for _, f := range []string{"job_video_x.mp4", ".job_video_x.mp4.type"} {
		if _, err := os.Stat(filepath.Join(dir, "videos", "acct", f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Delete: %v; want it gone", f, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "videos", "acct", "job_video_y.mp4")); err != nil || string(b) != "other" {
		t.Errorf("another file after Delete = %q, %v; want it kept", b, err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, link, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET of a deleted file's link = %d; want 404", rec.Code)
	}
	for _, bad := range []string{"", "../x", "/abs", "a/.hidden"} {
		if err := m.Delete(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v; want ErrInvalidKey", bad, err)
		}
	}
}

// TestHandlerOverHTTP serves a link through a real server on 127.0.0.1.
func TestHandlerOverHTTP(t *testing.T) {
	m, _ := newTest(t)
	m.now = time.Now
	mux := http.NewServeMux()
	mux.Handle("/files/", m.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	m.baseURL = srv.URL
	put(t, m, "jobs/a/b.mp3", "audio/mpeg", []byte("hello"))
	u, err := m.URL(context.Background(), "jobs/a/b.mp3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "hello" {
		t.Errorf("GET %s = %d %q; want 200 hello", u, res.StatusCode, body)
	}
}

func TestLoadOrCreateSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "media.key")
	first, err := LoadOrCreateSecret(path)
	if err != nil || len(first) != SecretSize {
		t.Fatalf("LoadOrCreateSecret(new) = %x, %v; want %d bytes", first, err, SecretSize)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	again, err := LoadOrCreateSecret(path)
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("LoadOrCreateSecret(existing) = %x, %v; want %x", again, err, first)
	}
	other, err := LoadOrCreateSecret(filepath.Join(t.TempDir(), "media.key"))
	if err != nil || bytes.Equal(other, first) {
		t.Errorf("LoadOrCreateSecret(other dir) = %x, %v; want a different secret", other, err)
	}
	bad := filepath.Join(t.TempDir(), "short.key")
	os.WriteFile(bad, []byte("short"), 0o600)
	if _, err := LoadOrCreateSecret(bad); err == nil {
		t.Errorf("LoadOrCreateSecret(5-byte file) = nil; want an error")
	}
}

// TestSignature pins the link format, so other tools can make links.
func TestSignature(t *testing.T) {
	m, _ := newTest(t)
	u, err := m.URL(context.Background(), "jobs/a/b.mp3", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// HMAC-SHA256(0x07 * 32, "jobs/a/b.mp3\n1700003600")
	want := "http://127.0.0.1:8080/files/jobs/a/b.mp3?expires=1700003600&sig=1518bce9f74aa565e4ab4de3673c78a25bdb65720f719c13e85e2204ef5fa1f5"
	if u != want {
		t.Errorf("URL = %q; want %q", u, want)
	}
}

func TestExpire(t *testing.T) {
	dir := t.TempDir()
	m := New(dir, "http://127.0.0.1:1", make([]byte, SecretSize))
	ctx := context.Background()
	for _, key := range []string{"jobs/a/old.mp3", "jobs/a/new.mp3", "jobs/b/old.wav"} {
		if err := m.Put(ctx, key, "audio/mpeg", strings.NewReader("data"), 4); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-31 * 24 * time.Hour)
	for _, key := range []string{"jobs/a/old.mp3", "jobs/b/old.wav"} {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(key)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(dir, "jobs", "a", ".tmp-123")
	os.WriteFile(stale, []byte("x"), 0o644)
	os.Chtimes(stale, old, old)
	files, n, err := m.Expire(30 * 24 * time.Hour)
	if err != nil || files != 2 || n != 8 {
		t.Fatalf("Expire = %d files, %d bytes, %v; want 2 files, 8 bytes", files, n, err)
	}
	for key, want := range map[string]bool{"jobs/a/old.mp3": false, "jobs/b/old.wav": false, "jobs/a/new.mp3": true,
		"jobs/a/.old.mp3.type": false, "jobs/a/.new.mp3.type": true, "jobs/a/.tmp-123": false} {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(key)))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v; want %v", key, got, want)
		}
	}
}
