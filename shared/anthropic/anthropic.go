// Package anthropic is the chat.Provider for Anthropic's Messages API
// (POST {base}/v1/messages), spoken with plain net/http: a top-level system
// prompt, a required max_tokens, image blocks from bytes (base64 source) and
// URLs (url source), extended thinking (a token budget for older models,
// adaptive thinking with an effort level for newer ones, as the catalog's
// Model.Thinking says), and the streaming SSE event sequence.
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
	"strings"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/sse"
)

// DefaultBaseURL is the Anthropic API's base URL.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

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
	APIKey     string       // sent as x-api-key
	HTTPClient *http.Client // http.DefaultClient if nil; should have no overall Timeout (streams are long)
}

// Provider talks to the Messages API.
type Provider struct {
	name   string
	url    string
	apiKey string
	client *http.Client
}

var _ chat.Provider = (*Provider)(nil)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{name: cfg.Name, apiKey: cfg.APIKey, client: cfg.HTTPClient}
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
	out := &chat.Response{FinishReason: finishReason(m.StopReason), Usage: m.Usage.chat()}
	var content, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			content.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		}
	}
	out.Content, out.Reasoning = content.String(), reasoning.String()
	return out, nil
}

// Stream sends a streaming request and writes to w each text or thinking
// delta as it arrives. It returns when message_stop arrives; a mid-stream
// error event, or a stream that ends before message_stop, is a
// *chat.UpstreamError. If w fails, Stream returns its error unchanged.
// Returning closes the response body, which cancels the upstream request.
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := p.do(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return p.readStream(ctx, resp.Body, w)
}

// readStream parses a Messages API event stream from body.
func (p *Provider) readStream(ctx context.Context, body io.Reader, w chat.Writer) (*chat.Response, error) {
	out := &chat.Response{FinishReason: chat.FinishStop}
	var content, reasoning strings.Builder
	r := sse.NewReader(body)
	batch := chat.NewBatch(w) // deltas read together are written together
	r.OnWait(batch.Flush)
	emit := batch.Emit
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed,
				Message: "stream ended before message_stop", Err: io.ErrUnexpectedEOF}
		}
		if err != nil {
			return nil, chat.TransportError(ctx, p.name, "read stream", err)
		}
		var se streamEvent
		if err := json.Unmarshal([]byte(ev.Data), &se); err != nil {
			return nil, chat.TransportError(ctx, p.name, "decode event "+ev.Name, err)
		}
		typ := se.Type
		if typ == "" {
			typ = ev.Name
		}
		var d chat.Delta
		switch typ {
		case "message_start":
			if se.Message != nil {
				out.Usage = se.Message.Usage.chat()
			}
		case "content_block_start":
			if b := se.ContentBlock; b != nil {
				d = chat.Delta{Content: b.Text, Reasoning: b.Thinking}
			}
		case "content_block_delta":
			if se.Delta != nil {
				switch se.Delta.Type {
				case "text_delta":
					d.Content = se.Delta.Text
				case "thinking_delta":
					d.Reasoning = se.Delta.Thinking
				}
				// signature_delta, input_json_delta, citations_delta: not chat text.
			}
		case "message_delta":
			if se.Delta != nil && se.Delta.StopReason != "" {
				out.FinishReason = finishReason(se.Delta.StopReason)
			}
			if u := se.Usage; u != nil {
				// message_delta usage is cumulative; input_tokens appears
				// only when it changed during the turn.
				if u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens > 0 {
					out.Usage.PromptTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
				}
				out.Usage.CompletionTokens = u.OutputTokens
				out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
			}
		case "message_stop":
			out.Content, out.Reasoning = content.String(), reasoning.String()
			return out, nil
		case "error":
			return nil, p.eventError(se.Error)
		}
		// ping, content_block_stop and unknown events carry no chat data.
		if d.Content == "" && d.Reasoning == "" {
			continue
		}
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		if err := emit(d); err != nil {
			return nil, err
		}
	}
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
	hr.Header.Set("x-api-key", p.apiKey)
	hr.Header.Set("anthropic-version", APIVersion)
	hr.Header.Set("content-type", "application/json")
	if stream {
		hr.Header.Set("accept", "text/event-stream")
	} else {
		hr.Header.Set("accept", "application/json")
	}
	resp, err := p.client.Do(hr)
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

// statusError maps a non-2xx response to an UpstreamError.
func (p *Provider) statusError(resp *http.Response, body []byte) error {
	var eb errorBody
	_ = json.Unmarshal(body, &eb)
	msg := eb.Error.Message
	e := &chat.UpstreamError{Provider: p.name, Status: resp.StatusCode, Message: msg,
		Err: fmt.Errorf("status %d: %s: %s", resp.StatusCode, eb.Error.Type, truncate(string(body), 512))}
	e.Kind = chat.StatusKind(resp.StatusCode)
	switch e.Kind {
	case chat.UpstreamBadRequest:
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	case chat.UpstreamRateLimited:
		e.RetryAfter = chat.RetryAfter(resp.Header, time.Now())
	}
	return e
}

// eventError maps an error object (a mid-stream error event, or an error
// body with a 2xx status) to an UpstreamError by its type.
func (p *Provider) eventError(ed *errorDetail) error {
	if ed == nil {
		ed = &errorDetail{Type: "api_error"}
	}
	e := &chat.UpstreamError{Provider: p.name, Message: ed.Message, Err: fmt.Errorf("error event: %s: %s", ed.Type, ed.Message)}
	switch ed.Type {
	case "invalid_request_error", "not_found_error", "request_too_large":
		e.Kind, e.Status = chat.UpstreamBadRequest, http.StatusBadRequest
	case "rate_limit_error":
		e.Kind, e.Status = chat.UpstreamRateLimited, http.StatusTooManyRequests
	case "overloaded_error":
		e.Kind, e.Status = chat.UpstreamUnavailable, 529
	case "timeout_error":
		e.Kind, e.Status = chat.UpstreamTimeout, http.StatusGatewayTimeout
	default: // api_error, authentication_error, permission_error, unknown
		e.Kind = chat.UpstreamFailed
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// finishReason maps a stop_reason to an OpenAI finish_reason.
func finishReason(s string) string {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return chat.FinishLength
	case "refusal":
		return chat.FinishContentFilter
	default: // end_turn, stop_sequence, pause_turn, tool_use, none yet
		return chat.FinishStop
	}
}

// buildRequest translates req to a Messages API body. It fails only for
// requests the API cannot express (no user or assistant message).
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
		StopSequences: req.Stop,
		Stream:        stream,
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
		if model.MaxTokens > 0 && model.MaxTokens < body.MaxTokens {
			body.MaxTokens = model.MaxTokens
		}
	}
	var system []string
	for _, m := range req.Messages {
		if m.Role == chat.RoleSystem {
			if t := m.Text(); t != "" {
				system = append(system, t)
			}
			continue
		}
		blocks := contentBlocks(m.Parts)
		if len(blocks) == 0 {
			continue // the API rejects empty content
		}
		role := "user"
		if m.Role == chat.RoleAssistant {
			role = "assistant"
		}
		// Turns alternate: merge consecutive messages of one role.
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == role {
			body.Messages[n-1].Content = append(body.Messages[n-1].Content, blocks...)
			continue
		}
		body.Messages = append(body.Messages, message{Role: role, Content: blocks})
	}
	if len(body.Messages) == 0 {
		return nil, errors.New("at least one user or assistant message with content is required")
	}
	body.System = strings.Join(system, "\n\n")

	if req.ReasoningEffort != "" {
		switch model.Thinking {
		case catalog.ThinkingBudget:
			budget, ok := thinkingBudgets[req.ReasoningEffort]
			if !ok {
				budget = thinkingBudgets["medium"]
			}
			body.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
			// max_tokens counts thinking too and must exceed the budget:
			// a max_tokens at or below the budget is room for the answer
			// on top of it.
			if body.MaxTokens <= budget {
				body.MaxTokens += budget
			}
			if model.MaxTokens > budget && body.MaxTokens > model.MaxTokens {
				body.MaxTokens = model.MaxTokens
			}
			body.Temperature, body.TopP = nil, nil // not allowed with thinking
		case catalog.ThinkingAdaptive:
			body.Thinking = &thinking{Type: "adaptive"}
			body.OutputConfig = &outputConfig{Effort: req.ReasoningEffort}
			body.Temperature, body.TopP = nil, nil
		}
	}
	return body, nil
}

// contentBlocks translates message parts; empty text parts are dropped.
func contentBlocks(parts []chat.Part) []block {
	var out []block
	for _, p := range parts {
		switch {
		case p.Image == nil:
			if p.Text != "" {
				out = append(out, block{Type: "text", Text: p.Text})
			}
		case len(p.Image.Data) > 0:
			out = append(out, block{Type: "image", Source: &imageSource{
				Type: "base64", MediaType: p.Image.MediaType, Data: base64.StdEncoding.EncodeToString(p.Image.Data)}})
		case p.Image.URL != "":
			out = append(out, block{Type: "image", Source: &imageSource{Type: "url", URL: p.Image.URL}})
		}
	}
	return out
}
