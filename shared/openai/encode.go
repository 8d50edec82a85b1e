package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// wireRequest is the request body of POST /chat/completions.
type wireRequest struct {
	Model               string         `json:"model"`
	Messages            []wireMessage  `json:"messages"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string         `json:"reasoning_effort,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage's Content is a string, or []wirePart when there are images.
type wireMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
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
// as given, bytes as base64 data URIs), max_completion_tokens,
// reasoning_effort (only for models whose catalog thinking style is
// "effort"), temperature, top_p, stop, seed, and for a stream
// "stream":true with stream_options.include_usage; unset and zero optional
// fields are left out.
func wireRequestFor(req *chat.Request, stream bool) *wireRequest {
	w := &wireRequest{
		Model:               req.Model.Upstream,
		Messages:            make([]wireMessage, len(req.Messages)),
		MaxCompletionTokens: req.MaxTokens,
		Temperature:         req.Temperature,
		TopP:                req.TopP,
		Stop:                req.Stop,
		Seed:                req.Seed,
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
				u = "data:" + pt.Image.MediaType + ";base64," + base64.StdEncoding.EncodeToString(pt.Image.Data)
			}
			parts[j] = wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: u}}
		}
		w.Messages[i].Content = parts
	}
	return w
}

// encodeRequest returns the JSON body for req. A NaN or infinite
// temperature or top_p has no JSON encoding: an error, and nothing is sent.
func encodeRequest(req *chat.Request, stream bool) ([]byte, error) {
	b, err := json.Marshal(wireRequestFor(req, stream))
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}
