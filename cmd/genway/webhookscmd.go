package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/app/localserver"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

const webhooksUsage = `Usage:
  genway webhooks show --account NAME              the account's default URL and secret (its prefix)
  genway webhooks url --account NAME URL           set the account's default webhook URL ("" removes it)
  genway webhooks rotate --account NAME            a new signing secret; the old one signs too for 24 h
  genway webhooks deliveries JOB_ID                the job's webhook deliveries
  genway webhooks resend JOB_ID                    send the job's webhook again (same webhook-id)
`

// webhookOps are the operator's webhook commands: on the store itself, or
// through a server's admin API (its socket, or GENWAY_URL).
type webhookOps interface {
	config(ctx context.Context, account string) (httpapi.WebhookConfigView, error)
	setURL(ctx context.Context, account, u string) (httpapi.WebhookConfigView, error)
	rotate(ctx context.Context, account string) (httpapi.WebhookConfigView, error)
	deliveries(ctx context.Context, jobID string) ([]*webhooks.Delivery, error)
	resend(ctx context.Context, jobID string) (*webhooks.Delivery, error)
}

// localHooks runs the commands on a store.
type localHooks struct {
	svc *webhooks.Service
	op  *admin.Service // the account must exist; changes are audited
}

func (l localHooks) account(ctx context.Context, id string) error {
	_, err := l.op.Account(ctx, id)
	return err
}

func (l localHooks) view(c webhooks.Config, err error) (httpapi.WebhookConfigView, error) {
	if err != nil {
		return httpapi.WebhookConfigView{}, err
	}
	return httpapi.ViewWebhookConfig(c, time.Now().Unix()), nil
}

func (l localHooks) config(ctx context.Context, account string) (httpapi.WebhookConfigView, error) {
	if err := l.account(ctx, account); err != nil {
		return httpapi.WebhookConfigView{}, err
	}
	return l.view(l.svc.Config(ctx, account))
}

func (l localHooks) setURL(ctx context.Context, account, u string) (httpapi.WebhookConfigView, error) {
	if err := l.account(ctx, account); err != nil {
		return httpapi.WebhookConfigView{}, err
	}
	if _, err := l.svc.SetURL(ctx, account, u); err != nil {
		return httpapi.WebhookConfigView{}, err
	}
	l.op.Record(ctx, "webhooks.set_url", account, "url "+u)
	return l.view(l.svc.Config(ctx, account))
}

func (l localHooks) rotate(ctx context.Context, account string) (httpapi.WebhookConfigView, error) {
	if err := l.account(ctx, account); err != nil {
		return httpapi.WebhookConfigView{}, err
	}
	c, err := l.svc.Rotate(ctx, account)
	if err == nil {
		l.op.Record(ctx, "webhooks.rotate_secret", account, "the previous secret signs too for 24 h")
	}
	return l.view(c, err)
}

func (l localHooks) deliveries(ctx context.Context, jobID string) ([]*webhooks.Delivery, error) {
	return l.svc.Deliveries(ctx, jobID)
}

func (l localHooks) resend(ctx context.Context, jobID string) (*webhooks.Delivery, error) {
	d, err := l.svc.Resend(ctx, jobID)
	if err == nil {
		l.op.Record(ctx, "webhooks.resend", jobID, "account "+d.Account)
	}
	return d, err
}

// remoteHooks runs the commands through the admin API.
type remoteHooks struct{ c *admin.Client }

func (r remoteHooks) config(ctx context.Context, account string) (v httpapi.WebhookConfigView, err error) {
	err = r.c.Call(ctx, "GET", "/accounts/"+url.PathEscape(account)+"/webhook", nil, &v)
	return v, err
}

func (r remoteHooks) setURL(ctx context.Context, account, u string) (v httpapi.WebhookConfigView, err error) {
	err = r.c.Call(ctx, "POST", "/accounts/"+url.PathEscape(account)+"/webhook", map[string]string{"url": u}, &v)
	return v, err
}

func (r remoteHooks) rotate(ctx context.Context, account string) (v httpapi.WebhookConfigView, err error) {
	err = r.c.Call(ctx, "POST", "/accounts/"+url.PathEscape(account)+"/webhook/rotate", nil, &v)
	return v, err
}

func (r remoteHooks) deliveries(ctx context.Context, jobID string) ([]*webhooks.Delivery, error) {
	var l struct {
		Data []*webhooks.Delivery `json:"data"`
	}
	err := r.c.Call(ctx, "GET", "/jobs/"+url.PathEscape(jobID)+"/deliveries", nil, &l)
	return l.Data, err
}

func (r remoteHooks) resend(ctx context.Context, jobID string) (*webhooks.Delivery, error) {
	var d webhooks.Delivery
	err := r.c.Call(ctx, "POST", "/jobs/"+url.PathEscape(jobID)+"/deliveries/resend", nil, &d)
	return &d, err
}

// openWebhooks returns the webhook commands for the configured backend,
// as openOperator does for the others.
func openWebhooks(ctx context.Context, getenv func(string) string) (webhookOps, func() error, error) {
	cfg, err := app.LoadConfig(app.Serve, getenv)
	if err != nil {
		return nil, nil, err
	}
	allow := cfg.WebhookAllowPrivate
	if cfg.Backend == "aws" && cfg.URL == "" {
		p, err := localserver.OpenAWS(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		svc := &webhooks.Service{Store: p.Hooks, Jobs: p.Jobs, Queue: p.HookQueue, AllowPrivate: allow}
		return localHooks{svc, &admin.Service{Store: p.Store, Jobs: p.Jobs}}, func() error { return nil }, nil
	}
	op, closeFn, err := openOperator(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	switch o := op.(type) {
	case *admin.Client:
		return remoteHooks{o}, closeFn, nil
	case *admin.Service:
		st, ok := o.Store.(interface {
			webhooks.Store
			webhooks.Queue
		})
		if !ok {
			closeFn()
			return nil, nil, errors.New("this store keeps no webhooks")
		}
		svc := &webhooks.Service{Store: st, Jobs: o.Jobs, Queue: st, AllowPrivate: allow}
		return localHooks{svc, o}, closeFn, nil
	}
	closeFn()
	return nil, nil, fmt.Errorf("webhooks: unexpected operator %T", op)
}

func webhooksCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("webhooks needs a subcommand: show, url, rotate, deliveries or resend")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, webhooksUsage)
		return nil
	}
	fs := newFlags("webhooks " + args[0])
	account := fs.String("account", "", "the account")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	rest := fs.Args()
	var do func(webhookOps) error
	showConfig := func(v httpapi.WebhookConfigView, err error) error {
		if err != nil {
			return err
		}
		u := v.URL
		if u == "" {
			u = "(none)"
		}
		fmt.Fprintf(stdout, "account %s: default URL %s, secret %s\n", v.Account, u, v.SecretPrefix)
		if v.PreviousUntil != 0 {
			fmt.Fprintf(stdout, "the previous secret signs too until %s\n", time.Unix(v.PreviousUntil, 0).UTC().Format(time.RFC3339))
		}
		return nil
	}
	switch args[0] {
	case "show", "url", "rotate":
		if *account == "" {
			return usageError("webhooks " + args[0] + " needs --account NAME")
		}
		switch {
		case args[0] == "url" && len(rest) != 1:
			return usageError(`webhooks url needs the URL ("" removes it)`)
		case args[0] != "url" && len(rest) != 0:
			return usageError("webhooks " + args[0] + " takes no arguments")
		}
		do = func(ops webhookOps) error {
			switch args[0] {
			case "url":
				return showConfig(ops.setURL(ctx, *account, rest[0]))
			case "rotate":
				return showConfig(ops.rotate(ctx, *account))
			}
			return showConfig(ops.config(ctx, *account))
		}
	case "deliveries", "resend":
		if len(rest) != 1 {
			return usageError("webhooks " + args[0] + " needs a JOB_ID")
		}
		do = func(ops webhookOps) error {
			var ds []*webhooks.Delivery
			if args[0] == "resend" {
				d, err := ops.resend(ctx, rest[0])
				if err != nil {
					return err
				}
				ds = []*webhooks.Delivery{d}
			} else {
				var err error
				if ds, err = ops.deliveries(ctx, rest[0]); err != nil {
					return err
				}
			}
			if len(ds) == 0 {
				fmt.Fprintf(stdout, "job %s has no webhook delivery\n", rest[0])
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EVENT\tURL\tTYPE\tSTATUS\tATTEMPTS\tLAST CODE\tLAST ERROR\tNEXT")
			for _, d := range ds {
				next := ""
				if d.Status == webhooks.Pending && d.NextAt != 0 {
					next = time.Unix(d.NextAt, 0).UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.ID, d.URL, d.Type, d.Status, d.Attempts, d.LastCode, d.LastError, next)
			}
			return tw.Flush()
		}
	default:
		return usageError(fmt.Sprintf("unknown webhooks subcommand %q", args[0]))
	}
	ops, closeFn, err := openWebhooks(ctx, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	return do(ops)
}
