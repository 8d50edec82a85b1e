package chat

import (
	"context"
	"errors"
	"fmt"

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
// BufferedRecorder's, see UnwrittenCreditsRecorder) count as spent. What
// remains: completions admitted while the account still had credits are
// charged in full, so the account can go below zero by at most the
// completions already in flight when it reaches zero (about one per
// concurrent request).
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
	a, err := g.balances.Account(ctx, account)
	switch {
	case errors.Is(err, credits.ErrAccountNotFound):
		a = credits.Account{ID: account} // no account, no credits
	case err != nil:
		return fmt.Errorf("admit %s for %s: read credits: %w", m.ID, account, err)
	}
	if u, ok := g.usage.(UnwrittenCreditsRecorder); ok {
		a.Available -= u.UnwrittenCredits(account)
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
