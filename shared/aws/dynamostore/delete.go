package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/jobs"
)

var _ jobs.DeleteStore = (*Store)(nil)

// DeletedAttribute is the Unix second a job was deleted (jobs.Job.Deleted).
const DeletedAttribute = "deleted"

// Delete implements jobs.DeleteStore with one conditional UpdateItem: the
// job exists, is final, not expired and not deleted yet; it SETs deleted
// and REMOVEs created_id, which takes the job out of AccountIndex (a
// sparse index) and out of the every-account Scan (it lists items with a
// created_id). The status stays, so the stream record of this write
// settles nothing (ChangeFromImages ignores it).
func (s *Store) Delete(ctx context.Context, id string, at int64) (*jobs.Job, error) {
	if id == "" || strings.HasPrefix(id, idemPrefix) {
		return nil, jobs.ErrNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.jobs),
		Key:       map[string]types.AttributeValue{"id": str(id)},
		ConditionExpression: aws.String("attribute_exists(id) AND #s IN (:completed, :failed) AND attribute_not_exists(#d)" +
			" AND (attribute_not_exists(#x) OR #x > :now)"),
		UpdateExpression:         aws.String("SET #d = :at REMOVE #k"),
		ExpressionAttributeNames: map[string]string{"#s": "status", "#d": DeletedAttribute, "#x": TTLAttribute, "#k": CreatedIDAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":completed": str(string(jobs.Completed)), ":failed": str(string(jobs.Failed)),
			":at": num(at), ":now": num(s.clock().Unix()),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		old := ccf.Item
		if len(old) == 0 { // no such item, or a store that does not return it
			j, gerr := s.Get(ctx, id)
			if gerr != nil {
				return nil, gerr
			}
			old, _ = encodeJob(j)
		}
		j, derr := decodeJob(old)
		switch {
		case derr != nil:
			return nil, fmt.Errorf("delete job %s: %w", id, derr)
		case j.Deleted != 0, numberAttr(old, TTLAttribute) > 0 && numberAttr(old, TTLAttribute) <= s.clock().Unix():
			return nil, jobs.ErrNotFound
		}
		return nil, fmt.Errorf("delete job %s: status is %s: %w", id, j.Status, jobs.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("delete job %s: %w", id, err)
	}
	return decodeJob(out.Attributes)
}
