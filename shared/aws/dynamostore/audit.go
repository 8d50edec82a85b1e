package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/admin"
)

// The audit log lives in the accounts table under one partition,
// pk "audit", sk the entry's time-ordered id: a Query reads it newest
// first. Operator actions are rare (a few a day), far below one
// partition's write limit.
const pkAudit = "audit"

var _ admin.AuditStore = (*Store)(nil)

// auditItem is an audit entry as stored.
type auditItem struct {
	PK     string `json:"pk"`
	SK     string `json:"sk"`
	At     int64  `json:"at"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
	Detail string `json:"detail,omitempty"`
}

// AddAudit appends e to the audit log.
func (s *Store) AddAudit(ctx context.Context, e admin.AuditEntry) error {
	item, err := marshalMap(auditItem{PK: pkAudit, SK: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail})
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.accounts), Item: item}); err != nil {
		return fmt.Errorf("add audit entry: %w", err)
	}
	return nil
}

// Audit returns up to limit entries older than before ("" for the
// newest), newest first.
func (s *Store) Audit(ctx context.Context, before string, limit int) ([]admin.AuditEntry, error) {
	cond := "pk = :pk"
	vals := map[string]types.AttributeValue{":pk": str(pkAudit)}
	if before != "" {
		cond += " AND sk < :before"
		vals[":before"] = str(before)
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.accounts), KeyConditionExpression: aws.String(cond),
		ExpressionAttributeValues: vals, ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	entries := make([]admin.AuditEntry, 0, len(out.Items))
	for _, m := range out.Items {
		var it auditItem
		if err := unmarshalMap(m, &it); err != nil {
			return nil, err
		}
		entries = append(entries, admin.AuditEntry{ID: it.SK, At: it.At, Actor: it.Actor, Action: it.Action, Target: it.Target, Detail: it.Detail})
	}
	return entries, nil
}
