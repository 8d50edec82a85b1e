// Package localmedia keeps job outputs on local disk for `genway serve` and
// serves them through expiring links signed with HMAC-SHA256, the local
// counterpart of S3 presigned URLs.
//
// A link is baseURL + "/files/" + key + "?expires=<unix>&sig=<hex>", where
// sig = HMAC-SHA256(secret, key + "\n" + expires). The handler serves a file
// only for a valid, unexpired signature.
package localmedia

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/jobs"
)

var (
	_ jobs.Media        = (*Media)(nil)
	_ jobs.MediaDeleter = (*Media)(nil)
)

// SecretSize is the length of the signing secret in bytes.
const SecretSize = 32

// ErrInvalidKey is returned for a key that is empty, absolute, or climbs
// out of the media directory.
var ErrInvalidKey = errors.New("invalid media key")

// Media stores files under a directory. It is safe for concurrent use.
type Media struct {
	dir     string
	baseURL string
	secret  []byte
	now     func() time.Time
}

// New returns a Media storing under dir, making links under baseURL (e.g.
// "http://127.0.0.1:8080", no trailing slash needed) signed with secret.
func New(dir, baseURL string, secret []byte) *Media {
	return &Media{dir: dir, baseURL: strings.TrimRight(baseURL, "/"), secret: secret, now: time.Now}
}

// cleanKey checks key and returns its path on disk.
func (m *Media) cleanKey(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, ".") {
			return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return filepath.Join(m.dir, filepath.FromSlash(key)), nil
}

// contentTypeFile is the sidecar holding a file's content type.
func contentTypeFile(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".type")
}

// Put writes the bytes of r under key atomically: readers see the old file
// or the whole new one, never a part. With size >= 0 it fails if r yields
// another number of bytes; -1 takes what r yields. The content type is kept in a hidden sidecar file.
func (m *Media) Put(ctx context.Context, key, contentType string, r io.Reader, size int64) error {
	p, err := m.cleanKey(key)
	if err != nil {
		return fmt.Errorf("put media: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put media %s: %w", key, err)
	}
	if err := writeAtomic(p, r, size); err != nil {
		return fmt.Errorf("put media %s: %w", key, err)
	}
	// Until the sidecar lands, the type is derived from the extension.
	if contentType != "" {
		if err := writeAtomic(contentTypeFile(p), strings.NewReader(contentType), int64(len(contentType))); err != nil {
			return fmt.Errorf("put media %s: content type: %w", key, err)
		}
	}
	return nil
}

// writeAtomic copies r into a temporary file next to dst, syncs it and
// renames it over dst.
func writeAtomic(dst string, r io.Reader, size int64) error {
	tmp, err := writeTemp(filepath.Dir(dst), r, size, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // no-op after the rename
	return os.Rename(tmp, dst)
}

// writeTemp writes exactly size bytes from r to a new hidden temporary file
// in dir, synced and with mode perm, and returns its name.
func writeTemp(dir string, r io.Reader, size int64, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	if size >= 0 {
		r = io.LimitReader(r, size+1)
	}
	n, err := io.Copy(f, r)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("got %d bytes; want %d", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Delete removes the file of key and its content-type sidecar
// (jobs.MediaDeleter); a key with no file is no error, an invalid key is
// ErrInvalidKey. A link to it answers 404 from then on.
func (m *Media) Delete(ctx context.Context, key string) error {
	p, err := m.cleanKey(key)
	if err != nil {
		return fmt.Errorf("delete media: %w", err)
	}
	for _, f := range []string{p, contentTypeFile(p)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete media %s: %w", key, err)
		}
	}
	return nil
}

func (m *Media) sign(key string, expires int64) string {
	h := hmac.New(sha256.New, m.secret)
	io.WriteString(h, key+"\n"+strconv.FormatInt(expires, 10))
	return hex.EncodeToString(h.Sum(nil))
}

// URL returns a link to key valid for ttl.
func (m *Media) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if _, err := m.cleanKey(key); err != nil {
		return "", fmt.Errorf("media link: %w", err)
	}
	exp := m.now().Add(ttl).Unix()
	u := m.baseURL + "/files/" + escapePath(key) + "?expires=" + strconv.FormatInt(exp, 10) + "&sig=" + m.sign(key, exp)
	return u, nil
}

func escapePath(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// Handler serves GET and HEAD /files/{key...} for a valid, unexpired
// signature, with Range support: 403 for a missing, wrong or expired
// signature, 404 for a missing file, 405 for other methods. Mount it at
// "/files/". A file is served with its stored type if that is an allowed
// media type (jobs.ServedType; else as application/octet-stream, to
// download), its Content-Disposition (jobs.FileDisposition: inline for
// media) and jobs.FileHeaders (nosniff, a sandbox CSP).
func (m *Media) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		key, ok := strings.CutPrefix(r.URL.Path, "/files/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !m.valid(key, r.URL.Query().Get("expires"), r.URL.Query().Get("sig")) {
			http.Error(w, "invalid or expired link", http.StatusForbidden)
			return
		}
		p, err := m.cleanKey(key)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		// Only an allowed media type is served as itself, never sniffed,
		// in a sandbox that loads nothing: these links are on the
		// console's origin.
		h := w.Header()
		ct := jobs.ServedType(contentType(p))
		h.Set("Content-Type", ct)
		h.Set("Content-Disposition", jobs.FileDisposition(key, ct))
		for k, v := range jobs.FileHeaders {
			h.Set(k, v)
		}
		h.Set("Cache-Control", "private, max-age=300")
		http.ServeContent(w, r, path.Base(key), st.ModTime(), f)
	})
}

func (m *Media) valid(key, expires, sig string) bool {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || m.now().Unix() > exp {
		return false
	}
	want := m.sign(key, exp)
	return hmac.Equal([]byte(sig), []byte(want))
}

// contentType returns the stored content type of the file at p, or one
// derived from its extension.
func contentType(p string) string {
	if b, err := os.ReadFile(contentTypeFile(p)); err == nil && len(b) > 0 && len(b) < 256 {
		return string(b)
	}
	switch strings.ToLower(filepath.Ext(p)) {
	case ".mp3":
		return "audio/mpeg"
	case ".wav":
		return "audio/wav"
	case ".mp4":
		return "video/mp4"
	}
	if t := mime.TypeByExtension(filepath.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// LoadOrCreateSecret returns the SecretSize-byte signing secret kept in
// the file at path, creating it (mode 0600, from crypto/rand) if it does
// not exist. A file of another size is an error. (genway serve keeps the
// media links' secret and the console sessions' secret this way.)
func LoadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != SecretSize {
			return nil, fmt.Errorf("secret %s: %d bytes; want %d", path, len(b), SecretSize)
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secret %s: %w", path, err)
	}
	b = make([]byte, SecretSize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("secret %s: %w", path, err)
	}
	tmp, err := writeTemp(filepath.Dir(path), bytes.NewReader(b), SecretSize, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", path, err)
	}
	defer os.Remove(tmp)
	// Link, unlike Rename, fails if path exists: a secret made concurrently wins.
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return LoadOrCreateSecret(path)
	} else if err != nil {
		return nil, fmt.Errorf("secret %s: %w", path, err)
	}
	return b, nil
}

// Expire deletes the stored files (with their content-type sidecars)
// last written before now minus retention, and temporary files of
// interrupted writes older than an hour; it returns how many files it
// deleted and their bytes. A job whose output expired keeps its record;
// its link answers 404, as an expired S3 object does.
func (m *Media) Expire(retention time.Duration) (files int, bytes int64, err error) {
	now := m.now()
	cutoff, tmpCutoff := now.Add(-retention), now.Add(-time.Hour)
	err = filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			if errors.Is(werr, fs.ErrNotExist) {
				return nil
			}
			return werr
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		info, ierr := d.Info()
		if ierr != nil {
			return nil // removed meanwhile
		}
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			if info.ModTime().Before(tmpCutoff) {
				os.Remove(p)
			}
		case strings.HasPrefix(name, "."): // a sidecar: goes with its file
		case info.ModTime().Before(cutoff):
			if rerr := os.Remove(p); rerr == nil {
				files++
				bytes += info.Size()
				os.Remove(contentTypeFile(p))
			}
		}
		return nil
	})
	if err != nil {
		return files, bytes, fmt.Errorf("expire media: %w", err)
	}
	return files, bytes, nil
}
