// Package dynamostream reads a DynamoDB stream outside Lambda: the local
// stand-in for the jobs-table event source mapping that `genway serve` with
// GENWAY_BACKEND=aws runs (against moto or real AWS), feeding the credits
// handler.
//
// Delivery is at least once and nothing is persisted: every shard is read
// from TRIM_HORIZON, so a restarted reader sees again the records of the
// last 24 hours (on moto, all of them). That is the safe choice because
// settlement is idempotent (one ledger entry per job): re-reading costs
// conditional writes that fail harmlessly, whereas LATEST would lose the
// completions that happened while the server was down and leave their
// credits held forever. A batch whose handler fails is retried, from the
// same position, until it succeeds or the context ends, as Lambda does with
// its default retry settings.
package dynamostream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// API is the part of the DynamoDB Streams client the reader uses;
// *dynamodbstreams.Client implements it.
type API interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Record is one stream record, with what events.DynamoDBEventRecord needs.
type Record struct {
	EventID        string
	EventName      string // INSERT, MODIFY, REMOVE
	EventSource    string // aws:dynamodb
	EventVersion   string
	AWSRegion      string
	ShardID        string
	SequenceNumber string
	Created        time.Time // ApproximateCreationDateTime
	SizeBytes      int64
	StreamViewType string
	Keys           map[string]types.AttributeValue
	OldImage       map[string]types.AttributeValue
	NewImage       map[string]types.AttributeValue
}

// Handler processes a batch of records from one shard, in order. An error
// means "retry this batch".
type Handler func(ctx context.Context, records []Record) error

// Poller reads a stream. The zero value is ready to use.
type Poller struct {
	// Interval is the pause after a round of polls that returned nothing
	// (0: one second). GetRecords is limited to five calls per second per
	// shard in AWS.
	Interval time.Duration
	// Batch is the most records per GetRecords call (0: 100; at most 1000).
	Batch int
	// Log receives transient errors; nil discards them.
	Log *slog.Logger
}

// Poll reads streamARN with a zero Poller: see Poller.Poll.
func Poll(ctx context.Context, api API, streamARN string, handle Handler) error {
	return Poller{}.Poll(ctx, api, streamARN, handle)
}

// shardState is a shard being read.
type shardState struct {
	parent   string
	iterator string // "" until opened
	lastSeq  string // of the last record handled
}

// maxErrors is how many API failures in a row end Poll.
const maxErrors = 10

// Poll reads every shard of the stream at streamARN, oldest records first
// (a child shard after its parent), and calls handle with each non-empty
// batch, until ctx ends; then it returns nil. It rereads the stream
// description every ten rounds and when a shard closes, to find new shards.
// It returns an error if the stream cannot be described or read maxErrors
// times in a row.
func (p Poller) Poll(ctx context.Context, api API, streamARN string, handle Handler) error {
	interval := p.Interval
	if interval <= 0 {
		interval = time.Second
	}
	batch := int32(p.Batch)
	if batch <= 0 || batch > 1000 {
		batch = 100
	}
	shards := map[string]*shardState{}
	done := map[string]bool{}
	errs := 0
	fail := func(op string, err error) error {
		errs++
		if errs >= maxErrors {
			return fmt.Errorf("read stream %s: %d errors in a row, last %s: %w", streamARN, errs, op, err)
		}
		if p.Log != nil {
			p.Log.Warn("dynamodb stream", "op", op, "stream", streamARN, "err", err)
		}
		return nil
	}
	describe := true
	for round := 0; ctx.Err() == nil; round++ {
		if describe || round%10 == 0 {
			if err := p.describe(ctx, api, streamARN, shards, done); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if ferr := fail("describe", err); ferr != nil {
					return ferr
				}
			} else {
				describe = false
			}
		}
		got := false
		for id, s := range shards {
			if ctx.Err() != nil {
				return nil
			}
			if s.parent != "" && shards[s.parent] != nil {
				continue // the parent's records come first
			}
			n, closed, err := p.readShard(ctx, api, streamARN, id, s, batch, handle)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if ferr := fail("read shard "+id, err); ferr != nil {
					return ferr
				}
				continue
			}
			errs = 0
			got = got || n > 0
			if closed {
				delete(shards, id)
				done[id] = true
				describe = true
			}
		}
		if !got && !sleep(ctx, interval) {
			return nil
		}
	}
	return nil
}

// describe adds the stream's shards not yet known or finished to shards.
func (p Poller) describe(ctx context.Context, api API, arn string, shards map[string]*shardState, done map[string]bool) error {
	var start *string
	for {
		out, err := api.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return err
		}
		for _, sh := range out.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if shards[id] == nil && !done[id] {
				shards[id] = &shardState{parent: aws.ToString(sh.ParentShardId)}
			}
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return nil
		}
	}
}

// readShard makes one GetRecords call on shard id and hands the records to
// handle, retrying the batch while handle fails. It reports how many
// records it read and whether the shard is closed and fully read.
func (p Poller) readShard(ctx context.Context, api API, arn, id string, s *shardState, batch int32, handle Handler) (int, bool, error) {
	if s.iterator == "" {
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(id), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
		if s.lastSeq != "" {
			in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(s.lastSeq)
		}
		out, err := api.GetShardIterator(ctx, in)
		if err != nil {
			return 0, false, err
		}
		s.iterator = aws.ToString(out.ShardIterator)
		if s.iterator == "" {
			return 0, true, nil
		}
	}
	out, err := api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(s.iterator), Limit: aws.Int32(batch)})
	var expired *types.ExpiredIteratorException
	if errors.As(err, &expired) {
		s.iterator = "" // reopen after lastSeq next round
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(out.Records) > 0 {
		recs := make([]Record, len(out.Records))
		for i, r := range out.Records {
			recs[i] = record(id, r)
		}
		for attempt := 0; ; attempt++ {
			err := handle(ctx, recs)
			if err == nil {
				break
			}
			if p.Log != nil {
				p.Log.Warn("dynamodb stream handler failed; retrying batch", "shard", id, "records", len(recs), "attempt", attempt+1, "err", err)
			}
			if !sleep(ctx, time.Duration(100<<min(attempt, 6))*time.Millisecond) {
				return 0, false, ctx.Err()
			}
		}
		s.lastSeq = recs[len(recs)-1].SequenceNumber
	}
	s.iterator = aws.ToString(out.NextShardIterator)
	return len(out.Records), s.iterator == "", nil
}

func record(shard string, r types.Record) Record {
	out := Record{
		EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventSource: aws.ToString(r.EventSource),
		EventVersion: aws.ToString(r.EventVersion), AWSRegion: aws.ToString(r.AwsRegion), ShardID: shard,
	}
	if d := r.Dynamodb; d != nil {
		out.SequenceNumber = aws.ToString(d.SequenceNumber)
		out.Created = aws.ToTime(d.ApproximateCreationDateTime)
		out.SizeBytes = aws.ToInt64(d.SizeBytes)
		out.StreamViewType = string(d.StreamViewType)
		out.Keys, out.OldImage, out.NewImage = d.Keys, d.OldImage, d.NewImage
	}
	return out
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
