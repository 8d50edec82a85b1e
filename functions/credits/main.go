// Command credits is the Lambda function on the jobs table's stream: it
// settles each job's held credits exactly once when the job ends (capture on
// completed, release on failed), then queues the job's webhook delivery
// when it has a URL (webhooks.Service.Changed; the webhooks function
// sends it).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/aws/sqsqueue"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "credits:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	// The webhooks service only queues deliveries here: the webhooks
	// function sends them.
	hookQueue, err := sqsqueue.Open(ctx, b.AWS, b.Names.WebhooksQueueURL, b.Names.WebhooksQueue)
	if err != nil {
		return err
	}
	hooks := app.Webhooks(b.Config, b.Store, b.Store, hookQueue, nil, b.Log)
	lambda.StartWithOptions(lambdaevents.Changes(dynamostore.ChangeFromImages, app.Settle(b.Store, hooks), b.Log), lambda.WithContext(ctx))
	return nil
}
