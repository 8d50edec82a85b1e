package dynamostore

import (
	"context"
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

// usageItem is a usage counter as stored (rows written before the token
// classes were counted have none of them: 0).
type usageItem struct {
	PK                 string `json:"pk"`
	SK                 string `json:"sk"`
	Day                string `json:"day"`
	Model              string `json:"model"`
	Requests           int64  `json:"requests"`
	PromptTokens       int64  `json:"prompt_tokens"`
	CompletionTokens   int64  `json:"completion_tokens"`
	CachedTokens       int64  `json:"cached_tokens"`
	CacheWriteTokens   int64  `json:"cache_write_tokens"`
	CacheWrite1hTokens int64  `json:"cache_write_1h_tokens"`
	ReasoningTokens    int64  `json:"reasoning_tokens"`
	Credits            amount `json:"credits"`
}

// Usage implements credits.UsageStore with one Query of the account's
// partition over the sort-key range of the days.
func (s *Store) Usage(ctx context.Context, account, fromDay, toDay string) ([]credits.Usage, error) {
	out, err := queryDays(ctx, s, account, usagePrefix, fromDay, toDay, func(u usageItem) credits.Usage {
		return credits.Usage{
			Account: account, Day: u.Day, Model: u.Model, Requests: u.Requests,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
			CacheWriteTokens: u.CacheWriteTokens, CacheWrite1hTokens: u.CacheWrite1hTokens, ReasoningTokens: u.ReasoningTokens,
			Credits: credits.Amount(u.Credits),
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
