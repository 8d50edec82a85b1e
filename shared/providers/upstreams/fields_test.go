package upstreams_test

// TestEveryChatFieldPerProvider sends every field of OpenAI's chat request
// (https://platform.openai.com/docs/api-reference/chat/create) through a
// Gateway to each provider family, and checks that each field is either
// honoured (the upstream request carries it, mapped to the provider's own
// field) or refused with a 400 naming it before any upstream call: never
// silently dropped. Fields documented as accepted and not forwarded
// (metadata, stream_options, user where the provider has none, a message's
// name) must succeed.
//
// The upstreams are fakes on loopback: httptest servers recording the JSON
// bodies for openai, anthropic and gemini; a bedrock.ConverseStreamer
// recording the Converse / ConverseStream inputs; and for synthetic, which
// has no upstream, a wrapper recording the chat.Request it is given.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/anthropic"
	"github.com/genway/genway/shared/providers/bedrock"
	"github.com/genway/genway/shared/providers/gemini"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
)

// fpProviders are the providers under test: the table's columns.
var fpProviders = []string{"openai", "anthropic", "gemini", "bedrock", "synthetic"}

// fpModels is each provider's model, unless a case names another.
var fpModels = map[string]string{
	"openai":    "openai/gpt-4o-mini",
	"anthropic": "anthropic/claude-haiku-4-5",
	"gemini":    "gemini/gemini-2.5-flash",
	"bedrock":   "bedrock/claude-sonnet-4-5",
	"synthetic": "synthetic/echo",
}

// fpBaseMessages is the conversation of the base request.
const fpBaseMessages = `[{"role":"user","content":"hello world"}]`

// Tools, as the client sends them.
const (
	fpWeatherTool = `{"type":"function","function":{"name":"get_weather","description":"The weather in a city.",
		"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	fpTimeTool = `{"type":"function","function":{"name":"get_time",
		"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`
	fpOneTool  = `[` + fpWeatherTool + `]`
	fpTwoTools = `[` + fpWeatherTool + `,` + fpTimeTool + `]`
	// fpToolTurns is a conversation that went through one tool call.
	fpToolTurns = `[
		{"role":"user","content":"What is the weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
			"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`
	fpCitySchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
)

// fpOutcome is what a provider does with a field.
type fpOutcome int

const (
	fpHonoured fpOutcome = iota + 1 // the upstream request carries the field (checked)
	fpAccepted                      // documented as accepted and not forwarded: the request succeeds
	fpRefused                       // a 400 naming the field; no upstream request
	fpNA                            // not applicable (no such model for this provider)
)

func (o fpOutcome) String() string {
	return map[fpOutcome]string{fpHonoured: "honoured", fpAccepted: "accepted", fpRefused: "refused", fpNA: "n/a"}[o]
}

// fpResult is what one call produced: the one upstream request, and the
// answer the sink was given.
type fpResult struct {
	call     fpCall
	resp     *chat.Response
	streamed string // the content deltas, concatenated
}

// fpCheck verifies a result; it returns what is wrong, or nil.
type fpCheck func(r *fpResult) error

// fpWant is the expected outcome of a field for one provider.
type fpWant struct {
	outcome fpOutcome
	checks  []fpCheck // honoured and accepted: what the upstream request (or the answer) shows
	bug     string    // a known bug: the subtest is skipped while its checks fail
	note    string    // fpNA: why
}

func fpHonour(checks ...fpCheck) fpWant { return fpWant{outcome: fpHonoured, checks: checks} }
func fpAccept(checks ...fpCheck) fpWant { return fpWant{outcome: fpAccepted, checks: checks} }

var fpRefuse = fpWant{outcome: fpRefused}

// fpBug marks w as a known bug: the field is silently dropped.
func fpBug(w fpWant, bug string) fpWant { w.bug = bug; return w }

// fpAll is the same expectation for every provider.
func fpAll(w fpWant) map[string]fpWant {
	m := map[string]fpWant{}
	for _, p := range fpProviders {
		m[p] = w
	}
	return m
}

// fpCase is one row of the table: a field sent with a non-default value.
type fpCase struct {
	name   string            // the subtest: the field, and a variant
	field  string            // the request field; the param a refusal names
	set    map[string]string // JSON values added to (or replacing those of) the base request
	models map[string]string // per-provider models instead of fpModels
	want   map[string]fpWant // by provider
}

func TestEveryChatFieldPerProvider(t *testing.T) {
	rig := newFPRig(t)
	summary := map[string]map[string]string{}
	var mu sync.Mutex
	for _, c := range fpCases() {
		summary[c.name] = map[string]string{}
		t.Run(c.name, func(t *testing.T) {
			for _, prov := range fpProviders {
				t.Run(prov, func(t *testing.T) {
					seen := "FAIL" // if the subtest stops on a Fatal
					defer func() {
						mu.Lock()
						summary[c.name][prov] = seen
						mu.Unlock()
					}()
					rig.run(t, c, prov, &seen)
				})
			}
		})
	}
	// The outcome table, for the record (go test -v).
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s", "field")
	for _, p := range fpProviders {
		fmt.Fprintf(&b, " %-10s", p)
	}
	for _, c := range fpCases() {
		if len(summary[c.name]) == 0 {
			continue // not run (go test -run)
		}
		fmt.Fprintf(&b, "\n%-32s", c.name)
		for _, p := range fpProviders {
			fmt.Fprintf(&b, " %-10s", summary[c.name][p])
		}
	}
	t.Logf("outcomes:\n%s", b.String())
}

// run runs case c against provider prov and checks its outcome; it sets
// *seen to the outcome seen, for the summary.
func (rig *fpRig) run(t *testing.T, c fpCase, prov string, seen *string) {
	w, ok := c.want[prov]
	if !ok {
		t.Fatalf("the table has no expectation for %s", prov)
	}
	if w.outcome == fpNA {
		*seen = "n/a"
		t.Skip(w.note)
	}
	model := fpModels[prov]
	if m, ok := c.models[prov]; ok {
		model = m
	}
	p := fpParams(t, model, c.set)
	up := rig.up[prov]
	up.take() // nothing left from another subtest
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snk := &fpSink{}
	err := rig.gw.Run(ctx, "acct", p, snk)
	calls := up.take()

	if w.outcome == fpRefused {
		e := apierr.As(err)
		switch {
		case e == nil:
			t.Errorf("Run = %v; want a 400 refusing %s", err, c.field)
		case e.Kind != apierr.Invalid || e.Param != c.field || e.Code != "unsupported_parameter":
			t.Errorf("Run = kind %d, code %q, param %q (%v); want kind Invalid, code unsupported_parameter, param %q",
				e.Kind, e.Code, e.Param, e, c.field)
		}
		if len(calls) != 0 {
			t.Errorf("refused, but the upstream got %d request(s)", len(calls))
		}
		if snk.started {
			t.Errorf("refused, but the sink was started")
		}
		if !t.Failed() {
			*seen = "refused"
		}
		return
	}

	var problems []error
	switch {
	case err != nil:
		problems = append(problems, fmt.Errorf("Run = %v; want the field %s", err, w.outcome))
	case len(calls) != 1:
		problems = append(problems, fmt.Errorf("the upstream got %d requests; want 1", len(calls)))
	case snk.resp == nil:
		problems = append(problems, errors.New("the sink was not ended with a response"))
	default:
		r := &fpResult{call: calls[0], resp: snk.resp, streamed: snk.content.String()}
		for _, check := range w.checks {
			if err := check(r); err != nil {
				problems = append(problems, err)
			}
		}
	}
	if w.bug != "" {
		if len(problems) == 0 {
			t.Errorf("known bug %q no longer shows: remove its fpBug mark", w.bug)
			return
		}
		*seen = "BUG(skip)"
		t.Skipf("BUG: %s: %v", w.bug, errors.Join(problems...))
	}
	for _, p := range problems {
		t.Error(p)
	}
	if !t.Failed() {
		*seen = w.outcome.String()
	}
}

// fpParams is the base request for model with the fields of set.
func fpParams(t *testing.T, model string, set map[string]string) *chat.Params {
	t.Helper()
	body := map[string]json.RawMessage{
		"model":    json.RawMessage(strconv.Quote(model)),
		"messages": json.RawMessage(fpBaseMessages),
	}
	for k, v := range set {
		body[k] = json.RawMessage(v)
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("test body: %v", err)
	}
	var p chat.Params
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("test body %s: %v", b, err)
	}
	return &p
}

// fpCases is the table: every field of OpenAI's chat request, by provider.
// The expectations follow the providers' Features: OpenAI takes every
// field; Anthropic has no seed, penalties, logit_bias or OpenAI-only
// fields; Gemini has no logit_bias, parallel_tool_calls false or
// OpenAI-only fields; Bedrock has no tool_choice "none", parallel_tool_calls
// false, seed, penalties, logit_bias or OpenAI-only fields; synthetic takes
// every field (AllFeatures), so for it "honoured" is checked on the
// chat.Request it gets and, where its rules say, on its answer.
func fpCases() []fpCase {
	return []fpCase{
		{
			name: "model", field: "model",
			want: map[string]fpWant{
				"openai":    fpHonour(fpPath("/v1/chat/completions"), fpBody("model", `"gpt-4o-mini"`)),
				"anthropic": fpHonour(fpPath("/v1/messages"), fpBody("model", `"claude-haiku-4-5"`)),
				"gemini":    fpHonour(fpPath("/v1beta/models/gemini-2.5-flash:generateContent")),
				"bedrock": fpHonour(fpPath("Converse"), fpBR("ModelId us.anthropic.claude-sonnet-4-5-20250929-v1:0", func(c *fpConverse) bool {
					return c.modelID == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
				})),
				"synthetic": fpHonour(fpPath("Complete"), fpReq("Model synthetic/echo", func(r *chat.Request) bool { return r.Model.ID == "synthetic/echo" }),
					fpAnswer(`content "You said: hello world"`, func(r *fpResult) bool { return r.resp.Content == "You said: hello world" })),
			},
		},
		{
			name: "messages", field: "messages",
			set: map[string]string{"messages": `[{"role":"developer","content":"Be brief."},{"role":"user","content":"hello world"}]`},
			want: map[string]fpWant{
				"openai": fpHonour(fpBody("messages", `[{"role":"system","content":"Be brief."},{"role":"user","content":"hello world"}]`)),
				"anthropic": fpHonour(fpBody("system", `"Be brief."`),
					fpBody("messages", `[{"role":"user","content":[{"type":"text","text":"hello world"}]}]`)),
				"gemini": fpHonour(fpBody("systemInstruction.parts", `[{"text":"Be brief."}]`),
					fpBody("contents", `[{"role":"user","parts":[{"text":"hello world"}]}]`)),
				"bedrock": fpHonour(fpBR(`System "Be brief.", Messages [user "hello world"]`, func(c *fpConverse) bool {
					sys, ok := fpOne(c.system).(*types.SystemContentBlockMemberText)
					return ok && sys.Value == "Be brief." && len(c.messages) == 1 && c.messages[0].Role == types.ConversationRoleUser &&
						fpText(fpOne(c.messages[0].Content)) == "hello world"
				})),
				"synthetic": fpHonour(fpReq("a system message, then the user's", func(r *chat.Request) bool {
					return len(r.Messages) == 2 && r.Messages[0].Role == chat.RoleSystem && r.Messages[0].Text() == "Be brief." &&
						r.Messages[1].Text() == "hello world"
				})),
			},
		},
		{
			// A message's name goes to OpenAI-compatible upstreams; the
			// others have no such field (it names a participant, and
			// does not change what is asked).
			name: "messages[].name", field: "messages",
			set: map[string]string{"messages": `[{"role":"user","name":"alice","content":"hello world"}]`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("messages", `[{"content":"hello world","name":"alice","role":"user"}]`)),
				"anthropic": fpAccept(), "gemini": fpAccept(), "bedrock": fpAccept(), "synthetic": fpAccept(),
			},
		},
		{
			name: "messages=tool_turns", field: "messages",
			set: map[string]string{"messages": fpToolTurns, "tools": fpOneTool},
			want: map[string]fpWant{
				"openai": fpHonour(
					fpBody("messages.1", `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
						"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`),
					fpBody("messages.2", `{"role":"tool","content":"sunny","tool_call_id":"call_1"}`)),
				"anthropic": fpHonour(
					fpBody("messages.1", `{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}]}`),
					fpBody("messages.2", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"sunny"}]}`)),
				"gemini": fpHonour(
					fpBody("contents.1", `{"role":"model","parts":[{"functionCall":{"id":"call_1","name":"get_weather","args":{"city":"Paris"}}}]}`),
					fpBody("contents.2", `{"role":"user","parts":[{"functionResponse":{"id":"call_1","name":"get_weather","response":{"result":"sunny"}}}]}`)),
				"bedrock": fpHonour(fpBR(`Messages [user, assistant toolUse call_1 get_weather {"city":"Paris"}, user toolResult call_1 "sunny"]`, func(c *fpConverse) bool {
					if len(c.messages) != 3 || c.messages[1].Role != types.ConversationRoleAssistant || c.messages[2].Role != types.ConversationRoleUser {
						return false
					}
					use, ok := fpOne(c.messages[1].Content).(*types.ContentBlockMemberToolUse)
					if !ok || aws.ToString(use.Value.ToolUseId) != "call_1" || aws.ToString(use.Value.Name) != "get_weather" ||
						!fpSameJSON(fpDoc(use.Value.Input), `{"city":"Paris"}`) {
						return false
					}
					res, ok := fpOne(c.messages[2].Content).(*types.ContentBlockMemberToolResult)
					if !ok || aws.ToString(res.Value.ToolUseId) != "call_1" {
						return false
					}
					txt, ok := fpOne(res.Value.Content).(*types.ToolResultContentBlockMemberText)
					return ok && txt.Value == "sunny"
				})),
				"synthetic": fpHonour(fpAnswer(`content "Tool get_weather returned: sunny"`, func(r *fpResult) bool {
					return r.resp.Content == "Tool get_weather returned: sunny"
				})),
			},
		},
		{
			name: "audio", field: "audio", set: map[string]string{"audio": `{"voice":"alloy","format":"mp3"}`},
			want: fpAll(fpRefuse),
		},
		{
			name: "frequency_penalty", field: "frequency_penalty", set: map[string]string{"frequency_penalty": `0.5`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("frequency_penalty", `0.5`)),
				"anthropic": fpRefuse,
				"gemini":    fpHonour(fpBody("generationConfig.frequencyPenalty", `0.5`)),
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpReq("FrequencyPenalty 0.5", func(r *chat.Request) bool { return fpIs(r.FrequencyPenalty, 0.5) })),
			},
		},
		{
			name: "function_call", field: "function_call", set: map[string]string{"function_call": `{"name":"get_weather"}`},
			want: fpAll(fpRefuse),
		},
		{
			name: "functions", field: "functions",
			set:  map[string]string{"functions": `[{"name":"get_weather","parameters":{"type":"object","properties":{}}}]`},
			want: fpAll(fpRefuse),
		},
		{
			name: "logit_bias", field: "logit_bias", set: map[string]string{"logit_bias": `{"1234":-100}`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("logit_bias", `{"1234":-100}`)),
				"anthropic": fpRefuse,
				"gemini":    fpRefuse,
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpReq(`LogitBias {"1234":-100}`, func(r *chat.Request) bool { return r.LogitBias["1234"] == -100 })),
			},
		},
		{
			name: "logprobs", field: "logprobs", set: map[string]string{"logprobs": `true`},
			want: fpAll(fpRefuse),
		},
		fpMaxTokensCase("max_completion_tokens"),
		fpMaxTokensCase("max_tokens"),
		{
			// metadata tags stored completions, and nothing is stored.
			name: "metadata", field: "metadata", set: map[string]string{"metadata": `{"trace":"t-1"}`},
			want: fpAll(fpAccept()),
		},
		{
			name: "modalities", field: "modalities", set: map[string]string{"modalities": `["text","audio"]`},
			want: fpAll(fpRefuse),
		},
		{
			name: "n", field: "n", set: map[string]string{"n": `2`},
			want: fpAll(fpRefuse),
		},
		{
			name: "parallel_tool_calls=false", field: "parallel_tool_calls",
			set: map[string]string{"parallel_tool_calls": `false`, "tools": fpTwoTools,
				"messages": `[{"role":"user","content":"get_weather and get_time in Paris"}]`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("parallel_tool_calls", `false`), fpBody("tools.1.function.name", `"get_time"`)),
				"anthropic": fpHonour(fpBody("tool_choice", `{"type":"auto","disable_parallel_tool_use":true}`)),
				"gemini":    fpRefuse,
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpReq("ParallelToolCalls false", func(r *chat.Request) bool {
					return r.ParallelToolCalls != nil && !*r.ParallelToolCalls
				}), fpAnswer("one tool call of the two named", func(r *fpResult) bool { return len(r.resp.ToolCalls) == 1 })),
			},
		},
		{
			name: "prediction", field: "prediction", set: map[string]string{"prediction": `{"type":"content","content":"hello"}`},
			want: fpAll(fpRefuse),
		},
		{
			name: "presence_penalty", field: "presence_penalty", set: map[string]string{"presence_penalty": `0.5`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("presence_penalty", `0.5`)),
				"anthropic": fpRefuse,
				"gemini":    fpHonour(fpBody("generationConfig.presencePenalty", `0.5`)),
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpReq("PresencePenalty 0.5", func(r *chat.Request) bool { return fpIs(r.PresencePenalty, 0.5) })),
			},
		},
		{
			// A hint that only steers OpenAI's prompt cache: left out, not
			// refused, where the provider has no such key.
			name: "prompt_cache_key", field: "prompt_cache_key", set: map[string]string{"prompt_cache_key": `"pck-1"`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("prompt_cache_key", `"pck-1"`)),
				"anthropic": fpAccept(fpNoBody("prompt_cache_key")),
				"gemini":    fpAccept(fpNoBody("prompt_cache_key")),
				"bedrock":   fpAccept(),
				"synthetic": fpHonour(fpReq(`prompt_cache_key "pck-1"`, func(r *chat.Request) bool { return r.PromptCacheKey == "pck-1" })),
			},
		},
		{
			// On models that reason: each provider's thinking control.
			name: "reasoning_effort", field: "reasoning_effort", set: map[string]string{"reasoning_effort": `"low"`},
			models: map[string]string{"openai": "openai/o4-mini", "synthetic": "synthetic/thinker"},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("model", `"o4-mini"`), fpBody("reasoning_effort", `"low"`)),
				"anthropic": fpHonour(fpBody("thinking", `{"type":"enabled","budget_tokens":1024}`)),
				"gemini":    fpHonour(fpBody("generationConfig.thinkingConfig", `{"thinkingBudget":1024,"includeThoughts":true}`)),
				"bedrock":   fpHonour(fpBRField("additionalModelRequestFields.thinking", `{"type":"enabled","budget_tokens":1024}`)),
				"synthetic": fpHonour(fpReq(`ReasoningEffort "low"`, func(r *chat.Request) bool { return r.ReasoningEffort == "low" }),
					fpAnswer("reasoning", func(r *fpResult) bool { return r.resp.Reasoning != "" })),
			},
		},
		{
			// On models that do not reason, reasoning_effort is accepted and
			// not forwarded (chat.Request.ReasoningEffort: "" when the model
			// does not reason).
			name: "reasoning_effort/no-reasoning", field: "reasoning_effort", set: map[string]string{"reasoning_effort": `"low"`},
			models: map[string]string{"gemini": "gemini/gemini-2.0-flash", "bedrock": "bedrock/nova-lite"},
			want: map[string]fpWant{
				"openai":    fpAccept(fpNoBody("reasoning_effort")),
				"anthropic": {outcome: fpNA, note: "every anthropic model of the catalog reasons"},
				"gemini":    fpAccept(fpNoBody("generationConfig.thinkingConfig")),
				"bedrock":   fpAccept(fpBR("no additionalModelRequestFields", func(c *fpConverse) bool { return c.additional == nil })),
				"synthetic": fpAccept(fpAnswer("no reasoning", func(r *fpResult) bool { return r.resp.Reasoning == "" })),
			},
		},
		{
			name: "response_format=json_object", field: "response_format", set: map[string]string{"response_format": `{"type":"json_object"}`},
			want: map[string]fpWant{
				"openai": fpHonour(fpBody("response_format", `{"type":"json_object"}`)),
				"anthropic": fpHonour(fpBody("tools.0.name", `"json"`), fpBody("tools.0.input_schema", `{"type":"object"}`),
					fpBody("tool_choice", `{"type":"tool","name":"json"}`)),
				"gemini":  fpHonour(fpBody("generationConfig.responseMimeType", `"application/json"`), fpNoBody("generationConfig.responseJsonSchema")),
				"bedrock": fpHonour(fpBRTool("json", `{"type":"object"}`), fpBRChoice("tool", "json")),
				"synthetic": fpHonour(fpAnswer(`content {"answer": ...}`, func(r *fpResult) bool {
					var v map[string]string
					return json.Unmarshal([]byte(r.resp.Content), &v) == nil && v["answer"] == "You said: hello world"
				})),
			},
		},
		{
			name: "response_format=json_schema", field: "response_format",
			set: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"city","strict":true,"schema":` + fpCitySchema + `}}`},
			want: map[string]fpWant{
				"openai": fpHonour(fpBody("response_format", `{"type":"json_schema","json_schema":{"name":"city","strict":true,"schema":`+fpCitySchema+`}}`)),
				"anthropic": fpHonour(fpBody("tools.0.name", `"city"`), fpBody("tools.0.input_schema", fpCitySchema),
					fpBody("tool_choice", `{"type":"tool","name":"city"}`)),
				"gemini": fpHonour(fpBody("generationConfig.responseMimeType", `"application/json"`),
					fpBody("generationConfig.responseJsonSchema", fpCitySchema)),
				"bedrock":   fpHonour(fpBRTool("city", fpCitySchema), fpBRChoice("tool", "city")),
				"synthetic": fpHonour(fpAnswer(`content {"name":"synthetic"}`, func(r *fpResult) bool { return r.resp.Content == `{"name":"synthetic"}` })),
			},
		},
		fpOpenAIOnlyCase("safety_identifier", "sid-1", func(r *chat.Request) string { return r.SafetyIdentifier }),
		{
			name: "seed", field: "seed", set: map[string]string{"seed": `42`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("seed", `42`)),
				"anthropic": fpRefuse,
				"gemini":    fpHonour(fpBody("generationConfig.seed", `42`)),
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpReq("Seed 42", func(r *chat.Request) bool { return r.Seed != nil && *r.Seed == 42 })),
			},
		},
		fpOpenAIOnlyCase("service_tier", "flex", func(r *chat.Request) string { return r.ServiceTier }),
		fpStopCase("stop", `["world"]`),
		fpStopCase("stop=string", `"world"`),
		{
			name: "store", field: "store", set: map[string]string{"store": `true`},
			want: fpAll(fpRefuse),
		},
		{
			name: "stream", field: "stream", set: map[string]string{"stream": `true`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("stream", `true`), fpStreamed("ok")),
				"anthropic": fpHonour(fpBody("stream", `true`), fpStreamed("ok")),
				"gemini":    fpHonour(fpPath("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"), fpStreamed("ok")),
				"bedrock":   fpHonour(fpPath("ConverseStream"), fpStreamed("ok")),
				"synthetic": fpHonour(fpPath("Stream"), fpStreamed("You said: hello world")),
			},
		},
		{
			// include_usage needs no action: every stream ends with usage.
			name: "stream_options", field: "stream_options",
			set: map[string]string{"stream": `true`, "stream_options": `{"include_usage":true}`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("stream_options", `{"include_usage":true}`), fpUsage()),
				"anthropic": fpAccept(fpUsage()),
				"gemini":    fpAccept(fpUsage()),
				"bedrock":   fpAccept(fpUsage()),
				"synthetic": fpAccept(fpUsage()),
			},
		},
		{
			name: "temperature", field: "temperature", set: map[string]string{"temperature": `0.3`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("temperature", `0.3`)),
				"anthropic": fpHonour(fpBody("temperature", `0.3`)),
				"gemini":    fpHonour(fpBody("generationConfig.temperature", `0.3`)),
				"bedrock": fpHonour(fpBR("InferenceConfig.Temperature 0.3", func(c *fpConverse) bool {
					return c.inference != nil && aws.ToFloat32(c.inference.Temperature) == float32(0.3)
				})),
				"synthetic": fpHonour(fpReq("Temperature 0.3", func(r *chat.Request) bool { return fpIs(r.Temperature, 0.3) })),
			},
		},
		{
			name: "tool_choice=function", field: "tool_choice",
			set: map[string]string{"tools": fpOneTool, "tool_choice": `{"type":"function","function":{"name":"get_weather"}}`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("tool_choice", `{"type":"function","function":{"name":"get_weather"}}`)),
				"anthropic": fpHonour(fpBody("tool_choice", `{"type":"tool","name":"get_weather"}`)),
				"gemini":    fpHonour(fpBody("toolConfig", `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}}`)),
				"bedrock":   fpHonour(fpBRChoice("tool", "get_weather")),
				"synthetic": fpHonour(fpCalls("get_weather")),
			},
		},
		{
			name: "tool_choice=required", field: "tool_choice",
			set: map[string]string{"tools": fpOneTool, "tool_choice": `"required"`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("tool_choice", `"required"`)),
				"anthropic": fpHonour(fpBody("tool_choice", `{"type":"any"}`)),
				"gemini":    fpHonour(fpBody("toolConfig", `{"functionCallingConfig":{"mode":"ANY"}}`)),
				"bedrock":   fpHonour(fpBRChoice("any", "")),
				"synthetic": fpHonour(fpCalls("get_weather")),
			},
		},
		{
			// The message names the tool: without tool_choice "none", the
			// synthetic model would call it.
			name: "tool_choice=none", field: "tool_choice",
			set: map[string]string{"tools": fpOneTool, "tool_choice": `"none"`,
				"messages": `[{"role":"user","content":"get_weather in Paris"}]`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("tool_choice", `"none"`)),
				"anthropic": fpHonour(fpBody("tool_choice", `{"type":"none"}`)),
				"gemini":    fpHonour(fpBody("toolConfig", `{"functionCallingConfig":{"mode":"NONE"}}`)),
				"bedrock":   fpRefuse,
				"synthetic": fpHonour(fpCalls()),
			},
		},
		{
			name: "tools", field: "tools",
			set: map[string]string{"tools": fpOneTool, "messages": `[{"role":"user","content":"get_weather in Paris"}]`},
			want: map[string]fpWant{
				"openai": fpHonour(fpBody("tools", fpOneTool), fpNoBody("tool_choice")),
				"anthropic": fpHonour(fpBody("tools", `[{"name":"get_weather","description":"The weather in a city.",
					"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`), fpNoBody("tool_choice")),
				"gemini": fpHonour(fpBody("tools", `[{"functionDeclarations":[{"name":"get_weather","description":"The weather in a city.",
					"parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}]`), fpNoBody("toolConfig")),
				"bedrock":   fpHonour(fpBRTool("get_weather", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), fpBRChoice("", "")),
				"synthetic": fpHonour(fpCalls("get_weather")),
			},
		},
		{
			name: "top_logprobs", field: "top_logprobs", set: map[string]string{"top_logprobs": `2`},
			want: fpAll(fpRefuse),
		},
		{
			name: "top_p", field: "top_p", set: map[string]string{"top_p": `0.5`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("top_p", `0.5`)),
				"anthropic": fpHonour(fpBody("top_p", `0.5`)),
				"gemini":    fpHonour(fpBody("generationConfig.topP", `0.5`)),
				"bedrock": fpHonour(fpBR("InferenceConfig.TopP 0.5", func(c *fpConverse) bool {
					return c.inference != nil && aws.ToFloat32(c.inference.TopP) == 0.5
				})),
				"synthetic": fpHonour(fpReq("TopP 0.5", func(r *chat.Request) bool { return fpIs(r.TopP, 0.5) })),
			},
		},
		{
			// Gemini and Bedrock have no end-user id: accepted, not forwarded.
			name: "user", field: "user", set: map[string]string{"user": `"user-1"`},
			want: map[string]fpWant{
				"openai":    fpHonour(fpBody("user", `"user-1"`)),
				"anthropic": fpHonour(fpBody("metadata", `{"user_id":"user-1"}`)),
				"gemini":    fpAccept(),
				"bedrock":   fpAccept(),
				"synthetic": fpHonour(fpReq(`User "user-1"`, func(r *chat.Request) bool { return r.User == "user-1" })),
			},
		},
		fpOpenAIOnlyCase("verbosity", "low", func(r *chat.Request) string { return r.Verbosity }),
		{
			name: "web_search_options", field: "web_search_options", set: map[string]string{"web_search_options": `{"search_context_size":"low"}`},
			want: fpAll(fpRefuse),
		},
	}
}

// fpMaxTokensCase is max_tokens or its alias max_completion_tokens, 2:
// the synthetic model's answer ("You said: hello world") is cut.
func fpMaxTokensCase(field string) fpCase {
	return fpCase{
		name: field, field: field, set: map[string]string{field: `2`},
		want: map[string]fpWant{
			"openai":    fpHonour(fpBody("max_completion_tokens", `2`)),
			"anthropic": fpHonour(fpBody("max_tokens", `2`)),
			"gemini":    fpHonour(fpBody("generationConfig.maxOutputTokens", `2`)),
			"bedrock": fpHonour(fpBR("InferenceConfig.MaxTokens 2", func(c *fpConverse) bool {
				return c.inference != nil && aws.ToInt32(c.inference.MaxTokens) == 2
			})),
			"synthetic": fpHonour(fpReq("MaxTokens 2", func(r *chat.Request) bool { return r.MaxTokens == 2 }),
				fpAnswer(`"You said:", finish reason length`, func(r *fpResult) bool {
					return r.resp.Content == "You said:" && r.resp.FinishReason == chat.FinishLength
				})),
		},
	}
}

// fpOpenAIOnlyCase is one of the OpenAI-only fields: forwarded to
// OpenAI-compatible upstreams, refused by the others.
func fpOpenAIOnlyCase(field, value string, get func(*chat.Request) string) fpCase {
	v := strconv.Quote(value)
	return fpCase{
		name: field, field: field, set: map[string]string{field: v},
		want: map[string]fpWant{
			"openai":    fpHonour(fpBody(field, v)),
			"anthropic": fpRefuse,
			"gemini":    fpRefuse,
			"bedrock":   fpRefuse,
			"synthetic": fpHonour(fpReq(field+" "+v, func(r *chat.Request) bool { return get(r) == value })),
		},
	}
}

// fpStopCase is stop "world", as an array or a string. The synthetic
// model's echo ("You said: hello world") contains it: an answer that
// honours stop ends before it.
func fpStopCase(name, value string) fpCase {
	return fpCase{
		name: name, field: "stop", set: map[string]string{"stop": value},
		want: map[string]fpWant{
			"openai":    fpHonour(fpBody("stop", `["world"]`)),
			"anthropic": fpHonour(fpBody("stop_sequences", `["world"]`)),
			"gemini":    fpHonour(fpBody("generationConfig.stopSequences", `["world"]`)),
			"bedrock": fpHonour(fpBR(`InferenceConfig.StopSequences ["world"]`, func(c *fpConverse) bool {
				return c.inference != nil && slices.Equal(c.inference.StopSequences, []string{"world"})
			})),
			"synthetic": fpHonour(fpReq(`Stop ["world"]`, func(r *chat.Request) bool { return slices.Equal(r.Stop, []string{"world"}) }),
				fpAnswer(`content without "world"`, func(r *fpResult) bool { return !strings.Contains(r.resp.Content, "world") })),
		},
	}
}

// Checks.

// fpPath checks the upstream call: the HTTP path and query, or the
// method called (Converse, ConverseStream; Complete, Stream).
func fpPath(want string) fpCheck {
	return func(r *fpResult) error {
		if r.call.method != want {
			return fmt.Errorf("upstream call %s; want %s", r.call.method, want)
		}
		return nil
	}
}

// fpBody checks that the upstream JSON body has want (JSON) at path
// (dot-separated keys and array indexes).
func fpBody(path, want string) fpCheck {
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		panic(fmt.Sprintf("bad test JSON %s: %v", want, err))
	}
	return func(r *fpResult) error {
		if r.call.body == nil {
			return fmt.Errorf("no JSON body upstream; want %s = %s", path, want)
		}
		got, ok := fpLookup(r.call.body, path)
		if !ok {
			return fmt.Errorf("upstream body has no %s; want %s", path, fpCompact(want))
		}
		if !reflect.DeepEqual(got, w) {
			g, _ := json.Marshal(got)
			return fmt.Errorf("upstream %s = %s; want %s", path, g, fpCompact(want))
		}
		return nil
	}
}

// fpNoBody checks that the upstream JSON body has nothing at path.
func fpNoBody(path string) fpCheck {
	return func(r *fpResult) error {
		if got, ok := fpLookup(r.call.body, path); ok {
			g, _ := json.Marshal(got)
			return fmt.Errorf("upstream %s = %s; want none", path, g)
		}
		return nil
	}
}

// fpBR checks the recorded Bedrock input.
func fpBR(desc string, ok func(c *fpConverse) bool) fpCheck {
	return func(r *fpResult) error {
		if r.call.bedrock == nil {
			return fmt.Errorf("no Bedrock input; want %s", desc)
		}
		if !ok(r.call.bedrock) {
			return fmt.Errorf("Bedrock %s input: want %s; got %s", r.call.method, desc, r.call.bedrock)
		}
		return nil
	}
}

// fpBRField checks the JSON of a document field of the Bedrock input
// (additionalModelRequestFields).
func fpBRField(path, want string) fpCheck {
	body := fpBody(strings.TrimPrefix(path, "additionalModelRequestFields."), want)
	return func(r *fpResult) error {
		if r.call.bedrock == nil || r.call.bedrock.additional == nil {
			return fmt.Errorf("no %s in the Bedrock input; want %s", path, want)
		}
		return body(&fpResult{call: fpCall{body: r.call.bedrock.additional}})
	}
}

// fpBRTool checks that the Bedrock toolConfig declares the tool name with
// the input schema want.
func fpBRTool(name, want string) fpCheck {
	return fpBR(fmt.Sprintf("toolConfig with tool %s %s", name, want), func(c *fpConverse) bool {
		if c.tools == nil {
			return false
		}
		for _, tl := range c.tools.Tools {
			spec, ok := tl.(*types.ToolMemberToolSpec)
			if !ok || aws.ToString(spec.Value.Name) != name {
				continue
			}
			schema, ok := spec.Value.InputSchema.(*types.ToolInputSchemaMemberJson)
			return ok && fpSameJSON(fpDoc(schema.Value), want)
		}
		return false
	})
}

// fpBRChoice checks the Bedrock toolChoice: "any", "tool" (named name),
// or "" for none sent (auto).
func fpBRChoice(kind, name string) fpCheck {
	return fpBR(fmt.Sprintf("toolChoice %q %s", kind, name), func(c *fpConverse) bool {
		if c.tools == nil {
			return false
		}
		switch ch := c.tools.ToolChoice.(type) {
		case nil:
			return kind == ""
		case *types.ToolChoiceMemberAny:
			return kind == "any"
		case *types.ToolChoiceMemberTool:
			return kind == "tool" && aws.ToString(ch.Value.Name) == name
		}
		return false
	})
}

// fpReq checks the chat.Request the synthetic provider got.
func fpReq(desc string, ok func(r *chat.Request) bool) fpCheck {
	return func(r *fpResult) error {
		if r.call.req == nil || !ok(r.call.req) {
			return fmt.Errorf("provider request: want %s", desc)
		}
		return nil
	}
}

// fpAnswer checks the answer.
func fpAnswer(desc string, ok func(r *fpResult) bool) fpCheck {
	return func(r *fpResult) error {
		if !ok(r) {
			return fmt.Errorf("answer: want %s; got content %q, reasoning %q, tool calls %v, finish %s",
				desc, r.resp.Content, r.resp.Reasoning, r.resp.ToolCalls, r.resp.FinishReason)
		}
		return nil
	}
}

// fpCalls checks that the answer calls exactly the tools names.
func fpCalls(names ...string) fpCheck {
	return fpAnswer(fmt.Sprintf("tool calls %v", names), func(r *fpResult) bool {
		var got []string
		for _, c := range r.resp.ToolCalls {
			got = append(got, c.Name)
		}
		return slices.Equal(got, names)
	})
}

// fpStreamed checks that the content came as deltas.
func fpStreamed(want string) fpCheck {
	return func(r *fpResult) error {
		if r.streamed != want {
			return fmt.Errorf("streamed content %q; want %q", r.streamed, want)
		}
		return nil
	}
}

// fpUsage checks that the answer has the upstream's usage.
func fpUsage() fpCheck {
	return fpAnswer("usage", func(r *fpResult) bool {
		u := r.resp.Usage
		return u.PromptTokens > 0 && u.CompletionTokens > 0 && u.TotalTokens == u.PromptTokens+u.CompletionTokens
	})
}

// fpLookup returns the value at path in v, decoded JSON.
func fpLookup(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func fpCompact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// fpSameJSON reports whether a and b are the same JSON value.
func fpSameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// fpIs reports whether p points to v.
func fpIs(p *float64, v float64) bool { return p != nil && *p == v }

// fpOne returns the one element of s, or nil.
func fpOne[T any](s []T) any {
	if len(s) != 1 {
		return nil
	}
	return s[0]
}

// fpText returns the text of a Bedrock text block, or "".
func fpText(b any) string {
	if t, ok := b.(*types.ContentBlockMemberText); ok {
		return t.Value
	}
	return ""
}

// fpDoc returns a smithy document as compact JSON, or "".
func fpDoc(d document.Interface) string {
	if d == nil {
		return ""
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil {
		return ""
	}
	return fpCompact(string(b))
}

// The rig: a Gateway with the five providers in front of fake upstreams.

// fpCall is one request as an upstream got it.
type fpCall struct {
	method  string         // HTTP path and query; Converse or ConverseStream; Complete or Stream
	body    map[string]any // openai, anthropic, gemini: the JSON body
	bedrock *fpConverse    // bedrock: the input
	req     *chat.Request  // synthetic: the request
}

// fpConverse is the part of a Converse or ConverseStream input the Bedrock
// provider sets.
type fpConverse struct {
	modelID    string
	messages   []types.Message
	system     []types.SystemContentBlock
	inference  *types.InferenceConfiguration
	tools      *types.ToolConfiguration
	additional map[string]any // additionalModelRequestFields, decoded
}

func (c *fpConverse) String() string {
	s := fmt.Sprintf("{model %s, %d messages, %d system blocks", c.modelID, len(c.messages), len(c.system))
	if in := c.inference; in != nil {
		s += fmt.Sprintf(", maxTokens %d", aws.ToInt32(in.MaxTokens))
		if in.Temperature != nil {
			s += fmt.Sprintf(", temperature %g", *in.Temperature)
		}
		if in.TopP != nil {
			s += fmt.Sprintf(", topP %g", *in.TopP)
		}
		if in.StopSequences != nil {
			s += fmt.Sprintf(", stopSequences %q", in.StopSequences)
		}
	}
	if c.tools != nil {
		s += fmt.Sprintf(", %d tools, toolChoice %T", len(c.tools.Tools), c.tools.ToolChoice)
	}
	if c.additional != nil {
		b, _ := json.Marshal(c.additional)
		s += ", additional " + string(b)
	}
	return s + "}"
}

func newFPConverse(t *testing.T, model *string, msgs []types.Message, sys []types.SystemContentBlock,
	inf *types.InferenceConfiguration, tools *types.ToolConfiguration, add document.Interface) *fpConverse {
	c := &fpConverse{modelID: aws.ToString(model), messages: msgs, system: sys, inference: inf, tools: tools}
	if add != nil {
		if err := json.Unmarshal([]byte(fpDoc(add)), &c.additional); err != nil {
			t.Errorf("additionalModelRequestFields: %v", err)
		}
	}
	return c
}

// fpUpstream records the requests one upstream got.
type fpUpstream struct {
	mu    sync.Mutex
	calls []fpCall
}

func (u *fpUpstream) add(c fpCall) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, c)
}

// take returns the recorded calls and forgets them.
func (u *fpUpstream) take() []fpCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.calls
	u.calls = nil
	return c
}

type fpRig struct {
	gw *chat.Gateway
	up map[string]*fpUpstream
}

func newFPRig(t *testing.T) *fpRig {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	rig := &fpRig{up: map[string]*fpUpstream{}}
	for _, p := range fpProviders {
		rig.up[p] = &fpUpstream{}
	}
	oa := fpHTTPUpstream(t, rig.up["openai"], fpOpenAIAnswer)
	an := fpHTTPUpstream(t, rig.up["anthropic"], fpAnthropicAnswer)
	ge := fpHTTPUpstream(t, rig.up["gemini"], fpGeminiAnswer)
	rig.gw = chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"openai":    openai.New(openai.Config{BaseURL: oa.URL + "/v1", APIKey: "test", HTTPClient: oa.Client()}),
		"anthropic": anthropic.New(anthropic.Config{BaseURL: an.URL, APIKey: "test", HTTPClient: an.Client()}),
		"gemini":    gemini.New(gemini.Config{BaseURL: ge.URL, APIKey: "test", HTTPClient: ge.Client()}),
		"bedrock":   bedrock.New(&fpBedrock{t: t, up: rig.up["bedrock"]}),
		"synthetic": &fpSynthetic{up: rig.up["synthetic"], chat: synthetic.NewChat()},
	}})
	return rig
}

// fpHTTPUpstream is an upstream on loopback that records each JSON body
// and answers with answer(path, stream).
func fpHTTPUpstream(t *testing.T, up *fpUpstream, answer func(path string, stream bool) (contentType, body string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("upstream body %q is not a JSON object: %v", b, err)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		path := r.URL.Path
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery
		}
		up.add(fpCall{method: path, body: body})
		stream := body["stream"] == true || strings.Contains(path, ":streamGenerateContent")
		ct, out := answer(path, stream)
		w.Header().Set("Content-Type", ct)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func fpOpenAIAnswer(_ string, stream bool) (string, string) {
	if !stream {
		return "application/json", `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,
			"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	}
	return "text/event-stream", "" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n" +
		"data: [DONE]\n\n"
}

func fpAnthropicAnswer(_ string, stream bool) (string, string) {
	if !stream {
		return "application/json", `{"id":"msg_1","type":"message","role":"assistant",
			"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
	}
	return "text/event-stream", "" +
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
}

func fpGeminiAnswer(_ string, stream bool) (string, string) {
	const answer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"responseId":"r1"}`
	if !stream {
		return "application/json", answer
	}
	return "text/event-stream", "data: " + answer + "\n\n"
}

// fpBedrock is a bedrock.ConverseStreamer that records each input. It
// answers Converse itself; ConverseStream's output can only be made by the
// SDK, so it is answered by a real client talking to an event stream
// server on loopback.
type fpBedrock struct {
	t    *testing.T
	up   *fpUpstream
	once sync.Once
	sdk  *bedrockruntime.Client
}

var _ bedrock.ConverseStreamer = (*fpBedrock)(nil)

func (f *fpBedrock) Converse(_ context.Context, in *bedrockruntime.ConverseInput, _ ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error) {
	f.up.add(fpCall{method: "Converse", bedrock: newFPConverse(f.t, in.ModelId, in.Messages, in.System, in.InferenceConfig, in.ToolConfig, in.AdditionalModelRequestFields)})
	return &bedrockruntime.ConverseOutput{
		Output: &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "ok"}}}},
		StopReason: types.StopReasonEndTurn,
		Usage:      &types.TokenUsage{InputTokens: aws.Int32(3), OutputTokens: aws.Int32(1), TotalTokens: aws.Int32(4)},
	}, nil
}

func (f *fpBedrock) ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error) {
	f.up.add(fpCall{method: "ConverseStream", bedrock: newFPConverse(f.t, in.ModelId, in.Messages, in.System, in.InferenceConfig, in.ToolConfig, in.AdditionalModelRequestFields)})
	f.once.Do(func() { f.sdk = fpEventStreamClient(f.t) })
	return f.sdk.ConverseStream(ctx, in, opts...)
}

// fpEventStreamClient is a bedrockruntime client whose ConverseStream is
// answered "ok" by a server on loopback, in the AWS event stream encoding.
func fpEventStreamClient(t *testing.T) *bedrockruntime.Client {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range []struct{ typ, payload string }{
		{"messageStart", `{"role":"assistant"}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"ok"}}`},
		{"contentBlockStop", `{"contentBlockIndex":0}`},
		{"messageStop", `{"stopReason":"end_turn"}`},
		{"metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}`},
	} {
		var msg eventstream.Message
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue(ev.typ))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = []byte(ev.payload)
		if err := enc.Encode(&buf, msg); err != nil {
			t.Fatal(err)
		}
	}
	stream := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/converse-stream") {
			t.Errorf("bedrock: unexpected path %s", r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		_, _ = w.Write(stream)
	}))
	t.Cleanup(srv.Close)
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Source: "test"}, nil
		}),
		RetryMaxAttempts: 1,
		HTTPClient:       srv.Client(),
	})
}

// fpSynthetic is the synthetic provider, recording the requests it gets:
// the synthetic model has no upstream, so its request is what "the
// upstream got".
type fpSynthetic struct {
	up   *fpUpstream
	chat *synthetic.Chat
}

var (
	_ chat.FeatureProvider  = (*fpSynthetic)(nil)
	_ chat.ImageBytesNeeder = (*fpSynthetic)(nil)
)

func (s *fpSynthetic) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	s.up.add(fpCall{method: "Complete", req: req})
	return s.chat.Complete(ctx, req)
}

func (s *fpSynthetic) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	s.up.add(fpCall{method: "Stream", req: req})
	return s.chat.Stream(ctx, req, w)
}

func (s *fpSynthetic) Features() chat.Features { return s.chat.Features() }
func (s *fpSynthetic) NeedsImageBytes() bool   { return s.chat.NeedsImageBytes() }

// fpSink is a chat.Sink that keeps the answer.
type fpSink struct {
	started bool
	content strings.Builder
	resp    *chat.Response
}

func (s *fpSink) Start() error            { s.started = true; return nil }
func (s *fpSink) Begin(chat.Answer) error { return nil }
func (s *fpSink) Delta(d chat.Delta) error {
	s.content.WriteString(d.Content)
	return nil
}
func (s *fpSink) Flush() error                  { return nil }
func (s *fpSink) End(resp *chat.Response) error { s.resp = resp; return nil }
