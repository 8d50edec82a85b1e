package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/webhooks"
)

// Webhooks live in the accounts table:
//
//	pk = "acct#" + id,     sk = "webhook"   the account's webhooks.Config: url, secret,
//	                                        previous, previous_until, updated
//	pk = "whd#" + job id,  sk = "delivery"  a job's webhooks.Delivery; expires (TTL)
//	                                        DeliveryRetention after its deadline
//
// Every change is one conditional UpdateItem or PutItem: the first secret
// with if_not_exists, a rotation copying secret to previous in the same
// update, a delivery's writes conditioned on its attempts.

var _ webhooks.Store = (*Store)(nil)

const (
	skWebhook      = "webhook"
	deliveryPrefix = "whd#"
	skDelivery     = "delivery"
)

// DeliveryRetention is how long a delivery record is kept after its
// retries' deadline.
const DeliveryRetention = 30 * 24 * time.Hour

func webhookKey(account string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(acctPrefix + account), "sk": str(skWebhook)}
}

func deliveryKey(jobID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(deliveryPrefix + jobID), "sk": str(skDelivery)}
}

// WebhookConfig implements webhooks.Store with one strongly consistent
// GetItem.
func (s *Store) WebhookConfig(ctx context.Context, account string) (webhooks.Config, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.accounts), Key: webhookKey(account), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: %w", account, err)
	}
	c := webhooks.Config{Account: account}
	if len(out.Item) == 0 {
		return c, nil
	}
	if err := unmarshalMap(out.Item, &c); err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: decode: %w", account, err)
	}
	c.Account = account
	return c, nil
}

// updateConfig runs one UpdateItem on account's config and decodes the
// new item; a failed condition is refused.
func (s *Store) updateConfig(ctx context.Context, account, update, cond string, values map[string]types.AttributeValue, refused error) (webhooks.Config, error) {
	values[":acct"] = str(account)
	update += ", #account = :acct"
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.accounts), Key: webhookKey(account),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  attrNames(update + " " + cond),
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && refused != nil {
		return webhooks.Config{}, refused
	}
	if err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: %w", account, err)
	}
	c := webhooks.Config{Account: account}
	if err := unmarshalMap(out.Attributes, &c); err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: decode: %w", account, err)
	}
	return c, nil
}

// attrName is a #name placeholder of an expression.
var attrName = regexp.MustCompile(`#\w+`)

// attrNames maps each #name expr uses to the attribute name (DynamoDB
// refuses unused ones).
func attrNames(expr string) map[string]string {
	names := map[string]string{}
	for _, n := range attrName.FindAllString(expr, -1) {
		names[n] = n[1:]
	}
	return names
}

// EnsureWebhookSecret implements webhooks.Store.
func (s *Store) EnsureWebhookSecret(ctx context.Context, account, secret string, at int64) (webhooks.Config, error) {
	return s.updateConfig(ctx, account, "SET #secret = if_not_exists(#secret, :s), #updated = :at", "",
		map[string]types.AttributeValue{":s": str(secret), ":at": num(at)}, nil)
}

// RotateWebhookSecret implements webhooks.Store: the previous secret is
// the current one, copied in the same update.
func (s *Store) RotateWebhookSecret(ctx context.Context, account, secret string, until, at int64) (webhooks.Config, error) {
	return s.updateConfig(ctx, account, "SET #previous = #secret, #secret = :s, #previous_until = :until, #updated = :at", "attribute_exists(#secret)",
		map[string]types.AttributeValue{":s": str(secret), ":until": num(until), ":at": num(at)}, webhooks.ErrNotFound)
}

// SetWebhookURL implements webhooks.Store.
func (s *Store) SetWebhookURL(ctx context.Context, account, url string, at int64) (webhooks.Config, error) {
	if url == "" {
		return s.updateConfig(ctx, account, "REMOVE #url SET #updated = :at", "",
			map[string]types.AttributeValue{":at": num(at)}, nil)
	}
	return s.updateConfig(ctx, account, "SET #url = :u, #updated = :at", "",
		map[string]types.AttributeValue{":u": str(url), ":at": num(at)}, nil)
}

// deliveryItem is a delivery as stored.
type deliveryItem struct {
	PK      string `json:"pk"`
	SK      string `json:"sk"`
	Expires int64  `json:"expires"`
	webhooks.Delivery
}

// Delivery implements webhooks.Store with one strongly consistent GetItem.
func (s *Store) Delivery(ctx context.Context, jobID string) (*webhooks.Delivery, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.accounts), Key: deliveryKey(jobID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("delivery %s: %w", jobID, err)
	}
	if len(out.Item) == 0 {
		return nil, webhooks.ErrNotFound
	}
	var it deliveryItem
	if err := unmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("delivery %s: decode: %w", jobID, err)
	}
	return &it.Delivery, nil
}

func (s *Store) putDelivery(ctx context.Context, d *webhooks.Delivery, cond string, values map[string]types.AttributeValue) error {
	item, err := marshalMap(deliveryItem{PK: deliveryPrefix + d.JobID, SK: skDelivery,
		Expires: d.Deadline + int64(DeliveryRetention/time.Second), Delivery: *d})
	if err != nil {
		return fmt.Errorf("delivery %s: encode: %w", d.JobID, err)
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.accounts), Item: item, ConditionExpression: aws.String(cond)}
	if len(values) > 0 {
		in.ExpressionAttributeValues = values
		in.ExpressionAttributeNames = map[string]string{"#attempts": "attempts"}
	}
	_, err = s.db.PutItem(ctx, in)
	return err
}

// AddDelivery implements webhooks.Store: PutItem if attribute_not_exists.
func (s *Store) AddDelivery(ctx context.Context, d *webhooks.Delivery) (*webhooks.Delivery, error) {
	err := s.putDelivery(ctx, d, "attribute_not_exists(pk)", nil)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return s.Delivery(ctx, d.JobID)
	}
	if err != nil {
		return nil, fmt.Errorf("add delivery %s: %w", d.JobID, err)
	}
	c := *d
	return &c, nil
}

// SaveDelivery implements webhooks.Store: PutItem conditioned on the
// stored attempts.
func (s *Store) SaveDelivery(ctx context.Context, d *webhooks.Delivery, attempts int) error {
	err := s.putDelivery(ctx, d, "#attempts = :prev", map[string]types.AttributeValue{":prev": num(int64(attempts))})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("save delivery %s: %w", d.JobID, webhooks.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("save delivery %s: %w", d.JobID, err)
	}
	return nil
}

var _ webhooks.PendingStore = (*Store)(nil)

// PendingDeliveries implements webhooks.PendingStore with a strongly
// consistent, filtered Scan of the accounts table (its delivery items,
// pending, next attempt before t), page by page until limit ids: an
// operator-scale read, made once when `genway serve` starts on this
// backend, never on a request's path.
func (s *Store) PendingDeliveries(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var ids []string
	var start map[string]types.AttributeValue
	for len(ids) < limit {
		out, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName:                aws.String(s.accounts),
			FilterExpression:         aws.String("begins_with(pk, :p) AND #s = :pending AND #n < :t"),
			ProjectionExpression:     aws.String("job_id"),
			ExpressionAttributeNames: map[string]string{"#s": "status", "#n": "next_at"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":p": str(deliveryPrefix), ":pending": str(webhooks.Pending), ":t": num(before.Unix()),
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return ids, fmt.Errorf("pending deliveries: %w", err)
		}
		for _, item := range out.Items {
			if id := stringAttr(item, "job_id"); id != "" && len(ids) < limit {
				ids = append(ids, id)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	return ids, nil
}
