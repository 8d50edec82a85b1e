// Command jobs-create is the Lambda function behind POST /v1/jobs (it holds
// the price on the account, stores the job and enqueues it), POST
// /v1/jobs/{id}/cancel (it fails a queued job, or stops a processing one at
// its vendor first: the function holds the keys of the vendors that can
// cancel, fal and Replicate, and no other), and the writes of OpenAI's
// Videos API: POST /v1/videos (a video job) and DELETE /v1/videos/{id}
// (settled, its output removed, then hidden).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/api"
	"github.com/genway/genway/functions/internal/keys"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "jobs-create:", err)
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
	// Media only signs links: an idempotent replay of a completed job
	// answers with its output link.
	// The providers Cancel reaches: those whose key this function holds
	// (GENWAY_CONFIGURED, names without keys, is for validation only, so
	// it is left out of the rotation's settings).
	// Their keys come from SSM (FAL_KEY_PARAMETER, ...) and rotate as the
	// worker's do.
	rot := keys.Rotation(b)
	rot.Settings.Setup.Configured = nil
	providers, err := upstreams.NewRotatingMedia(ctx, cat, rot, nil)
	if err != nil {
		return fmt.Errorf("media providers: %w", err)
	}
	// DELETE /v1/videos/{id} settles the job as the credits stream does
	// (Credits), removes its output (Media) and marks it deleted
	// (Deletes): see jobs.Service.Delete.
	// webhook_url is checked here (CheckWebhookURL); the credits
	// function queues the delivery when the job ends.
	svc := &jobs.Service{Store: b.Store, Queue: queue, Media: s3media.Open(b.AWS, b.Names.MediaBucket), Catalog: cat, Log: b.Log, Configured: cat.ConfiguredFunc(b.Config.Providers), Balances: b.Store,
		Providers: providers.Providers(), Credits: b.Store, Deletes: b.Store, Retention: b.Retention, CheckWebhookURL: app.WebhookURLCheck(b.Config)}
	h := api.Handler(b,
		httpapi.Route{Method: "POST", Pattern: "/v1/jobs", Handler: httpapi.CreateJob(svc, b.Log)},
		httpapi.Route{Method: "POST", Pattern: "/v1/jobs/{id}/cancel", Handler: httpapi.CancelJob(svc, b.Log)},
		// OpenAI's Videos API over the same video jobs.
		httpapi.Route{Method: "POST", Pattern: "/v1/videos", Handler: httpapi.CreateVideo(svc, b.Log)},
		httpapi.Route{Method: "DELETE", Pattern: "/v1/videos/{id}", Handler: httpapi.DeleteVideo(svc, b.Log)},
	)
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
