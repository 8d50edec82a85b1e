package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/rawjson"
	"github.com/genway/genway/shared/route"
)

// AttemptsHeader names the upstream attempts a chat answer (or its
// error) took, as route.FormatAttempts writes them: the model that
// answered last ("openai/gpt-4o-mini=503, anthropic/claude-haiku-4-5=200").
// It is set when the answer is committed; a stream that a heartbeat
// committed before its first token has none (the access log has them).
const AttemptsHeader = "X-Genway-Attempts"

// StreamWriteTimeout is how long one write of a stream may wait for a
// client that does not read (a stream's up to deadlineRenew less).
const StreamWriteTimeout = time.Minute

// deadlineRenew is how old a stream's write deadline gets before a write
// sets it again (StreamWriteTimeout from then).
const deadlineRenew = time.Second

// DefaultChatHeartbeat is how long a stream may stay silent before the
// handler sends an SSE comment (": keep-alive"), so that proxies and API
// Gateway do not cut a stream whose model is still thinking.
const DefaultChatHeartbeat = 10 * time.Second

// ChatOption configures ChatCompletions.
type ChatOption func(*chatConfig)

type chatConfig struct {
	heartbeat time.Duration
	keepAlive time.Duration // non-stream: 0, no keep-alive
}

// ChatKeepAlive makes a non-streamed answer that is still silent after d
// send a space (JSON allows whitespace before the value) and again every
// d, so that API Gateway, whose streamed integration cuts a response that
// stays idle, keeps it open while a reasoning model thinks. The 200 status
// is then committed: a failure after it is the error envelope as the
// body. d <= 0 turns it off (the default).
func ChatKeepAlive(d time.Duration) ChatOption {
	return func(c *chatConfig) { c.keepAlive = d }
}

// chatSetup applies opts to the default configuration, and gives a nil
// log a discarding one.
func chatSetup(log *slog.Logger, opts []ChatOption) (chatConfig, *slog.Logger) {
	cfg := chatConfig{heartbeat: DefaultChatHeartbeat}
	for _, o := range opts {
		o(&cfg)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return cfg, log
}

// committer is a sink that may have sent part of its answer: chatError
// asks it, and has it write the error in its format if so.
type committer interface {
	committed() bool
	fail(env envelope)
}

// ChatHeartbeat sets the silence after which a stream gets a heartbeat
// comment; d <= 0 turns heartbeats off.
func ChatHeartbeat(d time.Duration) ChatOption {
	return func(c *chatConfig) { c.heartbeat = d }
}

// ChatCompletions serves POST /v1/chat/completions for the account in the
// request context (see Authenticated).
//
// Without "stream": a chat.completion object (message.tool_calls, and
// content null, when the model calls tools). With "stream": true,
// Server-Sent Events: a chunk with delta.role "assistant", one chunk per
// upstream delta (content, reasoning_content, or a piece of a tool call in
// delta.tool_calls: the first piece of call index i has its id, type and
// function name, each piece a piece of the arguments), flushed as the
// upstream sends them, a final chunk with an empty delta, finish_reason and
// usage, and "data: [DONE]". Usage, whole or streamed, carries its details
// and the answer's cost (usageJSON). The optional extra usage chunk (empty choices)
// of stream_options.include_usage is not sent: usage is already on the final
// chunk, and clients that sum usage over chunks (openai-go's
// ChatCompletionAccumulator) would count it twice. Reasoning text
// never appears in content: it goes in delta.reasoning_content (streamed)
// or message.reasoning_content, the field DeepSeek and vLLM use, which
// OpenAI clients ignore.
//
// A priced model is refused with 402 insufficient_credits, before any
// upstream call, while the account has no credits left (chat.Gateway.Admit).
//
// Errors before the stream starts are ordinary JSON error responses. The
// response is committed (200 and the role chunk) at the first upstream
// delta, or at the first heartbeat if the upstream stays silent that long;
// after that, a failure is one `data: {"error": {...}}` event and the end of
// the stream, without [DONE]. When the client goes away, the upstream
// request is cancelled (it runs under the request's context) and nothing
// more is written.
//
// The handler makes one gateway call (chat.Gateway.Run) with the sink of
// the wire format: sseStream for a stream, jsonSink otherwise. Usage is
// recorded by the gateway after the sink's End, flushed first when the
// recorder may wait on a store: the client has its whole answer before.
func ChatCompletions(gw *chat.Gateway, log *slog.Logger, opts ...ChatOption) http.Handler {
	cfg, log := chatSetup(log, opts)
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		var sink committer
		err := serveChat(w, r, gw, cfg, &sink)
		return chatError(w, r, log, sink, err)
	})
}

// serveChat decodes the request (chat.ScanParams, else encoding/json) and
// runs it through the gateway into the sink of its wire format: SSE
// chunks or one chat.completion object (*sink is set to it, for
// chatError).
func serveChat(w http.ResponseWriter, r *http.Request, gw *chat.Gateway, cfg chatConfig, sink *committer) error {
	var p chat.Params
	body, err := readBodyUpTo(r, MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := checkTextBody(r, body); err != nil {
		return err
	}
	// The scanned fast path, else encoding/json and its errors; the body
	// is not changed after (p's raw members are slices of it).
	if !chat.ScanParams(body, &p) {
		if err := unmarshal(body, &p); err != nil {
			return err
		}
	}
	// The model in every answer is the one that answers (chat.Answer); the
	// id the client asked for until then.
	now := time.Now()
	meta := chunkMeta{ID: credits.NewRecordID("chatcmpl-", now), Created: now.Unix(), Model: p.Model}
	p.ID, p.Kind = meta.ID, credits.KindChat // the request's record: GET /v1/generations/{id}
	ctx := r.Context()
	noteModel(ctx, p.Model)
	if !p.Stream {
		js := &jsonSink{w: w, meta: meta, keepAlive: cfg.keepAlive}
		*sink = js
		defer js.stopKeepAlive()
		return gw.Run(ctx, account(r), &p, notingSink{js, ctx})
	}
	s := newSSEStream(w, &chunkEncoder{meta: meta}, cfg.heartbeat)
	*sink = s
	defer s.stopHeartbeats() // no heartbeat writes after the handler
	return gw.Run(ctx, account(r), &p, notingSink{s, ctx})
}

// newSSEStream returns the sink of one stream in the wire format of enc.
func newSSEStream(w http.ResponseWriter, enc streamEncoder, heartbeat time.Duration) *sseStream {
	return &sseStream{w: w, rc: http.NewResponseController(w), last: time.Now(), buf: make([]byte, 0, 512), enc: enc, heartbeat: heartbeat}
}

// chatError is what a chat handler's error err needs besides an ordinary
// error response: the attempts header (while it can be sent); nothing
// more if the client has gone away (there is no one to answer); once the
// answer was committed, the sink's own error: mid-stream, one
// `data: {"error": ...}` event (and the stream ends without [DONE]), or
// after keep-alive spaces the envelope as the body. It returns err while
// nothing of the answer was sent, for serve to answer, else nil.
func chatError(w http.ResponseWriter, r *http.Request, log *slog.Logger, s committer, err error) error {
	if err == nil {
		return nil
	}
	ctx := r.Context()
	rid := RequestID(ctx)
	committed := s != nil && s.committed()
	var ae *chat.AttemptsError
	if errors.As(err, &ae) && len(ae.Attempts) > 0 {
		noteRoute(ctx, "", len(ae.Attempts))
		if !committed {
			w.Header().Set(AttemptsHeader, route.FormatAttempts(ae.Attempts))
		}
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || committed) {
		log.InfoContext(ctx, "chat: client went away", "request_id", rid, "err", err)
		return nil
	}
	if !committed {
		return err
	}
	status, env, _ := errorEnvelope(err, rid)
	log.ErrorContext(ctx, "chat: stream failed", "request_id", rid, "status", status, "err", err)
	s.fail(env)
	return nil
}

// jsonSink writes a non-streamed completion: one chat.completion object,
// after keep-alive spaces if it is slow and keepAlive is set. The images
// handler writes its answer through one too (Start, Begin, writeBody).
type jsonSink struct {
	w         http.ResponseWriter
	meta      chunkMeta
	keepAlive time.Duration

	mu      sync.Mutex
	timer   *time.Timer
	started bool // a keep-alive space was sent: status 200 is committed
	stopped bool
	err     error // the first write error
}

// Start arms the keep-alive timer, if any.
func (j *jsonSink) Start() error {
	if j.keepAlive > 0 {
		j.mu.Lock()
		j.timer = time.AfterFunc(j.keepAlive, j.beat)
		j.mu.Unlock()
	}
	return nil
}

// Begin names the model that answers, and the attempts in the header
// (unless a keep-alive space has sent the headers); a native answer
// left out no tool (OmittedToolsHeader is not sent).
func (j *jsonSink) Begin(a chat.Answer) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.meta.Model = a.Model
	if !j.started {
		j.w.Header().Set(AttemptsHeader, route.FormatAttempts(a.Attempts))
		if a.Native {
			j.w.Header().Del(OmittedToolsHeader)
		}
	}
	return nil
}

func (j *jsonSink) Delta(chat.Delta) error { return nil } // a whole answer comes to End

func (j *jsonSink) Flush() error {
	if err := http.NewResponseController(j.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// beat sends one space and re-arms the timer.
func (j *jsonSink) beat() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped || j.err != nil {
		return
	}
	if !j.started {
		j.started = true
		j.w.Header().Set("Content-Type", "application/json")
		j.w.WriteHeader(http.StatusOK)
	}
	rc := http.NewResponseController(j.w)
	rc.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	if _, err := j.w.Write([]byte(" ")); err != nil {
		j.err = err
		return
	}
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		j.err = err
		return
	}
	j.timer.Reset(j.keepAlive)
}

// stopKeepAlive stops the timer; once it returns, beat writes nothing.
func (j *jsonSink) stopKeepAlive() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	if j.timer != nil {
		j.timer.Stop()
	}
}

func (j *jsonSink) committed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.started
}

// fail writes the error envelope as the body of a committed answer.
func (j *jsonSink) fail(env envelope) {
	j.writeBody(env)
}

// writeBody writes v's JSON (marshal): as the whole response (status
// 200, its length), or after the keep-alive spaces already sent.
func (j *jsonSink) writeBody(v any) error {
	b, err := marshal(v)
	if err != nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.stopped = true
		if j.timer != nil {
			j.timer.Stop()
		}
		if !j.started {
			return writeJSON(j.w, http.StatusOK, v) // its error answer
		}
		return err
	}
	return j.writeBytes(b)
}

// writeBytes is writeBody of a body already encoded, b (which it may
// extend).
func (j *jsonSink) writeBytes(b []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	if j.timer != nil {
		j.timer.Stop()
	}
	if !j.started {
		return writeJSONBytes(j.w, http.StatusOK, b)
	}
	if j.err != nil {
		return j.err
	}
	_, err := j.w.Write(append(b, '\n'))
	return err
}

func (j *jsonSink) End(resp *chat.Response) error {
	return j.writeBytes(j.completion(resp).appendJSON(make([]byte, 0, 512+len(resp.Content)+len(resp.Reasoning))))
}

// completion is the chat.completion object of resp.
func (j *jsonSink) completion(resp *chat.Response) *completion {
	msg := completionMessage{Role: chat.RoleAssistant, Content: &resp.Content, ReasoningContent: resp.Reasoning}
	for _, tc := range resp.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: tc.ID, Type: "function", Function: toolFunction{Name: tc.Name, Arguments: tc.Arguments}})
	}
	if resp.Content == "" && len(resp.ToolCalls) > 0 {
		msg.Content = nil // as OpenAI answers a turn that only calls tools
	}
	return &completion{
		ID: j.meta.ID, Object: "chat.completion", Created: j.meta.Created, Model: j.meta.Model,
		Choices: []completionChoice{{Message: msg, FinishReason: resp.FinishReason}},
		Usage:   chatUsage(&resp.Usage),
	}
}

// streamEncoder is one wire format of a stream: the events that commit
// the response, those of a delta, those of the end, and the error event
// of a stream that fails after it was committed. Each appends to b and
// returns it. sseStream calls them under its lock, one at a time.
type streamEncoder interface {
	model(id string) // the model that answers, before start
	start(b []byte) []byte
	delta(b []byte, d chat.Delta) []byte
	end(b []byte, resp *chat.Response) []byte
	fail(b []byte, env envelope) []byte
}

// sseStream is the chat.Sink of a streamed answer: it writes the events
// of its encoder (chat chunks, or Responses events) as Server-Sent
// Events, the start events once the answer begins (Begin: the first
// token), sends heartbeats while the upstream is silent (the first one
// commits the status, 200, but nothing of the answer), and drops a client
// that stops reading.
type sseStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc streamEncoder

	mu        sync.Mutex
	started   bool          // the headers are written (status 200 committed)
	began     bool          // the start events are written (the role chunk)
	last      time.Time     // of the last write (or the start of the request)
	deadline  time.Time     // the write deadline set last (zero: none yet)
	err       error         // the first write error: the client is gone
	buf       []byte        // the event being written, reused
	heartbeat time.Duration // 0: no heartbeats
	timer     *time.Timer   // fires heartbeat; nil without heartbeats
	stopped   bool          // no more heartbeats
}

// start writes the headers; s.mu is held.
func (s *sseStream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// begin writes the headers if they are not yet, and the start events;
// s.mu is held.
func (s *sseStream) begin() {
	if s.began {
		return
	}
	s.began = true
	s.start()
	s.buf = s.enc.start(s.buf[:0])
	s.raw(s.buf)
}

// Begin implements chat.Sink: the answer's first token is here. The
// attempts go in the header (unless a heartbeat sent the headers), the
// model in every event.
//
// A native answer (a.Native) opens with its own events (Event), not the
// encoder's start events; the tools the translation would have left out
// were not (OmittedToolsHeader is not sent).
func (s *sseStream) Begin(a chat.Answer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enc.model(a.Model)
	if !s.started {
		s.w.Header().Set(AttemptsHeader, route.FormatAttempts(a.Attempts))
		if a.Native {
			s.w.Header().Del(OmittedToolsHeader)
		}
	}
	if a.Native {
		s.began = true
		s.start()
		return s.err
	}
	s.begin()
	return s.err
}

// Start implements chat.Sink: the call is admitted, the upstream is about
// to be asked; heartbeats may commit the response from now on.
func (s *sseStream) Start() error {
	s.startHeartbeats(s.heartbeat)
	return nil
}

// Delta implements chat.Writer: the events of d, written but not
// flushed (after the start events, if Begin was not called).
func (s *sseStream) Delta(d chat.Delta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begin()
	s.buf = s.enc.delta(s.buf[:0], d)
	if len(s.buf) > 0 {
		s.raw(s.buf)
	}
	return s.err
}

// Flush implements chat.Writer: it sends what was written.
func (s *sseStream) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	return s.err
}

// End implements chat.Sink: the end events. They are sent with the end
// of the response (the gateway flushes first when recording usage may
// wait).
//
// A native answer's end is the closing events its provider held back
// (chat.Response.Native), with the answer's cost.
func (s *sseStream) End(resp *chat.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begin()
	if ne, ok := s.enc.(nativeEncoder); ok && resp.Native != nil {
		s.buf = ne.nativeEnd(s.buf[:0], resp)
	} else {
		s.buf = s.enc.end(s.buf[:0], resp)
	}
	s.raw(s.buf)
	return s.err
}

// fail writes the error event of a committed stream and flushes it.
func (s *sseStream) fail(env envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.enc.fail(s.buf[:0], env)
	s.raw(s.buf)
	s.flushLocked()
}

// committed reports whether the response has started (headers sent).
func (s *sseStream) committed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// startHeartbeats arms the heartbeat timer for d (d <= 0: none).
func (s *sseStream) startHeartbeats(d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.heartbeat = d
	s.timer = time.AfterFunc(d, s.beat)
}

// stopHeartbeats stops the timer; once it returns, beat writes nothing.
func (s *sseStream) stopHeartbeats() {
	if s.timer == nil {
		return
	}
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.timer.Stop()
}

// pinger is a streamEncoder whose format has a heartbeat event of its
// own (the Messages API's ping), sent once the answer began; before, and
// in the other formats, a heartbeat is an SSE comment, which every
// client's parser skips.
type pinger interface {
	ping(b []byte) []byte
}

// beat runs when the timer fires: it writes a heartbeat (": keep-alive",
// or the encoder's ping) if nothing was written for the heartbeat
// interval, and re-arms the timer for the end of the current silence.
// The timer is not reset on every write: it is checked lazily, once per
// interval at most.
func (s *sseStream) beat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if since := time.Since(s.last); since < s.heartbeat {
		s.timer.Reset(s.heartbeat - since)
		return
	}
	s.start()
	if p, ok := s.enc.(pinger); ok && s.began {
		s.buf = p.ping(s.buf[:0])
		s.raw(s.buf)
	} else {
		s.raw([]byte(": keep-alive\n\n"))
	}
	s.flushLocked()
	s.timer.Reset(s.heartbeat)
}

func (s *sseStream) raw(b []byte) {
	if s.err != nil {
		return
	}
	// A client that stops reading is dropped after StreamWriteTimeout
	// (up to deadlineRenew sooner); the deadline moves on with the writes,
	// so a stream that flows runs as long as it flows (ErrNotSupported
	// where there are no deadlines). It is set again only once it is
	// deadlineRenew old: a fast stream's writes do not each pay for it.
	now := time.Now()
	if now.After(s.deadline.Add(deadlineRenew - StreamWriteTimeout)) {
		s.deadline = now.Add(StreamWriteTimeout)
		s.rc.SetWriteDeadline(s.deadline)
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
	}
	s.last = now
}

func (s *sseStream) flushLocked() {
	if s.err != nil {
		return
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
}

// chunkMeta is what every chunk of one completion repeats.
type chunkMeta struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Model   string `json:"model"` // the model that answers
}

type chunk struct {
	chunkMeta
	Object  string        `json:"object"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usageJSON    `json:"usage,omitempty"` // on the final chunk only
}

// usageJSON is a chat answer's usage in OpenAI's shape: prompt_tokens
// the whole input and completion_tokens the whole output, their details
// always sent (zeros included, as OpenAI sends them, so that clients find
// them), and OpenRouter's cost: the credits the answer was charged,
// exactly the Amount the ledger moved (0 for an unpriced model).
type usageJSON struct {
	PromptTokens            int                 `json:"prompt_tokens"`
	CompletionTokens        int                 `json:"completion_tokens"`
	TotalTokens             int                 `json:"total_tokens"`
	PromptTokensDetails     inputTokensDetails  `json:"prompt_tokens_details"`
	CompletionTokensDetails outputTokensDetails `json:"completion_tokens_details"`
	Cost                    credits.Amount      `json:"cost"`
}

// inputTokensDetails are the parts of an answer's input tokens:
// cached_tokens read from the provider's prompt cache; cache_write_tokens
// written to it (every write, as OpenRouter counts them), of which
// cache_write_1h_tokens with a 1-hour lifetime.
type inputTokensDetails struct {
	CachedTokens       int `json:"cached_tokens"`
	CacheWriteTokens   int `json:"cache_write_tokens"`
	CacheWrite1hTokens int `json:"cache_write_1h_tokens"`
}

// outputTokensDetails is the part of an answer's output tokens the model
// spent reasoning.
type outputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// inputDetails returns u's input token details.
func inputDetails(u *chat.Usage) inputTokensDetails {
	return inputTokensDetails{CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens + u.CacheWrite1hTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens}
}

// chatUsage returns u in the chat completions shape.
func chatUsage(u *chat.Usage) usageJSON {
	return usageJSON{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		PromptTokensDetails: inputDetails(u), CompletionTokensDetails: outputTokensDetails{ReasoningTokens: u.ReasoningTokens},
		Cost: u.Cost}
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []chunkToolCall `json:"tool_calls,omitempty"`
}

// chunkToolCall is a piece of a streamed tool call: the first piece of
// call Index has its id, type and name; each piece a piece of arguments.
type chunkToolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function toolFunction `json:"function"`
}

// toolCall is a whole tool call of a chat.completion message.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// appendJSON appends f's JSON to b: the bytes marshal makes of it.
func (f *toolFunction) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if f.Name != "" {
		b = append(b, `"name":`...)
		b = rawjson.AppendString(b, f.Name, false)
		b = append(b, ',')
	}
	b = append(b, `"arguments":`...)
	b = rawjson.AppendString(b, f.Arguments, false)
	return append(b, '}')
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usageJSON          `json:"usage"`
}

// appendJSON appends c's JSON to b: the bytes marshal makes of it
// (FuzzCompletionJSON), written without reflection.
func (c *completion) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = rawjson.AppendString(b, c.ID, false)
	b = append(b, `,"object":`...)
	b = rawjson.AppendString(b, c.Object, false)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.Created, 10)
	b = append(b, `,"model":`...)
	b = rawjson.AppendString(b, c.Model, false)
	b = append(b, `,"choices":`...)
	if c.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, ch := range c.Choices {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(ch.Index), 10)
			b = append(b, `,"message":{"role":`...)
			m := &ch.Message
			b = rawjson.AppendString(b, m.Role, false)
			b = append(b, `,"content":`...)
			if m.Content == nil {
				b = append(b, "null"...)
			} else {
				b = rawjson.AppendString(b, *m.Content, false)
			}
			b = appendNonEmpty(b, `,"reasoning_content":`, m.ReasoningContent)
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for k, tc := range m.ToolCalls {
					if k > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = rawjson.AppendString(b, tc.ID, false)
					b = append(b, `,"type":`...)
					b = rawjson.AppendString(b, tc.Type, false)
					b = append(b, `,"function":`...)
					b = tc.Function.appendJSON(b)
					b = append(b, '}')
				}
				b = append(b, ']')
			}
			b = append(b, `},"finish_reason":`...)
			b = rawjson.AppendString(b, ch.FinishReason, false)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":`...)
	b = c.Usage.appendJSON(b)
	return append(b, '}')
}

// appendJSON appends u's JSON to b: the bytes marshal makes of it.
func (u *usageJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CacheWriteTokens), 10)
	b = append(b, `,"cache_write_1h_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CacheWrite1hTokens), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokensDetails.ReasoningTokens), 10)
	b = append(b, `},"cost":`...)
	b = u.Cost.AppendJSON(b)
	return append(b, '}')
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

type completionMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"` // null when the turn only calls tools
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

// chunkEncoder is the chat completions stream format: a chunk with
// delta.role "assistant" at the start, a chunk per delta, a final chunk
// with the finish reason and usage, and "data: [DONE]"; an error is
// `data: {"error": ...}` and the stream ends without [DONE].
type chunkEncoder struct {
	meta  chunkMeta        // what every chunk repeats
	calls [1]chunkToolCall // the tool call piece of a chunk, reused
	usage usageJSON        // the final chunk's
	// prefix is every event's start, up to the delta's members:
	// "data: " and the chunk's id, created, model, object and choice index.
	prefix []byte
}

func (c *chunkEncoder) model(id string) {
	c.meta.Model = id
	c.prefix = nil
}

func (c *chunkEncoder) start(b []byte) []byte {
	return c.appendEvent(b, chunkDelta{Role: chat.RoleAssistant, Content: new(string)}, nil, nil)
}

func (c *chunkEncoder) delta(b []byte, d chat.Delta) []byte {
	if d.Reasoning != "" {
		b = c.appendEvent(b, chunkDelta{ReasoningContent: d.Reasoning}, nil, nil)
	}
	if d.Content != "" {
		b = c.appendEvent(b, chunkDelta{Content: &d.Content}, nil, nil)
	}
	if tc := d.ToolCall; tc != nil {
		// The first piece of a call names it, as OpenAI streams them.
		call := chunkToolCall{Index: tc.Index, ID: tc.ID, Function: toolFunction{Name: tc.Name, Arguments: tc.Arguments}}
		if tc.ID != "" {
			call.Type = "function"
		}
		c.calls[0] = call
		b = c.appendEvent(b, chunkDelta{ToolCalls: c.calls[:]}, nil, nil)
	}
	return b
}

func (c *chunkEncoder) end(b []byte, resp *chat.Response) []byte {
	c.usage = chatUsage(&resp.Usage)
	b = c.appendEvent(b, chunkDelta{}, &resp.FinishReason, &c.usage)
	return append(b, "data: [DONE]\n\n"...)
}

func (c *chunkEncoder) fail(b []byte, env envelope) []byte {
	data, _ := marshal(env)
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// appendEvent appends one chunk event, "data: <chunk JSON>\n\n", to b:
// the bytes encoding/json makes of the chunk (appendEventJSON, which
// FuzzChunkEvent compares it with), written directly, without reflection.
// u is the final chunk's usage (nil on the others).
func (c *chunkEncoder) appendEvent(b []byte, d chunkDelta, finish *string, u *usageJSON) []byte {
	if c.prefix == nil {
		p := append(make([]byte, 0, 128), `data: {"id":`...)
		p = rawjson.AppendString(p, c.meta.ID, false)
		p = append(p, `,"created":`...)
		p = strconv.AppendInt(p, c.meta.Created, 10)
		p = append(p, `,"model":`...)
		p = rawjson.AppendString(p, c.meta.Model, false)
		c.prefix = append(p, `,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{`...)
	}
	b = append(b, c.prefix...)
	n := len(b)
	field := func(name string) {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, name...)
	}
	if d.Role != "" {
		field(`"role":`)
		b = rawjson.AppendString(b, d.Role, false)
	}
	if d.Content != nil {
		field(`"content":`)
		b = rawjson.AppendString(b, *d.Content, false)
	}
	if d.ReasoningContent != "" {
		field(`"reasoning_content":`)
		b = rawjson.AppendString(b, d.ReasoningContent, false)
	}
	if len(d.ToolCalls) > 0 {
		field(`"tool_calls":[`)
		for i, tc := range d.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(tc.Index), 10)
			b = appendNonEmpty(b, `,"id":`, tc.ID)
			b = appendNonEmpty(b, `,"type":`, tc.Type)
			b = append(b, `,"function":`...)
			b = tc.Function.appendJSON(b)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `},"finish_reason":`...)
	if finish == nil {
		b = append(b, "null"...)
	} else {
		b = rawjson.AppendString(b, *finish, false)
	}
	b = append(b, "}]"...)
	if u != nil {
		b = append(b, `,"usage":`...)
		b = u.appendJSON(b)
	}
	return append(b, "}\n\n"...)
}
