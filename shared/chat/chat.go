// Package chat is the chat completions domain: the provider-neutral request
// and response types, the Provider interface each upstream family implements
// (packages openai, anthropic, gemini, bedrock, synthetic), and the errors a
// provider returns so that the HTTP edge can map upstream failures to
// 400 / 429 / 502 / 503 / 504; and the Gateway, which validates a request
// (Params, the OpenAI wire shape: messages, tools and tool turns,
// response_format, the sampling fields) against the catalog and against
// what the model's provider can honour (Features), fetches images for
// providers that need bytes (ImageFetcher, with SSRF protection), runs it
// on the model's provider into the caller's Sink and records usage
// (UsageRecorder).
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// Roles of a message. "developer" is normalised to RoleSystem on decode.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // a tool's result, answering an assistant's ToolCall
)

// Finish reasons.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
	FinishToolCalls     = "tool_calls" // the answer ends with tool calls for the client to run
)

// Tool choice modes (ToolChoice.Mode).
const (
	ToolAuto     = "auto"     // the model decides (the default with tools)
	ToolNone     = "none"     // the model must not call a tool
	ToolRequired = "required" // the model must call at least one tool
	ToolFunction = "function" // the model must call ToolChoice.Name
)

// Response format types (ResponseFormat.Type).
const (
	FormatJSONObject = "json_object" // any JSON object
	FormatJSONSchema = "json_schema" // JSON matching ResponseFormat.Schema
)

// Request is a validated chat completion request, ready for a provider.
type Request struct {
	Model *catalog.Model // the catalog entry; Model.Upstream is the provider's name
	// Messages in order; system messages may appear anywhere, providers that
	// need a top-level system prompt collect them.
	Messages        []Message
	MaxTokens       int    // 0: the provider's default (providers that require one use a sensible cap)
	ReasoningEffort string // "", "low", "medium" or "high"; "" when the model does not reason
	// ReasoningBudget is the most tokens the client let the model reason
	// with (the Messages API's thinking.budget_tokens), for providers that
	// take a budget (Anthropic, Bedrock Claude); 0: the effort's own.
	// ReasoningDisplay is the Messages API's thinking.display: "omitted"
	// (the answer carries the reasoning's signature, not its text) or
	// "summarized"; "": the provider's default. Both are 0 and "" when the
	// model does not reason.
	ReasoningBudget  int
	ReasoningDisplay string
	Temperature      *float64
	TopP             *float64
	// TopK samples from the K likeliest tokens (the Messages API's
	// top_k), for providers with Features.TopK; nil: the provider's
	// default.
	TopK *int
	Stop []string
	Seed *int64

	// Tools the model may call, in the client's order; ToolChoice says
	// whether it must (its zero value is ToolAuto). ParallelToolCalls is
	// nil for the provider's default (parallel calls allowed).
	Tools             []Tool
	ToolChoice        ToolChoice
	ParallelToolCalls *bool
	// ResponseFormat asks for JSON output; nil is plain text.
	ResponseFormat *ResponseFormat

	PresencePenalty  *float64
	FrequencyPenalty *float64
	LogitBias        map[string]float64 // token id -> bias, for providers with Features.LogitBias
	User             string             // the client's end-user id, forwarded where the provider takes one
	// OpenAI-only fields, forwarded as they are to OpenAI-compatible
	// upstreams (Features.OpenAIOnly) and refused elsewhere, except the
	// hints: PromptCacheKey, and a Verbosity the request marked a hint
	// (Params.VerbosityHint), are left out (empty) for other providers.
	ServiceTier      string
	Verbosity        string
	PromptCacheKey   string
	SafetyIdentifier string
	verbosityHint    bool
	// APIHeaders are the client's API version and feature headers, by
	// lower-case name, as it sent them (anthropic-version,
	// anthropic-beta from the Messages API): opaque to the gateway, which
	// neither reads nor checks them; an adapter of that API may forward
	// them (see the anthropic package). nil: none.
	APIHeaders map[string]string
	// Native is the client's own request, for a provider that speaks its
	// API (see NativeProvider); nil for a translated request, which is
	// all the other fields.
	Native *Native
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object, as the client
	// sent it; never empty (the gateway fills in an empty object schema).
	Parameters json.RawMessage
	Strict     bool // OpenAI's strict schema adherence; other providers ignore it
	// Cache is a prompt-cache breakpoint after this tool's definition
	// (cache_control on the tool), nil if none.
	Cache *CacheControl
}

// ToolChoice is the client's tool_choice.
type ToolChoice struct {
	Mode string // ToolAuto ("" is the same), ToolNone, ToolRequired or ToolFunction
	Name string // the function to call, for ToolFunction
}

// ToolCall is one call of a tool by the model: in an assistant message of
// the conversation, or in a Response.
type ToolCall struct {
	ID        string // the call's id, echoed by the tool message that answers it
	Name      string
	Arguments string // a JSON object, as text
	// Signature is the provider's signature of the call, sent back with
	// it on a later turn (Gemini's thoughtSignature on a functionCall
	// part); "" for none. SignedBy is the provider kind that made it.
	Signature string
	SignedBy  string
}

// ToolCallDelta is one streamed piece of a tool call. The first piece of
// call Index carries its ID and Name; every piece may carry a piece of the
// arguments' text, to be concatenated in order.
type ToolCallDelta struct {
	Index     int // the call's position among this answer's tool calls, from 0
	ID        string
	Name      string
	Arguments string
	// Signature and SignedBy: see ToolCall; on the call's first piece.
	Signature string
	SignedBy  string
}

// ResponseFormat asks for structured output.
type ResponseFormat struct {
	Type        string // FormatJSONObject or FormatJSONSchema
	Name        string // the schema's name (json_schema)
	Description string
	Schema      json.RawMessage // the JSON Schema (json_schema)
	Strict      bool
}

// Message is one turn of the conversation.
type Message struct {
	Role  string
	Parts []Part // a plain string content is one text Part; may be empty for an assistant message with ToolCalls
	// ToolCalls are an assistant message's tool calls.
	ToolCalls []ToolCall
	// ToolCallID is the call a RoleTool message answers; ToolName is that
	// call's function name (the gateway finds it in the conversation:
	// Gemini needs it).
	ToolCallID string
	ToolName   string
	// ToolError marks a RoleTool message whose result is an error (the
	// Messages API's is_error), for providers that take the mark
	// (Anthropic's is_error, Bedrock's status "error"); to the others it
	// is an ordinary result.
	ToolError bool
	// Name is the participant's name the client gave the message; only
	// OpenAI-compatible upstreams take it.
	Name string
	// Thoughts are an assistant message's reasoning as its provider
	// signed it (see Thought), sent back to that provider kind before the
	// message's content and tool calls.
	Thoughts []Thought
	// Cache is a prompt-cache breakpoint after an assistant message's
	// tool calls (its own cache_control, as OpenRouter takes it on a
	// message), nil if none. A message-level cache_control of a message
	// without tool calls is on its last part (Part.Cache).
	Cache *CacheControl
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Image == nil {
			s += p.Text
		}
	}
	return s
}

// Part is text (Image == nil) or an image.
type Part struct {
	Text  string
	Image *Image
	// Cache is a prompt-cache breakpoint after this part (its
	// cache_control), nil if none; never on an empty text part, which
	// providers drop. The parts of a RoleTool message make one tool
	// result: its first breakpoint marks the whole result.
	Cache *CacheControl
}

// Prompt-cache lifetimes (CacheControl.TTL), as Anthropic and Bedrock
// name them.
const (
	CacheTTL5m = "5m" // the default
	CacheTTL1h = "1h"
)

// CacheControl is a prompt-cache breakpoint the client put on a content
// part or a tool (cache_control: {"type": "ephemeral", "ttl": ...}): the
// prompt up to and including it may be cached, for TTL. A provider that
// takes breakpoints (CacheProvider: Anthropic, Bedrock) forwards it; the
// gateway removes those another provider would not (see CacheRules), so
// a provider forwards every breakpoint its Request carries.
type CacheControl struct {
	TTL   string // CacheTTL5m or CacheTTL1h
	param string // where the client put it, for errors: messages[0].content[1].cache_control
}

// Image is an image input. Exactly one of URL (an http(s) URL the upstream
// may fetch) or Data (decoded bytes, from a data URI or fetched by the
// gateway for providers that need bytes) is set; MediaType is set with Data.
type Image struct {
	URL       string
	MediaType string // image/png, image/jpeg, image/gif, image/webp
	Data      []byte
}

// Usage counts tokens as the upstream reported them. PromptTokens is the
// whole input, as OpenAI counts prompt_tokens (a provider that counts
// cache reads and writes apart, as Anthropic does, adds them in):
// CachedTokens, CacheWriteTokens and CacheWrite1hTokens are parts of it.
// CompletionTokens is the whole output: ReasoningTokens is part of it.
// Cost is set by the gateway, never by a provider: what the completion
// was charged, in credits.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens were read from the provider's prompt cache.
	CachedTokens int `json:"-"`
	// CacheWriteTokens were written to the provider's prompt cache with
	// a 5-minute lifetime (or its only one); CacheWrite1hTokens with a
	// 1-hour lifetime (Anthropic's and Bedrock's ttl "1h").
	CacheWriteTokens   int `json:"-"`
	CacheWrite1hTokens int `json:"-"`
	// ReasoningTokens are the output tokens the model spent thinking.
	ReasoningTokens int            `json:"-"`
	Cost            credits.Amount `json:"-"`
}

// Tokens returns u's counts by class, as the catalog prices them.
func (u Usage) Tokens() credits.Tokens {
	return credits.Tokens{Prompt: int64(u.PromptTokens), Cached: int64(u.CachedTokens), CacheWrite: int64(u.CacheWriteTokens),
		CacheWrite1h: int64(u.CacheWrite1hTokens), Completion: int64(u.CompletionTokens), Reasoning: int64(u.ReasoningTokens)}
}

// Response is a finished completion.
type Response struct {
	Content   string
	Reasoning string // never sent as content
	// Thoughts are the answer's signed reasoning, in order (see Thought),
	// for a client that will send them back with the next turn.
	Thoughts     []Thought
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
	// ServiceTier is the service tier the upstream served at, where it
	// says ("flex", "priority", "default"); "" if it does not.
	ServiceTier string
	// Status is how the answer ended, as its record says:
	// credits.StatusCompleted ("" means it too) when the upstream ended
	// it and the client had it; credits.StatusClientClosed when the
	// client went away first; credits.StatusUpstreamError when the
	// upstream failed after the answer's first token. The gateway sets
	// it, never a provider.
	Status string
	// Partial: the answer was cut short after its first token (Status is
	// then credits.StatusClientClosed or credits.StatusUpstreamError); it
	// is charged for its input and the output produced, and Usage holds
	// what the provider reported before the end, the rest estimated. A
	// whole answer whose client went away while its upstream worked is
	// not partial: it is finished, detached from the client, and charged
	// exactly (Status credits.StatusClientClosed).
	Partial bool
	// Estimated: some count of Usage was not reported by the provider
	// and was estimated from what was sent and delivered (see
	// Gateway.Run; docs/api.md says how).
	Estimated bool
	// Native is a native answer's own (see NativeProvider): its closing
	// events or its whole body, for the sink's End; nil for a
	// translated answer.
	Native *NativeAnswer
}

// Delta is one streamed increment: content text, reasoning text (which
// the gateway does not put in content), or a piece of a tool call.
type Delta struct {
	Content   string
	Reasoning string
	ToolCall  *ToolCallDelta
	// Thought, when set, closes a piece of reasoning with what its
	// provider needs back on a later turn (a signature, redacted data):
	// the reasoning text before it, since the last Thought, is its text.
	// It is not content: the first-token commit does not count it, and
	// a sink that cannot carry it drops it.
	Thought *Thought
}

// Thought is a piece of a model's reasoning as its provider returned it,
// kept whole so that a later turn can send it back, as the providers
// that sign reasoning require for multi-turn and tool-use continuity:
// Anthropic's thinking blocks (text and signature) and redacted_thinking
// blocks, Bedrock's reasoningContent (the same), Gemini's thought
// signatures, OpenAI's encrypted reasoning. A Thought is meaningful only
// to the provider kind that made it (Provider): an adapter sends back the
// thoughts of its own kind and drops the others (another provider's
// reasoning is not a signed block it can verify). Claude's thoughts are
// one kind on both of its platforms: the anthropic and bedrock adapters
// each send back "anthropic" and "bedrock" thoughts (a Messages API
// client's thinking blocks, decoded, are "anthropic").
type Thought struct {
	Provider  string // the provider kind that made it: "anthropic", "bedrock", "gemini", "openai"
	Text      string // the reasoning text, where the provider gave it
	Signature string // the provider's signature of it (Anthropic's signature, Gemini's thoughtSignature, OpenAI's encrypted_content)
	Redacted  string // Anthropic's redacted_thinking data (no Text, no Signature)
}

// Writer receives a streamed completion's deltas. Delta writes one (it may
// be held in a buffer); Flush sends what was written. A provider calls
// Flush whenever it is about to wait for the upstream, so a delta is never
// held back while the upstream is silent, and deltas that arrived in one
// read leave in one write. Both return the client's failure (it went
// away): the provider then stops.
type Writer interface {
	Delta(Delta) error
	Flush() error
}

// Sink is where the gateway runs one completion: Start when the call is
// admitted and the first upstream is about to be asked (a stream may send
// heartbeats from then on, but nothing of the answer), Begin when an
// attempt's first token commits the answer (it names the model that
// answers; a whole answer is begun just before End), a Writer for the
// deltas that follow (streamed calls only), and End with the finished
// Response: a streamed call's finish reason and usage, or a whole answer.
// Begin is called at most once. Each wire format (chat chunks, a
// chat.completion object, Responses events) is a Sink.
type Sink interface {
	Writer
	Start() error
	Begin(Answer) error
	End(*Response) error
}

// WriterFunc adapts a function to a Writer whose Flush does nothing (for
// tests and callers that write straight through).
type WriterFunc func(Delta) error

// Delta calls f(d).
func (f WriterFunc) Delta(d Delta) error { return f(d) }

// Flush does nothing.
func (f WriterFunc) Flush() error { return nil }

// Provider is one upstream family. Implementations are safe for concurrent
// use and honour ctx: when ctx is cancelled the upstream request is cancelled.
type Provider interface {
	// Complete returns the whole completion.
	Complete(ctx context.Context, req *Request) (*Response, error)
	// Stream writes each upstream delta to w, in order, as soon as it
	// arrives, flushing w before it waits for the upstream again, and
	// returns the final Response (FinishReason, Usage; Content and
	// Reasoning may be left empty). If w fails, Stream stops and returns
	// the error.
	//
	// A Stream that fails after it wrote a delta (w failed, ctx ended,
	// the upstream broke) may return with its error a Response whose
	// Usage holds the counts the upstream reported before the end, for
	// the gateway to charge the answer so far: each count it sets must
	// cover all it wrote to w (a count the upstream reports only at its
	// end stays 0; the gateway estimates those). Nil is the same as
	// nothing reported.
	Stream(ctx context.Context, req *Request, w Writer) (*Response, error)
}

// UpstreamError is a failure reported by, or talking to, an upstream:
// chat's and speech's route.VendorFailure. Providers return it for every
// upstream failure; Failure classifies it for routing (by Status when it
// is an error status, else by Kind and Reason), and Fault is what the
// client is told: Kind (UpstreamBadRequest 400 with Message,
// UpstreamRateLimited 429, UpstreamFailed 502, UpstreamUnavailable 503,
// UpstreamTimeout 504), never Message otherwise.
type UpstreamError struct {
	Provider string
	Kind     UpstreamKind
	// Status is the upstream's HTTP error status, or the status an
	// in-band error stands for (an error event inside a 200 stream:
	// Anthropic's overloaded_error is 529, Gemini's RESOURCE_EXHAUSTED
	// 429); 0 if none, as for a dropped stream or a malformed answer.
	Status     int
	Message    string        // for UpstreamBadRequest: the upstream's message, shown to the client
	RetryAfter time.Duration // the wait the upstream asked for (Retry-After), 0 if none
	// Reason names a failure without an error status for routing's
	// attempts header and metrics: ReasonDropped, ReasonMalformed,
	// ReasonModel; "" to name it by Kind.
	Reason string
	Err    error // cause, for logs only
}

// Reasons of UpstreamErrors without an error status (UpstreamError.Reason).
const (
	// ReasonDropped is a stream that ended (the connection closed, or
	// the body ended) before its terminal event ([DONE], message_stop,
	// messageStop, a finishReason): a truncated answer is never a success.
	ReasonDropped = "dropped"
	// ReasonMalformed is an answer that could not be decoded.
	ReasonMalformed = "malformed"
	// ReasonModel is an answer the model itself spoiled (Gemini's
	// finishReason MALFORMED_FUNCTION_CALL): another attempt may do better.
	ReasonModel = "model_error"
)

// UpstreamKind classifies an UpstreamError: what a client is told it
// was (route.FaultKind, the kinds of every vendor failure).
type UpstreamKind = route.FaultKind

// Upstream failure kinds.
const (
	UpstreamFailed      = route.VendorFailed      // 5xx, garbage, connection failure: 502
	UpstreamBadRequest  = route.VendorRejected    // the client's fault (upstream 400/404/413/422): 400 with the upstream's message
	UpstreamRateLimited = route.VendorRateLimited // upstream 429: 429 with Retry-After
	UpstreamUnavailable = route.VendorUnavailable // not configured (no credentials), 503 overloaded: 503
	UpstreamTimeout     = route.VendorTimeout     // no answer in time: 504
)

func (e *UpstreamError) Error() string {
	s := fmt.Sprintf("%s upstream (status %d): %s", e.Provider, e.Status, e.Message)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *UpstreamError) Unwrap() error { return e.Err }

// Features lists the optional parts of a request a provider can honour.
// The gateway refuses a request that uses one its model's provider lacks,
// with a 400 unsupported_parameter naming the field, before any upstream
// call: nothing is silently dropped. A Provider that does not implement
// FeatureProvider is taken to honour AllFeatures (an OpenAI-compatible
// upstream, test fakes).
type Features struct {
	Tools             bool // tools, tool_choice, assistant tool_calls and tool messages
	ToolChoiceNone    bool // tool_choice "none" with tools
	ParallelToolCalls bool // parallel_tool_calls false (at most one call) can be enforced
	ResponseFormat    bool // response_format json_object and json_schema
	ToolsWithFormat   bool // tools and response_format in one request
	Seed              bool
	Penalties         bool // presence_penalty, frequency_penalty
	LogitBias         bool
	OpenAIOnly        bool // service_tier, verbosity, prompt_cache_key, safety_identifier: forwarded as they are (prompt_cache_key is left out without it)
	TopK              bool // top_k (the Messages API's)
}

// AllFeatures honours everything OpenAI's chat request has: an
// OpenAI-compatible upstream takes the request as the client sent it. It
// is what the gateway takes a Provider that is not a FeatureProvider to
// honour. TopK is not OpenAI's, and not in it.
var AllFeatures = Features{Tools: true, ToolChoiceNone: true, ParallelToolCalls: true, ResponseFormat: true,
	ToolsWithFormat: true, Seed: true, Penalties: true, LogitBias: true, OpenAIOnly: true}

// FeatureProvider is implemented by a Provider that lacks some Features.
type FeatureProvider interface {
	Features() Features
}

// CacheRules is how a provider forwards the prompt-cache breakpoints
// (CacheControl) of a request to one model. Breakpoints are a hint that
// only changes cost: those a provider does not take are removed, never
// refused; a request over a limit the provider does take is refused (see
// Gateway.Prepare).
type CacheRules struct {
	// Breakpoints is the most breakpoints one request may carry; 0: the
	// provider forwards none (it caches on its own, or the model has no
	// prompt cache).
	Breakpoints int
	// Tools: a tool's breakpoint is forwarded; without it, the tools'
	// breakpoints are removed (and not counted).
	Tools bool
	// TTL1h: a one-hour breakpoint is forwarded as one; without it, it
	// is sent with the default lifetime, five minutes.
	TTL1h bool
}

// CacheProvider is implemented by a Provider that forwards prompt-cache
// breakpoints: CacheRules says how, for model m. The requests of another
// Provider carry none.
type CacheProvider interface {
	CacheRules(m *catalog.Model) CacheRules
}
