package chat

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestSend: Send answers as client.Do does: the answer itself, a
// redirect followed (the body sent again, a 302 turned into a GET), a
// 3xx without a Location returned as it is, a refused connection the same
// *url.Error; a client with a cookie jar goes through client.Do.
func TestSend(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "METHOD path body"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		switch r.URL.Path {
		case "/307":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/302":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/bare":
			w.WriteHeader(http.StatusTemporaryRedirect) // no Location
		case "/cookie":
			http.SetCookie(w, &http.Cookie{Name: "c", Value: "1"})
			io.WriteString(w, "ok")
		default:
			io.WriteString(w, "ok "+r.Method+" "+string(body))
		}
	}))
	defer srv.Close()
	plain := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	tests := []struct {
		name       string
		path       string
		status     int
		body, seen string
	}{
		{"answer", "/v1/chat/completions", 200, "ok POST {}", "POST /v1/chat/completions {}"},
		{"307 followed, the body again", "/307", 200, "ok POST {}", "POST /307 {}|POST /307 {}|POST /final {}"},
		{"302 followed as a GET", "/302", 200, "ok GET ", "POST /302 {}|POST /302 {}|GET /final "},
		{"3xx without a Location", "/bare", 307, "", "POST /bare {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			req, err := http.NewRequest(http.MethodPost, srv.URL+tt.path, bytes.NewReader([]byte("{}")))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := Send(plain, req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			got := strings.Join(seen, "|")
			mu.Unlock()
			if resp.StatusCode != tt.status || string(body) != tt.body || got != tt.seen {
				t.Errorf("Send(POST %s) = %d %q, upstream saw %q; want %d %q, %q", tt.path, resp.StatusCode, body, got, tt.status, tt.body, tt.seen)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		newReq := func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", bytes.NewReader([]byte("{}")))
			return req
		}
		_, got := Send(plain, newReq())
		_, want := plain.Do(newReq())
		var ue *url.Error
		if got == nil || want == nil || !errors.As(got, &ue) || got.Error() != want.Error() {
			t.Errorf("Send to a closed port = %v; want client.Do's %v, a *url.Error", got, want)
		}
	})

	t.Run("cookie jar: client.Do", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Transport: plain.Transport, Jar: jar}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/cookie", bytes.NewReader([]byte("{}")))
		resp, err := Send(c, req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(srv.URL)
		if len(jar.Cookies(u)) != 1 {
			t.Errorf("jar has %v after Send; want the answer's cookie (client.Do keeps it)", jar.Cookies(u))
		}
	})
}
