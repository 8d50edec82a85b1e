package dynamostore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/mototest"
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
