package synthetic

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/route"
)

func model(t *testing.T, id string) *catalog.Model {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := cat.Model(id)
	if !ok {
		t.Fatalf("catalog has no %s", id)
	}
	return m
}

func user(text string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Text: text}}}
}

func TestChatComplete(t *testing.T) {
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, image.NewGray(image.Rect(0, 0, 4, 3))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		req           chat.Request
		wantContent   string
		wantReasoning string
		wantFinish    string
		wantUsage     chat.Usage
	}{
		{
			name:        "echo",
			req:         chat.Request{Model: model(t, "synthetic/echo"), Messages: []chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "be kind"}}}, user("hello   there world")}},
			wantContent: "You said: hello there world", wantFinish: chat.FinishStop,
			wantUsage: chat.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10},
		},
		{
			name:        "empty",
			req:         chat.Request{Model: model(t, "synthetic/echo"), Messages: []chat.Message{user("  ")}},
			wantContent: "You said nothing.", wantFinish: chat.FinishStop,
			wantUsage: chat.Usage{PromptTokens: 0, CompletionTokens: 3, TotalTokens: 3},
		},
		{
			name:        "max tokens",
			req:         chat.Request{Model: model(t, "synthetic/echo"), MaxTokens: 3, Messages: []chat.Message{user("one two three four")}},
			wantContent: "You said: one", wantFinish: chat.FinishLength,
			wantUsage: chat.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7},
		},
		{
			name:          "reasoning low",
			req:           chat.Request{Model: model(t, "synthetic/thinker"), ReasoningEffort: "low", Messages: []chat.Message{user("hi")}},
			wantReasoning: "The last message has 1 words and 0 images.",
			wantContent:   "You said: hi", wantFinish: chat.FinishStop,
			wantUsage: chat.Usage{PromptTokens: 1, CompletionTokens: 9 + 3, TotalTokens: 13, ReasoningTokens: 9},
		},
		{
			name:          "reasoning high",
			req:           chat.Request{Model: model(t, "synthetic/thinker"), ReasoningEffort: "high", Messages: []chat.Message{user("hi")}},
			wantReasoning: "The last message has 1 words and 0 images. The conversation has 1 messages. The answer repeats the message and describes each image.",
			wantContent:   "You said: hi", wantFinish: chat.FinishStop,
			wantUsage: chat.Usage{PromptTokens: 1, CompletionTokens: 9 + 5 + 9 + 3, TotalTokens: 27, ReasoningTokens: 9 + 5 + 9},
		},
		{
			name:          "reasoning counts toward max tokens",
			req:           chat.Request{Model: model(t, "synthetic/thinker"), ReasoningEffort: "low", MaxTokens: 10, Messages: []chat.Message{user("hi")}},
			wantReasoning: "The last message has 1 words and 0 images.",
			wantContent:   "You", wantFinish: chat.FinishLength,
			wantUsage: chat.Usage{PromptTokens: 1, CompletionTokens: 10, TotalTokens: 11, ReasoningTokens: 9},
		},
		{
			name: "vision",
			req: chat.Request{Model: model(t, "synthetic/thinker"), Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
				{Text: "what is this"},
				{Image: &chat.Image{MediaType: "image/png", Data: pngBuf.Bytes()}},
				{Image: &chat.Image{MediaType: "image/webp", Data: []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")}},
			}}}},
			wantContent: "You said: what is this Image 1 is image/png, 4x3 pixels, " + strconv.Itoa(pngBuf.Len()) + " bytes. Image 2 is image/webp, 16 bytes.",
			wantFinish:  chat.FinishStop,
			wantUsage:   chat.Usage{PromptTokens: 3 + 2*ImageTokens, CompletionTokens: 19, TotalTokens: 3 + 2*ImageTokens + 19},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := NewChat().Complete(context.Background(), &tt.req)
			if err != nil {
				t.Fatalf("Complete = %v", err)
			}
			if resp.Content != tt.wantContent || resp.Reasoning != tt.wantReasoning || resp.FinishReason != tt.wantFinish || resp.Usage != tt.wantUsage {
				t.Errorf("Complete = %q / %q / %s / %+v; want %q / %q / %s / %+v", resp.Content, resp.Reasoning, resp.FinishReason, resp.Usage,
					tt.wantContent, tt.wantReasoning, tt.wantFinish, tt.wantUsage)
			}

			// The stream says the same, a word per delta, reasoning first.
			var content, reasoning strings.Builder
			deltas, contentStarted := 0, false
			sresp, err := NewChat().Stream(context.Background(), &tt.req, chat.WriterFunc(func(d chat.Delta) error {
				deltas++
				if (d.Content == "") == (d.Reasoning == "") {
					t.Errorf("delta %+v; want exactly one of content or reasoning", d)
				}
				if d.Reasoning != "" && contentStarted {
					t.Errorf("reasoning delta %q after content", d.Reasoning)
				}
				if d.Content != "" {
					contentStarted = true
				}
				if w := strings.Fields(d.Content + d.Reasoning); len(w) != 1 {
					t.Errorf("delta %+v has %d words; want 1", d, len(w))
				}
				content.WriteString(d.Content)
				reasoning.WriteString(d.Reasoning)
				return nil
			}))
			if err != nil {
				t.Fatalf("Stream = %v", err)
			}
			if content.String() != tt.wantContent || reasoning.String() != tt.wantReasoning || sresp.FinishReason != tt.wantFinish || sresp.Usage != tt.wantUsage {
				t.Errorf("Stream = %q / %q / %s / %+v; want %q / %q / %s / %+v", content.String(), reasoning.String(), sresp.FinishReason, sresp.Usage,
					tt.wantContent, tt.wantReasoning, tt.wantFinish, tt.wantUsage)
			}
			if deltas != tt.wantUsage.CompletionTokens {
				t.Errorf("Stream sent %d deltas; want one per completion token, %d", deltas, tt.wantUsage.CompletionTokens)
			}
		})
	}
}

func TestChatFail(t *testing.T) {
	req := &chat.Request{Model: model(t, "synthetic/echo"), Messages: []chat.Message{user("fail: please")}}
	_, err := NewChat().Complete(context.Background(), req)
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamFailed || ue.Status != 502 {
		t.Fatalf("Complete(fail:) = %v; want a 502 UpstreamFailed", err)
	}
	var got []string
	resp, err := NewChat().Stream(context.Background(), req, chat.WriterFunc(func(d chat.Delta) error {
		got = append(got, d.Content)
		return nil
	}))
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamFailed {
		t.Fatalf("Stream(fail:) = %v; want UpstreamFailed", err)
	}
	if len(got) != 1 || got[0] != "You" {
		t.Errorf("Stream(fail:) deltas before the failure = %q; want [You]", got)
	}
	// The usage so far, exact: "fail: please" is 2 tokens, "You" 1.
	if want := (chat.Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3}); resp == nil || resp.Usage != want {
		t.Errorf("Stream(fail:) response %+v; want the usage so far %+v", resp, want)
	}
}

func TestChatStreamStops(t *testing.T) {
	req := &chat.Request{Model: model(t, "synthetic/echo"), Messages: []chat.Message{user("a b c d e")}}
	stop := errors.New("client gone")
	n := 0
	resp, err := NewChat().Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	}))
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("Stream with failing emit = %v after %d deltas; want %v after 2", err, n, stop)
	}
	// The usage so far, exact: 5 prompt tokens, and the two deltas handed
	// to the writer.
	if want := (chat.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}); resp == nil || resp.Usage != want {
		t.Errorf("Stream with failing emit: response %+v; want the usage so far %+v", resp, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err = NewChat().Stream(ctx, req, chat.WriterFunc(func(chat.Delta) error { return nil }))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream with cancelled ctx = %v; want context.Canceled", err)
	}
	if resp != nil && resp.Usage.CompletionTokens != 0 {
		t.Errorf("Stream with cancelled ctx: response %+v; want no output counted", resp)
	}
}

// TestChatPace checks that a model whose catalog entry sets
// tokens_per_second pauses 1/tokens_per_second before each streamed delta,
// and as long as the completion's tokens take before a whole answer, and
// that an unpaced model never pauses.
func TestChatPace(t *testing.T) {
	paced := *model(t, "synthetic/echo")
	paced.TokensPerSecond = 50
	tests := []struct {
		name   string
		model  *catalog.Model
		stream bool
		want   []time.Duration
	}{
		{"paced stream", &paced, true, []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}},
		{"paced answer", &paced, false, []time.Duration{100 * time.Millisecond}},
		{"unpaced stream", model(t, "synthetic/echo"), true, nil},
		{"unpaced answer", model(t, "synthetic/echo"), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pauses []time.Duration
			c := &Chat{wait: func(ctx context.Context, d time.Duration) error {
				pauses = append(pauses, d)
				return ctx.Err()
			}}
			req := &chat.Request{Model: tt.model, Messages: []chat.Message{user("a b c")}} // 5 tokens: You said: a b c
			var err error
			if tt.stream {
				_, err = c.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = c.Complete(context.Background(), req)
			}
			if err != nil || !slices.Equal(pauses, tt.want) {
				t.Errorf("pauses = %v, error %v; want %v, nil", pauses, err, tt.want)
			}
		})
	}
}

func TestChatFailTriggers(t *testing.T) {
	type r = chattest.Routing
	tests := []struct {
		text, model string
		want        *r // nil: plain fail: (after the first delta) or no failure, as fail says
		plain       bool
	}{
		{"fail:503 busy", "synthetic/echo", &r{Class: route.Transient, Status: 503, Action: route.Again}, false},
		{"fail:429", "synthetic/echo", &r{Class: route.RateLimited, Status: 429, Action: route.Again}, false},
		{"fail:401", "synthetic/echo", &r{Class: route.KeyRefused, Status: 401, Action: route.Next}, false},
		{"fail:404", "synthetic/echo", &r{Class: route.Unsupported, Status: 404, Action: route.Next}, false},
		{"fail:400 no", "synthetic/echo", &r{Class: route.Final, Status: 400, Action: route.Stop}, false},
		{"fail:inband", "synthetic/echo", &r{Class: route.Transient, Status: 529, Action: route.Again}, false},
		{"fail:drop\nnow", "synthetic/echo", &r{Class: route.Transient, Reason: "dropped", Action: route.Again}, false},
		{"fail:503@synthetic/echo", "synthetic/echo", &r{Class: route.Transient, Status: 503, Action: route.Again}, false},
		{"fail:503@synthetic/echo", "synthetic/thinker", nil, false}, // another model answers
		{"fail: 503", "synthetic/echo", nil, true},                   // a space: plain fail:
		{"fail:399", "synthetic/echo", nil, true},
		{"fail:5030", "synthetic/echo", nil, true},
		{"fail:please", "synthetic/echo", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.text+"/"+tt.model, func(t *testing.T) {
			req := &chat.Request{Model: model(t, tt.model), Messages: []chat.Message{user(tt.text)}}
			_, cerr := NewChat().Complete(context.Background(), req)
			var deltas int
			_, serr := NewChat().Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { deltas++; return nil }))
			switch {
			case tt.want != nil:
				chattest.CheckRouting(t, cerr, *tt.want)
				chattest.CheckRouting(t, serr, *tt.want)
				if deltas != 0 {
					t.Errorf("Stream wrote %d deltas before failing; want none", deltas)
				}
			case tt.plain:
				var ue *chat.UpstreamError
				if !errors.As(cerr, &ue) || ue.Status != 502 || !errors.As(serr, &ue) || deltas != 1 {
					t.Errorf("Complete = %v, Stream = %v after %d deltas; want plain fail: (502, and a failure after the first delta)", cerr, serr, deltas)
				}
			default:
				if cerr != nil || serr != nil {
					t.Errorf("Complete = %v, Stream = %v; want an answer", cerr, serr)
				}
			}
		})
	}
}

// TestChatPaceCancel checks that a pause ends when the context does: a
// paced stream or answer whose context is cancelled returns at once with
// context.Canceled instead of waiting out its hour.
func TestChatPaceCancel(t *testing.T) {
	slow := *model(t, "synthetic/echo")
	slow.TokensPerSecond = 1
	req := &chat.Request{Model: &slow, Messages: []chat.Message{user("a b c")}}
	ctx, cancel := context.WithCancel(context.Background())
	c := NewChat()
	done := make(chan [3]error, 1)
	go func() {
		var errs [3]error
		errs[0] = c.pause(ctx, time.Hour)
		_, errs[1] = c.Complete(ctx, req)
		_, errs[2] = c.Stream(ctx, req, chat.WriterFunc(func(chat.Delta) error { return nil }))
		done <- errs
	}()
	cancel()
	select {
	case errs := <-done:
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("call %d after cancel = %v; want context.Canceled", i, err)
			}
		}
	case <-time.After(time.Minute): // the pauses add up to over an hour
		t.Fatal("a paused call did not stop when its context was cancelled")
	}
}

// TestChatPromptCache runs a conversation with prompt_cache_keys through
// one provider, in order: each request's cached tokens are the prompt
// tokens of the leading messages it shares with the previous request
// with its key; no key, no cache.
func TestChatPromptCache(t *testing.T) {
	sys := chat.Message{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "You are a careful assistant."}}} // 5 tokens
	reply := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "You said: one two"}}}       // 4 tokens
	steps := []struct {
		name   string
		key    string
		msgs   []chat.Message
		stream bool
		want   int // cached tokens
	}{
		{"first with key a", "a", []chat.Message{sys, user("one two")}, false, 0},
		{"next turn with key a", "a", []chat.Message{sys, user("one two"), reply, user("three")}, true, 5 + 2},
		{"same again with key a", "a", []chat.Message{sys, user("one two"), reply, user("three")}, false, 5 + 2 + 4 + 1},
		{"key b has its own", "b", []chat.Message{sys, user("one two")}, false, 0},
		{"no key", "", []chat.Message{sys, user("one two")}, false, 0},
		{"key a, another system prompt", "a", []chat.Message{user("one two")}, true, 0},
	}
	c := NewChat()
	th := model(t, "synthetic/thinker")
	for _, s := range steps {
		req := &chat.Request{Model: th, Messages: s.msgs, PromptCacheKey: s.key}
		var resp *chat.Response
		var err error
		if s.stream {
			resp, err = c.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
		} else {
			resp, err = c.Complete(context.Background(), req)
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if resp.Usage.CachedTokens != s.want || resp.Usage.CachedTokens > resp.Usage.PromptTokens {
			t.Errorf("%s: cached tokens = %d of %d; want %d", s.name, resp.Usage.CachedTokens, resp.Usage.PromptTokens, s.want)
		}
	}
}

// TestPromptCacheBound checks that the cache holds at most maxCacheKeys
// keys: a new key beyond them empties it first.
func TestPromptCacheBound(t *testing.T) {
	var c promptCache
	m := []cachedMessage{{sum: 1, tokens: 3}}
	for i := range maxCacheKeys {
		c.read(strconv.Itoa(i), m)
	}
	if got := c.read("0", m); got != 3 {
		t.Errorf("read(0) with the cache full = %d; want 3", got)
	}
	c.read("new", m)
	if n := len(c.keys); n != 1 {
		t.Errorf("keys after a new key beyond the bound = %d; want 1", n)
	}
	if got := c.read("1", m); got != 0 {
		t.Errorf("read(1) after the cache was emptied = %d; want 0", got)
	}
}
