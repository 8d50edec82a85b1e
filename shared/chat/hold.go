package chat

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
)

// Holds: a priced completion asked for with an API key that has a credit
// limit is held like an image or a speech. Before any upstream call, Run
// reserves the most the completion can cost on the account and on the
// key, in one atomic check (Holds.Reserve), so that parallel requests
// cannot take the key past its limit; the answer's record is then given
// to the store with its charge (Holds.AddRecords: the key's spend shows it
// at once), and the hold released, before the answer's end reaches the
// client.
// Without a limited key nothing is held, and Admit's rule applies.
//
// The most a completion can cost is its candidates' highest
// Price.MaxChatCost of inputBound's tokens and the output bound: the
// request's max_tokens (or max_completion_tokens), else the model's
// catalog max_tokens, else HeldOutputTokens, which Run then sends as the
// upstream's max_tokens so that the bound holds.

// HeldOutputTokens is the output bound of a held completion whose request
// sets no max_tokens and whose model has no catalog max_tokens: the
// upstream is sent max_tokens = HeldOutputTokens.
const HeldOutputTokens = 4096

// Input bounds: a token is at least one byte of text for the tokenizers
// of every supported provider (byte-level BPE; SentencePiece with byte
// fallback), so a message's bytes bound its tokens. What the bytes do not
// show is bounded by assumption.
const (
	// imageTokenBound is the tokens assumed for one image part (the
	// providers' documented image costs are 85 to a few thousand tokens,
	// by size and detail).
	imageTokenBound = 8192
	// messageTokenBound is each message's framing (role, separators).
	messageTokenBound = 16
	// toolsTokenBound is the system text a provider adds for tools or a
	// response format (Anthropic's tool use prompt is a few hundred
	// tokens).
	toolsTokenBound = 1024
)

// Holds is what a held completion needs of the credits store, beside
// Balances: its reservation (credits.Reserver's Reserve, within the
// account's available credits and the key's limit), the account for a
// 402's message, the reservation's release (Settle), and the record with
// its charge (AddRecords), which counts in the key's spend before the
// release does. A Gateway with Holds in its Config holds the priced
// completions of limited keys. dynamostore.Store implements it with
// conditional writes, each record written before AddRecords returns;
// localstore.Store too, and localstore.MemoryHolds (what `genway serve`
// uses) without waiting for a commit: its holds are in memory, its records
// written behind (see localstore's gate).
type Holds interface {
	credits.Reserving
	Settle(ctx context.Context, e credits.Entry) error
	RecordStore
}

// errNoHolds refuses the priced completion of a limited key on a Gateway
// with Balances and no Holds: its limit cannot be kept, and a completion
// is never run past it unheld.
var errNoHolds = errors.New("chat: a key with a credit limit asked for a priced model, and the gateway has no Holds to keep the limit (Config.Holds)")

// heldJobType is a held completion's reservation's JobType (its
// settlement is always a release: the charge is the usage's).
const heldJobType = "chat"

// hold is a completion's reservation.
type hold struct {
	store Holds
	entry credits.Entry // the reservation
	// out is the output bound by candidate model id, for a model whose
	// request sets no max_tokens: Run sends it as max_tokens.
	out      map[string]int
	released bool
}

// hold reserves what the completion of p over candidates ids can cost at
// most, when the caller's API key has a credit limit and some candidate
// is priced; it returns nil (nothing held) otherwise, and when credits
// are off (no Balances, no Holds). A refusal is the key's 402
// (credits.ErrKeyLimit) or the account's (insufficient credits), with
// nothing written; a Gateway with Balances and no Holds refuses with
// errNoHolds.
func (g *Gateway) hold(ctx context.Context, account string, p *Params, ids []string) (*hold, error) {
	pr, ok := auth.FromContext(ctx)
	if !ok || !pr.Limited || pr.KeyID == "" {
		return nil, nil // the common case: nothing more to look at
	}
	hs := g.holds
	if hs == nil && g.balances == nil {
		return nil, nil
	}
	in := inputBound(p)
	var amount credits.Amount
	var out map[string]int // made for the first model without max_tokens
	for _, id := range ids {
		m, ok := g.cat.Model(id)
		if !ok || !charges(m.Price) {
			continue
		}
		n, err := maxTokens(p, m)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			n = heldOutput(m)
			if out == nil {
				out = map[string]int{}
			}
			out[id] = n
		}
		in := in
		if speaks(p, g.providers[m.Provider]) {
			in = max(in, len(p.Native.Body)) // what the translation could not carry is in the body
		}
		amount = max(amount, m.Price.MaxChatCost(int64(in), int64(n)))
	}
	if amount == 0 {
		return nil, nil
	}
	if hs == nil {
		return nil, errNoHolds
	}
	id := newHoldID()
	e := credits.Entry{ID: credits.ReservationID(id), Account: account, Kind: credits.Reservation, Amount: amount,
		JobID: id, JobType: heldJobType, Model: ids[0], Key: pr.KeyID, At: time.Now().Unix()}
	err := credits.ReserveFor(ctx, hs, e, "This completion, at its max_tokens,", false)
	var ae *apierr.Error
	if errors.Is(err, credits.ErrKeyLimit) && errors.As(err, &ae) {
		return nil, &apierr.Error{Kind: ae.Kind, Code: ae.Code, Err: err, Message: ae.Message +
			" For a chat completion that is the most it can cost: its input and its max_tokens (else the model's) at the model's price; a smaller max_tokens needs less."}
	}
	if err != nil {
		return nil, err
	}
	return &hold{store: hs, entry: e, out: out}, nil
}

// holdEncoding is the alphabet of a hold's id: rand.Text's, in lower case.
var holdEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newHoldID returns a new hold's id: "chat_", then 26 characters of 128
// random bits (as strings.ToLower(rand.Text()) makes them), in one
// allocation.
func newHoldID() string {
	var r [16]byte
	rand.Read(r[:]) // never fails (crypto/rand)
	var b [5 + 26]byte
	copy(b[:], "chat_")
	holdEncoding.Encode(b[5:], r[:])
	return string(b[:])
}

// heldOutput is the output bound of a held completion of m whose request
// sets no max_tokens: the model's catalog max_tokens, else
// HeldOutputTokens.
func heldOutput(m *catalog.Model) int {
	if m.MaxTokens > 0 {
		return m.MaxTokens
	}
	return HeldOutputTokens
}

// limit sets c's max_tokens to the hold's output bound for its model when
// the request set none, so that the upstream cannot answer more than was
// held. A nil hold does nothing.
func (h *hold) limit(c *Call) {
	if h == nil || c.Request.MaxTokens != 0 {
		return
	}
	if n, ok := h.out[c.Request.Model.ID]; ok {
		c.Request.MaxTokens = n
	}
}

// record gives r, the record of the completion's answer, with its charge,
// to the store before it returns (so that the key's spend shows it before
// the hold goes); a charge above the hold (a provider counting more
// tokens than the bound) is charged all the same and logged.
func (h *hold) record(ctx context.Context, g *Gateway, r credits.Record) {
	if r.Cost > h.entry.Amount {
		g.log.WarnContext(ctx, "chat charge above its hold", "account", r.Account, "model", r.Model,
			"charge", r.Cost, "hold", h.entry.Amount, "prompt_tokens", r.Tokens.Prompt, "completion_tokens", r.Tokens.Completion)
	}
	if err := (StoreRecorder{Store: h.store}).Record(context.WithoutCancel(ctx), r); err != nil {
		g.log.ErrorContext(ctx, "record chat usage", "account", r.Account, "model", r.Model, "record", r.ID, "err", err)
	}
}

// release releases all the hold holds (the charge, if any, was the
// usage's), retried past the client's going; one that cannot be written
// stays held until the reconciler releases it. A nil hold, or one
// released already, does nothing (Run defers it for every way out, and
// calls it itself after a completion's usage).
func (h *hold) release(ctx context.Context, g *Gateway) {
	if h == nil || h.released {
		return
	}
	h.released = true
	id, _ := strings.CutPrefix(h.entry.ID, credits.ReservationID(""))
	e := credits.Entry{ID: credits.SettlementID(id), Account: h.entry.Account, Kind: credits.Release, Amount: h.entry.Amount,
		JobID: h.entry.JobID, JobType: h.entry.JobType, Model: h.entry.Model, At: time.Now().Unix()}
	if err := credits.SettleDetached(ctx, h.store, e); err != nil {
		g.log.ErrorContext(ctx, "release chat hold", "account", h.entry.Account, "hold", h.entry.ID, "amount", h.entry.Amount, "err", err)
	}
}

// inputBound is an upper bound of p's input tokens: the bytes of its
// texts (measureInput), and the assumed bounds of images, framing and
// tool prompts. A candidate that gets the request natively is held for at
// least the bytes of the client's body, which holds what the translation
// could not carry (see hold); its hosted tools (a web search) may add
// input of their own: an answer charged above its hold is charged all
// the same.
func inputBound(p *Params) int {
	return measureInput(p).bound()
}
