package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/webhooks"
)

// JobObject returns the renderer of a webhook's data: the job as GET
// /v1/jobs/{id} answers it, its output link made now.
func JobObject(svc *jobs.Service) func(ctx context.Context, j *jobs.Job) (any, error) {
	return func(ctx context.Context, j *jobs.Job) (any, error) {
		url, err := svc.Link(ctx, j)
		if err != nil {
			return nil, err
		}
		return viewJob(j, url), nil
	}
}

// webhookSecret is the GET /v1/webhooks/secret answer.
type webhookSecret struct {
	Object string `json:"object"` // "webhook_secret"
	Secret string `json:"secret"`
}

// GetWebhookSecret serves GET /v1/webhooks/secret: the calling account's
// signing secret, made on first use.
func GetWebhookSecret(hooks *webhooks.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		s, err := hooks.Secret(r.Context(), account(r))
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, webhookSecret{Object: "webhook_secret", Secret: s})
		return nil
	})
}

// WebhookConfigView is an account's webhook settings as the admin API
// shows them: the secret's first characters only.
type WebhookConfigView struct {
	Object        string `json:"object"` // "webhook_config"
	Account       string `json:"account"`
	URL           string `json:"url"`
	SecretPrefix  string `json:"secret_prefix"`
	PreviousUntil int64  `json:"previous_until,omitempty"` // while the rotated-out secret still signs
}

// ViewWebhookConfig is c as the admin API and console show it.
func ViewWebhookConfig(c webhooks.Config, now int64) WebhookConfigView {
	v := WebhookConfigView{Object: "webhook_config", Account: c.Account, URL: c.URL, SecretPrefix: secretPrefix(c.Secret)}
	if c.Previous != "" && c.PreviousUntil > now {
		v.PreviousUntil = c.PreviousUntil
	}
	return v
}

func secretPrefix(s string) string {
	const n = len(webhooks.SecretPrefix) + 4
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// deliveryView is a delivery as the admin API shows it.
type deliveryView struct {
	Object string `json:"object"` // "webhook_delivery"
	*webhooks.Delivery
}

// webhookAdminRoutes are the admin API's webhook routes:
//
//	GET  /admin/v1/accounts/{id}/webhook              the account's config
//	POST /admin/v1/accounts/{id}/webhook              {"url": "https://…"} sets its default URL ("" removes it)
//	POST /admin/v1/accounts/{id}/webhook/rotate       a new secret; the old one signs too for 24 h
//	GET  /admin/v1/jobs/{id}/deliveries               the job's deliveries
//	POST /admin/v1/jobs/{id}/deliveries/resend        send the job's webhook again
//
// The account must exist; changes are audited where the operator records.
func webhookAdminRoutes(cfg AdminConfig, wrap func(adminHandler) http.Handler) []Route {
	hooks := cfg.Webhooks
	if hooks == nil {
		return nil
	}
	account := func(r *http.Request) (string, error) {
		id := r.PathValue("id")
		if _, err := cfg.Operator.Account(r.Context(), id); err != nil {
			return "", err
		}
		return id, nil
	}
	record := func(r *http.Request, action, target, detail string) {
		cfg.Operator.Record(r.Context(), action, target, detail)
	}
	now := func() int64 {
		if hooks.Now != nil {
			return hooks.Now().Unix()
		}
		return time.Now().Unix()
	}
	return []Route{
		{Method: "GET", Pattern: "/admin/v1/accounts/{id}/webhook", Handler: wrap(func(r *http.Request) (any, error) {
			id, err := account(r)
			if err != nil {
				return nil, err
			}
			c, err := hooks.Config(r.Context(), id)
			if err != nil {
				return nil, err
			}
			return ViewWebhookConfig(c, now()), nil
		})},
		{Method: "POST", Pattern: "/admin/v1/accounts/{id}/webhook", Handler: wrap(func(r *http.Request) (any, error) {
			var body struct {
				URL *string `json:"url"`
			}
			if err := decodeBody(r, &body); err != nil {
				return nil, err
			}
			if body.URL == nil {
				return nil, apierr.Invalidf("url", "invalid_value", `The body must be {"url": "https://..."} ("" removes the default URL).`)
			}
			id, err := account(r)
			if err != nil {
				return nil, err
			}
			if _, err := hooks.SetURL(r.Context(), id, *body.URL); err != nil {
				return nil, err
			}
			record(r, "webhooks.set_url", id, "url "+*body.URL)
			c, err := hooks.Config(r.Context(), id)
			if err != nil {
				return nil, err
			}
			return ViewWebhookConfig(c, now()), nil
		})},
		{Method: "POST", Pattern: "/admin/v1/accounts/{id}/webhook/rotate", Handler: wrap(func(r *http.Request) (any, error) {
			id, err := account(r)
			if err != nil {
				return nil, err
			}
			c, err := hooks.Rotate(r.Context(), id)
			if err != nil {
				return nil, err
			}
			record(r, "webhooks.rotate_secret", id, "the previous secret signs too for 24 h")
			return ViewWebhookConfig(c, now()), nil
		})},
		{Method: "GET", Pattern: "/admin/v1/jobs/{id}/deliveries", Handler: wrap(func(r *http.Request) (any, error) {
			ds, err := hooks.Deliveries(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			out := make([]deliveryView, len(ds))
			for i, d := range ds {
				out[i] = deliveryView{Object: "webhook_delivery", Delivery: d}
			}
			return map[string]any{"object": "list", "data": out, "has_more": false}, nil
		})},
		{Method: "POST", Pattern: "/admin/v1/jobs/{id}/deliveries/resend", Handler: wrap(func(r *http.Request) (any, error) {
			d, err := hooks.Resend(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			record(r, "webhooks.resend", d.JobID, "account "+d.Account)
			return deliveryView{Object: "webhook_delivery", Delivery: d}, nil
		})},
	}
}
