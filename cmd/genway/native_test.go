package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// nativeVendor is a fake OpenAI Responses API or Anthropic Messages API
// upstream on 127.0.0.1, speaking the vendor's wire (the answers of the
// adapters' testdata): each request is recorded; a streamed one gets
// stream, a whole one whole. By the request's text: "please fail" gets
// the stream's opening events and then an error event (a failure before
// the first content); "please cut" gets the stream up to cut, then the
// connection dies.
type nativeVendor struct {
	srv               *httptest.Server
	mu                sync.Mutex
	reqs              []upstreamRequest
	stream, whole     string
	opening, fail, at string // "please fail": opening + fail; "please cut": stream up to at
}

func newNativeVendor(t *testing.T, stream, whole, opening, fail, cutAt string) *nativeVendor {
	v := &nativeVendor{stream: stream, whole: whole, opening: opening, fail: fail, at: cutAt}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.reqs = append(v.reqs, upstreamRequest{r.URL.Path, r.Header.Clone(), b})
		v.mu.Unlock()
		var body struct{ Stream bool }
		json.Unmarshal(b, &body)
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, v.whole)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch {
		case bytes.Contains(b, []byte("please fail")):
			io.WriteString(w, v.opening+v.fail)
		case bytes.Contains(b, []byte("please cut")):
			io.WriteString(w, v.stream[:strings.Index(v.stream, v.at)])
			hangUp(t, w)
		default:
			io.WriteString(w, v.stream)
		}
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// last returns the last request's body, decoded, and its headers.
func (v *nativeVendor) last(t *testing.T) (map[string]any, upstreamRequest) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.reqs) == 0 {
		t.Fatal("no request reached the upstream")
	}
	r := v.reqs[len(v.reqs)-1]
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("upstream body %s: %v", r.body, err)
	}
	return m, r
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nativeVendors starts the fake OpenAI and Anthropic upstreams, and
// returns them with the serve environment that points at them.
func nativeVendors(t *testing.T) (oai, ant *nativeVendor, env map[string]string) {
	oaiStream := readFile(t, "../../shared/providers/openai/testdata/responses_native.sse")
	oai = newNativeVendor(t, oaiStream, readFile(t, "../../shared/providers/openai/testdata/responses_native.json"),
		oaiStream[:strings.Index(oaiStream, "event: response.output_item.added")],
		"event: error\ndata: {\"type\":\"error\",\"sequence_number\":2,\"code\":\"server_error\",\"message\":\"The server had an error.\",\"param\":null}\n\n",
		"event: response.output_text.done")
	antStream := readFile(t, "../../shared/providers/anthropic/testdata/stream_native.sse")
	ant = newNativeVendor(t, antStream, readFile(t, "../../shared/providers/anthropic/testdata/message_thinking.json"),
		antStream[:strings.Index(antStream, "event: content_block_start")],
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"event: future_event")
	return oai, ant, map[string]string{"OPENAI_API_KEY": "sk-oai", "OPENAI_BASE_URL": oai.srv.URL + "/v1",
		"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": ant.srv.URL, "GENWAY_USAGE_FLUSH": "20ms"}
}

// wireEvent is one server-sent event as the client got it.
type wireEvent struct {
	name string
	data map[string]any
}

// postNative posts body (a JSON value) to path with headers, and returns
// the status, the headers and the answer: its events (stream), or its
// body as one event named "" (a whole answer).
func postNative(t *testing.T, s *server, path string, body any, headers map[string]string) (int, http.Header, []wireEvent) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, resp.Header, []wireEvent{{data: m}}
	}
	var evs []wireEvent
	name := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for n := 0; sc.Scan() && n < 10000; n++ {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			name = e
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event %s: %v", d, err)
			}
			evs = append(evs, wireEvent{name, m})
		}
	}
	return resp.StatusCode, resp.Header, evs
}

// at returns the value at path of a decoded JSON value.
func at(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// costAt returns the usage.cost at path, which must be above zero.
func costAt(t *testing.T, v any, path ...string) credits.Amount {
	t.Helper()
	a, err := credits.ParseAmount(jsonString(at(v, path...)))
	if err != nil || a <= 0 {
		t.Fatalf("%s = %v (%v); want a cost above 0", strings.Join(path, "."), at(v, path...), err)
	}
	return a
}

// claudeCapture returns a request Claude Code was captured sending
// (shared/transport/httpapi's testdata): its headers, and its body for model.
func claudeCapture(t *testing.T, name, model string) (map[string]string, map[string]any) {
	t.Helper()
	var c struct {
		Headers map[string]string `json:"headers"`
		Body    map[string]any    `json:"body"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "../../shared/transport/httpapi/testdata/messages/"+name+".json")), &c); err != nil {
		t.Fatal(err)
	}
	c.Body["model"] = model
	return c.Headers, c.Body
}

// TestNativeEndToEnd runs Codex's and Claude Code's own requests through
// genway serve to OpenAI and Anthropic models behind fake upstreams
// (nativeScenario), on the embedded store.
func TestNativeEndToEnd(t *testing.T) {
	oai, ant, env := nativeVendors(t)
	dir := t.TempDir()
	nativeScenario(t, startServer(t, dir, env), oai, ant, func(t *testing.T, args ...string) string { return cliKey(t, dir, args...) })
}

// TestNativeAWS: the same on DynamoDB (moto).
func TestNativeAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	oai, ant, env := nativeVendors(t)
	_, aws, dir := awsServe(t)
	for k, v := range env {
		aws[k] = v
	}
	nativeScenario(t, startServer(t, dir, aws), oai, ant, func(t *testing.T, args ...string) string { return cliKeyEnv(t, dir, aws, args...) })
}

// nativeScenario: an OpenAI model gets Codex's request and an Anthropic
// model Claude Code's natively: each upstream receives the client's body
// with only the model changed, the client gets the upstream's events with
// Genway's id and model and the final usage.cost, nothing left out; the
// account is charged exactly that cost, and the request's record (its
// answer's id) says so. Whole answers alike. A native stream that fails
// before its first content falls back to the next model, translated,
// with nothing of it seen; one cut after content is charged, partial. A
// key with a credit limit (made by newKey) holds a native request as any,
// and OpenAI is asked for no more output than was held.
func nativeScenario(t *testing.T, s *server, oai, ant *nativeVendor, newKey func(t *testing.T, args ...string) string) {
	checkRecord := func(t *testing.T, id, kind, model string, cost credits.Amount) {
		t.Helper()
		r := s.waitGeneration(t, id)
		if r.ID != id || r.Kind != kind || r.Model != model || r.Cost != cost || r.Status != credits.StatusCompleted {
			t.Errorf("record %+v; want %s %s of %s, cost %s, completed", r, kind, id, model, cost)
		}
	}

	t.Run("codex", func(t *testing.T) {
		body := codexCapture(t, "shell-2", "openai/gpt-5", "say hi")
		var id string
		var cost credits.Amount
		var h http.Header
		var events []wireEvent
		charged := chargeOf(t, s, s.key, func() {
			var code int
			code, h, events = postNative(t, s, "/v1/responses", body, nil)
			if code != 200 || len(events) < 3 {
				t.Fatalf("POST /v1/responses = %d, %d events", code, len(events))
			}
			last := events[len(events)-1]
			id, cost = at(last.data, "response", "id").(string), costAt(t, last.data, "response", "usage", "cost")
		})
		if h.Get("X-Genway-Omitted-Tools") != "" || h.Get("X-Genway-Attempts") != "openai/gpt-5=200" {
			t.Errorf("headers %v; want nothing left out, openai/gpt-5's one attempt", h)
		}
		got, _ := oai.last(t)
		body["model"] = "gpt-5"
		if !reflect.DeepEqual(got, body) {
			t.Errorf("OpenAI got\n%s\nwant Codex's request with model gpt-5\n%s", jsonString(got), jsonString(body))
		}
		if first := events[0]; first.name != "response.created" || at(first.data, "response", "id") != id || at(first.data, "response", "model") != "openai/gpt-5" {
			t.Errorf("first event %v; want response.created with Genway's id %s and the catalog's model", first, id)
		}
		if it := events[7]; it.name != "response.output_item.done" || at(it.data, "item", "encrypted_content") != "gAAAAABpOpenAIsOwnEncryptedReasoning==" || at(it.data, "item", "id") != "rs_up1" {
			t.Errorf("event 7 %v; want OpenAI's reasoning item, its id and encrypted_content as they came", it)
		}
		if !strings.HasPrefix(id, "resp_") || charged != cost {
			t.Errorf("id %q, charged %s; want Genway's resp_ id, and the usage.cost %s", id, charged, cost)
		}
		checkRecord(t, id, credits.KindResponses, "openai/gpt-5", cost)
	})

	t.Run("claude code", func(t *testing.T) {
		headers, body := claudeCapture(t, "claude-baseline", "anthropic/claude-opus-4-6")
		var id string
		var cost credits.Amount
		var events []wireEvent
		charged := chargeOf(t, s, s.key, func() {
			var code int
			code, _, events = postNative(t, s, "/v1/messages?beta=true", body, headers)
			if code != 200 || len(events) < 3 {
				t.Fatalf("POST /v1/messages = %d, %d events", code, len(events))
			}
			id, cost = at(events[0].data, "message", "id").(string), costAt(t, events[len(events)-2].data, "usage", "cost")
		})
		got, r := ant.last(t)
		body["model"] = "claude-opus-4-6"
		if !reflect.DeepEqual(got, body) || r.header.Get("anthropic-beta") != headers["anthropic-beta"] || r.header.Get("x-api-key") != "sk-ant" {
			t.Errorf("Anthropic got %s (headers %v)\nwant Claude Code's request with model claude-opus-4-6, its betas, the vendor key", jsonString(got), r.header)
		}
		if at(events[0].data, "message", "model") != "anthropic/claude-opus-4-6" || events[len(events)-1].name != "message_stop" {
			t.Errorf("events %v; want message_start with the catalog's model ... message_stop", events)
		}
		if u := at(events[len(events)-2].data, "usage"); at(u, "output_tokens") != 90.0 || at(u, "server_tool_use", "web_search_requests") != 1.0 {
			t.Errorf("final usage %v; want Anthropic's, with its cost", u)
		}
		if !strings.HasPrefix(id, "msg_") || charged != cost {
			t.Errorf("id %q, charged %s; want Genway's msg_ id, and the usage.cost %s", id, charged, cost)
		}
		checkRecord(t, id, credits.KindMessages, "anthropic/claude-opus-4-6", cost)
	})

	t.Run("whole answers", func(t *testing.T) {
		for _, c := range []struct {
			path, model, kind string
			body              map[string]any
		}{
			{"/v1/responses", "openai/gpt-5", credits.KindResponses, map[string]any{"model": "openai/gpt-5", "input": "Weather?", "tools": []any{map[string]any{"type": "web_search"}}}},
			{"/v1/messages", "anthropic/claude-opus-4-6", credits.KindMessages, map[string]any{"model": "anthropic/claude-opus-4-6", "max_tokens": 1000,
				"messages": []any{map[string]any{"role": "user", "content": "Weather?"}}}},
		} {
			var answer map[string]any
			charged := chargeOf(t, s, s.key, func() {
				code, _, evs := postNative(t, s, c.path, c.body, nil)
				if code != 200 {
					t.Fatalf("POST %s = %d %v", c.path, code, evs)
				}
				answer = evs[0].data
			})
			cost := costAt(t, answer, "usage", "cost")
			if answer["model"] != c.model || charged != cost {
				t.Errorf("%s: answer %v, charged %s; want %s's, charged its usage.cost", c.path, answer, charged, c.model)
			}
			checkRecord(t, answer["id"].(string), c.kind, c.model, cost)
		}
	})

	t.Run("fallback before content", func(t *testing.T) {
		body := codexCapture(t, "baseline-1", "openai/gpt-5", "please fail")
		body["models"] = []any{"synthetic/echo"}
		code, h, events := postNative(t, s, "/v1/responses", body, nil)
		if code != 200 || h.Get("X-Genway-Omitted-Tools") != "web_search" || !strings.HasPrefix(h.Get("X-Genway-Attempts"), "openai/gpt-5=") {
			t.Fatalf("POST = %d, headers %v; want synthetic/echo's translated answer, web_search left out", code, h)
		}
		for _, e := range events {
			if m := at(e.data, "response", "model"); m != nil && m != "synthetic/echo" {
				t.Errorf("event %v; want synthetic/echo's alone", e)
			}
		}
		if last := events[len(events)-1]; last.name != "response.completed" || !strings.Contains(jsonString(last.data), "You said: please fail") {
			t.Errorf("last event %v; want synthetic/echo's answer", last)
		}
	})

	t.Run("held", func(t *testing.T) {
		ks := &server{base: s.base, key: newKey(t, "--account", "dev", "--credit-limit", "300")}
		code, _, events := postNative(t, ks, "/v1/responses", codexCapture(t, "baseline-1", "openai/gpt-5", "say hi"), nil)
		if code != 200 {
			t.Fatalf("POST /v1/responses with a limited key = %d", code)
		}
		cost := costAt(t, events[len(events)-1].data, "response", "usage", "cost")
		// Codex sets no max_output_tokens: the hold reserved for the
		// model's 128,000, and OpenAI is told so.
		if got, _ := oai.last(t); got["max_output_tokens"] != 128000.0 {
			t.Errorf("OpenAI's max_output_tokens = %v; want the held bound, 128000", got["max_output_tokens"])
		}
		var cr struct {
			Key *struct{ Spent, Held credits.Amount } `json:"key"`
		}
		ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Key == nil || cr.Key.Spent != cost || cr.Key.Held != 0 {
			t.Errorf("the key's credits %+v; want the answer's cost %s spent, nothing held", cr.Key, cost)
		}
	})

	t.Run("cut after content", func(t *testing.T) {
		_, body := claudeCapture(t, "claude-baseline", "anthropic/claude-opus-4-6")
		msgs := body["messages"].([]any)
		msgs[0] = map[string]any{"role": "user", "content": "please cut"}
		var id string
		charged := chargeOf(t, s, s.key, func() {
			_, _, events := postNative(t, s, "/v1/messages", body, nil)
			id, _ = at(events[0].data, "message", "id").(string)
			if last := events[len(events)-1]; last.name != "error" {
				t.Errorf("last event %v; want an error", last)
			}
		})
		r := s.waitGeneration(t, id)
		// message_start's input (200 + 3000 cache reads); the output
		// delivered before the cut, estimated.
		if !r.Partial || r.Status != credits.StatusUpstreamError || r.Tokens.Prompt != 3200 || r.Tokens.Cached != 3000 || r.Tokens.Completion == 0 || r.Cost != charged || charged <= 0 {
			t.Errorf("record %+v, charged %s; want partial, upstream_error, 3200 input tokens and some output, charged its cost", r, charged)
		}
	})
}
