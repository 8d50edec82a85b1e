// Package app is Genway's composition root: it reads the configuration
// (Config, from the environment, once) and builds the parts that
// `genway serve` and the Lambda functions share from it, so that the two
// cannot drift. It is the one package of shared/ that imports the domain
// and every adapter together; only the mains (cmd/genway, functions/*)
// import it.
package app

import (
	"github.com/genway/genway/shared/webhooks"
)

// WebhookURLCheck returns the check of a job's webhook_url
// (jobs.Service.CheckWebhookURL): webhooks.CheckURL, with loopback and
// private hosts accepted only with GENWAY_WEBHOOK_ALLOW_PRIVATE=1.
func WebhookURLCheck(c Config) func(param, raw string) error {
	allow := c.WebhookAllowPrivate
	return func(param, raw string) error { return webhooks.CheckURL(param, raw, allow) }
}
