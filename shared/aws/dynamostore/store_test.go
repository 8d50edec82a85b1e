package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// newStore resets the moto server at endpoint and returns a Store on fresh
// tables.
func newStore(t testing.TB, endpoint string) (*Store, *dynamodb.Client) {
	t.Helper()
	if err := mototest.Reset(endpoint); err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	if err := CreateTables(context.Background(), client, "jobs", "accounts"); err != nil {
		t.Fatalf("CreateTables = %v", err)
	}
	return New(client, "jobs", "accounts"), client
}

func newJob(id, account string, price credits.Amount) *jobs.Job {
	return &jobs.Job{
		ID: id, Account: account, Type: jobs.TypeMusic, Model: "m", Status: jobs.Queued,
		Input: jobs.Input{Prompt: "p", Duration: 10}, Price: price, Created: 1000, Updated: 1000,
	}
}

func TestStore(t *testing.T) {
	endpoint := mototest.Start(t)
	ctx := context.Background()

	t.Run("create get transition", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
			t.Fatal(err)
		}
		j := newJob("job_1", "acct1", 30)
		j.Input.Format = "mp3"
		if _, err := s.Create(ctx, j, nil); err != nil {
			t.Fatalf("Create = %v; want nil", err)
		}
		got, err := s.Get(ctx, "job_1")
		if err != nil || got.Status != jobs.Queued || got.Input != j.Input || got.Price != 30 {
			t.Fatalf("Get(%q) = %+v, %v; want the queued job", "job_1", got, err)
		}
		a, _ := s.Account(ctx, "acct1")
		if want := (credits.Account{ID: "acct1", Balance: 100, Held: 30, Available: 70, Created: 1}); a != want {
			t.Errorf("Account after Create = %+v; want %+v", a, want)
		}
		got, err = s.Transition(ctx, "job_1", jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: 1001})
		if err != nil || got.Status != jobs.Processing || got.Attempts != 1 || got.Updated != 1001 {
			t.Fatalf("Transition(queued->processing) = %+v, %v; want processing, 1 attempt", got, err)
		}
		out := &jobs.Output{Key: "k.mp3", ContentType: "audio/mpeg", Bytes: 3, Duration: 10}
		got, err = s.Transition(ctx, "job_1", jobs.Processing, jobs.Completed, jobs.Patch{Output: out, Updated: 1002})
		if err != nil || got.Status != jobs.Completed || got.Output == nil || *got.Output != *out || got.Attempts != 1 {
			t.Fatalf("Transition(processing->completed) = %+v, %v; want completed with output", got, err)
		}
		_, err = s.Transition(ctx, "job_1", jobs.Processing, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: "x"}})
		if !errors.Is(err, jobs.ErrConflict) {
			t.Errorf("Transition(stale from) = %v; want ErrConflict", err)
		}
		_, err = s.Transition(ctx, "job_nope", jobs.Queued, jobs.Processing, jobs.Patch{})
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Transition(missing) = %v; want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, "job_nope"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(missing) = %v; want ErrNotFound", err)
		}
	})

	t.Run("insufficient credits", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Create(ctx, newJob("job_a", "nobody", 1), nil); !errors.Is(err, jobs.ErrInsufficientCredits) {
			t.Errorf("Create(no account) = %v; want ErrInsufficientCredits", err)
		}
		if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, newJob("job_b", "acct1", 11), nil); !errors.Is(err, jobs.ErrInsufficientCredits) {
			t.Errorf("Create(price 11, available 10) = %v; want ErrInsufficientCredits", err)
		}
		if _, err := s.Get(ctx, "job_b"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(refused job) = %v; want ErrNotFound", err)
		}
		if _, err := s.Create(ctx, newJob("job_c", "acct1", 10), nil); err != nil {
			t.Errorf("Create(price 10, available 10) = %v; want nil", err)
		}
	})

	t.Run("idempotency", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
			t.Fatal(err)
		}
		idem := func(hash string, expires int64) *jobs.Idempotency {
			return &jobs.Idempotency{Key: "acct1/k", BodyHash: hash, Expires: expires}
		}
		first, err := s.Create(ctx, newJob("job_1", "acct1", 10), idem("h1", 2000))
		if err != nil {
			t.Fatal(err)
		}
		// Available is now 0: a replay must still return the job, not 402.
		got, err := s.Create(ctx, newJob("job_2", "acct1", 10), idem("h1", 2000))
		if err != nil || got.ID != first.ID {
			t.Errorf("Create(replay) = %v, %v; want job_1", got, err)
		}
		if _, err := s.Create(ctx, newJob("job_3", "acct1", 0), idem("h2", 2000)); !errors.Is(err, jobs.ErrIdempotencyConflict) {
			t.Errorf("Create(same key, other body) = %v; want ErrIdempotencyConflict", err)
		}
		if _, err := s.Get(ctx, "job_2"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(replayed id) = %v; want ErrNotFound", err)
		}
		// Past expiry the key is free again.
		late := newJob("job_4", "acct1", 0)
		late.Created = 2000
		if got, err := s.Create(ctx, late, idem("h2", 3000)); err != nil || got.ID != "job_4" {
			t.Errorf("Create(expired key) = %v, %v; want job_4", got, err)
		}
		if _, err := s.Get(ctx, "idem#acct1/k"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(idempotency item id) = %v; want ErrNotFound", err)
		}
	})

	t.Run("settle", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"job_c", "job_r"} {
			if _, err := s.Create(ctx, newJob(id, "acct1", 20), nil); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			e    credits.Entry
			err  error
			want credits.Account
		}{
			{credits.Entry{ID: "job:job_c", Account: "acct1", Kind: credits.Capture, Amount: 20, JobID: "job_c", At: 5}, nil, credits.Account{Balance: 80, Held: 20, Available: 60}},
			{credits.Entry{ID: "job:job_c", Account: "acct1", Kind: credits.Capture, Amount: 20, JobID: "job_c", At: 6}, credits.ErrAlreadySettled, credits.Account{Balance: 80, Held: 20, Available: 60}},
			{credits.Entry{ID: "job:job_r", Account: "acct1", Kind: credits.Release, Amount: 20, JobID: "job_r", At: 7}, nil, credits.Account{Balance: 80, Held: 0, Available: 80}},
			{credits.Entry{ID: "job:job_r", Account: "acct1", Kind: credits.Capture, Amount: 20, JobID: "job_r", At: 8}, credits.ErrAlreadySettled, credits.Account{Balance: 80, Held: 0, Available: 80}},
			{credits.Entry{ID: "job:job_x", Account: "ghost", Kind: credits.Release, Amount: 1, At: 9}, credits.ErrAccountNotFound, credits.Account{Balance: 80, Held: 0, Available: 80}},
		}
		for _, tt := range tests {
			err := s.Settle(ctx, tt.e)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Errorf("Settle(%+v) = %v; want %v", tt.e, err, tt.err)
			}
			a, _ := s.Account(ctx, "acct1")
			if a.Balance != tt.want.Balance || a.Held != tt.want.Held || a.Available != tt.want.Available {
				t.Errorf("Account after Settle(%+v) = %+v; want %+v", tt.e, a, tt.want)
			}
		}
		l, err := s.Ledger(ctx, "acct1")
		if err != nil || len(l) != 3 || l[0].Kind != credits.Grant || l[1].ID != "job:job_c" || l[2].ID != "job:job_r" {
			t.Errorf("Ledger = %+v, %v; want grant, capture job_c, release job_r", l, err)
		}
	})

	t.Run("keys", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		k1, _ := auth.NewKey()
		k2, _ := auth.NewKey()
		r1 := auth.NewRecord(k1, "acct1", time.Unix(10, 0))
		r2 := auth.NewRecord(k2, "acct2", time.Unix(20, 0))
		for _, r := range []auth.Record{r1, r2} {
			if err := s.PutKey(ctx, r); err != nil {
				t.Fatalf("PutKey = %v", err)
			}
		}
		if err := s.PutKey(ctx, r1); err == nil {
			t.Errorf("PutKey(duplicate) = nil; want an error")
		}
		if got, err := s.KeyByHash(ctx, r1.Hash); err != nil || !reflect.DeepEqual(got, r1) {
			t.Errorf("KeyByHash = %+v, %v; want %+v", got, err, r1)
		}
		if _, err := s.KeyByHash(ctx, "nope"); !errors.Is(err, auth.ErrKeyNotFound) {
			t.Errorf("KeyByHash(unknown) = %v; want ErrKeyNotFound", err)
		}
		if got, err := s.Keys(ctx, ""); err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], r1) || !reflect.DeepEqual(got[1], r2) {
			t.Errorf("Keys(all) = %+v, %v; want r1, r2", got, err)
		}
		if got, err := s.Keys(ctx, "acct2"); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], r2) {
			t.Errorf("Keys(acct2) = %+v, %v; want r2", got, err)
		}
		for _, q := range []string{r1.ID, r1.ID[:10], r1.Prefix, string(k1)} {
			if got, err := auth.Resolve(ctx, s, q); err != nil || got.ID != r1.ID {
				t.Errorf("Resolve(%q) = %+v, %v; want %s", q, got, err, r1.ID)
			}
		}
		if _, err := auth.Resolve(ctx, s, "key_"); !errors.Is(err, auth.ErrKeyNotFound) {
			t.Errorf("Resolve(%q) = %v; want ErrKeyNotFound", "key_", err)
		}
		rv, err := s.RevokeKey(ctx, r1.ID, time.Unix(30, 0))
		if err != nil || rv.Revoked != 30 {
			t.Errorf("RevokeKey = %+v, %v; want revoked 30", rv, err)
		}
		if rv, _ := s.RevokeKey(ctx, r1.ID, time.Unix(40, 0)); rv.Revoked != 30 {
			t.Errorf("RevokeKey(again).Revoked = %d; want 30", rv.Revoked)
		}
		if _, err := s.RevokeKey(ctx, "key_nope", time.Unix(1, 0)); !errors.Is(err, auth.ErrKeyNotFound) {
			t.Errorf("RevokeKey(unknown) = %v; want ErrKeyNotFound", err)
		}
	})

	t.Run("accounts and rate limits", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		for _, id := range []string{"b", "a"} {
			if _, err := s.Grant(ctx, id, 0, 5); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetRateLimit(ctx, "a", 7); err != nil {
			t.Errorf("SetRateLimit = %v", err)
		}
		if err := s.SetRateLimit(ctx, "zz", 7); !errors.Is(err, credits.ErrAccountNotFound) {
			t.Errorf("SetRateLimit(unknown) = %v; want ErrAccountNotFound", err)
		}
		got, err := s.Accounts(ctx)
		want := []credits.Account{{ID: "a", RateLimit: 7, Created: 5}, {ID: "b", Created: 5}}
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("Accounts = %+v, %v; want %+v", got, err, want)
		}
		if l, _ := s.Ledger(ctx, "a"); len(l) != 0 {
			t.Errorf("Ledger after a zero grant = %+v; want none", l)
		}
	})

	t.Run("counter", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		exp := time.Unix(2000, 0)
		for want := int64(1); want <= 3; want++ {
			if got, err := s.Incr(ctx, "key_1/60", exp); got != want || err != nil {
				t.Errorf("Incr(%q) = %d, %v; want %d", "key_1/60", got, err, want)
			}
		}
		if got, err := s.Incr(ctx, "key_1/61", exp); got != 1 || err != nil {
			t.Errorf("Incr(next window) = %d, %v; want 1", got, err)
		}
		if a, _ := s.Accounts(ctx); len(a) != 0 {
			t.Errorf("Accounts = %+v; want none (counters are not accounts)", a)
		}
	})

	t.Run("concurrent creates never overdraw", func(t *testing.T) {
		// moto applies concurrent transactions without isolation (see
		// mototest.Serialize); DynamoDB does not.
		_, _ = newStore(t, endpoint)
		s := New(dynamodb.NewFromConfig(mototest.Config(mototest.Serialize(t, endpoint))), "jobs", "accounts")
		const n, k, price = 12, 5, 10
		if _, err := s.Grant(ctx, "acct1", k*price, 1); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.Create(ctx, newJob(fmt.Sprintf("job_%d", i), "acct1", price), nil)
			}()
		}
		wg.Wait()
		created, refused := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				created++
			case errors.Is(err, jobs.ErrInsufficientCredits):
				refused++
			default:
				t.Errorf("Create = %v; want nil or ErrInsufficientCredits", err)
			}
		}
		a, _ := s.Account(ctx, "acct1")
		if created != k || refused != n-k || a.Held != k*price || a.Available != 0 {
			t.Errorf("%d parallel creates: created %d, refused %d, account %+v; want %d created, %d refused, held %d", n, created, refused, a, k, n-k, k*price)
		}
	})
}

// TestFinalJobsExpire: a final job gets a TTL as long as its output's, and
// once past it a read finds nothing (DynamoDB deletes expired items only
// within a day or two); a job still running has none.
func TestFinalJobsExpire(t *testing.T) {
	endpoint := mototest.Start(t)
	s, client := newStore(t, endpoint)
	ctx := context.Background()
	now := time.Unix(2_000_000_000, 0)
	s.now = func() time.Time { return now }
	s.JobRetention = 48 * time.Hour
	if _, err := s.Grant(ctx, "acct1", 100, 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job_done", "job_running"} {
		if _, err := s.Create(ctx, newJob(id, "acct1", 1), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{Updated: now.Unix()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Transition(ctx, "job_done", jobs.Processing, jobs.Completed, jobs.Patch{Updated: now.Unix(), Output: &jobs.Output{Key: "k"}}); err != nil {
		t.Fatal(err)
	}
	expires := func(id string) int64 {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("jobs"), Key: map[string]types.AttributeValue{"id": str(id)}})
		if err != nil {
			t.Fatal(err)
		}
		return numberAttr(out.Item, "expires")
	}
	if got, want := expires("job_done"), now.Add(48*time.Hour).Unix(); got != want {
		t.Errorf("completed job expires at %d; want %d (now + retention)", got, want)
	}
	if got := expires("job_running"); got != 0 {
		t.Errorf("running job expires at %d; want no expiry", got)
	}
	now = now.Add(47 * time.Hour)
	if j, err := s.Get(ctx, "job_done"); err != nil || j.Status != jobs.Completed {
		t.Errorf("Get before expiry = %+v, %v; want the completed job", j, err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := s.Get(ctx, "job_done"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Get after expiry = %v; want ErrNotFound (a clean 404)", err)
	}
	if _, err := s.Get(ctx, "job_running"); err != nil {
		t.Errorf("Get of a running job = %v; want it", err)
	}
}
