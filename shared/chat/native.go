package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/genway/genway/shared/rawjson"
)

// The native path. A request that came in the API a provider speaks
// itself (OpenAI's Responses API to OpenAI, Anthropic's Messages API to
// Anthropic) is sent to that provider as the client sent it, with only
// what must change changed (the model, bounds, what Genway made for other
// providers), and its answer's events are relayed to the client as the
// upstream sent them, rewriting only what must be Genway's (the model,
// the answer's id, the usage's cost). Everything else is the gateway's,
// as for a translated request: the candidates, key scopes, holds, the
// first-token commit, retries and breakers, usage, records and charges.
// A request goes native per candidate: a fallback whose provider does not
// speak the API gets it translated, and a translated one (another
// provider, or the same provider's chat API) may follow a native one.

// Native APIs (Native.API): the client APIs that some providers speak.
const (
	APIResponses = "responses" // OpenAI's Responses API (POST /v1/responses)
	APIMessages  = "messages"  // Anthropic's Messages API (POST /v1/messages)
)

// Native is a request as its client sent it, in an API that some
// providers speak natively (Params.Native, Request.Native). The edge that
// decodes the API sets it beside the translated Params, which the gateway
// still validates, bounds and estimates the request by.
type Native struct {
	API  string // APIResponses or APIMessages
	Body []byte // the request body, as the client sent it; never changed
	// Refusal is why the request cannot be translated (a field or an
	// item the translation cannot carry: a hosted tool forced, a PDF
	// document...), nil if it can: a candidate that would serve it
	// translated is skipped with this error, one that speaks API serves
	// it. It names the client's own field (an *apierr.Error's Param).
	Refusal error
}

// NativeProvider is implemented by a Provider that speaks some client
// APIs natively. Speaks reports whether it speaks api (for the catalog
// provider it serves: see catalog.Provider.Native). NativeStream and
// NativeComplete send req.Native's body, changed only where they must
// (the model is req.Model.Upstream; a max_tokens the client did not set,
// or set above req.MaxTokens, is req.MaxTokens, the bound a hold reserved
// for; what Genway made for other providers is taken out), and honour ctx
// as Provider's methods do, with the same errors (*UpstreamError for
// every upstream failure, classified as for the translation).
//
// NativeStream writes each upstream event to w, in order, as soon as it
// arrives (each saying whether it carries content, see NativeEvent), and
// holds back the closing events that carry the final usage: it returns
// them in the Response's Native.Tail, for the sink to write after pricing,
// with the Response's FinishReason, Usage and ServiceTier read from the
// upstream's events. A stream that fails returns, with its error, the
// usage reported so far, as Provider.Stream does. NativeComplete returns
// the whole answer's body in Native.Body, with the same fields, and the
// answer's text in Content and Reasoning (for an estimate, when the
// upstream reports no usage).
type NativeProvider interface {
	Speaks(api string) bool
	NativeStream(ctx context.Context, req *Request, w NativeWriter) (*Response, error)
	NativeComplete(ctx context.Context, req *Request) (*Response, error)
}

// NativeEvent is one server-sent event of a native answer, relayed to the
// client as the upstream sent it.
type NativeEvent struct {
	Name string // the event's name (its event: field), "" if it had none
	// Data is the event's data, as the upstream sent it. It is valid
	// only until the writer returns: a writer that keeps it copies it.
	Data []byte
	// Content: the event carries the answer's output (text, reasoning, a
	// call): the first one commits the answer (Sink.Begin), and the
	// events before it (response.created, message_start, ping...) are
	// held until then, so that a failure before it can move on to the
	// next candidate unseen.
	Content bool
	// Text and Reasoning are the bytes of output text (content, a call's
	// arguments) and of reasoning the event carries: the output delivered
	// is counted from them, for an answer cut short (see Estimates).
	Text, Reasoning int
}

// NativeWriter receives a native answer's events: Event writes one (it
// may be held in a buffer), Flush sends what was written, as Writer's
// methods do for deltas.
type NativeWriter interface {
	Event(NativeEvent) error
	Flush() error
}

// NativeSink is a Sink that can relay a native answer: its Begin is told
// the answer is native (Answer.Native), Event writes each of the
// answer's events, rewritten where they must name Genway's (the model,
// the answer's id), and End writes the Response's Native (the closing
// events, or the whole body) with the answer's usage and cost. Run needs
// one for a Params with Native.
type NativeSink interface {
	Sink
	Event(NativeEvent) error
}

// NativeAnswer is what a native answer leaves for its sink's End
// (Response.Native): a stream's closing events, held back by the provider
// until the answer is priced, or a whole answer's body.
type NativeAnswer struct {
	Tail []NativeEvent // a streamed answer's closing events (their Data owned by the answer)
	Body []byte        // a whole answer's JSON, as the upstream sent it
}

// errNotNative is an attempt's error for a native Call whose provider
// no longer has a NativeProvider (a wrapper whose provider changed).
var errNotNative = errors.New("chat: the provider speaks no API natively")

// errNativeSink is Run's error for a Params with Native run into a Sink
// that cannot relay a native answer.
var errNativeSink = errors.New("chat: a native request needs a NativeSink")

// speaks reports whether prov serves p natively: p came in an API that
// prov speaks.
func speaks(p *Params, prov Provider) bool {
	return p.Native != nil && Capabilities(prov).speaks(p.Native.API)
}

// Event implements NativeWriter for an attempt (see firstToken): events
// before the first content event are held, the first one commits the
// answer and releases them, the others go through.
func (f *firstToken) Event(e NativeEvent) error {
	if f.state.Load() != began {
		if !e.Content {
			e.Data = bytes.Clone(e.Data)
			f.heldEvents = append(f.heldEvents, e)
			return nil
		}
		if !f.state.CompareAndSwap(waiting, began) {
			return errStall
		}
		if err := f.commit(); err != nil {
			return err
		}
	}
	f.out.text += e.Text
	f.out.reasoning += e.Reasoning
	if err := f.native.Event(e); err != nil {
		f.failed = true
		return err
	}
	return nil
}

// NativeBody is a native request body, a JSON object as the client sent
// it, that a NativeProvider changes where it must (see NativeProvider):
// each change rewrites the bytes of one member (rawjson), and every other
// byte stays as the client sent it. Changes make new bytes: the request's
// Native.Body, which another candidate may be sent, is never changed.
type NativeBody []byte

// Set sets the member key to v, encoded as JSON.
func (b *NativeBody) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.SetRaw(key, raw)
}

// SetRaw sets the member key to raw, a JSON value.
func (b *NativeBody) SetRaw(key string, raw []byte) error {
	out, err := rawjson.Set(*b, raw, key)
	if err != nil {
		return err
	}
	*b = out
	return nil
}

// Delete removes the member key, if the body has it.
func (b *NativeBody) Delete(key string) error {
	out, err := rawjson.Delete(*b, key)
	if err != nil {
		return err
	}
	*b = out
	return nil
}

// Member returns the member key's value as the client wrote it, and
// whether the body has it.
func (b NativeBody) Member(key string) ([]byte, bool) { return rawjson.Member(b, key) }

// Bound sets the integer member key (a max_tokens) to n when n > 0 and
// the client left it out or set it above n: the most the gateway let the
// answer have (the model's limit, or what a hold reserved for).
func (b *NativeBody) Bound(key string, n int) error {
	if n <= 0 {
		return nil
	}
	if raw, ok := b.Member(key); ok {
		if v, err := strconv.Atoi(string(raw)); err == nil && v <= n {
			return nil
		}
	}
	return b.Set(key, n)
}
