package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"go/format"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/webhooks"
)

// verify is docs/api.md's Go receiver example, word for word (the test
// reads it back from the docs): it must accept what Genway signs and
// refuse the rest.
func verify(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts, terr := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || terr != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false // also refuses replays of old requests
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.%s", h.Get("webhook-id"), ts, body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) { // two during a rotation
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// TestDocsReceiver checks that docs/api.md shows verify as it is here,
// and that verify takes Genway's signatures (one, and the two of a
// rotation) and refuses a changed body, another secret and an old
// timestamp.
func TestDocsReceiver(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("docs_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block := func(s, start string) string {
		i := strings.Index(s, start)
		if i < 0 {
			t.Fatalf("no %q", start)
		}
		j := strings.Index(s[i:], "\n}\n")
		if j < 0 {
			t.Fatalf("%q has no end", start)
		}
		out, err := format.Source([]byte(s[i : i+j+2]))
		if err != nil {
			t.Fatalf("%q: %v", start, err)
		}
		return string(out)
	}
	const start = "func verify(secret string, h http.Header, body []byte) bool {"
	if d, c := block(string(doc), start), block(string(src), start); d != c {
		t.Errorf("docs/api.md's verify differs from the one tested here:\ndocs:\n%s\ntest:\n%s", d, c)
	}

	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	old, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string) []byte {
		k, err := webhooks.Key(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	body := []byte(`{"id":"evt_sfx_1","type":"job.completed"}`)
	now := time.Now().Unix()
	headers := func(sig string, ts int64) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "evt_sfx_1")
		h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		h.Set("webhook-signature", sig)
		return h
	}
	one := webhooks.Sign(key(secret), "evt_sfx_1", now, body)
	both := one + " " + webhooks.Sign(key(old), "evt_sfx_1", now, body)
	for _, c := range []struct {
		name   string
		secret string
		h      http.Header
		body   []byte
		want   bool
	}{
		{"signed", secret, headers(one, now), body, true},
		{"rotation: the new secret", secret, headers(both, now), body, true},
		{"rotation: the old secret", old, headers(both, now), body, true},
		{"another secret", old, headers(one, now), body, false},
		{"changed body", secret, headers(one, now), append([]byte(nil), append(body, ' ')...), false},
		{"old timestamp", secret, headers(webhooks.Sign(key(secret), "evt_sfx_1", now-600, body), now-600), body, false},
		{"no signature", secret, headers("", now), body, false},
	} {
		if got := verify(c.secret, c.h, c.body); got != c.want {
			t.Errorf("%s: verify = %v, want %v", c.name, got, c.want)
		}
	}
}
