package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/providers/synthetic"
)

// blockingRecorder is a UsageRecorder that, when called, waits (at most
// 10 s) for the test to say it has read the whole response: if the
// response was not delivered before the recorder ran, the wait times out,
// and delivered is false.
type blockingRecorder struct {
	called chan struct{} // closed at the first call
	read   chan struct{} // closed by the test once it has the response

	mu        sync.Mutex
	calls     []string
	delivered bool
}

func (*blockingRecorder) InMemory() bool                         { return false }
func (*blockingRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

func (r *blockingRecorder) Record(_ context.Context, rec credits.Record) error {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("%s %s %d %d %s", rec.Account, rec.Model, rec.Tokens.Prompt, rec.Tokens.Completion, rec.Cost))
	first := len(r.calls) == 1
	r.mu.Unlock()
	if first {
		close(r.called)
	}
	select {
	case <-r.read:
		r.mu.Lock()
		r.delivered = true
		r.mu.Unlock()
	case <-time.After(10 * time.Second):
	}
	return nil
}

// TestChatRecordsUsageAfterResponse checks that usage is recorded only once
// the client has the whole response: the JSON completion, or the stream up
// to data: [DONE], while the handler has not returned yet.
func TestChatRecordsUsageAfterResponse(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		want   []string // in the response
	}{
		{"complete", false, []string{`"content":"You said: hello world"`, `"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":0,"cache_write_1h_tokens":0},"completion_tokens_details":{"reasoning_tokens":0},"cost":0}}`}},
		{"stream", true, []string{`"content":" world"`, `"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":0,"cache_write_1h_tokens":0},"completion_tokens_details":{"reasoning_tokens":0},"cost":0}}`, "data: [DONE]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &blockingRecorder{called: make(chan struct{}), read: make(chan struct{})}
			gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": synthetic.NewChat()}, Usage: rec})
			srv := chatServer(t, gw)
			body := fmt.Sprintf(`{"model":"synthetic/echo","stream":%v,"messages":[{"role":"user","content":"hello world"}]}`, tt.stream)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("POST = %v", err)
			}
			defer resp.Body.Close()
			var once sync.Once
			readAll := func() { once.Do(func() { close(rec.read) }) }
			defer readAll() // on failure, do not keep the handler waiting
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST status = %d; want 200", resp.StatusCode)
			}
			var got string
			if tt.stream {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					got += sc.Text() + "\n"
					if sc.Text() == "data: [DONE]" {
						break
					}
				}
			} else {
				b, err := io.ReadAll(resp.Body) // Content-Length bytes: not the end of the handler
				if err != nil {
					t.Fatalf("read body = %v", err)
				}
				got = string(b)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Fatalf("response = %q; want it to contain %q", got, w)
				}
			}
			readAll()
			select {
			case <-rec.called:
			case <-time.After(10 * time.Second):
				t.Fatal("usage not recorded within 10 s of reading the response")
			}
			// Wait for the handler, so that the recorder has returned.
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			srv.Close()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if want := "acct synthetic/echo 2 4 0"; len(rec.calls) != 1 || rec.calls[0] != want {
				t.Errorf("Record calls = %q; want [%q]", rec.calls, want)
			}
			if !rec.delivered {
				t.Errorf("usage was recorded before the client had the whole response")
			}
		})
	}
}

// memRecorder is an in-memory UsageRecorder (InMemory true), like
// serve's BufferedRecorder: the handler records with it without flushing
// first.
type memRecorder struct {
	mu      sync.Mutex
	calls   int
	records []credits.Record
}

func (r *memRecorder) Record(_ context.Context, rec credits.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.records = append(r.records, rec)
	return nil
}

func (r *memRecorder) InMemory() bool { return true }

func (*memRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

// TestChatRecordsUsageInMemory: with a recorder that needs no flush first,
// every completion, streamed or not, chat or Responses, is still recorded
// once, its record's id the answer's (chatcmpl-..., resp_...) and its
// kind the API's.
func TestChatRecordsUsageInMemory(t *testing.T) {
	for _, api := range []struct{ path, kind, prefix, input string }{
		{"/v1/chat/completions", credits.KindChat, "chatcmpl-", `"messages":[{"role":"user","content":"hello world"}]`},
		{"/v1/responses", credits.KindResponses, "resp_", `"input":"hello world"`},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprint(api.kind, " stream=", stream), func(t *testing.T) {
				rec := &memRecorder{}
				gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": synthetic.NewChat()}, Usage: rec})
				h := ChatCompletions(gw, nil)
				if api.kind == credits.KindResponses {
					h = Responses(gw, nil)
				}
				srv := httptest.NewServer(NewMux(nil, Route{Method: http.MethodPost, Pattern: api.path,
					Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
					})}))
				defer srv.Close()
				body := fmt.Sprintf(`{"model":"synthetic/echo","stream":%v,%s}`, stream, api.input)
				resp, err := http.Post(srv.URL+api.path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatalf("POST = %v", err)
				}
				b, _ := io.ReadAll(resp.Body) // the handler has returned once the body ends
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST status = %d; want 200", resp.StatusCode)
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if rec.calls != 1 {
					t.Fatalf("Record calls = %d; want 1", rec.calls)
				}
				r := rec.records[0]
				if !strings.HasPrefix(r.ID, api.prefix) || r.Kind != api.kind || !strings.Contains(string(b), `"id":"`+r.ID+`"`) || r.Stream != stream {
					t.Errorf("record %+v; want kind %s, the answer's id (%s...) in %s", r, api.kind, api.prefix, b)
				}
			})
		}
	}
}
