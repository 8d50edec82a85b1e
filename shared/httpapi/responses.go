package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// Responses serves POST /v1/responses, OpenAI's Responses API, statelessly,
// over the same gateway as chat completions (providers, auth, rate limits,
// usage and credits): the request is translated into chat.Params (input
// items into messages, instructions into a system message, function tools,
// text.format into response_format), run through chat.Gateway.Run, and
// the answer is encoded as a response object, or, with "stream": true, as
// the Responses API's named events (response.created ... response.completed).
//
// Nothing is stored: "store" is accepted and answered false,
// previous_response_id and item_reference to a message are refused with a
// 400 that says so. A function_call item's id carries the call itself
// (fc_ and its call id, name and arguments, base64url), so a client that
// sends back an item_reference to one (the Vercel AI SDK does, by default)
// is understood without storage; a function call's events are therefore
// sent once its arguments are complete.
func Responses(gw *chat.Gateway, log *slog.Logger, opts ...ChatOption) http.Handler {
	cfg, log := chatSetup(log, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sink committer
		var paths []string
		err := serveResponses(w, r, gw, cfg, &sink, &paths)
		if err != nil {
			writeChatError(w, r, log, sink, responsesParam(err, paths))
		}
	})
}

func serveResponses(w http.ResponseWriter, r *http.Request, gw *chat.Gateway, cfg chatConfig, sink *committer, paths *[]string) error {
	body, err := readBodyUpTo(r, MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := checkTextBody(r, body); err != nil {
		return err
	}
	var rp responsesRequest
	if err := unmarshal(body, &rp); err != nil {
		return err
	}
	p, msgPaths, err := rp.chatParams()
	*paths = msgPaths
	if err != nil {
		return err
	}
	meta := rp.echo()
	p.ID, p.Kind = meta.ID, credits.KindResponses // the request's record: GET /v1/generations/{id}
	ctx := r.Context()
	noteModel(ctx, rp.Model)
	if !rp.Stream {
		js := &responseJSONSink{jsonSink: jsonSink{w: w, keepAlive: cfg.keepAlive}, meta: meta}
		*sink = &js.jsonSink
		defer js.stopKeepAlive()
		return gw.Run(ctx, account(r), p, notingSink{js, ctx})
	}
	s := newSSEStream(w, &responsesEncoder{meta: meta}, cfg.heartbeat)
	*sink = s
	defer s.stopHeartbeats()
	return gw.Run(ctx, account(r), p, notingSink{s, ctx})
}

// responsesRequest is the body of POST /v1/responses.
type responsesRequest struct {
	Model              string              `json:"model"`
	Models             []string            `json:"models"` // fallbacks, as in chat completions
	Input              json.RawMessage     `json:"input"`
	Instructions       *string             `json:"instructions"`
	MaxOutputTokens    json.RawMessage     `json:"max_output_tokens"`
	Reasoning          *responsesReasoning `json:"reasoning"`
	Tools              []responsesTool     `json:"tools"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	ParallelToolCalls  *bool               `json:"parallel_tool_calls"`
	Text               *responsesText      `json:"text"`
	Stream             bool                `json:"stream"`
	StreamOptions      json.RawMessage     `json:"stream_options"` // accepted: include_obfuscation only pads events
	Store              *bool               `json:"store"`          // accepted; nothing is stored either way
	PreviousResponseID *string             `json:"previous_response_id"`
	Temperature        *float64            `json:"temperature"`
	TopP               *float64            `json:"top_p"`
	User               string              `json:"user"`
	Metadata           map[string]string   `json:"metadata"`
	Truncation         string              `json:"truncation"`
	Include            []string            `json:"include"`
	ServiceTier        string              `json:"service_tier"`
	PromptCacheKey     string              `json:"prompt_cache_key"`
	SafetyIdentifier   string              `json:"safety_identifier"`
	MaxToolCalls       *int                `json:"max_tool_calls"`
	Background         *bool               `json:"background"`
	Conversation       json.RawMessage     `json:"conversation"`
	Prompt             json.RawMessage     `json:"prompt"`
	TopLogprobs        *int                `json:"top_logprobs"`
	Seed               *int64              `json:"seed"` // not in OpenAI's Responses API; some clients send it
}

type responsesReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type responsesTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	Strict       *bool           `json:"strict"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"` // a prompt-cache breakpoint, as in chat completions
}

type responsesText struct {
	Format    *responsesFormat `json:"format"`
	Verbosity string           `json:"verbosity,omitempty"`
}

type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesItem is one input item: a message (type "message" or absent,
// with a role), a function_call, a function_call_output, a reasoning item
// or an item_reference.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// CacheControl on a message, function_call or function_call_output
	// item is a breakpoint at its end, as on a chat message.
	CacheControl json.RawMessage `json:"cache_control"`
}

// responsesPart is one content part of an input message, or of a
// function_call_output's output; CacheControl is a prompt-cache
// breakpoint after it, as on a chat content part.
type responsesPart struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	ImageURL     string          `json:"image_url"`
	FileID       string          `json:"file_id"`
	Refusal      string          `json:"refusal"`
	Detail       string          `json:"detail"`
	CacheControl json.RawMessage `json:"cache_control"`
}

func rawJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// chatParams translates the request into chat.Params, and returns, for
// each message, the request path it came from (for error params).
func (rp *responsesRequest) chatParams() (*chat.Params, []string, error) {
	switch {
	case rp.PreviousResponseID != nil && *rp.PreviousResponseID != "":
		return nil, nil, refuse("previous_response_id", "previous_response_id needs stored responses, and Genway keeps none; send the whole conversation as input items.")
	case isSetRaw(rp.Conversation):
		return nil, nil, refuse("conversation", "Conversations need stored state, and Genway keeps none; send the whole conversation as input items.")
	case isSetRaw(rp.Prompt):
		return nil, nil, refuse("prompt", "Stored prompt templates are not supported.")
	case rp.Background != nil && *rp.Background:
		return nil, nil, refuse("background", "Background responses need stored state, and Genway keeps none.")
	case rp.MaxToolCalls != nil:
		return nil, nil, refuse("max_tool_calls", "max_tool_calls limits built-in tools, which Genway does not run.")
	case rp.TopLogprobs != nil:
		return nil, nil, refuse("top_logprobs", "logprobs are not supported.")
	case rp.Truncation != "" && rp.Truncation != "disabled":
		return nil, nil, refuse("truncation", `Only truncation "disabled" is supported: input is never cut.`)
	}
	for i, inc := range rp.Include {
		if strings.Contains(inc, "logprobs") {
			return nil, nil, refuse(fmt.Sprintf("include[%d]", i), "logprobs are not supported.")
		}
	}
	p := &chat.Params{
		Model: rp.Model, Models: rp.Models, Stream: rp.Stream, MaxCompletionTokens: rp.MaxOutputTokens,
		Temperature: rp.Temperature, TopP: rp.TopP, Seed: rp.Seed, User: rp.User, Metadata: rp.Metadata,
		ParallelToolCalls: rp.ParallelToolCalls, ServiceTier: rp.ServiceTier,
		PromptCacheKey: rp.PromptCacheKey, SafetyIdentifier: rp.SafetyIdentifier,
	}
	if r := rp.Reasoning; r != nil && r.Effort != nil {
		switch e := *r.Effort; e {
		case "none":
		case "minimal":
			low := "low"
			p.ReasoningEffort = &low
		default:
			p.ReasoningEffort = &e
		}
	}
	for i, t := range rp.Tools {
		if t.Type != "function" {
			return nil, nil, refuse(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("Only function tools are supported, not %q: Genway runs no built-in tools.", t.Type))
		}
		p.Tools = append(p.Tools, chat.ParamsTool{Type: "function", CacheControl: t.CacheControl, Function: &chat.ParamsFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if isSetRaw(rp.ToolChoice) {
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		switch {
		case rp.ToolChoice[0] == '"':
			p.ToolChoice = rp.ToolChoice
		case json.Unmarshal(rp.ToolChoice, &named) == nil && named.Type == "function":
			p.ToolChoice = rawJSON(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
		default:
			return nil, nil, refuse("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": ...}.`)
		}
	}
	if t := rp.Text; t != nil {
		p.Verbosity = t.Verbosity
		if f := t.Format; f != nil {
			p.ResponseFormat = &chat.ParamsResponseFormat{Type: f.Type}
			if f.Type == chat.FormatJSONSchema {
				p.ResponseFormat.JSONSchema = &chat.ParamsJSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
			}
		}
	}
	var paths []string
	add := func(path string, m chat.ParamsMessage) {
		p.Messages = append(p.Messages, m)
		paths = append(paths, path)
	}
	if rp.Instructions != nil && *rp.Instructions != "" {
		add("instructions", chat.ParamsMessage{Role: chat.RoleSystem, Content: rawJSON(*rp.Instructions)})
	}
	in := bytes.TrimSpace(rp.Input)
	switch {
	case len(in) == 0 || string(in) == "null":
		return nil, nil, apierr.Invalidf("input", "missing_field", "input is required: a string or an array of items")
	case in[0] == '"':
		add("input", chat.ParamsMessage{Role: chat.RoleUser, Content: in})
		return p, paths, nil
	case in[0] != '[':
		return nil, nil, apierr.Invalidf("input", "invalid_value", "input must be a string or an array of items")
	}
	var items []responsesItem
	if err := json.Unmarshal(in, &items); err != nil {
		return nil, nil, apierr.Invalidf("input", "invalid_value", "input must be a string or an array of items: %v", err)
	}
	for i, it := range items {
		at := fmt.Sprintf("input[%d]", i)
		if it.Type == "item_reference" || (it.Type == "" && it.Role == "" && it.ID != "") { // the type of a reference may be left out
			it.Type = "item_reference"
			call, ok := decodeCallID(it.ID)
			if strings.HasPrefix(it.ID, "rs_") {
				continue // earlier reasoning is not sent upstream (as in chat completions)
			}
			if !ok {
				return nil, nil, refuse(at+".id", fmt.Sprintf("item_reference %q needs stored responses, and Genway keeps none; send the item itself (with the Vercel AI SDK: providerOptions.openai.store = false).", it.ID))
			}
			it = call
		}
		switch it.Type {
		case "", "message":
			content, err := messageContent(it.Content, at)
			if err != nil {
				return nil, nil, err
			}
			add(at, chat.ParamsMessage{Role: it.Role, Content: content, CacheControl: it.CacheControl})
		case "function_call":
			if it.CallID == "" {
				return nil, nil, apierr.Invalidf(at+".call_id", "missing_field", "call_id is required in a function_call item")
			}
			tc := chat.ParamsToolCall{ID: it.CallID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = it.Name, it.Arguments
			// Calls of one turn go in one assistant message; a call's
			// cache_control is the message's (a breakpoint after its calls),
			// and names the call's path in errors.
			if n := len(p.Messages); n > 0 && p.Messages[n-1].Role == chat.RoleAssistant && len(p.Messages[n-1].ToolCalls) > 0 {
				p.Messages[n-1].ToolCalls = append(p.Messages[n-1].ToolCalls, tc)
				if isSetRaw(it.CacheControl) {
					p.Messages[n-1].CacheControl, paths[n-1] = it.CacheControl, at
				}
				continue
			}
			add(at, chat.ParamsMessage{Role: chat.RoleAssistant, ToolCalls: []chat.ParamsToolCall{tc}, CacheControl: it.CacheControl})
		case "function_call_output":
			out, err := outputContent(it.Output, at)
			if err != nil {
				return nil, nil, err
			}
			add(at+outputPath, chat.ParamsMessage{Role: chat.RoleTool, ToolCallID: it.CallID, Content: out, CacheControl: it.CacheControl})
		case "reasoning":
			continue // earlier reasoning is not sent upstream (as in chat completions)
		default:
			return nil, nil, refuse(at+".type", fmt.Sprintf("Input items of type %q are not supported.", it.Type))
		}
	}
	return p, paths, nil
}

// messageContent translates an input message's content (a string, or
// input_text / output_text / input_image / refusal parts) to chat content.
func messageContent(raw json.RawMessage, at string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return raw, nil // a string, or an error for the gateway to name
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, apierr.Invalidf(at+".content", "invalid_value", "content must be a string or an array of content parts")
	}
	out := make([]chat.ParamsPart, len(parts))
	for j, pt := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		switch pt.Type {
		case "input_text", "output_text", "text":
			if pt.Text == nil {
				return nil, apierr.Invalidf(pat+".text", "missing_field", "text is required in a text part")
			}
			out[j] = chat.ParamsPart{Type: "text", Text: pt.Text, CacheControl: pt.CacheControl}
		case "refusal":
			t := pt.Refusal
			out[j] = chat.ParamsPart{Type: "text", Text: &t, CacheControl: pt.CacheControl}
		case "input_image":
			if pt.FileID != "" {
				return nil, refuse(pat+".file_id", "Files are not stored here: send the image as image_url (an https URL or a data URI).")
			}
			out[j] = chat.ParamsPart{Type: "image_url", ImageURL: &chat.ParamsImageURL{URL: pt.ImageURL, Detail: pt.Detail}, CacheControl: pt.CacheControl}
		case "":
			return nil, apierr.Invalidf(pat+".type", "missing_field", "type is required in a content part")
		default:
			return nil, refuse(pat+".type", fmt.Sprintf("Content parts of type %q are not supported.", pt.Type))
		}
	}
	return rawJSON(out), nil
}

// outputPath ends the path of a chat message made from a
// function_call_output item: responsesParam names its content "output".
const outputPath = ".output"

// outputContent is a function_call_output's output as a tool message's
// content: a string, or the text of its input_text parts: one string, or,
// when a part carries cache_control, the parts themselves.
func outputContent(raw json.RawMessage, at string) (json.RawMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return rawJSON(s), nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, apierr.Invalidf(at+".output", "invalid_value", "output must be a string or an array of input_text parts")
	}
	var b strings.Builder
	marked := false
	for j, pt := range parts {
		if pt.Type != "input_text" || pt.Text == nil {
			return nil, refuse(fmt.Sprintf("%s.output[%d]", at, j), "Only text tool output is supported.")
		}
		b.WriteString(*pt.Text)
		marked = marked || len(pt.CacheControl) > 0
	}
	if !marked {
		return rawJSON(b.String()), nil
	}
	out := make([]chat.ParamsPart, len(parts))
	for j, pt := range parts {
		out[j] = chat.ParamsPart{Type: "text", Text: pt.Text, CacheControl: pt.CacheControl}
	}
	return rawJSON(out), nil
}

func isSetRaw(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && string(s) != "null"
}

// encodeCallID is the id of a function_call output item: "fc_" and the
// call (id, name, arguments) in base64url, so that an item_reference to
// it can be resolved without storage.
func encodeCallID(c chat.ToolCall) string {
	b, _ := json.Marshal([3]string{c.ID, c.Name, c.Arguments})
	return "fc_" + base64.RawURLEncoding.EncodeToString(b)
}

// decodeCallID reverses encodeCallID into a function_call item.
func decodeCallID(id string) (responsesItem, bool) {
	rest, ok := strings.CutPrefix(id, "fc_")
	if !ok {
		return responsesItem{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var c [3]string
	if err != nil || json.Unmarshal(b, &c) != nil || c[0] == "" {
		return responsesItem{}, false
	}
	return responsesItem{Type: "function_call", CallID: c[0], Name: c[1], Arguments: c[2]}, true
}

// chatParamRE matches the chat parameter paths that responsesParam maps
// back to the Responses request.
var chatParamRE = regexp.MustCompile(`^messages\[(\d+)\](.*)$`)

// responsesParam rewrites the param of a gateway error, which names the
// chat request's field, to the Responses request's.
func responsesParam(err error, paths []string) error {
	e := apierr.As(err)
	if e == nil || e.Param == "" {
		return err
	}
	c := *e
	switch {
	case c.Param == "max_completion_tokens":
		c.Param = "max_output_tokens"
	case c.Param == "reasoning_effort":
		c.Param = "reasoning.effort"
	case c.Param == "messages":
		c.Param = "input"
	case c.Param == "verbosity":
		c.Param = "text.verbosity"
	case strings.HasPrefix(c.Param, "response_format.json_schema."):
		c.Param = "text.format." + strings.TrimPrefix(c.Param, "response_format.json_schema.")
	case strings.HasPrefix(c.Param, "response_format"):
		c.Param = "text.format" + strings.TrimPrefix(strings.TrimPrefix(c.Param, "response_format"), ".json_schema")
	case strings.HasPrefix(c.Param, "tools["):
		c.Param = strings.Replace(c.Param, ".function.", ".", 1)
	case c.Param == "tool_choice.function.name":
		c.Param = "tool_choice.name"
	default:
		if m := chatParamRE.FindStringSubmatch(c.Param); m != nil {
			if i, _ := strconv.Atoi(m[1]); i < len(paths) {
				at, rest := paths[i], m[2]
				at, output := strings.CutSuffix(at, outputPath)
				switch {
				case rest == ".tool_call_id":
					rest = ".call_id"
				case strings.HasPrefix(rest, ".tool_calls"):
					rest = ""
				case output && strings.HasPrefix(rest, ".content"): // a function_call_output's content is its output
					rest = outputPath + strings.TrimPrefix(rest, ".content")
				}
				c.Param = at + rest
			}
		}
	}
	return &c
}

// newID returns prefix and a random id.
func newID(prefix string) string { return prefix + rand.Text() }

// responseObject is the response object of the Responses API.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []outputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          responsesReasoning `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               responsesText      `json:"text"`
	ToolChoice         any                `json:"tool_choice"` // "auto", or the request's as it was
	Tools              []responsesTool    `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsage     `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseUsage is a response's usage in the Responses API's shape, its
// details as the chat completions' (see usageJSON), and its cost in
// credits.
type responseUsage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  inputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails outputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
	Cost                credits.Amount      `json:"cost"`
}

// outputItem is one item of a response's output: a message, a
// function_call or a reasoning item.
type outputItem struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	Status    string         `json:"status,omitempty"`
	Role      string         `json:"role,omitempty"`
	Content   *[]contentPart `json:"content,omitempty"`
	Summary   *[]contentPart `json:"summary,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments *string        `json:"arguments,omitempty"`
}

type contentPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
	Logprobs    *[]any `json:"logprobs,omitempty"`
}

var none = []any{}

func outputTextPart(text string) contentPart {
	return contentPart{Type: "output_text", Text: text, Annotations: &none, Logprobs: &none}
}

// echo returns the response object that repeats the request's settings,
// with no output yet.
func (rp *responsesRequest) echo() *responseObject {
	o := &responseObject{
		ID: credits.NewRecordID("resp_", time.Now()), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Instructions: rp.Instructions, Model: rp.Model, Output: []outputItem{},
		ParallelToolCalls: rp.ParallelToolCalls == nil || *rp.ParallelToolCalls,
		Temperature:       rp.Temperature, TopP: rp.TopP, ToolChoice: "auto", Tools: rp.Tools,
		Truncation: "disabled", Metadata: rp.Metadata,
		Text: responsesText{Format: &responsesFormat{Type: "text"}},
	}
	if n, err := strconv.ParseInt(string(bytes.TrimSpace(rp.MaxOutputTokens)), 10, 64); err == nil {
		o.MaxOutputTokens = &n
	}
	if isSetRaw(rp.ToolChoice) {
		o.ToolChoice = rp.ToolChoice
	}
	if o.Tools == nil {
		o.Tools = []responsesTool{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if rp.Reasoning != nil {
		o.Reasoning = *rp.Reasoning
	}
	if rp.Text != nil {
		o.Text.Verbosity = rp.Text.Verbosity
		if rp.Text.Format != nil {
			o.Text.Format = rp.Text.Format
		}
	}
	if rp.User != "" {
		o.User = &rp.User
	}
	return o
}

// finish sets o's status, incomplete details and usage from resp.
func (o *responseObject) finish(resp *chat.Response) {
	o.Status = "completed"
	switch resp.FinishReason {
	case chat.FinishLength:
		o.Status, o.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	case chat.FinishContentFilter:
		o.Status, o.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "content_filter"}
	}
	u := &resp.Usage
	o.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		InputTokensDetails: inputDetails(u), OutputTokensDetails: outputTokensDetails{ReasoningTokens: u.ReasoningTokens}, Cost: u.Cost}
}

// responseJSONSink writes a non-streamed answer: one response object.
type responseJSONSink struct {
	jsonSink // Start, Delta, Flush
	meta     *responseObject
}

// Begin names the model that answers, and the attempts in the header.
func (j *responseJSONSink) Begin(a chat.Answer) error {
	j.meta.Model = a.Model
	return j.jsonSink.Begin(a)
}

// End writes the response object.
func (j *responseJSONSink) End(resp *chat.Response) error {
	o := j.meta
	if resp.Reasoning != "" {
		o.Output = append(o.Output, outputItem{Type: "reasoning", ID: newID("rs_"),
			Summary: &[]contentPart{{Type: "summary_text", Text: resp.Reasoning}}})
	}
	if resp.Content != "" || len(resp.ToolCalls) == 0 {
		o.Output = append(o.Output, outputItem{Type: "message", ID: newID("msg_"), Status: "completed", Role: chat.RoleAssistant,
			Content: &[]contentPart{outputTextPart(resp.Content)}})
	}
	for _, tc := range resp.ToolCalls {
		o.Output = append(o.Output, outputItem{Type: "function_call", ID: encodeCallID(tc), Status: "completed",
			CallID: tc.ID, Name: tc.Name, Arguments: &tc.Arguments})
	}
	o.finish(resp)
	return j.writeBody(o)
}

// refuse is chat.Refuse for a message without format verbs.
func refuse(param, msg string) error { return chat.Refuse(param, "%s", msg) }
