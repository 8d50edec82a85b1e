package httpapi

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
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
// items into messages, instructions into a system message, tools into
// functions: see responses_tools.go; text.format into response_format),
// run through chat.Gateway.Run, and the answer is encoded as a response
// object, or, with "stream": true, as the Responses API's named events
// (response.created ... response.completed).
//
// Nothing is stored: "store" is accepted and answered false,
// previous_response_id and item_reference to a message are refused with a
// 400 that says so. A function_call item's id carries the call itself
// (fc_ and its call id, name and arguments, base64url), so a client that
// sends back an item_reference to one (the Vercel AI SDK does, by default)
// is understood without storage; a call's events are therefore sent once
// its arguments are complete. Signed reasoning travels the same way, in
// reasoning items' encrypted_content (see responses_reasoning.go).
//
// Hosted tools (web_search, file_search...) are left out and named in
// the OmittedToolsHeader of the answer (and the access log).
//
// A candidate whose provider speaks the Responses API itself (OpenAI's
// models: chat.NativeProvider) is sent the request as the client sent it
// (chat.Params.Native), hosted tools included, and its events are
// relayed with Genway's id, model and usage.cost (see native.go); what
// only the translation refuses (untranslatable) refuses the other
// candidates only.
func Responses(gw *chat.Gateway, log *slog.Logger, opts ...ChatOption) http.Handler {
	cfg, log := chatSetup(log, opts)
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		var sink committer
		var tr translation
		err := serveResponses(w, r, gw, cfg, &sink, &tr)
		return chatError(w, r, log, sink, responsesParam(err, &tr))
	})
}

func serveResponses(w http.ResponseWriter, r *http.Request, gw *chat.Gateway, cfg chatConfig, sink *committer, tr *translation) error {
	body, err := readBodyUpTo(r, MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := checkTextBody(r, body); err != nil {
		return err
	}
	// The scanned fast path, else encoding/json and its errors; the body
	// is not changed after (rp's raw members are slices of it).
	var rp responsesRequest
	if !scanResponsesRequest(body, &rp) {
		if err := unmarshal(body, &rp); err != nil {
			return err
		}
	}
	rp.body = body
	p, err := rp.chatParams(tr)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if o := tr.tools.omitted; len(o) > 0 {
		w.Header().Set(OmittedToolsHeader, strings.Join(o, ", "))
		noteOmittedTools(ctx, o)
	}
	meta := rp.echo()
	p.ID, p.Kind = meta.ID, credits.KindResponses // the request's record: GET /v1/generations/{id}
	noteModel(ctx, rp.Model)
	if !rp.Stream {
		js := &responseJSONSink{jsonSink: jsonSink{w: w, keepAlive: cfg.keepAlive}, meta: meta, tools: tr.tools}
		*sink = &js.jsonSink
		defer js.stopKeepAlive()
		return gw.Run(ctx, account(r), p, notingSink{js, ctx})
	}
	s := newSSEStream(w, &responsesEncoder{meta: meta, tools: tr.tools}, cfg.heartbeat)
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
	Tools              []json.RawMessage   `json:"tools"` // see responses_tools.go
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	ParallelToolCalls  *bool               `json:"parallel_tool_calls"`
	Text               *responsesText      `json:"text"`
	Stream             bool                `json:"stream"`
	StreamOptions      json.RawMessage     `json:"stream_options"` // accepted: include_obfuscation only pads events
	Store              *bool               `json:"store"`          // accepted: Genway stores nothing (OpenAI's models get it as sent)
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
	// ClientMetadata is accepted and not translated: Codex sends its
	// installation, session and turn ids in it, which are no translated
	// upstream's business (OpenAI's chat completions take metadata only
	// to tag stored completions, and Genway stores none). A native
	// request (OpenAI's own models) has it as the client sent it.
	ClientMetadata map[string]string `json:"client_metadata"`

	body []byte // the request body, as the client sent it
}

// responsesReasoning is reasoning: effort, and summary (auto, concise,
// detailed), which is accepted: the reasoning text a provider gives
// streams as the summary.
type responsesReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
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
// with a role), a call of a tool (function_call, custom_tool_call,
// tool_search_call, local_shell_call, shell_call, apply_patch_call) or
// its output (the same with _output), a reasoning item or an
// item_reference. Its id (the client's, or Genway's) and status are
// accepted and ignored.
type responsesItem struct {
	Type      string            `json:"type"`
	Role      string            `json:"role"`
	Content   json.RawMessage   `json:"content"`
	ID        string            `json:"id"`
	CallID    string            `json:"call_id"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Arguments json.RawMessage   `json:"arguments"` // a JSON string; tool_search_call's is any JSON value
	Input     *string           `json:"input"`     // custom_tool_call
	Action    json.RawMessage   `json:"action"`    // local_shell_call, shell_call
	Operation json.RawMessage   `json:"operation"` // apply_patch_call
	Output    json.RawMessage   `json:"output"`
	Status    string            `json:"status"`
	Tools     []json.RawMessage `json:"tools"` // tool_search_output
	// EncryptedContent is a reasoning item's: Genway's (see
	// responses_reasoning.go), or another's, ignored.
	EncryptedContent string `json:"encrypted_content"`
	// CacheControl on a message, a call or its output is a breakpoint at
	// its end, as on a chat message.
	CacheControl json.RawMessage `json:"cache_control"`
}

// hostedCallItems are the input items of hosted tools' calls, which
// Genway leaves out (it left their tools out): a conversation begun where
// they ran may carry them.
var hostedCallItems = map[string]bool{"web_search_call": true, "file_search_call": true, "code_interpreter_call": true,
	"image_generation_call": true, "computer_call": true, "computer_call_output": true, "mcp_call": true,
	"mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true}

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

// translation is what a translated request's answer and errors need:
// the Responses path of each chat message and of each of its tool calls,
// and the tools; and the first refusal that only the translation makes
// (see untranslatable), for the candidates that would serve it
// translated.
type translation struct {
	messages []string
	calls    [][]string
	tools    *toolSet
	refusal  error
}

// only keeps err, when it is a refusal only the translation makes, as
// the request's translation refusal (the first one), and reports
// whether it was one: the translation then goes on without what it
// refused.
func (tr *translation) only(err error) bool {
	return keepRefusal(&tr.refusal, err)
}

// chatParams translates the request into chat.Params, noting in tr the
// paths its messages and tools came from (for error params) and its
// tools (for the answer). The Params carry the request itself too
// (chat.Native: an OpenAI model is sent that), with the first refusal
// only the translation makes (tr.refusal): what the translation could
// not carry is left out of the Params.
func (rp *responsesRequest) chatParams(tr *translation) (*chat.Params, error) {
	tr.tools = &toolSet{}
	switch {
	case rp.PreviousResponseID != nil && *rp.PreviousResponseID != "":
		return nil, refuse("previous_response_id", "previous_response_id needs stored responses, and Genway keeps none; send the whole conversation as input items.")
	case isSetRaw(rp.Conversation):
		return nil, refuse("conversation", "Conversations need stored state, and Genway keeps none; send the whole conversation as input items.")
	case isSetRaw(rp.Prompt):
		return nil, refuse("prompt", "Stored prompt templates are not supported.")
	case rp.Background != nil && *rp.Background:
		return nil, refuse("background", "Background responses need stored state, and Genway keeps none.")
	case rp.MaxToolCalls != nil:
		tr.only(cannotTranslate("max_tool_calls", "max_tool_calls limits built-in tools, which only OpenAI's own models run here."))
	case rp.TopLogprobs != nil:
		tr.only(cannotTranslate("top_logprobs", "logprobs are only given by OpenAI's own models here."))
	case rp.Truncation != "" && rp.Truncation != "disabled":
		tr.only(cannotTranslate("truncation", `Only truncation "disabled" is supported here (OpenAI's own models take "auto"): input is never cut.`))
	}
	for i, inc := range rp.Include {
		if strings.Contains(inc, "logprobs") {
			tr.only(cannotTranslate(fmt.Sprintf("include[%d]", i), "logprobs are only given by OpenAI's own models here."))
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
		case "xhigh":
			high := "high"
			p.ReasoningEffort = &high
		default:
			p.ReasoningEffort = &e
		}
	}
	if t := rp.Text; t != nil {
		p.Verbosity, p.VerbosityHint = t.Verbosity, true
		if f := t.Format; f != nil {
			p.ResponseFormat = &chat.ParamsResponseFormat{Type: f.Type}
			if f.Type == chat.FormatJSONSchema {
				p.ResponseFormat.JSONSchema = &chat.ParamsJSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
			}
		}
	}
	items, err := rp.items()
	if err != nil {
		return nil, err
	}
	// The tools that tool_search_output items loaded are offered too.
	var loaded []json.RawMessage
	var loadedPaths []string
	for i, it := range items {
		if it.Type == "tool_search_output" {
			for j, t := range it.Tools {
				loaded, loadedPaths = append(loaded, t), append(loadedPaths, fmt.Sprintf("input[%d].tools[%d]", i, j))
			}
		}
	}
	ts, err := newToolSet(rp.Tools, loaded, loadedPaths)
	if err != nil {
		return nil, err
	}
	tr.tools = ts
	if p.ToolChoice, err = ts.toolChoice(rp.ToolChoice); err != nil && !tr.only(err) {
		return nil, err
	}
	p.Tools = ts.tools
	b := inputBuilder{p: p, tr: tr, runStart: -1, itemCalls: map[string]string{}, sigs: map[string]sealedCall{}}
	if rp.Instructions != nil && *rp.Instructions != "" {
		b.add("instructions", chat.ParamsMessage{Role: chat.RoleSystem, Content: rawJSON(*rp.Instructions)})
	}
	if items == nil { // input is a string
		b.add("input", chat.ParamsMessage{Role: chat.RoleUser, Content: bytes.TrimSpace(rp.Input)})
		p.Native = &chat.Native{API: chat.APIResponses, Body: rp.body, Refusal: tr.refusal}
		return p, nil
	}
	for i, it := range items {
		if err := b.item(fmt.Sprintf("input[%d]", i), it); err != nil && !tr.only(err) {
			return nil, err
		}
	}
	b.flushImages()
	b.endRun()
	p.Native = &chat.Native{API: chat.APIResponses, Body: rp.body, Refusal: tr.refusal}
	for i := range p.Messages {
		for k := range p.Messages[i].ToolCalls {
			tc := &p.Messages[i].ToolCalls[k]
			if c, ok := b.sigs[tc.ID]; ok {
				tc.Signature, tc.SignedBy = c.Signature, c.SignedBy
			}
		}
	}
	return p, nil
}

// items decodes the input: nil for a string, else its items.
func (rp *responsesRequest) items() ([]responsesItem, error) {
	in := bytes.TrimSpace(rp.Input)
	switch {
	case len(in) == 0 || string(in) == "null":
		return nil, apierr.Invalidf("input", "missing_field", "input is required: a string or an array of items")
	case in[0] == '"':
		return nil, nil
	case in[0] != '[':
		return nil, apierr.Invalidf("input", "invalid_value", "input must be a string or an array of items")
	}
	var items []responsesItem
	if !scanResponsesItems(in, &items) { // the fast path, else encoding/json
		if err := json.Unmarshal(in, &items); err != nil {
			return nil, apierr.Invalidf("input", "invalid_value", "input must be a string or an array of items: %v", err)
		}
	}
	if items == nil {
		items = []responsesItem{}
	}
	return items, nil
}

// inputBuilder translates input items into chat messages. The items of
// one assistant turn (its run: reasoning, an assistant message, calls)
// make one assistant message where they can (calls after an assistant
// message join it), and the signed reasoning of the run's reasoning items
// goes on its first assistant message.
type inputBuilder struct {
	p           *chat.Params
	tr          *translation
	inRun       bool
	runStart    int // the index of the run's first assistant message; -1 if none yet
	runThoughts []chat.Thought
	itemCalls   map[string]string     // a local_shell_call's item id -> its call id
	sigs        map[string]sealedCall // the signed calls, by call id
	// images are the tool outputs' images, sent in a user message after
	// the turn's tool results (from the output at imagesAt): only a user
	// message may carry an image.
	images   []chat.ParamsPart
	imagesAt string
}

// flushImages adds the user message that carries the images of the tool
// outputs before it, if any.
func (b *inputBuilder) flushImages() {
	if len(b.images) == 0 {
		return
	}
	note := "(The images the tools returned.)"
	parts := append(b.images, chat.ParamsPart{Type: "text", Text: &note})
	b.add(b.imagesAt, chat.ParamsMessage{Role: chat.RoleUser, Content: rawJSON(parts)})
	b.images, b.imagesAt = nil, ""
}

// add appends a message that came from the item at path at.
func (b *inputBuilder) add(at string, m chat.ParamsMessage) {
	b.p.Messages = append(b.p.Messages, m)
	b.tr.messages = append(b.tr.messages, at)
	b.tr.calls = append(b.tr.calls, nil)
}

// endRun closes the assistant turn under way, if any.
func (b *inputBuilder) endRun() {
	if b.runStart >= 0 && len(b.runThoughts) > 0 {
		m := &b.p.Messages[b.runStart]
		m.Thoughts = append(m.Thoughts, b.runThoughts...)
	}
	b.inRun, b.runStart, b.runThoughts = false, -1, nil
}

// assistant notes that message n belongs to the assistant turn under way.
func (b *inputBuilder) assistant(n int) {
	b.inRun = true
	if b.runStart < 0 {
		b.runStart = n
	}
}

// call adds the model's call tc, from the item at path at, to the
// assistant turn under way: to its last assistant message, or as one.
// A call's cache_control is the message's (a breakpoint after its calls).
func (b *inputBuilder) call(at string, tc chat.ParamsToolCall, cache json.RawMessage) error {
	if tc.ID == "" {
		return apierr.Invalidf(at+".call_id", "missing_field", "call_id is required in a call item")
	}
	tc.Type = "function"
	ms := b.p.Messages
	if n := len(ms) - 1; b.inRun && n >= 0 && ms[n].Role == chat.RoleAssistant && !(isSetRaw(ms[n].Content) && isSetRaw(ms[n].CacheControl)) {
		ms[n].ToolCalls = append(ms[n].ToolCalls, tc)
		b.tr.calls[n] = append(b.tr.calls[n], at)
		if isSetRaw(cache) {
			ms[n].CacheControl, b.tr.messages[n] = cache, at
		}
		return nil
	}
	b.add(at, chat.ParamsMessage{Role: chat.RoleAssistant, ToolCalls: []chat.ParamsToolCall{tc}, CacheControl: cache})
	b.tr.calls[len(b.p.Messages)-1] = []string{at}
	b.assistant(len(b.p.Messages) - 1)
	return nil
}

// result adds a tool's result (content), answering callID.
func (b *inputBuilder) result(at, callID string, content, cache json.RawMessage) {
	b.endRun()
	b.add(at, chat.ParamsMessage{Role: chat.RoleTool, ToolCallID: callID, Content: content, CacheControl: cache})
}

// item translates the input item it at path at.
func (b *inputBuilder) item(at string, it responsesItem) error {
	ts := b.tr.tools
	if !strings.HasSuffix(it.Type, "_output") {
		b.flushImages() // after the tool results they came with
	}
	if it.Type == "item_reference" || (it.Type == "" && it.Role == "" && it.ID != "") { // the type of a reference may be left out
		if strings.HasPrefix(it.ID, "rs_") {
			return nil // earlier reasoning is not sent upstream (as in chat completions)
		}
		call, ok := decodeCallID(it.ID)
		if !ok {
			return cannotTranslate(at+".id", fmt.Sprintf("item_reference %q needs stored responses: only OpenAI's models, which OpenAI stores, resolve one here (Genway keeps none); send the item itself (with the Vercel AI SDK: providerOptions.openai.store = false).", it.ID))
		}
		return b.call(at, call, it.CacheControl)
	}
	tc := chat.ParamsToolCall{ID: it.CallID}
	switch it.Type {
	case "", "message":
		content, err := messageContent(it.Content, at)
		if err != nil {
			return err
		}
		if it.Role != chat.RoleAssistant {
			b.endRun()
		}
		b.add(at, chat.ParamsMessage{Role: it.Role, Content: content, CacheControl: it.CacheControl})
		if it.Role == chat.RoleAssistant {
			b.assistant(len(b.p.Messages) - 1)
		}
		return nil
	case "function_call":
		if err := json.Unmarshal(orEmptyString(it.Arguments), &tc.Function.Arguments); err != nil {
			return apierr.Invalidf(at+".arguments", "invalid_value", "arguments must be a string (the call's JSON arguments)")
		}
		tc.Function.Name = ts.chatName(kindFunction, it.Namespace, it.Name)
	case "custom_tool_call":
		input := ""
		if it.Input != nil {
			input = *it.Input
		}
		tc.Function.Name, tc.Function.Arguments = ts.chatName(kindCustom, it.Namespace, it.Name), string(rawJSON(map[string]string{"input": input}))
	case "tool_search_call":
		tc.Function.Name, tc.Function.Arguments = ts.chatName(kindToolSearch, "", ""), argsText(it.Arguments)
	case "local_shell_call":
		var a map[string]any
		_ = json.Unmarshal(it.Action, &a)
		delete(a, "type") // exec
		tc.Function.Name, tc.Function.Arguments = ts.chatName(kindLocalShell, "", ""), string(rawJSON(a))
		if it.ID != "" {
			b.itemCalls[it.ID] = it.CallID
		}
	case "shell_call":
		tc.Function.Name, tc.Function.Arguments = ts.chatName(kindShell, "", ""), argsText(it.Action)
	case "apply_patch_call":
		tc.Function.Name, tc.Function.Arguments = ts.chatName(kindApplyPatch, "", ""), argsText(it.Operation)
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		callID := it.CallID
		if callID == "" && it.Type == "local_shell_call_output" { // its id names the call
			callID = cmp.Or(b.itemCalls[it.ID], it.ID)
		}
		out, images, err := outputContent(it.Output, at)
		if err != nil {
			return err
		}
		b.result(at+outputPath, callID, out, it.CacheControl)
		if len(images) > 0 && b.images == nil {
			b.imagesAt = at + outputPath
		}
		b.images = append(b.images, images...)
		return nil
	case "shell_call_output":
		b.result(at, it.CallID, rawJSON(shellOutputText(it.Output)), it.CacheControl)
		return nil
	case "apply_patch_call_output":
		var out string
		if json.Unmarshal(it.Output, &out) != nil || out == "" {
			out = "The patch was applied: " + cmp.Or(it.Status, "completed") + "."
		}
		b.result(at, it.CallID, rawJSON(out), it.CacheControl)
		return nil
	case "tool_search_output":
		callID := it.CallID
		if callID == "" {
			callID = b.lastCall(ts.chatName(kindToolSearch, "", ""))
		}
		if callID != "" {
			b.result(at, callID, rawJSON(ts.toolSearchOutputText(it.Tools)), it.CacheControl)
		}
		return nil
	case "reasoning":
		r, ok, err := openReasoning(it.EncryptedContent, at)
		if err != nil {
			return err
		}
		b.inRun = true
		if ok {
			b.runThoughts = append(b.runThoughts, r.thoughts()...)
			for _, c := range r.Calls {
				b.sigs[c.ID] = c
			}
		}
		return nil
	default:
		if hostedCallItems[it.Type] {
			return nil // a hosted tool's call, left out with its tool
		}
		return cannotTranslate(at+".type", fmt.Sprintf("Input items of type %q are only taken by OpenAI's own models here.", it.Type))
	}
	return b.call(at, tc, it.CacheControl)
}

// lastCall returns the id of the last call of the chat function name that
// no tool message answers yet, "" if none.
func (b *inputBuilder) lastCall(name string) string {
	answered := map[string]bool{}
	for i := len(b.p.Messages) - 1; i >= 0; i-- {
		m := b.p.Messages[i]
		if m.Role == chat.RoleTool {
			answered[m.ToolCallID] = true
		}
		for k := len(m.ToolCalls) - 1; k >= 0; k-- {
			if c := m.ToolCalls[k]; c.Function.Name == name && !answered[c.ID] {
				return c.ID
			}
		}
	}
	return ""
}

// orEmptyString is raw, or "" (a JSON string) if it is absent or null.
func orEmptyString(raw json.RawMessage) json.RawMessage {
	if !isSetRaw(raw) {
		return json.RawMessage(`""`)
	}
	return raw
}

// argsText is a call item's arguments (an object, or a string holding
// one) as a chat call's arguments: JSON text, "{}" if absent.
func argsText(raw json.RawMessage) string {
	var s string
	switch {
	case !isSetRaw(raw):
		return "{}"
	case json.Unmarshal(raw, &s) == nil:
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// shellOutputText is a shell_call_output's output (chunks of stdout and
// stderr, each with its outcome) as the tool result's text.
func shellOutputText(raw json.RawMessage) string {
	var chunks []struct {
		Stdout  string `json:"stdout"`
		Stderr  string `json:"stderr"`
		Outcome struct {
			Type     string `json:"type"`
			ExitCode *int   `json:"exit_code"`
		} `json:"outcome"`
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	_ = json.Unmarshal(raw, &chunks)
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Stdout)
		if c.Stderr != "" {
			fmt.Fprintf(&b, "\nstderr:\n%s", c.Stderr)
		}
		switch {
		case c.Outcome.Type == "timeout":
			b.WriteString("\n(timed out)\n")
		case c.Outcome.ExitCode != nil:
			fmt.Fprintf(&b, "\n(exit code %d)\n", *c.Outcome.ExitCode)
		}
	}
	return b.String()
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
			if pt.FileID != "" {
				return nil, refuse(pat+".file_id", "Files are not stored here: send the file's content itself.")
			}
			return nil, cannotTranslate(pat+".type", fmt.Sprintf("Content parts of type %q are only taken by OpenAI's own models here.", pt.Type))
		}
	}
	return rawJSON(out), nil
}

// outputPath ends the path of a chat message made from a
// function_call_output item: responsesParam names its content "output".
const outputPath = ".output"

// outputContent is a call output's output as a tool message's content:
// a string, or the text of its input_text parts: one string, or, when a
// part carries cache_control, the parts themselves. Its input_image parts
// are returned apart: a tool message carries no image (see
// inputBuilder.result), and its text says so.
func outputContent(raw json.RawMessage, at string) (json.RawMessage, []chat.ParamsPart, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return rawJSON(s), nil, nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, nil, apierr.Invalidf(at+".output", "invalid_value", "output must be a string or an array of input_text and input_image parts")
	}
	var b strings.Builder
	var texts, images []chat.ParamsPart
	marked := false
	for j, pt := range parts {
		pat := fmt.Sprintf("%s.output[%d]", at, j)
		switch {
		case pt.Type == "input_text" && pt.Text != nil:
			b.WriteString(*pt.Text)
			marked = marked || len(pt.CacheControl) > 0
			texts = append(texts, chat.ParamsPart{Type: "text", Text: pt.Text, CacheControl: pt.CacheControl})
		case pt.Type == "input_image" && pt.FileID != "":
			return nil, nil, refuse(pat+".file_id", "Files are not stored here: send the image as image_url (an https URL or a data URI).")
		case pt.Type == "input_image":
			images = append(images, chat.ParamsPart{Type: "image_url", ImageURL: &chat.ParamsImageURL{URL: pt.ImageURL, Detail: pt.Detail}, CacheControl: pt.CacheControl})
		case pt.FileID != "":
			return nil, nil, refuse(pat+".file_id", "Files are not stored here: send the file's content itself.")
		default:
			return nil, nil, cannotTranslate(pat, "Only text and image tool output is supported here (OpenAI's own models take files too).")
		}
	}
	if len(images) > 0 {
		note := fmt.Sprintf("[%d image(s): in the next message]", len(images))
		if b.Len() > 0 {
			note = "\n" + note
		}
		b.WriteString(note)
		texts = append(texts, chat.ParamsPart{Type: "text", Text: &note})
	}
	if !marked {
		return rawJSON(b.String()), images, nil
	}
	return rawJSON(texts), images, nil
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

// decodeCallID reverses encodeCallID into the chat call.
func decodeCallID(id string) (chat.ParamsToolCall, bool) {
	var tc chat.ParamsToolCall
	rest, ok := strings.CutPrefix(id, "fc_")
	if !ok {
		return tc, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var c [3]string
	if err != nil || json.Unmarshal(b, &c) != nil || c[0] == "" {
		return tc, false
	}
	tc.ID, tc.Function.Name, tc.Function.Arguments = c[0], c[1], c[2]
	return tc, true
}

// chatParamRE matches the chat parameter paths that responsesParam maps
// back to the Responses request: a message's, a tool call's, a tool's.
var (
	chatParamRE = regexp.MustCompile(`^messages\[(\d+)\](.*)$`)
	chatCallRE  = regexp.MustCompile(`^\.tool_calls\[(\d+)\](.*)$`)
	chatToolRE  = regexp.MustCompile(`^tools\[(\d+)\](.*)$`)
)

// responsesParam rewrites the param of a gateway error, which names the
// chat request's field, to the Responses request's, by tr. The
// translation's own refusal names the Responses field already.
func responsesParam(err error, tr *translation) error {
	e := apierr.As(err)
	if e == nil || e.Param == "" || error(e) == tr.refusal {
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
	case c.Param == "tool_choice.function.name":
		c.Param = "tool_choice.name"
	case chatToolRE.MatchString(c.Param):
		m := chatToolRE.FindStringSubmatch(c.Param)
		rest := strings.Replace(m[2], ".function.", ".", 1)
		if i, _ := strconv.Atoi(m[1]); tr.tools != nil && i < len(tr.tools.paths) {
			c.Param = tr.tools.paths[i] + rest
		}
	default:
		m := chatParamRE.FindStringSubmatch(c.Param)
		i := -1
		if m != nil {
			i, _ = strconv.Atoi(m[1])
		}
		if i < 0 || i >= len(tr.messages) {
			break
		}
		at, rest := tr.messages[i], m[2]
		at, output := strings.CutSuffix(at, outputPath)
		if cm := chatCallRE.FindStringSubmatch(rest); cm != nil {
			if k, _ := strconv.Atoi(cm[1]); k < len(tr.calls[i]) {
				at = tr.calls[i][k]
			}
			rest = map[string]string{".id": ".call_id", ".function.name": ".name", ".function.arguments": ".arguments"}[cm[2]]
		}
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
	Tools              []json.RawMessage  `json:"tools"`       // the request's, as they were
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

// outputItem is one item of a response's output: a message, a reasoning
// item, or a call of a tool (see toolSet.callItem).
type outputItem struct {
	Type             string         `json:"type"`
	ID               string         `json:"id"`
	Status           string         `json:"status,omitempty"`
	Role             string         `json:"role,omitempty"`
	Content          *[]contentPart `json:"content,omitempty"`
	Summary          *[]contentPart `json:"summary,omitempty"`
	EncryptedContent string         `json:"encrypted_content,omitempty"` // a reasoning item's: see responses_reasoning.go
	CallID           string         `json:"call_id,omitempty"`
	Namespace        string         `json:"namespace,omitempty"`
	Name             string         `json:"name,omitempty"`
	// Arguments is a function_call's (*string: its JSON text) or a
	// tool_search_call's (json.RawMessage: an object).
	Arguments any             `json:"arguments,omitempty"`
	Input     *string         `json:"input,omitempty"`     // custom_tool_call
	Execution string          `json:"execution,omitempty"` // tool_search_call
	Action    json.RawMessage `json:"action,omitempty"`    // local_shell_call, shell_call
	Operation json.RawMessage `json:"operation,omitempty"` // apply_patch_call
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
		o.Tools = []json.RawMessage{}
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
	tools    *toolSet
}

// Begin names the model that answers, and the attempts in the header.
func (j *responseJSONSink) Begin(a chat.Answer) error {
	j.meta.Model = a.Model
	return j.jsonSink.Begin(a)
}

// End writes the response object: a native answer's as the upstream
// sent it, with Genway's id, model and usage.cost.
func (j *responseJSONSink) End(resp *chat.Response) error {
	o := j.meta
	if resp.Native != nil {
		return j.writeBody(nativeBody(resp, o.ID, o.Model, resp.Usage.Cost))
	}
	sealed := sealReasoning(resp.Thoughts, resp.ToolCalls)
	if resp.Reasoning != "" || sealed != "" {
		summary := []contentPart{}
		if resp.Reasoning != "" {
			summary = append(summary, contentPart{Type: "summary_text", Text: resp.Reasoning})
		}
		o.Output = append(o.Output, outputItem{Type: "reasoning", ID: newID("rs_"), Summary: &summary, EncryptedContent: sealed})
	}
	if resp.Content != "" || len(resp.ToolCalls) == 0 {
		o.Output = append(o.Output, outputItem{Type: "message", ID: newID("msg_"), Status: "completed", Role: chat.RoleAssistant,
			Content: &[]contentPart{outputTextPart(resp.Content)}})
	}
	for _, tc := range resp.ToolCalls {
		o.Output = append(o.Output, j.tools.callItem(tc, "completed"))
	}
	o.finish(resp)
	return j.writeBody(o)
}

// refuse is chat.Refuse for a message without format verbs.
func refuse(param, msg string) error { return chat.Refuse(param, "%s", msg) }

// untranslatable is a refusal only a translation makes: a field or an
// item that the providers it translates for cannot take, and that a
// provider of the client's own API takes as it is (chat.Native.Refusal:
// it refuses the translated candidates only).
type untranslatable struct{ error }

// cannotTranslate is refuse's error, for what only the translation
// cannot carry.
func cannotTranslate(param, msg string) error { return untranslatable{refuse(param, msg)} }

// keepRefusal keeps err in *refusal (unless one is kept already) when it
// is untranslatable, and reports whether it is.
func keepRefusal(refusal *error, err error) bool {
	var u untranslatable
	if !errors.As(err, &u) {
		return false
	}
	if *refusal == nil {
		*refusal = u.error
	}
	return true
}
