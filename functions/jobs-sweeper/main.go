// Command jobs-sweeper is the scheduled Lambda function that sends the
// message of every job queued for longer than GENWAY_SWEEP_AFTER (a Go
// duration, default 2m) again, and fails a job that never starts (its hold
// released): a jobs-create that died between storing a job and enqueueing
// it loses no job (jobs.Service.Sweep).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/jobs"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "jobs-sweeper:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	after, err := jobs.ParseSweepAfter(getenv("GENWAY_SWEEP_AFTER"))
	if err != nil {
		return fmt.Errorf("GENWAY_SWEEP_AFTER: %w", err)
	}
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	queue, err := b.Queue(ctx)
	if err != nil {
		return err
	}
	svc := &jobs.Service{Store: b.Store, Queue: queue, Sweeps: b.Store, Log: b.Log}
	lambda.StartWithOptions(func(ctx context.Context, _ events.EventBridgeEvent) (jobs.SweepResult, error) {
		res, err := svc.Sweep(ctx, after)
		if err != nil {
			// The next run (a minute later) retries what failed here.
			b.Log.Error("sweep", "found", res.Found, "requeued", res.Requeued, "failed", res.Failed, "skipped", res.Skipped, "err", err)
			return res, err
		}
		b.Log.Info("sweep", "found", res.Found, "requeued", res.Requeued, "failed", res.Failed, "skipped", res.Skipped)
		return res, nil
	}, lambda.WithContext(ctx))
	return nil
}
