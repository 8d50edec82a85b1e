package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// messageMeta is what the events and the Message object of one answer
// share.
type messageMeta struct {
	id    string // msg_...
	model string // the model that answers, once Begin named it; the one asked for until then
	// omitThinking: thinking.display "omitted": thinking blocks carry
	// their signature, not their text.
	omitThinking bool
}

// Thoughts of providers other than Claude (Gemini's thought signatures,
// OpenAI's encrypted reasoning), and tool calls a provider signed
// (Gemini's functionCall signatures), travel in thinking blocks, so that
// a Messages client sends them back as it sends back Claude's: a
// Thought's signature as foreignPrefix + its kind + ":" + the signature,
// a signed call's as foreignPrefix + callMark + its signer + ":" + the
// signature, in an empty thinking block right before the call's
// tool_use. Claude's signatures are sent as they are; the decoder
// (thinkingOf) gives each back to its kind.
const (
	foreignPrefix = "genway:"
	callMark      = "call."
)

// encodeSignature returns the thinking block signature of t.
func encodeSignature(t chat.Thought) string {
	if t.Provider == "anthropic" || t.Provider == "bedrock" || t.Signature == "" {
		return t.Signature
	}
	return foreignPrefix + t.Provider + ":" + t.Signature
}

// callSignature returns the signature of the thinking block that marks
// a tool call signed by signer.
func callSignature(signer, sig string) string {
	return foreignPrefix + callMark + signer + ":" + sig
}

// foreignSignature splits a signature that encodeSignature or
// callSignature made into its kind and the provider's signature.
func foreignSignature(sig string) (kind, s string, ok bool) {
	rest, ok := strings.CutPrefix(sig, foreignPrefix)
	if !ok {
		return "", "", false
	}
	kind, s, ok = strings.Cut(rest, ":")
	return kind, s, ok && kind != ""
}

// messageBlock is a content block of an answer: text, thinking,
// redacted_thinking or tool_use; each type's fields are set.
type messageBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// messageObject is the Message object: a whole answer, or, with empty
// content, message_start's.
type messageObject struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []messageBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        messageUsage   `json:"usage"`
}

// messageUsage is usage in the Messages API's shape: input_tokens
// without the cache reads and writes, which have counts of their own (by
// lifetime in cache_creation), as Anthropic counts them; and Genway's
// cost, the credits the answer was charged (Anthropic's clients ignore
// it), on the answer's end only.
type messageUsage struct {
	InputTokens              int             `json:"input_tokens"`
	CacheCreationInputTokens int             `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int             `json:"cache_read_input_tokens"`
	CacheCreation            cacheCreation   `json:"cache_creation"`
	OutputTokens             int             `json:"output_tokens"`
	ServiceTier              string          `json:"service_tier,omitempty"`
	Cost                     *credits.Amount `json:"cost,omitempty"`
}

// cacheCreation splits the cache writes by lifetime.
type cacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

// messagesUsage returns u in the Messages API's shape, with its cost.
func messagesUsage(u *chat.Usage, tier string) messageUsage {
	writes := u.CacheWriteTokens + u.CacheWrite1hTokens
	cost := u.Cost
	mu := messageUsage{InputTokens: max(u.PromptTokens-u.CachedTokens-writes, 0), CacheCreationInputTokens: writes,
		CacheReadInputTokens: u.CachedTokens, CacheCreation: cacheCreation{Ephemeral5m: u.CacheWriteTokens, Ephemeral1h: u.CacheWrite1hTokens},
		OutputTokens: u.CompletionTokens, Cost: &cost}
	switch tier {
	case "default":
		mu.ServiceTier = "standard"
	case "priority":
		mu.ServiceTier = tier
	}
	return mu
}

// stopReason is the stop_reason of an answer that ended with finish and
// called tools (toolUse) or not.
func stopReason(finish string, toolUse bool) string {
	switch {
	case finish == chat.FinishLength:
		return "max_tokens"
	case finish == chat.FinishContentFilter:
		return "refusal"
	case toolUse || finish == chat.FinishToolCalls:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// toolInput is a tool call's arguments as a tool_use block's input: the
// JSON object they are, or {} when they are not one.
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage("{}")
	}
	return b
}

// thoughtBlocks returns the blocks of a whole answer's reasoning: each
// Thought's (a redacted_thinking block, or a thinking block with its
// text and signature), after an unsigned thinking block of the answer's
// reasoning text when no Thought carries it (a provider that signs
// none); with omit (thinking.display "omitted"), thinking blocks carry
// no text, and one without a signature is left out.
func thoughtBlocks(resp *chat.Response, omit bool) []messageBlock {
	var out []messageBlock
	thinking := func(text, sig string) {
		if omit {
			if sig == "" {
				return
			}
			text = ""
		}
		out = append(out, messageBlock{Type: "thinking", Thinking: &text, Signature: &sig})
	}
	texted := false
	for _, t := range resp.Thoughts {
		texted = texted || t.Text != ""
	}
	if !texted && resp.Reasoning != "" {
		thinking(resp.Reasoning, "")
	}
	for _, t := range resp.Thoughts {
		if t.Redacted != "" {
			out = append(out, messageBlock{Type: "redacted_thinking", Data: t.Redacted})
			continue
		}
		thinking(t.Text, encodeSignature(t))
	}
	return out
}

// messageJSONSink writes a non-streamed answer: one Message object.
type messageJSONSink struct {
	jsonSink // Start, Delta, Flush, the keep-alive
	meta     messageMeta
}

// Begin names the model that answers, and the attempts in the header.
func (j *messageJSONSink) Begin(a chat.Answer) error {
	j.meta.model = a.Model
	return j.jsonSink.Begin(a)
}

// End writes the Message: a native answer's as the upstream sent it,
// with Genway's id, model and usage.cost.
func (j *messageJSONSink) End(resp *chat.Response) error {
	if resp.Native != nil {
		return j.writeBody(nativeBody(resp, j.meta.id, j.meta.model, resp.Usage.Cost))
	}
	o := messageObject{ID: j.meta.id, Type: "message", Role: chat.RoleAssistant, Model: j.meta.model,
		Content: thoughtBlocks(resp, j.meta.omitThinking), Usage: messagesUsage(&resp.Usage, resp.ServiceTier)}
	if resp.Content != "" {
		o.Content = append(o.Content, messageBlock{Type: "text", Text: &resp.Content})
	}
	for _, tc := range resp.ToolCalls {
		if tc.Signature != "" {
			empty, sig := "", callSignature(tc.SignedBy, tc.Signature)
			o.Content = append(o.Content, messageBlock{Type: "thinking", Thinking: &empty, Signature: &sig})
		}
		o.Content = append(o.Content, messageBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
	}
	if o.Content == nil {
		o.Content = []messageBlock{}
	}
	sr := stopReason(resp.FinishReason, len(resp.ToolCalls) > 0)
	o.StopReason = &sr
	return j.writeBody(&o)
}

// fail writes the error of a committed answer (after keep-alive spaces)
// in Anthropic's envelope.
func (j *messageJSONSink) fail(env envelope) {
	_, a := anthropicError(env)
	j.writeBody(a)
}

// Block kinds of messagesEncoder.open.
const (
	blockNone = iota
	blockText
	blockThinking
	blockTool
)

// messagesEncoder is the Messages API's stream format: named events, the
// message started (message_start) with the answer's first token, then
// its content blocks in order, each opened (content_block_start), grown
// (content_block_delta: text_delta, thinking_delta, signature_delta,
// input_json_delta, the first one "") and closed (content_block_stop): a
// delta's reasoning is a thinking block's text, its Thought the block's
// signature (and its end), or a redacted_thinking block; its content a
// text block's; the first piece of a tool call opens a tool_use block,
// the others are its input. The end is message_delta (stop_reason, and
// the usage: cumulative, the whole answer's) and message_stop; a failure
// after the start is an error event.
type messagesEncoder struct {
	meta messageMeta
	json jsonEvents

	next    int   // the index of the next block
	open    int   // the open block's kind (blockNone: none)
	openIdx int   // its index
	calls   []int // each tool call's block index, by its Index
	toolUse bool  // a tool_use block was sent
}

// event types, reused across the stream's events.
type (
	blockStartEvent struct {
		Type         string        `json:"type"`
		Index        int           `json:"index"`
		ContentBlock *messageBlock `json:"content_block"`
	}
	blockDeltaEvent struct {
		Type  string     `json:"type"`
		Index int        `json:"index"`
		Delta blockDelta `json:"delta"`
	}
	blockDelta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	blockStopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageStartEvent struct {
		Type    string         `json:"type"`
		Message *messageObject `json:"message"`
	}
	messageDeltaEvent struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage messageUsage `json:"usage"`
	}
	typeEvent struct {
		Type string `json:"type"`
	}
	errorEvent struct {
		Type  string           `json:"type"`
		Error anthropicErrBody `json:"error"`
	}
)

// append appends the SSE event typ with data v: every event is named, as
// the Anthropic SDK skips the unnamed.
func (e *messagesEncoder) append(b []byte, typ string, v any) []byte {
	return e.json.event(b, typ, v)
}

func (e *messagesEncoder) model(id string) { e.meta.model = id }

func (e *messagesEncoder) start(b []byte) []byte {
	o := &messageObject{ID: e.meta.id, Type: "message", Role: chat.RoleAssistant, Model: e.meta.model, Content: []messageBlock{}}
	return e.append(b, "message_start", messageStartEvent{Type: "message_start", Message: o})
}

func (e *messagesEncoder) ping(b []byte) []byte {
	return e.append(b, "ping", typeEvent{Type: "ping"})
}

// openBlock opens a block of kind with its start block, unless one of
// that kind is open (a tool_use block is always new).
func (e *messagesEncoder) openBlock(b []byte, kind int, start *messageBlock) []byte {
	if e.open == kind && kind != blockTool {
		return b
	}
	b = e.closeBlock(b)
	e.open, e.openIdx = kind, e.next
	e.next++
	return e.append(b, "content_block_start", blockStartEvent{Type: "content_block_start", Index: e.openIdx, ContentBlock: start})
}

// closeBlock closes the open block, if any.
func (e *messagesEncoder) closeBlock(b []byte) []byte {
	if e.open == blockNone {
		return b
	}
	e.open = blockNone
	return e.append(b, "content_block_stop", blockStopEvent{Type: "content_block_stop", Index: e.openIdx})
}

// blockDelta appends a content_block_delta of block index.
func (e *messagesEncoder) blockDelta(b []byte, index int, d blockDelta) []byte {
	return e.append(b, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: index, Delta: d})
}

var (
	emptyText     = ""
	thinkingStart = messageBlock{Type: "thinking", Thinking: &emptyText, Signature: &emptyText}
	textStart     = messageBlock{Type: "text", Text: &emptyText}
)

func (e *messagesEncoder) delta(b []byte, d chat.Delta) []byte {
	if d.Reasoning != "" && !e.meta.omitThinking {
		b = e.openBlock(b, blockThinking, &thinkingStart)
		b = e.blockDelta(b, e.openIdx, blockDelta{Type: "thinking_delta", Thinking: &d.Reasoning})
	}
	if d.Thought != nil {
		b = e.thought(b, d.Thought)
	}
	if d.Content != "" {
		b = e.openBlock(b, blockText, &textStart)
		b = e.blockDelta(b, e.openIdx, blockDelta{Type: "text_delta", Text: &d.Content})
	}
	if tc := d.ToolCall; tc != nil {
		b = e.toolCall(b, tc)
	}
	return b
}

// thought closes the reasoning before it: a redacted_thinking block, or
// the thinking block's signature (in a block of its own, with its text,
// when no reasoning was streamed before it).
func (e *messagesEncoder) thought(b []byte, t *chat.Thought) []byte {
	switch {
	case t.Redacted != "":
		b = e.closeBlock(b)
		idx := e.next
		e.next++
		b = e.append(b, "content_block_start", blockStartEvent{Type: "content_block_start", Index: idx,
			ContentBlock: &messageBlock{Type: "redacted_thinking", Data: t.Redacted}})
		return e.append(b, "content_block_stop", blockStopEvent{Type: "content_block_stop", Index: idx})
	case t.Signature != "":
		if e.open != blockThinking {
			b = e.openBlock(b, blockThinking, &thinkingStart)
			if t.Text != "" && !e.meta.omitThinking {
				b = e.blockDelta(b, e.openIdx, blockDelta{Type: "thinking_delta", Thinking: &t.Text})
			}
		}
		sig := encodeSignature(*t)
		b = e.blockDelta(b, e.openIdx, blockDelta{Type: "signature_delta", Signature: &sig})
		return e.closeBlock(b)
	case e.open == blockThinking:
		return e.closeBlock(b)
	}
	return b
}

// toolCall writes a piece of a tool call: its first opens its tool_use
// block (after the thinking block that marks its signature, if it has
// one), the others grow its input. A piece of a call whose block was
// closed (calls streamed interleaved) grows it still, by its index, as
// the Anthropic SDK accumulates blocks.
func (e *messagesEncoder) toolCall(b []byte, tc *chat.ToolCallDelta) []byte {
	if tc.ID != "" {
		if tc.Signature != "" {
			sig := callSignature(tc.SignedBy, tc.Signature)
			b = e.closeBlock(b) // a block of its own
			b = e.openBlock(b, blockThinking, &thinkingStart)
			b = e.blockDelta(b, e.openIdx, blockDelta{Type: "signature_delta", Signature: &sig})
		}
		b = e.openBlock(b, blockTool, &messageBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage("{}")})
		e.toolUse = true
		for len(e.calls) <= tc.Index {
			e.calls = append(e.calls, -1)
		}
		e.calls[tc.Index] = e.openIdx
		b = e.blockDelta(b, e.openIdx, blockDelta{Type: "input_json_delta", PartialJSON: &emptyText})
	}
	if tc.Arguments == "" || tc.Index < 0 || tc.Index >= len(e.calls) || e.calls[tc.Index] < 0 {
		return b
	}
	return e.blockDelta(b, e.calls[tc.Index], blockDelta{Type: "input_json_delta", PartialJSON: &tc.Arguments})
}

func (e *messagesEncoder) end(b []byte, resp *chat.Response) []byte {
	b = e.closeBlock(b)
	ev := messageDeltaEvent{Type: "message_delta", Usage: messagesUsage(&resp.Usage, resp.ServiceTier)}
	ev.Delta.StopReason = stopReason(resp.FinishReason, e.toolUse || len(resp.ToolCalls) > 0)
	b = e.append(b, "message_delta", &ev)
	return e.append(b, "message_stop", typeEvent{Type: "message_stop"})
}

func (e *messagesEncoder) fail(b []byte, env envelope) []byte {
	_, a := anthropicError(env)
	return e.append(b, "error", errorEvent{Type: "error", Error: a.Error})
}
