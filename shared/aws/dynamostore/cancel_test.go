package dynamostore

import (
	"context"
	"errors"
	"strings"
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

// TestTransact checks the one retry loop of the store's transactions:
// refused settles a cancellation before any retry, a conflict is retried up
// to maxTxAttempts attempts, each attempt has its own token, and every
// error but refused's is wrapped with what.
func TestTransact(t *testing.T) {
	errRefused := errors.New("refused")
	boom := errors.New("boom")
	// refuse0 settles a failed condition of item 0: with errRefused, or
	// as applied (nil) when applied is set.
	refuse0 := func(applied bool) func([]types.CancellationReason) (bool, error) {
		return func(reasons []types.CancellationReason) (bool, error) {
			if !failed(reasons, 0) {
				return false, nil
			}
			if applied {
				return true, nil
			}
			return true, errRefused
		}
	}
	canceledCtx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		tx      []error
		refused func([]types.CancellationReason) (bool, error)
		wantErr error // nil: success; errRefused: exactly that; else wrapped with "op x: "
		calls   int
	}{
		{"success", nil, []error{nil}, nil, nil, 1},
		{"refused", nil, []error{canceled(ccf, "")}, refuse0(false), errRefused, 1},
		{"applied before", nil, []error{canceled(ccf, "")}, refuse0(true), nil, 1},
		{"refused beats conflict", nil, []error{canceled(ccf, conflict)}, refuse0(false), errRefused, 1},
		{"conflict then success", nil, []error{canceled("", conflict), canceled(conflict, ""), nil}, refuse0(false), nil, 3},
		{"conflict then refused", nil, []error{canceled("", conflict), canceled(ccf, "")}, refuse0(false), errRefused, 2},
		{"conflict with no refused", nil, []error{canceled(conflict), nil}, nil, nil, 2},
		{"conflict every time", nil, []error{canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict), canceled(conflict)}, nil, &types.TransactionCanceledException{}, maxTxAttempts},
		{"condition refused does not map", nil, []error{canceled("", ccf)}, refuse0(false), &types.TransactionCanceledException{}, 1},
		{"other error", nil, []error{boom}, refuse0(false), boom, 1},
		{"context ends during backoff", canceledCtx, []error{canceled(conflict), nil}, nil, context.Canceled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			f := &fakeDB{tx: tt.tx}
			err := New(f, "jobs", "accounts").transact(ctx, "op x", nil, tt.refused)
			var tce *types.TransactionCanceledException
			switch want := tt.wantErr; {
			case want == nil:
				if err != nil {
					t.Errorf("transact = %v; want nil", err)
				}
			case want == errRefused:
				if err != errRefused {
					t.Errorf("transact = %v; want %v as is", err, errRefused)
				}
			case err == nil || !strings.HasPrefix(err.Error(), "op x: "):
				t.Errorf("transact = %v; want an error starting with %q", err, "op x: ")
			case errors.As(want, &tce):
				if !errors.As(err, &tce) {
					t.Errorf("transact = %v; want a wrapped cancellation", err)
				}
			case !errors.Is(err, want):
				t.Errorf("transact = %v; want it to wrap %v", err, want)
			}
			if f.calls != tt.calls {
				t.Errorf("TransactWriteItems calls = %d; want %d", f.calls, tt.calls)
			}
			seen := map[string]bool{}
			for _, tok := range f.tokens {
				if tok == "" || seen[tok] {
					t.Errorf("ClientRequestTokens = %q; want distinct and set", f.tokens)
					break
				}
				seen[tok] = true
			}
		})
	}
}
