package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/rawjson"
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

// jsonEvents writes the events of a stream whose data encoding/json
// makes (HTML left unescaped), in one buffer that each event reuses.
type jsonEvents struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// encode returns the JSON encoding/json makes of v, without Encode's
// newline: valid until the next call. It cannot fail for the strings,
// numbers and raw JSON the events hold.
func (j *jsonEvents) encode(v any) []byte {
	if j.enc == nil {
		j.enc = json.NewEncoder(&j.buf)
		j.enc.SetEscapeHTML(false)
	}
	j.buf.Reset()
	j.enc.Encode(v)
	return bytes.TrimSuffix(j.buf.Bytes(), []byte{'\n'})
}

// event appends the SSE event named typ with v's JSON as its data (one
// line: encoding/json escapes newlines in strings).
func (j *jsonEvents) event(b []byte, typ string, v any) []byte {
	return appendSSE(b, typ, j.encode(v))
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
	var typ string
	raw, _ := rawjson.Member(e.Data, "type")
	_ = json.Unmarshal(raw, &typ)
	return typ
}

// field is one member of an event or a body that the sink sets: its path
// (keys of nested objects) and value.
type field struct {
	path  []string
	value any
}

// set is the field at path set to value.
func set(value any, path ...string) field { return field{path, value} }

// rewritten returns data, a JSON object, with fields set (rawjson.Set:
// every other byte as it came), or data as it is when it is not an
// object (an upstream's event is relayed even if Genway cannot read it).
func rewritten(data []byte, fields ...field) []byte {
	out := data
	for _, f := range fields {
		v, err := marshal(f.value)
		if err != nil {
			return data
		}
		if out, err = rawjson.Set(out, v, f.path...); err != nil {
			return data
		}
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
		data = rewritten(data, set(e.meta.ID, "response", "id"), set(e.meta.Model, "response", "model"))
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
			data = rewritten(data, set(e.meta.ID, "response", "id"), set(e.meta.Model, "response", "model"), set(resp.Usage.Cost, "response", "usage", "cost"))
		}
		b = appendSSE(b, ev.Name, data)
	}
	return b
}

// sequenceNumber returns a Responses event's sequence_number, read
// without decoding the event.
func sequenceNumber(data []byte) (int, bool) {
	raw, ok := rawjson.Member(data, "sequence_number")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}

// relay relays a Messages event: message_start with the message's id and
// model Genway's.
func (e *messagesEncoder) relay(b []byte, ev chat.NativeEvent) []byte {
	data := ev.Data
	if nativeType(ev) == "message_start" {
		data = rewritten(data, set(e.meta.id, "message", "id"), set(e.meta.model, "message", "model"))
	}
	return appendSSE(b, ev.Name, data)
}

// nativeEnd appends the closing events: the last message_delta, its
// usage with the answer's cost, and message_stop.
func (e *messagesEncoder) nativeEnd(b []byte, resp *chat.Response) []byte {
	for _, ev := range resp.Native.Tail {
		data := ev.Data
		if nativeType(ev) == "message_delta" {
			data = rewritten(data, set(resp.Usage.Cost, "usage", "cost"))
		}
		b = appendSSE(b, ev.Name, data)
	}
	return b
}

// nativeBody is a whole native answer's body with its id, model and
// usage.cost Genway's.
func nativeBody(resp *chat.Response, id, model string, cost credits.Amount) json.RawMessage {
	return rewritten(resp.Native.Body, set(id, "id"), set(model, "model"), set(cost, "usage", "cost"))
}
