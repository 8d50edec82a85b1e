package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// consoleCSRF finds a console page's CSRF token.
var consoleCSRF = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

// consoleClient is a browser-like client of the console: a cookie jar,
// redirects not followed.
func consoleClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// consoleDo sends a console request and returns its status and body.
func consoleDo(t *testing.T, c *http.Client, method, u string, form url.Values) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	if method == "POST" {
		resp, err = c.PostForm(u, form)
	} else {
		resp, err = c.Get(u)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleSessionsEndToEnd runs the console's sessions through genway
// serve on both backends: the session secret is a 0600 file of its own
// and survives a restart; a cookie forged from the token's hash (what
// admin-token.sha256 holds) grants nothing; signing out ends the session
// on the server, so the cookie replayed is refused.
func TestConsoleSessionsEndToEnd(t *testing.T) {
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			dir := t.TempDir()
			if backend == "aws" {
				if testing.Short() {
					t.Skip("starts moto_server")
				}
				_, env, dir = awsServe(t)
			}
			env = maps.Clone(env)
			env["GENWAY_ADMIN_TOKEN"] = testAdminToken
			s := startServer(t, dir, env)
			if fi, err := os.Stat(filepath.Join(dir, consoleSessionFile)); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 32 {
				t.Fatalf("the console session secret file: %v, %v; want a 0600 file of 32 bytes", fi, err)
			}

			// A cookie and CSRF token signed as before, with keys derived
			// from the token's SHA-256 alone: refused.
			hash := sha256.Sum256([]byte(testAdminToken))
			forge := func(purpose, msg string) string {
				k := sha256.Sum256(append([]byte("genway console "+purpose+"\x00"), hash[:]...))
				m := hmac.New(sha256.New, k[:])
				m.Write([]byte(msg))
				return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
			}
			id := "forged" + hex.EncodeToString(hash[:6])
			payload := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + "." + id
			forged := consoleClient()
			u, _ := url.Parse(s.base + "/console/")
			forged.Jar.SetCookies(u, []*http.Cookie{{Name: "genway_console", Value: payload + "." + forge("session", payload), Path: "/console/"}})
			if code, _ := consoleDo(t, forged, "POST", s.base+"/console/accounts/dev/grant",
				url.Values{"csrf": {forge("csrf", id)}, "amount": {"777"}, "note": {"forged"}}); code != http.StatusUnauthorized {
				t.Errorf("a grant with a cookie forged from the token's hash = %d; want 401", code)
			}

			// Sign in, sign out, replay.
			c := consoleClient()
			if code, _ := consoleDo(t, c, "POST", s.base+"/console/signin", url.Values{"token": {testAdminToken}}); code != http.StatusSeeOther {
				t.Fatalf("sign in = %d; want 303", code)
			}
			code, page := consoleDo(t, c, "GET", s.base+"/console/models", nil)
			m := consoleCSRF.FindStringSubmatch(page)
			if code != 200 || m == nil {
				t.Fatalf("signed in: GET /console/models = %d; want the page with its CSRF token", code)
			}
			kept := c.Jar.Cookies(u)
			// A restart keeps the secret and the session.
			s.stop()
			s = startServer(t, dir, env)
			u, _ = url.Parse(s.base + "/console/")
			c.Jar.SetCookies(u, kept)
			if code, _ := consoleDo(t, c, "GET", s.base+"/console/models", nil); code != 200 {
				t.Errorf("after a restart: GET /console/models = %d; want the session kept", code)
			}
			if code, _ := consoleDo(t, c, "POST", s.base+"/console/signout", url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther {
				t.Fatalf("sign out = %d; want 303", code)
			}
			replay := consoleClient()
			replay.Jar.SetCookies(u, kept)
			if code, _ := consoleDo(t, replay, "GET", s.base+"/console/models", nil); code != http.StatusSeeOther {
				t.Errorf("the signed-out cookie replayed: GET /console/models = %d; want a redirect to sign in", code)
			}
			if code, _ := consoleDo(t, replay, "POST", s.base+"/console/accounts/dev/grant",
				url.Values{"csrf": {m[1]}, "amount": {"777"}}); code != http.StatusUnauthorized {
				t.Errorf("a grant with the signed-out cookie = %d; want 401", code)
			}
			var b balance
			if code, _ := s.do(t, "GET", "/v1/credits", nil, nil, &b); code != 200 || b.Balance != 100000*credits.Credit {
				t.Errorf("dev's balance = %s (%d); want the 100000 it started with: no refused grant applied", b.Balance, code)
			}
		})
	}
}
