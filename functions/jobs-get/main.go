// Command jobs-get is the Lambda function behind GET /v1/jobs/{id} and GET
// /v1/jobs (the caller's jobs, newest first, from the jobs table's
// by_account index), and the reads of OpenAI's Videos API: GET
// /v1/videos, /v1/videos/{id} and /v1/videos/{id}/content (a redirect to
// the presigned link); output links are presigned at read time, never
// stored.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/api"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "jobs-get:", err)
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
	svc := &jobs.Service{Store: b.Store, Media: s3media.Open(b.AWS, b.Names.MediaBucket), Catalog: cat, Log: b.Log, Retention: b.Retention}
	h := api.Handler(b,
		httpapi.Route{Method: "GET", Pattern: "/v1/jobs/{id}", Handler: httpapi.GetJob(svc, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/jobs", Handler: httpapi.ListJobs(svc, b.Log)},
		// OpenAI's Videos API: the same video jobs, read in its shape.
		httpapi.Route{Method: "GET", Pattern: "/v1/videos", Handler: httpapi.ListVideos(svc, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/videos/{id}", Handler: httpapi.GetVideo(svc, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/videos/{id}/content", Handler: httpapi.VideoContent(svc, b.Log)},
	)
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
