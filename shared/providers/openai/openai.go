// Package openai is the chat provider for the OpenAI Chat Completions API
// (POST {base}/chat/completions) and for every server that speaks it: Groq,
// Together, DeepSeek, Mistral, OpenRouter, Ollama, vLLM, each a Provider
// with its own name and base URL; for OpenAI itself, the native
// provider of the Responses API (POST {base}/responses, see
// NativeStream); and the speech provider for OpenAI's text to speech
// (POST {base}/audio/speech, see Speak).
//
// It uses plain net/http. Requests send max_completion_tokens, send
// reasoning_effort only to models whose catalog thinking style is "effort",
// and ask streams for stream_options.include_usage so that usage is the
// upstream's own. Image parts go out as image_url: URLs as given, bytes as
// data URIs. Usage keeps the answer's details (cached input, cache
// writes, reasoning tokens; see wireUsage) and the service tier it was
// served at (service_tier, where the upstream says).
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

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// maxBody caps a non-streamed response body and a streamed event.
const maxBody = 16 << 20

// Config configures a Provider.
type Config struct {
	Name    string // the catalog provider name, used in errors; default "openai"
	BaseURL string // up to and including /v1; default DefaultBaseURL
	// APIKey is sent as a bearer token if set (Ollama needs none): one
	// key, or a pool of keys separated by commas (route.NewKeySet), of
	// which each call sends the one its ctx names (route.WithKey).
	APIKey     string
	HTTPClient *http.Client // default http.DefaultClient
	// Downloads fetches the images at the links an image model answers
	// (NewImages; they may name any host): it should refuse internal
	// addresses, as upstreams.NewDownloadClient's does. nil: HTTPClient.
	Downloads *http.Client
	// Native lists the client APIs the server speaks itself
	// (catalog.Provider.Native): with chat.APIResponses, Responses API
	// requests go to POST {base}/responses as the client sent them (see
	// NativeStream). nil: every request is translated to chat
	// completions.
	Native []string
}

// Provider talks to one OpenAI-compatible server. It is safe for concurrent
// use.
type Provider struct {
	name      string
	endpoint  string // chat completions
	responses string // the Responses API, for native requests
	native    []string
	speech    string // audio/speech
	keys      route.KeySet
	client    *http.Client
	readers   sync.Pool // of *sse.Reader, reused across streams
}

var (
	_ chat.Provider = (*Provider)(nil)
	_ route.Keyed   = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	cfg, base := cfg.withDefaults()
	return &Provider{name: cfg.Name, keys: route.NewKeySet(cfg.APIKey), client: cfg.HTTPClient,
		endpoint: base + "/chat/completions", responses: base + "/responses", native: cfg.Native, speech: base + "/audio/speech"}
}

// withDefaults returns cfg with its defaults applied (Name "openai",
// http.DefaultClient), and its base URL (DefaultBaseURL if none) without
// a trailing slash.
func (cfg Config) withDefaults() (Config, string) {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	return cfg, base
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
	if !scanResponse(b, &wr) {
		wr = wireResponse{}
		if err := json.Unmarshal(b, &wr); err != nil {
			return nil, p.garbage(fmt.Errorf("decode response: %w", err))
		}
	}
	if isError(wr.Error) {
		return nil, p.inband(wr.Error, wr.ErrorType)
	}
	if len(wr.Choices) == 0 {
		return nil, p.garbage(errors.New("response has no choices"))
	}
	c := wr.Choices[0]
	if c.FinishReason == "error" {
		return nil, p.inband(nil, "")
	}
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
	out.ServiceTier = wr.ServiceTier
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
			if ue.Kind == chat.UpstreamBadRequest && ue.Message == "" {
				ue.Message = fmt.Sprintf("The %s provider rejected the request.", p.name)
			}
			return nil, ue
		}
		return nil, chat.TransportError(ctx, p.name, "read stream", err)
	}
	return out, nil
}

// do sends req to chat completions and returns a 200 response; any
// other status is an *chat.UpstreamError.
func (p *Provider) do(ctx context.Context, req *chat.Request, stream bool) (*http.Response, error) {
	body, err := encodeRequest(req, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	accept := jsonHeader
	if stream {
		accept = streamHeader
	}
	resp, _, err := p.post(ctx, p.endpoint, accept, body)
	return resp, err
}

// Header values of the upstream requests, shared by all of them (none
// is made per request): net/http only reads a request's headers, and a
// slice of capacity 1 is copied, not changed, by an append.
var (
	jsonHeader   = []string{"application/json"}
	streamHeader = []string{"text/event-stream"}
	audioHeader  = []string{"application/octet-stream"}
)

// post sends the JSON body to url, with the key ctx names (route.WithKey)
// and accept (one of the shared header values) as its Accept header, and
// returns a 200 response; any other status is an *chat.UpstreamError,
// returned with the error body it was read from.
func (p *Provider) post(ctx context.Context, url string, accept []string, body []byte) (*http.Response, []byte, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	hr.Header["Content-Type"] = jsonHeader
	hr.Header["Accept"] = accept
	if bearer := p.keys.BearerHeader(ctx); bearer != nil {
		hr.Header["Authorization"] = bearer
	}
	resp, err := chat.Send(p.client, hr)
	if err != nil {
		return nil, nil, chat.TransportError(ctx, p.name, "send request", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg, status := errorMessage(b), resp.StatusCode
		if status == http.StatusForbidden && flagged(b) {
			// OpenRouter's moderation refused the client's input: the
			// request's fault (400), not a key to rest.
			status = http.StatusBadRequest
		}
		return nil, b, chat.StatusError(p.name, status, resp.Header, msg, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg))
	}
	return resp, nil, nil
}

func (p *Provider) garbage(err error) error {
	return &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonMalformed, Message: "malformed response", Err: err}
}

// inband is the UpstreamError of an error object inside a 200 answer.
func (p *Provider) inband(raw json.RawMessage, errorType string) *chat.UpstreamError {
	e := inbandError(raw, errorType)
	e.Provider = p.name
	if e.Kind == chat.UpstreamBadRequest && e.Message == "" {
		e.Message = fmt.Sprintf("The %s provider rejected the request.", p.name)
	}
	return e
}

// isError reports whether raw is an error field that is set.
func isError(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null" && string(raw) != `""` && string(raw) != "{}"
}

// inbandError maps an error object inside a 200 answer (a stream's error
// event, an error in a 200 body; raw nil for a bare finish_reason
// "error") to an *chat.UpstreamError (Provider unset) with the status it
// stands for (see inbandStatus). errorType is Hugging Face TGI's
// top-level error_type, "" if none.
func inbandError(raw json.RawMessage, errorType string) *chat.UpstreamError {
	var we wireError
	if json.Unmarshal(raw, &we) != nil {
		_ = json.Unmarshal(raw, &we.Message) // a bare string (TGI)
	}
	if we.Type == "" {
		we.Type = errorType
	}
	status := inbandStatus(we.Code, we.Type)
	msg := we.Message
	if raw == nil {
		msg = "the upstream ended the answer with finish_reason error"
	}
	e := chat.StatusError("", status, nil, msg,
		fmt.Errorf("error in a 200 answer: code %s, type %q: %s", bytes.TrimSpace(we.Code), we.Type, msg))
	e.Message = msg // the caller names the provider in a message of its own
	return e
}

// inbandStatus is the HTTP status an in-band error stands for: its code
// when that is a number from 400 to 599 (OpenRouter, vLLM, SGLang send the
// status there), else its code's or its type's name (OpenAI's in-stream
// errors have a type such as server_error and a code that is null or a
// name); 502 for one that names nothing known (the upstream failed).
func inbandStatus(code json.RawMessage, typ string) int {
	var n int
	if json.Unmarshal(code, &n) == nil && n >= 400 && n <= 599 {
		return n
	}
	var name string
	_ = json.Unmarshal(code, &name)
	if s, ok := inbandStatuses[name]; ok {
		return s
	}
	if s, ok := inbandStatuses[typ]; ok {
		return s
	}
	return http.StatusBadGateway
}

// inbandStatuses maps the error codes and types OpenAI-compatible servers
// use (OpenAI, OpenRouter, Groq, vLLM, TGI, Anthropic's through
// compatible proxies) to the HTTP status each stands for.
var inbandStatuses = map[string]int{
	"invalid_request_error": 400, "BadRequestError": 400, "context_length_exceeded": 400, "validation": 400,
	"invalid_api_key": 401, "authentication_error": 401, "AuthenticationError": 401,
	"permission_error": 403, "permission_denied": 403, "PermissionDeniedError": 403,
	"model_not_found": 404, "not_found_error": 404, "NotFoundError": 404,
	"rate_limit_exceeded": 429, "rate_limit_error": 429, "insufficient_quota": 429, "requests": 429, "tokens": 429, "RateLimitError": 429,
	"server_error": 500, "internal_error": 500, "internal_server_error": 500, "api_error": 500, "InternalServerError": 500, "generation": 500,
	"overloaded": 503, "server_overloaded": 503, "service_unavailable": 503, "ServiceUnavailableError": 503, "overloaded_error": 529,
	"timeout": 504, "timeout_error": 504,
}

// flagged reports whether an error body is OpenRouter's moderation
// refusal: a 403 whose error.metadata names the flagged input
// (https://openrouter.ai/docs/api/reference/errors-and-debugging).
func flagged(body []byte) bool {
	var v struct {
		Error struct {
			Metadata struct {
				Reasons      []string `json:"reasons"`
				FlaggedInput *string  `json:"flagged_input"`
			} `json:"metadata"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &v) == nil && (v.Error.Metadata.FlaggedInput != nil || len(v.Error.Metadata.Reasons) > 0)
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
			if out.FinishReason != "" {
				return out, nil
			}
			// Some servers write an error as raw JSON, not as an event.
			var stray struct {
				Error     json.RawMessage `json:"error"`
				ErrorType string          `json:"error_type"`
			}
			if json.Unmarshal(sr.Stray(), &stray) == nil && isError(stray.Error) {
				return nil, inbandError(stray.Error, stray.ErrorType)
			}
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
				Message: "stream ended early", Err: io.ErrUnexpectedEOF}
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
		if name == "error" { // an SSE error event: {"error": {...}}, or the error object itself
			var ev struct {
				Error     json.RawMessage `json:"error"`
				ErrorType string          `json:"error_type"`
			}
			if json.Unmarshal(data, &ev) != nil || !isError(ev.Error) {
				ev.Error = data
			}
			return nil, inbandError(ev.Error, ev.ErrorType)
		}
		c.reset()
		if err := decodeChunk(data, &c); err != nil {
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Reason: chat.ReasonMalformed,
				Message: "malformed stream chunk", Err: fmt.Errorf("decode chunk: %w", err)}
		}
		if isError(c.Error) { // OpenRouter's mid-stream error has choices with finish_reason "error" too
			return nil, inbandError(c.Error, c.ErrorType)
		}
		if c.Usage != nil {
			out.Usage = c.Usage.usage()
		}
		if c.ServiceTier != "" {
			out.ServiceTier = c.ServiceTier
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
			if ch.FinishReason != nil && *ch.FinishReason == "error" {
				return nil, inbandError(nil, "")
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				out.FinishReason = finishReason(*ch.FinishReason)
			}
		}
	}
}

// wireResponse is a non-streamed response body.
type wireResponse struct {
	Choices     []wireResponseChoice `json:"choices"`
	Usage       *wireUsage           `json:"usage"`
	ServiceTier string               `json:"service_tier"` // the tier OpenAI served at
	Error       json.RawMessage      `json:"error"`
	ErrorType   string               `json:"error_type"`
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

// wireError is an error object: OpenAI's {"message", "type", "code"}
// (code a name or null), OpenRouter's and vLLM's (code the HTTP status).
type wireError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// wireChunk is one streamed chunk.
type wireChunk struct {
	Choices     []wireChoice    `json:"choices"`
	Usage       *wireUsage      `json:"usage"`
	ServiceTier string          `json:"service_tier"` // on every chunk of OpenAI's
	Error       json.RawMessage `json:"error"`
	ErrorType   string          `json:"error_type"` // TGI's, beside a string error
}

// reset makes c ready for the next chunk: empty, keeping the choices'
// array, zeroed (json.Unmarshal leaves absent fields as they are), and the
// first choice's tool calls' array, emptied (a tool call streams one piece
// per chunk).
func (c *wireChunk) reset() {
	var calls []wireToolCall
	if cap(c.Choices) > 0 {
		calls = c.Choices[:1][0].Delta.ToolCalls
		clear(calls[:cap(calls)])
		calls = calls[:0]
	}
	clear(c.Choices[:cap(c.Choices)])
	c.Choices, c.Usage, c.Error, c.ErrorType, c.ServiceTier = c.Choices[:0], nil, nil, "", ""
	if cap(c.Choices) > 0 {
		c.Choices[:1][0].Delta.ToolCalls = calls
	}
}

// wireChoice is one choice of a streamed chunk.
type wireChoice struct {
	Index        int            `json:"index"`
	Delta        wireMessageOut `json:"delta"`
	FinishReason *string        `json:"finish_reason"`
}

// wireUsage is the usage object of OpenAI and of the servers that copy
// it. prompt_tokens is the whole input and completion_tokens the whole
// output; the details are parts of them: OpenAI's cached input and
// reasoning tokens, OpenRouter's cache writes (an Anthropic model behind
// it), and DeepSeek's cache hits, which it reports in a field of its own
// (https://api-docs.deepseek.com/guides/kv_cache).
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"` // OpenRouter
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"` // DeepSeek
}

func (u *wireUsage) usage() chat.Usage {
	t := u.TotalTokens
	if t == 0 {
		t = u.PromptTokens + u.CompletionTokens
	}
	cached := u.PromptTokensDetails.CachedTokens
	if cached == 0 {
		cached = u.PromptCacheHitTokens
	}
	return chat.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: t,
		CachedTokens: cached, CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
}

// KeyIDs returns the KeyIDs of the provider's key pool (route.Keyed).
func (p *Provider) KeyIDs() []string { return p.keys.KeyIDs() }

// Features reports that an OpenAI-compatible upstream takes every field:
// the request goes out as the client sent it, and a server that lacks a
// field answers with its own 400.
func (p *Provider) Features() chat.Features { return chat.AllFeatures }
