package dynamostream_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/dynamostream"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// TestPollSeesCompletion drives a job to completed through dynamostore and
// checks that the poller delivers the MODIFY record, that ChangeFromImages
// reads it, and that a failed batch is delivered again.
func TestPollSeesCompletion(t *testing.T) {
	endpoint := mototest.Start(t)
	cfg := mototest.Config(endpoint)
	db := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	if err := dynamostore.CreateTables(ctx, db, "jobs", "accounts"); err != nil {
		t.Fatal(err)
	}
	arn, err := dynamostore.StreamARN(ctx, db, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	s := dynamostore.New(db, "jobs", "accounts")
	if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
		t.Fatal(err)
	}
	j := &jobs.Job{ID: "job_1", Account: "acct1", Type: jobs.TypeSFX, Model: "m", Input: jobs.Input{Prompt: "p", Duration: 5}, Price: 25, Created: 10, Updated: 10}
	if _, err := s.Create(ctx, j, &jobs.Idempotency{Key: "acct1/k", BodyHash: "h", Expires: 100}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		from, to jobs.Status
		p        jobs.Patch
	}{
		{jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: 11}},
		{jobs.Processing, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: 12}}, // a retake: no status change
		{jobs.Processing, jobs.Completed, jobs.Patch{Output: &jobs.Output{Key: "k"}, Updated: 13}},
	}
	for _, st := range steps {
		if _, err := s.Transition(ctx, "job_1", st.from, st.to, st.p); err != nil {
			t.Fatalf("Transition(%s -> %s) = %v", st.from, st.to, err)
		}
	}

	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var changes []credits.Change
	var names []string
	calls := 0
	failedOnce := false
	var firstIDs, retryIDs []string
	// Refresh re-opens the iterator every few polls: the records read
	// again must not be handed over twice (changes below are exact).
	p := dynamostream.Poller{Interval: 50 * time.Millisecond, Refresh: 60 * time.Millisecond}
	err = p.Poll(pctx, dynamodbstreams.NewFromConfig(cfg), arn, func(_ context.Context, recs []dynamostream.Record) error {
		calls++
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.EventID
		}
		if !failedOnce {
			failedOnce, firstIDs = true, ids
			return errors.New("simulated crash")
		}
		if retryIDs == nil {
			retryIDs = ids
		}
		for _, r := range recs {
			if r.SequenceNumber == "" || r.EventID == "" {
				t.Errorf("record %+v; want a sequence number and event id", r)
			}
			names = append(names, r.EventName)
			if c, ok := dynamostore.ChangeFromImages(dynamostream.ToDynamoDB(r.OldImage), dynamostream.ToDynamoDB(r.NewImage)); ok {
				changes = append(changes, c)
				if c.NewStatus == string(jobs.Completed) {
					cancel()
				}
			}
		}
		return nil
	})
	if err != nil || pctx.Err() == context.DeadlineExceeded {
		t.Fatalf("Poll = %v (ctx %v) after %d calls, records %v; want the completion", err, pctx.Err(), calls, names)
	}
	if len(firstIDs) == 0 || len(retryIDs) < len(firstIDs) || retryIDs[0] != firstIDs[0] {
		t.Errorf("batch after a failure starts with %v; want the failed batch %v again", retryIDs, firstIDs)
	}
	want := []credits.Change{
		{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "m", OldStatus: "", NewStatus: "queued", Price: 25, At: 10},
		{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "m", OldStatus: "queued", NewStatus: "processing", Price: 25, At: 11},
		{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "m", OldStatus: "processing", NewStatus: "completed", Price: 25, At: 13},
	}
	if len(changes) != len(want) {
		t.Fatalf("changes = %+v (records %v); want %+v", changes, names, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d = %+v; want %+v", i, changes[i], want[i])
		}
	}
	t.Logf("records: %v", names)
	// Settling from the stream is what the credits handler does.
	if err := credits.Apply(ctx, s, changes[2]); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(ctx, "acct1"); a.Balance != 75 || a.Held != 0 || a.Available != 75 {
		t.Errorf("Account after capture = %+v; want balance 75, held 0", a)
	}
}

// TestPollAfterFailedTransaction is the settlement stall of the AWS-backed
// local mode: moto rolls a failed TransactWriteItems (here a job refused
// for want of credits) back by swapping the table, and an iterator opened
// before it never sees another record. The reader must re-open its
// iterators and see the next job.
func TestPollAfterFailedTransaction(t *testing.T) {
	endpoint := mototest.Start(t)
	cfg := mototest.Config(endpoint)
	db := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	if err := dynamostore.CreateTables(ctx, db, "jobs", "accounts"); err != nil {
		t.Fatal(err)
	}
	arn, err := dynamostore.StreamARN(ctx, db, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	s := dynamostore.New(db, "jobs", "accounts")
	if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
		t.Fatal(err)
	}
	create := func(id string, price credits.Amount) error {
		j := &jobs.Job{ID: id, Account: "acct1", Type: jobs.TypeSFX, Model: "m", Input: jobs.Input{Prompt: "p", Duration: 1}, Price: price, Created: 10, Updated: 10}
		_, err := s.Create(ctx, j, nil)
		return err
	}
	if err := create("job_1", 5); err != nil {
		t.Fatal(err)
	}

	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		p := dynamostream.Poller{Interval: 50 * time.Millisecond, Refresh: 300 * time.Millisecond}
		done <- p.Poll(pctx, dynamodbstreams.NewFromConfig(cfg), arn, func(_ context.Context, recs []dynamostream.Record) error {
			for _, r := range recs {
				if c, ok := dynamostore.ChangeFromImages(dynamostream.ToDynamoDB(r.OldImage), dynamostream.ToDynamoDB(r.NewImage)); ok {
					seen <- c.JobID
				}
			}
			return nil
		})
	}()
	wait := func(id string) {
		t.Helper()
		for {
			select {
			case got := <-seen:
				if got == id {
					return
				}
			case <-pctx.Done():
				t.Fatalf("the reader never delivered %s's record", id)
			}
		}
	}
	wait("job_1") // the iterator is open
	// A job the account cannot pay: a failed TransactWriteItems.
	if err := create("job_2", 50); !errors.Is(err, jobs.ErrInsufficientCredits) {
		t.Fatalf("create job_2 = %v; want ErrInsufficient", err)
	}
	if err := create("job_3", 1); err != nil {
		t.Fatal(err)
	}
	wait("job_3")
	// A few more refreshes re-read the records handled since the last
	// one: none may be handed over again.
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Poll = %v", err)
	}
	close(seen)
	for id := range seen {
		if id == "job_1" || id == "job_3" {
			t.Errorf("%s's record was handed over again after a refresh", id)
		}
	}
}

// streamFixture is a jobs table on moto with its stream, and a way to make
// jobs whose records the stream gets.
type streamFixture struct {
	api    *dynamodbstreams.Client
	arn    string
	create func(id string)
}

func newStreamFixture(t *testing.T) streamFixture {
	t.Helper()
	endpoint := mototest.Start(t)
	cfg := mototest.Config(endpoint)
	db := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	if err := dynamostore.CreateTables(ctx, db, "jobs", "accounts"); err != nil {
		t.Fatal(err)
	}
	arn, err := dynamostore.StreamARN(ctx, db, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	s := dynamostore.New(db, "jobs", "accounts")
	if _, err := s.Grant(ctx, "acct1", 1000, 1); err != nil {
		t.Fatal(err)
	}
	return streamFixture{api: dynamodbstreams.NewFromConfig(cfg), arn: arn, create: func(id string) {
		t.Helper()
		j := &jobs.Job{ID: id, Account: "acct1", Type: jobs.TypeSFX, Model: "m", Input: jobs.Input{Prompt: "p", Duration: 1}, Price: 1, Created: 10, Updated: 10}
		if _, err := s.Create(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
	}}
}

// jobIDs returns the job ids of the records' new images.
func jobIDs(recs []dynamostream.Record) []string {
	var ids []string
	for _, r := range recs {
		if c, ok := dynamostore.ChangeFromImages(dynamostream.ToDynamoDB(r.OldImage), dynamostream.ToDynamoDB(r.NewImage)); ok {
			ids = append(ids, c.JobID)
		}
	}
	return ids
}

// TestPollResumesFromCheckpoint: a reader stopped and started again with
// its checkpoint hands over the records made meanwhile, and none of those
// it handled before.
func TestPollResumesFromCheckpoint(t *testing.T) {
	fx := newStreamFixture(t)
	cp := dynamostream.FileCheckpoints{Path: filepath.Join(t.TempDir(), "stream.json")}
	p := dynamostream.Poller{Interval: 20 * time.Millisecond, Refresh: 100 * time.Millisecond, Checkpoints: cp}
	// run polls until want's ids were all handed over, then stops it; it
	// returns every id handed over.
	run := func(want ...string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var mu sync.Mutex
		var got []string
		err := p.Poll(ctx, fx.api, fx.arn, func(_ context.Context, recs []dynamostream.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, jobIDs(recs)...)
			for _, id := range want {
				if !slices.Contains(got, id) {
					return nil
				}
			}
			cancel()
			return nil
		})
		if err != nil || ctx.Err() == context.DeadlineExceeded {
			t.Fatalf("Poll = %v (ctx %v), handed over %v; want %v", err, ctx.Err(), got, want)
		}
		return got
	}
	for _, id := range []string{"job_1", "job_2", "job_3"} {
		fx.create(id)
	}
	if got := run("job_1", "job_2", "job_3"); len(got) != 3 {
		t.Errorf("first run handed over %v; want job_1, job_2, job_3 once each", got)
	}
	saved, err := cp.Load(context.Background(), fx.arn)
	if err != nil || len(saved) != 1 {
		t.Fatalf("checkpoint after the first run = %v, %v; want one shard's position", saved, err)
	}
	fx.create("job_4") // while no reader runs
	fx.create("job_5")
	if got := run("job_4", "job_5"); !slices.Equal(got, []string{"job_4", "job_5"}) {
		t.Errorf("second run handed over %v; want only job_4 and job_5 (made while it was stopped)", got)
	}
	if saved, _ := cp.Load(context.Background(), "arn:aws:dynamodb:us-east-1:123456789012:table/other/stream/x"); len(saved) != 0 {
		t.Errorf("checkpoint of another stream = %v; want none", saved)
	}
}

// catchUpKey marks the context of the catch-up reader's handler calls.
type catchUpKey struct{}

// TestPollCatchUpBesideLive: with a backlog whose handling is stuck, a new
// record is still handed over (by the live reader); a stop before the
// catch-up is done saves a checkpoint from which the backlog is read
// again.
func TestPollCatchUpBesideLive(t *testing.T) {
	fx := newStreamFixture(t)
	for _, id := range []string{"job_1", "job_2", "job_3"} {
		fx.create(id)
	}
	cp := dynamostream.FileCheckpoints{Path: filepath.Join(t.TempDir(), "stream.json")}
	p := dynamostream.Poller{Interval: 20 * time.Millisecond, Refresh: 100 * time.Millisecond, Checkpoints: cp,
		Background: func(ctx context.Context) context.Context { return context.WithValue(ctx, catchUpKey{}, true) }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stuck := make(chan struct{})
	live := make(chan string, 16)
	var stuckOnce sync.Once
	done := make(chan error, 1)
	go func() {
		done <- p.Poll(ctx, fx.api, fx.arn, func(ctx context.Context, recs []dynamostream.Record) error {
			if ctx.Value(catchUpKey{}) != nil {
				stuckOnce.Do(func() { close(stuck) })
				<-ctx.Done() // the backlog's handling never ends
				return ctx.Err()
			}
			for _, id := range jobIDs(recs) {
				live <- id
			}
			return nil
		})
	}()
	select {
	case <-stuck:
	case <-ctx.Done():
		t.Fatal("the catch-up reader never handed over the backlog")
	}
	fx.create("job_4")
	select {
	case id := <-live:
		if id != "job_4" {
			t.Errorf("the live reader handed over %s; want job_4 (the backlog is the catch-up reader's)", id)
		}
	case <-ctx.Done():
		t.Fatal("job_4 was not handed over while the backlog was stuck")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Poll = %v", err)
	}

	// The catch-up was not done: the next start reads the backlog again.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	var mu sync.Mutex
	var caught []string
	err := p.Poll(ctx2, fx.api, fx.arn, func(ctx context.Context, recs []dynamostream.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Value(catchUpKey{}) != nil {
			caught = append(caught, jobIDs(recs)...)
		}
		if slices.Contains(caught, "job_3") {
			cancel2()
		}
		return nil
	})
	if err != nil || ctx2.Err() == context.DeadlineExceeded {
		t.Fatalf("second Poll = %v (ctx %v), caught up %v", err, ctx2.Err(), caught)
	}
	if len(caught) < 3 || !slices.Equal(caught[:3], []string{"job_1", "job_2", "job_3"}) {
		t.Errorf("second start caught up %v; want the backlog job_1, job_2, job_3 first", caught)
	}
}
