package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// GetGeneration serves GET /v1/generations/{id}: the record of one of the
// calling account's requests (credits.Record: a chat completion's
// chatcmpl-..., a Responses answer's resp_..., an image answer's img_...,
// a speech's X-Genway-Generation-Id), as OpenRouter's generation lookup
// answers it: {"data": {...}}, its amounts numbers of credits. Another
// account's record, an unknown id and an expired record are all the same
// 404 generation_not_found: an id tells nothing of other accounts.
func GetGeneration(records credits.RecordReader, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		rec, err := records.Record(r.Context(), id)
		if err == nil && rec.Account != account(r) {
			err = credits.ErrRecordNotFound
		}
		if errors.Is(err, credits.ErrRecordNotFound) {
			err = &apierr.Error{Kind: apierr.NotFound, Code: "generation_not_found", Param: "id",
				Message: "No generation with this id: unknown, expired (records are kept for a limited time), or not this account's."}
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct {
			Data credits.Record `json:"data"`
		}{rec})
		return nil
	})
}
