// Package dynamostore keeps jobs, API keys, accounts and the credit ledger
// in two DynamoDB tables. It implements jobs.Store, auth.Store,
// credits.Store, credits.UsageStore and credits.Reserver, and ratelimit's
// Counter.
//
// # Layout
//
// The jobs table has the partition key "id" (S), a stream with
// NEW_AND_OLD_IMAGES (the credits function settles from it) and TTL on the
// attribute "expires": a job's Transition to a final status sets it to
// JobRetention from then (the output's lifetime), and Get treats a job past
// it as gone. It holds two kinds of item:
//
//	id = <job id>                      a job: account, type, model, status, input (M),
//	                                   output (M), error (M), price, hold, attempts, created,
//	                                   updated, history (L of M), candidates (L of M: model,
//	                                   price), candidate, attempts_before, created_id; while
//	                                   queued also queued_shard, queued_at; sweeps
//	id = "idem#" + <account>/<key>     an Idempotency-Key: body_hash, job_id, expires (TTL)
//
// The global secondary index "queued" (QueuedIndex, KEYS_ONLY) is sparse:
// partition key queued_shard = "queued#0".."queued#15" (from the job id, so
// a high create rate spreads over 16 index partitions), sort key queued_at =
// Unix seconds of the job's last message. Create sets both; the Transition
// out of queued REMOVEs them in the same conditional update, so the index
// only ever holds queued jobs. QueuedBefore queries it for jobs whose
// message may have been lost (the job write and the SQS send are not one
// transaction) and MarkSwept moves queued_at on and counts sweeps; see
// jobs.Service.Sweep.
//
// The global secondary index "by_account" (AccountIndex) lists an
// account's jobs newest first: partition key account, sort key created_id
// = the zero-padded created second + "#" + id (set by Create), projecting
// status, type and model so that List filters in the index; see List.
// Delete (a client deleting a final job) sets "deleted" and REMOVEs
// created_id, so a deleted job leaves the index and every listing.
// Every Transition that changes the status appends to history with
// list_append in the same UpdateItem.
//
// Keeping the idempotency item in the jobs table lets Create write the job,
// the hold and the key in one TransactWriteItems over two tables, and the
// idempotency items expire by TTL. Their stream records are ignored by
// ChangeFromImages.
//
// The accounts table has the partition key "pk" (S) and sort key "sk" (S),
// TTL on "expires" (for the rate-limit counters):
//
//	pk = "acct#" + id,  sk = "account"             balance, held, available, rate_limit, created
//	pk = "acct#" + id,  sk = "ledger#" + entry id  a ledger entry: kind, amount, hold, job_id, at, seq
//	pk = "key#" + hash, sk = "key"                 an API key record: id, hash, prefix, account,
//	                                               created, revoked, last_used, name, models,
//	                                               expires_at (not "expires": the TTL),
//	                                               credit_limit, credit_limit_reset
//	pk = "keyid#" + id, sk = "key"                 the key id -> hash pointer, and the key's
//	                                               counters: spent, held, used (= spent +
//	                                               held), left (= credit_limit - used),
//	                                               credit_limit (absent: no limit),
//	                                               period, period_start (Unix s): the
//	                                               credit limit period spent counts
//	pk = "acct#" + id,  sk = "usage#<day>#<model>" chat usage: requests, prompt_tokens,
//	                                               completion_tokens, credits (ADD counters)
//	pk = "acct#" + id,  sk = "jobusage#<day>#<type>#<model>"
//	                                               job usage: day, job_type, model, jobs,
//	                                               credits (ADD counters, written by Settle)
//	pk = "rate#" + counter, sk = "rate"            a rate-limit counter: n, expires (TTL)
//	pk = "session#" + id, sk = "session"          a console session (the hash of its id):
//	                                               expires (TTL), ended once signed out
//	pk = "resv#" + n,   sk = <at, 12 digits> + "#" + account + "#reserve:" + id
//	                                               an open reservation: account, id, amount,
//	                                               job_type, model, at (until it is settled)
//
// Every amount (balance, held, available, a ledger entry's amount and
// hold, a job's and its candidates' prices, a key's limit and counters,
// usage credits) is a DynamoDB number of credits with up to 6 decimal
// places, exact (see amount.go; items written when amounts were whole
// credits read the same).
//
// available = balance - held is stored, not computed, so that holding a
// price is a single conditional update (available >= price). A ledger entry
// lives in the account's partition: Ledger is one Query, and the entry's key
// ("ledger#job:<job id>") is what makes Settle exactly-once.
//
// # Reservations
//
// A reservation (credits.Reserver) is a ledger entry "ledger#reserve:<id>"
// in its account's partition, like any other, plus one open item while
// it is unsettled, so that the reconciler finds the stale ones without
// reading every account: Reserve puts it and the reservation's Settle
// deletes it, each in its one transaction. Its partition is one of 16
// ("resv#0".."resv#15", from the account and id), and its sort key starts
// with the zero-padded second of the reservation, so OpenReservations is
// one strongly consistent Query per partition over the range of seconds
// before its bound, oldest first, reading only open reservations (in
// flight or stale), never the whole table. Sixteen partitions because
// every reservation writes its item twice: one partition (about 1000
// writes a second) would cap the service near 500 reservations a second
// whatever the table's capacity; the price is 16 small Queries per
// reconciler run, hourly. A base-table item rather than a sparse global
// secondary index on the ledger entry: no change to the table's
// definition, and the listing is strongly consistent (a released
// reservation is never listed again). The cost is one read: the settlement
// ("reserved:<id>") does not carry the reservation's second, so Settle
// first reads the reservation's entry (a strongly consistent GetItem,
// which also checks that the settlement clears what was reserved), then
// deletes the open item in its transaction with attribute_exists(sk): the
// settlement's own condition (attribute_not_exists on its ledger entry)
// keeps it exactly-once, whoever settles first, the request or the
// reconciler.
//
// Listing keys (Keys, and so auth.Resolve) and accounts (Accounts) Scans the accounts
// table with a filter. That is acceptable for the operator CLI, which is the
// only caller; the request path reads keys with GetItem (KeyByHash).
//
// # Atomicity
//
// Create is one TransactWriteItems: Put the idempotency item
// (attribute_not_exists(id) OR expires < now), Put the job
// (attribute_not_exists(id)), Update the account (available >= price: held +=
// price, available -= price) and, for a job made with a key, Update the
// key's id item (attribute_not_exists(credit_limit) OR left >= price:
// held, used += price, left -= price), so that neither the account's
// credits nor the key's limit can be passed by parallel creates. The cancellation reasons say which condition
// failed. Transition is one UpdateItem conditioned on the current status.
// Settle is one TransactWriteItems: Put the ledger entry
// (attribute_not_exists(sk)), Update the account and, for a capture, ADD
// to the job usage counters of the job's day, type and model: the entry's
// condition makes the count exactly-once with the charge; for a
// reservation's settlement also Delete its open item. Reserve is one
// TransactWriteItems: Put the ledger entry (attribute_not_exists(sk)),
// Update the account (attribute_exists(pk) AND available >= amount: held
// += amount, available -= amount), Put the open item.
//
// A Store is safe for concurrent use.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/jobs"
)

// API is the part of the DynamoDB client the Store uses; *dynamodb.Client
// implements it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Store is the DynamoDB implementation of jobs.Store, auth.Store and
// credits.Store.
type Store struct {
	db       API
	jobs     string
	accounts string
	// queryPage is the Limit of one Query of QueuedIndex; 0:
	// defaultQueryPage (tests set it to exercise paging).
	queryPage int
	// JobRetention is how long a final job is kept (TTL on "expires"),
	// as long as its output in S3; 0: DefaultJobRetention. Set it before
	// first use.
	JobRetention time.Duration
	// RecordsTable is the table of the records of requests (see
	// records.go); without one, the record methods fail with
	// ErrNoRecordsTable. RecordRetention is how long a record is kept
	// (TTL on "expires"); 0: credits.DefaultRecordRetention. Set them
	// before first use.
	RecordsTable    string
	RecordRetention time.Duration
	now             func() time.Time // nil: time.Now
}

// DefaultJobRetention keeps a final job as long as the media bucket keeps
// its output (s3media.ExpiryDays).
const DefaultJobRetention = 30 * 24 * time.Hour

func (s *Store) retention() time.Duration {
	if s.JobRetention > 0 {
		return s.JobRetention
	}
	return DefaultJobRetention
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

var (
	_ jobs.Store    = (*Store)(nil)
	_ auth.Store    = (*Store)(nil)
	_ credits.Store = (*Store)(nil)
)

// New returns a Store over the tables jobsTable and accountsTable (see the
// package doc for their layout; CreateTables makes them).
func New(db API, jobsTable, accountsTable string) *Store {
	return &Store{db: db, jobs: jobsTable, accounts: accountsTable}
}

// Item key prefixes.
const (
	idemPrefix    = "idem#"
	acctPrefix    = "acct#"
	ledgerPrefix  = "ledger#"
	keyPrefix     = "key#"
	keyIDPrefix   = "keyid#"
	skAccount     = "account"
	skKey         = "key"
	maxTxAttempts = 6 // bounded retries of TransactionConflict cancellations
)

// encode/decode use the domain types' json tags as attribute names, so the
// stored item reads like the API's JSON.
func encodeOpts(o *attributevalue.EncoderOptions) { o.TagKey = "json" }
func decodeOpts(o *attributevalue.DecoderOptions) { o.TagKey = "json" }

func marshalMap(v any) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMapWithOptions(v, encodeOpts)
}

func marshal(v any) (types.AttributeValue, error) {
	return attributevalue.MarshalWithOptions(v, encodeOpts)
}

func unmarshalMap(m map[string]types.AttributeValue, v any) error {
	return attributevalue.UnmarshalMapWithOptions(m, v, decodeOpts)
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: fmt.Sprint(n)}
}

func acctKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(acctPrefix + id), "sk": str(skAccount)}
}

// Create implements jobs.Store.
func (s *Store) Create(ctx context.Context, j *jobs.Job, idem *jobs.Idempotency) (*jobs.Job, error) {
	if j == nil || j.ID == "" || j.Account == "" || strings.HasPrefix(j.ID, idemPrefix) {
		return nil, fmt.Errorf("create job: missing or invalid id or account")
	}
	if j.Price < 0 {
		return nil, fmt.Errorf("create job %s: negative price %s", j.ID, j.Price)
	}
	nj := *j
	nj.Status = jobs.Queued
	now := nj.Created // the caller's clock, so that expiry follows it
	if now == 0 {
		now = time.Now().Unix()
	}
	nj.History = []jobs.StatusChange{{Status: jobs.Queued, At: now}}
	item, err := encodeJob(&nj)
	if err != nil {
		return nil, fmt.Errorf("create job %s: encode: %w", j.ID, err)
	}
	// Into AccountIndex, for List.
	item[CreatedIDAttribute] = str(createdID(nj.Created, nj.ID))
	// Into the sparse index of queued jobs, until Transition moves it out.
	item[QueuedShardAttribute] = str(queuedShard(j.ID))
	item[QueuedAtAttribute] = num(now)
	// The idempotency item goes first: if a store reports only the first
	// failed condition, a replay is still recognised as one (and not as a
	// 402 because the first call's hold used up the credits).
	var items []types.TransactWriteItem
	if idem != nil {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.jobs),
			Item: map[string]types.AttributeValue{
				"id": str(idemPrefix + idem.Key), "body_hash": str(idem.BodyHash),
				"job_id": str(j.ID), "expires": num(idem.Expires),
			},
			ConditionExpression:                 aws.String("attribute_not_exists(id) OR expires <= :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(now)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	items = append(items,
		types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(s.jobs),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(id)"),
		}},
		types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(s.accounts),
			Key:                       acctKey(j.Account),
			ConditionExpression:       aws.String("available >= :p"),
			UpdateExpression:          aws.String("SET held = held + :p, available = available + :np"), // + of the negated price: see amount.go
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": amountNum(j.Price), ":np": amountNum(-j.Price)},
		}},
	)
	idemAt, jobAt, acctAt := -1, 0, 1
	if idem != nil {
		idemAt, jobAt, acctAt = 0, 1, 2
	}
	keyAt := -1
	if j.Key != "" {
		keyAt = len(items)
		items = append(items, types.TransactWriteItem{Update: s.holdOnKey(j.Key, j.Price)})
	}
	var replayed *jobs.Job
	err = s.transact(ctx, "create job "+j.ID, items, func(reasons []types.CancellationReason) (bool, error) {
		var err error
		switch {
		case idemAt >= 0 && failed(reasons, idemAt):
			replayed, err = s.replay(ctx, idem, reasons[idemAt].Item)
		case failed(reasons, acctAt):
			err = jobs.ErrInsufficientCredits
		case keyAt >= 0 && failed(reasons, keyAt):
			err = fmt.Errorf("create job %s: %w", j.ID, refusedKey(j.Key, j.Price, reasons[keyAt].Item))
		case failed(reasons, jobAt):
			err = fmt.Errorf("create job %s: id already exists", j.ID)
		default:
			return false, nil
		}
		return true, err
	})
	switch {
	case err != nil:
		return nil, err
	case replayed != nil:
		return replayed, nil
	}
	return &nj, nil
}

// replay resolves an Idempotency-Key already in use: the job it made if the
// body is the same, else ErrIdempotencyConflict. old is the idempotency item
// returned with the cancellation, if the store returned it.
func (s *Store) replay(ctx context.Context, idem *jobs.Idempotency, old map[string]types.AttributeValue) (*jobs.Job, error) {
	if len(old) == 0 {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.jobs),
			Key:            map[string]types.AttributeValue{"id": str(idemPrefix + idem.Key)},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("create job: read idempotency key: %w", err)
		}
		old = out.Item
	}
	var rec struct {
		BodyHash string `json:"body_hash"`
		JobID    string `json:"job_id"`
	}
	if err := unmarshalMap(old, &rec); err != nil {
		return nil, fmt.Errorf("create job: decode idempotency key: %w", err)
	}
	if rec.JobID == "" {
		// Deleted (TTL) between the write and the read: the key is free
		// again, but this call lost its chance; let the client retry.
		return nil, fmt.Errorf("create job: idempotency key %q changed concurrently: %w", idem.Key, jobs.ErrConflict)
	}
	if rec.BodyHash != idem.BodyHash {
		return nil, jobs.ErrIdempotencyConflict
	}
	j, err := s.Get(ctx, rec.JobID)
	if err != nil {
		return nil, fmt.Errorf("create job: idempotent replay of %s: %w", rec.JobID, err)
	}
	return j, nil
}

// Get implements jobs.Store.
func (s *Store) Get(ctx context.Context, id string) (*jobs.Job, error) {
	if id == "" || strings.HasPrefix(id, idemPrefix) {
		return nil, jobs.ErrNotFound
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.jobs),
		Key:            map[string]types.AttributeValue{"id": str(id)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, jobs.ErrNotFound
	}
	// DynamoDB deletes expired items only within a day or two: an
	// expired job is gone already for readers.
	if exp := numberAttr(out.Item, "expires"); exp > 0 && exp <= s.clock().Unix() {
		return nil, jobs.ErrNotFound
	}
	return decodeJob(out.Item)
}

// Transition implements jobs.Store. A from -> to pair that jobs.CanTransition
// refuses is an error wrapping jobs.ErrConflict and writes nothing.
func (s *Store) Transition(ctx context.Context, id string, from, to jobs.Status, p jobs.Patch) (*jobs.Job, error) {
	if !jobs.CanTransition(from, to) {
		return nil, fmt.Errorf("transition job %s: %s -> %s is not allowed: %w", id, from, to, jobs.ErrConflict)
	}
	if id == "" || strings.HasPrefix(id, idemPrefix) {
		return nil, jobs.ErrNotFound
	}
	set := []string{"#s = :to"}
	vals := map[string]types.AttributeValue{":from": str(string(from)), ":to": str(string(to))}
	if p.Updated != 0 {
		set = append(set, "updated = :u")
		vals[":u"] = num(p.Updated)
	}
	if p.Output != nil {
		v, err := marshal(p.Output)
		if err != nil {
			return nil, fmt.Errorf("transition job %s: encode output: %w", id, err)
		}
		set = append(set, "#o = :o")
		vals[":o"] = v
	}
	if p.Error != nil {
		v, err := marshal(p.Error)
		if err != nil {
			return nil, fmt.Errorf("transition job %s: encode error: %w", id, err)
		}
		set = append(set, "#e = :e")
		vals[":e"] = v
	}
	if p.IncAttempts {
		set = append(set, "attempts = if_not_exists(attempts, :zero) + :one")
		vals[":zero"], vals[":one"] = num(0), num(1)
	}
	if p.Started != 0 {
		set = append(set, "started = :st")
		vals[":st"] = num(p.Started)
	}
	if p.NextRun != 0 {
		set = append(set, "next_run = :nr")
		vals[":nr"] = num(p.NextRun)
	}
	if p.Candidate != nil {
		set = append(set, "candidate = :cand", "attempts_before = :ab")
		vals[":cand"], vals[":ab"] = num(int64(*p.Candidate)), num(int64(p.AttemptsBefore))
	}
	if p.Price != nil {
		set = append(set, "price = :price")
		vals[":price"] = amountNum(*p.Price)
	}
	if to.Final() {
		// Kept as long as its output, from now, then removed by the
		// table's TTL.
		set = append(set, "expires = :exp")
		vals[":exp"] = num(s.clock().Add(s.retention()).Unix())
	}
	if p.Handle != nil {
		v, err := marshal(p.Handle)
		if err != nil {
			return nil, fmt.Errorf("transition job %s: encode handle: %w", id, err)
		}
		set = append(set, "handle = :h")
		vals[":h"] = v
	}
	cond := "#s = :from"
	names := map[string]string{"#s": "status"}
	if from != to {
		// The status history grows in the same write (a job stored
		// before it existed starts one here).
		h, err := marshal([]jobs.StatusChange{jobs.HistoryEntry(to, p, s.clock().Unix())})
		if err != nil {
			return nil, fmt.Errorf("transition job %s: encode history: %w", id, err)
		}
		set = append(set, "#hist = list_append(if_not_exists(#hist, :nohist), :hist)")
		names["#hist"] = "history"
		vals[":hist"], vals[":nohist"] = h, &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	}
	if p.IfRuns != nil {
		// A job with no runs yet has no attribute (omitempty).
		names["#r"] = "runs"
		vals[":r"], vals[":r1"] = num(int64(*p.IfRuns)), num(int64(*p.IfRuns)+1)
		set = append(set, "#r = :r1")
		if *p.IfRuns == 0 {
			cond += " AND (attribute_not_exists(#r) OR #r = :r)"
		} else {
			cond += " AND #r = :r"
		}
	}
	if p.Output != nil {
		names["#o"] = "output"
	}
	if p.Error != nil {
		names["#e"] = "error"
	}
	// The sparse index holds the jobs that wait for a message: queued
	// ones, and processing ones whose next run (a poll, a retry, a lease's
	// end) is due at next_run, so that Sweep finds a job whose message was
	// lost. A job leaves it in the same write that makes it final.
	update := "SET " + strings.Join(set, ", ")
	switch {
	case to == jobs.Processing && p.NextRun != 0:
		update += ", #qs = :qs, #qa = :nr"
		names["#qs"], names["#qa"] = QueuedShardAttribute, QueuedAtAttribute
		vals[":qs"] = str(queuedShard(id))
	case from == jobs.Queued || to.Final():
		update += " REMOVE #qs, #qa"
		names["#qs"], names["#qa"] = QueuedShardAttribute, QueuedAtAttribute
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.jobs),
		Key:                                 map[string]types.AttributeValue{"id": str(id)},
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		old := ccf.Item
		if len(old) == 0 { // no such item (or a store that does not return it)
			cur, gerr := s.Get(ctx, id)
			if errors.Is(gerr, jobs.ErrNotFound) {
				return nil, jobs.ErrNotFound
			}
			if gerr != nil {
				return nil, fmt.Errorf("transition job %s: %w (and reading it: %v)", id, jobs.ErrConflict, gerr)
			}
			return nil, fmt.Errorf("transition job %s %s -> %s: status is %s: %w", id, from, to, cur.Status, jobs.ErrConflict)
		}
		cur, _ := decodeJob(old)
		var status jobs.Status
		if cur != nil {
			status = cur.Status
		}
		return nil, fmt.Errorf("transition job %s %s -> %s: status is %s: %w", id, from, to, status, jobs.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("transition job %s: %w", id, err)
	}
	return decodeJob(out.Attributes)
}

// transact writes items in one TransactWriteItems and owns its retries:
// each attempt carries its own client request token (DynamoDB would answer
// a reused token with the first attempt's outcome). When the transaction is
// cancelled, refused (nil: none) reads the reasons first: if it reports
// done, the cancellation is settled and transact returns err, nil included
// (a write already applied, say). Otherwise a TransactionConflict is
// retried after backoff, up to maxTxAttempts attempts in all; any other
// error, the last conflict, and ctx's error if it ends during a backoff
// are returned as "<what>: <error>".
func (s *Store) transact(ctx context.Context, what string, items []types.TransactWriteItem,
	refused func(reasons []types.CancellationReason) (done bool, err error)) error {
	for attempt := 0; ; attempt++ {
		token, err := auth.RandomString(32)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(token)})
		if err == nil {
			return nil
		}
		reasons, ok := cancellation(err)
		if ok && refused != nil {
			if done, err := refused(reasons); done {
				return err
			}
		}
		if ok && conflicted(reasons) && attempt+1 < maxTxAttempts {
			if err := backoff(ctx, attempt); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			continue
		}
		return fmt.Errorf("%s: %w", what, err)
	}
}

// cancellation returns the per-item reasons of a cancelled transaction.
func cancellation(err error) ([]types.CancellationReason, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	return tce.CancellationReasons, true
}

// failed reports whether item i of a cancelled transaction failed its
// condition.
func failed(reasons []types.CancellationReason, i int) bool {
	return i < len(reasons) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
}

// conflicted reports whether a cancelled transaction collided with another
// one in flight (worth retrying).
func conflicted(reasons []types.CancellationReason) bool {
	for _, r := range reasons {
		if aws.ToString(r.Code) == "TransactionConflict" {
			return true
		}
	}
	return false
}

// backoff sleeps before retry attempt+1 (20ms, 40ms, ... ) or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	if !ctxtime.Sleep(ctx, time.Duration(20<<attempt)*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}
