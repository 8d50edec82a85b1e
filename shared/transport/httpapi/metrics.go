package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/metrics"
)

// Metrics serves reg in the Prometheus text format (GET /metrics) to the
// operator: Authorization: Bearer <operator token> (Prometheus'
// bearer_token setting), else 401 like the admin API.
func Metrics(reg *metrics.Registry, v *admin.Verifier, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !v.Verify(strings.TrimSpace(tok)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="genway-metrics"`)
			return &apierr.Error{Kind: apierr.Unauthenticated, Code: "invalid_admin_token",
				Message: "Metrics need the operator token (Authorization: Bearer gwop_...)."}
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		reg.WriteTo(w)
		return nil
	})
}
