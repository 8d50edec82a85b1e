package httpapi

import (
	"bytes"
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
		if err == nil {
			err = unmarshal(body, &p)
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
		b, err := json.Marshal(&c)
		if err != nil {
			writeChatError(w, r, log, err)
			return
		}
		b = append(b, '\n')
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
	s := &sseStream{w: w, rc: http.NewResponseController(w), last: time.Now(), buf: make([]byte, 0, 512), meta: meta}
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
	w     http.ResponseWriter
	rc    *http.ResponseController
	meta  chunkMeta // what every chunk repeats
	enc   *json.Encoder
	jbuf  bytes.Buffer
	chunk chunk

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
	s.buf = s.appendEvent(s.buf[:0], chunkDelta{Role: chat.RoleAssistant, Content: new(string)}, nil, nil)
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
		s.buf = s.appendEvent(s.buf, chunkDelta{ReasoningContent: d.Reasoning}, nil, nil)
	}
	if d.Content != "" {
		s.buf = s.appendEvent(s.buf, chunkDelta{Content: &d.Content}, nil, nil)
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
	s.buf = s.appendEvent(s.buf[:0], chunkDelta{}, &resp.FinishReason, &resp.Usage)
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

// appendEvent appends one chunk event, "data: <chunk JSON>\n\n", to b.
// One encoder and one chunk are reused across the stream's events.
func (s *sseStream) appendEvent(b []byte, d chunkDelta, finish *string, u *chat.Usage) []byte {
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.jbuf)
		s.chunk = chunk{chunkMeta: s.meta, Object: "chat.completion.chunk", Choices: make([]chunkChoice, 1)}
	}
	s.chunk.Choices[0] = chunkChoice{Delta: d, FinishReason: finish}
	s.chunk.Usage = u
	s.jbuf.Reset()
	// Encode cannot fail here: a chunk holds only strings and integers.
	s.enc.Encode(&s.chunk) // ends with a newline
	b = append(b, "data: "...)
	b = append(b, s.jbuf.Bytes()...)
	return append(b, '\n')
}
