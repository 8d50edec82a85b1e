// Package sqsqueue is the jobs queue on Amazon SQS: Enqueue sends a job id
// (jobs.Queue), CreateQueues makes the queue and its dead-letter queue, and
// Poll is the long-poll loop that `genway serve` with GENWAY_BACKEND=aws uses
// in place of Lambda's SQS event source mapping.
//
// A message body is the JSON object {"job_id":"<id>"}; JobID decodes it.
package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/jobs"
)

// MaxDelay is the longest delay SQS supports (DelaySeconds 900). Longer
// delays are cut to it.
const MaxDelay = 15 * time.Minute

// MaxReceiveCount is how many receives move a message to the dead-letter
// queue. jobs.DefaultMaxAttempts is one less, so the last delivery fails the
// job instead of trying again.
const MaxReceiveCount = 5

// API is the part of the SQS client a Queue uses; *sqs.Client implements it.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Queue is a jobs.Queue on one SQS queue. Safe for concurrent use; set the
// fields before first use.
type Queue struct {
	api API
	url string

	// WaitTime is Poll's long-poll wait (1-20 s; 0 means 20 s).
	WaitTime time.Duration
	// NotBefore, if set, delays every message sent before it until it.
	// A restarted `genway serve` sets it to when the receives that a
	// killed process of it may have left waiting on the queue are over:
	// SQS (and moto) would hand such a receive the next message, to a
	// connection nobody reads, and hide it for the visibility timeout.
	NotBefore time.Time
	// Log receives Poll's transient errors; nil discards them.
	Log *slog.Logger

	now func() time.Time // nil: time.Now
}

var (
	_ jobs.Queue      = (*Queue)(nil)
	_ jobs.GroupQueue = (*Queue)(nil)
)

// New returns the Queue at queueURL.
func New(api API, queueURL string) *Queue {
	return &Queue{api: api, url: queueURL}
}

// Open returns the Queue at url on a client of cfg; if url is empty, the
// queue named name, whose URL it looks up (LookupURL): do it once, at
// start-up.
func Open(ctx context.Context, cfg aws.Config, url, name string) (*Queue, error) {
	client := sqs.NewFromConfig(cfg)
	url, err := LookupURL(ctx, client, url, name)
	if err != nil {
		return nil, err
	}
	return New(client, url), nil
}

// URLGetter is the SQS call LookupURL needs; *sqs.Client implements it.
type URLGetter interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// LookupURL returns url if set, else the URL of the queue named name (one
// GetQueueUrl call).
func LookupURL(ctx context.Context, client URLGetter, url, name string) (string, error) {
	if url != "" {
		return url, nil
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("get URL of queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// URL returns the queue's URL.
func (q *Queue) URL() string { return q.url }

// body is the message body.
type body struct {
	JobID string `json:"job_id"`
}

// JobID returns the job id in a message body, or an error if the body is
// not {"job_id":"..."} with a non-empty id.
func JobID(msgBody string) (string, error) {
	var b body
	if err := json.Unmarshal([]byte(msgBody), &b); err != nil {
		return "", fmt.Errorf("decode job message: %w", err)
	}
	if b.JobID == "" {
		return "", errors.New("decode job message: no job_id")
	}
	return b.JobID, nil
}

// SendWebhook implements webhooks.Queue: the webhooks queue's message is
// the job's, {"job_id":"<id>"}, delayed as Enqueue does.
func (q *Queue) SendWebhook(ctx context.Context, jobID string, delay time.Duration) error {
	return q.EnqueueGroup(ctx, jobID, "", delay)
}

// Enqueue implements jobs.Queue: one SendMessage, delayed by delay rounded
// up to whole seconds and cut to MaxDelay.
func (q *Queue) Enqueue(ctx context.Context, id string, delay time.Duration) error {
	return q.EnqueueGroup(ctx, id, "", delay)
}

// EnqueueGroup implements jobs.GroupQueue: Enqueue with the message group
// group (the job's account), which makes a standard queue an SQS fair
// queue: one group's backlog does not hold up the others' messages.
// Before NotBefore the delay is at least what remains of it.
func (q *Queue) EnqueueGroup(ctx context.Context, id, group string, delay time.Duration) error {
	if !q.NotBefore.IsZero() {
		now := time.Now
		if q.now != nil {
			now = q.now
		}
		delay = max(delay, q.NotBefore.Sub(now()))
	}
	b, err := json.Marshal(body{JobID: id})
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	in := &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(string(b)),
		DelaySeconds: delaySeconds(delay),
	}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	_, err = q.api.SendMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	return nil
}

func delaySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d > MaxDelay {
		d = MaxDelay
	}
	return int32((d + time.Second - 1) / time.Second)
}

// Message is a received message, with what events.SQSMessage needs.
type Message struct {
	MessageID     string
	ReceiptHandle string
	Body          string
	MD5OfBody     string
	// ReceiveCount is ApproximateReceiveCount: 1 on first delivery.
	ReceiveCount int
	// Attributes are the message system attributes (ApproximateReceiveCount,
	// SentTimestamp, ApproximateFirstReceiveTimestamp, SenderId, ...).
	Attributes map[string]string
}

// Handler processes a batch and returns the MessageIDs that failed; those
// are left on the queue to come back after the visibility timeout, the rest
// are deleted (as with ReportBatchItemFailures).
type Handler func(ctx context.Context, msgs []Message) (failedIDs []string)

// maxErrors is how many receive failures in a row end Poll.
const maxErrors = 10

// Poll long-polls the queue for batches of up to batch (1-10) messages and
// hands each batch to handle until ctx ends, then returns nil. Messages not
// reported failed are deleted. Receive errors are retried with backoff; Poll
// returns an error after maxErrors of them in a row. A failed delete is
// logged and the message is delivered again later (handlers are
// idempotent).
func (q *Queue) Poll(ctx context.Context, batch int, handle Handler) error {
	batch = min(max(batch, 1), 10)
	wait := q.WaitTime
	if wait <= 0 || wait > 20*time.Second {
		wait = 20 * time.Second
	}
	waitSec := int32(max(wait/time.Second, 1))
	errs := 0
	for ctx.Err() == nil {
		out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(q.url),
			MaxNumberOfMessages:         int32(batch),
			WaitTimeSeconds:             waitSec,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			errs++
			if errs >= maxErrors {
				return fmt.Errorf("poll %s: %d receive errors in a row, last: %w", q.url, errs, err)
			}
			q.logError("receive", err)
			if !ctxtime.Sleep(ctx, time.Duration(100<<min(errs, 6))*time.Millisecond) {
				return nil
			}
			continue
		}
		errs = 0
		if len(out.Messages) == 0 {
			continue
		}
		msgs := make([]Message, len(out.Messages))
		for i, m := range out.Messages {
			msgs[i] = message(m)
		}
		failed := handle(ctx, msgs)
		q.deleteDone(ctx, msgs, failed)
	}
	return nil
}

func message(m types.Message) Message {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return Message{
		MessageID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), MD5OfBody: aws.ToString(m.MD5OfBody), ReceiveCount: n,
		Attributes: m.Attributes,
	}
}

// deleteDone deletes the messages not in failed, in one batch (a received
// batch has at most 10 messages, DeleteMessageBatch's limit).
func (q *Queue) deleteDone(ctx context.Context, msgs []Message, failed []string) {
	skip := make(map[string]bool, len(failed))
	for _, id := range failed {
		skip[id] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if !skip[m.MessageID] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.ReceiptHandle),
			})
		}
	}
	if len(entries) == 0 {
		return
	}
	// Deleting must not be cut short by the shutdown that ended handle.
	out, err := q.api.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
	if err != nil {
		q.logError("delete", err)
		return
	}
	for _, f := range out.Failed {
		q.logError("delete", fmt.Errorf("entry %s: %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
	}
}

func (q *Queue) logError(op string, err error) {
	if q.Log != nil {
		q.Log.Warn("sqs poll", "op", op, "queue", q.url, "err", err)
	}
}
