package anthropic

import (
	"encoding/json"

	"github.com/genway/genway/shared/chat"
)

// The Messages API wire format, as documented at
// https://docs.anthropic.com/en/api/messages,
// https://docs.anthropic.com/en/docs/build-with-claude/streaming and, for
// tools, https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use.

type messagesRequest struct {
	Model         string        `json:"model"`
	MaxTokens     int           `json:"max_tokens"`
	System        *systemPrompt `json:"system,omitempty"`
	Messages      []message     `json:"messages"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	TopK          *int          `json:"top_k,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
	Thinking      *thinking     `json:"thinking,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
	Tools         []tool        `json:"tools,omitempty"`
	ToolChoice    *toolChoice   `json:"tool_choice,omitempty"`
	Metadata      *metadata     `json:"metadata,omitempty"`

	// cache1h: some block carries a one-hour cache_control, which is
	// sent with the extended-cache-ttl beta header.
	cache1h bool
}

// systemPrompt is the system field: a string, or text blocks when one of
// them carries cache_control.
type systemPrompt struct {
	text   string
	blocks []block
}

// MarshalJSON writes the blocks, or else the text.
func (s *systemPrompt) MarshalJSON() ([]byte, error) {
	if s.blocks != nil {
		return json.Marshal(s.blocks)
	}
	return json.Marshal(s.text)
}

// cacheControl marks a prompt-cache breakpoint on a block or a tool:
// {"type": "ephemeral"}, with "ttl": "1h" for the one-hour cache (the
// default is five minutes).
// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// tool is a client tool: {"name", "description", "input_schema"}.
type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// toolChoice is {"type": "auto"|"any"|"tool"|"none", "name" (tool),
// "disable_parallel_tool_use" (not with none)}.
type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// metadata carries the end user's id.
type metadata struct {
	UserID string `json:"user_id"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a request content block: text, image, tool_use (in assistant
// turns) or tool_result (in user turns), thinking and redacted_thinking
// (in assistant turns, first); a text block also makes the system
// prompt's blocks.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`  // thinking: present, "" when its text was omitted
	Signature    string          `json:"signature,omitempty"` // thinking
	Data         string          `json:"data,omitempty"`      // redacted_thinking
	Source       *imageSource    `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`          // tool_use
	Name         string          `json:"name,omitempty"`        // tool_use
	Input        json.RawMessage `json:"input,omitempty"`       // tool_use: a JSON object, never empty
	ToolUseID    string          `json:"tool_use_id,omitempty"` // tool_result
	Content      string          `json:"content,omitempty"`     // tool_result
	IsError      bool            `json:"is_error,omitempty"`    // tool_result
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// thinking is {"type":"enabled","budget_tokens":N} or {"type":"adaptive"},
// with "display" ("summarized" or "omitted") when the client chose one.
type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// outputConfig carries the effort level that goes with adaptive thinking.
type outputConfig struct {
	Effort string `json:"effort"`
}

type messageResponse struct {
	Type       string         `json:"type"` // "message", or "error"
	Content    []contentBlock `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      usage          `json:"usage"`
	Error      *errorDetail   `json:"error"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`  // thinking
	Signature string          `json:"signature"` // thinking
	Data      string          `json:"data"`      // redacted_thinking
	ID        string          `json:"id"`        // tool_use
	Name      string          `json:"name"`      // tool_use
	Input     json.RawMessage `json:"input"`     // tool_use
}

// usage is the usage object of a message (and of message_start's
// message). input_tokens excludes the tokens read from the prompt cache
// and those written to it, which have counts of their own; cache_creation
// splits the writes by lifetime (5 minutes, 1 hour). Thinking tokens are
// part of output_tokens, with no count of their own.
// https://docs.claude.com/en/api/messages#response-usage
type usage struct {
	InputTokens              int            `json:"input_tokens"`
	OutputTokens             int            `json:"output_tokens"`
	CacheCreationInputTokens int            `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int            `json:"cache_read_input_tokens"`
	CacheCreation            *cacheCreation `json:"cache_creation"`
	ServiceTier              string         `json:"service_tier"` // standard, priority, batch
}

// cacheCreation splits a message's cache writes by lifetime.
type cacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

// usageDelta is message_delta's usage: cumulative counts, each present
// only when the event carries it (output_tokens always; the input side
// when it changed during the turn, as server tools change it).
type usageDelta struct {
	InputTokens              *int           `json:"input_tokens"`
	OutputTokens             *int           `json:"output_tokens"`
	CacheCreationInputTokens *int           `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int           `json:"cache_read_input_tokens"`
	CacheCreation            *cacheCreation `json:"cache_creation"`
}

// apply sets u's counts to those d carries. The input side is taken only
// when d's input-side counts are not all zero: a delta that repeats
// zeros it does not count (some compatible servers send them) never
// erases message_start's input.
func (u *usage) apply(d *usageDelta) {
	if d.OutputTokens != nil {
		u.OutputTokens = *d.OutputTokens
	}
	if deref(d.InputTokens)+deref(d.CacheCreationInputTokens)+deref(d.CacheReadInputTokens) == 0 {
		return
	}
	if d.InputTokens != nil {
		u.InputTokens = *d.InputTokens
	}
	if d.CacheCreationInputTokens != nil {
		u.CacheCreationInputTokens = *d.CacheCreationInputTokens
	}
	if d.CacheReadInputTokens != nil {
		u.CacheReadInputTokens = *d.CacheReadInputTokens
	}
	if d.CacheCreation != nil {
		u.CacheCreation = d.CacheCreation
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// chat returns u as OpenAI-style usage: prompt tokens are the whole input
// (input_tokens plus cache reads and writes), of which CachedTokens were
// read from the cache, CacheWrite1hTokens written to it for an hour and
// CacheWriteTokens for 5 minutes (every write without a split by
// lifetime); ReasoningTokens stays 0, as Anthropic counts thinking in
// output_tokens without saying how much.
func (u usage) chat() chat.Usage {
	writes := u.CacheCreationInputTokens
	var writes1h int
	if cc := u.CacheCreation; cc != nil {
		writes = max(writes, cc.Ephemeral5m+cc.Ephemeral1h)
		writes1h = min(cc.Ephemeral1h, writes)
	}
	prompt := u.InputTokens + writes + u.CacheReadInputTokens
	return chat.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: writes - writes1h, CacheWrite1hTokens: writes1h}
}

// serviceTier is the service tier of an answer in the catalog's names:
// Anthropic's "standard" is "default"; "" if it said none.
func serviceTier(s string) string {
	if s == "standard" {
		return "default"
	}
	return s
}

// streamEvent is the data of any streaming event; fields by event type.
type streamEvent struct {
	Type         string           `json:"type"`
	Index        int              `json:"index"`         // content_block_start, _delta, _stop
	Message      *messageResponse `json:"message"`       // message_start
	ContentBlock *contentBlock    `json:"content_block"` // content_block_start
	Delta        *streamDelta     `json:"delta"`         // content_block_delta, message_delta
	Usage        *usageDelta      `json:"usage"`         // message_delta
	Error        *errorDetail     `json:"error"`         // error
}

type streamDelta struct {
	Type        string `json:"type"` // text_delta, thinking_delta, signature_delta, input_json_delta
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`    // signature_delta
	PartialJSON string `json:"partial_json"` // input_json_delta
	StopReason  string `json:"stop_reason"`  // message_delta
}

// countRequest is the body of POST /v1/messages/count_tokens: the
// fields of a messages request that make its input.
// https://docs.anthropic.com/en/api/messages-count-tokens
type countRequest struct {
	Model        string        `json:"model"`
	System       *systemPrompt `json:"system,omitempty"`
	Messages     []message     `json:"messages"`
	Thinking     *thinking     `json:"thinking,omitempty"`
	OutputConfig *outputConfig `json:"output_config,omitempty"`
	Tools        []tool        `json:"tools,omitempty"`
	ToolChoice   *toolChoice   `json:"tool_choice,omitempty"`
}

// countResponse is count_tokens' answer.
type countResponse struct {
	InputTokens *int `json:"input_tokens"`
}

type errorBody struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
