package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/jsonscan"
)

// DefaultChatHeartbeat is how long a stream may stay silent before the
// handler sends an SSE comment (": keep-alive"), so that proxies and API
// Gateway do not cut a stream whose model is still thinking.
const DefaultChatHeartbeat = 10 * time.Second

// ChatOption configures ChatCompletions.
type ChatOption func(*chatConfig)

type chatConfig struct {
	heartbeat time.Duration
}

// ChatHeartbeat sets the silence after which a stream gets a heartbeat
// comment; d <= 0 turns heartbeats off.
func ChatHeartbeat(d time.Duration) ChatOption {
	return func(c *chatConfig) { c.heartbeat = d }
}

// ChatCompletions serves POST /v1/chat/completions for the account in the
// request context (see Authenticated).
//
// Without "stream": a chat.completion object. With "stream": true, Server-Sent
// Events: a chunk with delta.role "assistant", one chunk per upstream delta,
// each flushed at once, a final chunk with an empty delta, finish_reason and
// usage, and "data: [DONE]". The optional extra usage chunk (empty choices)
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
// Usage is recorded (chat.Gateway.RecordUsage) after the response, or the
// stream's final chunk and [DONE], is written and flushed: the client has
// its whole answer before the usage recorder runs. (A gateway without a
// recorder gets no such flush: the end of the response goes out with the
// handler's return.)
func ChatCompletions(gw *chat.Gateway, log *slog.Logger, opts ...ChatOption) http.Handler {
	cfg := chatConfig{heartbeat: DefaultChatHeartbeat}
	for _, o := range opts {
		o(&cfg)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var p chat.Params
		body, err := readBody(r)
		if err == nil && !parseParams(body, &p) {
			p = chat.Params{}
			err = unmarshal(body, &p) // the error for the client, or what parseParams leaves to it
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		call, err := gw.Prepare(ctx, &p)
		if err == nil {
			err = gw.Admit(ctx, account(r), call) // 402 before any upstream call
		}
		if err != nil {
			writeChatError(w, r, log, err)
			return
		}
		meta := chunkMeta{ID: "chatcmpl-" + rand.Text(), Created: time.Now().Unix(), Model: call.Request.Model.ID}
		if call.Stream {
			streamChat(w, r, log, gw, call, meta, cfg.heartbeat)
			return
		}
		resp, err := gw.Complete(ctx, call)
		if err != nil {
			writeChatError(w, r, log, err)
			return
		}
		c := completion{
			ID: meta.ID, Object: "chat.completion", Created: meta.Created, Model: meta.Model,
			Choices: []completionChoice{{
				Message:      completionMessage{Role: chat.RoleAssistant, Content: resp.Content, ReasoningContent: resp.Reasoning},
				FinishReason: resp.FinishReason,
			}},
			Usage: resp.Usage,
		}
		b := appendCompletion(make([]byte, 0, 256+len(resp.Content)+len(resp.Reasoning)), &c)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		if gw.UsageWaits() {
			// The client has the whole answer before usage is recorded.
			http.NewResponseController(w).Flush()
		}
		gw.RecordUsage(ctx, account(r), call, resp)
	})
}

// writeChatError writes err unless the client has gone away, in which case
// there is no one to answer.
func writeChatError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		log.InfoContext(r.Context(), "chat: client went away", "request_id", RequestID(r.Context()), "err", err)
		return
	}
	writeError(w, r, log, err)
}

// streamChat runs a streamed call. The gateway's Stream runs on this
// goroutine and writes each delta itself (emit); heartbeats are written by
// a timer callback (time.AfterFunc, so no goroutine waits while the stream
// is busy) that fires after a silence. mu serialises their writes.
func streamChat(w http.ResponseWriter, r *http.Request, log *slog.Logger, gw *chat.Gateway, call *chat.Call, meta chunkMeta, heartbeat time.Duration) {
	ctx := r.Context()
	s := &sseStream{w: w, rc: http.NewResponseController(w), last: time.Now(), buf: make([]byte, 0, 512)}
	s.prefix = appendChunkPrefix(make([]byte, 0, 128), &meta)
	s.startHeartbeats(heartbeat)
	resp, err := gw.Stream(ctx, call, s.delta)
	s.stopHeartbeats() // no heartbeat writes after this

	rid := RequestID(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		log.InfoContext(ctx, "chat: client went away mid-stream", "request_id", rid, "err", err)
	case err != nil && !s.started:
		writeChatError(w, r, log, err)
	case err != nil:
		status, env, _ := errorEnvelope(err, rid)
		log.ErrorContext(ctx, "chat: stream failed", "request_id", rid, "status", status, "err", err)
		b, _ := json.Marshal(env)
		s.write(b)
		s.flush()
	default:
		s.finish(resp, gw.UsageWaits())
		gw.RecordUsage(ctx, account(r), call, resp)
	}
}

// sseStream writes the chunks of one streamed completion.
type sseStream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	prefix []byte // "data: " and the chunk JSON up to the delta's fields

	mu        sync.Mutex
	started   bool          // headers and the role chunk are written
	last      time.Time     // of the last write (or the start of the request)
	err       error         // the first write error: the client is gone
	buf       []byte        // the event being written, reused
	heartbeat time.Duration // 0: no heartbeats
	timer     *time.Timer   // fires heartbeat; nil without heartbeats
	stopped   bool          // no more heartbeats
}

// start writes the headers and the role chunk; s.mu is held.
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
	s.buf = appendChunkEvent(s.buf[:0], s.prefix, chunkDelta{Role: chat.RoleAssistant, Content: new(string)}, nil, nil)
	s.raw(s.buf)
}

// delta is the emit function given to the gateway: each delta is written
// as its own event and flushed at once, unless the provider says more are
// already in hand (d.More): then it is flushed with them, at the next delta
// without More, which the provider emits before it waits for the upstream.
func (s *sseStream) delta(d chat.Delta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	s.buf = s.buf[:0]
	if d.Reasoning != "" {
		s.buf = appendChunkEvent(s.buf, s.prefix, chunkDelta{ReasoningContent: d.Reasoning}, nil, nil)
	}
	if d.Content != "" {
		s.buf = appendChunkEvent(s.buf, s.prefix, chunkDelta{Content: &d.Content}, nil, nil)
	}
	if len(s.buf) > 0 {
		s.raw(s.buf)
	}
	if !d.More {
		s.flushLocked()
	}
	return s.err
}

// finish writes the final chunk and [DONE]. With flush, it flushes them,
// so that the client has the whole stream before the handler records usage;
// without, net/http (or the Lambda adapter) sends them with the end of the
// response, in one write, when the handler returns right after.
func (s *sseStream) finish(resp *chat.Response, flush bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	s.buf = appendChunkEvent(s.buf[:0], s.prefix, chunkDelta{}, &resp.FinishReason, &resp.Usage)
	s.buf = append(s.buf, "data: [DONE]\n\n"...)
	s.raw(s.buf)
	if flush {
		s.flushLocked()
	}
}

// startHeartbeats arms the heartbeat timer for d (d <= 0: none).
func (s *sseStream) startHeartbeats(d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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

// beat runs when the timer fires: it writes ": keep-alive" if nothing was
// written for the heartbeat interval, and re-arms the timer for the end of
// the current silence. The timer is not reset on every write: it is
// checked lazily, once per interval at most.
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
	s.raw([]byte(": keep-alive\n\n"))
	s.flushLocked()
	s.timer.Reset(s.heartbeat)
}

func (s *sseStream) write(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, '\n', '\n')
	s.raw(s.buf)
}

func (s *sseStream) raw(b []byte) {
	if s.err != nil {
		return
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
	}
	s.last = time.Now()
}

func (s *sseStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
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
	Model   string `json:"model"` // the id the client asked for
}

type chunk struct {
	chunkMeta
	Object  string        `json:"object"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chat.Usage   `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent string  `json:"reasoning_content,omitempty"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   chat.Usage         `json:"usage"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

type completionMessage struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// The chunks and the completion are encoded by hand, appending to a reused
// buffer: encoding/json's reflection and allocations were a measurable
// share of the gateway's cost per streamed delta. The output is byte for
// byte what json.Marshal gives for the chunk and completion types above
// (chat_json_test.go checks it; jsonscan fuzzes AppendString).

// appendChunkPrefix appends `data: {"id":...,"created":...,"model":...,
// "object":"chat.completion.chunk","choices":[{"index":0,"delta":{`: what
// every chunk event of one completion starts with.
func appendChunkPrefix(b []byte, m *chunkMeta) []byte {
	b = append(b, `data: {"id":`...)
	b = jsonscan.AppendString(b, m.ID)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, m.Created, 10)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, m.Model)
	return append(b, `,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{`...)
}

// appendChunkEvent appends one chunk event, "data: <chunk JSON>\n\n", where
// prefix is appendChunkPrefix's.
func appendChunkEvent(b, prefix []byte, d chunkDelta, finish *string, u *chat.Usage) []byte {
	b = append(b, prefix...)
	comma := false
	if d.Role != "" {
		b = append(b, `"role":`...)
		b = jsonscan.AppendString(b, d.Role)
		comma = true
	}
	if d.Content != nil {
		if comma {
			b = append(b, ',')
		}
		b = append(b, `"content":`...)
		b = jsonscan.AppendString(b, *d.Content)
		comma = true
	}
	if d.ReasoningContent != "" {
		if comma {
			b = append(b, ',')
		}
		b = append(b, `"reasoning_content":`...)
		b = jsonscan.AppendString(b, d.ReasoningContent)
	}
	b = append(b, `},"finish_reason":`...)
	if finish == nil {
		b = append(b, "null"...)
	} else {
		b = jsonscan.AppendString(b, *finish)
	}
	b = append(b, "}]"...)
	if u != nil {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, u)
	}
	return append(b, "}\n\n"...)
}

// appendCompletion appends the JSON of c and a newline, as writeJSON
// writes it.
func appendCompletion(b []byte, c *completion) []byte {
	b = append(b, `{"id":`...)
	b = jsonscan.AppendString(b, c.ID)
	b = append(b, `,"object":`...)
	b = jsonscan.AppendString(b, c.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.Created, 10)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, c.Model)
	b = append(b, `,"choices":`...)
	if c.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Choices {
			ch := &c.Choices[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(ch.Index), 10)
			b = append(b, `,"message":{"role":`...)
			b = jsonscan.AppendString(b, ch.Message.Role)
			b = append(b, `,"content":`...)
			b = jsonscan.AppendString(b, ch.Message.Content)
			if ch.Message.ReasoningContent != "" {
				b = append(b, `,"reasoning_content":`...)
				b = jsonscan.AppendString(b, ch.Message.ReasoningContent)
			}
			b = append(b, `},"finish_reason":`...)
			b = jsonscan.AppendString(b, ch.FinishReason)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":`...)
	b = appendUsage(b, &c.Usage)
	return append(b, "}\n"...)
}

func appendUsage(b []byte, u *chat.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}')
}

// parseParams decodes a request body into p (which must be zero) as
// json.Unmarshal would, without reflection, for the requests clients
// usually send; it reports false for anything it does not handle itself
// (a key that matches a field only case-insensitively or through escapes,
// a duplicate field, a type mismatch, a string that needs escapes other
// than the simple ones, a number that does not parse, deep nesting,
// malformed JSON), and the caller then decodes with encoding/json, which
// makes the same value or the error the client gets (chat_json_test.go
// fuzzes the two against each other). Raw fields (content, max_tokens,
// stop) alias body.
func parseParams(body []byte, p *chat.Params) bool {
	s := paramsScanner{jsonscan.Scanner{Buf: body, SimpleEscapes: true}}
	if !s.params(p) {
		return false
	}
	s.WS()
	return s.Pos == len(s.Buf)
}

// paramsScanner is parseParams' parser: each method returns false when the
// input is malformed or not handled.
type paramsScanner struct {
	jsonscan.Scanner
}

func (s *paramsScanner) params(p *chat.Params) bool {
	const known = "model messages stream stream_options max_tokens max_completion_tokens reasoning_effort temperature top_p stop seed"
	return s.Fields(known, func(n int) bool {
		switch n {
		case 0:
			return s.Null() || s.str(&p.Model)
		case 1:
			return s.messages(p)
		case 2:
			return s.boolean(&p.Stream)
		case 3:
			if s.Null() {
				return true
			}
			p.StreamOptions = &chat.StreamOptions{}
			return s.Fields("include_usage", func(int) bool {
				return s.boolean(&p.StreamOptions.IncludeUsage)
			})
		case 4:
			return s.raw(&p.MaxTokens)
		case 5:
			return s.raw(&p.MaxCompletionTokens)
		case 6:
			if s.Null() {
				return true
			}
			p.ReasoningEffort = new(string)
			return s.str(p.ReasoningEffort)
		case 7, 8:
			if s.Null() {
				return true
			}
			b, ok := s.Number()
			if !ok {
				return false
			}
			f, err := strconv.ParseFloat(string(b), 64)
			if err != nil {
				return false
			}
			if n == 7 {
				p.Temperature = &f
			} else {
				p.TopP = &f
			}
			return true
		case 9:
			return s.raw(&p.Stop)
		default: // seed
			if s.Null() {
				return true
			}
			v, ok := s.Integer(64)
			if ok {
				p.Seed = &v
			}
			return ok
		}
	})
}

func (s *paramsScanner) messages(p *chat.Params) bool {
	if s.Null() {
		return true
	}
	if !s.Eat('[') {
		return false
	}
	p.Messages = make([]chat.ParamsMessage, 0, 4)
	if s.Eat(']') {
		return true
	}
	for {
		p.Messages = append(p.Messages, chat.ParamsMessage{})
		m := &p.Messages[len(p.Messages)-1]
		if !s.Null() && !s.Fields("role content", func(n int) bool {
			if n == 0 {
				return s.Null() || s.str(&m.Role)
			}
			return s.raw(&m.Content)
		}) {
			return false
		}
		if s.Eat(',') {
			continue
		}
		return s.Eat(']')
	}
}

// boolean parses true or false into *dst; null leaves it as it is.
func (s *paramsScanner) boolean(dst *bool) bool {
	switch {
	case s.Literal("true"):
		*dst = true
	case s.Literal("false"), s.Null():
	default:
		return false
	}
	return true
}

// raw sets *dst to the next value's bytes, as json.RawMessage keeps them.
func (s *paramsScanner) raw(dst *json.RawMessage) bool {
	s.WS()
	start := s.Pos
	if !s.Skip() {
		return false
	}
	*dst = s.Buf[start:s.Pos:s.Pos]
	return true
}

// str parses a string into *dst (see jsonscan.Scanner.String: with
// SimpleEscapes, only \" \\ \/ \n \r \t escapes, and valid UTF-8).
func (s *paramsScanner) str(dst *string) bool {
	v, ok := s.String()
	if ok {
		*dst = v
	}
	return ok
}
