package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/route"
)

// The routing tests run a request over two OpenAI-compatible upstreams:
// A serves openai/gpt-4o-mini, B serves groq/llama-3.3-70b-versatile.
const (
	modelA = "openai/gpt-4o-mini"
	modelB = "groq/llama-3.3-70b-versatile"
)

// upstreamFailures are the ways upstream A fails in these tests.
var upstreamFailures = map[string]func(w http.ResponseWriter, r *http.Request, stall <-chan struct{}){
	"503": func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
	},
	"400": func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		http.Error(w, `{"error":{"message":"bad messages","type":"invalid_request_error"}}`, http.StatusBadRequest)
	},
	// A 200 stream whose first event is an error: OpenAI's Responses
	// stream and OpenRouter send errors this way.
	"in-band": func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"error":{"message":"The server had an error","type":"server_error","code":"server_error"}}`+"\n\n")
	},
	// Headers and a role chunk, then nothing: a stall before the first
	// token.
	"stall": func(w http.ResponseWriter, _ *http.Request, stall <-chan struct{}) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-stall
	},
	// No byte at all.
	"silent": func(_ http.ResponseWriter, _ *http.Request, stall <-chan struct{}) { <-stall },
	// The connection drops before any content.
	"dropped": func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	},
	// Content, then a failure: too late to go elsewhere.
	"after-content": func(w http.ResponseWriter, _ *http.Request, _ <-chan struct{}) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("partial "))
		w.(http.Flusher).Flush()
		io.WriteString(w, `data: {"error":{"message":"The server had an error","type":"server_error"}}`+"\n\n")
	},
}

// okUpstream answers as an OpenAI-compatible upstream: "from <name>".
func okUpstream(name string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"from %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`, name)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("from "))
		io.WriteString(w, chunkLine(name))
		io.WriteString(w, finishLines)
	}
}

// counting is an upstream that counts its requests.
type counting struct {
	n       atomic.Int32
	handler http.HandlerFunc
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.handler(w, r)
}

// routeRig is a gateway over upstreams A and B, with a quick policy.
type routeRig struct {
	a, b  *counting
	srv   *httptest.Server
	stall chan struct{}
}

func newRouteRig(t *testing.T, failA string) *routeRig {
	t.Helper()
	return newRouteRigWith(t, failA, testCatalog(t), nil)
}

// newRouteRigWith is newRouteRig over cat, with intn drawing the order of
// an alias's targets (nil: math/rand/v2's).
func newRouteRigWith(t *testing.T, failA string, cat *catalog.Catalog, intn func(int) int) *routeRig {
	t.Helper()
	rig := &routeRig{stall: make(chan struct{})}
	fail := upstreamFailures[failA]
	rig.a = &counting{handler: func(w http.ResponseWriter, r *http.Request) { fail(w, r, rig.stall) }}
	if failA == "" {
		rig.a.handler = okUpstream("A")
	}
	rig.b = &counting{handler: okUpstream("B")}
	upA, upB := httptest.NewServer(rig.a), httptest.NewServer(rig.b)
	t.Cleanup(func() { close(rig.stall); upA.Close(); upB.Close() })
	hc := upstreams.NewHTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	router := route.New(route.Policy{Backoff: time.Millisecond, FirstToken: 300 * time.Millisecond, Budget: guard}, nil)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Router: router, Rand: intn, Providers: map[string]chat.Provider{
		"openai":    openai.New(openai.Config{Name: "openai", BaseURL: upA.URL, APIKey: "ka", HTTPClient: hc}),
		"groq":      openai.New(openai.Config{Name: "groq", BaseURL: upB.URL, APIKey: "kb", HTTPClient: hc}),
		"synthetic": synthetic.NewChat(),
	}})
	chatH, respH := ChatCompletions(gw, nil), Responses(gw, nil)
	mux := NewMux(nil,
		Route{Method: http.MethodPost, Pattern: "/v1/chat/completions", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chatH.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
		})},
		Route{Method: http.MethodPost, Pattern: "/v1/responses", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			respH.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
		})})
	rig.srv = httptest.NewServer(mux)
	t.Cleanup(rig.srv.Close)
	return rig
}

func (rig *routeRig) post(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(rig.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// chatBody is a chat request for modelA falling back to modelB.
func chatBody(stream bool) string {
	return fmt.Sprintf(`{"model":%q,"models":[%q],"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, modelA, modelB, stream)
}

// TestRouteFallback: whatever fails before the first token, the client
// gets B's answer, whole and well formed, named as B's, with the attempts
// in the header; a failure after content, or the client's own error, is
// not sent elsewhere.
func TestRouteFallback(t *testing.T) {
	tests := []struct {
		failA    string
		stream   bool
		attempts string // the header, "" to skip the check
		wantB    bool   // B answers
		aCalls   int32
	}{
		{"503", false, modelA + "=503, " + modelA + "=503, " + modelA + "=503, " + modelB + "=200", true, 3},
		{"503", true, modelA + "=503, " + modelA + "=503, " + modelA + "=503, " + modelB + "=200", true, 3},
		{"in-band", true, modelA + "=500, " + modelA + "=500, " + modelA + "=500, " + modelB + "=200", true, 3}, // server_error stands for 500
		{"stall", true, modelA + "=stall, " + modelA + "=stall, " + modelA + "=stall, " + modelB + "=200", true, 3},
		{"silent", true, modelA + "=stall, " + modelA + "=stall, " + modelA + "=stall, " + modelB + "=200", true, 3},
		{"silent", false, modelA + "=stall, " + modelA + "=stall, " + modelA + "=stall, " + modelB + "=200", true, 3},
		{"dropped", true, "", true, 3},
		{"400", false, modelA + "=400", false, 1},
		{"after-content", true, modelA + "=200", false, 1},
		{"", true, modelA + "=200", false, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s stream=%v", tt.failA, tt.stream), func(t *testing.T) {
			rig := newRouteRig(t, tt.failA)
			resp, body := rig.post(t, "/v1/chat/completions", chatBody(tt.stream))
			if tt.attempts != "" && resp.Header.Get(AttemptsHeader) != tt.attempts {
				t.Errorf("%s = %q; want %q", AttemptsHeader, resp.Header.Get(AttemptsHeader), tt.attempts)
			}
			if got := rig.a.n.Load(); got != tt.aCalls {
				t.Errorf("A called %d times; want %d", got, tt.aCalls)
			}
			if b := rig.b.n.Load(); (b == 1) != tt.wantB || b > 1 {
				t.Errorf("B called %d times; want B to answer: %v", b, tt.wantB)
			}
			switch {
			case tt.failA == "400":
				if resp.StatusCode != 400 {
					t.Errorf("status %d; want A's 400 (%s)", resp.StatusCode, body)
				}
			case tt.failA == "after-content":
				lines := strings.Split(strings.TrimSpace(body), "\n\n")
				if len(lines) != 3 || !strings.Contains(lines[1], "partial") || !strings.Contains(lines[2], `"error"`) || strings.Contains(body, "[DONE]") {
					t.Errorf("stream = %q; want the role chunk, A's content, one error event, no [DONE]", lines)
				}
			case !tt.stream:
				var c struct {
					Model   string `json:"model"`
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(body), &c); err != nil || resp.StatusCode != 200 {
					t.Fatalf("answer %d %s", resp.StatusCode, body)
				}
				want, wantModel := "from A", modelA
				if tt.wantB {
					want, wantModel = "from B", modelB
				}
				if c.Model != wantModel || c.Choices[0].Message.Content != want {
					t.Errorf("answer model %q content %q; want %q %q", c.Model, c.Choices[0].Message.Content, wantModel, want)
				}
			default:
				checkStream(t, body, tt.wantB)
			}
		})
	}
}

// checkStream checks a chat stream is well formed: one role chunk, the
// answering model in every chunk, its content only, the final chunk and
// [DONE].
func checkStream(t *testing.T, body string, fromB bool) {
	t.Helper()
	want, wantModel := "from A", modelA
	if fromB {
		want, wantModel = "from B", modelB
	}
	var content strings.Builder
	roles, done := 0, false
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			continue // a heartbeat
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("event %q", data)
		}
		if c.Model != wantModel {
			t.Errorf("chunk model %q; want %q", c.Model, wantModel)
		}
		if c.Choices[0].Delta.Role != "" {
			roles++
		}
		content.WriteString(c.Choices[0].Delta.Content)
	}
	if roles != 1 || content.String() != want || !done {
		t.Errorf("stream: %d role chunks, content %q, [DONE] %v; want 1, %q, true\n%s", roles, content.String(), done, want, body)
	}
}

// TestRouteResponses: the Responses API falls back the same way, and the
// response object names the model that answered.
func TestRouteResponses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			rig := newRouteRig(t, "in-band")
			resp, body := rig.post(t, "/v1/responses", fmt.Sprintf(`{"model":%q,"models":[%q],"stream":%v,"input":"hi"}`, modelA, modelB, stream))
			if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get(AttemptsHeader), modelB+"=200") {
				t.Fatalf("status %d, attempts %q: %s", resp.StatusCode, resp.Header.Get(AttemptsHeader), body)
			}
			if !stream {
				if !strings.Contains(body, `"model":"`+modelB+`"`) || !strings.Contains(body, "from B") {
					t.Errorf("response %s; want B's", body)
				}
				return
			}
			if n := strings.Count(body, "event: response.created"); n != 1 {
				t.Errorf("%d response.created events; want 1:\n%s", n, body)
			}
			created := body[strings.Index(body, "event: response.created"):]
			created = created[:strings.Index(created, "\n\n")]
			if !strings.Contains(created, `"model":"`+modelB+`"`) || strings.Contains(body, modelA) ||
				!strings.Contains(body, "event: response.completed") || !strings.Contains(body, `"delta":"B"`) {
				t.Errorf("stream does not name and carry B's answer only:\n%s", body)
			}
		})
	}
}

// TestRouteCandidates: the request's models, the lead from models[0],
// skipping a candidate that cannot serve the request, and the refusals.
func TestRouteCandidates(t *testing.T) {
	img := `{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}]}`
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantModel  string
		wantParam  string
	}{
		{"models[0] leads without model", `{"models":["synthetic/echo","synthetic/thinker"],"messages":[{"role":"user","content":"hi"}]}`, 200, "synthetic/echo", ""},
		{"a vision request skips a text-only lead", `{"model":"synthetic/echo","models":["synthetic/thinker"],"messages":[` + img + `]}`, 200, "synthetic/thinker", ""},
		{"no candidate sees images: the lead's refusal", `{"model":"synthetic/echo","models":["` + modelA + `"],"messages":[` + img + `]}`, 200, modelA, ""},
		{"no candidate at all", `{"model":"synthetic/echo","models":[],"messages":[` + img + `]}`, 400, "", "messages[0].content[1]"},
		{"an unknown id in models", `{"model":"synthetic/echo","models":["synthetic/thinker","nope/nope"],"messages":[{"role":"user","content":"hi"}]}`, 404, "", "models[1]"},
		{"a job model in models", `{"model":"synthetic/echo","models":["synthetic-music"],"messages":[{"role":"user","content":"hi"}]}`, 400, "", "models[0]"},
		{"too many models", `{"model":"synthetic/echo","models":["a","b","c","d","e","f","g","h","i"],"messages":[{"role":"user","content":"hi"}]}`, 400, "", "models"},
		{"neither model nor models", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "", "model"},
	}
	rig := newRouteRig(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rig.post(t, "/v1/chat/completions", tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d; want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			var out struct {
				Model string `json:"model"`
				Error *struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal([]byte(body), &out)
			if tt.wantStatus == 200 && out.Model != tt.wantModel {
				t.Errorf("answered by %q; want %q", out.Model, tt.wantModel)
			}
			if tt.wantParam != "" && (out.Error == nil || out.Error.Param == nil || *out.Error.Param != tt.wantParam) {
				t.Errorf("error %s; want param %q", body, tt.wantParam)
			}
		})
	}
}

// TestRouteParallelStreams: many concurrent streams with A failing in
// every way before its first token: each stream is B's, well formed.
func TestRouteParallelStreams(t *testing.T) {
	rig := newRouteRig(t, "in-band")
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := rig.post(t, "/v1/chat/completions", chatBody(true))
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
				return
			}
			checkStream(t, body, true)
		}()
	}
	wg.Wait()
}

// aliasCatalog is the default catalog with the alias "balanced": modelA
// (weight 3) and modelB (weight 1).
func aliasCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat := testCatalog(t)
	cat.Models = append(cat.Models, catalog.Model{ID: "balanced", Type: catalog.TypeChat,
		Targets: []catalog.Target{{Model: modelA, Weight: 3}, {Model: modelB, Weight: 1}}})
	b, err := json.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	if cat, err = catalog.Parse(b, catalog.Pricing{}); err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestRouteAlias: a request to an alias whose first drawn target (A)
// fails with 503 is answered by the other (B), named as B's, with both in
// the attempts header, streamed or not, chat or Responses.
func TestRouteAlias(t *testing.T) {
	attempts := modelA + "=503, " + modelA + "=503, " + modelA + "=503, " + modelB + "=200"
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			rig := newRouteRigWith(t, "503", aliasCatalog(t), func(int) int { return 0 }) // A is drawn first
			resp, body := rig.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"balanced","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
			if resp.StatusCode != 200 || resp.Header.Get(AttemptsHeader) != attempts {
				t.Fatalf("status %d, %s %q; want 200, %q: %s", resp.StatusCode, AttemptsHeader, resp.Header.Get(AttemptsHeader), attempts, body)
			}
			if rig.a.n.Load() != 3 || rig.b.n.Load() != 1 {
				t.Errorf("A called %d times, B %d; want 3 and 1", rig.a.n.Load(), rig.b.n.Load())
			}
			if stream {
				checkStream(t, body, true)
			} else if !strings.Contains(body, `"model":"`+modelB+`"`) || !strings.Contains(body, "from B") {
				t.Errorf("answer %s; want B's, named as B's", body)
			}
			resp, body = rig.post(t, "/v1/responses", fmt.Sprintf(`{"model":"balanced","stream":%v,"input":"hi"}`, stream))
			if resp.StatusCode != 200 || !strings.Contains(body, `"model":"`+modelB+`"`) || strings.Contains(body, `"model":"balanced"`) {
				t.Errorf("Responses: status %d: %s; want B's answer, named as B's", resp.StatusCode, body)
			}
		})
	}
}
