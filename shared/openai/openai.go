// Package openai is the chat provider for the OpenAI Chat Completions API
// (POST {base}/chat/completions) and for every server that speaks it: Groq,
// Together, DeepSeek, Mistral, OpenRouter, Ollama, vLLM, each a Provider
// with its own name and base URL.
//
// It uses plain net/http. Requests send max_completion_tokens, send
// reasoning_effort only to models whose catalog thinking style is "effort",
// and ask streams for stream_options.include_usage so that usage is the
// upstream's own. Image parts go out as image_url: URLs as given, bytes as
// data URIs.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/sse"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// maxBody caps a non-streamed response body and a streamed event.
const maxBody = 16 << 20

// Config configures a Provider.
type Config struct {
	Name       string       // the catalog provider name, used in errors; default "openai"
	BaseURL    string       // up to and including /v1; default DefaultBaseURL
	APIKey     string       // sent as a bearer token if set (Ollama needs none)
	HTTPClient *http.Client // default http.DefaultClient
}

// Provider talks to one OpenAI-compatible server. It is safe for concurrent
// use.
type Provider struct {
	name     string
	endpoint string
	key      string
	client   *http.Client
	readers  sync.Pool // of *sse.Reader, reused across streams
}

var _ chat.Provider = (*Provider)(nil)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{name: cfg.Name, key: cfg.APIKey, client: cfg.HTTPClient}
	if p.name == "" {
		p.name = "openai"
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	p.endpoint = base + "/chat/completions"
	if p.client == nil {
		p.client = http.DefaultClient
	}
	return p
}

// Complete sends a non-streamed request.
func (p *Provider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	resp, err := p.do(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "read response", err)
	}
	var wr wireResponse
	if err := json.Unmarshal(b, &wr); err != nil {
		return nil, p.garbage(fmt.Errorf("decode response: %w", err))
	}
	if wr.Error != nil {
		return nil, p.garbage(fmt.Errorf("error in a 200 response: %s", wr.Error.Message))
	}
	if len(wr.Choices) == 0 {
		return nil, p.garbage(errors.New("response has no choices"))
	}
	c := wr.Choices[0]
	out := &chat.Response{
		Content:      c.Message.Content,
		Reasoning:    c.Message.ReasoningContent + c.Message.Reasoning,
		FinishReason: finishReason(c.FinishReason),
	}
	for _, tc := range c.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if out.Content == "" {
		out.Content = c.Message.Refusal
	}
	if wr.Usage != nil {
		out.Usage = wr.Usage.usage()
	}
	return out, nil
}

// Stream sends a streamed request and writes each delta to w as its event
// arrives; deltas that arrive in one read are flushed together (see
// chat.Batch).
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := p.do(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sr, _ := p.readers.Get().(*sse.Reader)
	if sr == nil {
		sr = sse.NewReaderSize(resp.Body, maxBody)
	} else {
		sr.Reset(resp.Body)
	}
	batch := chat.NewBatch(w) // deltas read together are written together
	sr.OnWait(batch.Flush)
	out, err := decodeEvents(sr, batch.Emit)
	sr.Reset(nil) // no reference to the body from the pool
	p.readers.Put(sr)
	if err != nil {
		var ue *chat.UpstreamError
		var ee *emitError
		switch {
		case errors.As(err, &ee):
			return nil, ee.err
		case errors.As(err, &ue):
			ue.Provider = p.name
			return nil, ue
		}
		return nil, chat.TransportError(ctx, p.name, "read stream", err)
	}
	return out, nil
}

// do sends req and returns a 200 response; any other status is an
// *chat.UpstreamError.
func (p *Provider) do(ctx context.Context, req *chat.Request, stream bool) (*http.Response, error) {
	body, err := encodeRequest(req, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	if p.key != "" {
		hr.Header.Set("Authorization", "Bearer "+p.key)
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "send request", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, statusError(p.name, resp, b)
	}
	return resp, nil
}

func (p *Provider) garbage(err error) error {
	return &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Status: http.StatusOK, Message: "malformed response", Err: err}
}

// statusError maps a non-200 upstream response to an *chat.UpstreamError.
func statusError(provider string, resp *http.Response, body []byte) *chat.UpstreamError {
	msg := errorMessage(body)
	e := &chat.UpstreamError{Provider: provider, Status: resp.StatusCode, Message: msg,
		Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)}
	e.Kind = chat.StatusKind(resp.StatusCode)
	switch e.Kind {
	case chat.UpstreamBadRequest:
		if e.Message == "" {
			e.Message = fmt.Sprintf("The %s provider rejected the request (HTTP %d).", provider, resp.StatusCode)
		}
	case chat.UpstreamRateLimited:
		e.RetryAfter = chat.RetryAfter(resp.Header, time.Now())
	}
	return e
}

// errorMessage extracts the message of an error body: OpenAI's
// {"error": {"message": ...}}, or the {"error": "..."}, {"message": ...} and
// {"detail": ...} shapes of compatible servers.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	var s string
	switch {
	case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
		return obj.Message
	case json.Unmarshal(v.Error, &s) == nil && s != "":
		return s
	case v.Message != "":
		return v.Message
	case json.Unmarshal(v.Detail, &s) == nil && s != "":
		return s
	}
	return ""
}

// finishReason maps the upstream's finish reason to ours.
func finishReason(s string) string {
	switch s {
	case "length":
		return chat.FinishLength
	case "content_filter":
		return chat.FinishContentFilter
	case "tool_calls", "function_call":
		return chat.FinishToolCalls
	default: // stop, eos...
		return chat.FinishStop
	}
}

// emitError marks an error returned by emit, so Stream returns it as is.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }

// decodeStream reads an OpenAI chat completion chunk stream from r, calling
// emit for each non-empty delta. It returns the finish reason and usage. A
// stream that ends before [DONE] and before any finish_reason, or that
// carries an error event or a malformed chunk, is an *chat.UpstreamError
// (Provider unset); a read failure is returned as it is; an emit failure is
// an *emitError.
func decodeStream(r io.Reader, emit func(chat.Delta) error) (*chat.Response, error) {
	return decodeEvents(sse.NewReaderSize(r, maxBody), emit)
}

// decodeEvents is decodeStream on the events of sr.
func decodeEvents(sr *sse.Reader, emit func(chat.Delta) error) (*chat.Response, error) {
	out := &chat.Response{}
	var c wireChunk
	for {
		name, raw, err := sr.NextBytes()
		if err == io.EOF {
			if out.FinishReason == "" {
				return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: http.StatusOK,
					Message: "stream ended early", Err: io.ErrUnexpectedEOF}
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		data := bytes.TrimSpace(raw)
		if string(data) == "[DONE]" {
			if out.FinishReason == "" {
				out.FinishReason = chat.FinishStop
			}
			return out, nil
		}
		if name == "error" {
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: http.StatusOK,
				Message: "error event", Err: fmt.Errorf("error event: %s", errorMessageOr(string(data)))}
		}
		// Reuse the choices' array, zeroed (Unmarshal leaves absent
		// fields as they are), and the first choice's tool calls' array,
		// emptied: a tool call streams one piece per chunk.
		var calls []wireToolCall
		if cap(c.Choices) > 0 {
			calls = c.Choices[:1][0].Delta.ToolCalls
			clear(calls[:cap(calls)])
			calls = calls[:0]
		}
		clear(c.Choices[:cap(c.Choices)])
		c.Choices, c.Usage, c.Error = c.Choices[:0], nil, nil
		if cap(c.Choices) > 0 {
			c.Choices[:1][0].Delta.ToolCalls = calls
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: http.StatusOK,
				Message: "malformed stream chunk", Err: fmt.Errorf("decode chunk: %w", err)}
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: http.StatusOK,
				Message: "error in stream", Err: fmt.Errorf("error in stream: %s", errorMessageOr(string(data)))}
		}
		if c.Usage != nil {
			out.Usage = c.Usage.usage()
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // n > 1 is not offered; keep the first choice
			}
			d := chat.Delta{Content: ch.Delta.Content + ch.Delta.Refusal, Reasoning: ch.Delta.ReasoningContent + ch.Delta.Reasoning}
			if d.Content != "" || d.Reasoning != "" {
				if err := emit(d); err != nil {
					return nil, &emitError{err}
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				td := &chat.ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
				if err := emit(chat.Delta{ToolCall: td}); err != nil {
					return nil, &emitError{err}
				}
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				out.FinishReason = finishReason(*ch.FinishReason)
			}
		}
	}
}

func errorMessageOr(data string) string {
	if m := errorMessage([]byte(data)); m != "" {
		return m
	}
	if len(data) > 200 {
		data = data[:200]
	}
	return data
}

// wireResponse is a non-streamed response body.
type wireResponse struct {
	Choices []wireResponseChoice `json:"choices"`
	Usage   *wireUsage           `json:"usage"`
	Error   *wireErrorBody       `json:"error"`
}

// wireResponseChoice is one choice of a non-streamed response.
type wireResponseChoice struct {
	Message      wireMessageOut `json:"message"`
	FinishReason string         `json:"finish_reason"`
}

type wireMessageOut struct {
	Content          string         `json:"content"`
	ToolCalls        []wireToolCall `json:"tool_calls"`
	Refusal          string         `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content"` // DeepSeek, vLLM
	Reasoning        string         `json:"reasoning"`         // OpenRouter, newer vLLM, Ollama
}

type wireErrorBody struct {
	Message string `json:"message"`
}

// wireChunk is one streamed chunk.
type wireChunk struct {
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// wireChoice is one choice of a streamed chunk.
type wireChoice struct {
	Index        int            `json:"index"`
	Delta        wireMessageOut `json:"delta"`
	FinishReason *string        `json:"finish_reason"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *wireUsage) usage() chat.Usage {
	t := u.TotalTokens
	if t == 0 {
		t = u.PromptTokens + u.CompletionTokens
	}
	return chat.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: t}
}

// Features reports that an OpenAI-compatible upstream takes every field:
// the request goes out as the client sent it, and a server that lacks a
// field answers with its own 400.
func (p *Provider) Features() chat.Features { return chat.AllFeatures }
