// Package anthropic is the chat.Provider for Anthropic's Messages API
// (POST {base}/v1/messages), spoken with plain net/http: a top-level system
// prompt, a required max_tokens, image blocks from bytes (base64 source) and
// URLs (url source), extended thinking (a token budget for older models,
// adaptive thinking with an effort level for newer ones, as the catalog's
// Model.Thinking says), and the streaming SSE event sequence.
//
// Tools are mapped to tools with input_schema; tool_choice auto, none,
// required and a named function to {"type": "auto"|"none"|"any"|"tool"};
// parallel_tool_calls false to disable_parallel_tool_use. Assistant tool
// calls become tool_use blocks, tool messages tool_result blocks of a user
// turn (consecutive results merge into one turn, results before any text).
// Answers' tool_use blocks become tool calls (arguments: the input object
// as compact JSON) with finish reason tool_calls; streamed, a
// content_block_start of a tool_use block is a call's first delta (id and
// name) and its input_json_delta pieces are its arguments' pieces.
//
// response_format (json_object, json_schema) has no native equivalent used
// here: it is a forced tool (named after the schema, or "json") whose input
// schema is the format's schema, and whose input is returned, and
// streamed, as the content, with finish reason stop.
//
// Thinking: reasoning_effort is a token budget (catalog.ThinkingBudget:
// the request's ReasoningBudget, the Messages API's budget_tokens, when
// it has one) or adaptive thinking with that effort
// (catalog.ThinkingAdaptive), with the request's ReasoningDisplay. The
// answer's thinking blocks are chat.Thoughts (text and signature; a
// redacted_thinking block's data), streamed as reasoning deltas and, at
// the block's content_block_stop, a Delta.Thought with its signature;
// a redacted_thinking block is a Delta.Thought at once. An assistant
// message's Thoughts of Claude (this adapter's kind and Bedrock's), signed
// or redacted, go back as thinking and redacted_thinking blocks before
// its text and tool_use blocks, when the request thinks (without thinking
// they are left out). Extended thinking is left out of requests it would
// make fail: those that force tool use (tool_choice required or a
// function, response_format), and those that continue a tool-use loop
// whose assistant turn has no signed thinking to start with (a chat
// client's; see buildRequest). top_k is sent, except with thinking.
//
// Tool call ids the API would refuse (another provider's, with dots or
// colons) are sent as a digest, the same for the call and its result
// (toolUseID). A tool message's ToolError is is_error.
//
// The client's anthropic-beta headers (chat.Request.APIHeaders) are
// forwarded; the anthropic-version is always APIVersion, the version the
// bodies are built for. CountTokens asks /v1/messages/count_tokens.
//
// A Provider whose Config.Native names the Messages API also serves a
// Messages API client's request natively, as it was sent, with the
// client's anthropic-version (see NativeStream).
//
// Prompt-cache breakpoints (chat.CacheControl) are cache_control on the
// marked block: a system text block (a system prompt with one is sent as
// blocks, one per part), a text or image block, a tool_result (a tool
// message's first breakpoint), the last tool_use of an assistant message
// (chat.Message.Cache), a tool; with "ttl": "1h" and the
// BetaExtendedCacheTTL header for the one-hour lifetime.
//
// Usage (whole answers, and streams: message_start's, updated by
// message_delta's cumulative counts) is the whole input as prompt tokens
// (input_tokens plus cache reads and writes), with the cache reads and
// the writes by lifetime (5 minutes, 1 hour) as its details; thinking is
// part of output_tokens, and Anthropic gives no count of it. The answer's
// usage.service_tier is its ServiceTier ("standard" is "default").
//
// Features refuses what the API lacks: seed, presence and frequency
// penalties, logit_bias, OpenAI-only fields, and tools together with
// response_format. user goes to metadata.user_id.
//
// A Provider is safe for concurrent use.
package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is the Anthropic API's base URL.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header sent with every request:
// the version the request bodies are built for (a client's own
// anthropic-version is not forwarded).
const APIVersion = "2023-06-01"

// Kind is the provider kind of the Thoughts the adapter makes
// (chat.Thought.Provider); it sends back those and Bedrock's.
const Kind = "anthropic"

// BetaExtendedCacheTTL is the anthropic-beta header sent with a request
// that has a one-hour cache breakpoint. The Messages API takes "ttl": "1h"
// in cache_control (its SDKs' non-beta types carry it), and its list of
// betas still names this one, which some accounts and models have been
// reported to need for the hour; naming a beta the API knows changes
// nothing else, so it is sent whenever a request has one.
const BetaExtendedCacheTTL = "extended-cache-ttl-2025-04-11"

// MaxCacheBreakpoints is the most cache_control breakpoints the Messages
// API takes in one request.
const MaxCacheBreakpoints = 4

// DefaultMaxTokens caps max_tokens when the request does not set it (the
// Messages API requires one): the model's catalog maximum, at most this.
const DefaultMaxTokens = 8192

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// thinkingBudgets maps reasoning_effort to budget_tokens for models with
// catalog.ThinkingBudget (1024 is the API's minimum budget).
var thinkingBudgets = map[string]int{"low": 1024, "medium": 4096, "high": 16384}

// Config configures a Provider.
type Config struct {
	Name       string       // the provider's catalog name, for errors; "anthropic" if empty
	BaseURL    string       // DefaultBaseURL if empty; "/v1/messages" is appended
	APIKey     string       // sent as x-api-key: one key, or a pool separated by commas (route.NewKeySet)
	HTTPClient *http.Client // http.DefaultClient if nil; should have no overall Timeout (streams are long)
	// Native lists the client APIs the server speaks itself
	// (catalog.Provider.Native): with chat.APIMessages, Messages API
	// requests are sent as the client sent them (see NativeStream). nil:
	// every request is translated.
	Native []string
}

// Provider talks to the Messages API.
type Provider struct {
	name   string
	url    string
	keys   route.KeySet // each call sends the key its ctx names (route.WithKey)
	client *http.Client
	native bool // it speaks chat.APIMessages natively
}

var (
	_ chat.Provider        = (*Provider)(nil)
	_ chat.FeatureProvider = (*Provider)(nil)
	_ chat.CacheProvider   = (*Provider)(nil)
	_ chat.TokenCounter    = (*Provider)(nil)
	_ route.Keyed          = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{name: cfg.Name, keys: route.NewKeySet(cfg.APIKey), client: cfg.HTTPClient, native: slices.Contains(cfg.Native, chat.APIMessages)}
	if p.name == "" {
		p.name = "anthropic"
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	p.url = base + "/v1/messages"
	if p.client == nil {
		p.client = http.DefaultClient
	}
	return p
}

// KeyIDs returns the KeyIDs of the provider's key pool (route.Keyed).
func (p *Provider) KeyIDs() []string { return p.keys.KeyIDs() }

// CacheRules reports that the Messages API takes up to
// MaxCacheBreakpoints prompt-cache breakpoints, on tools too, with the
// one-hour lifetime, for every Claude model.
func (p *Provider) CacheRules(*catalog.Model) chat.CacheRules {
	return chat.CacheRules{Breakpoints: MaxCacheBreakpoints, Tools: true, TTL1h: true}
}

// Features reports what the Messages API honours: tools (with tool_choice
// none, and disable_parallel_tool_use for parallel_tool_calls false) and
// response_format (as a forced tool, so not together with tools). It has
// no seed, penalties or logit_bias, and takes no OpenAI-only field.
func (p *Provider) Features() chat.Features {
	return chat.Features{Tools: true, ToolChoiceNone: true, ParallelToolCalls: true, ResponseFormat: true, TopK: true}
}

// Complete sends a non-streaming request. Every upstream failure is a
// *chat.UpstreamError; a cancelled ctx returns an error wrapping ctx.Err().
func (p *Provider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	resp, err := p.do(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m messageResponse
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, chat.TransportError(ctx, p.name, "decode response", err)
	}
	if m.Type == "error" {
		return nil, p.eventError(m.Error)
	}
	format := formatToolName(req)
	out := &chat.Response{Usage: m.Usage.chat(), ServiceTier: serviceTier(m.Usage.ServiceTier)}
	var content, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			if format == "" { // a structured answer is the forced tool's input alone
				content.WriteString(b.Text)
			}
		case "thinking":
			reasoning.WriteString(b.Thinking)
			out.Thoughts = append(out.Thoughts, chat.Thought{Provider: Kind, Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			out.Thoughts = append(out.Thoughts, chat.Thought{Provider: Kind, Redacted: b.Data})
		case "tool_use":
			args := compactInput(b.Input)
			if format != "" && b.Name == format {
				content.WriteString(args)
				continue
			}
			out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Content, out.Reasoning = content.String(), reasoning.String()
	out.FinishReason = finishReason(m.StopReason, len(out.ToolCalls) > 0)
	return out, nil
}

// compactInput returns a tool_use input object as compact JSON text; "{}"
// when it is absent.
func compactInput(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, in); err != nil {
		return string(in)
	}
	return b.String()
}

// Stream sends a streaming request and writes to w each text, thinking or
// tool call delta as it arrives. It returns when message_stop arrives; a mid-stream
// error event, or a stream that ends before message_stop, is a
// *chat.UpstreamError. If w fails, Stream returns its error unchanged.
// With any error it returns the usage reported so far (see soFar).
// Returning closes the response body, which cancels the upstream request.
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := p.do(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return p.readStream(ctx, resp.Body, w, formatToolName(req))
}

// streamTool is a tool_use content block being streamed.
type streamTool struct {
	call   int  // its index in the answer's tool calls; unused for the format tool
	format bool // the structured output tool: its input is the content
	args   bool // some input JSON was streamed
}

// streamThinking is a thinking block being streamed: its text and
// signature so far, a Thought at its content_block_stop.
type streamThinking struct {
	text, signature strings.Builder
}

// readStream parses a Messages API event stream from body. format is the
// name of the structured output tool (formatToolName), or "": that tool's
// input is streamed as content, any other tool_use block as tool call
// deltas.
func (p *Provider) readStream(ctx context.Context, body io.Reader, w chat.Writer, format string) (resp *chat.Response, err error) {
	out := &chat.Response{FinishReason: chat.FinishStop}
	counted := false // a message_delta counted the output
	defer func() {
		if err != nil {
			resp = soFar(out, counted)
		}
	}()
	var u usage // message_start's, updated by message_delta's
	var content, reasoning strings.Builder
	tools := map[int]*streamTool{}         // by content block index
	thinkings := map[int]*streamThinking{} // likewise
	r := sse.NewReader(body)
	batch := chat.NewBatch(w) // deltas read together are written together
	r.OnWait(batch.Flush)
	emit := batch.Emit
	for {
		name, data, err := r.NextBytes()
		if err == io.EOF {
			return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
				Message: "stream ended before message_stop", Err: io.ErrUnexpectedEOF}
		}
		if err != nil {
			return nil, chat.TransportError(ctx, p.name, "read stream", err)
		}
		var se streamEvent
		if err := decodeEvent(data, &se); err != nil {
			return nil, chat.TransportError(ctx, p.name, "decode event "+name, err)
		}
		typ := se.Type
		if typ == "" {
			typ = name
		}
		var d chat.Delta
		switch typ {
		case "message_start":
			if se.Message != nil {
				u = se.Message.Usage
				out.Usage, out.ServiceTier = u.chat(), serviceTier(u.ServiceTier)
			}
		case "content_block_start":
			b := se.ContentBlock
			switch {
			case b == nil:
			case b.Type == "tool_use" && format != "" && b.Name == format:
				tools[se.Index] = &streamTool{format: true}
			case b.Type == "redacted_thinking":
				th := chat.Thought{Provider: Kind, Redacted: b.Data}
				out.Thoughts = append(out.Thoughts, th)
				d.Thought = &th
			case b.Type == "tool_use":
				// The first piece of a call: its id and name. The block's
				// input is {} here; input_json_delta pieces follow.
				if b.ID == "" || b.Name == "" {
					return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed,
						Message: "tool_use block without id or name", Err: fmt.Errorf("event %s: tool_use block without id or name", typ)}
				}
				n := len(out.ToolCalls)
				tools[se.Index] = &streamTool{call: n}
				out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name})
				d.ToolCall = &chat.ToolCallDelta{Index: n, ID: b.ID, Name: b.Name}
			case format == "": // text is not part of a structured answer
				d = chat.Delta{Content: b.Text, Reasoning: b.Thinking}
			default:
				d.Reasoning = b.Thinking
			}
			if b != nil && b.Type == "thinking" {
				th := &streamThinking{}
				th.text.WriteString(b.Thinking)
				th.signature.WriteString(b.Signature)
				thinkings[se.Index] = th
			}
		case "content_block_delta":
			if se.Delta != nil {
				switch se.Delta.Type {
				case "text_delta":
					if format == "" {
						d.Content = se.Delta.Text
					}
				case "thinking_delta":
					d.Reasoning = se.Delta.Thinking
					if th := thinkings[se.Index]; th != nil {
						th.text.WriteString(se.Delta.Thinking)
					}
				case "signature_delta":
					if th := thinkings[se.Index]; th != nil {
						th.signature.WriteString(se.Delta.Signature)
					}
				case "input_json_delta":
					if t := tools[se.Index]; t != nil && se.Delta.PartialJSON != "" {
						t.args = true
						d = t.piece(se.Delta.PartialJSON, out)
					}
				}
				// citations_delta: not chat text.
			}
		case "content_block_stop":
			if th := thinkings[se.Index]; th != nil {
				// The thinking block is whole: its signature closes it.
				delete(thinkings, se.Index)
				t := chat.Thought{Provider: Kind, Text: th.text.String(), Signature: th.signature.String()}
				out.Thoughts = append(out.Thoughts, t)
				d.Thought = &t
			}
			if t := tools[se.Index]; t != nil {
				delete(tools, se.Index)
				if !t.args { // no input streamed: an empty object, as Complete says
					d = t.piece("{}", out)
				}
			}
		case "message_delta":
			if se.Delta != nil && se.Delta.StopReason != "" {
				out.FinishReason = finishReason(se.Delta.StopReason, len(out.ToolCalls) > 0)
			}
			if se.Usage != nil { // cumulative: it replaces what it carries
				counted = true
				u.apply(se.Usage)
				out.Usage = u.chat()
			}
		case "message_stop":
			out.Content, out.Reasoning = content.String(), reasoning.String()
			return out, nil
		case "error":
			return nil, p.eventError(se.Error)
		}
		// ping and unknown events carry no chat data.
		if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil && d.Thought == nil {
			continue
		}
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		if err := emit(d); err != nil {
			return nil, err
		}
	}
}

// soFar is the Response of a stream that failed, out as read so far, for
// the gateway to charge the answer so far (see chat.Provider.Stream): the
// input message_start reported, by class, and the output only once a
// message_delta counted it (message_start's output_tokens is not the
// answer's).
func soFar(out *chat.Response, counted bool) *chat.Response {
	u := out.Usage
	if !counted {
		u.CompletionTokens, u.ReasoningTokens = 0, 0
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &chat.Response{Usage: u}
}

// piece returns the delta for a piece of t's input JSON, and adds it to
// the arguments of its call in out.
func (t *streamTool) piece(s string, out *chat.Response) chat.Delta {
	if t.format {
		return chat.Delta{Content: s}
	}
	out.ToolCalls[t.call].Arguments += s
	return chat.Delta{ToolCall: &chat.ToolCallDelta{Index: t.call, Arguments: s}}
}

// do sends the request and returns a 2xx response; any other outcome is an
// error.
func (p *Provider) do(ctx context.Context, req *chat.Request, stream bool) (*http.Response, error) {
	body, err := buildRequest(req, stream)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", p.name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	p.headers(ctx, hr, req, body.cache1h)
	if stream {
		hr.Header.Set("accept", "text/event-stream")
	} else {
		hr.Header.Set("accept", "application/json")
	}
	resp, err := chat.Send(p.client, hr)
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "send request", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, p.statusError(resp, eb)
}

// headers sets the headers of a request for req: the key, the API
// version, and the betas: the client's (req.APIHeaders' anthropic-beta,
// forwarded as they are) and BetaExtendedCacheTTL when cache1h.
func (p *Provider) headers(ctx context.Context, hr *http.Request, req *chat.Request, cache1h bool) {
	hr.Header.Set("x-api-key", p.keys.Key(ctx))
	hr.Header.Set("anthropic-version", APIVersion)
	hr.Header.Set("content-type", "application/json")
	var betas []string
	for _, b := range strings.Split(req.APIHeaders["anthropic-beta"], ",") {
		if b = strings.TrimSpace(b); b != "" && !slices.Contains(betas, b) {
			betas = append(betas, b)
		}
	}
	if cache1h && !slices.Contains(betas, BetaExtendedCacheTTL) {
		betas = append(betas, BetaExtendedCacheTTL)
	}
	if len(betas) > 0 {
		hr.Header.Set("anthropic-beta", strings.Join(betas, ","))
	}
}

// CountTokens asks the Messages API's count_tokens endpoint how many
// input tokens req has, as buildRequest would send it (its system
// prompt, messages, tools and thinking; no charge upstream). Every
// upstream failure is a *chat.UpstreamError (chat.TokenCounter).
func (p *Provider) CountTokens(ctx context.Context, req *chat.Request) (int, error) {
	body, err := buildRequest(req, false)
	if err != nil {
		return 0, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	b, err := json.Marshal(&countRequest{Model: body.Model, System: body.System, Messages: body.Messages, Thinking: body.Thinking,
		OutputConfig: body.OutputConfig, Tools: body.Tools, ToolChoice: body.ToolChoice})
	if err != nil {
		return 0, fmt.Errorf("%s: encode request: %w", p.name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/count_tokens", bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	p.headers(ctx, hr, req, body.cache1h)
	hr.Header.Set("accept", "application/json")
	resp, err := chat.Send(p.client, hr)
	if err != nil {
		return 0, chat.TransportError(ctx, p.name, "send request", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return 0, p.statusError(resp, eb)
	}
	var cr countResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&cr); err != nil || cr.InputTokens == nil {
		if err == nil {
			err = errors.New("no input_tokens")
		}
		return 0, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonMalformed,
			Message: "malformed count_tokens answer", Err: err}
	}
	return *cr.InputTokens, nil
}

// statusError maps a non-2xx response to an UpstreamError.
func (p *Provider) statusError(resp *http.Response, body []byte) error {
	var eb errorBody
	_ = json.Unmarshal(body, &eb)
	return chat.StatusError(p.name, resp.StatusCode, resp.Header, eb.Error.Message,
		fmt.Errorf("status %d: %s: %s", resp.StatusCode, eb.Error.Type, truncate(string(body), 512)))
}

// errorStatuses are the HTTP statuses of the Messages API's error types
// (https://docs.anthropic.com/en/api/errors): what an error event inside a
// 200 stream, or an error object in a 200 body, stands for.
var errorStatuses = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// eventError maps an error object (a mid-stream error event, or an error
// body with a 2xx status) to an UpstreamError with the status its type
// stands for (errorStatuses; an unknown type is an api_error, 500).
func (p *Provider) eventError(ed *errorDetail) error {
	if ed == nil {
		ed = &errorDetail{Type: "api_error"}
	}
	status, ok := errorStatuses[ed.Type]
	if !ok {
		status = http.StatusInternalServerError
	}
	return chat.StatusError(p.name, status, nil, ed.Message, fmt.Errorf("error event: %s: %s", ed.Type, ed.Message))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// finishReason maps a stop_reason to an OpenAI finish_reason. tool_use is
// tool_calls when the answer has tool calls for the client, and stop when
// the tool used was the structured output tool.
func finishReason(s string, toolCalls bool) string {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return chat.FinishLength
	case "refusal":
		return chat.FinishContentFilter
	case "tool_use":
		if toolCalls {
			return chat.FinishToolCalls
		}
		return chat.FinishStop
	default: // end_turn, stop_sequence, pause_turn, none yet
		return chat.FinishStop
	}
}

// buildRequest translates req to a Messages API body. It fails only for
// requests the API cannot express (no user or assistant message, tool call
// arguments that are not a JSON object, tools with response_format).
func buildRequest(req *chat.Request, stream bool) (*messagesRequest, error) {
	model := req.Model
	if model == nil {
		model = &catalog.Model{}
	}
	body := &messagesRequest{
		Model:         model.Upstream,
		MaxTokens:     req.MaxTokens,
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		TopK:          req.TopK,
		StopSequences: req.Stop,
		Stream:        stream,
	}
	if req.User != "" {
		body.Metadata = &metadata{UserID: req.User}
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
		if model.MaxTokens > 0 && model.MaxTokens < body.MaxTokens {
			body.MaxTokens = model.MaxTokens
		}
	}
	for _, m := range req.Messages {
		if m.Role == chat.RoleSystem {
			continue // collected by setSystem
		}
		role, blocks := "user", body.contentBlocks(m.Parts)
		switch m.Role {
		case chat.RoleAssistant:
			role = "assistant"
			blocks = append(thoughtBlocks(m.Thoughts), blocks...)
			for _, tc := range m.ToolCalls {
				input, err := toolInput(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("tool call %s (%s): %w", tc.ID, tc.Name, err)
				}
				blocks = append(blocks, block{Type: "tool_use", ID: toolUseID(tc.ID), Name: tc.Name, Input: input})
			}
			if m.Cache != nil && len(m.ToolCalls) > 0 { // after the calls: on the last tool_use
				blocks[len(blocks)-1].CacheControl = body.mark(m.Cache)
			}
		case chat.RoleTool:
			blocks = []block{{Type: "tool_result", ToolUseID: toolUseID(m.ToolCallID), Content: m.Text(), IsError: m.ToolError,
				CacheControl: body.mark(firstCache(m.Parts))}}
		}
		if len(blocks) == 0 {
			continue // the API rejects empty content
		}
		// Turns alternate: merge consecutive messages of one role, so
		// consecutive tool results make one user turn.
		n := len(body.Messages)
		if n == 0 || body.Messages[n-1].Role != role {
			body.Messages = append(body.Messages, message{Role: role, Content: blocks})
			continue
		}
		prev := &body.Messages[n-1]
		if m.Role != chat.RoleTool {
			prev.Content = append(prev.Content, blocks...)
			continue
		}
		// tool_result blocks come first in a user turn, before any text.
		i := 0
		for i < len(prev.Content) && prev.Content[i].Type == "tool_result" {
			i++
		}
		prev.Content = append(prev.Content[:i], append(blocks, prev.Content[i:]...)...)
	}
	if len(body.Messages) == 0 {
		return nil, errors.New("at least one user or assistant message with content is required")
	}
	body.setSystem(req.Messages)

	if err := setTools(body, req); err != nil {
		return nil, err
	}
	// Forced tool use (tool_choice any or tool, and the structured output
	// tool) is refused with extended thinking; adaptive thinking skips
	// thinking there, or is refused by some models. Such a request is sent
	// without thinking: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
	// ("Thinking with tool use").
	forced := body.ToolChoice != nil && (body.ToolChoice.Type == "any" || body.ToolChoice.Type == "tool")
	// A tool-use loop is one assistant turn, which must keep one thinking
	// configuration, and with thinking on it must start with the signed
	// thinking block the model wrote: the assistant message carries it
	// (chat.Message.Thoughts) when its client sent it back (a Messages
	// API client does); a request that continues an open loop (its last
	// user turn holds tool results) whose assistant turn has none (a chat
	// client's) is sent without thinking, where the API would otherwise
	// refuse it ("Expected `thinking` or `redacted_thinking`, but found
	// `tool_use`"): https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows.
	think := req.ReasoningEffort != "" && !forced && (!inToolLoop(body.Messages) || loopThinks(body.Messages))
	if think {
		switch model.Thinking {
		case catalog.ThinkingBudget:
			budget, ok := thinkingBudgets[req.ReasoningEffort]
			if !ok {
				budget = thinkingBudgets["medium"]
			}
			if req.ReasoningBudget > 0 {
				budget = req.ReasoningBudget // the client's own (thinking.budget_tokens)
			}
			body.Thinking = &thinking{Type: "enabled", BudgetTokens: budget, Display: req.ReasoningDisplay}
			// max_tokens counts thinking too and must exceed the budget:
			// a max_tokens at or below the budget is room for the answer
			// on top of it.
			if body.MaxTokens <= budget {
				body.MaxTokens += budget
			}
			if model.MaxTokens > budget && body.MaxTokens > model.MaxTokens {
				body.MaxTokens = model.MaxTokens
			}
			body.Temperature, body.TopP, body.TopK = nil, nil, nil // not allowed with thinking
		case catalog.ThinkingAdaptive:
			body.Thinking = &thinking{Type: "adaptive", Display: req.ReasoningDisplay}
			body.OutputConfig = &outputConfig{Effort: req.ReasoningEffort}
			body.Temperature, body.TopP, body.TopK = nil, nil, nil
		}
	}
	if body.Thinking == nil {
		// Signed thinking is sent back only with thinking on, where it
		// is needed; without, a turn is its text and tool calls.
		body.Messages = withoutThinking(body.Messages)
	}
	return body, nil
}

// thoughtBlocks returns the thinking and redacted_thinking blocks of an
// assistant message's thoughts: Claude's (this adapter's kind and
// Bedrock's), signed or redacted; a thought without a signature (another
// provider's reasoning, or a client's unsigned block) cannot be verified
// by the API, and is left out.
func thoughtBlocks(thoughts []chat.Thought) []block {
	var out []block
	for _, t := range thoughts {
		if t.Provider != Kind && t.Provider != "bedrock" {
			continue
		}
		switch {
		case t.Redacted != "":
			out = append(out, block{Type: "redacted_thinking", Data: t.Redacted})
		case t.Signature != "":
			text := t.Text
			out = append(out, block{Type: "thinking", Thinking: &text, Signature: t.Signature})
		}
	}
	return out
}

// isThinking reports whether b is a thinking or redacted_thinking block.
func isThinking(b block) bool { return b.Type == "thinking" || b.Type == "redacted_thinking" }

// loopThinks reports whether the last assistant turn of msgs starts with
// its thinking: a tool-use loop that continues it may think.
func loopThinks(msgs []message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return len(msgs[i].Content) > 0 && isThinking(msgs[i].Content[0])
		}
	}
	return false
}

// withoutThinking returns msgs without their thinking blocks; a turn
// left empty is dropped, and the turns it separated merged.
func withoutThinking(msgs []message) []message {
	out := msgs[:0]
	for _, m := range msgs {
		m.Content = slices.DeleteFunc(m.Content, isThinking)
		if len(m.Content) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Content = append(out[n-1].Content, m.Content...)
			continue
		}
		out = append(out, m)
	}
	return out
}

// toolUseID returns the id a tool call of the conversation is sent with:
// chat.SafeCallID's (the API's ids are letters, digits, _ and -). The
// answer's ids are the API's, never rewritten.
func toolUseID(id string) string { return chat.SafeCallID(id) }

// setTools sets body's tools and tool_choice from req's tools, tool choice,
// parallel_tool_calls and response_format. A response format is a forced
// tool (formatToolName) whose input schema is the format's schema, and
// whose input is the answer's content.
func setTools(body *messagesRequest, req *chat.Request) error {
	if rf := req.ResponseFormat; rf != nil {
		if len(req.Tools) > 0 {
			return errors.New("tools and response_format cannot be combined with this provider")
		}
		name := formatToolName(req)
		schema := json.RawMessage(`{"type":"object"}`)
		if rf.Type == chat.FormatJSONSchema && len(bytes.TrimSpace(rf.Schema)) > 0 {
			schema = rf.Schema
		}
		desc := rf.Description
		if desc == "" {
			desc = "Give your whole answer as this tool's input: a JSON object."
		}
		body.Tools = []tool{{Name: name, Description: desc, InputSchema: schema}}
		body.ToolChoice = &toolChoice{Type: "tool", Name: name}
		return nil
	}
	if len(req.Tools) == 0 {
		return nil // tool_choice without tools means nothing
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		// Strict is OpenAI's and is not sent (see chat.Tool).
		body.Tools = append(body.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema, CacheControl: body.mark(t.Cache)})
	}
	tc := &toolChoice{Type: "auto"}
	switch req.ToolChoice.Mode {
	case chat.ToolNone:
		body.ToolChoice = &toolChoice{Type: "none"} // takes no disable_parallel_tool_use
		return nil
	case chat.ToolRequired:
		tc.Type = "any"
	case chat.ToolFunction:
		tc.Type, tc.Name = "tool", req.ToolChoice.Name
	}
	// With auto at most one tool is called, with any or tool exactly one.
	tc.DisableParallelToolUse = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	if tc.Type != "auto" || tc.DisableParallelToolUse {
		body.ToolChoice = tc // auto is the default
	}
	return nil
}

// formatToolName is the name of the tool that carries req's structured
// output: the json_schema's name, or "json"; "" without a response format.
func formatToolName(req *chat.Request) string {
	rf := req.ResponseFormat
	switch {
	case rf == nil:
		return ""
	case rf.Type == chat.FormatJSONSchema && rf.Name != "":
		return rf.Name
	default:
		return "json"
	}
}

// toolInput returns a tool call's arguments as a tool_use input: a JSON
// object ("{}" for empty arguments).
func toolInput(args string) (json.RawMessage, error) {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, errors.New("arguments must be a JSON object")
	}
	return raw, nil
}

// inToolLoop reports whether msgs end inside a tool-use loop: the last user
// turn holds tool results.
func inToolLoop(msgs []message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		for _, b := range msgs[i].Content {
			if b.Type == "tool_result" {
				return true
			}
		}
		return false
	}
	return false
}

// contentBlocks translates message parts, each part's cache breakpoint
// on its block; empty text parts are dropped.
func (b *messagesRequest) contentBlocks(parts []chat.Part) []block {
	var out []block
	for _, p := range parts {
		switch {
		case p.Image == nil:
			if p.Text != "" {
				out = append(out, block{Type: "text", Text: p.Text, CacheControl: b.mark(p.Cache)})
			}
		case len(p.Image.Data) > 0:
			out = append(out, block{Type: "image", Source: &imageSource{
				Type: "base64", MediaType: p.Image.MediaType, Data: base64.StdEncoding.EncodeToString(p.Image.Data)}, CacheControl: b.mark(p.Cache)})
		case p.Image.URL != "":
			out = append(out, block{Type: "image", Source: &imageSource{Type: "url", URL: p.Image.URL}, CacheControl: b.mark(p.Cache)})
		}
	}
	return out
}

// setSystem sets the system prompt from the system messages: their texts
// joined by blank lines, or, when a part carries a cache breakpoint, one
// text block per non-empty part, each with its breakpoint.
func (b *messagesRequest) setSystem(msgs []chat.Message) {
	var texts []string
	marked := false
	for _, m := range msgs {
		if m.Role != chat.RoleSystem {
			continue
		}
		if t := m.Text(); t != "" {
			texts = append(texts, t)
		}
		for _, p := range m.Parts {
			marked = marked || p.Cache != nil
		}
	}
	switch {
	case marked:
		s := &systemPrompt{}
		for _, m := range msgs {
			if m.Role == chat.RoleSystem {
				s.blocks = append(s.blocks, b.contentBlocks(m.Parts)...)
			}
		}
		b.System = s
	case len(texts) > 0:
		b.System = &systemPrompt{text: strings.Join(texts, "\n\n")}
	}
}

// mark returns the cache_control of breakpoint c (nil: none), noting a
// one-hour one.
func (b *messagesRequest) mark(c *chat.CacheControl) *cacheControl {
	if c == nil {
		return nil
	}
	if c.TTL == chat.CacheTTL1h {
		b.cache1h = true
		return &cacheControl{Type: "ephemeral", TTL: chat.CacheTTL1h}
	}
	return &cacheControl{Type: "ephemeral"}
}

// firstCache returns the first cache breakpoint of parts, nil if none:
// a tool result's.
func firstCache(parts []chat.Part) *chat.CacheControl {
	for _, p := range parts {
		if p.Cache != nil {
			return p.Cache
		}
	}
	return nil
}
