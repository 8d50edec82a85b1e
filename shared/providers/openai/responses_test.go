package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/route"
)

// nativeClientBody is a Responses request as Codex sends one to an OpenAI
// model (hosted web_search, include, store false, reasoning items to
// replay: OpenAI's own, and Genway's for another provider's thoughts),
// with fields Genway does not know, Genway's fallbacks and a seed.
const nativeClientBody = `{"model":"openai/gpt-5","models":["anthropic/claude-sonnet-4-5"],"stream":true,"store":true,"seed":7,
 "max_output_tokens":50000,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"xhigh","summary":"auto"},
 "tools":[{"type":"web_search","external_web_access":false},{"type":"function","name":"exec_command","parameters":{"type":"object"}}],
 "tool_choice":{"type":"web_search"},"prompt_cache_key":"thread-1","client_metadata":{"turn_id":"t1"},"future_field":{"x":[1,2]},
 "input":[{"type":"message","id":"msg_1","role":"user","content":[{"type":"input_text","text":"Weather <in> Paris & Rome?"}]},
  {"type":"reasoning","id":"rs_old","summary":[],"content":null,"encrypted_content":"gAAAAABoldOpenAI=="},
  {"type":"reasoning","id":"rs_gw","summary":[],"encrypted_content":"gw1.eyJ0IjpbXX0"},
  {"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":"{}"},
  {"type":"function_call_output","call_id":"call_1","output":"ok"}]}`

// nativeRequest is the gateway's request for body to the catalog's
// openai/gpt-5 (upstream gpt-5), max_tokens bound to maxTokens.
func nativeRequest(t *testing.T, body string, maxTokens int) *chat.Request {
	return &chat.Request{Model: model(t, "openai/gpt-5"), MaxTokens: maxTokens, Native: &chat.Native{API: chat.APIResponses, Body: []byte(body)}}
}

// TestNativeResponsesBody: OpenAI gets the client's own request, with
// only the model (the upstream's name) and max_output_tokens (the
// gateway's bound, below the client's) changed, Genway's fallbacks and
// seed and Genway's reasoning item left out; hosted tools, include,
// store, OpenAI's own reasoning item, unknown fields go as they came.
func TestNativeResponsesBody(t *testing.T) {
	u := &upstream{body: fixture(t, "responses_native.json")}
	srv := httptest.NewServer(u)
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, APIKey: "sk-up", Native: []string{chat.APIResponses}})
	if _, err := p.NativeComplete(context.Background(), nativeRequest(t, nativeClientBody, 32000)); err != nil {
		t.Fatalf("NativeComplete = %v", err)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(nativeClientBody), &want); err != nil {
		t.Fatal(err)
	}
	want["model"], want["stream"], want["max_output_tokens"] = "gpt-5", false, 32000.0
	delete(want, "models")
	delete(want, "seed")
	in := want["input"].([]any)
	want["input"] = append(in[:2:2], in[3:]...) // without rs_gw
	if !reflect.DeepEqual(u.gotBody, want) {
		got, _ := json.Marshal(u.gotBody)
		w, _ := json.Marshal(want)
		t.Errorf("upstream body\n%s\nwant\n%s", got, w)
	}
	if u.gotPath != "/responses" || u.gotHdr.Get("Authorization") != "Bearer sk-up" {
		t.Errorf("POST %s (Authorization %q); want /responses with the provider's key", u.gotPath, u.gotHdr.Get("Authorization"))
	}

	// A client's max_output_tokens under the bound, and no bound, stay.
	for _, tt := range []struct {
		max   string
		bound int
		want  any
	}{{`,"max_output_tokens":100`, 32000, 100.0}, {"", 0, nil}, {"", 4096, 4096.0}} {
		if _, err := p.NativeComplete(context.Background(), nativeRequest(t, `{"model":"m","input":"hi"`+tt.max+`}`, tt.bound)); err != nil {
			t.Fatal(err)
		}
		if got := u.gotBody["max_output_tokens"]; got != tt.want {
			t.Errorf("max_output_tokens %q bound %d: upstream got %v; want %v", tt.max, tt.bound, got, tt.want)
		}
	}
}

// TestNativeResponsesUncached: the prompt-cache breakpoints Genway takes
// on tools, items and parts are left out of OpenAI's request (it caches
// on its own, and refuses them); a parameter schema's property of that
// name stays.
func TestNativeResponsesUncached(t *testing.T) {
	u := &upstream{body: fixture(t, "responses_native.json")}
	srv := httptest.NewServer(u)
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, Native: []string{chat.APIResponses}})
	eph := `"cache_control":{"type":"ephemeral"}`
	schema := `{"type":"object","properties":{"cache_control":{"type":"string"}}}`
	body := `{"model":"m","instructions":"x",
	 "tools":[{"type":"function","name":"f","parameters":` + schema + `,` + eph + `},{"type":"namespace","name":"n","tools":[{"type":"function","name":"g",` + eph + `}]}],
	 "input":[{"role":"user","content":[{"type":"input_text","text":"a",` + eph + `}],` + eph + `},{"type":"function_call","call_id":"c","name":"f","arguments":"{}",` + eph + `},
	  {"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok",` + eph + `}]},{"type":"function_call_output","call_id":"c","output":"plain"}]}`
	if _, err := p.NativeComplete(context.Background(), nativeRequest(t, body, 0)); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(u.gotBody)
	params, _ := json.Marshal(u.gotBody["tools"].([]any)[0].(map[string]any)["parameters"])
	var want any
	json.Unmarshal([]byte(schema), &want)
	wantParams, _ := json.Marshal(want)
	if strings.Contains(string(got), "ephemeral") || string(params) != string(wantParams) || !strings.Contains(string(got), `"output":"plain"`) {
		t.Errorf("upstream body %s; want no breakpoint, the schema and the plain output as they were", got)
	}
}

// TestNativeResponsesStream: every event of OpenAI's stream is relayed as
// it came (unknown ones too), the opening ones (response.created,
// in_progress, *.added) not content, the others content, each delta's
// bytes counted as text or reasoning; response.completed is held back
// for the sink's end, with the usage read from it.
func TestNativeResponsesStream(t *testing.T) {
	stream := fixture(t, "responses_native.sse")
	u := &upstream{body: stream, header: map[string]string{"Content-Type": "text/event-stream"}}
	srv := httptest.NewServer(u)
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, APIKey: "sk-up", Native: []string{chat.APIResponses}})
	var got []chat.NativeEvent
	var relayed strings.Builder
	resp, err := p.NativeStream(context.Background(), nativeRequest(t, nativeClientBody, 0), nativeWriter(func(e chat.NativeEvent) error {
		e.Data = append([]byte(nil), e.Data...)
		got = append(got, e)
		fmt.Fprintf(&relayed, "event: %s\ndata: %s\n\n", e.Name, e.Data)
		return nil
	}))
	if err != nil {
		t.Fatalf("NativeStream = %v", err)
	}
	if u.gotBody["stream"] != true {
		t.Errorf("upstream stream = %v; want true", u.gotBody["stream"])
	}
	if len(resp.Native.Tail) != 1 || resp.Native.Tail[0].Name != "response.completed" {
		t.Fatalf("tail %v; want response.completed", resp.Native.Tail)
	}
	fmt.Fprintf(&relayed, "event: %s\ndata: %s\n\n", resp.Native.Tail[0].Name, resp.Native.Tail[0].Data)
	if relayed.String() != stream {
		t.Errorf("relayed events differ from the upstream's:\n%s", relayed.String())
	}
	var text, reasoning int
	for _, e := range got {
		opening := e.Name == "response.created" || e.Name == "response.in_progress" || strings.HasSuffix(e.Name, ".added")
		if e.Content == opening {
			t.Errorf("%s: Content %t; want %t", e.Name, e.Content, !opening)
		}
		text, reasoning = text+e.Text, reasoning+e.Reasoning
	}
	if text != len("Paris is sunny.?") || reasoning != len("Looking it up.") {
		t.Errorf("output counted: text %d, reasoning %d; want %d and %d", text, reasoning, len("Paris is sunny.?"), len("Looking it up."))
	}
	want := chat.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150, CachedTokens: 100, ReasoningTokens: 12}
	if resp.Usage != want || resp.FinishReason != chat.FinishStop || resp.ServiceTier != "default" {
		t.Errorf("response usage %+v, finish %q, tier %q; want %+v, stop, default", resp.Usage, resp.FinishReason, resp.ServiceTier, want)
	}
}

// TestNativeResponsesWhole: a whole answer is the upstream's body, with
// its usage, finish reason and text read from it.
func TestNativeResponsesWhole(t *testing.T) {
	body := fixture(t, "responses_native.json")
	srv := httptest.NewServer(&upstream{body: body})
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, Native: []string{chat.APIResponses}})
	resp, err := p.NativeComplete(context.Background(), nativeRequest(t, `{"model":"m","input":"hi"}`, 0))
	if err != nil {
		t.Fatalf("NativeComplete = %v", err)
	}
	if string(resp.Native.Body) != body || resp.Content != "Paris is sunny." || resp.Reasoning != "Looking it up." || resp.Usage.PromptTokens != 120 {
		t.Errorf("response %+v; want the body as it came, its text, reasoning and usage", resp)
	}
	incomplete := strings.Replace(strings.Replace(body, `"status":"completed"`, `"status":"incomplete"`, 1), `"incomplete_details":null`, `"incomplete_details":{"reason":"max_output_tokens"}`, 1)
	call := `{"status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":"{}"}],"usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}`
	for _, tt := range []struct{ body, finish string }{{incomplete, chat.FinishLength}, {call, chat.FinishToolCalls}} {
		srv := httptest.NewServer(&upstream{body: tt.body})
		p := New(Config{BaseURL: srv.URL, Native: []string{chat.APIResponses}})
		resp, err := p.NativeComplete(context.Background(), nativeRequest(t, `{"model":"m","input":"hi"}`, 0))
		srv.Close()
		if err != nil || resp.FinishReason != tt.finish {
			t.Errorf("finish reason = %v, %v; want %s", resp, err, tt.finish)
		}
	}
}

// TestNativeResponsesSpeaks: only a provider configured with the
// Responses API speaks it.
func TestNativeResponsesSpeaks(t *testing.T) {
	for _, tt := range []struct {
		native []string
		api    string
		want   bool
	}{{nil, chat.APIResponses, false}, {[]string{chat.APIResponses}, chat.APIResponses, true}, {[]string{chat.APIResponses}, chat.APIMessages, false}} {
		if got := New(Config{Native: tt.native}).Speaks(tt.api); got != tt.want {
			t.Errorf("New(Native %v).Speaks(%q) = %t; want %t", tt.native, tt.api, got, tt.want)
		}
	}
}

// TestNativeResponsesRouting: each way a native Responses call fails is
// classified as the translated call's failures are: statuses, an error
// event or response.failed (by its code), a stream that ends before
// response.completed.
func TestNativeResponsesRouting(t *testing.T) {
	type r = chattest.Routing
	type a = chattest.Answer
	sse := func(body string) a { return a{ContentType: "text/event-stream", Body: body} }
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n"
	tests := []struct {
		name   string
		a      a
		stream bool
		want   r
	}{
		{"400", a{Status: 400, Body: `{"error":{"message":"Unknown parameter: 'x'.","type":"invalid_request_error","param":"x","code":"unknown_parameter"}}`}, true,
			r{Class: route.Final, Status: 400, Action: route.Stop}},
		{"429", a{Status: 429, Header: http.Header{"Retry-After": {"20"}}}, false, r{Class: route.RateLimited, Status: 429, RetryAfter: 20e9, Action: route.Next}},
		{"500", a{Status: 500}, true, r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"error event", sse(created + "event: error\ndata: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\",\"param\":null}\n\n"), true,
			r{Class: route.RateLimited, Status: 429, Action: route.Again}},
		{"response.failed", sse(created + "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The server had an error.\"}}}\n\n"), true,
			r{Class: route.Transient, Status: 500, Action: route.Again}},
		{"ends before response.completed", sse(created), true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"connection cut", a{Cut: true, ContentType: "text/event-stream", Body: created}, true, r{Class: route.Transient, Reason: "dropped", Action: route.Again}},
		{"whole answer failed", a{Body: `{"id":"r","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}`}, false,
			r{Class: route.Transient, Status: 500, Action: route.Again}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{BaseURL: tt.a.URL(t), APIKey: "k", Native: []string{chat.APIResponses}})
			req := nativeRequest(t, `{"model":"m","input":"hi"}`, 0)
			var err error
			if tt.stream {
				_, err = p.NativeStream(context.Background(), req, nativeWriter(func(chat.NativeEvent) error { return nil }))
			} else {
				_, err = p.NativeComplete(context.Background(), req)
			}
			if ue := chattest.CheckRouting(t, err, tt.want); ue.Provider != "openai" {
				t.Errorf("Provider = %q; want openai", ue.Provider)
			}
		})
	}
}

// nativeWriter adapts a function to a chat.NativeWriter whose Flush does
// nothing.
type nativeWriter func(chat.NativeEvent) error

func (f nativeWriter) Event(e chat.NativeEvent) error { return f(e) }
func (f nativeWriter) Flush() error                   { return nil }
