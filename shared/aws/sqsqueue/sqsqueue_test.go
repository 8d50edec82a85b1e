package sqsqueue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/genway/genway/shared/aws/mototest"
)

func TestDelaySeconds(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2},
		{15 * time.Minute, 900}, {time.Hour, 900},
	}
	for _, tt := range tests {
		if got := delaySeconds(tt.in); got != tt.want {
			t.Errorf("delaySeconds(%v) = %d; want %d", tt.in, got, tt.want)
		}
	}
}

// sendsAPI is an API that records the messages sent.
type sendsAPI struct {
	API
	sent []*sqs.SendMessageInput
}

func (a *sendsAPI) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	a.sent = append(a.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

// TestNotBefore: a message sent before NotBefore waits at least until it;
// after it, or without it, a message keeps its own delay.
func TestNotBefore(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tests := []struct {
		name      string
		notBefore time.Time
		delay     time.Duration
		want      int32
	}{
		{"no NotBefore", time.Time{}, 0, 0},
		{"3.2 s before it", now.Add(3200 * time.Millisecond), 0, 4},
		{"a longer delay of its own", now.Add(3 * time.Second), 10 * time.Second, 10},
		{"a shorter delay of its own", now.Add(3 * time.Second), time.Second, 3},
		{"after it", now.Add(-time.Second), 0, 0},
		{"after it, delayed", now.Add(-time.Second), 2 * time.Second, 2},
	}
	for _, tt := range tests {
		api := &sendsAPI{}
		q := New(api, "http://127.0.0.1:1/q")
		q.NotBefore, q.now = tt.notBefore, func() time.Time { return now }
		if err := q.EnqueueGroup(context.Background(), "job_1", "acct", tt.delay); err != nil {
			t.Fatal(err)
		}
		if err := q.SendWebhook(context.Background(), "job_1", tt.delay); err != nil {
			t.Fatal(err)
		}
		for _, in := range api.sent {
			if in.DelaySeconds != tt.want {
				t.Errorf("%s: DelaySeconds = %d; want %d", tt.name, in.DelaySeconds, tt.want)
			}
		}
	}
}

func TestJobID(t *testing.T) {
	tests := []struct {
		body, want string
		ok         bool
	}{
		{`{"job_id":"job_1"}`, "job_1", true},
		{`{"job_id":""}`, "", false},
		{`{}`, "", false},
		{`job_1`, "", false},
	}
	for _, tt := range tests {
		got, err := JobID(tt.body)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("JobID(%q) = %q, %v; want %q, ok %v", tt.body, got, err, tt.want, tt.ok)
		}
	}
}

func queueAttrs(t *testing.T, c *sqs.Client, url string) map[string]string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes = %v", err)
	}
	return out.Attributes
}

func TestQueue(t *testing.T) {
	endpoint := mototest.Start(t)
	client := sqs.NewFromConfig(mototest.Config(endpoint))
	ctx := context.Background()

	setup := func(t *testing.T, visibility int) *Queue {
		t.Helper()
		if err := mototest.Reset(endpoint); err != nil {
			t.Fatal(err)
		}
		url, err := CreateQueues(ctx, client, "jobs", "jobs-dlq", visibility)
		if err != nil {
			t.Fatalf("CreateQueues = %v", err)
		}
		q := New(client, url)
		q.WaitTime = time.Second
		return q
	}

	t.Run("create queues is idempotent", func(t *testing.T) {
		q := setup(t, 30)
		url, err := CreateQueues(ctx, client, "jobs", "jobs-dlq", 45)
		if err != nil || url != q.URL() {
			t.Fatalf("CreateQueues(again) = %q, %v; want %q", url, err, q.URL())
		}
		a := queueAttrs(t, client, url)
		if a["VisibilityTimeout"] != "45" {
			t.Errorf("VisibilityTimeout = %q; want 45", a["VisibilityTimeout"])
		}
		var rp struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(a["RedrivePolicy"]), &rp); err != nil {
			t.Fatalf("RedrivePolicy %q: %v", a["RedrivePolicy"], err)
		}
		if rp.DeadLetterTargetArn == "" || !(rp.MaxReceiveCount == "5" || rp.MaxReceiveCount == 5.0) {
			t.Errorf("RedrivePolicy = %+v; want the DLQ ARN and maxReceiveCount 5", rp)
		}
	})

	t.Run("enqueue poll delete", func(t *testing.T) {
		q := setup(t, 30)
		if err := q.Enqueue(ctx, "job_1", 0); err != nil {
			t.Fatalf("Enqueue = %v", err)
		}
		// A message group per account makes the standard queue a fair queue.
		if err := q.EnqueueGroup(ctx, "job_2", "acct_b", 0); err != nil {
			t.Fatalf("EnqueueGroup = %v", err)
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		seen := map[string]int{}
		err := q.Poll(pctx, 10, func(_ context.Context, msgs []Message) []string {
			for _, m := range msgs {
				id, err := JobID(m.Body)
				if err != nil {
					t.Errorf("JobID(%q) = %v", m.Body, err)
				}
				seen[id] = m.ReceiveCount
				if m.MessageID == "" || m.ReceiptHandle == "" || m.Attributes["SentTimestamp"] == "" {
					t.Errorf("message = %+v; want id, receipt handle and attributes", m)
				}
			}
			if len(seen) == 2 {
				cancel()
			}
			return nil
		})
		if err != nil || pctx.Err() == context.DeadlineExceeded {
			t.Fatalf("Poll = %v (ctx %v); want both messages", err, pctx.Err())
		}
		if seen["job_1"] != 1 || seen["job_2"] != 1 {
			t.Errorf("received %v; want job_1 and job_2 once each", seen)
		}
		a := queueAttrs(t, client, q.URL())
		if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
			t.Errorf("queue after Poll = %v visible, %v in flight; want 0, 0 (deleted)", a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"])
		}
	})

	t.Run("failed message is redelivered", func(t *testing.T) {
		q := setup(t, 1)
		if err := q.Enqueue(ctx, "job_1", 0); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var counts []int
		err := q.Poll(pctx, 1, func(_ context.Context, msgs []Message) []string {
			counts = append(counts, msgs[0].ReceiveCount)
			if len(counts) == 2 {
				cancel()
				return nil
			}
			return []string{msgs[0].MessageID}
		})
		if err != nil || len(counts) != 2 || counts[0] != 1 || counts[1] != 2 {
			t.Fatalf("Poll = %v; receive counts %v; want [1 2]", err, counts)
		}
	})

	t.Run("delay", func(t *testing.T) {
		q := setup(t, 30)
		if err := q.Enqueue(ctx, "job_late", 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := q.Enqueue(ctx, "job_soon", time.Second); err != nil {
			t.Fatal(err)
		}
		a := queueAttrs(t, client, q.URL())
		if a["ApproximateNumberOfMessagesDelayed"] != "2" {
			t.Errorf("ApproximateNumberOfMessagesDelayed = %q; want 2", a["ApproximateNumberOfMessagesDelayed"])
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var got []string
		err := q.Poll(pctx, 10, func(_ context.Context, msgs []Message) []string {
			for _, m := range msgs {
				id, _ := JobID(m.Body)
				got = append(got, id)
			}
			cancel()
			return nil
		})
		if err != nil || len(got) != 1 || got[0] != "job_soon" {
			t.Errorf("Poll = %v, got %q; want only job_soon (job_late is delayed 10 min)", err, got)
		}
		if a := queueAttrs(t, client, q.URL()); a["ApproximateNumberOfMessagesDelayed"] != "1" {
			t.Errorf("ApproximateNumberOfMessagesDelayed after poll = %q; want 1", a["ApproximateNumberOfMessagesDelayed"])
		}
	})
}

// TestLookupURL: a queue's URL when set wins, else its name is looked up
// (an unknown name is an error); Open is the Queue at that URL.
func TestLookupURL(t *testing.T) {
	endpoint := mototest.Start(t)
	cfg := mototest.Config(endpoint)
	client := sqs.NewFromConfig(cfg)
	ctx := context.Background()
	var urls []string
	for _, name := range []string{"genway-jobs", "genway-webhooks"} {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatalf("CreateQueue(%s) = %v", name, err)
		}
		urls = append(urls, aws.ToString(out.QueueUrl))
	}
	tests := []struct {
		name, url, queue string
		want             string
		ok               bool
	}{
		{"by name", "", "genway-jobs", urls[0], true},
		{"URL wins", "http://127.0.0.1:1/q", "nope", "http://127.0.0.1:1/q", true},
		{"unknown name", "", "nope", "", false},
		{"webhooks by name", "", "genway-webhooks", urls[1], true},
		{"webhooks URL wins", "http://127.0.0.1:1/w", "nope", "http://127.0.0.1:1/w", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookupURL(ctx, client, tt.url, tt.queue)
			if got != tt.want || (err == nil) != tt.ok {
				t.Errorf("LookupURL(%q, %q) = %q, %v; want %q, ok %v", tt.url, tt.queue, got, err, tt.want, tt.ok)
			}
			q, err := Open(ctx, cfg, tt.url, tt.queue)
			if (err == nil) != tt.ok || (err == nil && q.URL() != tt.want) {
				t.Errorf("Open(%q, %q) = %v, %v; want the queue at %q, ok %v", tt.url, tt.queue, q, err, tt.want, tt.ok)
			}
		})
	}
}
