package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
)

var _ credits.Reservations = (*Store)(nil)

// The open reservations (see the package doc).
const (
	// openResPrefix starts the partition key of an open reservation's
	// item: "resv#<n>", n in [0, openResShards) from its account and id.
	openResPrefix = "resv#"
	// openResShards is how many partitions the open reservations spread
	// over: each reservation writes its item twice (put, delete), and one
	// partition takes about 1000 writes a second.
	openResShards = 16
)

// OpenReservationPrefix starts the partition key of every open
// reservation's item, the only items the functions delete: template.yaml
// scopes their dynamodb:DeleteItem to partitions starting with it
// (dynamodb:LeadingKeys).
const OpenReservationPrefix = openResPrefix

// openResItem is an open reservation as stored (pk openResPrefix + shard,
// sk createdID(at, account#id)): all of its entry, so that
// OpenReservations reads nothing else.
type openResItem struct {
	PK      string `json:"pk"`
	SK      string `json:"sk"`
	Account string `json:"account"`
	ID      string `json:"id"`
	Amount  amount `json:"amount"`
	JobType string `json:"job_type"`
	Model   string `json:"model"`
	At      int64  `json:"at"`
}

// openResKey is the key of reservation r's open item. The sort key starts
// with r.At, so a shard's items are in age order; the account is in it
// because entry ids are unique per account only.
func openResKey(r credits.Entry) map[string]types.AttributeValue {
	k := r.Account + "#" + r.ID
	return map[string]types.AttributeValue{
		"pk": str(shard(openResPrefix, k, openResShards)), "sk": str(createdID(r.At, k)),
	}
}

// Reserve implements credits.Reserver with one TransactWriteItems: Put
// the ledger entry (attribute_not_exists(sk): else
// credits.ErrAlreadySettled), Update the account (attribute_exists(pk) AND
// available >= amount: held += amount, available -= amount) and Put the
// open item. A failed account condition is credits.ErrAccountNotFound if
// the account does not exist (from the old item the cancellation returns,
// or one GetItem if it returns none), else an error wrapping
// credits.ErrInsufficient. With e.Key the transaction also holds the
// amount on the key's id item (holdOnKey: within its credit limit, else
// an error matching credits.ErrKeyLimit). DynamoDB serialises the conditional updates of
// one item, so parallel reservations never overdraw.
func (s *Store) Reserve(ctx context.Context, e credits.Entry) error {
	if err := credits.CheckReservation(e); err != nil {
		return err
	}
	entry, err := marshalMap(newLedgerItem(e))
	if err != nil {
		return fmt.Errorf("reserve %s: encode: %w", e.ID, err)
	}
	key := openResKey(e)
	open, err := marshalMap(openResItem{
		PK: stringAttr(key, "pk"), SK: stringAttr(key, "sk"), Account: e.Account, ID: e.ID,
		Amount: amount(e.Amount), JobType: e.JobType, Model: e.Model, At: e.At,
	})
	if err != nil {
		return fmt.Errorf("reserve %s: encode: %w", e.ID, err)
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{
			TableName:           aws.String(s.accounts),
			Item:                entry,
			ConditionExpression: aws.String("attribute_not_exists(sk)"),
		}},
		{Update: &types.Update{
			TableName:                           aws.String(s.accounts),
			Key:                                 acctKey(e.Account),
			ConditionExpression:                 aws.String("attribute_exists(pk) AND available >= :a"),
			UpdateExpression:                    aws.String("SET held = held + :a, available = available + :na"), // see amount.go
			ExpressionAttributeValues:           map[string]types.AttributeValue{":a": amountNum(e.Amount), ":na": amountNum(-e.Amount)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Put: &types.Put{
			TableName:           aws.String(s.accounts),
			Item:                open,
			ConditionExpression: aws.String("attribute_not_exists(sk)"),
		}},
	}
	if e.Key != "" {
		items = append(items, types.TransactWriteItem{Update: s.holdOnKey(e.Key, e.Amount)})
	}
	return s.transact(ctx, "reserve "+e.ID+" on "+e.Account, items, func(reasons []types.CancellationReason) (bool, error) {
		switch {
		case failed(reasons, 0):
			return true, fmt.Errorf("reserve %s on %s: %w", e.ID, e.Account, credits.ErrAlreadySettled)
		case failed(reasons, 1):
			return true, s.refusedReservation(ctx, e, reasons[1].Item)
		case e.Key != "" && failed(reasons, 3):
			return true, fmt.Errorf("reserve %s on %s: %w", e.ID, e.Account, refusedKey(e.Key, e.Amount, reasons[3].Item))
		case failed(reasons, 2):
			// Another account's reservation with the same key: only an
			// account name containing "#reserve:" can make one.
			return true, fmt.Errorf("reserve %s on %s: its open item's key is taken", e.ID, e.Account)
		}
		return false, nil
	})
}

// refusedReservation explains a failed account condition of Reserve: old
// is the account as the cancellation returned it (empty if it did not).
func (s *Store) refusedReservation(ctx context.Context, e credits.Entry, old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		a, err := s.Account(ctx, e.Account)
		if errors.Is(err, credits.ErrAccountNotFound) {
			return fmt.Errorf("reserve %s: account %s: %w", e.ID, e.Account, credits.ErrAccountNotFound)
		}
		if err != nil {
			return fmt.Errorf("reserve %s: %w (and reading the account: %v)", e.ID, credits.ErrInsufficient, err)
		}
		return fmt.Errorf("reserve %s on %s: %s credits, %s available: %w", e.ID, e.Account, e.Amount, a.Available, credits.ErrInsufficient)
	}
	available, _ := amountAttr(old, "available") // for the message only
	return fmt.Errorf("reserve %s on %s: %s credits, %s available: %w", e.ID, e.Account, e.Amount, available, credits.ErrInsufficient)
}

// reservation reads account's reservation entry id (a strongly consistent
// GetItem), or credits.ErrNoReservation.
func (s *Store) reservation(ctx context.Context, account, id string) (credits.Entry, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.accounts),
		Key:            map[string]types.AttributeValue{"pk": str(acctPrefix + account), "sk": str(ledgerPrefix + id)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return credits.Entry{}, fmt.Errorf("read reservation %s of %s: %w", id, account, err)
	}
	var l ledgerItem
	if len(out.Item) > 0 {
		if err := unmarshalMap(out.Item, &l); err != nil {
			return credits.Entry{}, fmt.Errorf("read reservation %s of %s: decode: %w", id, account, err)
		}
	}
	if l.Kind != credits.Reservation {
		return credits.Entry{}, fmt.Errorf("%w: %s of %s", credits.ErrNoReservation, id, account)
	}
	return l.entry(), nil
}

// OpenReservations implements credits.Reserver: a strongly consistent
// Query of each shard for the items older than before (sk <
// zero-padded before), oldest first and at most limit of each, merged
// oldest first. It reads only open reservations, never the accounts.
func (s *Store) OpenReservations(ctx context.Context, before int64, limit int) ([]credits.Entry, error) {
	if limit <= 0 {
		return nil, nil
	}
	page := s.queryPage
	if page <= 0 {
		page = defaultQueryPage
	}
	bound := fmt.Sprintf("%0*d", createdDigits, max(before, 0))
	var all []credits.Entry
	for i := range openResShards {
		p := openResPrefix + strconv.Itoa(i)
		var n int
		var startKey map[string]types.AttributeValue
		// Every page but the last returns at least one item, so limit
		// pages are enough; the bound only guards against a misbehaving
		// server.
		for pages := 0; pages <= limit && n < limit; pages++ {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:              aws.String(s.accounts),
				KeyConditionExpression: aws.String("pk = :p AND sk < :t"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":p": str(p), ":t": str(bound),
				},
				ConsistentRead:    aws.Bool(true),
				Limit:             aws.Int32(int32(min(page, limit-n))),
				ExclusiveStartKey: startKey,
			})
			if err != nil {
				return nil, fmt.Errorf("open reservations in %s: %w", p, err)
			}
			for _, m := range out.Items {
				var o openResItem
				if err := unmarshalMap(m, &o); err != nil {
					return nil, fmt.Errorf("open reservations in %s: decode: %w", p, err)
				}
				all = append(all, credits.Entry{
					ID: o.ID, Account: o.Account, Kind: credits.Reservation, Amount: credits.Amount(o.Amount),
					JobType: o.JobType, Model: o.Model, At: o.At,
				})
				n++
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			startKey = out.LastEvaluatedKey
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.At != b.At {
			return a.At < b.At
		}
		if a.Account != b.Account {
			return a.Account < b.Account
		}
		return a.ID < b.ID
	})
	return all[:min(len(all), limit)], nil
}
