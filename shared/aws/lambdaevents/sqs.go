// Package lambdaevents adapts the domain's event consumers to Lambda event
// source mappings: the jobs worker to SQS (SQS) and the credits settlement
// to the DynamoDB jobs stream (Credits). Both report batch item failures,
// so one bad record never makes a whole batch run again.
//
// `genway serve` with GENWAY_BACKEND=aws feeds the same functions with
// events it builds itself, so the deployed and the local paths are one.
package lambdaevents

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// Message is the body of a jobs queue message.
type Message struct {
	JobID string `json:"job_id"`
}

// SQS returns the worker's SQS handler: for each record it parses the body
// ({"job_id": "..."}) and calls process (jobs.Worker.Process), the records
// of a batch concurrently. A record whose process call fails is reported in
// BatchItemFailures by message id, so SQS delivers it again after the
// visibility timeout (and, after maxReceiveCount, to the dead-letter
// queue). A malformed body is logged and dropped: it would fail forever.
// The handler itself never returns an error. log may be nil.
func SQS(process func(ctx context.Context, jobID string) error, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	log = orDiscard(log)
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		failed := make([]bool, len(ev.Records))
		var wg sync.WaitGroup
		for i, rec := range ev.Records {
			var m Message
			if err := json.Unmarshal([]byte(rec.Body), &m); err != nil || strings.TrimSpace(m.JobID) == "" {
				log.ErrorContext(ctx, "dropping malformed jobs message", "message_id", rec.MessageId, "body_bytes", len(rec.Body), "err", err)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := process(ctx, m.JobID); err != nil {
					log.WarnContext(ctx, "job will be retried", "job_id", m.JobID, "message_id", rec.MessageId,
						"receive_count", rec.Attributes["ApproximateReceiveCount"], "err", err)
					failed[i] = true
				}
			}()
		}
		wg.Wait()
		res := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, f := range failed {
			if f {
				res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			}
		}
		return res, nil
	}
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return log
}
