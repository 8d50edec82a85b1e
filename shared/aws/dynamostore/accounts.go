package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// accountItem is an account as stored (pk "acct#<id>", sk "account").
type accountItem struct {
	PK        string `json:"pk"`
	Balance   amount `json:"balance"`
	Held      amount `json:"held"`
	Available amount `json:"available"`
	RateLimit int    `json:"rate_limit"`
	Created   int64  `json:"created"`
}

func (a accountItem) account() credits.Account {
	return credits.Account{
		ID: strings.TrimPrefix(a.PK, acctPrefix), Balance: credits.Amount(a.Balance), Held: credits.Amount(a.Held),
		Available: credits.Amount(a.Available), RateLimit: a.RateLimit, Created: a.Created,
	}
}

// ledgerItem is a ledger entry as stored (pk "acct#<account>", sk
// "ledger#<entry id>"). Seq (Unix nanoseconds at write) orders the ledger:
// entry ids are not ordered, and At has only second resolution.
type ledgerItem struct {
	PK      string `json:"pk"`
	SK      string `json:"sk"`
	Kind    string `json:"kind"`
	Amount  amount `json:"amount"`
	Hold    amount `json:"hold,omitempty"` // a capture's hold, when it was more than the amount
	JobID   string `json:"job_id,omitempty"`
	JobType string `json:"job_type,omitempty"`
	Model   string `json:"model,omitempty"`
	Key     string `json:"key,omitempty"` // the API key the entry counts against
	At      int64  `json:"at"`
	Seq     int64  `json:"seq"`
}

func newLedgerItem(e credits.Entry) ledgerItem {
	return ledgerItem{
		PK: acctPrefix + e.Account, SK: ledgerPrefix + e.ID, Kind: e.Kind, Amount: amount(e.Amount),
		Hold: amount(e.Hold), JobID: e.JobID, JobType: e.JobType, Model: e.Model, Key: e.Key, At: e.At, Seq: time.Now().UnixNano(),
	}
}

func (l ledgerItem) entry() credits.Entry {
	return credits.Entry{
		ID: strings.TrimPrefix(l.SK, ledgerPrefix), Account: strings.TrimPrefix(l.PK, acctPrefix),
		Kind: l.Kind, Amount: credits.Amount(l.Amount), Hold: credits.Amount(l.Hold), JobID: l.JobID, JobType: l.JobType, Model: l.Model, Key: l.Key, At: l.At,
	}
}

// Settle implements credits.Store: capture (balance -= amount, held -=
// hold, available += hold - amount: the rest of the hold is released) or
// release (held -= amount, available += amount), exactly once per entry
// id, in one TransactWriteItems: the ledger entry (put with
// attribute_not_exists(sk)), the account update and, for a Capture with a
// job type and model, the ADD of its job usage counters, and, for an
// entry with a key, the update of the key's counters (settleOnKey). The settlement
// of a reservation first reads the reservation (a strongly consistent
// GetItem: credits.ErrNoReservation unless it holds e.HeldAmount()) for
// the key of its open item, which the transaction deletes
// (attribute_exists: the reservation is open). It returns
// credits.ErrAccountNotFound if the account does not exist, and an error
// matching credits.ErrAmountRange (nothing written) if the job usage's
// credits or the key's spend would pass credits.MaxAmount.
func (s *Store) Settle(ctx context.Context, e credits.Entry) error {
	return s.settle(ctx, e, nil)
}

// SettleRecord implements credits.Reservations: Settle's transaction with
// the Put of r in the records table (attribute_not_exists(id)), its
// Expires, if 0, the retention after its At. A record r.ID written before
// (not by this settlement, which is not) is refused, wrapping
// credits.ErrInvalidRecord, and nothing is written.
func (s *Store) SettleRecord(ctx context.Context, e credits.Entry, r credits.Record) error {
	if err := credits.CheckSettledRecord(e, r); err != nil {
		return err
	}
	if s.RecordsTable == "" {
		return fmt.Errorf("settle %s: %w", e.ID, ErrNoRecordsTable)
	}
	return s.settle(ctx, e, &r)
}

// settle is Settle, with r (nil: none) put in its transaction.
func (s *Store) settle(ctx context.Context, e credits.Entry, r *credits.Record) error {
	if err := credits.CheckSettlement(e); err != nil {
		return err
	}
	var open *types.Delete
	if rid, ok := credits.ReservationOf(e.ID); ok {
		r, err := s.reservation(ctx, e.Account, rid)
		if err != nil {
			return fmt.Errorf("settle %s: %w", e.ID, err)
		}
		if r.Amount != e.HeldAmount() {
			return fmt.Errorf("settle %s: %w: %s holds %s, not %s", e.ID, credits.ErrNoReservation, rid, r.Amount, e.HeldAmount())
		}
		open = &types.Delete{
			TableName:           aws.String(s.accounts),
			Key:                 openResKey(r),
			ConditionExpression: aws.String("attribute_exists(sk)"),
		}
		e.Key = r.Key // the reservation's key: what it held
	}
	// Subtractions are additions of negated amounts (see amount.go).
	update := "SET held = held + :na, available = available + :a"
	vals := map[string]types.AttributeValue{":a": amountNum(e.Amount), ":na": amountNum(-e.Amount)}
	if e.Kind == credits.Capture {
		update = "SET balance = balance + :na, held = held + :nh, available = available + :r"
		vals = map[string]types.AttributeValue{":na": amountNum(-e.Amount), ":nh": amountNum(-e.HeldAmount()), ":r": amountNum(e.HeldAmount() - e.Amount)}
	}
	item, err := marshalMap(newLedgerItem(e))
	if err != nil {
		return fmt.Errorf("settle %s: encode: %w", e.ID, err)
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{
			TableName:           aws.String(s.accounts),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(sk)"),
		}},
		{Update: &types.Update{
			TableName:                 aws.String(s.accounts),
			Key:                       acctKey(e.Account),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			UpdateExpression:          aws.String(update),
			ExpressionAttributeValues: vals,
		}},
	}
	openAt := -1
	if open != nil {
		openAt = len(items)
		items = append(items, types.TransactWriteItem{Delete: open})
	}
	usageAt, keyAt := -1, -1
	if u, ok := credits.JobUsageOf(e); ok {
		usageAt = len(items)
		items = append(items, types.TransactWriteItem{Update: s.jobUsageUpdate(u)})
	}
	if e.Key != "" {
		spent := credits.Amount(0)
		if e.Kind == credits.Capture {
			spent = e.Amount
		}
		keyAt = len(items)
		items = append(items, types.TransactWriteItem{Update: s.settleOnKey(e.Key, spent, e.HeldAmount())})
	}
	recordAt := -1
	if r != nil {
		put, err := s.recordPut(*r)
		if err != nil {
			return fmt.Errorf("settle %s: %w", e.ID, err)
		}
		recordAt = len(items)
		items = append(items, types.TransactWriteItem{Put: put})
	}
	return s.transact(ctx, "settle "+e.ID, items, func(reasons []types.CancellationReason) (bool, error) {
		switch {
		case failed(reasons, 0):
			return true, credits.ErrAlreadySettled
		case recordAt >= 0 && failed(reasons, recordAt):
			return true, fmt.Errorf("settle %s: %w: record %s exists, without this settlement", e.ID, credits.ErrInvalidRecord, r.ID)
		case failed(reasons, 1):
			return true, fmt.Errorf("settle %s: account %s: %w", e.ID, e.Account, credits.ErrAccountNotFound)
		case openAt >= 0 && failed(reasons, openAt):
			// Closed without a settlement entry: only a hand-edited
			// table gets here.
			return true, fmt.Errorf("settle %s: %w: it is not open", e.ID, credits.ErrNoReservation)
		case usageAt >= 0 && failed(reasons, usageAt):
			return true, fmt.Errorf("settle %s: job usage credits: %w", e.ID, credits.ErrAmountRange)
		case keyAt >= 0 && failed(reasons, keyAt):
			return true, fmt.Errorf("settle %s: spent of key %s: %w", e.ID, e.Key, credits.ErrAmountRange)
		}
		return false, nil
	})
}

// Account implements credits.Store.
func (s *Store) Account(ctx context.Context, id string) (credits.Account, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.accounts), Key: acctKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return credits.Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return credits.Account{}, credits.ErrAccountNotFound
	}
	var a accountItem
	if err := unmarshalMap(out.Item, &a); err != nil {
		return credits.Account{}, fmt.Errorf("get account %s: decode: %w", id, err)
	}
	return a.account(), nil
}

// Grant implements credits.Store: one transaction adds amount (negative to
// debit; 0 only creates the account) to balance and available, creating the
// account at zero if needed, and writes a "grant:<random>" ledger entry
// unless amount is 0. The account update is conditioned on the balance
// and available staying within ±credits.MaxAmount (the bound, MaxAmount
// less amount, computed here: a condition cannot add): else an error
// matching credits.ErrAmountRange, and nothing is written. The position
// returned is read right after (a strongly consistent read), so it may
// include concurrent changes.
func (s *Store) Grant(ctx context.Context, id string, amount credits.Amount, at int64) (credits.Account, error) {
	if id == "" {
		return credits.Account{}, errors.New("grant: empty account id")
	}
	if _, err := credits.Amount(0).Add(amount); err != nil {
		return credits.Account{}, fmt.Errorf("grant %s: %w", id, err)
	}
	// Both bounds are within ±MaxAmount x 2: exact as DynamoDB numbers.
	cond, bound := "attribute_not_exists(balance) OR (balance <= :bound AND available <= :bound)", credits.MaxAmount-amount
	if amount < 0 {
		cond, bound = "attribute_not_exists(balance) OR (balance >= :bound AND available >= :bound)", -credits.MaxAmount-amount
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:           aws.String(s.accounts),
			Key:                 acctKey(id),
			ConditionExpression: aws.String(cond),
			UpdateExpression: aws.String("SET balance = if_not_exists(balance, :zero) + :a, " +
				"available = if_not_exists(available, :zero) + :a, held = if_not_exists(held, :zero), " +
				"created = if_not_exists(created, :at)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": amountNum(amount), ":bound": amountNum(bound), ":zero": num(0), ":at": num(at)},
		}},
	}
	if amount != 0 { // a zero grant only creates the account
		suffix, err := auth.RandomString(16)
		if err != nil {
			return credits.Account{}, fmt.Errorf("grant %s: %w", id, err)
		}
		item, err := marshalMap(newLedgerItem(credits.Entry{ID: "grant:" + suffix, Account: id, Kind: credits.Grant, Amount: amount, At: at}))
		if err != nil {
			return credits.Account{}, fmt.Errorf("grant %s: encode: %w", id, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(s.accounts),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(sk)"),
		}})
	}
	err := s.transact(ctx, "grant "+id, items, func(reasons []types.CancellationReason) (bool, error) {
		if failed(reasons, 0) {
			return true, fmt.Errorf("grant %s to %s: the balance would pass ±%s credits: %w", amount, id, credits.MaxAmount, credits.ErrAmountRange)
		}
		return false, nil
	})
	if err != nil {
		return credits.Account{}, err
	}
	a, err := s.Account(ctx, id)
	if err != nil {
		return credits.Account{}, fmt.Errorf("grant %s: %w", id, err)
	}
	return a, nil
}

// Ledger implements credits.Store: one Query of the account's partition,
// in the order the entries were written (by the writer's clock, in
// nanoseconds). An unknown account has no entries.
func (s *Store) Ledger(ctx context.Context, account string) ([]credits.Entry, error) {
	var items []ledgerItem
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.accounts),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :l)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(acctPrefix + account), ":l": str(ledgerPrefix),
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("ledger %s: %w", account, err)
		}
		for _, m := range out.Items {
			var l ledgerItem
			if err := unmarshalMap(m, &l); err != nil {
				return nil, fmt.Errorf("ledger %s: decode: %w", account, err)
			}
			items = append(items, l)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Seq < items[j].Seq })
	entries := make([]credits.Entry, len(items))
	for i, l := range items {
		entries[i] = l.entry()
	}
	return entries, nil
}

// Accounts returns every account, ordered by id. It Scans the accounts
// table (operator use only).
func (s *Store) Accounts(ctx context.Context) ([]credits.Account, error) {
	var out []credits.Account
	err := s.scan(ctx, "sk = :sk", map[string]types.AttributeValue{":sk": str(skAccount)}, func(m map[string]types.AttributeValue) error {
		var a accountItem
		if err := unmarshalMap(m, &a); err != nil {
			return err
		}
		out = append(out, a.account())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SetRateLimit sets account's requests per minute per key (0: the service
// default, negative: unlimited). It returns credits.ErrAccountNotFound for an
// unknown account.
func (s *Store) SetRateLimit(ctx context.Context, account string, rpm int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.accounts),
		Key:                       acctKey(account),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		UpdateExpression:          aws.String("SET rate_limit = :r"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": num(int64(rpm))},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return credits.ErrAccountNotFound
	}
	if err != nil {
		return fmt.Errorf("set rate limit of %s: %w", account, err)
	}
	return nil
}

// scan runs a filtered, strongly consistent Scan of the accounts table,
// calling fn for each item, page by page.
func (s *Store) scan(ctx context.Context, filter string, vals map[string]types.AttributeValue, fn func(map[string]types.AttributeValue) error) error {
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 aws.String(s.accounts),
			FilterExpression:          aws.String(filter),
			ExpressionAttributeValues: vals,
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return err
		}
		for _, m := range out.Items {
			if err := fn(m); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		start = out.LastEvaluatedKey
	}
}

// timeNow is the ledger time of entries the Store dates itself.
func timeNow() int64 { return time.Now().Unix() }

// LedgerEntry reports whether account's ledger has the entry id: one
// strongly consistent GetItem.
func (s *Store) LedgerEntry(ctx context.Context, account, id string) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.accounts),
		Key:                  map[string]types.AttributeValue{"pk": str(acctPrefix + account), "sk": str(ledgerPrefix + id)},
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("pk"),
	})
	if err != nil {
		return false, fmt.Errorf("ledger entry %s of %s: %w", id, account, err)
	}
	return len(out.Item) > 0, nil
}
