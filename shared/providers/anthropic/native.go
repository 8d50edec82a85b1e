package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/rawjson"
)

// The native Messages API (chat.NativeProvider): a Messages request is
// sent to POST {base}/v1/messages as the client sent it (a provider whose
// catalog entry speaks "messages": Anthropic itself, whose fields Genway
// does not know yet, server tools, context management and betas then
// work), with the client's anthropic-version (APIVersion if it sent
// none) and anthropic-beta headers, and only these changes:
//
//   - model is the catalog model's upstream name;
//   - max_tokens is the gateway's bound when the client set more
//     (chat.NativeBody.Bound);
//   - models (Genway's fallbacks) is left out;
//   - a thinking block of an assistant turn whose signature is empty or
//     Genway's ("genway:...": another provider's reasoning, or the mark of
//     a signed call, that the translation carries in thinking blocks) is
//     left out: Anthropic would refuse it; a turn left empty goes too.
//
// The answer's events are relayed as they come (see relayMessages); its
// usage is message_start's, updated by message_delta's.

// foreignPrefix begins the signature of a thinking block that Genway's
// translation made for another provider's reasoning (see the httpapi
// package).
const foreignPrefix = "genway:"

// maxNativeBody caps a whole native answer's body.
const maxNativeBody = 64 << 20

var _ chat.NativeProvider = (*Provider)(nil)

// Speaks reports whether the provider's server speaks api natively: the
// Messages API, when its Config.Native names it.
func (p *Provider) Speaks(api string) bool {
	return api == chat.APIMessages && p.native
}

// NativeStream sends req's Messages request, streamed, and writes each
// event to w as it arrives; the last message_delta and message_stop are
// returned in the Response's Native.Tail. An error event is an
// *chat.UpstreamError with the status its type stands for; a stream that
// ends before message_stop is one with ReasonDropped. With any error it
// returns the usage reported so far (see soFar).
func (p *Provider) NativeStream(ctx context.Context, req *chat.Request, w chat.NativeWriter) (*chat.Response, error) {
	resp, err := p.nativeDo(ctx, req, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	batch := chat.NewNativeBatch(w) // events read together are written together
	r.OnWait(batch.Flush)
	return p.relayMessages(ctx, r, batch.Event)
}

// NativeComplete sends req's Messages request, not streamed, and returns
// the answer's body in the Response's Native.Body, with its usage, finish
// reason and text.
func (p *Provider) NativeComplete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	resp, err := p.nativeDo(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNativeBody))
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "read response", err)
	}
	var m messageResponse
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, chat.TransportError(ctx, p.name, "decode response", err)
	}
	if m.Type == "error" {
		return nil, p.eventError(m.Error)
	}
	out := &chat.Response{Usage: m.Usage.chat(), ServiceTier: serviceTier(m.Usage.ServiceTier), Native: &chat.NativeAnswer{Body: b}}
	var content, reasoning strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			content.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		}
	}
	out.Content, out.Reasoning = content.String(), reasoning.String()
	out.FinishReason = finishReason(m.StopReason, len(out.ToolCalls) > 0)
	return out, nil
}

// nativeDo sends req's Messages request and returns a 2xx response; any
// other outcome is an error.
func (p *Provider) nativeDo(ctx context.Context, req *chat.Request, stream bool) (*http.Response, error) {
	body, err := messagesBody(req, stream)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamBadRequest, Message: "The request body is not a Messages request.", Err: err}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: new request: %w", p.name, err)
	}
	p.headers(ctx, hr, req, false)
	if v := req.APIHeaders["anthropic-version"]; v != "" {
		hr.Header.Set("anthropic-version", v) // the client's: the body is its own
	}
	if stream {
		hr.Header.Set("accept", "text/event-stream")
	} else {
		hr.Header.Set("accept", "application/json")
	}
	resp, err := chat.Send(p.client, hr)
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "send request", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	eb, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, p.statusError(resp, eb)
}

// messagesBody returns req's Messages request as it goes upstream (see
// the changes above), stream or not: every byte the changes do not touch
// is the client's.
func messagesBody(req *chat.Request, stream bool) ([]byte, error) {
	b := chat.NativeBody(req.Native.Body)
	setStream := b.Delete("stream")
	if stream {
		setStream = b.Set("stream", true)
	}
	err := errors.Join(b.Set("model", req.Model.Upstream), setStream, b.Delete("models"), b.Bound("max_tokens", req.MaxTokens))
	if err != nil {
		return nil, err
	}
	if msgs, ok := b.Member("messages"); ok && maybeForeign(msgs) {
		if msgs, err = withoutForeignThinking(msgs); err != nil {
			return nil, err
		}
		if err := b.SetRaw("messages", msgs); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// maybeForeign reports whether the turns may hold a thinking block that
// Anthropic cannot verify (see foreign), without decoding them: a
// Genway signature, an empty one, or fewer signatures than thinking
// blocks (each has its type and its text named "thinking").
func maybeForeign(msgs []byte) bool {
	return bytes.Contains(msgs, []byte(foreignPrefix)) || bytes.Contains(msgs, []byte(`"signature":""`)) ||
		bytes.Contains(msgs, []byte(`"signature": ""`)) || bytes.Count(msgs, []byte(`"thinking"`)) > 2*bytes.Count(msgs, []byte(`"signature"`))
}

// withoutForeignThinking returns the turns without the thinking blocks
// Anthropic cannot verify (see foreign), and without an assistant turn
// left empty by that; a turn with none is kept as it is.
func withoutForeignThinking(raw json.RawMessage) (json.RawMessage, error) {
	var turns []json.RawMessage
	if err := json.Unmarshal(raw, &turns); err != nil {
		return nil, err
	}
	kept := turns[:0]
	for _, t := range turns {
		var turn map[string]json.RawMessage
		if !bytes.Contains(t, []byte("thinking")) || json.Unmarshal(t, &turn) != nil {
			kept = append(kept, t)
			continue
		}
		var blocks []json.RawMessage
		if json.Unmarshal(turn["content"], &blocks) != nil {
			kept = append(kept, t)
			continue
		}
		n := len(blocks)
		blocks = slices.DeleteFunc(blocks, foreign)
		switch {
		case len(blocks) == n:
			kept = append(kept, t)
		case len(blocks) > 0:
			turn["content"], _ = json.Marshal(blocks)
			t, _ = json.Marshal(turn)
			kept = append(kept, t)
		}
	}
	return json.Marshal(kept)
}

// foreign reports whether a content block is a thinking block whose
// signature is missing, empty or Genway's.
func foreign(block json.RawMessage) bool {
	var b struct {
		Type      string  `json:"type"`
		Signature *string `json:"signature"`
	}
	if json.Unmarshal(block, &b) != nil || b.Type != "thinking" {
		return false
	}
	return b.Signature == nil || *b.Signature == "" || strings.HasPrefix(*b.Signature, foreignPrefix)
}

// relayMessages reads a Messages API event stream from r and emits each
// event as a chat.NativeEvent, until message_stop, which it returns with
// the last message_delta in the Response's Native.Tail (each
// message_delta is held until the next event says whether it is the
// last), with the usage (message_start's, updated by message_delta's),
// service tier and finish reason. An event is content when it is a
// content_block_delta, or the start of a block that is not text or
// thinking (a tool_use, a server tool's...); a delta's text or input JSON
// counts as output text, its thinking as reasoning. Only message_start,
// message_delta and error events are decoded: the others are read as far
// as their type (the event's name) and what says whether they are
// content. With an error it returns the usage so far (soFar).
func (p *Provider) relayMessages(ctx context.Context, r *sse.Reader, emit func(chat.NativeEvent) error) (resp *chat.Response, err error) {
	out := &chat.Response{FinishReason: chat.FinishStop}
	counted := false // a message_delta counted the output
	defer func() {
		if err != nil {
			resp = soFar(out, counted)
		}
	}()
	var u usage
	var delta *chat.NativeEvent // the message_delta held back
	toolUse := false
	for {
		name, data, err := r.NextBytes()
		if err == io.EOF {
			return nil, &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
				Message: "stream ended before message_stop", Err: io.ErrUnexpectedEOF}
		}
		if err != nil {
			return nil, chat.TransportError(ctx, p.name, "read stream", err)
		}
		typ := name
		if raw, ok := rawjson.Member(data, "type"); ok {
			typ = readType(raw, typ) // the data's type names the event
		} else if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
			return nil, chat.TransportError(ctx, p.name, "decode event "+name, err)
		}
		e := chat.NativeEvent{Name: name, Data: data}
		switch typ {
		case "message_start", "message_delta", "error":
			var se nativeEvent
			if err := json.Unmarshal(data, &se); err != nil {
				return nil, chat.TransportError(ctx, p.name, "decode event "+typ, err)
			}
			switch typ {
			case "message_start":
				if se.Message != nil {
					u = se.Message.Usage
					out.Usage, out.ServiceTier = u.chat(), serviceTier(u.ServiceTier)
				}
			case "message_delta":
				if se.Delta != nil && se.Delta.StopReason != "" {
					out.FinishReason = finishReason(se.Delta.StopReason, toolUse)
				}
				if se.Usage != nil { // cumulative: it replaces what it carries
					counted = true
					u.apply(se.Usage)
					out.Usage = u.chat()
				}
				if delta != nil {
					if err := emit(*delta); err != nil {
						return nil, err
					}
				}
				delta = &chat.NativeEvent{Name: name, Data: bytes.Clone(data)}
				continue
			case "error":
				return nil, p.eventError(se.Error)
			}
		case "content_block_start":
			block, _ := rawjson.Member(data, "content_block")
			var bt string
			raw, _ := rawjson.Member(block, "type")
			bt = readType(raw, bt)
			switch bt {
			case "text", "thinking", "redacted_thinking":
			default:
				e.Content, e.Text = true, stringBytes(block, "name")
				toolUse = toolUse || bt == "tool_use"
			}
		case "content_block_delta":
			d, _ := rawjson.Member(data, "delta")
			e.Content = true
			e.Text, e.Reasoning = stringBytes(d, "text")+stringBytes(d, "partial_json"), stringBytes(d, "thinking")
		case "message_stop":
			out.Native = &chat.NativeAnswer{Tail: []chat.NativeEvent{{Name: name, Data: bytes.Clone(data)}}}
			if delta != nil {
				out.Native.Tail = append([]chat.NativeEvent{*delta}, out.Native.Tail...)
			}
			return out, nil
		}
		if delta != nil { // not the last message_delta after all
			if err := emit(*delta); err != nil {
				return nil, err
			}
			delta = nil
		}
		if err := emit(e); err != nil {
			return nil, err
		}
	}
}

// readType returns typ set to the JSON string raw (an event's or a
// block's type member) as json.Unmarshal(raw, &typ) sets it, errors
// ignored (a value that is not a string leaves typ as it was), without
// encoding/json for the strings it mostly is.
func readType(raw []byte, typ string) string {
	sc := rawjson.NewScanner(raw)
	v := typ // null leaves it as it was
	if sc.StringIntoKnown(&v, eventTypes...) && sc.End() {
		return v
	}
	return unmarshalType(raw, typ)
}

// unmarshalType is readType's json.Unmarshal, in a function of its own
// so that only its calls put typ on the heap.
func unmarshalType(raw []byte, typ string) string {
	_ = json.Unmarshal(raw, &typ)
	return typ
}

// stringBytes is about the length of the string member key of the JSON
// object obj (each escape counted as one byte), 0 if it has none: the
// bytes of output an event carries, counted without decoding it.
func stringBytes(obj []byte, key string) int {
	if v, ok := rawjson.Member(obj, key); ok && len(v) >= 2 && v[0] == '"' {
		return len(v) - 2 - bytes.Count(v, []byte{'\\'})
	}
	return 0
}

// nativeEvent is what relayMessages decodes of message_start,
// message_delta and error: the usage, the stop reason, the error.
type nativeEvent struct {
	Message *struct {
		Usage usage `json:"usage"`
	} `json:"message"` // message_start
	Delta *streamDelta `json:"delta"` // message_delta
	Usage *usageDelta  `json:"usage"` // message_delta
	Error *errorDetail `json:"error"` // error
}
