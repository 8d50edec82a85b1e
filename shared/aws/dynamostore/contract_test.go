package dynamostore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/storetest"
)

// TestContract runs the store contract that localstore also meets. The
// contract's subtests use fresh accounts and job ids, so they share one pair
// of tables. Requests go through mototest.Serialize: moto does not isolate
// concurrent transactions, and ConcurrentHolds checks that DynamoDB does.
func TestContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	storetest.Run(t, func(t *testing.T) storetest.Backend { return s })
}
