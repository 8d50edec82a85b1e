package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/admin"
)

// The console's live sessions live in the accounts table, one item each:
// pk "session#" + id, sk "session", expires (Unix seconds, the table's
// TTL attribute, so that DynamoDB deletes it once it has expired) and,
// once its operator signed out, ended. Sign-ins are rare; each console
// request reads its session's item (a strongly consistent GetItem).
const (
	pkSessionPrefix = "session#"
	skSession       = "session"
)

var _ admin.SessionStore = (*Store)(nil)

func sessionKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(pkSessionPrefix + id), "sk": str(skSession)}
}

// AddSession records session id, live until expires.
func (s *Store) AddSession(ctx context.Context, id string, expires int64) error {
	item := sessionKey(id)
	item[TTLAttribute] = num(expires)
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.accounts), Item: item}); err != nil {
		return fmt.Errorf("add console session: %w", err)
	}
	return nil
}

// SessionLive reports whether id is a session that has neither ended nor
// expired at now (an expired item may outlive its TTL for a while).
func (s *Store) SessionLive(ctx context.Context, id string, now int64) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.accounts), Key: sessionKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("read console session: %w", err)
	}
	if out.Item == nil || out.Item["ended"] != nil {
		return false, nil
	}
	e, ok := out.Item[TTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return false, nil
	}
	exp, err := strconv.ParseInt(e.Value, 10, 64)
	return err == nil && exp > now, nil
}

// EndSession marks session id ended (an UpdateItem, so the item keeps its
// TTL and is deleted by it); an unknown session is left alone.
func (s *Store) EndSession(ctx context.Context, id string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.accounts), Key: sessionKey(id),
		UpdateExpression:          aws.String("SET ended = :t"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("end console session: %w", err)
	}
	return nil
}
