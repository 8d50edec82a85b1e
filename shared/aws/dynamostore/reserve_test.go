package dynamostore

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/storetest"
)

// TestReserveContract runs the reservations contract that localstore also
// meets, on one pair of tables (the subtests use fresh accounts), through
// mototest.Serialize: moto does not isolate concurrent transactions, and
// the contract checks that parallel reservations never overdraw.
func TestReserveContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	s := newRecordsStore(t, client)
	storetest.RunReservations(t, func(t *testing.T) storetest.ReserveBackend { return s })
}

// TestKeyLimits runs the key controls contract that localstore also
// meets: a key's credit limit is a condition on its id item in the same
// transaction as the account's hold, so 50 parallel creates against a
// limit of 10 hold exactly 10 (through mototest.Serialize, as above).
func TestKeyLimits(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	s := newRecordsStore(t, client)
	storetest.RunKeyLimits(t, func(t *testing.T) storetest.ReserveBackend { return s })
}

// TestAmounts runs the exact amounts contract that localstore also meets,
// on moto: every amount a decimal number of credits, every sum exact.
func TestAmounts(t *testing.T) {
	endpoint := mototest.Start(t)
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	s := newRecordsStore(t, client)
	storetest.RunAmounts(t, func(t *testing.T) storetest.ReserveBackend { return s })
}
