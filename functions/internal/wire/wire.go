// Package wire builds what the deployed functions share, once per
// container: the JSON logger, the AWS config, the resource names, the
// DynamoDB store, the S3 media adapter, and for the API functions the
// authentication and rate limiting in front of their routes. It is the
// mains' wiring, kept in one place; the domain and adapters never import it.
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// Base is what every function starts from.
type Base struct {
	Log   *slog.Logger
	AWS   aws.Config
	Names awsenv.Names
	Store *dynamostore.Store
	// Retention is how long an output is kept, and its final job with it:
	// GENWAY_JOB_RETENTION_DAYS (the template sets it to the bucket's
	// lifecycle rule), else dynamostore.DefaultJobRetention. A video's
	// expires_at is its completion plus Retention.
	Retention time.Duration
}

// Load builds the Base from the environment (see awsenv).
func Load(ctx context.Context, getenv func(string) string) (*Base, error) {
	cfg, err := awsenv.LoadConfig(ctx, getenv)
	if err != nil {
		return nil, err
	}
	names := awsenv.FromEnv(getenv)
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), names.JobsTable, names.AccountsTable)
	store.RecordsTable = names.RecordsTable
	if store.RecordRetention, err = credits.RecordRetentionFromEnv(getenv); err != nil {
		return nil, err
	}
	retention := dynamostore.DefaultJobRetention
	if v := getenv("GENWAY_JOB_RETENTION_DAYS"); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days <= 0 {
			return nil, fmt.Errorf("GENWAY_JOB_RETENTION_DAYS must be a positive number of days, got %q", v)
		}
		retention = time.Duration(days) * 24 * time.Hour
		store.JobRetention = retention
	}
	return &Base{
		Log:       slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		AWS:       cfg,
		Names:     names,
		Store:     store,
		Retention: retention,
	}, nil
}

// Catalog loads the catalog (GENWAY_CATALOG, else the embedded one), its
// list prices in US dollars converted into credits with the deployment's
// credit value and markup (see Pricing). Every function that loads the
// catalog loads it here, so that all of a stack's functions price alike.
func Catalog(getenv func(string) string) (*catalog.Catalog, error) {
	pricing, err := Pricing(getenv)
	if err != nil {
		return nil, err
	}
	return catalog.Load(getenv("GENWAY_CATALOG"), pricing)
}

// Pricing returns what a credit is worth (GENWAY_CREDIT_USD, US dollars,
// default 0.01) and the markup on list prices (GENWAY_PRICE_MARKUP,
// percent, default 0). A value that is not a decimal number in range is
// an error naming the variables.
func Pricing(getenv func(string) string) (catalog.Pricing, error) {
	p, err := catalog.ParsePricing(getenv("GENWAY_CREDIT_USD"), getenv("GENWAY_PRICE_MARKUP"))
	if err != nil {
		return catalog.Pricing{}, fmt.Errorf("GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: %w", err)
	}
	return p, nil
}

// KeepAlive returns how long a non-streamed answer may stay silent before
// it is kept alive with spaces (httpapi.ChatKeepAlive, ImagesKeepAlive):
// the duration in the variable name (GENWAY_CHAT_KEEPALIVE, ...), or
// httpapi.DefaultChatHeartbeat, the stream heartbeat's interval, when it
// is unset. A value that is not a positive duration is an error naming
// the variable.
func KeepAlive(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return httpapi.DefaultChatHeartbeat, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s must be a positive duration such as 10s, got %q", name, v)
	}
	return d, nil
}

// Queue returns the jobs queue (its URL from the environment, or looked up
// by name).
func (b *Base) Queue(ctx context.Context) (*sqsqueue.Queue, error) {
	c := sqs.NewFromConfig(b.AWS)
	url, err := b.Names.QueueURL(ctx, c)
	if err != nil {
		return nil, err
	}
	return sqsqueue.New(c, url), nil
}

// Webhooks returns the webhooks service on the store and the webhooks
// queue (GENWAY_WEBHOOKS_QUEUE_URL, else looked up by name), with
// GENWAY_WEBHOOK_ALLOW_PRIVATE; render makes an event's data (nil where
// this function sends no delivery).
func (b *Base) Webhooks(ctx context.Context, getenv func(string) string, render func(context.Context, *jobs.Job) (any, error)) (*webhooks.Service, error) {
	c := sqs.NewFromConfig(b.AWS)
	url, err := b.Names.WebhooksQueueURLOf(ctx, c)
	if err != nil {
		return nil, err
	}
	return &webhooks.Service{Store: b.Store, Jobs: b.Store, Queue: sqsqueue.New(c, url), Render: render,
		AllowPrivate: webhooks.AllowPrivate(getenv), Log: b.Log}, nil
}

// Media returns the S3 adapter for job outputs.
func (b *Base) Media() *s3media.Media {
	return s3media.New(s3media.NewClient(b.AWS), nil, b.Names.MediaBucket)
}

// API mounts routes on one mux, each behind key authentication (with the
// per-container key cache) and the per-key rate limit (GENWAY_RATE_LIMIT
// default, account overrides), with the body limit of a request without
// images (GENWAY_MAX_TEXT_BODY), as `genway serve` mounts them. The bounds
// on requests in progress and on the memory of bodies are not applied: a
// Lambda instance serves one request at a time, whose body is already in
// its event (docs/aws.md).
func (b *Base) API(getenv func(string) string, routes ...httpapi.Route) (http.Handler, error) {
	perMinute, err := ratelimit.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	text, _, err := httpapi.BodiesFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	authn := auth.NewAuthenticator(b.Store, auth.DefaultCacheTTL)
	limits := ratelimit.New(b.Store, b.Store, perMinute)
	for i := range routes {
		routes[i].Handler = httpapi.Authenticated(authn, limits, b.Log, routes[i].Handler)
	}
	return httpapi.LimitBodies(httpapi.NewBodies(text, 0), httpapi.NewMux(b.Log, routes...)), nil
}
