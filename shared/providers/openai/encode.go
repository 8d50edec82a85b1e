package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// wireRequest is the request body of POST /chat/completions.
type wireRequest struct {
	Model               string             `json:"model"`
	Messages            []wireMessage      `json:"messages"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                []string           `json:"stop,omitempty"`
	Seed                *int64             `json:"seed,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *streamOptions     `json:"stream_options,omitempty"`
	PresencePenalty     *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty,omitempty"`
	LogitBias           map[string]float64 `json:"logit_bias,omitempty"`
	User                string             `json:"user,omitempty"`
	Tools               []wireTool         `json:"tools,omitempty"`
	ToolChoice          any                `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *wireFormat        `json:"response_format,omitempty"`
	ServiceTier         string             `json:"service_tier,omitempty"`
	Verbosity           string             `json:"verbosity,omitempty"`
	PromptCacheKey      string             `json:"prompt_cache_key,omitempty"`
	SafetyIdentifier    string             `json:"safety_identifier,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"` // function
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type wireNamedChoice struct {
	Type     string `json:"type"` // function
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type wireFormat struct {
	Type       string          `json:"type"`
	JSONSchema *wireJSONSchema `json:"json_schema,omitempty"`
}

type wireJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict,omitempty"`
}

// wireToolCall is a tool call, in a request's assistant message or in a
// response (streamed pieces have an index, 0 when absent, and may leave
// the rest empty; a request's calls have none).
type wireToolCall struct {
	Index    int    `json:"index,omitzero"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage's Content is a string, []wirePart when there are images, or
// nil (an assistant message with only tool calls).
type wireMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wirePart struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

// wireRequestFor is the body of POST /chat/completions for req: model,
// messages (a string content, or parts when the message has an image: URLs
// as given, bytes as base64 data URIs; assistant tool_calls and tool
// messages' tool_call_id as they came), max_completion_tokens,
// reasoning_effort (only for models whose catalog thinking style is
// "effort"), the sampling fields, tools, tool_choice, parallel_tool_calls,
// response_format, user and the OpenAI-only fields as the client sent
// them, and for a stream "stream":true with stream_options.include_usage;
// unset and zero optional fields are left out.
func wireRequestFor(req *chat.Request, stream bool) *wireRequest {
	w := &wireRequest{
		Model:               req.Model.Upstream,
		Messages:            make([]wireMessage, len(req.Messages)),
		MaxCompletionTokens: req.MaxTokens,
		Temperature:         req.Temperature,
		TopP:                req.TopP,
		Stop:                req.Stop,
		Seed:                req.Seed,
		PresencePenalty:     req.PresencePenalty,
		FrequencyPenalty:    req.FrequencyPenalty,
		LogitBias:           req.LogitBias,
		User:                req.User,
		ParallelToolCalls:   req.ParallelToolCalls,
		ServiceTier:         req.ServiceTier,
		Verbosity:           req.Verbosity,
		PromptCacheKey:      req.PromptCacheKey,
		SafetyIdentifier:    req.SafetyIdentifier,
	}
	for _, t := range req.Tools {
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	switch req.ToolChoice.Mode {
	case chat.ToolFunction:
		var c wireNamedChoice
		c.Type, c.Function.Name = "function", req.ToolChoice.Name
		w.ToolChoice = c
	case "":
	default:
		w.ToolChoice = req.ToolChoice.Mode
	}
	if rf := req.ResponseFormat; rf != nil {
		w.ResponseFormat = &wireFormat{Type: rf.Type}
		if rf.Type == chat.FormatJSONSchema {
			w.ResponseFormat.JSONSchema = &wireJSONSchema{Name: rf.Name, Description: rf.Description, Schema: rf.Schema, Strict: rf.Strict}
		}
	}
	if req.Model.Thinking == catalog.ThinkingEffort {
		w.ReasoningEffort = req.ReasoningEffort
	}
	if stream {
		w.Stream = true
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	for i, m := range req.Messages {
		w.Messages[i].Role = m.Role
		w.Messages[i].ToolCallID, w.Messages[i].Name = m.ToolCallID, m.Name
		for _, tc := range m.ToolCalls {
			wc := wireToolCall{ID: tc.ID, Type: "function"}
			wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
			w.Messages[i].ToolCalls = append(w.Messages[i].ToolCalls, wc)
		}
		if len(m.ToolCalls) > 0 && len(m.Parts) == 0 {
			continue // content null
		}
		images := false
		for _, p := range m.Parts {
			images = images || p.Image != nil
		}
		if !images {
			w.Messages[i].Content = m.Text()
			continue
		}
		parts := make([]wirePart, len(m.Parts))
		for j, pt := range m.Parts {
			if pt.Image == nil {
				t := pt.Text
				parts[j] = wirePart{Type: "text", Text: &t}
				continue
			}
			u := pt.Image.URL
			if pt.Image.Data != nil {
				u = dataURI(pt.Image.MediaType, pt.Image.Data)
			}
			parts[j] = wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: u}}
		}
		w.Messages[i].Content = parts
	}
	return w
}

// dataURI returns the data URI of an image's bytes, made in one
// allocation of its length: an image may be megabytes, and a URI built by
// concatenation costs its base64 twice.
func dataURI(mediaType string, data []byte) string {
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(mediaType) + base64.StdEncoding.EncodedLen(len(data)))
	b.WriteString("data:")
	b.WriteString(mediaType)
	b.WriteString(";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	enc.Write(data) // a strings.Builder never fails
	enc.Close()
	return b.String()
}

// encodeRequest returns the JSON body for req. A NaN or infinite
// temperature or top_p has no JSON encoding: an error, and nothing is sent.
func encodeRequest(req *chat.Request, stream bool) ([]byte, error) {
	w := wireRequestFor(req, stream)
	if b, ok := w.appendJSON(make([]byte, 0, w.sizeHint())); ok {
		return b, nil
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}
