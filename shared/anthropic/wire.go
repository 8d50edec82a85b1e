package anthropic

import "github.com/genway/genway/shared/chat"

// The Messages API wire format, as documented at
// https://docs.anthropic.com/en/api/messages and
// https://docs.anthropic.com/en/docs/build-with-claude/streaming.

type messagesRequest struct {
	Model         string        `json:"model"`
	MaxTokens     int           `json:"max_tokens"`
	System        string        `json:"system,omitempty"`
	Messages      []message     `json:"messages"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
	Thinking      *thinking     `json:"thinking,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type block struct {
	Type   string       `json:"type"`
	Text   string       `json:"text,omitempty"`
	Source *imageSource `json:"source,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// thinking is {"type":"enabled","budget_tokens":N} or {"type":"adaptive"}.
type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
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
	Type     string `json:"type"`
	Text     string `json:"text"`
	Thinking string `json:"thinking"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// chat returns u as OpenAI-style usage: cached input counts as prompt.
func (u usage) chat() chat.Usage {
	prompt := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	return chat.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
}

// streamEvent is the data of any streaming event; fields by event type.
type streamEvent struct {
	Type         string           `json:"type"`
	Message      *messageResponse `json:"message"`       // message_start
	ContentBlock *contentBlock    `json:"content_block"` // content_block_start
	Delta        *streamDelta     `json:"delta"`         // content_block_delta, message_delta
	Usage        *usage           `json:"usage"`         // message_delta
	Error        *errorDetail     `json:"error"`         // error
}

type streamDelta struct {
	Type       string `json:"type"` // text_delta, thinking_delta, signature_delta, input_json_delta
	Text       string `json:"text"`
	Thinking   string `json:"thinking"`
	StopReason string `json:"stop_reason"` // message_delta
}

type errorBody struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
