// Command jobs-create is the Lambda function behind POST /v1/jobs: it holds
// the price on the account, stores the job and enqueues it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/awsenv"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/dynamostore"
	"github.com/genway/genway/shared/httpapi"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/lambdahttp"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/s3media"
	"github.com/genway/genway/shared/sqsqueue"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "jobs-create:", err)
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
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), names.JobsTable, names.AccountsTable)
	authn := auth.NewAuthenticator(store, auth.DefaultCacheTTL)
	perMinute, err := ratelimit.FromEnv(getenv)
	if err != nil {
		return err
	}
	limits := ratelimit.New(store, store, perMinute)
	cat, err := catalog.Load(getenv("GENWAY_CATALOG"))
	if err != nil {
		return err
	}
	sqsClient := sqs.NewFromConfig(cfg)
	queueURL, err := names.QueueURL(ctx, sqsClient)
	if err != nil {
		return err
	}
	// Media only signs links: an idempotent replay of a completed job
	// answers with its output link.
	s3Client := s3media.NewClient(cfg)
	media := s3media.New(s3Client, nil, names.MediaBucket)
	svc := &jobs.Service{Store: store, Queue: sqsqueue.New(sqsClient, queueURL), Media: media, Catalog: cat, Log: log}
	var h http.Handler = httpapi.Authenticated(authn, limits, log, httpapi.CreateJob(svc, log))
	h = httpapi.NewMux(log, httpapi.Route{Method: "POST", Pattern: "/v1/jobs", Handler: h})
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
