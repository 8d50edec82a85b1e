package dynamostore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/mototest"
	"github.com/genway/genway/shared/storetest"
)

// TestReserveContract runs the reservations contract that localstore also
// meets, on one pair of tables (the subtests use fresh accounts), through
// mototest.Serialize: moto does not isolate concurrent transactions, and
// the contract checks that parallel reservations never overdraw.
func TestReserveContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	storetest.RunReservations(t, func(t *testing.T) storetest.ReserveBackend { return s })
}
