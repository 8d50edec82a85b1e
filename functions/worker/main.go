// Command worker is the Lambda function on the jobs SQS queue: it runs each
// job of a batch (jobs.Worker.Process) and reports the ones to retry.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/keys"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/providers/upstreams"
)

// WorkerTimeout is the function's Timeout in template.yaml (a test checks
// they agree): the longest synchronous vendor call, a long ElevenLabs song,
// fits in it.
const WorkerTimeout = 5 * time.Minute

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	cat, err := wire.Catalog(b)
	if err != nil {
		return err
	}
	queue, err := sqsqueue.Open(ctx, b.AWS, b.Names.JobsQueueURL, b.Names.JobsQueue)
	if err != nil {
		return err
	}
	// The vendor keys come from SSM (FAL_KEY_PARAMETER, ...) and rotate
	// (keys.Rotation).
	providers, err := upstreams.NewRotatingMedia(ctx, cat, keys.Rotation(b), nil)
	if err != nil {
		return fmt.Errorf("media providers: %w", err)
	}
	// The routing policy (GENWAY_ROUTE_*) decides failed submits; the
	// router's key rests and breakers are this container's.
	// Lease: the function's timeout (template.yaml), so that an SQS duplicate
	// never starts a job that a live invocation is still starting.
	w := app.Worker(b.Config, b.Store, queue, s3media.Open(b.AWS, b.Names.MediaBucket), providers.Providers(), app.Router(b.Config, b.Log), WorkerTimeout, b.Log)
	lambda.StartWithOptions(lambdaevents.SQS(w.Process, b.Log), lambda.WithContext(ctx))
	return nil
}
