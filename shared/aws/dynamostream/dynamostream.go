// Package dynamostream reads a DynamoDB stream outside Lambda: the local
// stand-in for the jobs-table event source mapping that `genway serve` with
// GENWAY_BACKEND=aws runs (against moto or real AWS), feeding the credits
// handler.
//
// Delivery is at least once. Where the reader left off is kept by a
// Checkpoints (FileCheckpoints: a file in the server's data directory), so
// a restarted reader resumes there; without one, or for a shard it has no
// position in, it reads from TRIM_HORIZON (the last 24 hours on AWS, all
// of it on moto). Never LATEST alone: the completions that happened while
// the server was down would be lost and their credits held forever;
// settlement is idempotent (one ledger entry per job), so re-reading costs
// only conditional writes that fail harmlessly.
//
// A re-read never stands in front of new records. Poll reads each stream
// with two readers: the live reader opens every shard that is open at the
// start at LATEST (and every shard that appears later at TRIM_HORIZON),
// so new records are handled as they come; the catch-up reader reads each
// shard from its checkpoint (or TRIM_HORIZON) up to the first record the
// live reader handled there, and stops. Its handler calls get the context
// Poller.Background makes, so that a store may serve them after the live
// ones. Records near the boundary may be handled by both, and the order
// between a catch-up record and a live one is not kept: handlers must be
// idempotent and must not depend on the order of one item's records
// across that boundary (settling a final status is both). While the
// catch-up reader runs, the checkpoint saved is its position; afterwards
// the live reader's.
//
// A batch whose handler fails is retried, from the same position, until
// it succeeds or the context ends, as Lambda does with its default retry
// settings.
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
// sequence number. A checkpoint keeps the same position (sequence number
// and event ids), so a restart resumes exactly there. (In Genway's jobs
// table the only transaction is a job's Create, so a rolled-back record is
// the INSERT of a queued job, which settles nothing.) On AWS this costs
// one GetShardIterator per shard per refresh and a re-read of a few
// seconds of records, none handed over twice.
package dynamostream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
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
	// Checkpoints keeps the reader's positions across restarts; nil keeps
	// none (every start catches up from TRIM_HORIZON).
	Checkpoints Checkpoints
	// SaveEvery is the least time between two saves of the positions
	// while records are handled (0: one second); they are saved again
	// when Poll returns.
	SaveEvery time.Duration
	// Background, if set, makes the context of the catch-up reader's
	// handler calls (see the package comment), for instance one that a
	// store serves after the live work.
	Background func(context.Context) context.Context
	// Log receives transient errors; nil discards them.
	Log *slog.Logger
}

// Poll reads streamARN with a zero Poller: see Poller.Poll.
func Poll(ctx context.Context, api API, streamARN string, handle Handler) error {
	return Poller{}.Poll(ctx, api, streamARN, handle)
}

// Position is where a reader resumes in one shard.
type Position struct {
	// At re-opens the shard at this sequence number, skipping the records
	// whose event ids are in Skip: they were handled already.
	At   string   `json:"at,omitempty"`
	Skip []string `json:"skip,omitempty"`
	// After re-opens the shard after this sequence number.
	After string `json:"after,omitempty"`
	// Done is a shard that was closed and read to its end.
	Done bool `json:"done,omitempty"`
}

// Checkpoints keeps a stream reader's positions, by shard id, across
// restarts.
type Checkpoints interface {
	// Load returns the positions saved for the stream (none: an empty
	// map, or nil).
	Load(ctx context.Context, streamARN string) (map[string]Position, error)
	// Save replaces the stream's positions.
	Save(ctx context.Context, streamARN string, positions map[string]Position) error
}

// shardState is a shard being read.
type shardState struct {
	parent string
	// latest opens the shard at LATEST while nothing was read from it
	// (the live reader's shards that were open at the start).
	latest   bool
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

// position returns where a new reader resumes so that it hands over
// nothing this one handed over and misses nothing it did not: the
// re-open point of the current refresh window; false when the shard was
// not read yet.
func (s *shardState) position() (Position, bool) {
	switch {
	case s.firstSeq != "":
		return Position{At: s.firstSeq, Skip: keys(s.handled)}, true
	case s.from != "":
		return Position{At: s.from, Skip: keys(s.skip)}, true
	case s.lastSeq != "":
		return Position{After: s.lastSeq}, true
	}
	return Position{}, false
}

// resume returns the state of a shard resumed at pos.
func resume(parent string, pos Position) *shardState {
	s := &shardState{parent: parent}
	switch {
	case pos.At != "":
		s.from, s.skip = pos.At, map[string]bool{}
		for _, id := range pos.Skip {
			s.skip[id] = true
		}
	case pos.After != "":
		s.lastSeq = pos.After
	}
	return s
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// seqBefore reports whether sequence number a comes before b (both
// decimal integers, as DynamoDB Streams and moto write them).
func seqBefore(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// maxErrors is how many API failures in a row end Poll.
const maxErrors = 10

// Poll reads every shard of the stream at streamARN and calls handle with
// each non-empty batch, until ctx ends; then it saves its positions and
// returns nil. The live reader hands over new records as they come; the
// catch-up reader, beside it, the records since the checkpoint (oldest
// first, a child shard after its parent), until it reaches what the live
// reader handled (see the package comment). Each rereads the stream
// description every Refresh (the live reader also when a shard closes, to
// find new shards) and re-opens every shard's iterator after the last
// record handled. It returns an error if the stream cannot be described or
// read maxErrors times in a row by either reader.
func (p Poller) Poll(ctx context.Context, api API, streamARN string, handle Handler) error {
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if p.Batch <= 0 || p.Batch > 1000 {
		p.Batch = 100
	}
	if p.Refresh <= 0 {
		p.Refresh = 5 * time.Second
	}
	if p.SaveEvery <= 0 {
		p.SaveEvery = time.Second
	}
	t := &tracker{p: p, arn: streamARN, first: map[string]string{}, live: map[string]Position{}, catching: map[string]Position{},
		done: map[string]bool{}, present: map[string]bool{}}
	var saved map[string]Position
	if p.Checkpoints != nil {
		var err error
		if saved, err = p.Checkpoints.Load(ctx, streamARN); err != nil {
			p.warn("stream checkpoint unreadable; catching up from the oldest record", "stream", streamARN, "err", err)
			saved = nil
		}
	}
	live := &reader{p: p, api: api, arn: streamARN, handle: handle, t: t, live: true, shards: map[string]*shardState{}, done: map[string]bool{}}
	catchUp := &reader{p: p, api: api, arn: streamARN, handle: handle, t: t, shards: map[string]*shardState{}, done: map[string]bool{}}
	// The shards at the start: the open ones are read live from LATEST;
	// every one not read to its end is caught up from its position.
	var shards []types.Shard
	for {
		var err error
		if shards, err = describe(ctx, api, streamARN); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if ferr := live.fail("describe", err); ferr != nil {
			return ferr
		}
		if !ctxtime.Sleep(ctx, p.Interval) {
			return nil
		}
	}
	t.mu.Lock()
	for _, sh := range shards {
		id, parent := aws.ToString(sh.ShardId), aws.ToString(sh.ParentShardId)
		t.present[id] = true
		pos := saved[id]
		if pos.Done {
			t.done[id] = true
			live.done[id], catchUp.done[id] = true, true
			continue
		}
		if open := sh.SequenceNumberRange == nil || sh.SequenceNumberRange.EndingSequenceNumber == nil; open {
			live.shards[id] = &shardState{parent: parent, latest: true}
		} else {
			live.done[id] = true // the catch-up reader's
		}
		catchUp.shards[id] = resume(parent, pos)
		t.catching[id] = pos
	}
	t.mu.Unlock()
	// A parent not in the description any more (trimmed) holds nothing back.
	for _, r := range []*reader{live, catchUp} {
		for _, s := range r.shards {
			if r.shards[s.parent] == nil {
				s.parent = ""
			}
		}
	}

	// The live reader's iterators are opened before the catch-up reader
	// starts, so that a record made from now on is the live reader's from
	// the first round. (Nothing depends on it: the catch-up reader stops
	// only at a record the live reader handled.)
	for id, s := range live.shards {
		if err := live.open(ctx, id, s); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ferr := live.fail("open shard "+id, err); ferr != nil {
				return ferr
			}
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caught := make(chan error, 1)
	go func() {
		err := catchUp.run(rctx)
		if err != nil {
			cancel() // the live reader stops too: Poll reports it
		}
		caught <- err
	}()
	err := live.run(rctx)
	cancel()
	if cerr := <-caught; err == nil {
		err = cerr
	}
	if p.Checkpoints != nil {
		sctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		t.save(sctx, true)
		done()
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (p Poller) warn(msg string, args ...any) {
	if p.Log != nil {
		p.Log.Warn(msg, args...)
	}
}

// tracker is what the two readers share: where each is, the live
// reader's first record in each shard (where the catch-up reader stops),
// and the saving of positions. Safe for concurrent use.
type tracker struct {
	p      Poller
	arn    string
	saving sync.Mutex

	mu       sync.Mutex
	first    map[string]string   // by shard: the sequence number of the live reader's first handled record
	live     map[string]Position // by shard: the live reader's position
	catching map[string]Position // by shard: the catch-up reader's position, while it reads the shard
	done     map[string]bool     // shards read to their end
	present  map[string]bool     // shards in the last description
	dirty    bool
	saved    time.Time
}

// stopAt returns where the catch-up reader stops in shard id ("" while
// the live reader has handled nothing there).
func (t *tracker) stopAt(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first[id]
}

// moved records a reader's state s of shard id after it handled records
// (firstSeq: the first of them) or finished the shard (closed: read to
// its end).
func (t *tracker) moved(live bool, id string, s *shardState, finished, closed bool, firstSeq string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dirty = true
	switch {
	case live && closed:
		t.done[id] = true
		delete(t.live, id)
	case live:
		if _, ok := t.first[id]; !ok && firstSeq != "" {
			t.first[id] = firstSeq
		}
		if pos, ok := s.position(); ok {
			t.live[id] = pos
		}
	case finished: // caught up, or read to its end
		delete(t.catching, id)
		if closed {
			t.done[id] = true
		}
	default:
		if pos, ok := s.position(); ok {
			t.catching[id] = pos
		}
	}
}

// described records the shards of a new description.
func (t *tracker) described(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.present = map[string]bool{}
	for _, id := range ids {
		t.present[id] = true
	}
}

// positions returns what to save: for each shard of the stream, the
// catch-up reader's position while it reads the shard, else done, else
// the live reader's position. A shard with none is left out: a restart
// reads it from TRIM_HORIZON.
func (t *tracker) positions() map[string]Position {
	out := map[string]Position{}
	for id := range t.present {
		switch pos, catching := t.catching[id]; {
		case catching:
			if pos.At != "" || pos.After != "" {
				out[id] = pos
			}
		case t.done[id]:
			out[id] = Position{Done: true}
		default:
			if pos, ok := t.live[id]; ok {
				out[id] = pos
			}
		}
	}
	return out
}

// save saves the positions if they changed, at most once per SaveEvery
// unless force.
func (t *tracker) save(ctx context.Context, force bool) {
	if t.p.Checkpoints == nil {
		return
	}
	t.saving.Lock() // one save at a time: a later snapshot is never overwritten by an earlier one
	defer t.saving.Unlock()
	t.mu.Lock()
	if !t.dirty || (!force && time.Since(t.saved) < t.p.SaveEvery) {
		t.mu.Unlock()
		return
	}
	pos := t.positions()
	t.dirty, t.saved = false, time.Now()
	t.mu.Unlock()
	if err := t.p.Checkpoints.Save(ctx, t.arn, pos); err != nil {
		t.p.warn("stream checkpoint not saved; a restart reads again from the last one", "stream", t.arn, "err", err)
		t.mu.Lock()
		t.dirty = true
		t.mu.Unlock()
	}
}

// reader is one of Poll's two readers.
type reader struct {
	p      Poller
	api    API
	arn    string
	handle Handler
	t      *tracker
	// live: the live reader (LATEST, new shards); else the catch-up one.
	live   bool
	shards map[string]*shardState
	done   map[string]bool
	errs   int
}

// fail counts an API failure and returns an error on the maxErrors-th in
// a row.
func (r *reader) fail(op string, err error) error {
	r.errs++
	if r.errs >= maxErrors {
		return fmt.Errorf("read stream %s: %d errors in a row, last %s: %w", r.arn, r.errs, op, err)
	}
	r.p.warn("dynamodb stream", "op", op, "stream", r.arn, "err", err)
	return nil
}

// run reads the reader's shards until ctx ends (the catch-up reader: until
// it has caught up in every shard); it returns nil then.
func (r *reader) run(ctx context.Context) error {
	describe := false // Poll described the stream just now
	described := time.Now()
	for ctx.Err() == nil {
		if !r.live && len(r.shards) == 0 {
			return nil
		}
		if timed := time.Since(described) >= r.p.Refresh; describe || timed {
			if timed {
				for _, s := range r.shards {
					s.refresh()
				}
				described = time.Now()
			}
			if r.live {
				if err := r.describe(ctx); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					if ferr := r.fail("describe", err); ferr != nil {
						return ferr
					}
				} else {
					describe = false
				}
			}
		}
		got := false
		for id, s := range r.shards {
			if ctx.Err() != nil {
				return nil
			}
			if s.parent != "" && r.shards[s.parent] != nil {
				continue // the parent's records come first
			}
			n, finished, err := r.readShard(ctx, id, s)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if ferr := r.fail("read shard "+id, err); ferr != nil {
					return ferr
				}
				continue
			}
			r.errs = 0
			got = got || n > 0
			if finished {
				delete(r.shards, id)
				r.done[id] = true
				describe = true
			}
		}
		r.t.save(ctx, false)
		if !got && !ctxtime.Sleep(ctx, r.p.Interval) {
			return nil
		}
	}
	return nil
}

// describe adds the stream's shards not yet known or finished to the
// live reader's.
func (r *reader) describe(ctx context.Context) error {
	shards, err := describe(ctx, r.api, r.arn)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(shards))
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		ids = append(ids, id)
		if r.shards[id] == nil && !r.done[id] {
			r.shards[id] = &shardState{parent: aws.ToString(sh.ParentShardId)}
		}
	}
	r.t.described(ids)
	return nil
}

// describe returns the stream's shards.
func describe(ctx context.Context, api API, arn string) ([]types.Shard, error) {
	var start *string
	var shards []types.Shard
	for {
		out, err := api.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return shards, nil
		}
	}
}

// open opens shard id's iterator where s says: at its re-open point,
// after its last record, at LATEST (a live shard read from the start),
// else at TRIM_HORIZON. An iterator left "" means the shard is closed and
// read.
func (r *reader) open(ctx context.Context, id string, s *shardState) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(id), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	switch {
	case s.from != "":
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAtSequenceNumber, aws.String(s.from)
	case s.lastSeq != "":
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(s.lastSeq)
	case s.latest:
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	}
	out, err := r.api.GetShardIterator(ctx, in)
	if err != nil {
		return err
	}
	s.iterator, s.from = aws.ToString(out.ShardIterator), ""
	return nil
}

// readShard makes one GetRecords call on shard id and hands the records to
// handle, retrying the batch while handle fails. It reports how many
// records it read, and whether the reader is done with the shard: it is
// closed and fully read, or (the catch-up reader) it reached the live
// reader's first record there.
func (r *reader) readShard(ctx context.Context, id string, s *shardState) (int, bool, error) {
	if s.iterator == "" {
		if err := r.open(ctx, id, s); err != nil {
			return 0, false, err
		}
		if s.iterator == "" {
			r.t.moved(r.live, id, s, true, true, "")
			return 0, true, nil
		}
	}
	out, err := r.api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(s.iterator), Limit: aws.Int32(int32(r.p.Batch))})
	var expired *types.ExpiredIteratorException
	if errors.As(err, &expired) {
		s.iterator = "" // reopen next round
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	stop := ""
	if !r.live {
		stop = r.t.stopAt(id)
	}
	caughtUp := false
	recs := make([]Record, 0, len(out.Records))
	for _, rr := range out.Records {
		rec := record(id, rr)
		if stop != "" && !seqBefore(rec.SequenceNumber, stop) {
			caughtUp = true // the live reader has this one and what follows
			break
		}
		s.lastSeq = rec.SequenceNumber
		s.latest = false
		if !s.skip[rec.EventID] {
			recs = append(recs, rec)
		}
	}
	if len(recs) > 0 {
		hctx := ctx
		if !r.live && r.p.Background != nil {
			hctx = r.p.Background(ctx)
		}
		for attempt := 0; ; attempt++ {
			err := r.handle(hctx, recs)
			if err == nil {
				break
			}
			r.p.warn("dynamodb stream handler failed; retrying batch", "shard", id, "records", len(recs), "attempt", attempt+1, "err", err)
			if !ctxtime.Sleep(ctx, time.Duration(100<<min(attempt, 6))*time.Millisecond) {
				return 0, false, ctx.Err()
			}
		}
		if s.firstSeq == "" {
			s.firstSeq, s.handled = recs[0].SequenceNumber, map[string]bool{}
		}
		for _, rec := range recs {
			s.handled[rec.EventID] = true
		}
	}
	s.iterator = aws.ToString(out.NextShardIterator)
	closed := s.iterator == "" && !caughtUp
	if len(recs) > 0 || caughtUp || closed {
		first := ""
		if len(recs) > 0 {
			first = recs[0].SequenceNumber
		}
		r.t.moved(r.live, id, s, caughtUp, closed, first)
	}
	return len(recs), caughtUp || closed, nil
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
