package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/auth"
)

// keyItem is an API key record as stored (pk "key#<hash>", sk "key").
type keyItem struct {
	PK string `json:"pk"`
	SK string `json:"sk"`
	auth.Record
}

// PutKey implements auth.Store. It writes the record and its id pointer in
// one transaction, and fails if a key with the same hash or id exists.
func (s *Store) PutKey(ctx context.Context, r auth.Record) error {
	if r.Hash == "" || r.ID == "" || r.Account == "" {
		return fmt.Errorf("put key: missing id, hash or account")
	}
	item, err := marshalMap(keyItem{PK: keyPrefix + r.Hash, SK: skKey, Record: r})
	if err != nil {
		return fmt.Errorf("put key %s: encode: %w", r.ID, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(s.accounts), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
		{Put: &types.Put{
			TableName: aws.String(s.accounts),
			Item: map[string]types.AttributeValue{
				"pk": str(keyIDPrefix + r.ID), "sk": str(skKey), "hash": str(r.Hash),
			},
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

// KeyByHash implements auth.Store with one strongly consistent GetItem.
func (s *Store) KeyByHash(ctx context.Context, hash string) (auth.Record, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.accounts),
		Key:            map[string]types.AttributeValue{"pk": str(keyPrefix + hash), "sk": str(skKey)},
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
	return k.Record, nil
}

// Keys implements auth.Store by Scanning the accounts table (operator use
// only). Records are ordered by creation time, then id.
func (s *Store) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	filter := "begins_with(pk, :p)"
	vals := map[string]types.AttributeValue{":p": str(keyPrefix)}
	if account != "" {
		filter += " AND account = :a"
		vals[":a"] = str(account)
	}
	var out []auth.Record
	err := s.scan(ctx, filter, vals, func(m map[string]types.AttributeValue) error {
		r, err := decodeKey(m)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	auth.SortRecords(out)
	return out, nil
}

// RevokeKey implements auth.Store. Revoking a revoked key keeps the first
// revocation time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (auth.Record, error) {
	ptr, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.accounts),
		Key:            map[string]types.AttributeValue{"pk": str(keyIDPrefix + id), "sk": str(skKey)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("revoke key %s: %w", id, err)
	}
	hash, ok := ptr.Item["hash"].(*types.AttributeValueMemberS)
	if !ok {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.accounts),
		Key:                       map[string]types.AttributeValue{"pk": str(keyPrefix + hash.Value), "sk": str(skKey)},
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
		Key:                       map[string]types.AttributeValue{"pk": str(keyPrefix + hash), "sk": str(skKey)},
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
