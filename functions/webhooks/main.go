// Command webhooks is the Lambda function on the webhooks SQS queue: for
// each message (a job whose end is to be announced) it makes the delivery
// attempt that is due (webhooks.Service.Process): a signed POST with a
// 10 s timeout, recorded on the job's delivery, and, when the receiver
// did not answer 2xx, a new message delayed by the backoff. A message
// whose handling fails returns to the queue and, after maxReceiveCount,
// to its dead-letter queue (alarmed).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	// The catalog alone: this function calls no vendor.
	cat, err := wire.JobsCatalog(b)
	if err != nil {
		return err
	}
	// The event's data is the job as GET /v1/jobs/{id} shows it, with an
	// output link presigned at each attempt.
	svc := &jobs.Service{Store: b.Store, Media: s3media.Open(b.AWS, b.Names.MediaBucket), Catalog: cat, Log: b.Log}
	hookQueue, err := sqsqueue.Open(ctx, b.AWS, b.Names.WebhooksQueueURL, b.Names.WebhooksQueue)
	if err != nil {
		return err
	}
	hooks := app.Webhooks(b.Config, b.Store, b.Store, hookQueue, httpapi.JobObject(svc), b.Log)
	lambda.StartWithOptions(lambdaevents.SQS(hooks.Process, b.Log), lambda.WithContext(ctx))
	return nil
}
