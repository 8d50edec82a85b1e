package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/webhooks"
)

// The builders below make the parts that `genway serve` (localserver.Main)
// and the Lambda functions both run, from the Config and the adapters the
// caller opened: one definition each, so that the two cannot drift. The
// builders of the parts that call vendors are in app/vendors.

// DynamoStore returns the DynamoDB store of c's tables (Names) over
// client, with the records' retention (GENWAY_RECORD_DAYS) and a final
// job's (GENWAY_JOB_RETENTION_DAYS): the store of the functions and of the
// AWS-backed `genway serve`.
func DynamoStore(c Config, client *dynamodb.Client) *dynamostore.Store {
	s := dynamostore.New(client, c.Names.JobsTable, c.Names.AccountsTable)
	s.RecordsTable = c.Names.RecordsTable
	s.RecordRetention = c.RecordRetention
	if c.JobRetention != dynamostore.DefaultJobRetention {
		s.JobRetention = c.JobRetention
	}
	return s
}

// Authenticator returns the API keys' authenticator on s, with its
// per-process cache of resolved keys kept for c.AuthCacheTTL.
func Authenticator(c Config, s auth.Store) *auth.Authenticator {
	return auth.NewAuthenticator(s, c.AuthCacheTTL)
}

// Limiter returns the per-key rate limiter: requests counted by counter,
// c.RateLimit per minute (GENWAY_RATE_LIMIT) unless the key's account
// has its own limit in accounts. It bounds no requests in progress: see
// InFlight.
func Limiter(c Config, counter ratelimit.Counter, accounts ratelimit.Accounts) *ratelimit.Limiter {
	return ratelimit.New(counter, accounts, c.RateLimit)
}

// InFlight returns the bounds on requests in progress per key and per
// account (GENWAY_MAX_IN_FLIGHT_PER_KEY, _PER_ACCOUNT), for
// ratelimit.Limiter.SetInFlight in a long-lived process; a Lambda
// instance serves one request at a time and applies none.
func InFlight(c Config) *ratelimit.InFlight {
	return ratelimit.NewInFlight(c.InFlightPerKey, c.InFlightPerAccount)
}

// Router returns a router with c.Route's policy (GENWAY_ROUTE_*); its
// breakers and key rests are the process's (or the container's).
func Router(c Config, log *slog.Logger) *route.Router {
	return route.New(c.Route, log)
}

// Webhooks returns the webhooks service: configs and deliveries in store,
// jobs read from jobStore, deliveries scheduled on queue (nil where the
// process queues none), private receivers allowed with
// GENWAY_WEBHOOK_ALLOW_PRIVATE; render makes an event's data (nil where
// the process sends no delivery).
func Webhooks(c Config, store webhooks.Store, jobStore webhooks.Jobs, queue webhooks.Queue,
	render func(context.Context, *jobs.Job) (any, error), log *slog.Logger) *webhooks.Service {
	return &webhooks.Service{Store: store, Jobs: jobStore, Queue: queue, Render: render, AllowPrivate: c.WebhookAllowPrivate, Log: log}
}

// Settle returns the handler of the jobs' change feed (the DynamoDB
// stream's credits function, the embedded store's feed): it settles a
// job's credits once when it ends (credits.Apply), then queues the job's
// webhook delivery when it has a URL (webhooks.Service.Changed), so that
// a delivery never announces an unsettled job.
func Settle(store credits.Store, hooks *webhooks.Service) func(context.Context, credits.Change) error {
	return func(ctx context.Context, c credits.Change) error {
		if err := credits.Apply(ctx, store, c); err != nil {
			return err
		}
		return hooks.Changed(ctx, c)
	}
}

// Worker returns the job worker over c's catalog: jobs in store, polls
// and retries re-enqueued on queue, outputs kept in media, the vendors'
// providers, failed submits decided by router, a vendor polled every
// c.MediaPoll (GENWAY_MEDIA_POLL). lease is how long a run is claimed
// (jobs.Worker.Lease).
func Worker(c Config, store jobs.Store, queue jobs.Queue, media jobs.Media, providers map[string]jobs.Provider,
	router *route.Router, lease time.Duration, log *slog.Logger) *jobs.Worker {
	return &jobs.Worker{Store: store, Queue: queue, Media: media, Providers: providers, Catalog: c.Catalog, Log: log,
		Lease: lease, PollInterval: c.MediaPoll, Router: router}
}
