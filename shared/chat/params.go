package chat

import "encoding/json"

// Params is a chat completion request as the client sent it, in the OpenAI
// wire shape (POST /v1/chat/completions). The HTTP edge decodes the body into
// Params and Gateway.Prepare validates it into a Request. Fields whose type
// the client may get wrong in a way that deserves a precise 400 (content,
// max_tokens, stop) stay raw so that validation can name the field.
// Unknown fields are ignored; known fields that would change the answer and
// that Genway cannot honour yet (tools, response_format, n > 1, ...) are
// refused.
type Params struct {
	Model               string          `json:"model"`
	Messages            []ParamsMessage `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	ReasoningEffort     *string         `json:"reasoning_effort"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`

	// Fields Genway cannot honour yet. They are decoded only so that a
	// request that uses them is refused with a 400 naming them, instead of
	// being answered as if they were not there (see Gateway.Prepare).
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	Functions      json.RawMessage `json:"functions"`
	FunctionCall   json.RawMessage `json:"function_call"`
	ResponseFormat json.RawMessage `json:"response_format"`
	N              *int            `json:"n"`
	Logprobs       *bool           `json:"logprobs"`
}

// StreamOptions are the OpenAI stream options. They are accepted and need
// no action: the final chunk of every stream carries usage.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ParamsMessage is one message as sent: content is a JSON string or an
// array of content parts.
type ParamsMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ParamsPart is one content part as sent.
type ParamsPart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	ImageURL *ParamsImageURL `json:"image_url"`
}

// ParamsImageURL is the image_url object of an image part. Detail is
// accepted and ignored.
type ParamsImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}
