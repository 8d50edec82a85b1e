package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
)

// usagePrefix starts a usage item's sort key: "usage#<day>#<model>" in the
// account's partition, so that a day range is one Query.
const usagePrefix = "usage#"

// jobUsagePrefix starts a job usage item's sort key:
// "jobusage#<day>#<type>#<model>" in the account's partition, so that a
// day range is one Query (beside the chat usage's).
const jobUsagePrefix = "jobusage#"

var _ credits.UsageStore = (*Store)(nil)

// usageItem is a usage counter as stored.
type usageItem struct {
	PK               string `json:"pk"`
	SK               string `json:"sk"`
	Day              string `json:"day"`
	Model            string `json:"model"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	Credits          amount `json:"credits"`
}

// AddUsage implements credits.UsageStore: an UpdateItem ADD of the
// counters, or, when u.Credits > 0, one transaction of that update, the
// account debit (conditioned on the account existing) and the Chat ledger
// entry ChatEntryID(id), put with attribute_not_exists: if that condition
// fails, id was applied before and AddUsage returns nil, the transaction
// having written nothing. The usage's credits, the key's spend and the
// balance are conditioned on staying within ±credits.MaxAmount (bounds
// computed here: a condition cannot add); past it the error wraps
// credits.ErrInvalidUsage and credits.ErrAmountRange, and nothing is
// written.
func (s *Store) AddUsage(ctx context.Context, id string, u credits.Usage) error {
	if err := credits.CheckUsage(id, u); err != nil {
		return err
	}
	tooMuch := func(what string) error {
		return fmt.Errorf("add usage of %s: %s: %w: %w", u.Account, what, credits.ErrInvalidUsage, credits.ErrAmountRange)
	}
	usage := types.Update{
		TableName: aws.String(s.accounts),
		Key:       map[string]types.AttributeValue{"pk": str(acctPrefix + u.Account), "sk": str(usagePrefix + u.Day + "#" + u.Model)},
		UpdateExpression: aws.String("SET #d = :day, #m = :model " +
			"ADD requests :n, prompt_tokens :p, completion_tokens :c, credits :cr"),
		ConditionExpression:      aws.String("attribute_not_exists(credits) OR credits <= :room"),
		ExpressionAttributeNames: map[string]string{"#d": "day", "#m": "model"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":day": str(u.Day), ":model": str(u.Model), ":n": num(u.Requests),
			":p": num(u.PromptTokens), ":c": num(u.CompletionTokens), ":cr": amountNum(u.Credits),
			":room": amountNum(credits.MaxAmount - u.Credits),
		},
	}
	if u.Credits == 0 {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: usage.TableName, Key: usage.Key, UpdateExpression: usage.UpdateExpression, ConditionExpression: usage.ConditionExpression,
			ExpressionAttributeNames: usage.ExpressionAttributeNames, ExpressionAttributeValues: usage.ExpressionAttributeValues,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return tooMuch("usage credits")
		}
		if err != nil {
			return fmt.Errorf("add usage of %s: %w", u.Account, err)
		}
		return nil
	}
	if u.Credits > credits.MaxAmount {
		return tooMuch("credits")
	}
	entry, err := marshalMap(newLedgerItem(credits.Entry{ID: credits.ChatEntryID(id), Account: u.Account, Kind: credits.Chat, Amount: u.Credits, Key: u.Key, At: timeNow()}))
	if err != nil {
		return fmt.Errorf("add usage of %s: encode: %w", u.Account, err)
	}
	items := []types.TransactWriteItem{
		{Update: &usage},
		{Update: &types.Update{
			TableName:           aws.String(s.accounts),
			Key:                 acctKey(u.Account),
			ConditionExpression: aws.String("attribute_exists(pk) AND balance >= :floor AND available >= :floor"),
			// The debit as + of the negated amount: see amount.go.
			UpdateExpression: aws.String("SET balance = balance + :na, available = available + :na"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":na": amountNum(-u.Credits), ":floor": amountNum(-credits.MaxAmount + u.Credits),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Put: &types.Put{TableName: aws.String(s.accounts), Item: entry, ConditionExpression: aws.String("attribute_not_exists(sk)")}},
	}
	if u.Key != "" {
		items = append(items, types.TransactWriteItem{Update: s.settleOnKey(u.Key, u.Credits, 0)})
	}
	return s.transact(ctx, "add usage of "+u.Account, items, func(reasons []types.CancellationReason) (bool, error) {
		switch {
		case failed(reasons, 2):
			return true, nil // the entry exists: id was applied before
		case failed(reasons, 1) && len(reasons[1].Item) > 0:
			return true, tooMuch("balance")
		case failed(reasons, 1):
			// No account, or a store that does not return the old item:
			// one read tells.
			if _, err := s.Account(ctx, u.Account); err == nil {
				return true, tooMuch("balance")
			}
			return true, fmt.Errorf("add usage of %s: %w", u.Account, credits.ErrAccountNotFound)
		case failed(reasons, 0):
			return true, tooMuch("usage credits")
		case u.Key != "" && failed(reasons, 3):
			return true, tooMuch("spent of key " + u.Key)
		}
		return false, nil
	})
}

// Usage implements credits.UsageStore with one Query of the account's
// partition over the sort-key range of the days.
func (s *Store) Usage(ctx context.Context, account, fromDay, toDay string) ([]credits.Usage, error) {
	out, err := queryDays(ctx, s, account, usagePrefix, fromDay, toDay, func(u usageItem) credits.Usage {
		return credits.Usage{
			Account: account, Day: u.Day, Model: u.Model, Requests: u.Requests,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Credits: credits.Amount(u.Credits),
		}
	})
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", account, err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Model < out[j].Model
	})
	return out, nil
}

// jobUsageItem is a job usage counter as stored.
type jobUsageItem struct {
	PK      string `json:"pk"`
	SK      string `json:"sk"`
	Day     string `json:"day"`
	JobType string `json:"job_type"`
	Model   string `json:"model"`
	Jobs    int64  `json:"jobs"`
	Credits amount `json:"credits"`
}

// jobUsageUpdate is the ADD of increment u to its counters, for Settle's
// transaction (whose ledger entry condition makes it count once), only if
// the credits stay within credits.MaxAmount.
func (s *Store) jobUsageUpdate(u credits.JobUsage) *types.Update {
	return &types.Update{
		TableName: aws.String(s.accounts),
		Key: map[string]types.AttributeValue{
			"pk": str(acctPrefix + u.Account), "sk": str(jobUsagePrefix + u.Day + "#" + u.JobType + "#" + u.Model),
		},
		UpdateExpression:         aws.String("SET #d = :day, job_type = :type, #m = :model ADD jobs :n, credits :cr"),
		ConditionExpression:      aws.String("attribute_not_exists(credits) OR credits <= :room"),
		ExpressionAttributeNames: map[string]string{"#d": "day", "#m": "model"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":day": str(u.Day), ":type": str(u.JobType), ":model": str(u.Model), ":n": num(u.Jobs), ":cr": amountNum(u.Credits),
			":room": amountNum(credits.MaxAmount - u.Credits),
		},
	}
}

// JobUsage implements credits.UsageStore with one Query of the account's
// partition over the sort-key range of the days.
func (s *Store) JobUsage(ctx context.Context, account, fromDay, toDay string) ([]credits.JobUsage, error) {
	out, err := queryDays(ctx, s, account, jobUsagePrefix, fromDay, toDay, func(u jobUsageItem) credits.JobUsage {
		return credits.JobUsage{Account: account, Day: u.Day, JobType: u.JobType, Model: u.Model, Jobs: u.Jobs, Credits: credits.Amount(u.Credits)}
	})
	if err != nil {
		return nil, fmt.Errorf("job usage of %s: %w", account, err)
	}
	// The key sorts by day, type and model already, but a model holding
	// '#' could sort before a shorter one; sort by the fields.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Day != b.Day {
			return a.Day < b.Day
		}
		if a.JobType != b.JobType {
			return a.JobType < b.JobType
		}
		return a.Model < b.Model
	})
	return out, nil
}

// queryDays reads the account's items whose sort key is prefix followed by
// a day from fromDay to toDay (inclusive; "" is open-ended): one Query of
// the account's partition, every page, each item decoded as an I and
// turned into an O by conv, in key order.
func queryDays[I, O any](ctx context.Context, s *Store, account, prefix, fromDay, toDay string, conv func(I) O) ([]O, error) {
	if err := credits.CheckDayRange(fromDay, toDay); err != nil {
		return nil, err
	}
	// '#' < '$': "<prefix><day>$" sorts after every "<prefix><day>#...",
	// and "<prefix minus its '#'>$" after every item of the prefix.
	lo, hi := prefix+fromDay, strings.TrimSuffix(prefix, "#")+"$"
	if toDay != "" {
		hi = prefix + toDay + "$"
	}
	var out []O
	var start map[string]types.AttributeValue
	for {
		page, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.accounts),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(acctPrefix + account), ":lo": str(lo), ":hi": str(hi),
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, err
		}
		for _, m := range page.Items {
			var it I
			if err := unmarshalMap(m, &it); err != nil {
				return nil, fmt.Errorf("decode: %w", err)
			}
			out = append(out, conv(it))
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = page.LastEvaluatedKey
	}
}
