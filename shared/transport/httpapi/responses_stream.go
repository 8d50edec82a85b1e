package httpapi

import (
	"strconv"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/rawjson"
)

// responsesEncoder is the Responses API stream format: named events, each
// with its sequence_number. The answer is a sequence of output items: a
// reasoning item (its summary text streamed), a message (its output_text
// streamed) and calls of tools, each opened (output_item.added, and its
// part) and closed (the .done events, output_item.done) in order. A call
// is sent whole, once its arguments are complete (a function_call's item
// id carries the call: see encodeCallID), as the item of the tool it
// calls (see toolSet.callItem).
//
// Signed reasoning (Delta.Thought, and the signatures of tool calls) goes
// in a reasoning item's encrypted_content (see responses_reasoning.go):
// the open reasoning item's, when it closes; else a reasoning item of its
// own, with no summary, before the next call or at the end.
//
// The stream ends with response.completed (or response.incomplete, when
// the answer was cut by max_output_tokens or a content filter); a failure
// after the stream started is an error event and response.failed.
type responsesEncoder struct {
	meta  *responseObject
	tools *toolSet
	seq   int
	json  jsonEvents // the events, or their parts, that encoding/json writes

	// viaJSON sends every event through encoding/json: the reference
	// that FuzzResponsesEvents compares the direct writing with.
	viaJSON bool

	// deltas is the last delta event's bytes but for its sequence number
	// and delta: the next ones of the same item reuse them.
	deltas deltaPrefix

	open    string // the open item's type: "", "reasoning" or "message"
	openID  string
	openIdx int
	text    strings.Builder // the open item's text so far
	call    *pendingCall    // the call being collected

	since    strings.Builder // the reasoning text since the last Thought
	thoughts []chat.Thought  // signed reasoning in no item yet
	signed   []chat.ToolCall // signed calls whose signatures are in no item yet
}

// pendingCall is a streamed call, collected until complete.
type pendingCall struct {
	id, name, sig, by string
	args              strings.Builder
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
	Input          *string         `json:"input,omitempty"` // custom_tool_call_input.done
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

// event appends one event to b: the bytes encoding/json makes of it,
// written directly but for its response object and the items of tools
// whose calls carry raw JSON (see appendItem).
func (e *responsesEncoder) event(b []byte, ev responseEvent) []byte {
	ev.SequenceNumber = e.seq
	if e.viaJSON {
		ref := ev // on the heap in this branch only
		return e.append(b, ref.Type, &ref)
	}
	e.seq++
	b = e.eventHead(b, ev.Type)
	if ev.Response != nil {
		b = append(b, `,"response":`...)
		b = e.appendValue(b, ev.Response)
	}
	b = appendIntField(b, `,"output_index":`, ev.OutputIndex)
	b = appendNonEmpty(b, `,"item_id":`, ev.ItemID)
	b = appendIntField(b, `,"content_index":`, ev.ContentIndex)
	b = appendIntField(b, `,"summary_index":`, ev.SummaryIndex)
	if ev.Item != nil {
		b = append(b, `,"item":`...)
		b = e.appendItem(b, ev.Item)
	}
	if ev.Part != nil {
		b = append(b, `,"part":`...)
		b = e.appendPart(b, ev.Part)
	}
	b = appendStringField(b, `,"delta":`, ev.Delta)
	b = appendStringField(b, `,"text":`, ev.Text)
	b = appendStringField(b, `,"arguments":`, ev.Arguments)
	b = appendStringField(b, `,"input":`, ev.Input)
	b = appendNonEmpty(b, `,"name":`, ev.Name)
	if ev.Logprobs != nil {
		b = append(b, `,"logprobs":`...)
		b = e.appendAnys(b, *ev.Logprobs)
	}
	b = appendNonEmpty(b, `,"code":`, ev.Code)
	b = appendNonEmpty(b, `,"message":`, ev.Message)
	b = appendStringField(b, `,"param":`, ev.Param)
	return append(b, "}\n\n"...)
}

// appendItem appends the JSON of it to b: a message's, a reasoning
// item's and a function or custom tool call's written directly, the other
// calls' (their arguments, action or operation raw JSON that
// encoding/json compacts) through encoding/json.
func (e *responsesEncoder) appendItem(b []byte, it *outputItem) []byte {
	args, isString := it.Arguments.(*string)
	if (it.Arguments != nil && !isString) || len(it.Action) > 0 || len(it.Operation) > 0 {
		return e.appendValue(b, it)
	}
	b = append(b, `{"type":`...)
	b = rawjson.AppendString(b, it.Type, false)
	b = append(b, `,"id":`...)
	b = rawjson.AppendString(b, it.ID, false)
	b = appendNonEmpty(b, `,"status":`, it.Status)
	b = appendNonEmpty(b, `,"role":`, it.Role)
	if it.Content != nil {
		b = append(b, `,"content":`...)
		b = e.appendParts(b, *it.Content)
	}
	if it.Summary != nil {
		b = append(b, `,"summary":`...)
		b = e.appendParts(b, *it.Summary)
	}
	b = appendNonEmpty(b, `,"encrypted_content":`, it.EncryptedContent)
	b = appendNonEmpty(b, `,"call_id":`, it.CallID)
	b = appendNonEmpty(b, `,"namespace":`, it.Namespace)
	b = appendNonEmpty(b, `,"name":`, it.Name)
	if it.Arguments != nil { // a *string, maybe nil: encoding/json's null
		b = append(b, `,"arguments":`...)
		if args == nil {
			b = append(b, "null"...)
		} else {
			b = rawjson.AppendString(b, *args, false)
		}
	}
	b = appendStringField(b, `,"input":`, it.Input)
	b = appendNonEmpty(b, `,"execution":`, it.Execution)
	return append(b, '}')
}

// appendParts appends the JSON of parts (null if nil) to b.
func (e *responsesEncoder) appendParts(b []byte, parts []contentPart) []byte {
	if parts == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.appendPart(b, &parts[i])
	}
	return append(b, ']')
}

// appendPart appends p's JSON to b.
func (e *responsesEncoder) appendPart(b []byte, p *contentPart) []byte {
	b = append(b, `{"type":`...)
	b = rawjson.AppendString(b, p.Type, false)
	b = append(b, `,"text":`...)
	b = rawjson.AppendString(b, p.Text, false)
	if p.Annotations != nil {
		b = append(b, `,"annotations":`...)
		b = e.appendAnys(b, *p.Annotations)
	}
	if p.Logprobs != nil {
		b = append(b, `,"logprobs":`...)
		b = e.appendAnys(b, *p.Logprobs)
	}
	return append(b, '}')
}

// appendNonEmpty appends name (`,"key":`) and s as a JSON string when s
// is not empty: a string field with omitempty, as encoding/json writes it.
func appendNonEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, name...)
	return rawjson.AppendString(b, s, false)
}

// appendStringField appends the member name (with its comma) and *s,
// unless s is nil (omitempty).
func appendStringField(b []byte, name string, s *string) []byte {
	if s == nil {
		return b
	}
	b = append(b, name...)
	return rawjson.AppendString(b, *s, false)
}

// deltaEv appends one delta event to b: the bytes encoding/json makes of
// it, written directly.
func (e *responsesEncoder) deltaEv(b []byte, ev deltaEvent) []byte {
	ev.SequenceNumber = e.seq
	if e.viaJSON {
		ref := ev // on the heap in this branch only
		return e.append(b, ref.Type, &ref)
	}
	e.seq++
	p := &e.deltas
	if !p.of(&ev) {
		p.typ, p.itemID, p.outputIndex = ev.Type, ev.ItemID, ev.OutputIndex
		p.contentIndex, p.summaryIndex = ev.ContentIndex, ev.SummaryIndex
		if p.buf == nil {
			p.buf = make([]byte, 0, 192) // a message's or a reasoning item's, in one allocation
		}
		p.buf = append(p.buf[:0], "event: "...)
		p.buf = append(p.buf, ev.Type...)
		p.buf = append(p.buf, "\ndata: {\"type\":"...)
		p.buf = rawjson.AppendString(p.buf, ev.Type, false)
		p.buf = append(p.buf, `,"sequence_number":`...)
		p.seqAt = len(p.buf)
		p.buf = append(p.buf, `,"item_id":`...)
		p.buf = rawjson.AppendString(p.buf, ev.ItemID, false)
		p.buf = appendIntField(p.buf, `,"output_index":`, &ev.OutputIndex)
		p.buf = appendIntField(p.buf, `,"content_index":`, ev.ContentIndex)
		p.buf = appendIntField(p.buf, `,"summary_index":`, ev.SummaryIndex)
		p.buf = append(p.buf, `,"delta":`...)
	}
	b = append(b, p.buf[:p.seqAt]...)
	b = strconv.AppendInt(b, int64(ev.SequenceNumber), 10)
	b = append(b, p.buf[p.seqAt:]...)
	b = rawjson.AppendString(b, ev.Delta, false)
	if ev.Logprobs != nil {
		b = append(b, `,"logprobs":`...)
		b = e.appendAnys(b, *ev.Logprobs)
	}
	return append(b, "}\n\n"...)
}

// deltaPrefix is a delta event's bytes before its delta, the sequence
// number left out (at seqAt), and the fields they were written from.
type deltaPrefix struct {
	typ, itemID                string
	outputIndex                int
	contentIndex, summaryIndex *int
	buf                        []byte
	seqAt                      int
}

// of reports whether p is ev's (its sequence number aside).
func (p *deltaPrefix) of(ev *deltaEvent) bool {
	return p.buf != nil && p.typ == ev.Type && p.itemID == ev.ItemID && p.outputIndex == ev.OutputIndex &&
		sameInt(p.contentIndex, ev.ContentIndex) && sameInt(p.summaryIndex, ev.SummaryIndex)
}

// sameInt reports whether a and b are both nil or point to equal ints.
func sameInt(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// eventHead begins the SSE event typ, numbered e.seq-1 (counted already):
// its event line and its data up to the sequence number.
func (e *responsesEncoder) eventHead(b []byte, typ string) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":"...)
	b = rawjson.AppendString(b, typ, false)
	b = append(b, `,"sequence_number":`...)
	return strconv.AppendInt(b, int64(e.seq-1), 10)
}

// appendIntField appends the member name (with its comma) and *n, unless
// n is nil (omitempty).
func appendIntField(b []byte, name string, n *int) []byte {
	if n == nil {
		return b
	}
	b = append(b, name...)
	return strconv.AppendInt(b, int64(*n), 10)
}

// appendAnys appends a []any: the empty one directly (logprobs and
// annotations are always empty), others through encoding/json.
func (e *responsesEncoder) appendAnys(b []byte, v []any) []byte {
	switch {
	case v == nil:
		return append(b, "null"...)
	case len(v) == 0:
		return append(b, "[]"...)
	}
	return e.appendValue(b, v)
}

// appendValue appends the JSON encoding/json makes of v (as a member of
// an event: without Encode's newline) to b.
func (e *responsesEncoder) appendValue(b []byte, v any) []byte {
	return append(b, e.json.encode(v)...)
}

// append appends the SSE event typ with data v through encoding/json,
// and counts it.
func (e *responsesEncoder) append(b []byte, typ string, v any) []byte {
	e.seq++
	return e.json.event(b, typ, v)
}

func (e *responsesEncoder) model(id string) { e.meta.Model = id }

// start appends response.created and response.in_progress, which carry
// the same response object: encoded once.
func (e *responsesEncoder) start(b []byte) []byte {
	if e.viaJSON {
		b = e.event(b, responseEvent{Type: "response.created", Response: e.meta})
		return e.event(b, responseEvent{Type: "response.in_progress", Response: e.meta})
	}
	obj := e.json.encode(e.meta)
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		e.seq++
		b = e.eventHead(b, typ)
		b = append(b, `,"response":`...)
		b = append(b, obj...)
		b = append(b, "}\n\n"...)
	}
	return b
}

func (e *responsesEncoder) delta(b []byte, d chat.Delta) []byte {
	if d.Reasoning != "" {
		b = e.flushCall(b) // reasoning after a call is another item
		b = e.openItem(b, "reasoning")
		e.text.WriteString(d.Reasoning)
		e.since.WriteString(d.Reasoning)
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
		if e.open == "message" {
			b = e.closeItem(b) // an open reasoning item stays open for the call's signature
		}
		if tc.ID != "" || e.call == nil {
			b = e.flushCall(b)
			e.call = &pendingCall{id: tc.ID, name: tc.Name, sig: tc.Signature, by: tc.SignedBy}
		}
		e.call.args.WriteString(tc.Arguments)
	}
	if th := d.Thought; th != nil {
		t := *th
		if t.Text == "" && t.Redacted == "" {
			t.Text = e.since.String() // its text is the reasoning since the last one
		}
		e.since.Reset()
		e.thoughts = append(e.thoughts, t)
	}
	return b
}

// openItem opens an item of type typ unless it is the open one.
func (e *responsesEncoder) openItem(b []byte, typ string) []byte {
	if e.open == typ {
		return b
	}
	b = e.flushCall(b)
	b = e.closeItem(b)
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
		item = outputItem{Type: "reasoning", ID: e.openID, Summary: &[]contentPart{part}, EncryptedContent: e.sealed()}
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

// sealed returns the encrypted_content of the signed reasoning in no
// item yet ("" if none), which is then in one.
func (e *responsesEncoder) sealed() string {
	s := sealReasoning(e.thoughts, e.signed)
	e.thoughts, e.signed = nil, nil
	return s
}

// seal puts the signed reasoning in no item yet in one: the open
// reasoning item, closed now, or a reasoning item of its own.
func (e *responsesEncoder) seal(b []byte) []byte {
	if e.open == "reasoning" {
		return e.closeItem(b)
	}
	if len(e.thoughts) == 0 && len(e.signed) == 0 {
		return b
	}
	idx := len(e.meta.Output)
	item := outputItem{Type: "reasoning", ID: newID("rs_"), Summary: &[]contentPart{}}
	b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &item})
	done := item
	done.EncryptedContent = e.sealed()
	b = e.event(b, responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: &done})
	e.meta.Output = append(e.meta.Output, done)
	return b
}

// flushCall sends the collected call, if any, whole: after the signed
// reasoning before it (with its own signature), as the item of the tool it
// calls, with the events of that item type.
func (e *responsesEncoder) flushCall(b []byte) []byte {
	c := e.call
	if c == nil {
		return b
	}
	e.call = nil
	tc := chat.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String(), Signature: c.sig, SignedBy: c.by}
	if tc.Signature != "" {
		e.signed = append(e.signed, tc)
	}
	b = e.seal(b)
	idx := len(e.meta.Output)
	item := e.tools.callItem(tc, "completed")
	added := item
	added.Status = "in_progress"
	empty := ""
	switch item.Type {
	case "function_call":
		added.Arguments = &empty
		b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &added})
		if tc.Arguments != "" {
			b = e.deltaEv(b, deltaEvent{Type: "response.function_call_arguments.delta", ItemID: item.ID, OutputIndex: idx, Delta: tc.Arguments})
		}
		b = e.event(b, responseEvent{Type: "response.function_call_arguments.done", ItemID: item.ID, OutputIndex: &idx, Arguments: &tc.Arguments, Name: item.Name})
	case "custom_tool_call":
		added.Input = &empty
		b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &added})
		if *item.Input != "" {
			b = e.deltaEv(b, deltaEvent{Type: "response.custom_tool_call_input.delta", ItemID: item.ID, OutputIndex: idx, Delta: *item.Input})
		}
		b = e.event(b, responseEvent{Type: "response.custom_tool_call_input.done", ItemID: item.ID, OutputIndex: &idx, Input: item.Input})
	default:
		b = e.event(b, responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: &added})
	}
	b = e.event(b, responseEvent{Type: "response.output_item.done", OutputIndex: &idx, Item: &item})
	e.meta.Output = append(e.meta.Output, item)
	return b
}

func (e *responsesEncoder) end(b []byte, resp *chat.Response) []byte {
	b = e.flushCall(b)
	b = e.closeItem(b)
	b = e.seal(b)
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
