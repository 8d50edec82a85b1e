package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// keyItem is an API key record as stored (pk "key#<hash>", sk "key").
type keyItem struct {
	PK string `json:"pk"`
	SK string `json:"sk"`
	auth.Record
	// The record's amounts as numbers of credits (amount.go), shadowing
	// its own. Spent and Held are counted on the id item, never here.
	CreditLimit *amount `json:"credit_limit,omitempty"`
	Spent       amount  `json:"spent,omitempty"`
	Held        amount  `json:"held,omitempty"`
}

// newKeyItem is r as stored (pk "key#<hash>", sk "key").
func newKeyItem(r auth.Record) keyItem {
	k := keyItem{PK: keyPrefix + r.Hash, SK: skKey, Record: r, Spent: amount(r.Spent), Held: amount(r.Held)}
	if r.CreditLimit != nil {
		l := amount(*r.CreditLimit)
		k.CreditLimit = &l
	}
	k.Record.CreditLimit = nil
	return k
}

// PutKey implements auth.Store. It writes the record and its id item in
// one transaction, and fails if a key with the same hash or id exists.
// The id item carries the key's counters (see keyCounters) and its credit
// limit; the record keeps the limit too, for the request path.
func (s *Store) PutKey(ctx context.Context, r auth.Record) error {
	if r.Hash == "" || r.ID == "" || r.Account == "" {
		return fmt.Errorf("put key: missing id, hash or account")
	}
	if err := r.Controls.Check(); err != nil {
		return err
	}
	period := r.Period
	r.Spent, r.Held, r.Period = 0, 0, "" // counted on the id item only
	item, err := marshalMap(newKeyItem(r))
	if err != nil {
		return fmt.Errorf("put key %s: encode: %w", r.ID, err)
	}
	idItem := map[string]types.AttributeValue{
		"pk": str(keyIDPrefix + r.ID), "sk": str(skKey), "hash": str(r.Hash),
		"spent": num(0), "held": num(0), "used": num(0), "left": num(0),
	}
	if r.CreditLimit != nil {
		idItem["credit_limit"], idItem["left"] = amountNum(*r.CreditLimit), amountNum(*r.CreditLimit)
	}
	if start, ok := auth.PeriodStart(period); ok {
		idItem["period"], idItem["period_start"] = str(period), num(start.Unix())
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(s.accounts), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
		{Put: &types.Put{
			TableName:           aws.String(s.accounts),
			Item:                idItem,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}})
	if reasons, ok := cancellation(err); ok && (failed(reasons, 0) || failed(reasons, 1)) {
		return fmt.Errorf("put key %s: a key with this id or hash exists", r.ID)
	}
	if err != nil {
		return fmt.Errorf("put key %s: %w", r.ID, err)
	}
	return nil
}

// KeyByHash implements auth.Store with one strongly consistent GetItem of
// the record, for the request path: its Spent and Held are 0 (they are
// counted on the id item; KeyByID and Keys read them).
func (s *Store) KeyByHash(ctx context.Context, hash string) (auth.Record, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.accounts),
		Key:            keyHashKey(hash),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("get key: %w", err)
	}
	if len(out.Item) == 0 {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	return decodeKey(out.Item)
}

func decodeKey(m map[string]types.AttributeValue) (auth.Record, error) {
	var k keyItem
	if err := unmarshalMap(m, &k); err != nil {
		return auth.Record{}, fmt.Errorf("decode key: %w", err)
	}
	r := k.Record
	r.Spent, r.Held, r.CreditLimit = credits.Amount(k.Spent), credits.Amount(k.Held), nil
	if k.CreditLimit != nil {
		l := credits.Amount(*k.CreditLimit)
		r.CreditLimit = &l
	}
	return r, nil
}

// Keys implements auth.Store by Scanning the accounts table (operator use
// only) for the key records and their id items (both start with "key"),
// joined by id for Spent and Held. Records are ordered by creation time,
// then id.
func (s *Store) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	var out []auth.Record
	counters := map[string]keyCounters{}
	err := s.scan(ctx, "begins_with(pk, :p)", map[string]types.AttributeValue{":p": str("key")}, func(m map[string]types.AttributeValue) error {
		pk := stringAttr(m, "pk")
		if id, ok := strings.CutPrefix(pk, keyIDPrefix); ok {
			c, err := countersOf(m)
			if err != nil {
				return fmt.Errorf("key %s: %w", id, err)
			}
			counters[id] = c
			return nil
		}
		if !strings.HasPrefix(pk, keyPrefix) {
			return nil
		}
		r, err := decodeKey(m)
		if err != nil {
			return err
		}
		if account == "" || r.Account == account {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	for i := range out {
		c := counters[out[i].ID]
		out[i].Spent, out[i].Held, out[i].Period = c.Spent, c.Held, c.Period
	}
	auth.SortRecords(out)
	return out, nil
}

// keyCounters are what a key's id item (pk "keyid#<id>") counts: Spent
// and Held as auth.Record has them, Used = Spent + Held, and, for a key
// with a credit limit, Left = limit - Used, which a hold's condition
// compares (DynamoDB conditions cannot add). Left is kept for every key
// (limit 0 when it has none) so that setting a limit is one update:
// left = :limit - used. Period is the credit limit period that Spent
// counts (auth.Record.Period), with its start as a Unix second in
// period_start, which RollKeyPeriod's condition compares.
type keyCounters struct {
	Hash   string
	Spent  credits.Amount
	Held   credits.Amount
	Used   credits.Amount
	Left   credits.Amount
	Limit  *credits.Amount
	Period string
}

// countersOf reads a key's id item; an amount that is not a number of
// credits is an error.
func countersOf(m map[string]types.AttributeValue) (keyCounters, error) {
	c := keyCounters{Hash: stringAttr(m, "hash"), Period: stringAttr(m, "period")}
	for _, f := range []struct {
		name string
		to   *credits.Amount
	}{{"spent", &c.Spent}, {"held", &c.Held}, {"used", &c.Used}, {"left", &c.Left}} {
		a, err := amountAttr(m, f.name)
		if err != nil {
			return keyCounters{}, err
		}
		*f.to = a
	}
	if _, ok := m["credit_limit"].(*types.AttributeValueMemberN); ok {
		n, err := amountAttr(m, "credit_limit")
		if err != nil {
			return keyCounters{}, err
		}
		c.Limit = &n
	}
	return c, nil
}

// keyIDKey is the key of key id's id item.
func keyIDKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(keyIDPrefix + id), "sk": str(skKey)}
}

// keyHashKey is the key of the record of the key with hash.
func keyHashKey(hash string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(keyPrefix + hash), "sk": str(skKey)}
}

// keyIDItem reads key id's id item (strongly consistent): its record's
// hash and its counters, or auth.ErrKeyNotFound (not wrapped).
func (s *Store) keyIDItem(ctx context.Context, id string) (keyCounters, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.accounts), Key: keyIDKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return keyCounters{}, fmt.Errorf("read key %s: %w", id, err)
	}
	c, err := countersOf(out.Item)
	if err != nil {
		return keyCounters{}, fmt.Errorf("read key %s: %w", id, err)
	}
	if c.Hash == "" {
		return keyCounters{}, auth.ErrKeyNotFound
	}
	return c, nil
}

// holdOnKey is the transaction item that holds a on key id: held, used
// += a and left -= a (as + of -a: see amount.go), only if the key exists
// and, when it has a credit limit, left >= a. A failed condition returns
// the old item, for KeyLimit's message (refusedKey).
func (s *Store) holdOnKey(id string, a credits.Amount) *types.Update {
	return &types.Update{
		TableName:           aws.String(s.accounts),
		Key:                 keyIDKey(id),
		ConditionExpression: aws.String("attribute_exists(pk) AND (attribute_not_exists(#lim) OR #left >= :a)"),
		UpdateExpression: aws.String("SET #held = if_not_exists(#held, :z) + :a, #used = if_not_exists(#used, :z) + :a, " +
			"#left = if_not_exists(#left, :z) + :na"),
		ExpressionAttributeNames:            map[string]string{"#held": "held", "#used": "used", "#left": "left", "#lim": "credit_limit"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":a": amountNum(a), ":na": amountNum(-a), ":z": num(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// refusedKey explains a failed holdOnKey condition: old is the key's id
// item as the cancellation returned it.
func refusedKey(id string, amount credits.Amount, old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		return fmt.Errorf("hold on key %s: %w", id, auth.ErrKeyNotFound)
	}
	c, err := countersOf(old)
	if err != nil {
		return fmt.Errorf("hold on key %s: %w", id, err)
	}
	if c.Limit == nil {
		// The limit was removed after the refusal: it was refused then.
		return credits.KeyLimit(id, amount, 0, c.Used)
	}
	return credits.KeyLimit(id, amount, *c.Limit, c.Used)
}

// settleOnKey is the transaction item that moves key id's credits for
// a settlement or a chat charge: held -= held, spent += spent, and the
// difference of held and spent back to left (used moves the other way);
// subtractions as + of negated amounts (see amount.go). Its one
// condition keeps spent within credits.MaxAmount (the bound computed
// here: a condition cannot add); otherwise a settlement never waits on a
// key, and keys are never deleted.
func (s *Store) settleOnKey(id string, spent, held credits.Amount) *types.Update {
	return &types.Update{
		TableName:           aws.String(s.accounts),
		Key:                 keyIDKey(id),
		ConditionExpression: aws.String("attribute_not_exists(#spent) OR #spent <= :room"),
		UpdateExpression: aws.String("SET #held = if_not_exists(#held, :z) + :nh, #spent = if_not_exists(#spent, :z) + :s, " +
			"#used = if_not_exists(#used, :z) + :nr, #left = if_not_exists(#left, :z) + :r"),
		ExpressionAttributeNames: map[string]string{"#spent": "spent", "#held": "held", "#used": "used", "#left": "left"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":nh": amountNum(-held), ":s": amountNum(spent), ":r": amountNum(held - spent), ":nr": amountNum(spent - held),
			":room": amountNum(credits.MaxAmount - spent), ":z": num(0),
		},
	}
}

// KeyByID implements auth.Store: strongly consistent GetItems of the id
// item (the counters) and of the record.
func (s *Store) KeyByID(ctx context.Context, id string) (auth.Record, error) {
	c, err := s.keyIDItem(ctx, id)
	if err != nil {
		return auth.Record{}, err
	}
	r, err := s.KeyByHash(ctx, c.Hash)
	if err != nil {
		return auth.Record{}, fmt.Errorf("get key %s: %w", id, err)
	}
	r.Spent, r.Held, r.Period = c.Spent, c.Held, c.Period
	return r, nil
}

// RollKeyPeriod implements auth.Store with one conditional UpdateItem of
// the key's id item: spent 0, used = held, left += spent (that is
// credit_limit - held, as + only: see amount.go), period and period_start
// the new period's, only if the item exists and its period_start is
// absent or older. Two containers rolling at once
// roll once: the other's condition fails, which reads the item back only
// when the failure does not return it (to tell an unknown key).
func (s *Store) RollKeyPeriod(ctx context.Context, id, period string) (bool, error) {
	start, ok := auth.PeriodStart(period)
	if !ok {
		return false, auth.ErrBadPeriod
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.accounts),
		Key:                 keyIDKey(id),
		ConditionExpression: aws.String("attribute_exists(pk) AND (attribute_not_exists(#ps) OR #ps < :ps)"),
		// left first: DynamoDB reads every operand before the update,
		// and so does this order where a store applies the SETs in turn.
		UpdateExpression: aws.String("SET #left = if_not_exists(#left, :z) + if_not_exists(#spent, :z), #spent = :z, " +
			"#used = if_not_exists(#held, :z), #period = :p, #ps = :ps"),
		ExpressionAttributeNames: map[string]string{"#spent": "spent", "#held": "held", "#used": "used", "#left": "left",
			"#period": "period", "#ps": "period_start"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":z": num(0), ":p": str(period), ":ps": num(start.Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) > 0 {
			return false, nil
		}
		if _, err := s.keyIDItem(ctx, id); err != nil {
			return false, err
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("roll key %s to %s: %w", id, period, err)
	}
	return true, nil
}

// SetControls implements auth.Store: it reads the id item for the hash
// and the limit its counters reflect, then updates the record (name,
// models, expires_at, credit_limit, credit_limit_reset, jobs) and the id item
// (credit_limit, left = limit - used) in one transaction. left is moved by
// the change of limit (left += new - old, an addition: see amount.go),
// where old is left + used as read: the counters' limit, which holds,
// settlements and period rolls leave as it is (they move left and used
// by opposite amounts), so the update is exact however many of them run
// meanwhile. The id item's condition is that its limit is still the one
// read; a concurrent change of the key's controls makes it read again
// (up to maxTxAttempts times).
func (s *Store) SetControls(ctx context.Context, id string, c auth.Controls) (auth.Record, error) {
	if err := c.Check(); err != nil {
		return auth.Record{}, err
	}
	for attempt := 0; ; attempt++ {
		done, err := s.setControls(ctx, id, c)
		switch {
		case err != nil:
			return auth.Record{}, err
		case done:
			return s.KeyByID(ctx, id)
		case attempt+1 == maxTxAttempts:
			return auth.Record{}, fmt.Errorf("set controls of key %s: its limit changed concurrently %d times: %w", id, maxTxAttempts, errControlsChanged)
		}
		if err := backoff(ctx, attempt); err != nil {
			return auth.Record{}, err
		}
	}
}

// errControlsChanged is SetControls' error when another change of the
// key's controls kept winning the race.
var errControlsChanged = errors.New("the key's controls are being changed by another request")

// setControls is one attempt of SetControls: done false (nothing
// written) if the key's limit changed since it was read.
func (s *Store) setControls(ctx context.Context, id string, c auth.Controls) (bool, error) {
	ptr, err := s.keyIDItem(ctx, id)
	if err != nil {
		return false, err
	}
	var set, remove []string
	vals := map[string]types.AttributeValue{}
	names := map[string]string{}
	field := func(name, attr string, v types.AttributeValue, present bool) {
		names["#"+name] = attr
		if present {
			set = append(set, "#"+name+" = :"+name)
			vals[":"+name] = v
		} else {
			remove = append(remove, "#"+name)
		}
	}
	field("n", "name", str(c.Name), c.Name != "")
	models, err := marshal(c.Models)
	if err != nil {
		return false, fmt.Errorf("set controls of key %s: encode: %w", id, err)
	}
	field("m", "models", models, len(c.Models) > 0)
	field("e", "expires_at", num(c.ExpiresAt), c.ExpiresAt != 0)
	field("r", "credit_limit_reset", str(c.CreditLimitReset), c.CreditLimitReset != auth.ResetNever)
	field("j", "jobs", str(c.Jobs), c.Jobs != auth.JobsAccount)
	// The counters' limit (left + used), and the change of it.
	var limit credits.Amount
	if c.CreditLimit != nil {
		limit = *c.CreditLimit
	}
	idVals := map[string]types.AttributeValue{":d": amountNum(limit - (ptr.Left + ptr.Used)), ":z": num(0)}
	idCond := "attribute_exists(pk) AND attribute_not_exists(#lim)"
	if ptr.Limit != nil {
		idCond = "attribute_exists(pk) AND #lim = :old"
		idVals[":old"] = amountNum(*ptr.Limit)
	}
	idUpdate := &types.Update{
		TableName:                 aws.String(s.accounts),
		Key:                       keyIDKey(id),
		ConditionExpression:       aws.String(idCond),
		UpdateExpression:          aws.String("SET #left = if_not_exists(#left, :z) + :d REMOVE #lim"),
		ExpressionAttributeNames:  map[string]string{"#lim": "credit_limit", "#left": "left"},
		ExpressionAttributeValues: idVals,
	}
	if c.CreditLimit != nil {
		field("l", "credit_limit", amountNum(*c.CreditLimit), true)
		idUpdate.UpdateExpression = aws.String("SET #left = if_not_exists(#left, :z) + :d, #lim = :l")
		idVals[":l"] = amountNum(*c.CreditLimit)
	} else {
		field("l", "credit_limit", nil, false)
	}
	update := ""
	if len(set) > 0 {
		update = "SET " + strings.Join(set, ", ")
	}
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	rec := &types.Update{
		TableName:                aws.String(s.accounts),
		Key:                      keyHashKey(ptr.Hash),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		UpdateExpression:         aws.String(strings.TrimSpace(update)),
		ExpressionAttributeNames: names,
	}
	if len(vals) > 0 {
		rec.ExpressionAttributeValues = vals
	}
	items := []types.TransactWriteItem{{Update: rec}, {Update: idUpdate}}
	changed := false
	err = s.transact(ctx, "set controls of key "+id, items, func(reasons []types.CancellationReason) (bool, error) {
		switch {
		case failed(reasons, 0):
			return true, auth.ErrKeyNotFound
		case failed(reasons, 1):
			changed = true // or deleted: the next attempt's read tells
			return true, nil
		}
		return false, nil
	})
	return err == nil && !changed, err
}

// RevokeKey implements auth.Store. Revoking a revoked key keeps the first
// revocation time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (auth.Record, error) {
	ptr, err := s.keyIDItem(ctx, id)
	if err != nil {
		return auth.Record{}, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.accounts),
		Key:                       keyHashKey(ptr.Hash),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		UpdateExpression:          aws.String("SET revoked = if_not_exists(revoked, :at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": num(at.Unix())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	if err != nil {
		return auth.Record{}, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return decodeKey(out.Attributes)
}

// TouchKey implements auth.Toucher: one UpdateItem of the key's record,
// only if it exists.
func (s *Store) TouchKey(ctx context.Context, hash string, at time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.accounts),
		Key:                       keyHashKey(hash),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		UpdateExpression:          aws.String("SET last_used = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": num(at.Unix())},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("touch key: %w", err)
	}
	return nil
}
