package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
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
// Errors before the stream starts are ordinary JSON error responses. The
// response is committed (200 and the role chunk) at the first upstream
// delta, or at the first heartbeat if the upstream stays silent that long;
// after that, a failure is one `data: {"error": {...}}` event and the end of
// the stream, without [DONE]. When the client goes away, the upstream
// request is cancelled (it runs under the request's context) and nothing
// more is written.
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
		if err := decodeJSON(r, &p); err != nil {
			writeError(w, r, log, err)
			return
		}
		call, err := gw.Prepare(ctx, &p)
		if err != nil {
			writeChatError(w, r, log, err)
			return
		}
		meta := chunkMeta{ID: "chatcmpl-" + rand.Text(), Created: time.Now().Unix(), Model: call.Request.Model.ID}
		if call.Stream {
			streamChat(w, r, log, gw, call, meta, cfg.heartbeat)
			return
		}
		resp, err := gw.Complete(ctx, account(r), call)
		if err != nil {
			writeChatError(w, r, log, err)
			return
		}
		writeJSON(w, http.StatusOK, completion{
			ID: meta.ID, Object: "chat.completion", Created: meta.Created, Model: meta.Model,
			Choices: []completionChoice{{
				Message:      completionMessage{Role: chat.RoleAssistant, Content: resp.Content, ReasoningContent: resp.Reasoning},
				FinishReason: resp.FinishReason,
			}},
			Usage: resp.Usage,
		})
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
// goroutine and writes each delta itself (emit); a second goroutine writes
// heartbeats during silences. mu serialises their writes.
func streamChat(w http.ResponseWriter, r *http.Request, log *slog.Logger, gw *chat.Gateway, call *chat.Call, meta chunkMeta, heartbeat time.Duration) {
	ctx := r.Context()
	s := &sseStream{w: w, rc: http.NewResponseController(w), meta: meta, last: time.Now()}
	var wg sync.WaitGroup
	done := make(chan struct{})
	if heartbeat > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.heartbeats(done, heartbeat)
		}()
	}
	resp, err := gw.Stream(ctx, account(r), call, s.delta)
	close(done)
	wg.Wait() // no writes from the heartbeat goroutine after this

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
		s.finish(resp)
	}
}

// sseStream writes the chunks of one streamed completion.
type sseStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	meta chunkMeta

	mu      sync.Mutex
	started bool      // headers and the role chunk are written
	last    time.Time // of the last write (or the start of the request)
	err     error     // the first write error: the client is gone
	buf     []byte
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
	empty := ""
	s.chunk(chunkDelta{Role: chat.RoleAssistant, Content: &empty}, nil, nil)
}

// delta is the emit function given to the gateway.
func (s *sseStream) delta(d chat.Delta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if d.Reasoning != "" {
		s.chunk(chunkDelta{ReasoningContent: d.Reasoning}, nil, nil)
	}
	if d.Content != "" {
		c := d.Content
		s.chunk(chunkDelta{Content: &c}, nil, nil)
	}
	s.flushLocked()
	return s.err
}

// finish writes the final chunk and [DONE].
func (s *sseStream) finish(resp *chat.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	fr := resp.FinishReason
	u := resp.Usage
	s.chunk(chunkDelta{}, &fr, &u)
	s.writeLocked([]byte("[DONE]"))
	s.flushLocked()
}

// heartbeats writes ": keep-alive" whenever nothing was written for d,
// until done is closed.
func (s *sseStream) heartbeats(done <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if since := time.Since(s.last); since < d {
			t.Reset(d - since)
		} else {
			s.start()
			s.raw([]byte(": keep-alive\n\n"))
			s.flushLocked()
			t.Reset(d)
		}
		s.mu.Unlock()
	}
}

// chunk writes one chat.completion.chunk event; s.mu is held.
func (s *sseStream) chunk(d chunkDelta, finish *string, u *chat.Usage) {
	b, err := json.Marshal(chunk{
		chunkMeta: s.meta, Object: "chat.completion.chunk",
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}},
		Usage:   u,
	})
	if err == nil {
		s.writeLocked(b)
	}
}

func (s *sseStream) write(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLocked(data)
}

// writeLocked writes "data: <data>\n\n"; s.mu is held.
func (s *sseStream) writeLocked(data []byte) {
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
