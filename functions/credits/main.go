// Command credits is the Lambda function on the jobs table's stream: it
// settles each job's held credits exactly once when the job ends (capture on
// completed, release on failed).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/awsenv"
	"github.com/genway/genway/shared/dynamostore"
	"github.com/genway/genway/shared/lambdaevents"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "credits:", err)
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
	lambda.StartWithOptions(lambdaevents.Credits(store, dynamostore.ChangeFromImages, log), lambda.WithContext(ctx))
	return nil
}
