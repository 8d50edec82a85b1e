package dynamostore

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/mototest"
	"github.com/genway/genway/shared/storetest"
)

// TestUsageContract runs the usage contract that localstore also meets, on
// one pair of tables (the subtests use fresh accounts), through
// mototest.Serialize: moto does not isolate concurrent writes.
func TestUsageContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	s := New(client, "jobs", "accounts")
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageBackend { return s })

	t.Run("Layout", func(t *testing.T) {
		ctx := context.Background()
		if err := s.AddUsage(ctx, "", credits.Usage{Account: "acct-layout", Day: "2025-03-01", Model: "synthetic-chat", Requests: 2, PromptTokens: 3, CompletionTokens: 4}); err != nil {
			t.Fatalf("AddUsage = %v", err)
		}
		key := map[string]types.AttributeValue{"pk": str("acct#acct-layout"), "sk": str("usage#2025-03-01#synthetic-chat")}
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("accounts"), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatalf("GetItem(%v) = %v", key, err)
		}
		var u usageItem
		if err := unmarshalMap(out.Item, &u); err != nil {
			t.Fatalf("decode %v: %v", out.Item, err)
		}
		want := usageItem{PK: "acct#acct-layout", SK: "usage#2025-03-01#synthetic-chat", Day: "2025-03-01", Model: "synthetic-chat",
			Requests: 2, PromptTokens: 3, CompletionTokens: 4}
		if u != want {
			t.Errorf("usage item = %+v; want %+v", u, want)
		}
	})
}

// TestAddUsageCancellations checks how a priced AddUsage reads the reasons
// DynamoDB gives (moto never reports TransactionConflict), and that each
// attempt carries its own client request token.
func TestAddUsageCancellations(t *testing.T) {
	conflict := canceled("TransactionConflict", "", "")
	tests := []struct {
		name    string
		results []error
		wantErr error // nil: success; errFake: any error
		calls   int
	}{
		{"success", []error{nil}, nil, 1},
		{"unknown account", []error{canceled("", "ConditionalCheckFailed", "")}, credits.ErrAccountNotFound, 1},
		{"ledger entry already written", []error{canceled("", "", "ConditionalCheckFailed")}, nil, 1},
		// The entry is the marker of an applied id: it wins over the
		// account check.
		{"entry written and account check failed", []error{canceled("", "ConditionalCheckFailed", "ConditionalCheckFailed")}, nil, 1},
		{"conflict then entry written", []error{conflict, canceled("", "", "ConditionalCheckFailed")}, nil, 2},
		{"conflict then success", []error{conflict, conflict, nil}, nil, 3},
		{"conflict every time", []error{conflict, conflict, conflict, conflict, conflict, conflict}, errFake, maxTxAttempts},
		{"other error", []error{errors.New("throttled")}, errFake, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{tx: tt.results}
			err := New(f, "jobs", "accounts").AddUsage(context.Background(), "id1",
				credits.Usage{Account: "acct1", Day: "2025-03-01", Model: "priced-chat", Requests: 1, PromptTokens: 10, CompletionTokens: 20, Credits: 2})
			switch {
			case tt.wantErr == nil && err != nil,
				tt.wantErr == errFake && err == nil,
				tt.wantErr != nil && tt.wantErr != errFake && !errors.Is(err, tt.wantErr):
				t.Errorf("AddUsage = %v; want %v", err, tt.wantErr)
			}
			if len(f.tokens) != tt.calls {
				t.Fatalf("TransactWriteItems calls = %d; want %d", len(f.tokens), tt.calls)
			}
			seen := map[string]bool{}
			for _, tok := range f.tokens {
				if tok == "" || len(tok) > 36 || seen[tok] {
					t.Errorf("ClientRequestTokens = %q; want distinct, 1-36 characters", f.tokens)
					break
				}
				seen[tok] = true
			}
		})
	}
}
