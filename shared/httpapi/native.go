package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// Native answers (see chat.NativeProvider): the Responses and Messages
// handlers' sinks relay a native answer's events as the upstream sent
// them, rewriting only what must be Genway's: the answer's id (Genway's
// resp_ or msg_ id, the id of its record) and model (the catalog's) where
// the response or the message is named (response.created ... and
// response.completed; message_start), and the final usage's cost
// (response.completed's usage.cost, the last message_delta's), written
// at the end, once the answer is priced. A whole answer is the upstream's
// body with the same three fields set. The item, block and call ids in
// between are the provider's own, and everything else is as it came.

// errNotNative is the error of a native event for a sink that cannot
// relay one (the chat completions sink: the gateway never sends it one).
var errNotNative = errors.New("httpapi: this answer's format has no native events")

// nativeEncoder is a streamEncoder that relays native answers: relay
// appends one event of the answer, rewritten where it names the answer,
// and end appends the closing events the provider held back, with the
// answer's cost.
type nativeEncoder interface {
	relay(b []byte, e chat.NativeEvent) []byte
	nativeEnd(b []byte, resp *chat.Response) []byte
}

// Event implements chat.NativeSink: the event, rewritten by the encoder,
// written but not flushed.
func (s *sseStream) Event(e chat.NativeEvent) error {
	ne, ok := s.enc.(nativeEncoder)
	if !ok {
		return errNotNative
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = ne.relay(s.buf[:0], e)
	s.raw(s.buf)
	return s.err
}

// Event implements chat.NativeSink for a whole answer, which has no
// events: a native one comes to End whole (chat.Response.Native).
func (j *jsonSink) Event(chat.NativeEvent) error { return errNotNative }

// Event relays a native event to the sink, which must be a
// chat.NativeSink.
func (n notingSink) Event(e chat.NativeEvent) error {
	ns, ok := n.Sink.(chat.NativeSink)
	if !ok {
		return errNotNative
	}
	return ns.Event(e)
}

// appendSSE appends an event named name (none if "") with data, a line
// per line of data.
func appendSSE(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(b, '\n')
}

// nativeType is an event's type: its name, else its data's type field.
func nativeType(e chat.NativeEvent) string {
	if e.Name != "" {
		return e.Name
	}
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(e.Data, &v)
	return v.Type
}

// rewriteJSON returns the JSON object obj with each field of edits set to
// its value, a field being a path of keys joined by dots ("response.id"):
// an object on a path that is missing (or null) is made. obj that is not
// an object is returned as it is, with its error.
func rewriteJSON(obj []byte, edits map[string]any) ([]byte, error) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(obj); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &m); err != nil {
			return obj, err
		}
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	inner := map[string]map[string]any{}
	for path, v := range edits {
		key, rest, nested := strings.Cut(path, ".")
		if !nested {
			raw, err := marshal(v)
			if err != nil {
				return obj, err
			}
			m[key] = raw
			continue
		}
		if inner[key] == nil {
			inner[key] = map[string]any{}
		}
		inner[key][rest] = v
	}
	for key, e := range inner {
		raw, err := rewriteJSON(m[key], e)
		if err != nil {
			return obj, err
		}
		m[key] = raw
	}
	return marshal(m)
}

// rewritten is rewriteJSON's result, or data as it is when it is not a
// JSON object (an upstream's event is relayed even if Genway cannot read
// it).
func rewritten(data []byte, edits map[string]any) []byte {
	out, err := rewriteJSON(data, edits)
	if err != nil {
		return data
	}
	return out
}

// relay relays a Responses event: those that carry the response object
// with its id and model Genway's; each event's sequence_number is noted,
// so that an error event after it (fail) follows it.
func (e *responsesEncoder) relay(b []byte, ev chat.NativeEvent) []byte {
	data := ev.Data
	switch nativeType(ev) {
	case "response.created", "response.in_progress", "response.queued":
		data = rewritten(data, map[string]any{"response.id": e.meta.ID, "response.model": e.meta.Model})
	}
	if n, ok := sequenceNumber(data); ok {
		e.seq = n + 1
	}
	return appendSSE(b, ev.Name, data)
}

// nativeEnd appends the closing events: response.completed (or
// response.incomplete) with the response's id, model and usage.cost
// Genway's.
func (e *responsesEncoder) nativeEnd(b []byte, resp *chat.Response) []byte {
	for _, ev := range resp.Native.Tail {
		data := ev.Data
		switch nativeType(ev) {
		case "response.completed", "response.incomplete":
			data = rewritten(data, map[string]any{"response.id": e.meta.ID, "response.model": e.meta.Model, "response.usage.cost": resp.Usage.Cost})
		}
		b = appendSSE(b, ev.Name, data)
	}
	return b
}

// sequenceNumber returns a Responses event's sequence_number, found
// without decoding the event.
func sequenceNumber(data []byte) (int, bool) {
	const key = `"sequence_number":`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(data[i+len(key):], " ")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(string(rest[:end]))
	return n, err == nil
}

// relay relays a Messages event: message_start with the message's id and
// model Genway's.
func (e *messagesEncoder) relay(b []byte, ev chat.NativeEvent) []byte {
	data := ev.Data
	if nativeType(ev) == "message_start" {
		data = rewritten(data, map[string]any{"message.id": e.meta.id, "message.model": e.meta.model})
	}
	return appendSSE(b, ev.Name, data)
}

// nativeEnd appends the closing events: the last message_delta, its
// usage with the answer's cost, and message_stop.
func (e *messagesEncoder) nativeEnd(b []byte, resp *chat.Response) []byte {
	for _, ev := range resp.Native.Tail {
		data := ev.Data
		if nativeType(ev) == "message_delta" {
			data = rewritten(data, map[string]any{"usage.cost": resp.Usage.Cost})
		}
		b = appendSSE(b, ev.Name, data)
	}
	return b
}

// nativeBody is a whole native answer's body with its id, model and
// usage.cost Genway's.
func nativeBody(resp *chat.Response, id, model string, cost credits.Amount) json.RawMessage {
	return rewritten(resp.Native.Body, map[string]any{"id": id, "model": model, "usage.cost": cost})
}
