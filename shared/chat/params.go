package chat

import "encoding/json"

// Params is a chat completion request as the client sent it, in the OpenAI
// wire shape (POST /v1/chat/completions). The HTTP edge decodes the body into
// Params and Gateway.Prepare validates it into a Request. Fields whose type
// the client may get wrong in a way that deserves a precise 400 (content,
// max_tokens, stop, tool_choice) stay raw so that validation can name the
// field. Unknown fields are ignored; every field of OpenAI's chat request
// is here, and each is honoured, mapped to the provider, or refused with a
// 400 naming it (see Gateway.Prepare and Features).
type Params struct {
	Model string `json:"model"`
	// Models are OpenRouter's fallbacks: model ids tried in order after
	// Model (Models[0] leads when Model is empty). Set, they replace the
	// lead model's catalog fallbacks for this request.
	Models              []string           `json:"models"`
	Messages            []ParamsMessage    `json:"messages"`
	Stream              bool               `json:"stream"`
	StreamOptions       *StreamOptions     `json:"stream_options"`
	MaxTokens           json.RawMessage    `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage    `json:"max_completion_tokens"`
	ReasoningEffort     *string            `json:"reasoning_effort"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	Stop                json.RawMessage    `json:"stop"`
	Seed                *int64             `json:"seed"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	User                string             `json:"user"`
	Metadata            map[string]string  `json:"metadata"` // accepted; it tags stored completions, and nothing is stored
	N                   *int               `json:"n"`

	Tools             []ParamsTool          `json:"tools"`
	ToolChoice        json.RawMessage       `json:"tool_choice"`
	ParallelToolCalls *bool                 `json:"parallel_tool_calls"`
	ResponseFormat    *ParamsResponseFormat `json:"response_format"`

	// OpenAI-only fields, forwarded to OpenAI-compatible upstreams.
	ServiceTier      string `json:"service_tier"`
	Verbosity        string `json:"verbosity"`
	PromptCacheKey   string `json:"prompt_cache_key"`
	SafetyIdentifier string `json:"safety_identifier"`
	// VerbosityHint makes Verbosity a hint, not a demand: a provider
	// without it leaves it out instead of refusing the request. It is
	// not on the chat wire; the Responses API sets it for text.verbosity,
	// which clients such as Codex send with every request.
	VerbosityHint bool `json:"-"`

	// ID and Kind name the request's record (credits.Record): the
	// answer's id (chatcmpl-..., resp_...) and the API the request came
	// through (credits.KindChat, KindResponses, ...). The HTTP handler
	// sets them; they are never decoded. Run makes an id (chatcmpl-...)
	// when ID is empty, and takes KindChat when Kind is.
	ID   string `json:"-"`
	Kind string `json:"-"`

	// Fields of the Messages API's translation (see Request), never
	// decoded from a chat request: the HTTP edge that decodes a Messages
	// request sets them.
	TopK             *int              `json:"-"`
	ReasoningBudget  int               `json:"-"`
	ReasoningDisplay string            `json:"-"`
	APIHeaders       map[string]string `json:"-"`

	// Native is the request as the client sent it, set by the edge of an
	// API some providers speak (the Responses API, the Messages API): a
	// candidate whose provider speaks it is sent that, the others these
	// Params (see Native). nil for a chat completion.
	Native *Native `json:"-"`

	// Fields Genway cannot honour. They are decoded only so that a request
	// that uses them is refused with a 400 naming them, instead of being
	// answered as if they were not there (see Gateway.Prepare).
	Functions        json.RawMessage `json:"functions"`
	FunctionCall     json.RawMessage `json:"function_call"`
	Logprobs         *bool           `json:"logprobs"`
	TopLogprobs      *int            `json:"top_logprobs"`
	Store            *bool           `json:"store"`
	Modalities       []string        `json:"modalities"`
	Audio            json.RawMessage `json:"audio"`
	Prediction       json.RawMessage `json:"prediction"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

// StreamOptions are the OpenAI stream options. include_usage needs no
// action: the final chunk of every stream carries usage.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ParamsMessage is one message as sent: content is a JSON string, an
// array of content parts, or null (an assistant message with tool_calls).
type ParamsMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	Name       string           `json:"name"` // forwarded to OpenAI-compatible upstreams only
	ToolCalls  []ParamsToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
	Refusal    *string          `json:"refusal"` // an earlier assistant refusal, sent back as its text
	// Thoughts are an assistant message's signed reasoning (see Thought),
	// kept for its provider kind. Not on the chat wire: the edges whose
	// wire carries them (the Responses API's reasoning items, the
	// Messages API's thinking blocks) set them.
	Thoughts []Thought `json:"-"`
	// CacheControl on a message is a prompt-cache breakpoint at its end
	// (as OpenRouter's and LiteLLM's clients send it, with a string
	// content too): on its last part, or after its tool calls.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// ToolError (a tool message's result is an error) is never decoded
	// from a chat request: the edge of an API that carries it (the
	// Messages API's is_error) sets it. See Message.
	ToolError bool `json:"-"`
}

// ParamsPart is one content part as sent. CacheControl is a prompt-cache
// breakpoint after it: {"type": "ephemeral"} with an optional "ttl" of
// "5m" or "1h" (Anthropic's cache_control, as OpenRouter and LiteLLM take
// it on OpenAI-shaped requests).
type ParamsPart struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	ImageURL     *ParamsImageURL `json:"image_url"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ParamsImageURL is the image_url object of an image part. Detail is
// accepted and ignored.
type ParamsImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

// ParamsTool is one entry of tools: {"type": "function", "function": {...}},
// with an optional prompt-cache breakpoint after it (cache_control, on the
// tool as LiteLLM takes it, or on its function; not both).
type ParamsTool struct {
	Type         string          `json:"type"`
	Function     *ParamsFunction `json:"function"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ParamsFunction is a function tool's definition.
type ParamsFunction struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	Strict       *bool           `json:"strict"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ParamsToolCall is one tool call of an assistant message. Signature and
// SignedBy are the call's provider signature (see ToolCall): not on the
// chat wire, set by the edges whose wire carries them.
type ParamsToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	Signature string `json:"-"`
	SignedBy  string `json:"-"`
}

// ParamsResponseFormat is response_format: {"type": "text"},
// {"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}.
type ParamsResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *ParamsJSONSchema `json:"json_schema"`
}

// ParamsJSONSchema is the json_schema object of a response_format.
type ParamsJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}
