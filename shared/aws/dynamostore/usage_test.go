package dynamostore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/storetest"
)

// TestUsageContract runs the usage contract that localstore also meets, on
// one pair of tables (the subtests use fresh accounts), through
// mototest.Serialize: moto does not isolate concurrent writes.
func TestUsageContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	s := newRecordsStore(t, client)
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageBackend { return s })

	t.Run("Layout", func(t *testing.T) {
		ctx := context.Background()
		r := credits.Record{ID: "chatcmpl-layout", Kind: credits.KindChat, Account: "acct-layout", ModelAsked: "synthetic-chat", Model: "synthetic-chat",
			Tokens: credits.Tokens{Prompt: 3, Cached: 1, Completion: 4, Reasoning: 2}, Status: credits.StatusCompleted,
			At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()}
		if err := s.AddRecords(ctx, []credits.Record{r})[0]; err != nil {
			t.Fatalf("AddRecords = %v", err)
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
			Requests: 1, PromptTokens: 3, CompletionTokens: 4, CachedTokens: 1, ReasoningTokens: 2}
		if u != want {
			t.Errorf("usage item = %+v; want %+v", u, want)
		}
	})

	t.Run("JobUsageLayout", func(t *testing.T) {
		ctx := context.Background()
		if _, err := s.Grant(ctx, "acct-joblayout", 100, 1); err != nil {
			t.Fatalf("Grant = %v", err)
		}
		at := time.Date(2025, 3, 1, 23, 0, 0, 0, time.UTC).Unix()
		e := credits.Entry{ID: "job:job_video_layout", Account: "acct-joblayout", Kind: credits.Capture, Amount: 40,
			JobID: "job_video_layout", JobType: "video", Model: "veo-3.1", At: at}
		if err := s.Settle(ctx, e); err != nil {
			t.Fatalf("Settle = %v", err)
		}
		key := map[string]types.AttributeValue{"pk": str("acct#acct-joblayout"), "sk": str("jobusage#2025-03-01#video#veo-3.1")}
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("accounts"), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatalf("GetItem(%v) = %v", key, err)
		}
		var u jobUsageItem
		if err := unmarshalMap(out.Item, &u); err != nil {
			t.Fatalf("decode %v: %v", out.Item, err)
		}
		want := jobUsageItem{PK: "acct#acct-joblayout", SK: "jobusage#2025-03-01#video#veo-3.1", Day: "2025-03-01", JobType: "video", Model: "veo-3.1", Jobs: 1, Credits: 40}
		if u != want {
			t.Errorf("job usage item = %+v; want %+v", u, want)
		}
		// Reading is one Query of the account's partition, never a Scan.
		counted := &countingAPI{API: client}
		got, err := New(counted, "jobs", "accounts").JobUsage(ctx, "acct-joblayout", "2025-03-01", "2025-03-01")
		if err != nil || len(got) != 1 || got[0].Jobs != 1 {
			t.Errorf("JobUsage = %+v, %v; want the one job", got, err)
		}
		if counted.scans != 0 || counted.queries != 1 {
			t.Errorf("JobUsage made %d Scans and %d Queries; want 0 and 1", counted.scans, counted.queries)
		}
	})
}

// countingAPI counts the Scans and Queries made through it.
type countingAPI struct {
	API
	scans, queries int
}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.scans++
	return c.API.Scan(ctx, in, opts...)
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries++
	return c.API.Query(ctx, in, opts...)
}

// TestAddRecordCancellations checks how a priced record's transaction
// (record, usage row, account, ledger entry) reads the reasons DynamoDB
// gives (moto never reports TransactionConflict), and that each attempt
// carries its own client request token.
func TestAddRecordCancellations(t *testing.T) {
	conflict := canceled("TransactionConflict", "", "", "")
	tests := []struct {
		name    string
		results []error
		wantErr error // nil: success; errFake: any error
		calls   int
	}{
		{"success", []error{nil}, nil, 1},
		{"unknown account", []error{canceled("", "", "ConditionalCheckFailed", "")}, credits.ErrAccountNotFound, 1},
		{"record already written", []error{canceled("ConditionalCheckFailed", "", "", "")}, nil, 1},
		// The record is the marker of a record written: it wins over the
		// account check.
		{"record written and account check failed", []error{canceled("ConditionalCheckFailed", "", "ConditionalCheckFailed", "")}, nil, 1},
		{"usage past the maximum", []error{canceled("", "ConditionalCheckFailed", "", "")}, credits.ErrInvalidRecord, 1},
		{"conflict then record written", []error{conflict, canceled("ConditionalCheckFailed", "", "", "")}, nil, 2},
		{"conflict then success", []error{conflict, conflict, nil}, nil, 3},
		{"conflict every time", []error{conflict, conflict, conflict, conflict, conflict, conflict}, errFake, maxTxAttempts},
		{"other error", []error{errors.New("throttled")}, errFake, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{tx: tt.results}
			s := New(f, "jobs", "accounts")
			s.RecordsTable = "records"
			r := credits.Record{ID: "chatcmpl-1", Kind: credits.KindChat, Account: "acct1", ModelAsked: "priced-chat", Model: "priced-chat",
				Tokens: credits.Tokens{Prompt: 10, Completion: 20}, Cost: 2, Status: credits.StatusCompleted, At: time.Now().UnixMilli()}
			err := s.AddRecords(context.Background(), []credits.Record{r})[0]
			switch {
			case tt.wantErr == nil && err != nil,
				tt.wantErr == errFake && err == nil,
				tt.wantErr != nil && tt.wantErr != errFake && !errors.Is(err, tt.wantErr):
				t.Errorf("AddRecords = %v; want %v", err, tt.wantErr)
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

// newRecordsStore makes the jobs, accounts and records tables on client
// and returns a Store over them.
func newRecordsStore(t *testing.T, client *dynamodb.Client) *Store {
	t.Helper()
	ctx := context.Background()
	if err := CreateTables(ctx, client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	if err := CreateRecordsTable(ctx, client, "records"); err != nil {
		t.Fatalf("CreateRecordsTable = %v", err)
	}
	s := New(client, "jobs", "accounts")
	s.RecordsTable = "records"
	return s
}
