package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/genway/genway/shared/credits"
)

// AccountReader reads an account's credit position.
type AccountReader interface {
	Account(ctx context.Context, id string) (credits.Account, error)
}

// GetCredits serves GET /v1/credits: the calling account's balance, held
// credits (of jobs not yet final) and available credits.
func GetCredits(store AccountReader, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := store.Account(r.Context(), account(r))
		if err != nil && !errors.Is(err, credits.ErrAccountNotFound) {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Object    string `json:"object"`
			Account   string `json:"account"`
			Balance   int64  `json:"balance"`
			Held      int64  `json:"held"`
			Available int64  `json:"available"`
		}{"credits", account(r), a.Balance, a.Held, a.Available})
	})
}
