package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/genway/genway/shared/chat"
)

// responsesEncoder is the Responses API stream format: named events, each
// with its sequence_number. The answer is a sequence of output items: a
// reasoning item (its summary text streamed), a message (its output_text
// streamed) and function calls, each opened (output_item.added, and its
// part) and closed (the .done events, output_item.done) in order. A
// function call is sent whole, once its arguments are complete: its item
// id carries the call (see encodeCallID). The stream ends with
// response.completed (or response.incomplete, when the answer was cut by
// max_output_tokens or a content filter); a failure after the stream
// started is an error event and response.failed.
type responsesEncoder struct {
	meta *responseObject
	seq  int
	jbuf bytes.Buffer
	enc  *json.Encoder

	open    string // the open item's type: "", "reasoning" or "message"
	openID  string
	openIdx int
	text    strings.Builder // the open item's text so far
	call    *pendingCall    // the function call being collected
}

// pendingCall is a streamed function call, collected until complete.
type pendingCall struct {
	id, name string
	args     strings.Builder
}

// responseEvent is any event of the stream; the fields each type has are
// set, the others left out.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	SummaryIndex   *int            `json:"summary_index,omitempty"`
	Item           *outputItem     `json:"item,omitempty"`
	Part           *contentPart    `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Name           string          `json:"name,omitempty"`
	Logprobs       *[]any          `json:"logprobs,omitempty"`
	Code           string          `json:"code,omitempty"`    // error
	Message        string          `json:"message,omitempty"` // error
	Param          *string         `json:"param,omitempty"`   // error
}

// deltaEvent is the event of one streamed piece (output_text.delta,
// reasoning_summary_text.delta, function_call_arguments.delta), the most
// frequent: a small struct of its own is quicker to encode.
type deltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   *int   `json:"content_index,omitempty"`
	SummaryIndex   *int   `json:"summary_index,omitempty"`
	Delta          string `json:"delta"`
	Logprobs       *[]any `json:"logprobs,omitempty"`
}

var zero = 0

// event appends one event to b.
func (e *responsesEncoder) event(b []byte, ev responseEvent) []byte {
	ev.SequenceNumber = e.seq
	return e.append(b, ev.Type, &ev)
}

// deltaEv appends one delta event to b.
func (e *responsesEncoder) deltaEv(b []byte, ev deltaEvent) []byte {
	ev.SequenceNumber = e.seq
	return e.append(b, ev.Type, &ev)
}

// append appends the SSE event typ with data v, and counts it.
func (e *responsesEncoder) append(b []byte, typ string, v any) []byte {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.jbuf)
		e.enc.SetEscapeHTML(false)
	}
	e.seq++
	e.jbuf.Reset()
	e.enc.Encode(v) // cannot fail: strings, numbers and raw JSON the request held
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: "...)
	b = append(b, e.jbuf.Bytes()...)
	return append(b, '\n')
}

func (e *responsesEncoder) model(id string) { e.meta.Model = id }

func (e *responsesEncoder) start(b []byte) []byte {
	b = e.event(b, responseEvent{Type: "response.created", Response: e.meta})
	return e.event(b, responseEvent{Type: "response.in_progress", Response: e.meta})
}

func (e *responsesEncoder) delta(b []byte, d chat.Delta) []byte {
	if d.Reasoning != "" {
		b = e.openItem(b, "reasoning")
		e.text.WriteString(d.Reasoning)
		b = e.deltaEv(b, deltaEvent{Type: "response.reasoning_summary_text.delta", ItemID: e.openID, OutputIndex: e.openIdx,
			SummaryIndex: &zero, Delta: d.Reasoning})
	}
	if d.Content != "" {
		b = e.openItem(b, "message")
		e.text.WriteString(d.Content)
		b = e.deltaEv(b, deltaEvent{Type: "response.output_text.delta", ItemID: e.openID, OutputIndex: e.openIdx,
			ContentIndex: &zero, Delta: d.Content, Logprobs: &none})
	}
	if tc := d.ToolCall; tc != nil {
		b = e.closeItem(b)
		if tc.ID != "" || e.call == nil {
			b = e.flushCall(b)
			e.call = &pendingCall{id: tc.ID, name: tc.Name}
		}
		e.call.args.WriteString(tc.Arguments)
	}
	return b
}

// openItem opens an item of type typ unless it is the open one.
func (e *responsesEncoder) openItem(b []byte, typ string) []byte {
	if e.open == typ {
		return b
	}
	b = e.closeItem(b)
	b = e.flushCall(b)
	e.open, e.openIdx = typ, len(e.meta.Output)
	e.text.Reset()
	if typ == "reasoning" {
		e.openID = newID("rs_")
		b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &e.openIdx,
			Item: &outputItem{Type: "reasoning", ID: e.openID, Summary: &[]contentPart{}}})
		return e.event(b, responseEvent{Type: "response.reasoning_summary_part.added", ItemID: e.openID, OutputIndex: &e.openIdx,
			SummaryIndex: &zero, Part: &contentPart{Type: "summary_text"}})
	}
	e.openID = newID("msg_")
	b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &e.openIdx,
		Item: &outputItem{Type: "message", ID: e.openID, Status: "in_progress", Role: chat.RoleAssistant, Content: &[]contentPart{}}})
	empty := outputTextPart("")
	return e.event(b, responseEvent{Type: "response.content_part.added", ItemID: e.openID, OutputIndex: &e.openIdx,
		ContentIndex: &zero, Part: &empty})
}

// closeItem closes the open item, if any, with its .done events.
func (e *responsesEncoder) closeItem(b []byte) []byte {
	text := e.text.String()
	var item outputItem
	switch e.open {
	case "":
		return b
	case "reasoning":
		part := contentPart{Type: "summary_text", Text: text}
		b = e.event(b, responseEvent{Type: "response.reasoning_summary_text.done", ItemID: e.openID, OutputIndex: &e.openIdx, SummaryIndex: &zero, Text: &text})
		b = e.event(b, responseEvent{Type: "response.reasoning_summary_part.done", ItemID: e.openID, OutputIndex: &e.openIdx, SummaryIndex: &zero, Part: &part})
		item = outputItem{Type: "reasoning", ID: e.openID, Summary: &[]contentPart{part}}
	case "message":
		part := outputTextPart(text)
		b = e.event(b, responseEvent{Type: "response.output_text.done", ItemID: e.openID, OutputIndex: &e.openIdx, ContentIndex: &zero, Text: &text, Logprobs: &none})
		b = e.event(b, responseEvent{Type: "response.content_part.done", ItemID: e.openID, OutputIndex: &e.openIdx, ContentIndex: &zero, Part: &part})
		item = outputItem{Type: "message", ID: e.openID, Status: "completed", Role: chat.RoleAssistant, Content: &[]contentPart{part}}
	}
	b = e.event(b, responseEvent{Type: "response.output_item.done", OutputIndex: &e.openIdx, Item: &item})
	e.meta.Output = append(e.meta.Output, item)
	e.open = ""
	return b
}

// flushCall sends the collected function call, if any, whole.
func (e *responsesEncoder) flushCall(b []byte) []byte {
	c := e.call
	if c == nil {
		return b
	}
	e.call = nil
	args := c.args.String()
	idx := len(e.meta.Output)
	id := encodeCallID(chat.ToolCall{ID: c.id, Name: c.name, Arguments: args})
	empty := ""
	b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &idx,
		Item: &outputItem{Type: "function_call", ID: id, Status: "in_progress", CallID: c.id, Name: c.name, Arguments: &empty}})
	if args != "" {
		b = e.deltaEv(b, deltaEvent{Type: "response.function_call_arguments.delta", ItemID: id, OutputIndex: idx, Delta: args})
	}
	b = e.event(b, responseEvent{Type: "response.function_call_arguments.done", ItemID: id, OutputIndex: &idx, Arguments: &args, Name: c.name})
	item := outputItem{Type: "function_call", ID: id, Status: "completed", CallID: c.id, Name: c.name, Arguments: &args}
	b = e.event(b, responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: &item})
	e.meta.Output = append(e.meta.Output, item)
	return b
}

func (e *responsesEncoder) end(b []byte, resp *chat.Response) []byte {
	b = e.closeItem(b)
	b = e.flushCall(b)
	if len(e.meta.Output) == 0 { // an empty answer is an empty message
		b = e.openItem(b, "message")
		b = e.closeItem(b)
	}
	e.meta.finish(resp)
	typ := "response.completed"
	if e.meta.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return e.event(b, responseEvent{Type: typ, Response: e.meta})
}

func (e *responsesEncoder) fail(b []byte, env envelope) []byte {
	code := env.Error.Type
	if env.Error.Code != nil {
		code = *env.Error.Code
	}
	b = e.event(b, responseEvent{Type: "error", Code: code, Message: env.Error.Message, Param: env.Error.Param})
	e.meta.Status = "failed"
	e.meta.Error = &responseError{Code: code, Message: env.Error.Message}
	return e.event(b, responseEvent{Type: "response.failed", Response: e.meta})
}
