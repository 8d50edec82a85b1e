package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// indexed returns the ids QueuedIndex holds, reading every shard.
func indexed(t *testing.T, client *dynamodb.Client) []string {
	t.Helper()
	var ids []string
	for n := 0; n < QueuedShards; n++ {
		out, err := client.Query(context.Background(), &dynamodb.QueryInput{
			TableName:                 aws.String("jobs"),
			IndexName:                 aws.String(QueuedIndex),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": QueuedShardAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(fmt.Sprintf("queued#%d", n))},
		})
		if err != nil {
			t.Fatalf("Query(index %s) = %v", QueuedIndex, err)
		}
		for _, it := range out.Items {
			ids = append(ids, stringAttr(it, "id"))
		}
	}
	sort.Strings(ids)
	return ids
}

func TestQueuedShard(t *testing.T) {
	seen := map[string]int{}
	for i := 0; i < 1600; i++ {
		id, err := jobs.NewID(jobs.TypeMusic)
		if err != nil {
			t.Fatal(err)
		}
		s := queuedShard(id)
		if s != queuedShard(id) {
			t.Fatalf("queuedShard(%q) is not stable", id)
		}
		seen[s]++
	}
	if len(seen) != QueuedShards {
		t.Errorf("1600 ids fall in %d shards; want all %d: %v", len(seen), QueuedShards, seen)
	}
	for s, n := range seen {
		if !strings.HasPrefix(s, "queued#") || n < 40 { // expected 100 each
			t.Errorf("shard %s holds %d of 1600 ids; want a spread near 100", s, n)
		}
	}
}

func TestQueuedIndex(t *testing.T) {
	endpoint := mototest.Start(t)
	ctx := context.Background()

	t.Run("holds a job only while queued", func(t *testing.T) {
		tests := []struct {
			name  string
			moves [][2]jobs.Status
		}{
			{"queued to processing", [][2]jobs.Status{{jobs.Queued, jobs.Processing}}},
			{"queued to failed", [][2]jobs.Status{{jobs.Queued, jobs.Failed}}},
			{"processing to completed", [][2]jobs.Status{{jobs.Queued, jobs.Processing}, {jobs.Processing, jobs.Completed}}},
			{"processing taken over, then failed", [][2]jobs.Status{{jobs.Queued, jobs.Processing}, {jobs.Processing, jobs.Processing}, {jobs.Processing, jobs.Failed}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, client := newStore(t, endpoint)
				if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{"job_a", "job_b"} {
					if _, err := s.Create(ctx, newJob(id, "acct1", 1), nil); err != nil {
						t.Fatal(err)
					}
				}
				if got := indexed(t, client); strings.Join(got, ",") != "job_a,job_b" {
					t.Fatalf("index after Create = %v; want [job_a job_b]", got)
				}
				for _, m := range tt.moves {
					if _, err := s.Transition(ctx, "job_a", m[0], m[1], jobs.Patch{Updated: 1001}); err != nil {
						t.Fatalf("Transition(%s -> %s) = %v", m[0], m[1], err)
					}
					if got := indexed(t, client); strings.Join(got, ",") != "job_b" {
						t.Errorf("index after %s -> %s = %v; want [job_b]", m[0], m[1], got)
					}
				}
				// A refused transition out of queued leaves the index as it was.
				if _, err := s.Transition(ctx, "job_a", jobs.Queued, jobs.Processing, jobs.Patch{}); !errors.Is(err, jobs.ErrConflict) {
					t.Errorf("Transition(stale queued) = %v; want ErrConflict", err)
				}
				if got, err := s.QueuedBefore(ctx, time.Unix(2000, 0), 10); err != nil || strings.Join(got, ",") != "job_b" {
					t.Errorf("QueuedBefore(2000) = %v, %v; want [job_b]", got, err)
				}
				j, err := s.Get(ctx, "job_b")
				if err != nil || j.Status != jobs.Queued || j.Created != 1000 {
					t.Errorf("Get(job_b) = %+v, %v; want the queued job (index attributes do not leak)", j, err)
				}
			})
		}
	})

	t.Run("holds a processing job while its next run is due", func(t *testing.T) {
		s, client := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, newJob("job_a", "acct1", 1), nil); err != nil {
			t.Fatal(err)
		}
		// A long-running job waits for its next poll at 1300.
		if _, err := s.Transition(ctx, "job_a", jobs.Queued, jobs.Processing, jobs.Patch{Updated: 1001, NextRun: 1300}); err != nil {
			t.Fatal(err)
		}
		if got := indexed(t, client); strings.Join(got, ",") != "job_a" {
			t.Fatalf("index while waiting for a poll = %v; want [job_a]", got)
		}
		for _, tt := range []struct {
			before int64
			want   string
		}{{1300, ""}, {1301, "job_a"}} {
			if got, err := s.QueuedBefore(ctx, time.Unix(tt.before, 0), 10); err != nil || strings.Join(got, ",") != tt.want {
				t.Errorf("QueuedBefore(%d) = %v, %v; want [%s]", tt.before, got, err, tt.want)
			}
		}
		// The sweeper re-sends an overdue poll: the job is marked, not failed.
		if n, err := s.MarkSwept(ctx, "job_a", time.Unix(1500, 0)); err != nil || n != 1 {
			t.Errorf("MarkSwept(processing) = %d, %v; want 1", n, err)
		}
		if _, err := s.Transition(ctx, "job_a", jobs.Processing, jobs.Completed, jobs.Patch{Updated: 1600}); err != nil {
			t.Fatal(err)
		}
		if got := indexed(t, client); len(got) != 0 {
			t.Errorf("index after completion = %v; want empty", got)
		}
		if _, err := s.MarkSwept(ctx, "job_a", time.Unix(1700, 0)); !errors.Is(err, jobs.ErrConflict) {
			t.Errorf("MarkSwept(completed) = %v; want ErrConflict", err)
		}
	})

	t.Run("queued before pages and filters by time", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		s.queryPage = 2
		if _, err := s.Grant(ctx, "acct1", 1000, 1); err != nil {
			t.Fatal(err)
		}
		// 40 jobs created at 1000..1039: more than QueuedShards, so some
		// shards hold several and the 2-item pages must be followed.
		for i := 0; i < 40; i++ {
			j := newJob(fmt.Sprintf("job_%02d", i), "acct1", 1)
			j.Created = int64(1000 + i)
			if _, err := s.Create(ctx, j, nil); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			before int64
			limit  int
			want   int
		}{
			{1000, 100, 0}, {1001, 100, 1}, {1020, 100, 20}, {1040, 100, 40}, {9999, 100, 40},
			{9999, 7, 7}, {9999, 1, 1}, {1020, 25, 20}, {9999, 0, 0},
		}
		for _, tt := range tests {
			got, err := s.QueuedBefore(ctx, time.Unix(tt.before, 0), tt.limit)
			if err != nil || len(got) != tt.want {
				t.Errorf("QueuedBefore(%d, %d) = %d ids, %v; want %d", tt.before, tt.limit, len(got), err, tt.want)
			}
			seen := map[string]bool{}
			for _, id := range got {
				var n int
				fmt.Sscanf(id, "job_%d", &n)
				if seen[id] || int64(1000+n) >= tt.before {
					t.Errorf("QueuedBefore(%d, %d) returned %s (created %d, duplicate %v)", tt.before, tt.limit, id, 1000+n, seen[id])
				}
				seen[id] = true
			}
		}
	})

	t.Run("mark swept", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"job_q", "job_p"} {
			if _, err := s.Create(ctx, newJob(id, "acct1", 1), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Transition(ctx, "job_p", jobs.Queued, jobs.Processing, jobs.Patch{}); err != nil {
			t.Fatal(err)
		}
		for want := 1; want <= 3; want++ {
			if n, err := s.MarkSwept(ctx, "job_q", time.Unix(int64(1500+want), 0)); n != want || err != nil {
				t.Errorf("MarkSwept(job_q) = %d, %v; want %d", n, err, want)
			}
		}
		// queued_at moved on: listed only for a later t.
		if got, _ := s.QueuedBefore(ctx, time.Unix(1503, 0), 10); len(got) != 0 {
			t.Errorf("QueuedBefore(1503) after a sweep at 1503 = %v; want none", got)
		}
		if got, _ := s.QueuedBefore(ctx, time.Unix(1504, 0), 10); strings.Join(got, ",") != "job_q" {
			t.Errorf("QueuedBefore(1504) = %v; want [job_q]", got)
		}
		if _, err := s.MarkSwept(ctx, "job_p", time.Unix(1600, 0)); !errors.Is(err, jobs.ErrConflict) {
			t.Errorf("MarkSwept(processing job) = %v; want ErrConflict", err)
		}
		if _, err := s.MarkSwept(ctx, "job_nope", time.Unix(1600, 0)); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("MarkSwept(missing job) = %v; want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, "job_nope"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(job_nope) after MarkSwept = %v; want ErrNotFound (nothing written)", err)
		}
		if j, err := s.Get(ctx, "job_q"); err != nil || j.Status != jobs.Queued {
			t.Errorf("Get(job_q) = %+v, %v; want it queued", j, err)
		}
	})

	t.Run("sweep gives up once and the hold is released once", func(t *testing.T) {
		s, client := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
			t.Fatal(err)
		}
		// Stored with its hold, as Create does before enqueueing; the
		// message was never sent.
		if _, err := s.Create(ctx, newJob("job_lost", "acct1", 30), nil); err != nil {
			t.Fatal(err)
		}
		before := rawJob(t, client, "job_lost")
		q := &countQueue{}
		now := time.Unix(1000, 0)
		svc := &jobs.Service{Store: s, Queue: q, Sweeps: s, MaxSweeps: 2, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now: func() time.Time { return now }}
		var total jobs.SweepResult
		for run := 0; run < 6; run++ {
			now = now.Add(5 * time.Minute)
			res, err := svc.Sweep(ctx, 2*time.Minute)
			if err != nil {
				t.Fatalf("Sweep run %d = %+v, %v", run+1, res, err)
			}
			total.Requeued += res.Requeued
			total.Failed += res.Failed
		}
		if total.Requeued != 2 || total.Failed != 1 || q.n != 2 {
			t.Errorf("6 sweeps: requeued %d, failed %d, sent %d; want 2, 1, 2", total.Requeued, total.Failed, q.n)
		}
		j, err := s.Get(ctx, "job_lost")
		if err != nil || j.Status != jobs.Failed || j.Error == nil || j.Error.Code != jobs.CodeInternal {
			t.Fatalf("Get(job_lost) = %+v, %v; want failed, %s", j, err, jobs.CodeInternal)
		}
		after := rawJob(t, client, "job_lost")
		if _, ok := after[QueuedShardAttribute]; ok {
			t.Errorf("failed job still has %s", QueuedShardAttribute)
		}
		// The credits function's path: the stream record's images, then
		// Apply; a redelivered record changes nothing.
		c, ok := ChangeFromImages(before, after)
		if !ok || c.NewStatus != string(jobs.Failed) || c.Price != 30 {
			t.Fatalf("ChangeFromImages = %+v, %v; want queued -> failed, price 30", c, ok)
		}
		for i := 0; i < 2; i++ {
			if err := credits.Apply(ctx, s, c); err != nil {
				t.Fatalf("Apply(delivery %d) = %v", i+1, err)
			}
		}
		a, _ := s.Account(ctx, "acct1")
		l, _ := s.Ledger(ctx, "acct1")
		if a.Balance != 100 || a.Held != 0 || a.Available != 100 || len(l) != 2 || l[1].Kind != credits.Release {
			t.Errorf("account %+v, ledger %+v; want balance 100 nothing held, one release", a, l)
		}
	})

	t.Run("create tables adds the index to an old jobs table", func(t *testing.T) {
		if err := mototest.Reset(endpoint); err != nil {
			t.Fatal(err)
		}
		client := dynamodb.NewFromConfig(mototest.Config(endpoint))
		_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String("jobs"),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ { // idempotent
			if err := CreateTables(ctx, client, "jobs", "accounts"); err != nil {
				t.Fatalf("CreateTables(run %d) = %v", i+1, err)
			}
		}
		d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("jobs")})
		if err != nil {
			t.Fatal(err)
		}
		projections := map[string]types.ProjectionType{}
		for _, g := range d.Table.GlobalSecondaryIndexes {
			projections[aws.ToString(g.IndexName)] = g.Projection.ProjectionType
		}
		if len(projections) != 2 || projections[QueuedIndex] != types.ProjectionTypeKeysOnly || projections[AccountIndex] != types.ProjectionTypeInclude {
			t.Errorf("jobs table indexes = %v; want %s KEYS_ONLY and %s INCLUDE", projections, QueuedIndex, AccountIndex)
		}
		s := New(client, "jobs", "accounts")
		if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, newJob("job_1", "acct1", 1), nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.QueuedBefore(ctx, time.Unix(2000, 0), 10); err != nil || strings.Join(got, ",") != "job_1" {
			t.Errorf("QueuedBefore = %v, %v; want [job_1]", got, err)
		}
	})
}

// rawJob returns job id's item as stored.
func rawJob(t *testing.T, client *dynamodb.Client, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("jobs"), Key: map[string]types.AttributeValue{"id": str(id)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("GetItem(%s) = %v, %v", id, out, err)
	}
	return out.Item
}

// countQueue counts Enqueue calls.
type countQueue struct{ n int }

func (q *countQueue) EnqueueGroup(ctx context.Context, id, _ string, delay time.Duration) error {
	return q.Enqueue(ctx, id, delay)
}

func (q *countQueue) Enqueue(context.Context, string, time.Duration) error {
	q.n++
	return nil
}
