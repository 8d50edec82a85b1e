// Package gemini is the chat.Provider for the Gemini API's native
// generateContent and streamGenerateContent?alt=sse methods
// (POST {base}/v1beta/models/{model}:generateContent), spoken with plain
// net/http: systemInstruction, contents with roles user and model, inline
// image bytes, generationConfig with thinkingConfig, thought parts as
// reasoning.
//
// Tools are functionDeclarations (the client's JSON Schema goes as it is in
// parametersJsonSchema); tool_choice is toolConfig.functionCallingConfig
// (auto AUTO, none NONE, required ANY, a named function ANY with
// allowedFunctionNames). An assistant message's tool calls are functionCall
// parts of a model turn, and tool messages are functionResponse parts of a
// user turn (consecutive ones share one turn), named by Message.ToolName;
// a result that is not a JSON object is sent as {"result": text}. Gemini
// returns each functionCall whole, so a streamed call is one ToolCallDelta
// with its ID, Name and all of its Arguments. Calls without an id get
// "call_<responseId>_<n>" (or "call_<n>"), unique in the conversation. A
// finishReason STOP after function calls is tool_calls.
//
// response_format is native: responseMimeType application/json, with
// responseJsonSchema for json_schema. presence_penalty, frequency_penalty
// and seed are generationConfig fields.
//
// Refused (see Features): parallel_tool_calls false (Gemini has no such
// control), tools together with response_format (Gemini 2.x refuses
// function calling with a JSON response MIME type) and logit_bias.
// The user field is not forwarded: Gemini has none.
//
// Thought signatures (https://ai.google.dev/gemini-api/docs/thought-signatures)
// are kept for the next turn: a functionCall part's thoughtSignature is
// its chat.ToolCall's Signature (SignedBy "gemini"), sent back on that
// call's functionCall part, as Gemini 3 requires for function calling; a
// signature on any other part (a thought, a text part, an empty part) is
// a chat.Thought of provider kind "gemini" whose Text is the reasoning
// since the previous Thought (streamed: a Delta.Thought after that part's
// text). An assistant message's gemini Thoughts go back as thought parts
// (their text and signature) before its content, a Thought without text
// as the signature of the message's last text part, where Gemini puts it
// in an answer without calls. Other providers' Thoughts, and calls they
// signed, are sent without signatures (Gemini 2.5 takes unsigned calls;
// Gemini 3 refuses a current turn's unsigned call).
//
// Gemini needs image bytes: Provider implements NeedsImageBytes, and the
// gateway fetches image URLs before calling it.
//
// A Provider is safe for concurrent use.
//
// The package also makes Veo videos, jobs.Providers of the same Google
// family: Video through the Gemini API (an API key; Google no longer
// serves Veo there, see video.go), and VertexVideo on Vertex AI (a
// service account, whose OAuth2 tokens it makes itself).
package gemini

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is the Gemini API's base URL.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// thinkingBudgets maps reasoning_effort to thinkingBudget for models with
// catalog.ThinkingBudget.
var thinkingBudgets = map[string]int{"low": 1024, "medium": 8192, "high": 24576}

// Config configures a Provider.
type Config struct {
	Name       string       // the provider's catalog name, for errors; "gemini" if empty
	BaseURL    string       // DefaultBaseURL if empty; "/v1beta/models/..." is appended
	APIKey     string       // sent as x-goog-api-key: one key, or a pool separated by commas (route.NewKeySet)
	HTTPClient *http.Client // http.DefaultClient if nil; should have no overall Timeout (streams are long)
	// Downloads fetches Veo's videos at the links the Gemini API answers
	// (NewVideo): it should refuse internal addresses, as
	// upstreams.NewDownloadClient's does. nil: HTTPClient.
	Downloads *http.Client
}

// Provider talks to the Gemini API.
type Provider struct {
	name string
	conn
}

var (
	_ chat.Provider        = (*Provider)(nil)
	_ chat.FeatureProvider = (*Provider)(nil)
	_ route.Keyed          = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{name: cfg.Name, conn: newConn(cfg)}
	if p.name == "" {
		p.name = "gemini"
	}
	return p
}

// conn is what each client of the Gemini API here holds (chat, images,
// Veo): the base URL, the key pool and the HTTP client.
type conn struct {
	base   string
	keys   route.KeySet // each call sends the key its ctx names (route.WithKey)
	client *http.Client
	files  *http.Client // output files at links the vendor answers (Config.Downloads)
}

// newConn returns cfg's conn: DefaultBaseURL and http.DefaultClient
// where cfg leaves them out.
func newConn(cfg Config) conn {
	c := conn{base: strings.TrimRight(cfg.BaseURL, "/"), keys: route.NewKeySet(cfg.APIKey), client: cfg.HTTPClient, files: cfg.Downloads}
	if c.base == "" {
		c.base = DefaultBaseURL
	}
	if c.client == nil {
		c.client = http.DefaultClient
	}
	if c.files == nil {
		c.files = c.client
	}
	return c
}

// KeyIDs returns the KeyIDs of the client's key pool (route.Keyed).
func (c *conn) KeyIDs() []string { return c.keys.KeyIDs() }

// NeedsImageBytes reports that Gemini takes images as inline bytes only: the
// gateway must fetch image URLs into Image.Data before calling the Provider.
func (p *Provider) NeedsImageBytes() bool { return true }

// Features reports what Gemini honours: tools with every tool_choice,
// native structured output, seed and penalties. It cannot limit the model
// to one call (no parallel_tool_calls control), cannot take function
// declarations with a JSON responseMimeType in one request, and has no
// logit_bias.
func (p *Provider) Features() chat.Features {
	return chat.Features{Tools: true, ToolChoiceNone: true, ResponseFormat: true, Seed: true, Penalties: true}
}

// Complete calls generateContent. Every upstream failure is a
// *chat.UpstreamError; a cancelled ctx returns an error wrapping ctx.Err().
func (p *Provider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	resp, err := p.do(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var g generateResponse
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		return nil, chat.TransportError(ctx, p.name, "decode response", err)
	}
	if g.Error != nil {
		return nil, p.apiError(g.Error.Code, nil, g.Error)
	}
	var st state
	if err := st.add(&g, nil); err != nil {
		return nil, err
	}
	out, err := p.finish(&st)
	if out != nil {
		out.ServiceTier = serviceTier(resp.Header)
	}
	return out, err
}

// Stream calls streamGenerateContent?alt=sse and writes to w each text or
// thought part, and each function call (whole), as it arrives. Each event is a whole GenerateContentResponse;
// the stream ends at EOF, and a stream without a finishReason (or block
// reason) is a truncated one: a *chat.UpstreamError. If w fails, Stream
// returns its error unchanged. With any error it returns the usage
// reported so far (see soFar). Returning closes the response body, which
// cancels the upstream request.
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := p.do(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := p.readStream(ctx, resp.Body, w)
	if out != nil {
		out.ServiceTier = serviceTier(resp.Header)
	}
	return out, err
}

// serviceTier is the service tier Gemini says it served at, in its
// x-gemini-service-tier response header
// (https://ai.google.dev/gemini-api/docs/priority-inference), in the
// catalog's names: "standard" is "default"; "" without the header.
func serviceTier(h http.Header) string {
	t := strings.ToLower(strings.TrimSpace(h.Get("x-gemini-service-tier")))
	t = strings.TrimPrefix(t, "service_tier_")
	if t == "standard" {
		return "default"
	}
	return t
}

// readStream parses a streamGenerateContent SSE body.
func (p *Provider) readStream(ctx context.Context, body io.Reader, w chat.Writer) (resp *chat.Response, err error) {
	var st state
	defer func() {
		if err != nil {
			resp = st.soFar()
		}
	}()
	r := sse.NewReader(body)
	batch := chat.NewBatch(w) // deltas read together are written together
	r.OnWait(batch.Flush)
	emit := batch.Emit
	for {
		_, data, err := r.NextBytes()
		if err == io.EOF {
			// Gemini may write an error as raw JSON after its last
			// event, outside the event stream.
			var eb errorBody
			if json.Unmarshal(r.Stray(), &eb) == nil && eb.Error != nil {
				return nil, p.apiError(0, nil, eb.Error)
			}
			return p.finish(&st)
		}
		if err != nil {
			return nil, chat.TransportError(ctx, p.name, "read stream", err)
		}
		var g generateResponse
		if err := decodeEvent(data, &g); err != nil {
			return nil, chat.TransportError(ctx, p.name, "decode event", err)
		}
		if g.Error != nil { // an error in the middle of the stream
			return nil, p.apiError(g.Error.Code, nil, g.Error)
		}
		if err := st.add(&g, emit); err != nil {
			return nil, err
		}
	}
}

// state accumulates a response from one or more GenerateContentResponses.
type state struct {
	content, reasoning strings.Builder
	since              int // st.reasoning's length at the last Thought
	thoughts           []chat.Thought
	toolCalls          []chat.ToolCall
	ids                map[string]bool // the ids of toolCalls
	responseID         string          // the first responseId seen, for call ids
	finish             string          // Gemini's finishReason, or "BLOCKED:" + blockReason
	usage              *usageMetadata
	usageLags          bool // a part came after the last usage, in a response without one
}

// add folds g into st, calling emit (if not nil) for each non-empty text
// part and each function call.
func (st *state) add(g *generateResponse, emit func(chat.Delta) error) error {
	if st.responseID == "" {
		st.responseID = g.ResponseID
	}
	if g.UsageMetadata != nil {
		st.usage = g.UsageMetadata // cumulative: the last one counts
	}
	st.usageLags = g.UsageMetadata == nil && (st.usageLags || len(g.Candidates) > 0)
	if g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" {
		st.finish = "BLOCKED:" + g.PromptFeedback.BlockReason
	}
	if len(g.Candidates) == 0 {
		return nil
	}
	c := g.Candidates[0]
	if c.FinishReason != "" {
		st.finish = c.FinishReason
	}
	if c.Content == nil {
		return nil
	}
	for _, part := range c.Content.Parts {
		if part.FunctionCall != nil {
			tc := st.addCall(part.FunctionCall, part.ThoughtSignature)
			if emit != nil {
				if err := emit(chat.Delta{ToolCall: &chat.ToolCallDelta{Index: len(st.toolCalls) - 1,
					ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Signature: tc.Signature, SignedBy: tc.SignedBy}}); err != nil {
					return err
				}
			}
			continue
		}
		if part.Text != "" { // not executableCode...
			var d chat.Delta
			if part.Thought {
				d.Reasoning = part.Text
				st.reasoning.WriteString(part.Text)
			} else {
				d.Content = part.Text
				st.content.WriteString(part.Text)
			}
			if emit != nil {
				if err := emit(d); err != nil {
					return err
				}
			}
		}
		if part.ThoughtSignature != "" {
			th := st.addThought(part.ThoughtSignature)
			if emit != nil {
				if err := emit(chat.Delta{Thought: &th}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// addThought appends a Thought signed sig, whose text is the reasoning
// since the previous one, to st's thoughts, and returns it.
func (st *state) addThought(sig string) chat.Thought {
	r := st.reasoning.String()
	th := chat.Thought{Provider: Kind, Text: r[st.since:], Signature: sig}
	st.since = len(r)
	st.thoughts = append(st.thoughts, th)
	return th
}

// Kind is the provider kind of the Thoughts and signed tool calls this
// package makes and takes back (chat.Thought.Provider, ToolCall.SignedBy).
const Kind = "gemini"

// addCall appends fc to st's tool calls and returns it as a ToolCall. Its
// ID is Gemini's id, or else "call_<responseId>_<n>" ("call_<n>" without
// a responseId), n its position among this answer's calls: deterministic,
// and unique in a conversation as response ids are (a clash with another
// id of this answer gets a suffix). Arguments are the compact args
// object, "{}" if Gemini sent none; sig is the part's thoughtSignature.
func (st *state) addCall(fc *functionCall, sig string) chat.ToolCall {
	n := len(st.toolCalls)
	id := fc.ID
	if id == "" || st.ids[id] {
		base := fmt.Sprintf("call_%d", n)
		if st.responseID != "" {
			base = fmt.Sprintf("call_%s_%d", st.responseID, n)
		}
		id = base
		for k := 2; st.ids[id]; k++ {
			id = fmt.Sprintf("%s_%d", base, k)
		}
	}
	if st.ids == nil {
		st.ids = map[string]bool{}
	}
	st.ids[id] = true
	args := "{}"
	var b bytes.Buffer
	if err := json.Compact(&b, fc.Args); err == nil && b.Len() > 0 && b.String() != "null" {
		args = b.String()
	}
	tc := chat.ToolCall{ID: id, Name: fc.Name, Arguments: args}
	if sig != "" {
		tc.Signature, tc.SignedBy = sig, Kind
	}
	st.toolCalls = append(st.toolCalls, tc)
	return tc
}

// finish returns the Response of a complete st.
//
// Usage: prompt_tokens is promptTokenCount, of which cachedContentTokenCount
// were read from a context cache (CachedTokens); completion_tokens is
// candidatesTokenCount + thoughtsTokenCount, as OpenAI counts reasoning
// tokens in completion_tokens (and Google bills thoughts as output), of
// which the thoughts are ReasoningTokens; total_tokens is their sum.
func (p *Provider) finish(st *state) (*chat.Response, error) {
	if st.finish == "" {
		return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
			Message: "response ended without a finishReason", Err: io.ErrUnexpectedEOF}
	}
	if modelErrors[st.finish] {
		return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonModel,
			Message: "the model's answer failed", Err: fmt.Errorf("finishReason %s", st.finish)}
	}
	out := &chat.Response{FinishReason: finishReason(st.finish), Content: st.content.String(), Reasoning: st.reasoning.String(),
		ToolCalls: st.toolCalls, Thoughts: st.thoughts}
	if st.finish == "STOP" && len(st.toolCalls) > 0 {
		out.FinishReason = chat.FinishToolCalls
	}
	if u := st.usage; u != nil {
		out.Usage = u.chat()
	}
	return out, nil
}

// chat returns u as chat usage.
func (u *usageMetadata) chat() chat.Usage {
	cu := chat.Usage{PromptTokens: u.PromptTokenCount, CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens: min(u.CachedContentTokenCount, u.PromptTokenCount), ReasoningTokens: u.ThoughtsTokenCount}
	cu.TotalTokens = cu.PromptTokens + cu.CompletionTokens
	return cu
}

// soFar is the Response of a stream that failed, for the gateway to
// charge the answer so far (see chat.Provider.Stream): the last usage
// Gemini reported (each is cumulative), its output only if no part came
// after it.
func (st *state) soFar() *chat.Response {
	if st.usage == nil {
		return nil
	}
	u := st.usage.chat()
	if st.usageLags {
		u.CompletionTokens, u.ReasoningTokens = 0, 0
		u.TotalTokens = u.PromptTokens
	}
	return &chat.Response{Usage: u}
}

// modelErrors are the finishReasons of an answer the model spoiled, with
// no usable content (https://ai.google.dev/api/generate-content#FinishReason):
// a failure, not an answer; another attempt may do better.
var modelErrors = map[string]bool{
	"MALFORMED_FUNCTION_CALL": true, // the function call generated by the model is invalid
	"UNEXPECTED_TOOL_CALL":    true, // a tool call with no tools enabled
	"TOO_MANY_TOOL_CALLS":     true, // the model called too many tools consecutively
	"MALFORMED_RESPONSE":      true, // the response was malformed
}

// finishReason maps a finishReason (or a prompt block) to an OpenAI
// finish_reason.
func finishReason(s string) string {
	if strings.HasPrefix(s, "BLOCKED:") {
		return chat.FinishContentFilter
	}
	switch s {
	case "MAX_TOKENS":
		return chat.FinishLength
	case "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return chat.FinishContentFilter
	default: // STOP, LANGUAGE, OTHER, FINISH_REASON_UNSPECIFIED
		return chat.FinishStop
	}
}

// do sends the request and returns a 2xx response; any other outcome is an
// error.
func (p *Provider) do(ctx context.Context, req *chat.Request, stream bool) (*http.Response, error) {
	body, err := buildRequest(req)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", p.name, err)
	}
	model := ""
	if req.Model != nil {
		model = req.Model.Upstream
	}
	u := p.base + "/v1beta/models/" + url.PathEscape(model) + ":generateContent"
	if stream {
		u = p.base + "/v1beta/models/" + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	hr.Header.Set("x-goog-api-key", p.keys.Key(ctx))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := chat.Send(p.client, hr)
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "send request", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e errorBody
	_ = json.Unmarshal(eb, &e)
	if e.Error == nil {
		e.Error = &apiError{Message: ""}
	}
	ue := p.apiError(resp.StatusCode, resp.Header, e.Error)
	ue.Err = fmt.Errorf("status %d: %s", resp.StatusCode, truncate(string(eb), 512))
	return nil, ue
}

// apiError maps an HTTP status (or, for an error inside a 200 answer,
// status 0 or 200: the error's own code, else the HTTP status its
// google.rpc status name stands for) and a google.rpc.Status-style error to
// an UpstreamError. RetryAfter is the header's, else the error's RetryInfo
// delay. A key Gemini refuses (reason API_KEY_INVALID, sent as 400
// INVALID_ARGUMENT) stands for 401: our credentials, not the client's
// request.
func (p *Provider) apiError(status int, header http.Header, ae *apiError) *chat.UpstreamError {
	if status == 0 || status == http.StatusOK {
		status = ae.Code
		if status < 400 || status > 599 {
			status = rpcStatuses[ae.Status]
		}
		if status == 0 {
			status = http.StatusBadGateway // an error that names nothing known
		}
	}
	cause := fmt.Errorf("%d %s: %s", ae.Code, ae.Status, ae.Message)
	if ae.hasReason("API_KEY_INVALID") {
		status = http.StatusUnauthorized
	}
	e := chat.StatusError(p.name, status, nil, ae.Message, cause)
	if e.Kind == chat.UpstreamBadRequest && ae.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.RetryAfter = retryAfter(header, ae)
	return e
}

// rpcStatuses are the HTTP statuses of the google.rpc status names
// (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes, and
// google.rpc.Code's HTTP mapping).
var rpcStatuses = map[string]int{
	"INVALID_ARGUMENT":    http.StatusBadRequest,
	"FAILED_PRECONDITION": http.StatusBadRequest,
	"OUT_OF_RANGE":        http.StatusBadRequest,
	"UNAUTHENTICATED":     http.StatusUnauthorized,
	"PERMISSION_DENIED":   http.StatusForbidden,
	"NOT_FOUND":           http.StatusNotFound,
	"ABORTED":             http.StatusConflict,
	"ALREADY_EXISTS":      http.StatusConflict,
	"RESOURCE_EXHAUSTED":  http.StatusTooManyRequests,
	"CANCELLED":           499,
	"INTERNAL":            http.StatusInternalServerError,
	"UNKNOWN":             http.StatusInternalServerError,
	"DATA_LOSS":           http.StatusInternalServerError,
	"UNIMPLEMENTED":       http.StatusNotImplemented,
	"UNAVAILABLE":         http.StatusServiceUnavailable,
	"DEADLINE_EXCEEDED":   http.StatusGatewayTimeout,
}

// retryAfter returns the wait an error asks for: the Retry-After header
// (see chat.RetryAfter), or the retryDelay of a google.rpc.RetryInfo detail ("30s").
func retryAfter(h http.Header, ae *apiError) time.Duration {
	if d := chat.RetryAfter(h, time.Now()); d > 0 {
		return d
	}
	return ae.retryDelay()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// buildRequest translates req to a generateContent body.
func buildRequest(req *chat.Request) (*generateRequest, error) {
	model := req.Model
	if model == nil {
		model = &catalog.Model{}
	}
	body := &generateRequest{}
	var system []part
	for _, m := range req.Messages {
		if m.Role == chat.RoleSystem {
			if t := m.Text(); t != "" {
				system = append(system, part{Text: t})
			}
			continue
		}
		var parts []part
		var err error
		if m.Role == chat.RoleTool {
			parts, err = toolResult(m)
		} else {
			parts, err = contentParts(m.Parts)
		}
		if err != nil {
			return nil, err
		}
		if m.Role == chat.RoleAssistant {
			parts = signed(m.Thoughts, parts)
		}
		for _, tc := range m.ToolCalls {
			fc, err := functionCallPart(tc)
			if err != nil {
				return nil, err
			}
			parts = append(parts, fc)
		}
		if len(parts) == 0 {
			continue
		}
		// Tool results are user turns: consecutive ones (and a user
		// message after them) merge into one, as Gemini wants the
		// responses to a model turn's calls together.
		role := "user"
		if m.Role == chat.RoleAssistant {
			role = "model"
		}
		if n := len(body.Contents); n > 0 && body.Contents[n-1].Role == role {
			body.Contents[n-1].Parts = append(body.Contents[n-1].Parts, parts...)
			continue
		}
		body.Contents = append(body.Contents, content{Role: role, Parts: parts})
	}
	if len(body.Contents) == 0 {
		return nil, errors.New("at least one user or assistant message with content is required")
	}
	if len(system) > 0 {
		body.SystemInstruction = &content{Parts: system}
	}

	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, len(req.Tools))
		for i, t := range req.Tools {
			decls[i] = functionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters}
		}
		body.Tools = []tool{{FunctionDeclarations: decls}}
		body.ToolConfig = functionCalling(req.ToolChoice)
	}

	gc := &generationConfig{Temperature: req.Temperature, TopP: req.TopP, StopSequences: req.Stop, Seed: req.Seed,
		PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty}
	if rf := req.ResponseFormat; rf != nil {
		gc.ResponseMimeType = "application/json"
		if rf.Type == chat.FormatJSONSchema {
			gc.ResponseSchema = rf.Schema
		}
	}
	if req.MaxTokens > 0 {
		gc.MaxOutputTokens = req.MaxTokens
	}
	if req.ReasoningEffort != "" && model.Thinking == catalog.ThinkingBudget {
		budget, ok := thinkingBudgets[req.ReasoningEffort]
		if !ok {
			budget = thinkingBudgets["medium"]
		}
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: budget, IncludeThoughts: true}
		// maxOutputTokens counts thoughts too: a limit at or below the
		// budget is room for the answer on top of it.
		if gc.MaxOutputTokens > 0 && gc.MaxOutputTokens <= budget {
			gc.MaxOutputTokens += budget
			if model.MaxTokens > 0 && gc.MaxOutputTokens > model.MaxTokens {
				gc.MaxOutputTokens = model.MaxTokens
			}
		}
	}
	if gc.Temperature != nil || gc.TopP != nil || len(gc.StopSequences) > 0 || gc.Seed != nil ||
		gc.PresencePenalty != nil || gc.FrequencyPenalty != nil || gc.ResponseMimeType != "" ||
		gc.MaxOutputTokens > 0 || gc.ThinkingConfig != nil {
		body.GenerationConfig = gc
	}
	return body, nil
}

// contentParts translates message parts; empty text parts are dropped.
func contentParts(parts []chat.Part) ([]part, error) {
	var out []part
	for _, p := range parts {
		switch {
		case p.Image == nil:
			if p.Text != "" {
				out = append(out, part{Text: p.Text})
			}
		case len(p.Image.Data) > 0:
			out = append(out, part{InlineData: &blob{MimeType: p.Image.MediaType, Data: base64.StdEncoding.EncodeToString(p.Image.Data)}})
		default:
			// The gateway fetches URLs for providers that NeedsImageBytes.
			return nil, errors.New("image URLs are not supported by this model's provider; send the image as a data URI")
		}
	}
	return out, nil
}

// signed returns the content parts of an assistant message with its
// gemini thoughts (see the package doc): those with text as thought parts
// before content, those without as the signature of the last text part
// (dropped if there is none, or it is signed already). Thoughts of other
// provider kinds are dropped.
func signed(thoughts []chat.Thought, content []part) []part {
	var out []part
	for _, th := range thoughts {
		switch {
		case th.Provider != Kind || th.Signature == "":
		case th.Text != "":
			out = append(out, part{Text: th.Text, Thought: true, ThoughtSignature: th.Signature})
		default:
			for i := len(content) - 1; i >= 0; i-- {
				if content[i].Text != "" {
					if content[i].ThoughtSignature == "" {
						content[i].ThoughtSignature = th.Signature
					}
					break
				}
			}
		}
	}
	if out == nil {
		return content
	}
	return append(out, content...)
}

// functionCalling maps tool_choice to a toolConfig; nil (Gemini's default,
// AUTO) for auto.
func functionCalling(tc chat.ToolChoice) *toolConfig {
	var fc functionCallingConfig
	switch tc.Mode {
	case chat.ToolNone:
		fc.Mode = "NONE"
	case chat.ToolRequired:
		fc.Mode = "ANY"
	case chat.ToolFunction:
		fc.Mode = "ANY"
		fc.AllowedFunctionNames = []string{tc.Name}
	default:
		return nil
	}
	return &toolConfig{FunctionCallingConfig: fc}
}

// functionCallPart translates an assistant's tool call, with its
// signature if Gemini made it; its arguments must be a JSON object.
func functionCallPart(tc chat.ToolCall) (part, error) {
	if !isJSONObject(tc.Arguments) {
		return part{}, fmt.Errorf("the arguments of tool call %q are not a JSON object", tc.ID)
	}
	p := part{FunctionCall: &functionCall{ID: tc.ID, Name: tc.Name, Args: json.RawMessage(tc.Arguments)}}
	if tc.SignedBy == Kind {
		p.ThoughtSignature = tc.Signature
	}
	return p, nil
}

// toolResult translates a tool message to a functionResponse part.
func toolResult(m chat.Message) ([]part, error) {
	if m.ToolName == "" {
		return nil, fmt.Errorf("the tool message answering %q has no function name", m.ToolCallID)
	}
	return []part{{FunctionResponse: &functionResponse{ID: m.ToolCallID, Name: m.ToolName, Response: toolResponse(m.Text())}}}, nil
}

// toolResponse returns a tool's result text as the JSON object Gemini's
// functionResponse.response must be: the text itself if it is a JSON
// object, else {"result": text}.
func toolResponse(text string) json.RawMessage {
	if isJSONObject(text) {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(map[string]string{"result": text}) // cannot fail
	return b
}

// isJSONObject reports whether s is a valid JSON object.
func isJSONObject(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return strings.HasPrefix(t, "{") && json.Valid([]byte(s))
}
