package credits

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
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

// Chat reports whether r is a chat request's record (KindChat,
// KindResponses, KindMessages): one whose usage and charge
// RecordStore.AddRecords writes with it.
func (r Record) Chat() bool {
	return r.Kind == KindChat || r.Kind == KindResponses || r.Kind == KindMessages
}

// idAlphabet is Crockford's base32, in ASCII order: an id's time sorts
// as its text does.
const idAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewRecordID returns a new record id (an answer's id): prefix, then 26
// characters of Crockford's base32: 10 of the Unix milliseconds of t
// (48 bits) and 16 random ones (80 bits from crypto/rand), as a ULID is
// made. Ids of one prefix sort by their time, so that a store writes the
// records of a moment, and their ledger entries, side by side (a B+tree
// appends instead of touching a page per record); they say when the
// answer was made, nothing more.
func NewRecordID(prefix string, t time.Time) string {
	var r [10]byte
	rand.Read(r[:]) // never fails (crypto/rand)
	b := make([]byte, 0, len(prefix)+26)
	b = append(b, prefix...)
	ms := uint64(t.UnixMilli())
	for i := 9; i >= 0; i-- { // the time, most significant first
		b = append(b, idAlphabet[(ms>>(5*i))&31])
	}
	var acc uint64 // the random bits, 5 at a time
	n := 0
	for _, c := range r {
		acc, n = acc<<8|uint64(c), n+8
		for n >= 5 {
			n -= 5
			b = append(b, idAlphabet[(acc>>n)&31])
		}
	}
	return string(b)
}

// ErrRecordNotFound is returned for a record that does not exist, has
// expired, or is another account's.
var ErrRecordNotFound = errors.New("no such record")

// ErrInvalidRecord is wrapped by CheckRecord, CheckAddRecord and
// CheckSettledRecord (and so by the stores' writes) for a record no store
// accepts: retrying it cannot succeed.
var ErrInvalidRecord = errors.New("invalid record")

// MaxRecordID is the longest record id a store takes.
const MaxRecordID = 200

// CheckRecord validates a record for a store: an id (at most MaxRecordID
// bytes), a kind of the Kind* constants, an account, a status of the
// Status* constants, a Model unless the request failed, At (Unix ms)
// above 0, no negative count, a cost within [0, MaxAmount] and 0 for a
// failed request, and no NUL byte in its strings. Every error wraps
// ErrInvalidRecord.
func CheckRecord(r Record) error {
	bad := func(format string, args ...any) error { return invalidRecord(r.ID, format, args...) }
	switch r.Kind {
	case KindChat, KindResponses, KindMessages, KindImage, KindSpeech:
	default:
		return bad("kind %q", r.Kind)
	}
	switch r.Status {
	case StatusCompleted, StatusClientClosed, StatusUpstreamError, StatusFailed:
	default:
		return bad("status %q", r.Status)
	}
	t := r.Tokens
	switch {
	case r.ID == "" || len(r.ID) > MaxRecordID:
		return bad("an id of 1 to %d bytes", MaxRecordID)
	case r.Account == "":
		return bad("no account")
	case r.Model == "" && r.Status != StatusFailed:
		return bad("no model answered a %s request", r.Status)
	case r.At <= 0:
		return bad("at %d: need the Unix milliseconds of the request's end", r.At)
	case r.Cost < 0 || r.Cost > MaxAmount:
		return bad("cost %s", r.Cost)
	case r.Status == StatusFailed && r.Cost != 0:
		return bad("a failed request costs nothing, not %s", r.Cost)
	case t.Prompt < 0 || t.Cached < 0 || t.CacheWrite < 0 || t.CacheWrite1h < 0 || t.Completion < 0 || t.Reasoning < 0 ||
		r.Units < 0 || r.UnitPrice < 0 || r.LatencyMS < 0 || r.FirstTokenMS < 0 || r.Expires < 0:
		return bad("a negative count")
	}
	for _, f := range [...]string{r.ID, r.Account, r.Key, r.ModelAsked, r.Model, r.Provider, r.Attempts, r.ServiceTier, r.FinishReason} {
		if strings.IndexByte(f, 0) >= 0 {
			return bad("a NUL byte")
		}
	}
	return nil
}

// invalidRecord is CheckRecord's error for record id.
func invalidRecord(id, format string, args ...any) error {
	return fmt.Errorf("record %q: %w: %s", id, ErrInvalidRecord, fmt.Sprintf(format, args...))
}

// CheckAddRecord validates a record for RecordStore.AddRecords:
// CheckRecord, and no cost unless it is a chat record (an image's or a
// speech's charge is written with its reservation's settlement:
// Reservations.SettleRecord).
func CheckAddRecord(r Record) error {
	if err := CheckRecord(r); err != nil {
		return err
	}
	if !r.Chat() && r.Cost != 0 {
		return fmt.Errorf("record %q: %w: a %s record's charge is written with its settlement", r.ID, ErrInvalidRecord, r.Kind)
	}
	return nil
}

// CheckSettledRecord validates r, the record written with settlement e
// (Reservations.SettleRecord): CheckRecord, e's account, and a cost that
// is what e charges (its Amount for a Capture, 0 for a Release).
func CheckSettledRecord(e Entry, r Record) error {
	if err := CheckRecord(r); err != nil {
		return err
	}
	charge := Amount(0)
	if e.Kind == Capture {
		charge = e.Amount
	}
	switch {
	case r.Account != e.Account:
		return fmt.Errorf("record %q: %w: account %q, its settlement's %q", r.ID, ErrInvalidRecord, r.Account, e.Account)
	case r.Cost != charge:
		return fmt.Errorf("record %q: %w: cost %s, its settlement charges %s", r.ID, ErrInvalidRecord, r.Cost, charge)
	}
	return nil
}

// UsageOf returns the usage increment of record r: one request of its
// account on the UTC day of its At, of the model that answered, with its
// tokens by class and its cost; ok is false for a record that adds none
// (not a chat record, or a failed request).
func UsageOf(r Record) (Usage, bool) {
	if !r.Chat() || r.Status == StatusFailed {
		return Usage{}, false
	}
	t := r.Tokens
	return Usage{Account: r.Account, Day: Day(time.UnixMilli(r.At)), Model: r.Model, Requests: 1,
		PromptTokens: t.Prompt, CompletionTokens: t.Completion, CachedTokens: t.Cached, CacheWriteTokens: t.CacheWrite,
		CacheWrite1hTokens: t.CacheWrite1h, ReasoningTokens: t.Reasoning, Credits: r.Cost}, true
}

// Charge returns what r charges its account, the Amount of ChargeOf(r)
// without building its entry; ok is false when r charges nothing.
func (r Record) Charge() (Amount, bool) {
	if !r.Chat() || r.Cost <= 0 {
		return 0, false
	}
	return r.Cost, true
}

// ChargeOf returns the ledger entry of chat record r's charge: ID
// ChatEntryID(r.ID), Kind Chat, Amount r.Cost, r's key, At the second of
// r.At; ok is false when r charges nothing (not a chat record, or no
// cost).
func ChargeOf(r Record) (Entry, bool) {
	if _, ok := r.Charge(); !ok {
		return Entry{}, false
	}
	return Entry{ID: ChatEntryID(r.ID), Account: r.Account, Kind: Chat, Amount: r.Cost, Key: r.Key, At: r.At / 1000}, true
}

// DefaultRecordRetention is how long a record is kept unless
// GENWAY_RECORD_DAYS says otherwise: 30 days.
const DefaultRecordRetention = 30 * 24 * time.Hour

// ExpiresAfter returns r.Expires, or, when it is 0, the Unix second
// retention after r.At: when a store may drop r.
func (r Record) ExpiresAfter(retention time.Duration) int64 {
	if r.Expires > 0 {
		return r.Expires
	}
	return r.At/1000 + int64(retention/time.Second)
}

// Expired reports whether r has an expiry at or before now (Unix
// seconds): a store reads it as gone, even before it deletes it.
func (r Record) Expired(now int64) bool { return r.Expires > 0 && r.Expires <= now }

// RecordWriter writes records: RecordStore.AddRecords.
type RecordWriter interface {
	AddRecords(ctx context.Context, rs []Record) []error
}

// AddRecordDetached writes r alone (RecordWriter.AddRecords), even when
// ctx has ended (the client went away), trying three times, each within
// 10 seconds; a record the store refuses (ErrInvalidRecord,
// ErrAccountNotFound) is not retried. The record of a synchronous request
// that moved no credits (a free speech) is written with it.
func AddRecordDetached(ctx context.Context, w RecordWriter, r Record) error {
	return detached(ctx, func(ctx context.Context) error { return w.AddRecords(ctx, []Record{r})[0] })
}

// RecordStore writes the records of requests, each with what it moves,
// and reads them. Implementations are safe for concurrent use.
type RecordStore interface {
	// AddRecords writes each record of rs that is not written yet
	// (CheckAddRecord), and, in the same atomic step, what it adds and
	// moves: for a chat record a model answered, its usage increment
	// (UsageOf) and, when its Cost is above 0, its charge: the account
	// debited (balance -= cost, available -= cost), the spend of its Key
	// (if set) raised by the cost, and its Chat ledger entry (ChargeOf).
	// Any other record is written alone (a failed request, a free image
	// or speech: an image's or speech's charge is written with its
	// settlement, Reservations.SettleRecord). A record without Expires
	// gets the store's retention after its At.
	//
	// A record whose ID is written already is left as it is, and its
	// step adds and charges nothing: a caller that did not learn the
	// outcome of a call (a timeout, a lost answer) retries it with the
	// same records without charging twice.
	//
	// The debit is unconditional: the tokens are already spent, so a
	// request is charged even if it takes available below zero. It
	// returns one error per record, in order (nil: written, by this call
	// or before). A record CheckAddRecord refuses is an error wrapping
	// ErrInvalidRecord, and so is a charge that would take the usage's
	// credits, the key's spend or the balance past ±MaxAmount (the error
	// matches ErrAmountRange too); a charged record of an unknown account
	// is ErrAccountNotFound: no retry writes those. Any other error may
	// succeed on a retry. A store may write the records in one
	// transaction or in several; each record's step is atomic.
	AddRecords(ctx context.Context, rs []Record) []error
	RecordReader
}

// RecordReader reads records.
type RecordReader interface {
	// Record returns the record id, or ErrRecordNotFound (also for one
	// that has expired).
	Record(ctx context.Context, id string) (Record, error)
	// Records returns a page of the records q selects, newest first (At
	// descending, then ID descending), and the cursor of the next page
	// ("" if none). Expired records are left out. A malformed q is an
	// *apierr.Error naming its query parameter (see
	// RecordQuery.Normalize).
	Records(ctx context.Context, q RecordQuery) ([]Record, string, error)
}

// Listing limits of RecordQuery.
const (
	DefaultRecordLimit = 50
	MaxRecordLimit     = 200
)

// RecordQuery selects records for RecordReader.Records: every filter set
// must match ("" matches any).
type RecordQuery struct {
	Account string
	Key     string // the API key's id
	// Model matches the model asked for or the one that answered.
	Model  string
	Status string // one of the Status* constants
	Kind   string // one of the Kind* constants
	// Cursor is the next cursor of the previous page ("" for the first).
	Cursor string
	// Limit is the page size, 1..MaxRecordLimit; 0 is DefaultRecordLimit.
	Limit int
}

// Normalize checks q and applies the default limit. Errors are
// *apierr.Error naming the query parameter (status, kind, limit, after,
// account, key, model).
func (q *RecordQuery) Normalize() error {
	switch q.Status {
	case "", StatusCompleted, StatusClientClosed, StatusUpstreamError, StatusFailed:
	default:
		return apierr.Invalidf("status", "invalid_value", "status must be one of completed, client_closed, upstream_error, failed; got %q.", q.Status)
	}
	switch q.Kind {
	case "", KindChat, KindResponses, KindMessages, KindImage, KindSpeech:
	default:
		return apierr.Invalidf("kind", "invalid_value", "kind must be one of chat, responses, messages, image, speech; got %q.", q.Kind)
	}
	for _, f := range []struct{ name, v string }{{"account", q.Account}, {"key", q.Key}, {"model", q.Model}} {
		if len(f.v) > 256 || strings.ContainsRune(f.v, 0) {
			return apierr.Invalidf(f.name, "invalid_value", "%s must be at most 256 characters, without NUL.", f.name)
		}
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultRecordLimit
	case q.Limit < 0 || q.Limit > MaxRecordLimit:
		return apierr.Invalidf("limit", "invalid_value", "limit must be from 1 to %d.", MaxRecordLimit)
	}
	_, err := DecodeRecordCursor(q.Cursor)
	return err
}

// Match reports whether r passes q's filters (not its cursor or limit).
func (q RecordQuery) Match(r Record) bool {
	return (q.Account == "" || r.Account == q.Account) &&
		(q.Key == "" || r.Key == q.Key) &&
		(q.Model == "" || r.Model == q.Model || r.ModelAsked == q.Model) &&
		(q.Status == "" || r.Status == q.Status) &&
		(q.Kind == "" || r.Kind == q.Kind)
}

// RecordCursor is a position in the newest-first order of records: the
// next page holds the records strictly after it (older, or as old with a
// smaller id).
type RecordCursor struct {
	At int64  `json:"a"` // Unix ms
	ID string `json:"i"`
}

// CursorOf returns the cursor just after r.
func CursorOf(r Record) RecordCursor { return RecordCursor{At: r.At, ID: r.ID} }

// After reports whether the record (at, id) comes after c, that is on a
// page after c. Every record comes after the zero cursor.
func (c RecordCursor) After(at int64, id string) bool {
	return c.IsZero() || at < c.At || (at == c.At && id < c.ID)
}

// IsZero reports whether c is the first page's (no position).
func (c RecordCursor) IsZero() bool { return c == RecordCursor{} }

// Encode returns c as an opaque string: base64url of its JSON.
func (c RecordCursor) Encode() string {
	b, _ := json.Marshal(c) // cannot fail: an int and a string
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeRecordCursor parses an Encode'd cursor; "" is the zero cursor
// (the first page). A malformed one is a 400 naming "after".
func DecodeRecordCursor(s string) (RecordCursor, error) {
	if s == "" {
		return RecordCursor{}, nil
	}
	bad := apierr.Invalidf("after", "invalid_value", "after must be the next_cursor of a previous page.")
	if len(s) > 512 {
		return RecordCursor{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return RecordCursor{}, bad
	}
	var c RecordCursor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.At <= 0 || c.ID == "" {
		return RecordCursor{}, bad
	}
	return c, nil
}
