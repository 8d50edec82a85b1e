// Package chat is the chat completions domain: the provider-neutral request
// and response types, the Provider interface each upstream family implements
// (packages openai, anthropic, gemini, bedrock, synthetic), and the errors a
// provider returns so that the HTTP edge can map upstream failures to
// 400 / 429 / 502 / 503 / 504; and the Gateway, which validates a request
// (Params, the OpenAI wire shape) against the catalog, fetches images for
// providers that need bytes (ImageFetcher, with SSRF protection), runs it
// on the model's provider and records usage (UsageRecorder).
package chat

import (
	"context"
	"fmt"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// Roles of a message. "developer" is normalised to RoleSystem on decode.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Finish reasons.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// Request is a validated chat completion request, ready for a provider.
type Request struct {
	Model *catalog.Model // the catalog entry; Model.Upstream is the provider's name
	// Messages in order; system messages may appear anywhere, providers that
	// need a top-level system prompt collect them.
	Messages        []Message
	MaxTokens       int    // 0: the provider's default (providers that require one use a sensible cap)
	ReasoningEffort string // "", "low", "medium" or "high"; "" when the model does not reason
	Temperature     *float64
	TopP            *float64
	Stop            []string
	Seed            *int64
}

// Message is one turn of the conversation.
type Message struct {
	Role  string
	Parts []Part // a plain string content is one text Part
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Image == nil {
			s += p.Text
		}
	}
	return s
}

// Part is text (Image == nil) or an image.
type Part struct {
	Text  string
	Image *Image
}

// Image is an image input. Exactly one of URL (an http(s) URL the upstream
// may fetch) or Data (decoded bytes, from a data URI or fetched by the
// gateway for providers that need bytes) is set; MediaType is set with Data.
type Image struct {
	URL       string
	MediaType string // image/png, image/jpeg, image/gif, image/webp
	Data      []byte
}

// Usage counts tokens as the upstream reported them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Response is a finished completion.
type Response struct {
	Content      string
	Reasoning    string // never sent as content
	FinishReason string
	Usage        Usage
}

// Delta is one streamed increment: content text, or reasoning text (which
// the gateway does not put in content).
type Delta struct {
	Content   string
	Reasoning string
}

// Writer receives a streamed completion's deltas. Delta writes one (it may
// be held in a buffer); Flush sends what was written. A provider calls
// Flush whenever it is about to wait for the upstream, so a delta is never
// held back while the upstream is silent, and deltas that arrived in one
// read leave in one write. Both return the client's failure (it went
// away): the provider then stops.
type Writer interface {
	Delta(Delta) error
	Flush() error
}

// Sink is where the gateway runs one completion: a Writer for its deltas
// (streamed calls only), Start when the call is admitted and the upstream
// is about to be asked (a stream may commit its response from then on, a
// heartbeat for instance), and End with the finished Response: a streamed
// call's finish reason and usage, or a whole answer. Each wire format (chat
// chunks, a chat.completion object, Responses events) is a Sink.
type Sink interface {
	Writer
	Start() error
	End(*Response) error
}

// WriterFunc adapts a function to a Writer whose Flush does nothing (for
// tests and callers that write straight through).
type WriterFunc func(Delta) error

// Delta calls f(d).
func (f WriterFunc) Delta(d Delta) error { return f(d) }

// Flush does nothing.
func (f WriterFunc) Flush() error { return nil }

// Provider is one upstream family. Implementations are safe for concurrent
// use and honour ctx: when ctx is cancelled the upstream request is cancelled.
type Provider interface {
	// Complete returns the whole completion.
	Complete(ctx context.Context, req *Request) (*Response, error)
	// Stream writes each upstream delta to w, in order, as soon as it
	// arrives, flushing w before it waits for the upstream again, and
	// returns the final Response (FinishReason, Usage; Content and
	// Reasoning may be left empty). If w fails, Stream stops and returns
	// the error.
	Stream(ctx context.Context, req *Request, w Writer) (*Response, error)
}

// UpstreamError is a failure reported by, or talking to, an upstream.
// Providers return it for every upstream failure; httpapi maps Kind to a
// status (UpstreamBadRequest 400, UpstreamRateLimited 429, UpstreamFailed
// 502, UpstreamUnavailable 503, UpstreamTimeout 504).
type UpstreamError struct {
	Provider   string
	Kind       UpstreamKind
	Status     int           // the upstream's HTTP status, 0 if none
	Message    string        // for UpstreamBadRequest: the upstream's message, shown to the client
	RetryAfter time.Duration // for UpstreamRateLimited
	Err        error         // cause, for logs only
}

// UpstreamKind classifies an UpstreamError.
type UpstreamKind int

// Upstream failure kinds.
const (
	UpstreamFailed      UpstreamKind = iota // 5xx, garbage, connection failure: 502
	UpstreamBadRequest                      // the client's fault (upstream 400/404/413/422): 400 with the upstream's message
	UpstreamRateLimited                     // upstream 429: 429 with Retry-After
	UpstreamUnavailable                     // not configured (no credentials), 503 overloaded: 503
	UpstreamTimeout                         // no answer in time: 504
)

func (e *UpstreamError) Error() string {
	s := fmt.Sprintf("%s upstream (status %d): %s", e.Provider, e.Status, e.Message)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *UpstreamError) Unwrap() error { return e.Err }
