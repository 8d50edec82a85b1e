package dynamostore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/storetest"
)

// TestSessionStore runs the admin.SessionStore contract that localstore
// also meets, against moto.
func TestSessionStore(t *testing.T) {
	endpoint := mototest.Start(t)
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	storetest.RunSessions(t, func(t *testing.T) admin.SessionStore { return s })
}
