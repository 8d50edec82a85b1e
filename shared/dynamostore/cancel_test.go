package dynamostore

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// fakeDB answers TransactWriteItems and GetItem with canned results and
// records each transaction's client request token; other calls fail. It
// reproduces DynamoDB behaviour moto lacks (TransactionConflict) and checks
// how cancellation reasons are read.
type fakeDB struct {
	tx     []error // TransactWriteItems results, in order; nil = success
	calls  int
	tokens []string                        // ClientRequestToken of each TransactWriteItems
	item   map[string]types.AttributeValue // what GetItem returns
}

var errFake = errors.New("fakeDB: unexpected call")

func (f *fakeDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.calls++
	f.tokens = append(f.tokens, aws.ToString(in.ClientRequestToken))
	if f.calls > len(f.tx) {
		return nil, errFake
	}
	return &dynamodb.TransactWriteItemsOutput{}, f.tx[f.calls-1]
}

func (f *fakeDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: f.item}, nil
}

func (f *fakeDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errFake
}

func (f *fakeDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errFake
}

func (f *fakeDB) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, errFake
}

func (f *fakeDB) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errFake
}

func (f *fakeDB) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return nil, errFake
}

// canceled returns a TransactionCanceledException with the given codes
// ("" for None).
func canceled(codes ...string) error {
	e := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
	for _, c := range codes {
		if c == "" {
			c = "None"
		}
		e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return e
}

const ccf, conflict = "ConditionalCheckFailed", "TransactionConflict"

func TestCreateCancellation(t *testing.T) {
	idemItem := map[string]types.AttributeValue{"id": str("idem#a/k"), "body_hash": str("h1"), "job_id": str("job_old"), "expires": num(9999)}
	oldJob := map[string]types.AttributeValue{"id": str("job_old"), "account": str("a"), "status": str("queued"), "price": num(3)}
	tests := []struct {
		name    string
		tx      []error
		item    map[string]types.AttributeValue
		hash    string
		wantID  string
		wantErr error
		calls   int
	}{
		{"ok", []error{nil}, nil, "h1", "job_new", nil, 1},
		{"conflict then ok", []error{canceled("", "", conflict), canceled(conflict, "", ""), nil}, nil, "h1", "job_new", nil, 3},
		{"conflict every time", []error{canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict)}, nil, "h1", "", errors.New("any"), maxTxAttempts},
		{"short credits", []error{canceled("", "", ccf)}, nil, "h1", "", jobs.ErrInsufficientCredits, 1},
		{"replay beats short credits", []error{canceled(ccf, "", ccf)}, idemItem, "h1", "job_old", nil, 1},
		{"idempotency conflict", []error{canceled(ccf, "", "")}, idemItem, "h2", "", jobs.ErrIdempotencyConflict, 1},
		{"key vanished", []error{canceled(ccf, "", "")}, nil, "h1", "", jobs.ErrConflict, 1},
		{"other error", []error{errors.New("boom")}, nil, "h1", "", errors.New("any"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{tx: tt.tx, item: tt.item}
			s := New(f, "jobs", "accounts")
			if tt.wantID == "job_old" {
				// The replay reads the idempotency item, then the job.
				f.item = tt.item
				s = New(&replayDB{fakeDB: f, job: oldJob}, "jobs", "accounts")
			}
			got, err := s.Create(context.Background(), newJob("job_new", "a", 3), &jobs.Idempotency{Key: "a/k", BodyHash: tt.hash, Expires: 9999})
			switch {
			case tt.wantErr == nil && (err != nil || got.ID != tt.wantID):
				t.Errorf("Create = %+v, %v; want %s", got, err, tt.wantID)
			case tt.wantErr != nil && err == nil:
				t.Errorf("Create = %+v, nil; want an error", got)
			case tt.wantErr != nil && tt.wantErr.Error() != "any" && !errors.Is(err, tt.wantErr):
				t.Errorf("Create = %v; want %v", err, tt.wantErr)
			}
			if f.calls != tt.calls {
				t.Errorf("TransactWriteItems calls = %d; want %d", f.calls, tt.calls)
			}
		})
	}
}

// replayDB serves the idempotency item, then the job it points at.
type replayDB struct {
	*fakeDB
	job map[string]types.AttributeValue
}

func (r *replayDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if id, _ := in.Key["id"].(*types.AttributeValueMemberS); id != nil && id.Value == "job_old" {
		return &dynamodb.GetItemOutput{Item: r.job}, nil
	}
	return &dynamodb.GetItemOutput{Item: r.item}, nil
}

func TestSettleCancellation(t *testing.T) {
	tests := []struct {
		name    string
		tx      []error
		wantErr error
	}{
		{"ok", []error{nil}, nil},
		{"already settled", []error{canceled(ccf, "")}, credits.ErrAlreadySettled},
		{"no account", []error{canceled("", ccf)}, credits.ErrAccountNotFound},
		{"conflict then settled", []error{canceled("", conflict), canceled(ccf, "")}, credits.ErrAlreadySettled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(&fakeDB{tx: tt.tx}, "jobs", "accounts")
			err := s.Settle(context.Background(), credits.Entry{ID: "job:j", Account: "a", Kind: credits.Capture, Amount: 1, JobID: "j"})
			if (tt.wantErr == nil && err != nil) || !errors.Is(err, tt.wantErr) {
				t.Errorf("Settle = %v; want %v", err, tt.wantErr)
			}
		})
	}
}
