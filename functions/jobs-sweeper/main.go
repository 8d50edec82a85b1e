// Command jobs-sweeper is the scheduled Lambda function that sends the
// message of every job queued for longer than GENWAY_SWEEP_AFTER (a Go
// duration, default 2m) again, and fails a job that never starts (its hold
// released): a jobs-create that died between storing a job and enqueueing
// it loses no job (jobs.Service.Sweep). Invoked with {"reconcile": true}
// (its hourly schedule) it runs the reconciler instead: final jobs of the
// last GENWAY_RECONCILE_DAYS days (7) whose settlement the credits stream
// never made are settled, exactly once, and reservations (images,
// speech) never settled are released (jobs.Reconcile).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/aws/sqsqueue"
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
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	queue, err := sqsqueue.Open(ctx, b.AWS, b.Names.JobsQueueURL, b.Names.JobsQueue)
	if err != nil {
		return err
	}
	after, days := b.Config.SweepAfter, b.Config.ReconcileDays
	svc := &jobs.Service{Store: b.Store, Queue: queue, Sweeps: b.Store, Log: b.Log}
	lambda.StartWithOptions(func(ctx context.Context, ev json.RawMessage) (any, error) {
		var in struct {
			Reconcile bool `json:"reconcile"`
		}
		_ = json.Unmarshal(ev, &in) // a scheduled EventBridge event has no such field: a sweep
		if in.Reconcile {
			now := time.Now()
			res, err := jobs.Reconcile(ctx, b.Store, b.Store, now.AddDate(0, 0, -days), admin.ReconcileGrace, now)
			attrs := []any{"checked", res.Checked, "settled", res.Settled, "reservations", res.Reservations, "released", res.Released}
			switch {
			case err != nil:
				b.Log.Error("reconcile", append(attrs, "err", err)...)
			case res.Settled > 0 || res.Released > 0:
				b.Log.Warn("reconcile settled jobs the credits stream had missed, or released reservations never settled", attrs...)
			default:
				b.Log.Info("reconcile", attrs...)
			}
			return res, err
		}
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
