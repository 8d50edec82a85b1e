package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/dynamostream"
	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/webhooks"
)

// workerTimeout is the worker function's timeout in template.yaml (and
// functions/worker.WorkerTimeout): the local AWS mode's worker lease.
const workerTimeout = 5 * time.Minute

// queueVisibility is the jobs queue's visibility timeout for `genway aws
// init`: six times the worker's timeout, as in template.yaml.
const queueVisibility = 6 * int(workerTimeout/time.Second)

// webhooksVisibility is the webhooks queue's visibility timeout for
// `genway aws init`: six times the webhooks function's timeout (60 s), as
// in template.yaml.
const webhooksVisibility = 6 * 60

// sweepEvery is how often local AWS mode sweeps jobs left queued, as the
// template's schedule runs the jobs-sweeper function: rate(1 minute).
const sweepEvery = time.Minute

// localPollWait is the long-poll wait of local AWS mode's receives (jobs
// and webhooks queues), shorter than Lambda's 20 s: a receive that a
// killed `genway serve` left waiting stays open at SQS (or moto) until
// its wait ends, and takes whatever message comes meanwhile to a
// connection nobody reads, which then stays hidden for the queue's
// visibility timeout (30 minutes for a job, 6 for a webhook).
const localPollWait = 2 * time.Second

// restartQuiet is how long after it starts `genway serve` treats the
// queues as possibly read by such a receive: localPollWait, plus moto's
// one-second checks of a waiting receive, plus a margin.
const restartQuiet = localPollWait + 2*time.Second

// streamCheckpointFile is where, in the data directory, local AWS mode
// keeps the position of its jobs-stream reader.
const streamCheckpointFile = "aws-stream-checkpoint.json"

// openAWS opens the AWS backend (real AWS, or moto via AWS_ENDPOINT_URL) and
// emulates the Lambda event sources in-process: an SQS long-poll loop feeds
// events.SQSEvent to the worker's handler, a DynamoDB Streams reader feeds
// events.DynamoDBEvent to the credits handler (the same handlers the
// deployed functions run), and while the worker runs, jobs.Service.Sweep
// runs every sweepEvery with GENWAY_SWEEP_AFTER, as the scheduled
// jobs-sweeper function does. log may be nil.
//
// serve is for `genway serve`, which also resumes where a previous
// process stopped (operator commands pass false): the stream reader keeps
// its position in the data directory (streamCheckpointFile) and catches
// up beside the new records, its DynamoDB requests after the others
// (awsenv.Background); for restartQuiet after the start every message
// sent is delayed to its end, and at its end the jobs and webhook
// deliveries that the previous process may have left without a live
// message are sent again (recover).
func openAWS(ctx context.Context, conf app.Config, log *slog.Logger, serve bool) (*backend, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sweepAfter := conf.SweepAfter
	cfg, err := awsenv.LoadConfig(ctx, conf.AWS)
	if err != nil {
		return nil, err
	}
	names := conf.Names
	ddb := dynamodb.NewFromConfig(cfg, awsenv.LocalDynamoDB(conf.AWS))
	sqsClient := sqs.NewFromConfig(cfg)
	s3Client := s3media.NewClient(cfg)
	streams := dynamodbstreams.NewFromConfig(cfg)
	var start, quiet time.Time // zero for operator commands: no guard
	if serve {
		start = time.Now()
		quiet = start.Add(restartQuiet)
	}
	// newQueue is the queue at url as this process sends to and polls it.
	newQueue := func(url string) *sqsqueue.Queue {
		q := sqsqueue.New(sqsClient, url)
		q.NotBefore, q.WaitTime, q.Log = quiet, localPollWait, log
		return q
	}
	store := dynamostore.New(ddb, names.JobsTable, names.AccountsTable)
	store.RecordsTable = names.RecordsTable
	store.RecordRetention = conf.RecordRetention
	be := &backend{store: store, reserver: store, jobs: store, counter: store, close: func() error { return nil }, lease: workerTimeout,
		media:     s3media.New(s3Client, s3.NewPresignClient(s3Client), names.MediaBucket),
		retention: s3media.ExpiryDays * 24 * time.Hour}
	// The queue and stream are resolved lazily: the operator commands need
	// neither, and must work before `genway aws init` made them.
	be.consume = func(ctx context.Context, process func(context.Context, string) error) error {
		url, err := names.QueueURL(ctx, sqsClient)
		if err != nil {
			return fmt.Errorf("jobs queue (run genway aws init?): %w", err)
		}
		sweeper := &jobs.Service{Store: store, Queue: newQueue(url), Sweeps: store, Log: log}
		sctx, stopSweep := context.WithCancel(ctx)
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			if serve {
				recoverJobs(sctx, sweeper, start, quiet, log)
			}
			sweepLoop(sctx, sweeper, sweepEvery, sweepAfter, log)
		}()
		defer func() { stopSweep(); <-swept }()
		handler := lambdaevents.SQS(process, log)
		return newQueue(url).Poll(ctx, 10, func(ctx context.Context, msgs []sqsqueue.Message) []string {
			resp, _ := handler(ctx, sqsEvent(msgs))
			failed := make([]string, 0, len(resp.BatchItemFailures))
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			return failed
		})
	}
	be.settle = func(ctx context.Context, apply func(context.Context, credits.Change) error) error {
		arn, err := dynamostore.StreamARN(ctx, ddb, names.JobsTable)
		if err != nil {
			return fmt.Errorf("jobs table stream (run genway aws init?): %w", err)
		}
		handler := lambdaevents.Changes(dynamostore.ChangeFromImages, apply, log)
		p := dynamostream.Poller{Interval: 200 * time.Millisecond, Log: log, Background: awsenv.Background}
		if serve {
			p.Checkpoints = dynamostream.FileCheckpoints{Path: filepath.Join(conf.DataDir, streamCheckpointFile)}
		}
		return p.Poll(ctx, streams, arn, func(ctx context.Context, recs []dynamostream.Record) error {
			resp, _ := handler(ctx, dynamoDBEvent(recs))
			if n := len(resp.BatchItemFailures); n > 0 {
				return fmt.Errorf("%d stream records failed to settle, from sequence %s", n, resp.BatchItemFailures[0].ItemIdentifier)
			}
			return nil
		})
	}
	// Webhooks: deliveries on their own SQS queue, polled as the webhooks
	// function's event source mapping would (the same handler).
	be.hooks = store
	hookQueue := &lazyQueue{resolve: func(ctx context.Context) (*sqsqueue.Queue, error) {
		url, err := names.WebhooksQueueURLOf(ctx, sqsClient)
		if err != nil {
			return nil, err
		}
		return newQueue(url), nil
	}}
	be.hookQueue = hookQueue
	be.deliver = func(ctx context.Context, hooks *webhooks.Service) error {
		q, err := hookQueue.queue(ctx)
		if err != nil {
			return fmt.Errorf("webhooks queue (run genway aws init?): %w", err)
		}
		if serve {
			rctx, stop := context.WithCancel(ctx)
			recovered := make(chan struct{})
			go func() {
				defer close(recovered)
				recoverWebhooks(rctx, hooks, store, quiet, log)
			}()
			defer func() { stop(); <-recovered }()
		}
		handler := lambdaevents.SQS(hooks.Process, log)
		return q.Poll(ctx, 10, func(ctx context.Context, msgs []sqsqueue.Message) []string {
			resp, _ := handler(ctx, sqsEvent(msgs))
			failed := make([]string, 0, len(resp.BatchItemFailures))
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			return failed
		})
	}
	// The queue for jobs-create: resolved on first use.
	be.queue = &lazyQueue{resolve: func(ctx context.Context) (*sqsqueue.Queue, error) {
		url, err := names.QueueURL(ctx, sqsClient)
		if err != nil {
			return nil, err
		}
		return newQueue(url), nil
	}}
	return be, nil
}

// recoverJobs waits until quiet (the end of the time in which receives a
// killed predecessor left waiting may take messages), then sends again the
// message of every job queued before start, or processing with a run due
// before it: one whose message such a receive, or the dead process
// itself, may hold hidden for the queue's visibility timeout. A job whose
// message was not lost gets a duplicate, which its conditional claim makes
// harmless (jobs.Worker). A job that was running in the dead process stays
// claimed until its lease ends (the worker timeout); the sweep finds it
// then.
func recoverJobs(ctx context.Context, svc *jobs.Service, start, quiet time.Time, log *slog.Logger) {
	if !ctxtime.Sleep(ctx, time.Until(quiet)) {
		return
	}
	// Job times are whole seconds: a second more takes in a job the dead
	// process queued in the second this one started.
	res, err := svc.SweepBefore(ctx, start.Add(time.Second))
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		log.Warn("restart: re-sending waiting jobs", "requeued", res.Requeued, "err", err)
	} else if res.Requeued > 0 {
		log.Info("restart: re-sent the jobs a previous process may have left without a message", "requeued", res.Requeued, "skipped", res.Skipped)
	}
}

// recoverWebhooks waits until quiet, then sends again the message of every
// webhook delivery that is pending and due before quiet plus an attempt's
// claim (webhooks.Timeout and 5 s): those whose message a receive of a
// killed predecessor may hold hidden, or whose attempt died with it.
// Deliver's claims make a duplicate harmless.
func recoverWebhooks(ctx context.Context, hooks *webhooks.Service, ps webhooks.PendingStore, quiet time.Time, log *slog.Logger) {
	if !ctxtime.Sleep(ctx, time.Until(quiet)) {
		return
	}
	n, err := hooks.Requeue(ctx, ps, quiet.Add(webhooks.Timeout+5*time.Second))
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		log.Warn("restart: re-sending pending webhooks", "requeued", n, "err", err)
	} else if n > 0 {
		log.Info("restart: re-sent the pending webhook deliveries a previous process may have left without a message", "requeued", n)
	}
}

// sweepLoop runs svc.Sweep(after) at once and then every interval until ctx
// ends. A failed sweep is logged; the next one tries again.
func sweepLoop(ctx context.Context, svc *jobs.Service, every, after time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		res, err := svc.Sweep(ctx, after)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("sweep of queued jobs", "found", res.Found, "requeued", res.Requeued, "failed", res.Failed, "err", err)
		} else if res != (jobs.SweepResult{}) {
			log.Info("sweep of queued jobs", "found", res.Found, "requeued", res.Requeued, "failed", res.Failed, "skipped", res.Skipped)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lazyQueue resolves the queue URL on first Enqueue. Safe for concurrent use.
type lazyQueue struct {
	resolve func(ctx context.Context) (*sqsqueue.Queue, error)
	mu      sync.Mutex
	q       *sqsqueue.Queue
}

// Enqueue implements jobs.Queue.
func (l *lazyQueue) Enqueue(ctx context.Context, id string, delay time.Duration) error {
	return l.EnqueueGroup(ctx, id, "", delay)
}

// SendWebhook implements webhooks.Queue.
func (l *lazyQueue) SendWebhook(ctx context.Context, id string, delay time.Duration) error {
	q, err := l.queue(ctx)
	if err != nil {
		return err
	}
	return q.SendWebhook(ctx, id, delay)
}

// EnqueueGroup implements jobs.GroupQueue.
func (l *lazyQueue) EnqueueGroup(ctx context.Context, id, group string, delay time.Duration) error {
	q, err := l.queue(ctx)
	if err != nil {
		return err
	}
	return q.EnqueueGroup(ctx, id, group, delay)
}

func (l *lazyQueue) queue(ctx context.Context) (*sqsqueue.Queue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q == nil {
		q, err := l.resolve(ctx)
		if err != nil {
			return nil, fmt.Errorf("jobs queue: %w", err)
		}
		l.q = q
	}
	return l.q, nil
}

// sqsEvent builds the event Lambda's SQS event source mapping would send.
func sqsEvent(msgs []sqsqueue.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		attrs["ApproximateReceiveCount"] = strconv.Itoa(m.ReceiveCount)
		ev.Records[i] = events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: m.Body,
			Md5OfBody: m.MD5OfBody, Attributes: attrs, EventSource: "aws:sqs"}
	}
	return ev
}

// dynamoDBEvent builds the event Lambda's DynamoDB stream mapping would send.
func dynamoDBEvent(recs []dynamostream.Record) events.DynamoDBEvent {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(recs))}
	for i, r := range recs {
		ev.Records[i] = events.DynamoDBEventRecord{
			EventID: r.EventID, EventName: r.EventName, EventSource: r.EventSource, EventVersion: r.EventVersion, AWSRegion: r.AWSRegion,
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: r.SequenceNumber, StreamViewType: r.StreamViewType,
				Keys:     eventImage(dynamostream.ToDynamoDB(r.Keys)),
				OldImage: eventImage(dynamostream.ToDynamoDB(r.OldImage)),
				NewImage: eventImage(dynamostream.ToDynamoDB(r.NewImage)),
			},
		}
	}
	return ev
}

func eventImage(m map[string]ddbtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = eventValue(v)
	}
	return out
}

func eventValue(v ddbtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *ddbtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = eventValue(e)
		}
		return events.NewListAttribute(l)
	case *ddbtypes.AttributeValueMemberM:
		return events.NewMapAttribute(eventImage(v.Value))
	}
	return events.NewNullAttribute()
}

// awsCmd runs `genway aws init`: create the tables, queues and bucket that
// the functions and GENWAY_BACKEND=aws use, idempotently, with the names
// from the same environment variables the functions read.
func awsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) >= 1 && isHelp(args[len(args)-1]) {
		fmt.Fprint(stdout, "Usage:\n  genway aws init   create the DynamoDB tables, SQS queues and S3 bucket (idempotent)\n\n"+
			"It uses the AWS credential chain and region (AWS_REGION), and AWS_ENDPOINT_URL for moto or another emulator.\n")
		return nil
	}
	if len(args) != 1 || args[0] != "init" {
		return usageError("usage: genway aws init")
	}
	conf, err := app.LoadConfig(app.Serve, getenv)
	if err != nil {
		return err
	}
	cfg, err := awsenv.LoadConfig(ctx, conf.AWS)
	if err != nil {
		return err
	}
	names := conf.Names
	ddb := dynamodb.NewFromConfig(cfg, awsenv.LocalDynamoDB(conf.AWS))
	if err := dynamostore.CreateTables(ctx, ddb, names.JobsTable, names.AccountsTable); err != nil {
		return err
	}
	if err := dynamostore.CreateRecordsTable(ctx, ddb, names.RecordsTable); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tables %s, %s, %s: ready\n", names.JobsTable, names.AccountsTable, names.RecordsTable)
	url, err := sqsqueue.CreateQueues(ctx, sqs.NewFromConfig(cfg), names.JobsQueue, names.JobsDLQ, queueVisibility)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s (dead letters: %s): ready\n", url, names.JobsDLQ)
	hooksURL, err := sqsqueue.CreateQueues(ctx, sqs.NewFromConfig(cfg), names.WebhooksQueue, names.WebhooksDLQ, webhooksVisibility)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s (dead letters: %s): ready\n", hooksURL, names.WebhooksDLQ)
	if err := s3media.CreateBucket(ctx, s3media.NewClient(cfg), names.MediaBucket); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bucket %s: ready\n", names.MediaBucket)
	return nil
}
