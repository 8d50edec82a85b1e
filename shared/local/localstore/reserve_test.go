package localstore

import (
	"testing"

	"github.com/genway/genway/shared/storetest"
)

func TestReserveContract(t *testing.T) {
	storetest.RunReservations(t, func(t *testing.T) storetest.ReserveBackend { return openTemp(t) })
}

// TestReserveContractShared runs the reservations contract against one
// file for every subtest, as a shared DynamoDB table would be.
func TestReserveContractShared(t *testing.T) {
	s := openTemp(t)
	storetest.RunReservations(t, func(t *testing.T) storetest.ReserveBackend { return s })
}

func TestKeyLimits(t *testing.T) {
	storetest.RunKeyLimits(t, func(t *testing.T) storetest.ReserveBackend { return openTemp(t) })
}

// TestAmounts runs the exact amounts contract that dynamostore also
// meets.
func TestAmounts(t *testing.T) {
	storetest.RunAmounts(t, func(t *testing.T) storetest.ReserveBackend { return openTemp(t) })
}
