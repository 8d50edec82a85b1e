// Package synthetic is the built-in test provider: it generates without
// calling anyone, deterministically, so that a fresh checkout, the tests and
// the benchmarks run the whole pipeline with no credentials and no cost.
//
// Chat is its chat provider (models synthetic/echo and synthetic/thinker).
//
// Failures on request, for the tests and demos of failure paths and of
// routing (retries, fallbacks): a chat whose last user message begins with
// one of these fails so (any other text after FailPrefix is plain fail:).
//
//	fail: ...        a 502 (Complete); the first content delta, then a
//	                 mid-stream error (Stream): a failure after the answer
//	                 began, which no fallback can hide
//	fail:503 ...     the upstream status 503 (any of 400-599: fail:429,
//	                 fail:401, fail:400, ...), before any output
//	fail:inband ...  a stream that fails before its first token with an
//	                 in-band overload (status 529, as Anthropic's
//	                 overloaded_error event inside a 200 stream; Complete
//	                 fails the same, as an error inside a 200 body)
//	fail:drop ...    a stream dropped before its first token (no status;
//	                 Complete: a body cut short)
//
// A rich trigger may name the one model it fails, so that a fallback can
// answer: "fail:503@synthetic/echo" fails synthetic/echo and lets
// synthetic/thinker answer the same conversation.
package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of gif images
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// ImageTokens is what one input image counts for in prompt_tokens.
const ImageTokens = 85

// defaultMaxTokens caps a completion when neither the request nor the
// model says.
const defaultMaxTokens = 4096

// Chat is the synthetic chat provider. A last user message beginning with
// FailPrefix makes it fail with a 502-kind *chat.UpstreamError: before any
// output for Complete, after the first content delta for Stream; the rich
// triggers of the package doc (fail:503, fail:inband, fail:drop) fail
// before any output, as a failure a fallback can hide. Its answer is "You said: " and the
// words of the last user message, then one sentence per image of that
// message describing it (media type, pixel size, bytes). With a reasoning
// effort it first reasons (1, 2 or 3 sentences for low, medium, high).
//
// Tokens are whitespace-separated words, for the prompt and the completion
// alike, plus ImageTokens per image; so usage is honest and predictable.
// The reasoning words are the usage's ReasoningTokens (part of the
// completion tokens).
// Streams send each word as its own delta (with its leading space). The
// answer ends before the first stop sequence. With
// tools or a response_format it calls tools or answers JSON by the rules
// in tools.go (the trigger: name a tool in the last user message). Chat is
// safe for concurrent use.
//
// A request with a prompt_cache_key reads the leading messages it shares
// with the previous request with that key from a prompt cache: their
// prompt tokens are the usage's CachedTokens, as OpenAI reports its cache
// hits (see promptCache).
//
// A model whose catalog entry sets tokens_per_second answers at that pace:
// Stream waits 1/tokens_per_second before each delta, Complete waits as
// long as the completion's tokens take. Either stops waiting, and returns
// ctx's error, when ctx is done.
type Chat struct {
	// wait pauses for d, or until ctx is done (returning its error); nil
	// means a timer. Tests record the pauses instead.
	wait  func(ctx context.Context, d time.Duration) error
	cache promptCache
}

var (
	_ chat.Provider         = (*Chat)(nil)
	_ chat.ImageBytesNeeder = (*Chat)(nil)
)

// NewChat returns the synthetic chat provider.
func NewChat() *Chat { return &Chat{} }

// NeedsImageBytes reports true: Chat describes images from their bytes, so
// the gateway fetches image URLs for it.
func (*Chat) NeedsImageBytes() bool { return true }

// Complete returns the whole answer.
func (c *Chat) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	p := plan(req)
	if p.early != nil {
		return nil, p.early
	}
	if p.fail {
		return nil, failure()
	}
	c.cached(req, &p)
	if err := c.pause(ctx, time.Duration(p.usage.CompletionTokens)*gap(req.Model)); err != nil {
		return nil, err
	}
	resp := &chat.Response{FinishReason: p.finish, Usage: p.usage, ToolCalls: p.calls}
	resp.Reasoning = strings.Join(p.reasoning, " ")
	resp.Content = strings.Join(p.content, " ")
	if p.json != "" {
		resp.Content = p.json
	}
	return resp, ctx.Err()
}

// Stream writes the reasoning words, then the content words, one flushed
// delta each, paced as the model's catalog entry says.
// It stops with ctx's error when ctx is done. A stream that fails after
// its first token (ctx done, w failed, or a plain fail:) returns with its
// error the usage so far, exact: the prompt, and a token for each delta
// handed to w.
func (c *Chat) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	p := plan(req)
	if p.early != nil {
		return nil, p.early
	}
	c.cached(req, &p)
	g := gap(req.Model)
	sent := 0 // tokens handed to w
	emit := func(d chat.Delta) error {
		if err := c.pause(ctx, g); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sent++
		if err := w.Delta(d); err != nil {
			return err
		}
		return w.Flush()
	}
	cut := func(err error) (*chat.Response, error) {
		u := chat.Usage{PromptTokens: p.usage.PromptTokens, CompletionTokens: sent}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return &chat.Response{Usage: u}, err
	}
	for i, word := range p.reasoning {
		if i > 0 {
			word = " " + word
		}
		if err := emit(chat.Delta{Reasoning: word}); err != nil {
			return cut(err)
		}
	}
	if p.json != "" {
		for _, s := range pieces(p.json) {
			if err := emit(chat.Delta{Content: s}); err != nil {
				return cut(err)
			}
		}
	}
	for i, word := range p.content {
		if p.json != "" {
			break
		}
		if i > 0 {
			word = " " + word
		}
		if err := emit(chat.Delta{Content: word}); err != nil {
			return cut(err)
		}
		if p.fail {
			return cut(failure())
		}
	}
	for i, c := range p.calls {
		if err := emit(chat.Delta{ToolCall: &chat.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name}}); err != nil {
			return cut(err)
		}
		for _, s := range pieces(c.Arguments) {
			if err := emit(chat.Delta{ToolCall: &chat.ToolCallDelta{Index: i, Arguments: s}}); err != nil {
				return cut(err)
			}
		}
	}
	if p.fail { // no content at all: fail anyway
		return cut(failure())
	}
	return &chat.Response{FinishReason: p.finish, Usage: p.usage}, nil
}

// cached sets a's cached tokens from the prompt cache, for a request with
// a prompt_cache_key.
func (c *Chat) cached(req *chat.Request, a *answer) {
	if req.PromptCacheKey != "" {
		a.usage.CachedTokens = c.cache.read(req.PromptCacheKey, a.prompt)
	}
}

// gap is the time between two tokens of model m: 0 unless its catalog
// entry paces it.
func gap(m *catalog.Model) time.Duration {
	if m == nil || m.TokensPerSecond <= 0 {
		return 0
	}
	return time.Second / time.Duration(m.TokensPerSecond)
}

// pause waits d, or until ctx is done, and returns ctx's error then.
func (c *Chat) pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if c.wait != nil {
		return c.wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func failure() error {
	return &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Status: 502,
		Message: "synthetic failure requested by a message starting with " + FailPrefix}
}

// failures returns what text (the last user message, trimmed) asks of
// model: a rich trigger's failure before any output (early), or plain
// fail: (see the package doc); neither for a rich trigger that names
// another model, or text without FailPrefix.
func failures(text, model string) (early *chat.UpstreamError, plain bool) {
	trigger, only, named, ok := failTrigger(text)
	if !ok {
		return nil, false
	}
	msg := "synthetic failure requested by a message starting with " + FailPrefix + trigger
	status, err := strconv.Atoi(trigger)
	switch {
	case trigger == "inband":
		early = chat.StatusError("synthetic", 529, nil, msg, errors.New("in-band overloaded_error before the first token"))
	case trigger == "drop":
		early = &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
			Message: msg, Err: io.ErrUnexpectedEOF}
	case err == nil && len(trigger) == 3 && status >= 400 && status <= 599:
		early = chat.StatusError("synthetic", status, nil, msg, fmt.Errorf("status %d on request", status))
	default:
		return nil, true
	}
	if named && only != model {
		return nil, false
	}
	return early, false
}

// failTrigger reads a request's failure trigger (see the package doc) in
// text: ok if text begins with FailPrefix; trigger is the word right after
// the prefix ("" for none: "fail: 503" is plain fail:), cut at "@", and
// only the model named after the "@" (named: there is an "@").
func failTrigger(text string) (trigger, only string, named, ok bool) {
	rest, ok := strings.CutPrefix(text, FailPrefix)
	if !ok {
		return "", "", false, false
	}
	trigger = rest
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		trigger = rest[:i]
	}
	trigger, only, named = strings.Cut(trigger, "@")
	return trigger, only, named, true
}

// answer is a planned completion.
type answer struct {
	reasoning, content []string        // words, within the token budget
	json               string          // structured output: the whole content
	calls              []chat.ToolCall // tool calls: the answer, without content
	finish             string
	usage              chat.Usage
	prompt             []cachedMessage     // the prompt's messages, for the cache (with a prompt_cache_key)
	fail               bool                // plain fail: after the first content delta
	early              *chat.UpstreamError // a rich fail: trigger: before any output
}

// plan computes the deterministic answer to req.
func plan(req *chat.Request) answer {
	var a answer
	var last *chat.Message
	for i := range req.Messages {
		m := &req.Messages[i]
		before := a.usage.PromptTokens
		for _, p := range m.Parts {
			if p.Image != nil {
				a.usage.PromptTokens += ImageTokens
			} else {
				a.usage.PromptTokens += len(strings.Fields(p.Text))
			}
		}
		for _, c := range m.ToolCalls {
			a.usage.PromptTokens += 1 + len(pieces(c.Arguments))
		}
		if req.PromptCacheKey != "" {
			a.prompt = append(a.prompt, cachedMessage{sum: fingerprint(m), tokens: a.usage.PromptTokens - before})
		}
		if m.Role == chat.RoleUser {
			last = m
		}
	}
	var text string
	var images []*chat.Image
	if last != nil {
		text = last.Text()
		for _, p := range last.Parts {
			if p.Image != nil {
				images = append(images, p.Image)
			}
		}
	}
	model := ""
	if req.Model != nil {
		model = req.Model.ID
	}
	a.early, a.fail = failures(strings.TrimSpace(text), model)

	words := strings.Fields(text)
	var reasoning []string
	if n := map[string]int{"low": 1, "medium": 2, "high": 3}[req.ReasoningEffort]; n > 0 {
		sentences := []string{
			fmt.Sprintf("The last message has %d words and %d images.", len(words), len(images)),
			fmt.Sprintf("The conversation has %d messages.", len(req.Messages)),
			"The answer repeats the message and describes each image.",
		}
		reasoning = strings.Fields(strings.Join(sentences[:n], " "))
	}
	content := []string{"You", "said:"}
	if len(words) == 0 {
		content = []string{"You", "said", "nothing."}
	}
	content = append(content, words...)
	for i, img := range images {
		content = append(content, strings.Fields(describe(i+1, img))...)
	}
	if ta := toolAnswer(req); ta != nil {
		content = ta
	}
	content = cutAtStop(content, req.Stop)
	if a.calls = toolCalls(req); a.calls != nil {
		content = nil
		a.usage.CompletionTokens = len(reasoning)
		for _, c := range a.calls {
			a.usage.CompletionTokens += 1 + len(pieces(c.Arguments))
		}
		a.reasoning, a.finish = reasoning, chat.FinishToolCalls
		a.usage.ReasoningTokens = len(reasoning)
		a.usage.TotalTokens = a.usage.PromptTokens + a.usage.CompletionTokens
		return a
	}
	if a.json = structured(req, content); a.json != "" {
		a.reasoning, a.finish = reasoning, chat.FinishStop
		a.usage.CompletionTokens = len(reasoning) + len(pieces(a.json))
		a.usage.ReasoningTokens = len(reasoning)
		a.usage.TotalTokens = a.usage.PromptTokens + a.usage.CompletionTokens
		return a
	}

	budget := req.MaxTokens
	if budget <= 0 && req.Model != nil {
		budget = req.Model.MaxTokens
	}
	if budget <= 0 {
		budget = defaultMaxTokens
	}
	a.finish = chat.FinishStop
	if len(reasoning)+len(content) > budget {
		a.finish = chat.FinishLength
		if len(reasoning) > budget {
			reasoning = reasoning[:budget]
		}
		content = content[:budget-len(reasoning)]
	}
	a.reasoning, a.content = reasoning, content
	a.usage.CompletionTokens = len(reasoning) + len(content)
	a.usage.ReasoningTokens = len(reasoning)
	a.usage.TotalTokens = a.usage.PromptTokens + a.usage.CompletionTokens
	return a
}

// describe returns a sentence about image n.
func describe(n int, img *chat.Image) string {
	if img.Data == nil {
		return fmt.Sprintf("Image %d is a link to %s.", n, img.URL)
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil {
		return fmt.Sprintf("Image %d is %s, %dx%d pixels, %d bytes.", n, img.MediaType, cfg.Width, cfg.Height, len(img.Data))
	}
	return fmt.Sprintf("Image %d is %s, %d bytes.", n, img.MediaType, len(img.Data))
}

// Features reports every feature: the synthetic model is deterministic
// (seed and penalties change nothing it could vary) and takes every other
// field by the rules in tools.go.
func (*Chat) Features() chat.Features { return chat.AllFeatures }

// cutAtStop ends the answer (words joined by spaces) before the first
// occurrence of any stop sequence, as an upstream does.
func cutAtStop(words, stop []string) []string {
	if len(stop) == 0 {
		return words
	}
	text := strings.Join(words, " ")
	cut := len(text)
	for _, s := range stop {
		if i := strings.Index(text, s); s != "" && i >= 0 && i < cut {
			cut = i
		}
	}
	if cut == len(text) {
		return words
	}
	return strings.Fields(text[:cut])
}
