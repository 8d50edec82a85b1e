package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
)

// apiServer serves chat completions and responses for account "acct".
func apiServer(t testing.TB, gw *chat.Gateway) *httptest.Server {
	t.Helper()
	withAcct := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
		})
	}
	mux := NewMux(nil,
		Route{Method: http.MethodPost, Pattern: "/v1/chat/completions", Handler: withAcct(ChatCompletions(gw, nil))},
		Route{Method: http.MethodPost, Pattern: "/v1/responses", Handler: withAcct(Responses(gw, nil))})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

var weatherParams = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required":   []string{"city"},
}

// TestChatToolsOpenAIClient is a tool round trip with openai-go, unmodified:
// the model calls get_weather (the synthetic trigger: the tool is named in
// the message), the client answers with a tool message, the model uses it;
// whole and streamed (accumulated by the SDK's ChatCompletionAccumulator).
func TestChatToolsOpenAIClient(t *testing.T) {
	c := client(apiServer(t, syntheticGateway(t)))
	ctx := context.Background()
	tools := []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: oai.String("Weather in a city."), Parameters: weatherParams})}
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Please get_weather for Paris")}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete", true: "stream"}[stream], func(t *testing.T) {
			params := oai.ChatCompletionNewParams{Model: "synthetic/echo", Messages: msgs, Tools: tools}
			var first oai.ChatCompletion
			if stream {
				s := c.Chat.Completions.NewStreaming(ctx, params)
				acc := oai.ChatCompletionAccumulator{}
				pieces := 0
				for s.Next() {
					acc.AddChunk(s.Current())
					if len(s.Current().Choices) > 0 && len(s.Current().Choices[0].Delta.ToolCalls) > 0 {
						pieces++
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				if pieces < 2 {
					t.Errorf("tool call came in %d chunks; want the arguments in pieces", pieces)
				}
				first = acc.ChatCompletion
			} else {
				resp, err := c.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				first = *resp
			}
			ch := first.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("answer = %+v; want one tool call and finish_reason tool_calls", ch)
			}
			call := ch.Message.ToolCalls[0]
			if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"synthetic"}` || call.ID == "" {
				t.Errorf("tool call = %+v; want get_weather({\"city\":\"synthetic\"}) with an id", call)
			}
			next := append(msgs, ch.Message.ToParam(), oai.ToolMessage("18 degrees and sunny", call.ID))
			resp, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: "synthetic/echo", Messages: next, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Choices[0].Message.Content; got != "Tool get_weather returned: 18 degrees and sunny" {
				t.Errorf("answer after the tool = %q", got)
			}
		})
	}
}

func TestChatStructuredOutputOpenAIClient(t *testing.T) {
	c := client(apiServer(t, syntheticGateway(t)))
	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}},
		"required": []string{"name", "age"}, "additionalProperties": false}
	resp, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: "synthetic/echo", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Ada, 36")},
		ResponseFormat: oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: oai.Bool(true)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &v); err != nil || v.Name == "" || v.Age == 0 {
		t.Errorf("content %q is not the schema's object: %v", resp.Choices[0].Message.Content, err)
	}
}

// TestResponsesOpenAIClient runs responses.create with openai-go: plain
// text, a function call round trip (the call sent back as the function
// call item, and as an item_reference to it), JSON schema output; whole
// and streamed.
func TestResponsesOpenAIClient(t *testing.T) {
	c := client(apiServer(t, syntheticGateway(t)))
	ctx := context.Background()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: weatherParams, Strict: oai.Bool(true)}}
	run := func(t *testing.T, stream bool, p responses.ResponseNewParams) *responses.Response {
		t.Helper()
		if !stream {
			r, err := c.Responses.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		s := c.Responses.NewStreaming(ctx, p)
		var types []string
		var final *responses.Response
		seq := int64(-1)
		for s.Next() {
			ev := s.Current()
			types = append(types, ev.Type)
			if ev.SequenceNumber != seq+1 {
				t.Errorf("event %s has sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq = ev.SequenceNumber
			if ev.Type == "response.completed" {
				r := ev.Response
				final = &r
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
			t.Errorf("events = %v; want response.created, response.in_progress ... response.completed", types)
		}
		if final == nil {
			t.Fatal("no response.completed")
		}
		return final
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "create", true: "stream"}[stream], func(t *testing.T) {
			r := run(t, stream, responses.ResponseNewParams{Model: "synthetic/echo", Instructions: oai.String("be brief"),
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hello there")}})
			if r.OutputText() != "You said: hello there" || r.Status != "completed" || r.Usage.InputTokens != 4 || r.Usage.OutputTokens != 4 {
				t.Errorf("text answer = %q, status %s, usage %+v", r.OutputText(), r.Status, r.Usage)
			}

			input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is get_weather in Paris?", responses.EasyInputMessageRoleUser)}
			r = run(t, stream, responses.ResponseNewParams{Model: "synthetic/echo", Tools: []responses.ToolUnionParam{tool},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
			if len(r.Output) != 1 || r.Output[0].Type != "function_call" {
				t.Fatalf("output = %+v; want one function_call", r.Output)
			}
			fc := r.Output[0]
			if fc.Name != "get_weather" || fc.Arguments.OfString != `{"city":"synthetic"}` || fc.CallID == "" {
				t.Errorf("function call = %s(%s) call_id %q", fc.Name, fc.Arguments.OfString, fc.CallID)
			}
			for _, back := range []responses.ResponseInputItemUnionParam{
				responses.ResponseInputItemParamOfFunctionCall(fc.Arguments.OfString, fc.CallID, fc.Name),
				responses.ResponseInputItemParamOfItemReference(fc.ID),
			} {
				next := append(append(responses.ResponseInputParam{}, input...), back,
					responses.ResponseInputItemParamOfFunctionCallOutput(fc.CallID, "18 degrees"))
				r2 := run(t, stream, responses.ResponseNewParams{Model: "synthetic/echo", Tools: []responses.ToolUnionParam{tool},
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: next}})
				if got := r2.OutputText(); got != "Tool get_weather returned: 18 degrees" {
					t.Errorf("answer after the function call output = %q", got)
				}
			}

			r = run(t, stream, responses.ResponseNewParams{Model: "synthetic/echo", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Ada")},
				Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("person",
					map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})}})
			if r.OutputText() != `{"name":"synthetic"}` {
				t.Errorf("json schema answer = %q", r.OutputText())
			}
		})
	}
}

func TestResponsesReasoningAndLength(t *testing.T) {
	c := client(apiServer(t, syntheticGateway(t)))
	r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "synthetic/thinker",
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
		MaxOutputTokens: oai.Int(12), Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("a b c d e f")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || len(r.Output[0].Summary) != 1 || r.Output[1].Type != "message" {
		t.Fatalf("output = %+v; want a reasoning item and a message", r.Output)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("status %s (%+v); want incomplete for max_output_tokens", r.Status, r.IncompleteDetails)
	}
}

// TestResponsesRequestErrors: what the stateless gateway cannot do is a
// 400 naming the Responses field, before any upstream call.
func TestResponsesRequestErrors(t *testing.T) {
	srv := apiServer(t, syntheticGateway(t))
	tests := []struct{ body, code, param string }{
		{`{"model":"synthetic/echo","input":"hi","previous_response_id":"resp_1"}`, "unsupported_parameter", "previous_response_id"},
		{`{"model":"synthetic/echo","input":[{"type":"item_reference","id":"msg_1"}]}`, "unsupported_parameter", "input[0].id"},
		{`{"model":"synthetic/echo"}`, "missing_field", "input"},
		{`{"model":"synthetic/echo","input":3}`, "invalid_value", "input"},
		{`{"model":"synthetic/echo","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "unsupported_parameter", "tool_choice"},
		{`{"model":"synthetic/echo","input":"hi","tools":[{"type":"function","name":"a b"}]}`, "invalid_value", "tools[0].name"},
		{`{"model":"synthetic/echo","input":"hi","max_output_tokens":0}`, "invalid_value", "max_output_tokens"},
		{`{"model":"synthetic/echo","input":"hi","reasoning":{"effort":"max"}}`, "invalid_value", "reasoning.effort"},
		{`{"model":"synthetic/echo","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":true}}}`, "invalid_value", "text.format.schema"},
		{`{"model":"synthetic/echo","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "unsupported_parameter", "input[0].content[0].file_id"},
		{`{"model":"synthetic/echo","input":[{"role":"robot","content":"hi"}]}`, "invalid_value", "input[0].role"},
		{`{"model":"synthetic/echo","input":[{"type":"function_call_output","call_id":"c9","output":"x"}]}`, "invalid_value", "input[0].call_id"},
		{`{"model":"synthetic/echo","input":"hi","truncation":"auto"}`, "unsupported_parameter", "truncation"},
		{`{"model":"synthetic/echo","input":"hi","background":true}`, "unsupported_parameter", "background"},
	}
	for _, tt := range tests {
		resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct {
				Code  string `json:"code"`
				Param string `json:"param"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != 400 || env.Error.Code != tt.code || env.Error.Param != tt.param {
			t.Errorf("%s: %d code %q param %q; want 400 %q %q", tt.body, resp.StatusCode, env.Error.Code, env.Error.Param, tt.code, tt.param)
		}
	}
}

// TestResponsesStreamFailure: a failure after the stream started is an
// error event and response.failed (with the error), as the SDK reads it.
func TestResponsesStreamFailure(t *testing.T) {
	srv := apiServer(t, syntheticGateway(t))
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"synthetic/echo","stream":true,"input":"fail: now please"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var last string
	for _, l := range sseLines(t, resp.Body) {
		if ev, ok := strings.CutPrefix(l, "event: "); ok {
			types = append(types, ev)
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			last = d
		}
	}
	n := len(types)
	if resp.StatusCode != 200 || n < 4 || types[n-2] != "error" || types[n-1] != "response.failed" {
		t.Fatalf("status %d, events %v; want the stream to end with error, response.failed", resp.StatusCode, types)
	}
	if !strings.Contains(last, `"status":"failed"`) || !strings.Contains(last, `"code":"upstream_error"`) {
		t.Errorf("response.failed = %s; want status failed and the error", last)
	}
	c := client(srv)
	s := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "synthetic/echo",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("fail: now please")}})
	var ev responses.ResponseStreamEventUnion
	for s.Next() {
		ev = s.Current()
	}
	if s.Err() != nil || ev.Type != "response.failed" || ev.Response.Status != "failed" || ev.Response.Error.Code != "upstream_error" {
		t.Errorf("openai-go: last event %s, status %s, error %+v, err %v; want response.failed with the error", ev.Type, ev.Response.Status, ev.Response.Error, s.Err())
	}
}

// FuzzResponsesRequest feeds arbitrary bodies to the Responses request
// translation and the gateway behind it: never a panic; every refusal an
// *apierr.Error whose param names a field of the Responses request (not
// of the chat request it was translated into); and a request that passes
// gets an answer.
func FuzzResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"synthetic/echo","input":"hi"}`,
		`{"model":"synthetic/echo","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"get_weather"}]}],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`,
		`{"model":"synthetic/echo","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
		`{"model":"synthetic/echo","input":[{"type":"item_reference","id":"fc_WyJjIiwiZiIsInt9Il0"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok"}]}]}`,
		`{"model":"synthetic/echo","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}},"tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"synthetic/echo","tools":[{"type":"function","name":"f","cache_control":{"type":"ephemeral","ttl":"1h"}}],"input":[{"role":"system","content":[{"type":"input_text","text":"s","cache_control":{"type":"ephemeral"}}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"ok","cache_control":{"type":"ephemeral"}}]}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"},{"type":"custom","name":"p","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]},{"type":"tool_search","execution":"client"},{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","namespace":"ns","name":"p"}]},"input":[{"role":"user","content":"CALL_TOOL p"},{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gw1.eyJjIjpbeyJpIjoiYyIsInMiOiJ4IiwiYiI6ImdlbWluaSJ9XX0"},{"type":"custom_tool_call","call_id":"c","namespace":"ns","name":"p","input":"x"},{"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"local_shell"},{"type":"apply_patch"}],"input":[{"type":"tool_search_call","call_id":"s","arguments":{"query":"q"}},{"type":"tool_search_output","tools":[{"type":"function","name":"g","defer_loading":true}]},{"type":"local_shell_call","id":"l","call_id":"c","action":{"type":"exec","command":["ls"]}},{"type":"local_shell_call_output","id":"l","output":"a"}]}`,
	} {
		f.Add([]byte(s))
	}
	gw := syntheticGateway(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var rp responsesRequest
		if unmarshal(body, &rp) != nil {
			return
		}
		rp.Stream = false
		var tr translation
		p, err := rp.chatParams(&tr)
		if err == nil {
			sink := &responseJSONSink{jsonSink: jsonSink{w: httptest.NewRecorder()}, meta: rp.echo(), tools: tr.tools}
			err = gw.Run(context.Background(), "acct", p, sink)
		}
		if err == nil {
			return
		}
		e := apierr.As(responsesParam(err, &tr))
		if e == nil {
			t.Fatalf("error %v is not an *apierr.Error", err)
		}
		for _, chatOnly := range []string{"messages", "max_completion_tokens", "reasoning_effort", "response_format", ".function."} {
			if strings.Contains(e.Param, chatOnly) {
				t.Errorf("param %q names the chat request's field", e.Param)
			}
		}
	})
}
