package localserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/dynamostream"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/webhooks"
)

// WorkerTimeout is the worker function's timeout in template.yaml (and
// functions/worker.WorkerTimeout): the local AWS mode's worker lease.
const WorkerTimeout = 5 * time.Minute

// sweepEvery is how often local AWS mode sweeps jobs left queued, as the
// template's schedule runs the jobs-sweeper function: rate(1 minute).
const sweepEvery = time.Minute

// LocalPollWait is the long-poll wait of local AWS mode's receives (jobs
// and webhooks queues), shorter than Lambda's 20 s: a receive that a
// killed `genway serve` left waiting stays open at SQS (or moto) until
// its wait ends, and takes whatever message comes meanwhile to a
// connection nobody reads, which then stays hidden for the queue's
// visibility timeout (30 minutes for a job, 6 for a webhook).
const LocalPollWait = 2 * time.Second

// RestartQuiet is how long after it starts `genway serve` treats the
// queues as possibly read by such a receive: LocalPollWait, plus moto's
// one-second checks of a waiting receive, plus a margin.
const RestartQuiet = LocalPollWait + 2*time.Second

// StreamCheckpointFile is where, in the data directory, local AWS mode
// keeps the position of its jobs-stream reader.
const StreamCheckpointFile = "aws-stream-checkpoint.json"

// Events plays Lambda's event source mappings for the AWS backend: it
// hands the batches the emulated mappings read to the handlers the
// deployed functions run, as the events Lambda would send. It comes from
// the main (cmd/genway), where aws-lambda-go may be imported.
type Events struct {
	// SQS returns the handler of a batch of queue messages, each one's
	// body handled by process (the worker and webhooks functions'
	// handler); it returns the IDs of the messages that failed.
	SQS func(process func(ctx context.Context, id string) error, log *slog.Logger) sqsqueue.Handler
	// Stream returns the handler of a batch of the jobs table's stream
	// records, each change applied by apply (the credits function's
	// handler); it returns an error if any record failed.
	Stream func(apply func(ctx context.Context, c credits.Change) error, log *slog.Logger) dynamostream.Handler
}

// awsBackend is the AWS backend (real AWS, or moto via AWS_ENDPOINT_URL)
// with the Lambda event sources emulated in-process: an SQS long-poll
// loop feeds the worker's handler, a DynamoDB Streams reader feeds the
// credits handler (the handlers the deployed functions run, through
// events), and while the worker runs, jobs.Service.Sweep runs every
// sweepEvery with GENWAY_SWEEP_AFTER, as the scheduled jobs-sweeper
// function does.
//
// For `genway serve` (serve), it also resumes where a previous process
// stopped: the stream reader keeps its position in the data directory
// (StreamCheckpointFile) and catches up beside the new records, its
// DynamoDB requests after the others (awsenv.Background); for
// RestartQuiet after the start every message sent is delayed to its end,
// and at its end the jobs and webhook deliveries that the previous process
// may have left without a live message are sent again (recoverJobs,
// recoverWebhooks).
type awsBackend struct {
	conf    app.Config
	log     *slog.Logger
	events  Events
	serve   bool
	start   time.Time // zero for operator commands: no guard
	quiet   time.Time
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	streams *dynamodbstreams.Client
	store   *dynamostore.Store
	media   *s3media.Media
	// The queues are resolved lazily: the operator commands need
	// neither, and must work before `genway aws init` made them.
	jobsQueue, hookQueue *lazyQueue
}

// openAWS opens the AWS backend with conf's names and endpoints; log may
// be nil. serve and events are for `genway serve`: operator commands pass
// false and no events.
func openAWS(ctx context.Context, conf app.Config, log *slog.Logger, events Events, serve bool) (*awsBackend, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg, err := awsenv.LoadConfig(ctx, conf.AWS)
	if err != nil {
		return nil, err
	}
	names := conf.Names
	b := &awsBackend{conf: conf, log: log, events: events, serve: serve,
		ddb: dynamodb.NewFromConfig(cfg, awsenv.LocalDynamoDB(conf.AWS)), sqs: sqs.NewFromConfig(cfg), streams: dynamodbstreams.NewFromConfig(cfg)}
	if serve {
		b.start = time.Now()
		b.quiet = b.start.Add(RestartQuiet)
	}
	s3Client := s3media.NewClient(cfg)
	b.media = s3media.New(s3Client, s3.NewPresignClient(s3Client), names.MediaBucket)
	b.store = app.DynamoStore(conf, b.ddb)
	b.jobsQueue = &lazyQueue{resolve: func(ctx context.Context) (*sqsqueue.Queue, error) {
		url, err := sqsqueue.LookupURL(ctx, b.sqs, names.JobsQueueURL, names.JobsQueue)
		if err != nil {
			return nil, err
		}
		return b.newQueue(url), nil
	}}
	b.hookQueue = &lazyQueue{resolve: func(ctx context.Context) (*sqsqueue.Queue, error) {
		url, err := sqsqueue.LookupURL(ctx, b.sqs, names.WebhooksQueueURL, names.WebhooksQueue)
		if err != nil {
			return nil, err
		}
		return b.newQueue(url), nil
	}}
	return b, nil
}

// OpenAWS returns the parts of the AWS backend that the operator
// commands use (the stores and the queues, resolved on first use), with
// conf's names and endpoints. It starts nothing; closing it is not needed.
func OpenAWS(ctx context.Context, conf app.Config) (Parts, error) {
	b, err := openAWS(ctx, conf, nil, Events{}, false)
	if err != nil {
		return Parts{}, err
	}
	return b.parts(), nil
}

// newQueue is the queue at url as this process sends to and polls it.
func (b *awsBackend) newQueue(url string) *sqsqueue.Queue {
	q := sqsqueue.New(b.sqs, url)
	q.NotBefore, q.WaitTime, q.Log = b.quiet, LocalPollWait, b.log
	return q
}

func (b *awsBackend) parts() Parts {
	return Parts{Store: b.store, Holds: b.store, Jobs: b.store, Queue: b.jobsQueue, Media: b.media,
		Hooks: b.store, HookQueue: b.hookQueue, Counter: b.store, Lease: WorkerTimeout,
		Retention: s3media.ExpiryDays * 24 * time.Hour}
}

func (b *awsBackend) consume(ctx context.Context, process func(context.Context, string) error) error {
	if b.events.SQS == nil {
		return errors.New("no Lambda event source for the jobs queue (localserver.WithEvents)")
	}
	url, err := sqsqueue.LookupURL(ctx, b.sqs, b.conf.Names.JobsQueueURL, b.conf.Names.JobsQueue)
	if err != nil {
		return fmt.Errorf("jobs queue (run genway aws init?): %w", err)
	}
	sweeper := &jobs.Service{Store: b.store, Queue: b.newQueue(url), Sweeps: b.store, Log: b.log}
	sctx, stopSweep := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		if b.serve {
			recoverJobs(sctx, sweeper, b.start, b.quiet, b.log)
		}
		sweepLoop(sctx, sweeper, sweepEvery, b.conf.SweepAfter, b.log)
	}()
	defer func() { stopSweep(); <-swept }()
	return b.newQueue(url).Poll(ctx, 10, b.events.SQS(process, b.log))
}

func (b *awsBackend) settle(ctx context.Context, apply func(context.Context, credits.Change) error) error {
	if b.events.Stream == nil {
		return errors.New("no Lambda event source for the jobs stream (localserver.WithEvents)")
	}
	arn, err := dynamostore.StreamARN(ctx, b.ddb, b.conf.Names.JobsTable)
	if err != nil {
		return fmt.Errorf("jobs table stream (run genway aws init?): %w", err)
	}
	p := dynamostream.Poller{Interval: 200 * time.Millisecond, Log: b.log, Background: awsenv.Background}
	if b.serve {
		p.Checkpoints = dynamostream.FileCheckpoints{Path: filepath.Join(b.conf.DataDir, StreamCheckpointFile)}
	}
	return p.Poll(ctx, b.streams, arn, b.events.Stream(apply, b.log))
}

// deliver polls the webhooks queue as the webhooks function's event
// source mapping would (the same handler).
func (b *awsBackend) deliver(ctx context.Context, hooks *webhooks.Service) error {
	if b.events.SQS == nil {
		return errors.New("no Lambda event source for the webhooks queue (localserver.WithEvents)")
	}
	q, err := b.hookQueue.queue(ctx)
	if err != nil {
		return fmt.Errorf("webhooks queue (run genway aws init?): %w", err)
	}
	if b.serve {
		rctx, stop := context.WithCancel(ctx)
		recovered := make(chan struct{})
		go func() {
			defer close(recovered)
			recoverWebhooks(rctx, hooks, b.store, b.quiet, b.log)
		}()
		defer func() { stop(); <-recovered }()
	}
	return q.Poll(ctx, 10, b.events.SQS(hooks.Process, b.log))
}

// sweepRecords does nothing: DynamoDB's TTL expires the records.
func (b *awsBackend) sweepRecords(context.Context) error { return nil }

// expireMedia does nothing: the bucket's lifecycle rule expires the
// outputs.
func (b *awsBackend) expireMedia(context.Context, time.Duration, *slog.Logger) error { return nil }

func (b *awsBackend) Close() error { return nil }

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
