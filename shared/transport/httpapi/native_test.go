package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/anthropic"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/rawjson"
)

// The vendors' own answers, as the adapters' tests have them: an OpenAI
// Responses stream (reasoning, a hosted web search, a message, an event
// type Genway does not know) and its whole response; an Anthropic stream
// (thinking, a server tool, citations, a tool call, a ping, an unknown
// event) and a whole message.
func vendorFixture(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nativeVendors returns fake OpenAI and Anthropic upstreams (see
// newFakeAnthropic: each records its requests and answers a stream or a
// whole answer) and a gateway whose openai and anthropic providers speak
// their APIs natively to them.
func nativeVendors(t *testing.T) (oai, ant *fakeAnthropic, gw *chat.Gateway) {
	oai = newFakeAnthropic(t, vendorFixture(t, "../../providers/openai/testdata/responses_native.sse"), vendorFixture(t, "../../providers/openai/testdata/responses_native.json"))
	ant = newFakeAnthropic(t, vendorFixture(t, "../../providers/anthropic/testdata/stream_native.sse"), vendorFixture(t, "../../providers/anthropic/testdata/message_thinking.json"))
	gw = chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{
		"synthetic": synthetic.NewChat(),
		"openai":    openai.New(openai.Config{BaseURL: oai.srv.URL + "/v1", APIKey: "sk-oai", HTTPClient: oai.srv.Client(), Native: []string{chat.APIResponses}}),
		"anthropic": anthropic.New(anthropic.Config{BaseURL: ant.srv.URL, APIKey: "sk-ant", HTTPClient: ant.srv.Client(), Native: []string{chat.APIMessages}}),
	}})
	return oai, ant, gw
}

// sseEvent is one event as it went on the wire.
type sseEvent struct{ name, data string }

// rawEvents splits an SSE stream into its events, data as written.
func rawEvents(t *testing.T, s string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(s), "\n\n") {
		var e sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			}
		}
		if e.data != "" {
			out = append(out, e)
		}
	}
	return out
}

// sameRelay checks that the client's events are the upstream's, in order,
// each as it came but for the fields edit changes in the i-th event,
// named name (edit returns the fields set, by dotted path, nil for none).
func sameRelay(t *testing.T, got, up []sseEvent, edit func(i int, name string) map[string]any) {
	t.Helper()
	if len(got) != len(up) {
		t.Fatalf("the client got %d events; the upstream sent %d", len(got), len(up))
	}
	for i := range up {
		want := up[i].data
		e := edit(i, up[i].name)
		for path, v := range e {
			raw, _ := json.Marshal(v)
			b, err := rawjson.Set([]byte(want), raw, strings.Split(path, ".")...)
			if err != nil {
				t.Fatal(err)
			}
			want = string(b)
		}
		if got[i].name != up[i].name || !jsonSame(got[i].data, want) {
			t.Errorf("event %d: %s %s; want %s %s", i, got[i].name, got[i].data, up[i].name, want)
		}
		if e == nil && got[i].data != up[i].data {
			t.Errorf("event %d (%s) was rewritten: %s; want it as it came", i, up[i].name, got[i].data)
		}
	}
}

func jsonSame(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// TestResponsesNativeCodex: every request Codex was captured sending
// reaches OpenAI, for an OpenAI model, as Codex sent it but for the
// model (its hosted web_search, include, store, reasoning items with
// OpenAI's encrypted_content, client_metadata and every item id
// included), and nothing is left out (no X-Genway-Omitted-Tools). The
// stream is OpenAI's, event for event: only the response's id (Genway's
// resp_ id) and model (the catalog's) in response.created, in_progress
// and completed, and completed's usage.cost, are Genway's.
func TestResponsesNativeCodex(t *testing.T) {
	oai, _, gw := nativeVendors(t)
	srv := apiServer(t, gw)
	up := rawEvents(t, vendorFixture(t, "../../providers/openai/testdata/responses_native.sse"))
	for _, name := range []string{"baseline-1", "gpt55-1", "catalog-1", "shell-2", "patch-2", "toolsearch-2", "ns-field-2", "resume-2", "retry-3"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/codex/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			body["model"] = "openai/gpt-5"
			resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(mustJSON(body)))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get(OmittedToolsHeader) != "" {
				t.Fatalf("status %d, %s %q: %s; want 200, nothing left out", resp.StatusCode, OmittedToolsHeader, resp.Header.Get(OmittedToolsHeader), got)
			}
			upReq := oai.last(t)
			body["model"] = "gpt-5"
			if upReq.path != "/v1/responses" || !reflect.DeepEqual(upReq.body, body) || upReq.header.Get("Authorization") != "Bearer sk-oai" {
				t.Errorf("upstream %s got\n%s\nwant Codex's request with model gpt-5:\n%s", upReq.path, mustJSON(upReq.body), mustJSON(body))
			}
			events := rawEvents(t, string(got))
			id, cost := responseOf(t, events[0].data, "response"), costOf(t, events[len(events)-1].data, "response", "usage", "cost")
			sameRelay(t, events, up, func(_ int, name string) map[string]any {
				switch name {
				case "response.created", "response.in_progress":
					return map[string]any{"response.id": id, "response.model": "openai/gpt-5"}
				case "response.completed":
					return map[string]any{"response.id": id, "response.model": "openai/gpt-5", "response.usage.cost": cost}
				}
				return nil
			})
			if !strings.HasPrefix(id, "resp_") || id == "resp_up1" {
				t.Errorf("response id %q; want Genway's resp_ id", id)
			}
		})
	}
}

// responseOf returns the id of the object at key of an event's data.
func responseOf(t *testing.T, data, key string) string {
	t.Helper()
	var ev map[string]json.RawMessage
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil || json.Unmarshal(ev[key], &obj) != nil {
		t.Fatalf("no %s.id in %s", key, data)
	}
	return obj.ID
}

// costOf returns the number at path of a JSON object, which must be a
// cost above zero (the models here are priced).
func costOf(t *testing.T, data string, path ...string) json.Number {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	n, _ := v.(json.Number)
	if f, err := n.Float64(); err != nil || f <= 0 {
		t.Errorf("%s in %s = %v; want a cost above 0", strings.Join(path, "."), data, v)
	}
	return n
}

// TestResponsesNativeWhole: a whole answer is OpenAI's response object
// as it came, with Genway's id, the catalog's model and usage.cost.
func TestResponsesNativeWhole(t *testing.T) {
	oai, _, gw := nativeVendors(t)
	srv := apiServer(t, gw)
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"openai/gpt-5","input":"Weather in Paris?","tools":[{"type":"web_search"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(OmittedToolsHeader) != "" {
		t.Fatalf("status %d, %s %q: %s", resp.StatusCode, OmittedToolsHeader, resp.Header.Get(OmittedToolsHeader), got)
	}
	if b := oai.last(t).body; b["stream"] != false || b["store"] != nil || b["model"] != "gpt-5" {
		t.Errorf("upstream body %s; want stream false, no store (the client sent none), model gpt-5", mustJSON(b))
	}
	id := responseOf(t, `{"r":`+string(got)+`}`, "r")
	want := rewritten([]byte(oai.message), set(id, "id"), set("openai/gpt-5", "model"), set(costOf(t, string(got), "usage", "cost"), "usage", "cost"))
	if !strings.HasPrefix(id, "resp_") || !jsonSame(string(got), string(want)) {
		t.Errorf("answer\n%s\nwant OpenAI's with Genway's id, model and cost:\n%s", got, want)
	}
}

// TestResponsesNativeFallback: an OpenAI stream that fails before its
// first content (an error event after response.created) moves on to the
// request's next model, translated: the client gets that model's stream
// alone, nothing of OpenAI's, and the hosted tool left out is named.
func TestResponsesNativeFallback(t *testing.T) {
	oai, _, gw := nativeVendors(t)
	oai.mu.Lock()
	oai.stream = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_up1\",\"model\":\"gpt-5-up\",\"status\":\"in_progress\"}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"server_error\",\"message\":\"The server had an error.\",\"param\":null}\n\n"
	oai.mu.Unlock()
	srv := apiServer(t, gw)
	body := `{"model":"openai/gpt-5","models":["synthetic/echo"],"stream":true,"input":"hello","tools":[{"type":"web_search"}]}`
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(OmittedToolsHeader) != "web_search" || !strings.HasPrefix(resp.Header.Get(AttemptsHeader), "openai/gpt-5=") {
		t.Fatalf("status %d, headers %v; want 200, web_search left out, openai/gpt-5's attempt", resp.StatusCode, resp.Header)
	}
	if strings.Contains(string(got), "resp_up1") || strings.Contains(string(got), "gpt-5-up") || !strings.Contains(string(got), `"model":"synthetic/echo"`) {
		t.Errorf("stream\n%s\nwant synthetic/echo's alone", got)
	}
	if !strings.Contains(string(got), "You said: hello") {
		t.Errorf("stream\n%s\nwant synthetic/echo's answer", got)
	}
}

// TestResponsesNativeRefusals: what only the translation refuses (a
// tool_choice forcing a hosted tool, max_tool_calls, an item_reference
// to an item OpenAI stored) is refused only for a model that would get it
// translated: a request whose model is OpenAI's passes, and reaches OpenAI
// as it came; one led by another model is a 400 naming the first such
// field, unless an OpenAI model follows it.
func TestResponsesNativeRefusals(t *testing.T) {
	oai, _, gw := nativeVendors(t)
	srv := apiServer(t, gw)
	for _, c := range []struct{ fields, param string }{
		{`"input":"news?","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"},"max_tool_calls":2`, "max_tool_calls"},
		{`"input":[{"type":"item_reference","id":"msg_0123abc"},{"role":"user","content":"and?"}],"store":true`, "input[0].id"},
	} {
		for _, tt := range []struct {
			models string
			status int
		}{{`"model":"openai/gpt-5"`, 200}, {`"model":"synthetic/echo"`, 400}, {`"model":"synthetic/echo","models":["openai/gpt-5"]`, 200}} {
			body := `{` + tt.models + `,` + c.fields + `}`
			resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var env struct{ Error struct{ Code, Param string } }
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			json.Unmarshal(b, &env)
			if resp.StatusCode != tt.status || (tt.status == 400 && (env.Error.Code != "unsupported_parameter" || env.Error.Param != c.param)) {
				t.Errorf("%s: %d %s; want %d", body, resp.StatusCode, b, tt.status)
			}
			if tt.status == 200 {
				var sent map[string]any
				json.Unmarshal([]byte(body), &sent)
				sent["model"] = "gpt-5"
				sent["stream"] = false
				delete(sent, "models")
				if got := oai.last(t).body; !reflect.DeepEqual(got, sent) {
					t.Errorf("%s: OpenAI got %s; want it as it came", body, mustJSON(got))
				}
			}
		}
	}
}

// TestMessagesNativeClaudeCode: every request Claude Code and the
// Anthropic SDK were captured sending reaches Anthropic, for an Anthropic
// model, as it was sent but for the model, with the client's
// anthropic-version and betas; the stream is Anthropic's, event for
// event: only message_start's id (Genway's msg_ id) and model (the
// catalog's), and the last message_delta's usage.cost, are Genway's.
func TestMessagesNativeClaudeCode(t *testing.T) {
	_, ant, gw := nativeVendors(t)
	srv := messagesServer(t, gw)
	up := rawEvents(t, vendorFixture(t, "../../providers/anthropic/testdata/stream_native.sse"))
	for name, c := range loadCaptured(t) {
		if strings.HasSuffix(c.Path, "/count_tokens") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			path := c.Path
			if c.Query != "" {
				path += "?" + c.Query
			}
			resp := postMessages(t, srv.URL, path, c.with("anthropic/claude-opus-4-6"), c.Headers)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || resp.Header.Get(OmittedToolsHeader) != "" {
				t.Fatalf("POST %s = %d (%s %q) %s", path, resp.StatusCode, OmittedToolsHeader, resp.Header.Get(OmittedToolsHeader), got)
			}
			upReq := ant.last(t)
			want := map[string]any{}
			for k, v := range c.Body {
				want[k] = v
			}
			want["model"] = "claude-opus-4-6"
			if !reflect.DeepEqual(upReq.body, want) {
				t.Errorf("upstream got\n%s\nwant the client's request with model claude-opus-4-6:\n%s", mustJSON(upReq.body), mustJSON(want))
			}
			for _, h := range []string{"anthropic-version", "anthropic-beta"} {
				if w := strings.ReplaceAll(c.Headers[h], " ", ""); w != "" && upReq.header.Get(h) != w {
					t.Errorf("upstream %s = %q; want the client's %q", h, upReq.header.Get(h), w)
				}
			}
			if stream, _ := c.Body["stream"].(bool); !stream {
				if id := responseOf(t, `{"m":`+string(got)+`}`, "m"); !strings.HasPrefix(id, "msg_") || !strings.Contains(string(got), `"model":"anthropic/claude-opus-4-6"`) {
					t.Errorf("answer %s; want Genway's msg_ id and the catalog's model", got)
				}
				costOf(t, string(got), "usage", "cost")
				return
			}
			events := rawEvents(t, string(got))
			id, cost := responseOf(t, events[0].data, "message"), costOf(t, events[len(events)-2].data, "usage", "cost")
			sameRelay(t, events, up, func(i int, name string) map[string]any {
				switch {
				case name == "message_start":
					return map[string]any{"message.id": id, "message.model": "anthropic/claude-opus-4-6"}
				case name == "message_delta" && i == len(up)-2: // the last one
					return map[string]any{"usage.cost": cost}
				}
				return nil
			})
		})
	}
}
