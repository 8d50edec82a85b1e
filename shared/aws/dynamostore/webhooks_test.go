package dynamostore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/storetest"
	"github.com/genway/genway/shared/webhooks"
)

// TestWebhookStore runs the webhooks.Store contract that localstore also
// meets, against moto.
func TestWebhookStore(t *testing.T) {
	endpoint := mototest.Start(t)
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	storetest.RunWebhooks(t, func(t *testing.T) webhooks.Store { return s })
}

// TestPendingDeliveries: the deliveries pending and due before a time,
// and nothing else of the accounts table.
func TestPendingDeliveries(t *testing.T) {
	endpoint := mototest.Start(t)
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	ctx := context.Background()
	if err := CreateTables(ctx, client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	if _, err := s.Grant(ctx, "acme", 10, 1); err != nil {
		t.Fatal(err)
	}
	add := func(job, status string, next int64) {
		t.Helper()
		d := &webhooks.Delivery{ID: webhooks.EventID(job), JobID: job, Account: "acme", URL: "https://example.com/h", Type: webhooks.TypeCompleted,
			Created: 50, Status: status, NextAt: next, Deadline: 10_000, Updated: 50}
		if _, err := s.AddDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	add("job_due", webhooks.Pending, 100)
	add("job_due2", webhooks.Pending, 150)
	add("job_later", webhooks.Pending, 500)
	add("job_done", webhooks.Delivered, 0)
	add("job_failed", webhooks.Failed, 0)
	got, err := s.PendingDeliveries(ctx, time.Unix(200, 0), 10)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"job_due", "job_due2"}) {
		t.Errorf("PendingDeliveries(200) = %v, %v; want job_due, job_due2", got, err)
	}
	if got, err := s.PendingDeliveries(ctx, time.Unix(200, 0), 1); err != nil || len(got) != 1 {
		t.Errorf("PendingDeliveries(200, limit 1) = %v, %v; want one", got, err)
	}
	if got, err := s.PendingDeliveries(ctx, time.Unix(50, 0), 10); err != nil || len(got) != 0 {
		t.Errorf("PendingDeliveries(50) = %v, %v; want none", got, err)
	}
}
