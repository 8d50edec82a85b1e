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
//
// Iterators are not kept for long: at every refresh (a few seconds) the
// reader re-describes the stream and re-opens each shard's iterator. moto
// rolls a failed TransactWriteItems back by swapping the whole table
// object; every iterator opened before that point then reads a dead shard
// that gets no new record but does hold the rolled-back writes, whose
// sequence numbers the live shard gives to the next real records. So a
// shard is re-opened at the first record handled since the previous
// refresh, and the records read again are skipped by event id: a record
// read from a dead shard is then followed by the live record that took its
// sequence number. (In Genway's jobs table the only transaction is a job's
// Create, so a rolled-back record is the INSERT of a queued job, which
// settles nothing.) On AWS this costs one GetShardIterator per shard per
// refresh and a re-read of a few seconds of records, none handed over
// twice.
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

	"github.com/genway/genway/shared/ctxtime"
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
	// Refresh is how often the stream is described again and every
	// shard's iterator re-opened after its last handled sequence number
	// (0: five seconds).
	Refresh time.Duration
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
	lastSeq  string // of the last record read
	// firstSeq and handled are the first record's sequence number and the
	// event ids of the records handed over since the last refresh.
	firstSeq string
	handled  map[string]bool
	// from is where the next iterator opens (AT_SEQUENCE_NUMBER; "" for
	// after lastSeq), and skip the event ids already handed over that a
	// read from there meets again.
	from string
	skip map[string]bool
}

// refresh makes the next read re-open the shard at the first record
// handled since the last refresh, skipping the records already handled.
func (s *shardState) refresh() {
	s.iterator = ""
	if s.firstSeq != "" {
		s.from, s.skip = s.firstSeq, s.handled
	}
	s.firstSeq, s.handled = "", nil
}

// maxErrors is how many API failures in a row end Poll.
const maxErrors = 10

// Poll reads every shard of the stream at streamARN, oldest records first
// (a child shard after its parent), and calls handle with each non-empty
// batch, until ctx ends; then it returns nil. It rereads the stream
// description every Refresh and when a shard closes, to find new shards,
// and at each timed refresh re-opens every shard's iterator after the last
// record handled (see the package comment). It returns an error if the stream cannot be described or read maxErrors
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
	refresh := p.Refresh
	if refresh <= 0 {
		refresh = 5 * time.Second
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
	var described time.Time
	for ctx.Err() == nil {
		if timed := time.Since(described) >= refresh; describe || timed {
			if timed {
				for _, s := range shards {
					s.refresh()
				}
				described = time.Now()
			}
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
		if !got && !ctxtime.Sleep(ctx, interval) {
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
		switch {
		case s.from != "":
			in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAtSequenceNumber, aws.String(s.from)
		case s.lastSeq != "":
			in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(s.lastSeq)
		}
		out, err := api.GetShardIterator(ctx, in)
		if err != nil {
			return 0, false, err
		}
		s.iterator, s.from = aws.ToString(out.ShardIterator), ""
		if s.iterator == "" {
			return 0, true, nil
		}
	}
	out, err := api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(s.iterator), Limit: aws.Int32(batch)})
	var expired *types.ExpiredIteratorException
	if errors.As(err, &expired) {
		s.iterator = "" // reopen next round
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	recs := make([]Record, 0, len(out.Records))
	for _, r := range out.Records {
		rec := record(id, r)
		s.lastSeq = rec.SequenceNumber
		if !s.skip[rec.EventID] {
			recs = append(recs, rec)
		}
	}
	if len(recs) > 0 {
		for attempt := 0; ; attempt++ {
			err := handle(ctx, recs)
			if err == nil {
				break
			}
			if p.Log != nil {
				p.Log.Warn("dynamodb stream handler failed; retrying batch", "shard", id, "records", len(recs), "attempt", attempt+1, "err", err)
			}
			if !ctxtime.Sleep(ctx, time.Duration(100<<min(attempt, 6))*time.Millisecond) {
				return 0, false, ctx.Err()
			}
		}
		if s.firstSeq == "" {
			s.firstSeq, s.handled = recs[0].SequenceNumber, map[string]bool{}
		}
		for _, r := range recs {
			s.handled[r.EventID] = true
		}
	}
	s.iterator = aws.ToString(out.NextShardIterator)
	return len(recs), s.iterator == "", nil
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
