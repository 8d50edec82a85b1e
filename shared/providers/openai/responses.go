package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/rawjson"
)

// The native Responses API (chat.NativeProvider): a Responses request is
// sent to POST {base}/responses as the client sent it (a provider whose
// catalog entry speaks "responses": OpenAI itself, whose hosted tools,
// encrypted reasoning and every other field then work), with only these
// changes:
//
//   - model is the catalog model's upstream name;
//   - max_output_tokens is the gateway's bound when the client set none,
//     or more (chat.NativeBody.Bound);
//   - models (Genway's fallbacks) and seed (which Genway accepts, and the
//     Responses API does not have) are left out;
//   - a reasoning item whose encrypted_content is Genway's ("gw1.": another
//     provider's signed reasoning, carried by the translation) is left
//     out: OpenAI cannot read it;
//   - cache_control (a prompt-cache breakpoint Genway takes on tools,
//     input items and their parts, a hint for the providers that take
//     one) is left out: OpenAI caches prompts on its own, and refuses it.
//
// The answer's events are relayed as they come (see relayResponses); its
// usage is response.completed's (or response.incomplete's).

// reasoningPrefix begins the encrypted_content Genway's translation makes
// for other providers' reasoning (see the httpapi package).
const reasoningPrefix = "gw1."

var _ chat.NativeProvider = (*Provider)(nil)

// Speaks reports whether the provider's server speaks api natively: the
// Responses API, when its Config.Native names it.
func (p *Provider) Speaks(api string) bool {
	return api == chat.APIResponses && slices.Contains(p.native, api)
}

// NativeStream sends req's Responses request, streamed, and writes each
// event to w as it arrives; response.completed (or response.incomplete)
// is returned in the Response's Native.Tail. An error event or
// response.failed is an *chat.UpstreamError with the status its code
// stands for, as a stream's in-band error; a stream that ends before
// response.completed is one with ReasonDropped.
func (p *Provider) NativeStream(ctx context.Context, req *chat.Request, w chat.NativeWriter) (*chat.Response, error) {
	body, err := responsesBody(req, true)
	if err != nil {
		return nil, p.unreadable(err)
	}
	resp, _, err := p.post(ctx, p.responses, streamHeader, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sr, _ := p.readers.Get().(*sse.Reader)
	if sr == nil {
		sr = sse.NewReaderSize(resp.Body, maxBody)
	} else {
		sr.Reset(resp.Body)
	}
	batch := chat.NewNativeBatch(w) // events read together are written together
	sr.OnWait(batch.Flush)
	out, err := relayResponses(sr, batch.Event)
	sr.Reset(nil)
	p.readers.Put(sr)
	if err != nil {
		var ue *chat.UpstreamError
		var ee *emitError
		switch {
		case errors.As(err, &ee):
			return nil, ee.err
		case errors.As(err, &ue):
			ue.Provider = p.name
			if ue.Kind == chat.UpstreamBadRequest && ue.Message == "" {
				ue.Message = fmt.Sprintf("The %s provider rejected the request.", p.name)
			}
			return nil, ue
		}
		return nil, chat.TransportError(ctx, p.name, "read stream", err)
	}
	return out, nil
}

// NativeComplete sends req's Responses request, not streamed, and returns
// the answer's body in the Response's Native.Body, with its usage, finish
// reason and text.
func (p *Provider) NativeComplete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	body, err := responsesBody(req, false)
	if err != nil {
		return nil, p.unreadable(err)
	}
	resp, _, err := p.post(ctx, p.responses, jsonHeader, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, chat.TransportError(ctx, p.name, "read response", err)
	}
	var o responsesObject
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, p.garbage(fmt.Errorf("decode response: %w", err))
	}
	if isError(o.Error) {
		return nil, p.inband(o.Error, "")
	}
	out := o.response(true)
	out.Native = &chat.NativeAnswer{Body: b}
	return out, nil
}

// unreadable is the error of a native body the provider cannot parse: the
// edge decoded it already, so this is the gateway's failure, not the
// client's (Final: no other candidate can read it either).
func (p *Provider) unreadable(err error) error {
	return &chat.UpstreamError{Provider: p.name, Kind: chat.UpstreamBadRequest, Message: "The request body is not a JSON object.", Err: err}
}

// responsesBody returns req's Responses request as it goes upstream (see
// the changes above), stream or not: every byte the changes do not touch
// is the client's.
func responsesBody(req *chat.Request, stream bool) ([]byte, error) {
	b := chat.NativeBody(req.Native.Body)
	err := errors.Join(b.Set("model", req.Model.Upstream), b.Set("stream", stream), b.Delete("models"), b.Delete("seed"),
		b.Bound("max_output_tokens", req.MaxTokens))
	if err != nil {
		return nil, err
	}
	if in, ok := b.Member("input"); ok && in[0] == '[' && bytes.Contains(in, []byte(reasoningPrefix)) {
		if in, err = withoutGenwayReasoning(in); err != nil {
			return nil, err
		}
		if err := b.SetRaw("input", in); err != nil {
			return nil, err
		}
	}
	for _, key := range []string{"tools", "input"} {
		if raw, ok := b.Member(key); ok && bytes.Contains(raw, []byte(`"cache_control"`)) {
			if raw, err = uncached(raw, []string{"content", "output", "tools"}); err != nil {
				return nil, err
			}
			if err := b.SetRaw(key, raw); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// withoutGenwayReasoning returns the input items without the reasoning
// items whose encrypted_content is Genway's.
func withoutGenwayReasoning(in json.RawMessage) (json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(in, &items); err != nil {
		return nil, err
	}
	kept := items[:0]
	for _, it := range items {
		var r struct {
			Type             string `json:"type"`
			EncryptedContent string `json:"encrypted_content"`
		}
		if bytes.Contains(it, []byte(reasoningPrefix)) && json.Unmarshal(it, &r) == nil &&
			r.Type == "reasoning" && strings.HasPrefix(r.EncryptedContent, reasoningPrefix) {
			continue
		}
		kept = append(kept, it)
	}
	return json.Marshal(kept)
}

// uncached returns raw, when it is an array of objects, without their
// cache_control fields, and each one's arrays of objects under keys
// likewise (a message's parts, a call output's, a namespace's tools);
// anything else as it is. A function's parameters, which may have a
// property of that name, are never looked into.
func uncached(raw json.RawMessage, keys []string) (json.RawMessage, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' || !bytes.Contains(t, []byte(`"cache_control"`)) {
		return raw, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	for i, el := range elems {
		if !bytes.Contains(el, []byte(`"cache_control"`)) {
			continue
		}
		obj := chat.NativeBody(el)
		if err := obj.Delete("cache_control"); err != nil {
			continue // not an object
		}
		for _, k := range keys {
			if v, ok := obj.Member(k); ok {
				v, err := uncached(v, keys)
				if err != nil {
					return nil, err
				}
				if err := obj.SetRaw(k, v); err != nil {
					return nil, err
				}
			}
		}
		elems[i] = json.RawMessage(obj)
	}
	return json.Marshal(elems)
}

// responsesObject is what Genway reads of a response object (a whole
// answer, or the response of a stream's response.completed): how it
// ended, its usage and service tier, and its output, for the finish
// reason and an estimate.
type responsesObject struct {
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage       *responsesUsage `json:"usage"`
	ServiceTier string          `json:"service_tier"`
	Error       json.RawMessage `json:"error"`
	Output      []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Arguments any    `json:"arguments"` // a function_call's string; a tool_search_call's object
		Input     string `json:"input"`     // custom_tool_call
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
	} `json:"output"`
}

// responsesUsage is a response's usage: input_tokens the whole input, of
// which cached_tokens were read from the prompt cache (and
// cache_write_tokens written to it), output_tokens the whole output, of
// which reasoning_tokens were the model's reasoning.
type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// response returns the Response of o: its usage, service tier and finish
// reason (length for an answer cut by max_output_tokens, content_filter
// for one a filter stopped, tool_calls when it calls the client's tools);
// with text, its output's text, reasoning and calls too (a whole answer's,
// for an estimate when it has no usage).
func (o *responsesObject) response(text bool) *chat.Response {
	out := &chat.Response{FinishReason: chat.FinishStop, ServiceTier: o.ServiceTier}
	if u := o.Usage; u != nil {
		out.Usage = chat.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			CachedTokens: u.InputTokensDetails.CachedTokens, CacheWriteTokens: u.InputTokensDetails.CacheWriteTokens,
			ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
	var content, reasoning strings.Builder
	for _, it := range o.Output {
		switch it.Type {
		case "function_call", "custom_tool_call", "tool_search_call", "local_shell_call", "shell_call", "apply_patch_call":
			out.FinishReason = chat.FinishToolCalls
			if text {
				args, _ := it.Arguments.(string)
				out.ToolCalls = append(out.ToolCalls, chat.ToolCall{Name: it.Name, Arguments: args + it.Input})
			}
		case "message":
			for _, c := range it.Content {
				content.WriteString(c.Text + c.Refusal)
			}
		case "reasoning":
			for _, s := range it.Summary {
				reasoning.WriteString(s.Text)
			}
		}
	}
	if text {
		out.Content, out.Reasoning = content.String(), reasoning.String()
	}
	if o.Status == "incomplete" && o.IncompleteDetails != nil {
		switch o.IncompleteDetails.Reason {
		case "max_output_tokens":
			out.FinishReason = chat.FinishLength
		case "content_filter":
			out.FinishReason = chat.FinishContentFilter
		}
	}
	return out
}

// relayResponses reads a Responses API event stream from sr and emits
// each event as a chat.NativeEvent, until response.completed or
// response.incomplete, which it returns in the Response's Native.Tail
// (with the response's usage, service tier and finish reason) instead of
// emitting. An event is content unless it opens the response
// (response.created, response.in_progress, response.queued) or an item
// or part (a *.added event); a *.delta event's delta counts as output
// text, or reasoning (reasoning_summary_text, reasoning_text). Only the
// end and error events are decoded: the others are read as far as their
// type (the event's name) and delta (stringBytes). An error
// event or response.failed is an *chat.UpstreamError (Provider unset), as
// is a stream that ends before its end or an event that is not JSON; a
// read failure is returned as it is; an emit failure is an *emitError.
func relayResponses(sr *sse.Reader, emit func(chat.NativeEvent) error) (*chat.Response, error) {
	for {
		name, data, err := sr.NextBytes()
		if err == io.EOF {
			return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
				Message: "stream ended before response.completed", Err: io.ErrUnexpectedEOF}
		}
		if err != nil {
			return nil, err
		}
		typ := name
		if typ == "" {
			raw, _ := rawjson.Member(data, "type")
			if err := json.Unmarshal(raw, &typ); err != nil {
				return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Reason: chat.ReasonMalformed,
					Message: "malformed stream event", Err: fmt.Errorf("decode event %.40q: no type", data)}
			}
		}
		switch typ {
		case "response.completed", "response.incomplete", "response.failed":
			var ev struct {
				Response responsesObject `json:"response"`
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				return nil, &chat.UpstreamError{Kind: chat.UpstreamFailed, Reason: chat.ReasonMalformed,
					Message: "malformed " + typ + " event", Err: fmt.Errorf("decode %s: %w", typ, err)}
			}
			if typ == "response.failed" {
				raw := ev.Response.Error
				if !isError(raw) {
					raw = json.RawMessage(`{"message":"The response failed."}`)
				}
				return nil, inbandError(raw, "")
			}
			out := ev.Response.response(false)
			out.Native = &chat.NativeAnswer{Tail: []chat.NativeEvent{{Name: name, Data: bytes.Clone(data)}}}
			return out, nil
		case "error":
			var ev struct {
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal(data, &ev) != nil || !isError(ev.Error) {
				ev.Error = data // {"type": "error", "code", "message", "param"}
			}
			return nil, inbandError(ev.Error, "")
		}
		e := chat.NativeEvent{Name: name, Data: data, Content: !opening(typ)}
		if strings.HasSuffix(typ, ".delta") {
			n := stringBytes(data, "delta")
			if strings.HasPrefix(typ, "response.reasoning") {
				e.Reasoning = n
			} else {
				e.Text = n
			}
		}
		if err := emit(e); err != nil {
			return nil, &emitError{err}
		}
	}
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

// opening reports whether an event of type typ opens the response, an
// item or a part, without output of its own: it does not commit the
// answer.
func opening(typ string) bool {
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		return true
	}
	return strings.HasSuffix(typ, ".added")
}
