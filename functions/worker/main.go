// Command worker is the Lambda function on the jobs SQS queue: it runs each
// job of a batch (jobs.Worker.Process) and reports the ones to retry.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/lambdaevents"
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
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	cat, err := catalog.Load(getenv("GENWAY_CATALOG"))
	if err != nil {
		return err
	}
	// Lease: the function's timeout (template.yaml), so that an SQS duplicate
	// never generates a job that a live invocation is still generating.
	w := &jobs.Worker{Store: b.Store, Media: b.Media(), Providers: map[string]jobs.Provider{}, Catalog: cat, Log: b.Log, Lease: 2 * time.Minute}
	if getenv("GENWAY_SYNTHETIC") != "off" {
		w.Providers["synthetic"] = synthetic.Media{}
	}
	lambda.StartWithOptions(lambdaevents.SQS(w.Process, b.Log), lambda.WithContext(ctx))
	return nil
}
