package httpapi

import (
	"bytes"
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

// messagesVersion2026 is the first Messages API version without
// temperature, top_p and top_k (a request with one is a 400).
const messagesVersion2026 = "2026-10-21"

// apiVersionRE is an anthropic-version: a date, which orders as text.
var apiVersionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// Messages serves POST /v1/messages (with or without ?beta=true),
// Anthropic's Messages API, over the same gateway as chat completions
// (providers, routing, key scopes, holds, credits, usage and rate limits:
// one chat.Gateway.Run per request): the request is translated into
// chat.Params (see messagesRequest.chatParams) and the answer encoded as
// a Message object, or, with "stream": true, as the Messages API's named
// events (message_start, content_block_start / _delta / _stop,
// message_delta, message_stop; ping as the heartbeat once the message
// started, an SSE comment before; error after a failure mid-stream). The
// message is committed (message_start) with the answer's first token.
// Errors are in Anthropic's envelope, with its statuses (see
// anthropicError) and a request-id header.
//
// The client's anthropic-version and anthropic-beta headers are kept on
// the request (chat.Params.APIHeaders) for the providers that speak the
// Messages API; under anthropic-version 2026-10-21 and later,
// temperature, top_p and top_k are refused with a 400, as Anthropic
// refuses them.
//
// A candidate whose provider speaks the Messages API itself (Anthropic's
// models: chat.NativeProvider) is sent the request as the client sent it
// (chat.Params.Native), and its events are relayed with Genway's id,
// model and usage.cost (see native.go); what only the translation
// refuses (untranslatable: a container, a PDF, server tool blocks...)
// refuses the other candidates only.
func Messages(gw *chat.Gateway, log *slog.Logger, opts ...ChatOption) http.Handler {
	cfg, log := chatSetup(log, opts)
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("request-id", RequestID(r.Context()))
		var sink committer
		var tr *messagesTranslation
		err := serveMessages(w, r, gw, cfg, &sink, &tr)
		return chatError(w, r, log, sink, tr.param(err))
	})
}

func serveMessages(w http.ResponseWriter, r *http.Request, gw *chat.Gateway, cfg chatConfig, sink *committer, tr **messagesTranslation) error {
	mr, err := decodeMessages(r)
	if err != nil {
		return err
	}
	p, t, err := mr.chatParams(r.Header)
	*tr = t
	if err != nil {
		return err
	}
	// An Anthropic model is sent the request itself (see chat.Native).
	p.Native = &chat.Native{API: chat.APIMessages, Body: mr.body, Refusal: t.refusal}
	ctx := r.Context()
	noteModel(ctx, mr.Model)
	if len(t.omitted) > 0 {
		w.Header().Set(OmittedToolsHeader, strings.Join(t.omitted, ", "))
		noteOmittedTools(ctx, t.omitted)
	}
	meta := messageMeta{id: credits.NewRecordID("msg_", time.Now()), model: mr.Model, omitThinking: t.omitThinking}
	p.ID, p.Kind = meta.id, credits.KindMessages // the request's record: GET /v1/generations/{id}
	if !mr.Stream {
		js := &messageJSONSink{jsonSink: jsonSink{w: w, keepAlive: cfg.keepAlive}, meta: meta}
		*sink = js
		defer js.stopKeepAlive()
		return gw.Run(ctx, account(r), p, notingSink{js, ctx})
	}
	s := newSSEStream(w, &messagesEncoder{meta: meta}, cfg.heartbeat)
	*sink = s
	defer s.stopHeartbeats()
	return gw.Run(ctx, account(r), p, notingSink{s, ctx})
}

// CountMessageTokens serves POST /v1/messages/count_tokens: the input
// tokens of a Messages request ({"input_tokens": N}), as its model's
// provider counts them where it can (Anthropic's count_tokens), else as
// the gateway estimates them (chat.Gateway.CountTokens); the key's model
// scope applies. Nothing is charged or recorded. A request's max_tokens,
// which count_tokens does not take, may be left out.
func CountMessageTokens(gw *chat.Gateway, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("request-id", RequestID(r.Context()))
		var tr *messagesTranslation
		n, err := countMessageTokens(r, gw, &tr)
		if err != nil {
			return tr.param(err)
		}
		noteModel(r.Context(), n.Model)
		writeJSON(w, http.StatusOK, struct {
			InputTokens int `json:"input_tokens"`
		}{n.Input})
		return nil
	})
}

func countMessageTokens(r *http.Request, gw *chat.Gateway, tr **messagesTranslation) (chat.TokenCount, error) {
	mr, err := decodeMessages(r)
	if err != nil {
		return chat.TokenCount{}, err
	}
	if !isSetRaw(mr.MaxTokens) {
		mr.MaxTokens = json.RawMessage("1") // count_tokens has none; any will do
	}
	p, t, err := mr.chatParams(r.Header)
	*tr = t
	if err != nil {
		return chat.TokenCount{}, err
	}
	if t.refusal != nil {
		return chat.TokenCount{}, t.refusal // counted on the translation
	}
	return gw.CountTokens(r.Context(), p)
}

// decodeMessages reads and decodes a Messages request body
// (scanMessagesRequest, else encoding/json).
func decodeMessages(r *http.Request) (*messagesRequest, error) {
	body, err := readBodyUpTo(r, MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	if err := checkTextBody(r, body); err != nil {
		return nil, err
	}
	// The scanned fast path, else encoding/json and its errors; the body
	// is not changed after (mr's raw members are slices of it).
	var mr messagesRequest
	if !scanMessagesRequest(body, &mr) {
		if err := unmarshal(body, &mr); err != nil {
			return nil, err
		}
	}
	mr.body = body
	return &mr, nil
}

// messagesRequest is the body of POST /v1/messages. Fields that only
// change cost, latency or where the request runs upstream
// (context_management, inference_geo, speed, service_tier, diagnostics,
// ...) are accepted and have no effect on the translation: they are not
// decoded. Those that the translation cannot carry (container,
// mcp_servers) are decoded to be refused, for the candidates that would
// get the request translated.
type messagesRequest struct {
	Model         string          `json:"model"`
	Models        []string        `json:"models"` // fallbacks, as in chat completions
	MaxTokens     json.RawMessage `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []messagesTurn  `json:"messages"`
	Stream        bool            `json:"stream"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Thinking     *messagesThinking `json:"thinking"`
	OutputConfig *messagesOutput   `json:"output_config"`
	Tools        []messagesTool    `json:"tools"`
	ToolChoice   *messagesToolPick `json:"tool_choice"`
	CacheControl json.RawMessage   `json:"cache_control"` // automatic caching: a breakpoint on the last block
	Container    json.RawMessage   `json:"container"`
	MCPServers   json.RawMessage   `json:"mcp_servers"`

	body []byte // the request body, as the client sent it
}

// messagesTurn is one entry of messages: a user, assistant or system
// turn; its content is a string or an array of blocks. A system turn's
// output_config (Claude Code's per-turn effort) is accepted, not
// translated.
type messagesTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messagesBlock is one content block; the fields each type has are set.
type messagesBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	Source       *messagesSource `json:"source"`        // image, document
	ID           string          `json:"id"`            // tool_use
	Name         string          `json:"name"`          // tool_use
	Input        json.RawMessage `json:"input"`         // tool_use
	ToolUseID    string          `json:"tool_use_id"`   // tool_result
	Content      json.RawMessage `json:"content"`       // tool_result: a string or blocks
	IsError      bool            `json:"is_error"`      // tool_result
	Thinking     *string         `json:"thinking"`      // thinking
	Signature    string          `json:"signature"`     // thinking
	Data         string          `json:"data"`          // redacted_thinking
	ToolName     string          `json:"tool_name"`     // tool_reference
	Title        string          `json:"title"`         // document
	Context      string          `json:"context"`       // document
	CacheControl json.RawMessage `json:"cache_control"` // a prompt-cache breakpoint after the block
}

// messagesSource is an image's or a document's source: base64 (data and
// media_type), url, text (a document's data), content (a document's
// blocks) or file (the Files API's, which Genway does not have).
type messagesSource struct {
	Type      string          `json:"type"`
	MediaType string          `json:"media_type"`
	Data      string          `json:"data"`
	URL       string          `json:"url"`
	FileID    string          `json:"file_id"`
	Content   json.RawMessage `json:"content"`
}

// messagesThinking is thinking: {"type": "enabled", "budget_tokens"},
// {"type": "adaptive"} or {"type": "disabled"}, with an optional
// "display" ("summarized" or "omitted").
type messagesThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"`
}

// messagesOutput is output_config: the effort, and format, a JSON schema
// the answer must follow ({"type": "json_schema", "schema"}).
type messagesOutput struct {
	Effort string `json:"effort"`
	Format *struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

// messagesTool is one entry of tools: a client tool (no type, or
// "custom": name, description, input_schema), or one of Anthropic's
// (a type with a version: web_search_20250305, bash_20250124, ...).
type messagesTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Strict       *bool           `json:"strict"`
	DeferLoading bool            `json:"defer_loading"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// messagesToolPick is tool_choice: {"type": "auto" | "any" | "tool" |
// "none", "name" (tool), "disable_parallel_tool_use"}.
type messagesToolPick struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// messagesTranslation is what translating a Messages request learned that the
// handler needs: where each chat message and tool came from (for the
// params of errors), the tools left out, whether thinking text is to be
// left out of the answer.
type messagesTranslation struct {
	origins      []origin
	tools        []string // the path of each chat tool: "tools[3]"
	omitted      []string // the names of the tools left out
	omitThinking bool     // thinking.display "omitted"
	// refusal is the first refusal only the translation makes (see
	// untranslatable): for the candidates that would serve it translated.
	refusal error
}

// only keeps err, when it is a refusal only the translation makes, as
// the request's translation refusal, and reports whether it was one.
func (t *messagesTranslation) only(err error) bool {
	return keepRefusal(&t.refusal, err)
}

// origin is where one chat message of the translation came from: its
// path (a turn, "messages[2]" or "system", or a block, a tool_result's
// "messages[3].content[0]"), and the path of each of its content parts
// and tool calls.
type origin struct {
	at    string
	parts []string
	calls []string
	cache string // the path of the message's own cache_control, when it is not at's
}

// thinkingOf returns the Thought a thinking block of an assistant turn
// carries, and whether the block is the mark of a signed tool call
// (signedCall): see encodeThought.
func thinkingOf(text, signature string) (chat.Thought, *chat.ToolCall) {
	if kind, sig, ok := foreignSignature(signature); ok {
		if by, isCall := strings.CutPrefix(kind, callMark); isCall {
			return chat.Thought{}, &chat.ToolCall{Signature: sig, SignedBy: by}
		}
		return chat.Thought{Provider: kind, Text: text, Signature: sig}, nil
	}
	return chat.Thought{Provider: "anthropic", Text: text, Signature: signature}, nil
}

// chatParams translates the request into chat.Params (h holds its
// headers), with what the handler needs to know of the translation.
//
//   - system (a string or text blocks) is the first system message;
//     a turn with role "system" among messages is a system message where
//     it is (Claude Code sends them; providers with one system prompt
//     collect them);
//   - a user turn's text and image blocks are a user message; each
//     tool_result a tool message (its text; the images it holds follow
//     the turn's tool results in a user message), in front of the turn's
//     other blocks; a document of text (its source text or content) is
//     text, with its title and context; a tool_reference is the text
//     "Tool loaded: NAME" and makes the deferred tool it names offered;
//   - an assistant turn's text, tool_use (arguments: its input) and
//     thinking blocks (chat.Thought: a thinking block's text and
//     signature, a redacted_thinking block's data) are one assistant
//     message;
//   - tools: each client tool a function; one with defer_loading only
//     once a tool_reference names it; Anthropic's own tool types are left
//     out (named in OmittedToolsHeader), and a tool_choice that names one
//     is a 400; tool_choice any is required, tool a function, none none,
//     disable_parallel_tool_use is parallel_tool_calls false;
//   - thinking: enabled is reasoning with its budget_tokens (the effort:
//     low under 4,096 tokens, medium under 16,384, else high, unless
//     output_config.effort says), adaptive is reasoning at
//     output_config.effort (high without), disabled none; effort xhigh
//     and max are high; display is kept;
//   - output_config.format is a json_schema response format named
//     "output"; stop_sequences is stop; metadata.user_id is user; top_k
//     is top_k; cache_control on a block, a tool or the request (the
//     last block) is a prompt-cache breakpoint.
//
// Everything else is refused with a 400 naming it: files and images in
// assistant turns always; PDF documents, server tool blocks, container
// and mcp_servers only for the candidates that get the request
// translated (they are the translation's refusal, t.refusal: an
// Anthropic model is sent them as they came).
func (mr *messagesRequest) chatParams(h http.Header) (*chat.Params, *messagesTranslation, error) {
	t := &messagesTranslation{}
	version := h.Get("anthropic-version")
	if apiVersionRE.MatchString(version) && version >= messagesVersion2026 {
		for _, f := range []struct {
			param string
			set   bool
		}{{"temperature", mr.Temperature != nil}, {"top_p", mr.TopP != nil}, {"top_k", mr.TopK != nil}} {
			if f.set {
				return nil, t, refuse(f.param, fmt.Sprintf("%s is not a parameter of anthropic-version %s; leave it out (or send anthropic-version 2023-06-01).", f.param, version))
			}
		}
	}
	switch {
	case !isSetRaw(mr.MaxTokens):
		return nil, t, apierr.Invalidf("max_tokens", "missing_field", "max_tokens is required")
	case mr.Temperature != nil && (*mr.Temperature < 0 || *mr.Temperature > 1):
		return nil, t, apierr.Invalidf("temperature", "invalid_value", "temperature must be between 0 and 1")
	case isSetRaw(mr.Container):
		t.only(cannotTranslate("container", "Containers run Anthropic's code execution, which only Anthropic's own models have here."))
	case isSetRaw(mr.MCPServers):
		t.only(cannotTranslate("mcp_servers", "Remote MCP servers are called by Anthropic's API, for Anthropic's own models only; with another model, run the MCP client yourself and send its tools."))
	}
	p := &chat.Params{Model: mr.Model, Models: mr.Models, Stream: mr.Stream, MaxTokens: mr.MaxTokens,
		Temperature: mr.Temperature, TopP: mr.TopP, TopK: mr.TopK}
	if v, b := h.Get("anthropic-version"), h.Values("anthropic-beta"); v != "" || len(b) > 0 {
		p.APIHeaders = map[string]string{}
		if v != "" {
			p.APIHeaders["anthropic-version"] = v
		}
		if len(b) > 0 {
			p.APIHeaders["anthropic-beta"] = strings.Join(b, ",")
		}
	}
	if mr.Metadata != nil {
		p.User = mr.Metadata.UserID
	}
	if len(mr.StopSequences) > 0 {
		p.Stop = rawJSON(mr.StopSequences)
	}
	if err := mr.reasoning(p, t); err != nil {
		return nil, t, err
	}
	if f := mr.OutputConfig; f != nil && f.Format != nil {
		if f.Format.Type != "json_schema" {
			return nil, t, apierr.Invalidf("output_config.format.type", "invalid_value", `output_config.format.type must be "json_schema", not %q`, f.Format.Type)
		}
		p.ResponseFormat = &chat.ParamsResponseFormat{Type: chat.FormatJSONSchema,
			JSONSchema: &chat.ParamsJSONSchema{Name: "output", Schema: f.Format.Schema}}
	}
	if err := mr.system(p, t); err != nil {
		return nil, t, err
	}
	loaded := map[string]bool{} // the deferred tools a tool_reference named
	for i, turn := range mr.Messages {
		if err := turnMessages(p, t, turn, fmt.Sprintf("messages[%d]", i), loaded); err != nil && !t.only(err) {
			return nil, t, err
		}
	}
	if len(mr.Messages) == 0 {
		return nil, t, apierr.Invalidf("messages", "missing_field", "messages must be a non-empty array")
	}
	if isSetRaw(mr.CacheControl) && len(p.Messages) > 0 {
		last := &p.Messages[len(p.Messages)-1]
		if !isSetRaw(last.CacheControl) {
			last.CacheControl = mr.CacheControl
			t.origins[len(t.origins)-1].cache = "cache_control" // its errors are the request's
		}
	}
	if err := mr.tools(p, t, loaded); err != nil && !t.only(err) {
		return nil, t, err
	}
	return p, t, nil
}

// reasoning translates thinking and output_config.effort.
func (mr *messagesRequest) reasoning(p *chat.Params, t *messagesTranslation) error {
	effort := ""
	if oc := mr.OutputConfig; oc != nil && oc.Effort != "" {
		switch oc.Effort {
		case "low", "medium", "high":
			effort = oc.Effort
		case "xhigh", "max":
			effort = "high"
		default:
			return apierr.Invalidf("output_config.effort", "invalid_value", "output_config.effort must be low, medium, high, xhigh or max, not %q", oc.Effort)
		}
	}
	if th := mr.Thinking; th != nil {
		switch th.Display {
		case "", "summarized", "omitted":
		default:
			return apierr.Invalidf("thinking.display", "invalid_value", `thinking.display must be "summarized" or "omitted", not %q`, th.Display)
		}
		switch th.Type {
		case "enabled":
			if th.BudgetTokens == nil {
				return apierr.Invalidf("thinking.budget_tokens", "missing_field", "thinking.budget_tokens is required with thinking enabled")
			}
			b := *th.BudgetTokens
			if b < 1024 {
				return apierr.Invalidf("thinking.budget_tokens", "invalid_value", "thinking.budget_tokens must be at least 1024")
			}
			p.ReasoningBudget = b
			if effort == "" {
				effort = "high"
				switch {
				case b < 4096:
					effort = "low"
				case b < 16384:
					effort = "medium"
				}
			}
		case "adaptive":
			if effort == "" {
				effort = "high" // Anthropic's default effort
			}
		case "disabled":
			effort = ""
		case "":
			return apierr.Invalidf("thinking.type", "missing_field", "thinking.type is required")
		default:
			return apierr.Invalidf("thinking.type", "invalid_value", `thinking.type must be "enabled", "adaptive" or "disabled", not %q`, th.Type)
		}
		p.ReasoningDisplay = th.Display
		t.omitThinking = th.Display == "omitted"
	}
	if effort != "" {
		p.ReasoningEffort = &effort
	}
	return nil
}

// system translates the system prompt: a string, or text blocks.
func (mr *messagesRequest) system(p *chat.Params, t *messagesTranslation) error {
	raw := bytes.TrimSpace(mr.System)
	if !isSetRaw(raw) {
		return nil
	}
	if raw[0] == '"' {
		p.Messages = append(p.Messages, chat.ParamsMessage{Role: chat.RoleSystem, Content: raw})
		t.origins = append(t.origins, origin{at: "system"})
		return nil
	}
	content, parts, err := textBlocks(raw, "system")
	if err != nil {
		return err
	}
	p.Messages = append(p.Messages, chat.ParamsMessage{Role: chat.RoleSystem, Content: content})
	t.origins = append(t.origins, origin{at: "system", parts: parts})
	return nil
}

// textBlocks translates an array of text blocks (a system prompt, a
// system turn) at path at into chat content parts, and their paths.
func textBlocks(raw json.RawMessage, at string) (json.RawMessage, []string, error) {
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, nil, apierr.Invalidf(at, "invalid_value", "%s must be a string or an array of text blocks", at)
	}
	parts := make([]chat.ParamsPart, len(blocks))
	paths := make([]string, len(blocks))
	for j, b := range blocks {
		paths[j] = fmt.Sprintf("%s[%d]", at, j)
		if b.Type != "text" {
			return nil, nil, apierr.Invalidf(paths[j]+".type", "invalid_value", "%s takes text blocks only, not %q", at, b.Type)
		}
		if b.Text == nil {
			return nil, nil, apierr.Invalidf(paths[j]+".text", "missing_field", "text is required in a text block")
		}
		parts[j] = chat.ParamsPart{Type: "text", Text: b.Text, CacheControl: b.CacheControl}
	}
	return rawJSON(parts), paths, nil
}

// turn is the chat messages one turn is being translated into.
type turn struct {
	p   *chat.Params
	t   *messagesTranslation
	at  string
	msg chat.ParamsMessage // the user or assistant message being built
	o   origin
	// parts are the message's content parts (nil: none yet).
	parts []chat.ParamsPart
}

// add appends a content part from block path at.
func (u *turn) add(part chat.ParamsPart, at string) {
	u.parts = append(u.parts, part)
	u.o.parts = append(u.o.parts, at)
}

// emit appends m, from o, to the chat messages.
func (u *turn) emit(m chat.ParamsMessage, o origin) {
	u.p.Messages = append(u.p.Messages, m)
	u.t.origins = append(u.t.origins, o)
}

// turnMessages translates one turn, at path at, into chat messages.
func turnMessages(p *chat.Params, t *messagesTranslation, mt messagesTurn, at string, loaded map[string]bool) error {
	raw := bytes.TrimSpace(mt.Content)
	u := &turn{p: p, t: t, at: at, msg: chat.ParamsMessage{Role: mt.Role}, o: origin{at: at}}
	switch mt.Role {
	case chat.RoleUser, chat.RoleAssistant:
	case chat.RoleSystem:
		if len(raw) > 0 && raw[0] == '[' {
			content, parts, err := textBlocks(raw, at+".content")
			if err != nil {
				return err
			}
			u.emit(chat.ParamsMessage{Role: chat.RoleSystem, Content: content}, origin{at: at, parts: parts})
			return nil
		}
		u.emit(chat.ParamsMessage{Role: chat.RoleSystem, Content: raw}, u.o)
		return nil
	case "":
		return apierr.Invalidf(at+".role", "missing_field", "role is required")
	default:
		return apierr.Invalidf(at+".role", "invalid_value", "role must be user, assistant or system, not %q", mt.Role)
	}
	if len(raw) == 0 || raw[0] != '[' {
		u.msg.Content = raw // a string, or an error for the gateway to name
		u.emit(u.msg, u.o)
		return nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return apierr.Invalidf(at+".content", "invalid_value", "content must be a string or an array of content blocks")
	}
	var after []chat.ParamsPart // images of tool results, after them
	var afterPaths []string
	var signed *chat.ToolCall // the signature of the tool_use that comes next (see encodeThought)
	results := 0              // tool_result blocks
	for j, rb := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		var b messagesBlock
		if err := json.Unmarshal(rb, &b); err != nil {
			return apierr.Invalidf(bat, "invalid_value", "a content block must be an object with a type")
		}
		assistant := mt.Role == chat.RoleAssistant
		switch b.Type {
		case "text":
			if b.Text == nil {
				return apierr.Invalidf(bat+".text", "missing_field", "text is required in a text block")
			}
			u.add(chat.ParamsPart{Type: "text", Text: b.Text, CacheControl: b.CacheControl}, bat)
		case "image":
			if assistant {
				return apierr.Invalidf(bat+".type", "invalid_value", "image blocks are only allowed in user turns")
			}
			part, err := imagePart(b, bat)
			if err != nil {
				return err
			}
			u.add(part, bat)
		case "document":
			if assistant {
				return apierr.Invalidf(bat+".type", "invalid_value", "document blocks are only allowed in user turns")
			}
			text, err := documentText(b, bat)
			if err != nil {
				return err
			}
			u.add(chat.ParamsPart{Type: "text", Text: &text, CacheControl: b.CacheControl}, bat)
		case "thinking", "redacted_thinking":
			if !assistant {
				return apierr.Invalidf(bat+".type", "invalid_value", "%s blocks are only allowed in assistant turns", b.Type)
			}
			if b.Type == "redacted_thinking" {
				u.msg.Thoughts = append(u.msg.Thoughts, chat.Thought{Provider: "anthropic", Redacted: b.Data})
				continue
			}
			text := ""
			if b.Thinking != nil {
				text = *b.Thinking
			}
			th, call := thinkingOf(text, b.Signature)
			if call != nil {
				signed = call
				continue
			}
			u.msg.Thoughts = append(u.msg.Thoughts, th)
		case "tool_use":
			if !assistant {
				return apierr.Invalidf(bat+".type", "invalid_value", "tool_use blocks are only allowed in assistant turns")
			}
			tc := chat.ParamsToolCall{ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			if isSetRaw(b.Input) {
				tc.Function.Arguments = string(b.Input)
			}
			if signed != nil {
				tc.Signature, tc.SignedBy, signed = signed.Signature, signed.SignedBy, nil
			}
			u.msg.ToolCalls = append(u.msg.ToolCalls, tc)
			u.o.calls = append(u.o.calls, bat)
			if isSetRaw(b.CacheControl) {
				u.msg.CacheControl = b.CacheControl // after the calls
				u.o.cache = bat + ".cache_control"
			}
		case "tool_result":
			if assistant {
				return apierr.Invalidf(bat+".type", "invalid_value", "tool_result blocks are only allowed in user turns")
			}
			m, o, images, paths, err := toolResult(b, bat, loaded)
			if err != nil {
				return err
			}
			u.emit(m, o)
			results++
			after, afterPaths = append(after, images...), append(afterPaths, paths...)
		case "":
			return apierr.Invalidf(bat+".type", "missing_field", "type is required in a content block")
		default:
			return cannotTranslate(bat+".type", fmt.Sprintf("Content blocks of type %q are only taken by Anthropic's own models here: Genway translates text, image, document (text), tool_use, tool_result, thinking and redacted_thinking blocks.", b.Type))
		}
	}
	if len(after) > 0 {
		u.parts = append(after, u.parts...)
		u.o.parts = append(afterPaths, u.o.parts...)
	}
	m := u.msg
	switch {
	case len(u.parts) > 0:
		m.Content = rawJSON(u.parts)
	case len(m.ToolCalls) > 0 || len(m.Thoughts) > 0:
		// an assistant turn that only calls tools, or only thinks
	case results > 0:
		return nil // a user turn of tool results alone
	default:
		m.Content = json.RawMessage("[]") // the gateway names an empty turn
	}
	u.emit(m, u.o)
	return nil
}

// imagePart translates an image block: base64 data as a data URI, or a
// URL.
func imagePart(b messagesBlock, at string) (chat.ParamsPart, error) {
	s := b.Source
	if s == nil {
		return chat.ParamsPart{}, apierr.Invalidf(at+".source", "missing_field", "source is required in an image block")
	}
	var u string
	switch s.Type {
	case "base64":
		if s.MediaType == "" {
			return chat.ParamsPart{}, apierr.Invalidf(at+".source.media_type", "missing_field", "media_type is required in a base64 source")
		}
		u = "data:" + s.MediaType + ";base64," + s.Data
	case "url":
		u = s.URL
	case "file":
		return chat.ParamsPart{}, refuse(at+".source", "Files are not stored here: send the image as base64 data or a URL.")
	default:
		return chat.ParamsPart{}, apierr.Invalidf(at+".source.type", "invalid_value", `an image source's type must be "base64" or "url", not %q`, s.Type)
	}
	return chat.ParamsPart{Type: "image_url", ImageURL: &chat.ParamsImageURL{URL: u}, CacheControl: b.CacheControl}, nil
}

// documentText is the text of a document block: its title, its context
// and its text (a text source's data, a content source's text blocks),
// separated by blank lines. A PDF, or a file, is refused.
func documentText(b messagesBlock, at string) (string, error) {
	s := b.Source
	if s == nil {
		return "", apierr.Invalidf(at+".source", "missing_field", "source is required in a document block")
	}
	var body string
	switch s.Type {
	case "text":
		body = s.Data
	case "content":
		var blocks []messagesBlock
		var one string
		if json.Unmarshal(s.Content, &one) == nil {
			body = one
			break
		}
		if err := json.Unmarshal(s.Content, &blocks); err != nil {
			return "", apierr.Invalidf(at+".source.content", "invalid_value", "a content source is a string or text blocks")
		}
		var texts []string
		for k, cb := range blocks {
			if cb.Type != "text" || cb.Text == nil {
				return "", cannotTranslate(fmt.Sprintf("%s.source.content[%d]", at, k), "Only text blocks are supported in a document's content, but by Anthropic's own models.")
			}
			texts = append(texts, *cb.Text)
		}
		body = strings.Join(texts, "\n\n")
	case "file":
		return "", refuse(at+".source", "Files are not stored here: send the document itself (base64 data, a URL, or its text).")
	case "base64", "url":
		return "", cannotTranslate(at+".source", fmt.Sprintf("PDF documents are only taken by Anthropic's own models here: no provider behind Genway's translation takes them; send the document's text (a text source, %q).", "type: text"))
	default:
		return "", apierr.Invalidf(at+".source.type", "invalid_value", `a document source's type must be "text" or "content" here, not %q`, s.Type)
	}
	var out []string
	for _, s := range []string{b.Title, b.Context, body} {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n\n"), nil
}

// toolResult translates a tool_result block at path at into a tool
// message, with its origin, and the image parts it holds (with their
// paths), which go in a user message after the turn's tool results. Its
// tool_reference blocks are text, and load the tools they name.
func toolResult(b messagesBlock, at string, loaded map[string]bool) (chat.ParamsMessage, origin, []chat.ParamsPart, []string, error) {
	m := chat.ParamsMessage{Role: chat.RoleTool, ToolCallID: b.ToolUseID, CacheControl: b.CacheControl, ToolError: b.IsError}
	o := origin{at: at}
	if b.ToolUseID == "" {
		return m, o, nil, nil, apierr.Invalidf(at+".tool_use_id", "missing_field", "tool_use_id is required in a tool_result block")
	}
	raw := bytes.TrimSpace(b.Content)
	switch {
	case !isSetRaw(raw):
		m.Content = json.RawMessage(`""`)
		return m, o, nil, nil, nil
	case raw[0] == '"':
		m.Content = raw
		return m, o, nil, nil, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return m, o, nil, nil, apierr.Invalidf(at+".content", "invalid_value", "a tool_result's content must be a string or an array of content blocks")
	}
	var parts, images []chat.ParamsPart
	var imagePaths []string
	for k, cb := range blocks {
		cat := fmt.Sprintf("%s.content[%d]", at, k)
		switch cb.Type {
		case "text":
			if cb.Text == nil {
				return m, o, nil, nil, apierr.Invalidf(cat+".text", "missing_field", "text is required in a text block")
			}
			parts = append(parts, chat.ParamsPart{Type: "text", Text: cb.Text, CacheControl: cb.CacheControl})
		case "tool_reference":
			if cb.ToolName == "" {
				return m, o, nil, nil, apierr.Invalidf(cat+".tool_name", "missing_field", "tool_name is required in a tool_reference block")
			}
			loaded[cb.ToolName] = true
			text := "Tool loaded: " + cb.ToolName
			parts = append(parts, chat.ParamsPart{Type: "text", Text: &text, CacheControl: cb.CacheControl})
		case "document":
			text, err := documentText(cb, cat)
			if err != nil {
				return m, o, nil, nil, err
			}
			parts = append(parts, chat.ParamsPart{Type: "text", Text: &text, CacheControl: cb.CacheControl})
		case "image":
			part, err := imagePart(cb, cat)
			if err != nil {
				return m, o, nil, nil, err
			}
			images, imagePaths = append(images, part), append(imagePaths, cat)
			continue
		default:
			return m, o, nil, nil, cannotTranslate(cat+".type", fmt.Sprintf("Tool results with %q blocks are only taken by Anthropic's own models here: text, image, document (text) and tool_reference are translated.", cb.Type))
		}
		o.parts = append(o.parts, cat)
	}
	if len(parts) == 0 {
		parts = []chat.ParamsPart{{Type: "text", Text: new(string)}}
		o.parts = []string{at + ".content"}
	}
	m.Content = rawJSON(parts)
	return m, o, images, imagePaths, nil
}

// tools translates tools and tool_choice. A deferred tool is offered
// once loaded names it.
func (mr *messagesRequest) tools(p *chat.Params, t *messagesTranslation, loaded map[string]bool) error {
	offered := map[string]bool{}
	for i, tl := range mr.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if tl.Type != "" && tl.Type != "custom" {
			name := tl.Name
			if name == "" {
				name = tl.Type
			}
			t.omitted = append(t.omitted, name)
			continue
		}
		if tl.DeferLoading && !loaded[tl.Name] {
			continue
		}
		if !isSetRaw(tl.InputSchema) {
			return apierr.Invalidf(at+".input_schema", "missing_field", "input_schema is required in a tool")
		}
		p.Tools = append(p.Tools, chat.ParamsTool{Type: "function", CacheControl: tl.CacheControl, Function: &chat.ParamsFunction{
			Name: tl.Name, Description: tl.Description, Parameters: tl.InputSchema, Strict: tl.Strict}})
		t.tools = append(t.tools, at)
		offered[tl.Name] = true
	}
	tc := mr.ToolChoice
	if tc == nil {
		return nil
	}
	if tc.DisableParallelToolUse {
		no := false
		p.ParallelToolCalls = &no
	}
	switch tc.Type {
	case "auto":
		p.ToolChoice = json.RawMessage(`"auto"`)
	case "none":
		p.ToolChoice = json.RawMessage(`"none"`)
	case "any":
		if len(p.Tools) == 0 {
			return apierr.Invalidf("tool_choice", "invalid_value", `tool_choice "any" needs tools Genway can offer`)
		}
		p.ToolChoice = json.RawMessage(`"required"`)
	case "tool":
		if !offered[tc.Name] {
			for _, tl := range mr.Tools {
				if tl.Name == tc.Name && tl.Type != "" && tl.Type != "custom" {
					return cannotTranslate("tool_choice.name", fmt.Sprintf("tool_choice forces %q, one of Anthropic's own tools, which only Anthropic's own models run here.", tc.Name))
				}
			}
		}
		p.ToolChoice = rawJSON(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
	case "":
		return apierr.Invalidf("tool_choice.type", "missing_field", "tool_choice.type is required")
	default:
		return apierr.Invalidf("tool_choice.type", "invalid_value", `tool_choice.type must be "auto", "any", "tool" or "none", not %q`, tc.Type)
	}
	return nil
}

// messagesParamRE matches the chat parameter paths that messagesTranslation.param
// maps back to the Messages request.
var messagesParamRE = regexp.MustCompile(`^(messages|tools)\[(\d+)\](.*)$`)

// messagesParams are the chat params whose Messages name differs.
var messagesParams = map[string]string{
	"max_completion_tokens": "max_tokens", "reasoning_effort": "output_config.effort", "stop": "stop_sequences",
	"parallel_tool_calls": "tool_choice.disable_parallel_tool_use", "tool_choice.function.name": "tool_choice.name",
	"user": "metadata.user_id", "response_format": "output_config.format",
}

// param rewrites the param of a gateway error, which names the chat
// request's field, to the Messages request's. A nil t (the body did not
// decode) changes nothing.
func (t *messagesTranslation) param(err error) error {
	e := apierr.As(err)
	if t == nil || e == nil || e.Param == "" || error(e) == t.refusal {
		return err
	}
	c := *e
	if to, ok := messagesParams[c.Param]; ok {
		c.Param = to
		return &c
	}
	if strings.HasPrefix(c.Param, "response_format.") {
		c.Param = "output_config.format"
		return &c
	}
	m := messagesParamRE.FindStringSubmatch(c.Param)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[2])
	rest := m[3]
	if m[1] == "tools" {
		if i < len(t.tools) {
			rest = strings.Replace(strings.Replace(rest, ".function.", ".", 1), ".parameters", ".input_schema", 1)
			c.Param = t.tools[i] + rest
		}
		return &c
	}
	if i >= len(t.origins) {
		return err
	}
	o := t.origins[i]
	c.Param = o.at + rest
	switch {
	case rest == ".tool_call_id":
		c.Param = o.at + ".tool_use_id"
	case strings.HasPrefix(rest, ".content["):
		if j, tail, ok := indexed(rest, ".content["); ok && j < len(o.parts) {
			tail = strings.Replace(strings.Replace(tail, ".image_url.url", ".source", 1), ".image_url", ".source", 1)
			c.Param = o.parts[j] + tail
		}
	case strings.HasPrefix(rest, ".cache_control") && o.cache != "":
		c.Param = o.cache + strings.TrimPrefix(rest, ".cache_control")
	case strings.HasPrefix(rest, ".tool_calls["):
		if k, tail, ok := indexed(rest, ".tool_calls["); ok && k < len(o.calls) {
			tail = strings.Replace(strings.Replace(tail, ".function.name", ".name", 1), ".function.arguments", ".input", 1)
			c.Param = o.calls[k] + tail
		}
	}
	return &c
}

// indexed splits s, which begins with prefix ("....content["), into the
// index that follows and the rest after its "]".
func indexed(s, prefix string) (int, string, bool) {
	s = strings.TrimPrefix(s, prefix)
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[:end])
	return n, s[end+1:], err == nil
}
