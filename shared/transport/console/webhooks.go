package console

import (
	"net/http"
	"net/url"

	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// webhookRoutes are the webhook pages: an account's default URL and
// secret rotation, and a job's resend (its deliveries are on the job
// page). None without Config.Webhooks.
func (c *Console) webhookRoutes() []Route {
	if c.cfg.Webhooks == nil {
		return nil
	}
	return []Route{
		{"GET", "/console/accounts/{id}/webhook", c.webhookPage},
		{"POST", "/console/accounts/{id}/webhook", c.setWebhookURL},
		{"POST", "/console/accounts/{id}/webhook/rotate", c.rotateWebhookSecret},
		{"POST", "/console/jobs/{id}/webhook/resend", c.resendWebhook},
	}
}

// webhookPage is the account webhook page's data.
type webhookPage struct {
	httpapi.WebhookConfigView
}

func (c *Console) webhookPage(p *Page, w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := c.cfg.Operator.Account(r.Context(), id); err != nil {
		return err
	}
	cfg, err := c.cfg.Webhooks.Config(r.Context(), id)
	if err != nil {
		return err
	}
	p.Section, p.Title = "accounts", "Webhooks of "+id
	p.Flash = r.URL.Query().Get("done")
	p.Data = webhookPage{httpapi.ViewWebhookConfig(cfg, c.now().Unix())}
	return p.Render(w, r, "webhook")
}

func (c *Console) setWebhookURL(p *Page, w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := c.cfg.Operator.Account(r.Context(), id); err != nil {
		return err
	}
	u := r.PostFormValue("url")
	if _, err := c.cfg.Webhooks.SetURL(r.Context(), id, u); err != nil {
		return err
	}
	c.record(r.Context(), "webhooks.set_url", id, "url "+u)
	http.Redirect(w, r, "/console/accounts/"+url.PathEscape(id)+"/webhook?done=saved", http.StatusSeeOther)
	return nil
}

func (c *Console) rotateWebhookSecret(p *Page, w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := c.cfg.Operator.Account(r.Context(), id); err != nil {
		return err
	}
	if _, err := c.cfg.Webhooks.Rotate(r.Context(), id); err != nil {
		return err
	}
	c.record(r.Context(), "webhooks.rotate_secret", id, "the previous secret signs too for 24 h")
	http.Redirect(w, r, "/console/accounts/"+url.PathEscape(id)+"/webhook?done=rotated", http.StatusSeeOther)
	return nil
}

func (c *Console) resendWebhook(p *Page, w http.ResponseWriter, r *http.Request) error {
	j, err := c.getJob(r)
	if err != nil {
		return err
	}
	if _, err := c.cfg.Webhooks.Resend(r.Context(), j.ID); err != nil {
		return err
	}
	c.record(r.Context(), "webhooks.resend", j.ID, "account "+j.Account)
	http.Redirect(w, r, "/console/jobs/"+url.PathEscape(j.ID)+"?done=webhook+resent", http.StatusSeeOther)
	return nil
}

// deliveries returns the job's webhook deliveries for its page (nil
// without Config.Webhooks).
func (c *Console) deliveries(r *http.Request, jobID string) ([]*webhooks.Delivery, error) {
	if c.cfg.Webhooks == nil {
		return nil, nil
	}
	return c.cfg.Webhooks.Deliveries(r.Context(), jobID)
}
