// Package wire builds what every deployed function shares, once per
// container, from the configuration package app reads: the JSON logger,
// the AWS config, the DynamoDB store, and the catalog for those that use
// it. The domain and adapters never import it. What only some functions
// use is built apart, so that the others do not link it: the queues and
// the media bucket by the functions that use them (sqsqueue.Open,
// s3media.Open), the API's routes by package api, the vendor keys'
// rotation by package keys.
package wire

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/logjson"
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
		Log:       slog.New(logjson.New(os.Stderr)),
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

// JobsCatalog returns the catalog as Catalog loads it, without reading
// the vendors' variables (app.OpenCatalog), for the functions that show
// jobs and call no vendor (jobs-get, webhooks), which then do not link
// that reading. It leaves b.Config.Catalog as it is.
func JobsCatalog(b *Base) (*catalog.Catalog, error) {
	return app.OpenCatalog(&b.Config)
}
