package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// AccountReader reads an account's credit position.
type AccountReader interface {
	Account(ctx context.Context, id string) (credits.Account, error)
}

// KeyReader reads an API key's record with its spend (both stores).
type KeyReader interface {
	KeyByID(ctx context.Context, id string) (auth.Record, error)
}

// CreditsReader is what GET /v1/credits reads: the account, and the
// calling key's record (both stores are one).
type CreditsReader interface {
	AccountReader
	KeyReader
}

// keyCredits is the "key" member of GET /v1/credits: the calling key's
// credit limit and what it has spent, holds and has left; with a reset,
// the period Spent counts and when the next one starts (Unix seconds).
type keyCredits struct {
	ID          string         `json:"id"`
	CreditLimit credits.Amount `json:"credit_limit"`
	Spent       credits.Amount `json:"spent"`
	Held        credits.Amount `json:"held"`
	Left        credits.Amount `json:"left"`
	Reset       string         `json:"reset,omitempty"`
	Period      string         `json:"period,omitempty"`
	ResetsAt    int64          `json:"resets_at,omitempty"`
}

// GetCredits serves GET /v1/credits: the calling account's balance, held
// credits (of jobs not yet final) and available credits; and, when the
// calling key has a credit limit, the key's limit, spent, held and left
// under "key" (with its reset, period and resets_at when the limit
// resets).
func GetCredits(store CreditsReader, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		a, err := store.Account(r.Context(), account(r))
		if err != nil && !errors.Is(err, credits.ErrAccountNotFound) {
			return err
		}
		var key *keyCredits
		p, _ := auth.FromContext(r.Context())
		if p.Limited && p.KeyID != "" {
			k, err := store.KeyByID(r.Context(), p.KeyID)
			if err != nil {
				return err
			}
			now := time.Now()
			k = k.InPeriod(now)
			if left, ok := k.Left(); ok {
				key = &keyCredits{ID: k.ID, CreditLimit: *k.CreditLimit, Spent: k.Spent, Held: k.Held, Left: left}
				if k.CreditLimitReset != auth.ResetNever {
					key.Reset, key.Period, key.ResetsAt = k.CreditLimitReset, k.Period, k.ResetAt(now).Unix()
				}
			}
		}
		writeJSON(w, http.StatusOK, struct {
			Object    string         `json:"object"`
			Account   string         `json:"account"`
			Balance   credits.Amount `json:"balance"`
			Held      credits.Amount `json:"held"`
			Available credits.Amount `json:"available"`
			Key       *keyCredits    `json:"key,omitempty"`
		}{"credits", account(r), a.Balance, a.Held, a.Available, key})
		return nil
	})
}
