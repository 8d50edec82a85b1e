package httpapi

// The Messages translation both ways for each provider family, through
// the real adapters against fake upstreams that speak each vendor's
// documented wire format (the adapters' own tests check those formats in
// depth): a Messages request in the middle of a tool-use loop, with a
// signed thinking block and a cached system prompt, goes upstream as
// testdata/messages/golden/<family>.request.json; the upstream's answer
// (reasoning, text, a tool call, cache reads) comes back as
// <family>.stream.sse and <family>.message.json. go test -run
// TestMessagesFamilies -update rewrites them.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/anthropic"
	"github.com/genway/genway/shared/providers/bedrock"
	"github.com/genway/genway/shared/providers/gemini"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
)

var update = flag.Bool("update", false, "rewrite the golden files of the Messages translation")

// The canned answers of the fake upstreams: reasoning ("The user wants
// Lyon too."), text ("Checking Lyon."), a call of get_weather for Lyon,
// 300 input tokens read from the cache, 100 written (where the vendor
// counts writes), 20 other input tokens, 30 output tokens.
const (
	anthropicThinkingStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":100,"cache_read_input_tokens":300,"output_tokens":1}}}

event: ping
data: {"type":"ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants Lyon too."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBnext"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking Lyon."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01B","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Lyon\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}

`
	anthropicThinkingMessage = `{"id":"msg_up","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[
		{"type":"thinking","thinking":"The user wants Lyon too.","signature":"EqQBnext"},
		{"type":"text","text":"Checking Lyon."},
		{"type":"tool_use","id":"toolu_01B","name":"get_weather","input":{"city":"Lyon"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":20,"cache_creation_input_tokens":100,"cache_read_input_tokens":300,"output_tokens":30}}`

	openaiStream = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"The user wants Lyon too."},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"content":"Checking Lyon."},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_B","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Lyon\"}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[],"usage":{"prompt_tokens":320,"completion_tokens":30,"total_tokens":350,"prompt_tokens_details":{"cached_tokens":300},"completion_tokens_details":{"reasoning_tokens":10}}}

data: [DONE]

`
	openaiMessage = `{"id":"c","object":"chat.completion","created":1,"model":"gpt-5-mini","choices":[{"index":0,"message":{"role":"assistant",
		"reasoning_content":"The user wants Lyon too.","content":"Checking Lyon.",
		"tool_calls":[{"id":"call_B","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":320,"completion_tokens":30,"total_tokens":350,"prompt_tokens_details":{"cached_tokens":300},"completion_tokens_details":{"reasoning_tokens":10}}}`

	geminiStream = `data: {"candidates":[{"content":{"parts":[{"text":"The user wants Lyon too.","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":320,"totalTokenCount":320},"modelVersion":"gemini-2.5-flash","responseId":"r1"}

data: {"candidates":[{"content":{"parts":[{"text":"Checking Lyon."}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":320,"totalTokenCount":320},"modelVersion":"gemini-2.5-flash","responseId":"r1"}

data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Lyon"}}}],"role":"model"},"index":0,"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":320,"cachedContentTokenCount":300,"candidatesTokenCount":20,"thoughtsTokenCount":10,"totalTokenCount":350},"modelVersion":"gemini-2.5-flash","responseId":"r1"}

`
	geminiMessage = `{"candidates":[{"content":{"parts":[{"text":"The user wants Lyon too.","thought":true},{"text":"Checking Lyon."},
		{"functionCall":{"name":"get_weather","args":{"city":"Lyon"}}}],"role":"model"},"finishReason":"STOP","index":0}],
		"usageMetadata":{"promptTokenCount":320,"cachedContentTokenCount":300,"candidatesTokenCount":20,"thoughtsTokenCount":10,"totalTokenCount":350},
		"modelVersion":"gemini-2.5-flash","responseId":"r1"}`

	bedrockMessage = `{"output":{"message":{"role":"assistant","content":[
		{"reasoningContent":{"reasoningText":{"text":"The user wants Lyon too.","signature":"EqQBnext"}}},
		{"text":"Checking Lyon."},
		{"toolUse":{"toolUseId":"tooluse_B","name":"get_weather","input":{"city":"Lyon"}}}]}},
		"stopReason":"tool_use","usage":{"inputTokens":20,"outputTokens":30,"totalTokens":450,"cacheReadInputTokens":300,"cacheWriteInputTokens":100},"metrics":{"latencyMs":10}}`
)

// bedrockStream is the ConverseStream answer's events (event type,
// payload), encoded by bedrockEvents.
var bedrockStream = [][2]string{
	{"messageStart", `{"role":"assistant"}`},
	{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"The user wants Lyon too."}}}`},
	{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqQBnext"}}}`},
	{"contentBlockStop", `{"contentBlockIndex":0}`},
	{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":"Checking Lyon."}}`},
	{"contentBlockStop", `{"contentBlockIndex":1}`},
	{"contentBlockStart", `{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_B","name":"get_weather"}}}`},
	{"contentBlockDelta", `{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"city\":\"Lyon\"}"}}}`},
	{"contentBlockStop", `{"contentBlockIndex":2}`},
	{"messageStop", `{"stopReason":"tool_use"}`},
	{"metadata", `{"usage":{"inputTokens":20,"outputTokens":30,"totalTokens":450,"cacheReadInputTokens":300,"cacheWriteInputTokens":100},"metrics":{"latencyMs":10}}`},
}

// bedrockEvents encodes evs in the AWS event stream format.
func bedrockEvents(t testing.TB, evs [][2]string) []byte {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range evs {
		var msg eventstream.Message
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue(ev[0]))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = []byte(ev[1])
		if err := enc.Encode(&buf, msg); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// familyUpstream is a fake upstream of one family: it records the last
// request body and answers by the path and the body's stream flag.
type familyUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	last map[string]any
}

func newFamilyUpstream(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, stream bool)) *familyUpstream {
	f := &familyUpstream{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		f.mu.Lock()
		f.last = body
		f.mu.Unlock()
		stream := body["stream"] == true || strings.Contains(r.URL.Path, "stream")
		answer(w, r, stream)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func sseAnswer(stream, whole string) func(w http.ResponseWriter, r *http.Request, isStream bool) {
	return func(w http.ResponseWriter, r *http.Request, isStream bool) {
		if isStream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, whole)
	}
}

// familyRequest is the Messages request of each family's case: the
// second turn of a tool-use loop whose first came from Claude.
func familyRequest(model string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"` + model + `","max_tokens":1000,"stream":` + s + `,
		"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"thinking":{"type":"enabled","budget_tokens":2048},
		"tools":[{"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
		"messages":[{"role":"user","content":"Weather in Paris?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool.","signature":"EqQBsig"},
				{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"18C"}]}]}`
}

var msgIDRE = regexp.MustCompile(`msg_[A-Z0-9]{26}`)

// golden compares got with testdata/messages/golden/name, or writes it
// with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "messages", "golden", name)
	got = msgIDRE.ReplaceAll(got, []byte("msg_ID"))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestMessagesFamilies -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot\n%s\nwant\n%s", path, got, want)
	}
}

// indented is v as indented JSON, keys sorted.
func indented(t *testing.T, v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestMessagesFamilies(t *testing.T) {
	anth := newFamilyUpstream(t, sseAnswer(anthropicThinkingStream, anthropicThinkingMessage))
	oai := newFamilyUpstream(t, sseAnswer(openaiStream, openaiMessage))
	gem := newFamilyUpstream(t, sseAnswer(geminiStream, geminiMessage))
	bed := newFamilyUpstream(t, func(w http.ResponseWriter, r *http.Request, stream bool) {
		if stream {
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			w.Write(bedrockEvents(t, bedrockStream))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, bedrockMessage)
	})
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	br := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(bed.srv.URL), RetryMaxAttempts: 1,
		HTTPClient: bed.srv.Client(), Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Source: "test"}, nil
		})})
	gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{
		"anthropic": anthropic.New(anthropic.Config{BaseURL: anth.srv.URL, APIKey: "k", HTTPClient: anth.srv.Client()}),
		"openai":    openai.New(openai.Config{Name: "openai", BaseURL: oai.srv.URL, APIKey: "k", HTTPClient: oai.srv.Client()}),
		"gemini":    gemini.New(gemini.Config{BaseURL: gem.srv.URL, APIKey: "k", HTTPClient: gem.srv.Client()}),
		"bedrock":   bedrock.New(br),
		"synthetic": synthetic.NewChat(),
	}})
	srv := messagesServer(t, gw)
	families := []struct {
		name, model string
		up          *familyUpstream // nil: synthetic
	}{
		{"anthropic", "anthropic/claude-sonnet-4-5", anth},
		{"bedrock", "bedrock/claude-sonnet-4-5", bed},
		{"openai", "openai/gpt-5-mini", oai},
		{"gemini", "gemini/gemini-2.5-flash", gem},
		{"synthetic", "synthetic/thinker", nil},
	}
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			resp := postMessages(t, srv.URL, "/v1/messages", familyRequest(fam.model, true), nil)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("stream = %d %s", resp.StatusCode, body)
			}
			readEvents(t, bytes.NewReader(body)) // every event named, its data its type
			golden(t, fam.name+".stream.sse", body)
			if fam.up != nil {
				fam.up.mu.Lock()
				req := fam.up.last
				fam.up.mu.Unlock()
				golden(t, fam.name+".request.json", indented(t, req))
			}

			resp = postMessages(t, srv.URL, "/v1/messages", familyRequest(fam.model, false), nil)
			body, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("message = %d %s", resp.StatusCode, body)
			}
			var m any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			golden(t, fam.name+".message.json", indented(t, m))
		})
	}
}
