package chat

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
)

// Balances is where Admit reads an account's credit position: the
// credits store (localstore.Store and dynamostore.Store implement it).
// Account returns credits.ErrAccountNotFound for an unknown account.
type Balances interface {
	Account(ctx context.Context, id string) (credits.Account, error)
}

// ErrInsufficientCredits is the error Admit returns (wrapped in a copy with
// a message naming the model) when a priced chat model is asked for by an
// account with no credits left. errors.Is matches it.
var ErrInsufficientCredits = &apierr.Error{Kind: apierr.InsufficientQuota, Code: "insufficient_credits",
	Message: "The account has no credits left for this priced model."}

// Admit decides, before any upstream call, whether account may run c. A
// chat completion is charged after it finishes (Run records usage), and the charge
// is unconditional (the tokens are spent), so Admit is what bounds an
// account's overdraft: it refuses a completion of a priced model (one whose
// catalog price charges per input or output token) while the account's
// available credits are <= 0. An account unknown to the store has no
// credits and is refused the same way. The refusal is an *apierr.Error
// matching ErrInsufficientCredits (InsufficientQuota, 402
// insufficient_credits). A store error is returned wrapped, with its
// cause (a 500 at the HTTP edge).
//
// Charges the UsageRecorder holds and has not written yet (a
// BufferedRecorder's, see UsageRecorder.UnwrittenCredits) count as spent. What
// remains: completions admitted while the account still had credits are
// charged in full, so the account can go below zero by at most the
// completions already in flight when it reaches zero (about one per
// concurrent request).
//
// The account's position is read from the store at most once per the
// gateway's AdmitTTL (one second by default), less what the gateway
// charged it since, so that a busy account's completions do not each
// wait on a store read; other movements of the account (jobs' holds,
// other processes) are seen up to that much later (see available).
//
// A caller whose API key has a credit limit does not come here for a
// priced model: Run holds its completion instead (see Holds), which
// bounds the key's spend exactly.
//
// An unpriced model never reads the store, and without Balances in the
// Config Admit does nothing and returns nil. It is safe for concurrent use.
func (g *Gateway) Admit(ctx context.Context, account string, c *Call) error {
	m := c.Request.Model
	if g.balances == nil || !charges(m.Price) {
		return nil
	}
	a, kept, err := g.available(ctx, account, false)
	if err == nil && a.Available <= 0 && kept {
		// A refusal is never made on a kept read: the account may have
		// been granted credits since.
		a, _, err = g.available(ctx, account, true)
	}
	if err != nil {
		return fmt.Errorf("admit %s for %s: read credits: %w", m.ID, account, err)
	}
	if a.Available <= 0 {
		return &apierr.Error{Kind: ErrInsufficientCredits.Kind, Code: ErrInsufficientCredits.Code, Err: err,
			Message: fmt.Sprintf("The account has no credits left for priced model %q (available: %s); add credits, or use an unpriced model.", m.ID, a.Available)}
	}
	return nil
}

// charges reports whether p makes a chat completion cost credits: a price
// per million tokens of some class above zero.
func charges(p *catalog.Price) bool {
	return p.ChargesTokens()
}

// DefaultAdmitTTL is how long Admit uses an account's credits as it read
// them (Config.AdmitTTL), less what this gateway charged the account
// since: a busy account's priced completions read the store about once a
// second, not once each.
const DefaultAdmitTTL = time.Second

// admitRead is an account's credits as Admit read them, when, and what
// this gateway has charged the account since.
type admitRead struct {
	a     credits.Account // Available less the recorder's unwritten charges then
	at    time.Time
	spent atomic.Int64 // credits.Amount charged since at
}

// available returns account's credit position for Admit: Available is
// what the store says, less the charges the UsageRecorder has not written
// yet (see UsageRecorder.UnwrittenCredits); kept says it is a kept read. Unless
// fresh is set, a position read
// within the gateway's AdmitTTL is used, less what this gateway charged
// the account since (noteCharge), else it is read from the store now (an
// account the store does not know has none). What else moves the account
// meanwhile (a job's hold, another process's charges, a grant) is seen at
// the next read, at most AdmitTTL later: an account that reaches zero
// that way can be admitted completions for that long more (charged in
// full, as any admitted completion). Admit reads afresh before it
// refuses, so a grant is never missed.
func (g *Gateway) available(ctx context.Context, account string, fresh bool) (a credits.Account, kept bool, err error) {
	now := time.Now()
	if g.admitTTL > 0 && !fresh {
		if v, ok := g.admitted.Load(account); ok {
			if r := v.(*admitRead); now.Sub(r.at) < g.admitTTL {
				a = r.a
				a.Available -= credits.Amount(r.spent.Load())
				return a, true, nil
			}
		}
	}
	a, err = g.balances.Account(ctx, account)
	switch {
	case errors.Is(err, credits.ErrAccountNotFound):
		a, err = credits.Account{ID: account}, nil // no account, no credits
	case err != nil:
		return credits.Account{}, false, err
	}
	if g.usage != nil {
		a.Available -= g.usage.UnwrittenCredits(account)
	}
	if g.admitTTL > 0 {
		if _, had := g.admitted.Swap(account, &admitRead{a: a, at: now}); !had && g.admittedN.Add(1) > maxAdmitted {
			// Many accounts: start afresh rather than grow without bound.
			g.admitted.Clear()
			g.admittedN.Store(0)
		}
	}
	return a, false, nil
}

// noteCharge adds cost, just charged to account, to what Admit's kept
// read of the account has spent since.
func (g *Gateway) noteCharge(account string, cost credits.Amount) {
	if cost <= 0 || g.admitTTL <= 0 {
		return
	}
	if v, ok := g.admitted.Load(account); ok {
		v.(*admitRead).spent.Add(int64(cost))
	}
}

// maxAdmitted bounds the accounts whose reads Admit keeps.
const maxAdmitted = 1 << 16
