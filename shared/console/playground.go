package console

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Playground bounds.
const (
	// maxPlayChatBody bounds a chat request: a conversation and one image
	// (chat.DefaultMaxImageBytes as a base64 data URI).
	maxPlayChatBody = 8 << 20
	maxPlayJobBody  = 64 << 10
	maxPlayMessages = 100
	// streamWriteTimeout is how long one write of a stream may wait for a
	// browser that does not read.
	streamWriteTimeout = time.Minute
)

// playModel is a model as the playground's pickers show it.
type playModel struct {
	ID                string
	Vision, Reasoning bool
	Type              string
	Min, Max, Default int // job models: durations, seconds
}

// playgroundPage is the playground's data.
type playgroundPage struct {
	Accounts   []string
	Account    string // billed by default
	ChatModels []playModel
	JobModels  []playModel
	JobTypes   []string
	Efforts    []string
}

func (c *Console) playground(p *Page, w http.ResponseWriter, r *http.Request) error {
	accts, err := c.cfg.Operator.Accounts(r.Context())
	if err != nil {
		return err
	}
	d := playgroundPage{Accounts: accountIDs(accts), Efforts: []string{"low", "medium", "high"}}
	if len(d.Accounts) > 0 {
		d.Account = d.Accounts[0]
	}
	types := map[string]bool{}
	for _, m := range c.cfg.Catalog.List("", c.configed) {
		switch {
		case m.Type == catalog.TypeChat && c.cfg.Chat != nil:
			pm := playModel{ID: m.ID, Type: m.Type}
			if m.Capabilities != nil {
				pm.Vision, pm.Reasoning = m.Capabilities.Vision, m.Capabilities.Reasoning
			}
			d.ChatModels = append(d.ChatModels, pm)
		case m.Type != catalog.TypeChat && c.cfg.JobService != nil:
			d.JobModels = append(d.JobModels, playModel{ID: m.ID, Type: m.Type, Min: max(m.MinDuration, 1), Max: m.MaxDuration, Default: jobs.DefaultDuration(&m)})
			types[m.Type] = true
		}
	}
	for _, t := range []string{jobs.TypeMusic, jobs.TypeSFX, jobs.TypeVideo} {
		if types[t] {
			d.JobTypes = append(d.JobTypes, t)
		}
	}
	p.Section, p.Title, p.Data, p.Scripts = "playground", "Playground", d, []string{"playground.js"}
	return p.Render(w, r, "playground")
}

// decodeJSON reads r's JSON body (at most limit bytes) into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return &apierr.Error{Kind: apierr.UnsupportedMedia, Code: "unsupported_media_type", Message: "Send JSON (Content-Type: application/json)."}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if me := new(http.MaxBytesError); errors.As(err, &me) {
			return &apierr.Error{Kind: apierr.TooLarge, Code: "too_large", Message: "The request is too large (an image must be 5 MB or less)."}
		}
		return apierr.Invalidf("", "invalid_json", "The request is not valid JSON of the right shape: %v", err)
	}
	return nil
}

// billable returns an error unless account exists: the playground bills
// an account the operator picks, never one it would make up.
func (c *Console) billable(ctx context.Context, account string) error {
	if account == "" {
		return apierr.Invalidf("account", "missing_field", "Pick the account to bill.")
	}
	if _, err := c.cfg.Operator.Account(ctx, account); err != nil {
		if errors.Is(err, credits.ErrAccountNotFound) {
			return &apierr.Error{Kind: apierr.NotFound, Code: "account_not_found", Param: "account", Message: "There is no account " + account + "."}
		}
		return err
	}
	return nil
}

// playChatRequest is a playground chat turn: the conversation so far
// (text), an image for the last user message, and the options.
type playChatRequest struct {
	Account  string `json:"account"`
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ReasoningEffort string `json:"reasoning_effort"`
	Image           string `json:"image"` // a data: URI
}

// params is the chat request of q, streamed.
func (q *playChatRequest) params() (*chat.Params, error) {
	if len(q.Messages) == 0 || len(q.Messages) > maxPlayMessages {
		return nil, apierr.Invalidf("messages", "invalid_value", "Send 1 to %d messages.", maxPlayMessages)
	}
	p := &chat.Params{Model: q.Model, Stream: true}
	if q.ReasoningEffort != "" {
		p.ReasoningEffort = &q.ReasoningEffort
	}
	for i, m := range q.Messages {
		if m.Role != chat.RoleUser && m.Role != chat.RoleAssistant {
			return nil, apierr.Invalidf("messages", "invalid_value", "A message's role is user or assistant.")
		}
		var content any = m.Content
		if i == len(q.Messages)-1 && q.Image != "" {
			if m.Role != chat.RoleUser {
				return nil, apierr.Invalidf("image", "invalid_value", "An image goes with a user message.")
			}
			content = []any{
				map[string]any{"type": "text", "text": m.Content},
				map[string]any{"type": "image_url", "image_url": map[string]string{"url": q.Image}},
			}
		}
		raw, err := json.Marshal(content)
		if err != nil {
			return nil, err
		}
		p.Messages = append(p.Messages, chat.ParamsMessage{Role: m.Role, Content: raw})
	}
	return p, nil
}

// playChat runs one chat turn for the account the operator picked and
// streams it as Server-Sent Events (see sseSink). Errors before the
// stream starts are JSON answers with their status.
func (c *Console) playChat(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var q playChatRequest
	err := decodeJSON(w, r, maxPlayChatBody, &q)
	if err == nil && c.cfg.Chat == nil {
		err = &apierr.Error{Kind: apierr.NotFound, Code: "not_found", Message: "Chat is not available on this server."}
	}
	if err == nil {
		err = c.billable(ctx, q.Account)
	}
	var params *chat.Params
	if err == nil {
		params, err = q.params()
	}
	if err != nil {
		return c.jsonError(w, r, err)
	}
	c.record(ctx, "playground.chat", q.Account, "model "+q.Model)
	s := &sseSink{w: w, rc: http.NewResponseController(w)}
	err = c.cfg.Chat.Run(ctx, q.Account, params, s)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return nil // the browser went away: no one to tell
	case !s.started:
		return c.jsonError(w, r, err)
	}
	status, msg := errorStatus(err)
	if status >= http.StatusInternalServerError {
		c.log.ErrorContext(ctx, "console: playground chat failed", "model", q.Model, "err", err)
	}
	s.event("error", map[string]string{"message": msg})
	s.Flush()
	return nil
}

// sseSink is the playground's chat.Sink: Server-Sent Events of its own
// small shape, which playground.js reads with fetch. Each delta is
// `data: {"content": "..."}` or `data: {"reasoning": "..."}`; the end is
// `event: end` with the finish reason and usage, a failure after the
// start `event: error` with a message. The response is committed at
// Start (the call was admitted).
type sseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	err     error // the first write error: the browser is gone
	buf     []byte
}

// event writes one event (name "" is a plain data event), unflushed.
func (s *sseSink) event(name string, v any) error {
	if s.err != nil {
		return s.err
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	b := s.buf[:0]
	if name != "" {
		b = append(b, "event: "+name+"\n"...)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	s.buf = b
	s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, s.err = s.w.Write(b)
	return s.err
}

// Start implements chat.Sink: it commits the response.
func (s *sseSink) Start() error {
	if err := s.event("start", struct{}{}); err != nil {
		return err
	}
	return s.Flush()
}

// delta is one streamed piece.
type delta struct {
	Content   string `json:"content,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
}

// Delta implements chat.Writer; tool call pieces are not shown.
func (s *sseSink) Delta(d chat.Delta) error {
	if d.Content == "" && d.Reasoning == "" {
		return s.err
	}
	return s.event("", delta{Content: d.Content, Reasoning: d.Reasoning})
}

// Flush implements chat.Writer.
func (s *sseSink) Flush() error {
	if s.err != nil || !s.started {
		return s.err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
	return s.err
}

// End implements chat.Sink: the finish reason and usage.
func (s *sseSink) End(resp *chat.Response) error {
	if err := s.event("end", map[string]any{"finish_reason": resp.FinishReason, "usage": resp.Usage}); err != nil {
		return err
	}
	return s.Flush()
}

// playJobRequest is the playground's job form.
type playJobRequest struct {
	Account  string `json:"account"`
	Type     string `json:"type"`
	Model    string `json:"model"`
	Prompt   string `json:"prompt"`
	Duration int    `json:"duration"`
}

// playJob creates a job for the account the operator picked; the answer
// is the job's state (as /console/jobs/{id}/status), which
// playground.js then polls.
func (c *Console) playJob(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var q playJobRequest
	err := decodeJSON(w, r, maxPlayJobBody, &q)
	if err == nil && c.cfg.JobService == nil {
		err = noJobs
	}
	if err == nil {
		err = c.billable(ctx, q.Account)
	}
	var j *jobs.Job
	if err == nil {
		req := &jobs.CreateRequest{Type: q.Type, Model: q.Model, Prompt: q.Prompt}
		if q.Duration != 0 {
			req.Duration = &q.Duration
		}
		j, err = c.cfg.JobService.Create(ctx, q.Account, req, "", "")
	}
	if err != nil {
		return c.jsonError(w, r, err)
	}
	c.record(ctx, "playground.job", j.ID, "account "+q.Account+", model "+q.Model)
	return writeJSON(w, http.StatusCreated, jobState{ID: j.ID, Account: j.Account, Status: j.Status, Timeline: timeline(j)})
}
