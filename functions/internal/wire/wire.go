// Package wire builds what every deployed function shares, once per
// container, from the configuration package app reads: the JSON logger,
// the AWS config, the DynamoDB store, and for the API functions the
// authentication and rate limiting in front of their routes. The domain
// and adapters never import it. The queues and the media bucket are
// opened by the functions that use them (sqsqueue.Open, s3media.Open),
// so that the others do not link the SQS and S3 clients.
package wire

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/transport/httpapi"
)

// Base is what every function starts from.
type Base struct {
	Config app.Config
	Log    *slog.Logger
	AWS    aws.Config
	Names  awsenv.Names
	Store  *dynamostore.Store
	// Retention is how long an output is kept, and its final job with it:
	// GENWAY_JOB_RETENTION_DAYS (the template sets it to the bucket's
	// lifecycle rule), else dynamostore.DefaultJobRetention. A video's
	// expires_at is its completion plus Retention.
	Retention time.Duration

	getenv func(string) string // for Catalog
}

// Load reads the configuration (app.LoadConfig, in Lambda mode) through
// getenv and builds the Base from it.
func Load(ctx context.Context, getenv func(string) string) (*Base, error) {
	conf, err := app.LoadConfig(app.Lambda, getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := awsenv.LoadConfig(ctx, conf.AWS)
	if err != nil {
		return nil, err
	}
	names := conf.Names
	store := app.DynamoStore(conf, dynamodb.NewFromConfig(cfg))
	return &Base{
		getenv:    getenv,
		Config:    conf,
		Log:       slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		AWS:       cfg,
		Names:     names,
		Store:     store,
		Retention: conf.JobRetention,
	}, nil
}

// Catalog loads the catalog (GENWAY_CATALOG, else the embedded one), its
// list prices in US dollars converted into credits with the deployment's
// credit value and markup (GENWAY_CREDIT_USD, GENWAY_PRICE_MARKUP), so
// that all of a stack's functions price alike, and the vendors'
// variables it names (app.LoadCatalog) into b.Config; once.
func Catalog(b *Base) (*catalog.Catalog, error) {
	if b.Config.Catalog == nil {
		if err := app.LoadCatalog(&b.Config, b.getenv); err != nil {
			return nil, err
		}
	}
	return b.Config.Catalog, nil
}

// API mounts routes on one mux, each behind key authentication (with the
// per-container key cache) and the per-key rate limit (GENWAY_RATE_LIMIT
// default, account overrides), with the body limit of a request without
// images (GENWAY_MAX_TEXT_BODY), as `genway serve` mounts them. The bounds
// on requests in progress and on the memory of bodies are not applied: a
// Lambda instance serves one request at a time, whose body is already in
// its event (docs/aws.md).
func (b *Base) API(routes ...httpapi.Route) http.Handler {
	authn := app.Authenticator(b.Config, b.Store)
	limits := app.Limiter(b.Config, b.Store, b.Store)
	for i := range routes {
		routes[i].Handler = httpapi.Authenticated(authn, limits, b.Log, routes[i].Handler)
	}
	return httpapi.LimitBodies(httpapi.NewBodies(b.Config.MaxTextBody, 0), httpapi.NewMux(b.Log, routes...))
}
