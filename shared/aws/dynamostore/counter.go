package dynamostore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ratePrefix starts a rate-limit counter's partition key.
const ratePrefix = "rate#"

// Incr adds one to the counter named key and returns the new count: one
// atomic UpdateItem (ADD) on the item pk "rate#<key>", sk "rate" of the
// accounts table, which TTL deletes after expires (DynamoDB's TTL sweeps
// lazily, so callers put the window in key rather than rely on deletion).
// It satisfies ratelimit.Counter.
func (s *Store) Incr(ctx context.Context, key string, expires time.Time) (int64, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.accounts),
		Key:                       map[string]types.AttributeValue{"pk": str(ratePrefix + key), "sk": str("rate")},
		UpdateExpression:          aws.String("ADD #n :one SET " + TTLAttribute + " = :exp"),
		ExpressionAttributeNames:  map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":exp": num(expires.Unix())},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", key, err)
	}
	n, ok := out.Attributes["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("count %s: no count returned", key)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", key, err)
	}
	return v, nil
}
