package credits

import (
	"context"
	"errors"
)

// Tokens counts a chat completion's tokens by class, as the provider
// reported them (or, for a completion that ended early without a count,
// as estimated: see Record.Estimated). Prompt is the whole input, as
// OpenAI counts prompt_tokens: Cached, CacheWrite and CacheWrite1h are
// parts of it. Completion is the whole output: Reasoning is part of it.
type Tokens struct {
	Prompt       int64 `json:"prompt_tokens"`
	Cached       int64 `json:"cached_tokens,omitempty"`         // of Prompt: read from the provider's prompt cache
	CacheWrite   int64 `json:"cache_write_tokens,omitempty"`    // of Prompt: written to the cache (5-minute lifetime, or the provider's only one)
	CacheWrite1h int64 `json:"cache_write_1h_tokens,omitempty"` // of Prompt: written to the cache with a 1-hour lifetime
	Completion   int64 `json:"completion_tokens"`
	Reasoning    int64 `json:"reasoning_tokens,omitempty"` // of Completion
}

// TokenRates are the prices per million tokens of each class that one
// completion was charged at (its model's, for the service tier and
// prompt length it had). Reasoning tokens are output.
type TokenRates struct {
	Input        Amount `json:"input"`
	CachedInput  Amount `json:"cached_input"`
	CacheWrite   Amount `json:"cache_write"`
	CacheWrite1h Amount `json:"cache_write_1h"`
	Output       Amount `json:"output"`
}

// Request kinds (Record.Kind): the API a request came through.
const (
	KindChat      = "chat"      // POST /v1/chat/completions
	KindResponses = "responses" // POST /v1/responses
	KindMessages  = "messages"  // POST /v1/messages
	KindImage     = "image"     // POST /v1/images/generations
	KindSpeech    = "speech"    // POST /v1/audio/speech
)

// Record statuses (Record.Status).
const (
	// StatusCompleted: the answer ended as the provider ended it.
	StatusCompleted = "completed"
	// StatusClientClosed: the client went away before it had the whole
	// answer: after a stream began (the record is Partial, charged for
	// what was produced), or while a whole answer's upstream worked (it
	// runs on and is charged in full: not Partial).
	StatusClientClosed = "client_closed"
	// StatusUpstreamError: the upstream failed after the answer began;
	// the record is Partial and charged for what was produced.
	StatusUpstreamError = "upstream_error"
	// StatusFailed: no candidate answered; nothing is charged.
	StatusFailed = "failed"
)

// Record is what one request did and cost: one per chat, Responses,
// Messages, image or speech request that reached a provider. Its Cost is
// exactly what the ledger moved for it (0: nothing moved), so the records
// of any period sum to the ledger's charges of that period. Records are
// kept for a retention period (see Expires); the ledger for good.
type Record struct {
	// ID is the answer's id (chatcmpl-..., resp_..., msg_..., the image
	// or speech answer's id): the key of GET /v1/generations/{id}, and of
	// the record's ledger entry. Writing a record is idempotent by ID.
	ID      string `json:"id"`
	Kind    string `json:"kind"` // KindChat, KindResponses, ...
	Account string `json:"account"`
	Key     string `json:"key,omitempty"` // the API key's id ("" for none)
	// ModelAsked is the model the request named; Model the catalog model
	// that answered ("" when none did), whose prices Rates are.
	ModelAsked string `json:"model_asked"`
	Model      string `json:"model,omitempty"`
	Provider   string `json:"provider,omitempty"`
	// Attempts are the upstream attempts, the answering one last, as
	// route.FormatAttempts writes them.
	Attempts    string     `json:"attempts,omitempty"`
	ServiceTier string     `json:"service_tier,omitempty"`
	Tokens      Tokens     `json:"tokens"`
	Rates       TokenRates `json:"rates"`
	// Units and UnitPrice price what is not tokens: images (UnitPrice
	// per image) or characters of speech (UnitPrice per 1,000).
	Units     int64  `json:"units,omitempty"`
	UnitPrice Amount `json:"unit_price,omitempty"`
	// Cost is what the request was charged, exactly what the ledger
	// moved for it.
	Cost         Amount `json:"cost"`
	Status       string `json:"status"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Partial: the answer ended early (StatusClientClosed,
	// StatusUpstreamError); it is charged for its input and the output
	// produced.
	Partial bool `json:"partial"`
	// Estimated: some token count was not reported by the provider and
	// was estimated from what was sent and delivered (docs/api.md says
	// how).
	Estimated bool `json:"estimated,omitempty"`
	Stream    bool `json:"stream"`
	// LatencyMS is the request's duration; FirstTokenMS the time to its
	// first token (0: none, or not streamed).
	LatencyMS    int64 `json:"latency_ms"`
	FirstTokenMS int64 `json:"first_token_ms,omitempty"`
	At           int64 `json:"at"`                // Unix milliseconds of the request's end
	Expires      int64 `json:"expires,omitempty"` // Unix seconds after which the store may drop the record
}

// ErrRecordNotFound is returned for a record that does not exist, has
// expired, or is another account's.
var ErrRecordNotFound = errors.New("no such record")

// RecordReader reads records.
type RecordReader interface {
	// Record returns the record id, or ErrRecordNotFound.
	Record(ctx context.Context, id string) (Record, error)
}
