// Command worker is the Lambda function on the jobs SQS queue: it runs each
// job of a batch (jobs.Worker.Process) and reports the ones to retry.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/awsenv"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/dynamostore"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/lambdaevents"
	"github.com/genway/genway/shared/s3media"
	"github.com/genway/genway/shared/synthetic"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := awsenv.LoadConfig(ctx, getenv)
	if err != nil {
		return err
	}
	names := awsenv.FromEnv(getenv)
	cat, err := catalog.Load(getenv("GENWAY_CATALOG"))
	if err != nil {
		return err
	}
	w := &jobs.Worker{
		Store:     dynamostore.New(dynamodb.NewFromConfig(cfg), names.JobsTable, names.AccountsTable),
		Media:     s3media.New(s3media.NewClient(cfg), nil, names.MediaBucket),
		Providers: map[string]jobs.Provider{},
		Catalog:   cat,
		Log:       log,
	}
	if getenv("GENWAY_SYNTHETIC") != "off" {
		w.Providers["synthetic"] = synthetic.Media{}
	}
	lambda.StartWithOptions(lambdaevents.SQS(w.Process, log), lambda.WithContext(ctx))
	return nil
}
