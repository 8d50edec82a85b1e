package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/jobs"
)

// The sparse index of queued jobs (see the package doc).
const (
	// QueuedIndex is the jobs table's global secondary index of queued
	// jobs, KEYS_ONLY.
	QueuedIndex = "queued"
	// QueuedShardAttribute is its partition key (S): "queued#<n>", n in
	// [0, QueuedShards) from the job id.
	QueuedShardAttribute = "queued_shard"
	// QueuedAtAttribute is its sort key (N): Unix seconds when the job's
	// message was last sent (its creation, then each sweep), or for a
	// processing job when its next run is due (jobs.Job.NextRun).
	QueuedAtAttribute = "queued_at"
	// QueuedShards is how many partitions the index spreads queued jobs
	// over, so that a high create rate does not throttle one index
	// partition (and through it the table).
	QueuedShards = 16
	// sweepsAttribute counts a job's sweeps (N).
	sweepsAttribute = "sweeps"
	queuedPrefix    = "queued#"
	// defaultQueryPage is the Limit of one Query of the index.
	defaultQueryPage = 100
)

var _ jobs.SweepStore = (*Store)(nil)

// queuedShard returns the index partition of job id.
func queuedShard(id string) string { return shard(queuedPrefix, id, QueuedShards) }

// shard returns prefix + one of n partition numbers, from key's hash: a
// partition key that spreads a high write rate over n partitions.
func shard(prefix, key string, n uint32) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return prefix + strconv.Itoa(int(h.Sum32()%n))
}

// QueuedBefore implements jobs.SweepStore: it queries each shard of
// QueuedIndex for queued_at < t, oldest first, starting at a shard that
// rotates with t so that a full page from one shard does not starve the
// others. The index is eventually consistent.
func (s *Store) QueuedBefore(ctx context.Context, t time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	page := s.queryPage
	if page <= 0 {
		page = defaultQueryPage
	}
	start := int(uint64(t.Unix()) % QueuedShards)
	var ids []string
	for i := 0; i < QueuedShards && len(ids) < limit; i++ {
		shard := queuedPrefix + strconv.Itoa((start+i)%QueuedShards)
		var startKey map[string]types.AttributeValue
		// Every page but the last returns at least one id, so limit+1
		// pages are enough; the bound only guards against a misbehaving
		// server.
		for pages := 0; pages <= limit && len(ids) < limit; pages++ {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(s.jobs),
				IndexName:                 aws.String(QueuedIndex),
				KeyConditionExpression:    aws.String("#p = :p AND #a < :t"),
				ExpressionAttributeNames:  map[string]string{"#p": QueuedShardAttribute, "#a": QueuedAtAttribute},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(shard), ":t": num(t.Unix())},
				ProjectionExpression:      aws.String("id"),
				Limit:                     aws.Int32(int32(min(page, limit-len(ids)))),
				ExclusiveStartKey:         startKey,
			})
			if err != nil {
				return ids, fmt.Errorf("list queued jobs in %s: %w", shard, err)
			}
			for _, item := range out.Items {
				if id := stringAttr(item, "id"); id != "" {
					ids = append(ids, id)
				}
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			startKey = out.LastEvaluatedKey
		}
	}
	return ids, nil
}

// MarkSwept implements jobs.SweepStore with one UpdateItem conditioned on
// the job waiting for a message (queued, or processing with its run
// overdue): ADD sweeps 1, SET queued_at = at.
func (s *Store) MarkSwept(ctx context.Context, id string, at time.Time) (int, error) {
	if id == "" || strings.HasPrefix(id, idemPrefix) {
		return 0, jobs.ErrNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.jobs),
		Key:                 map[string]types.AttributeValue{"id": str(id)},
		ConditionExpression: aws.String("#s IN (:q, :p) AND attribute_exists(#a)"),
		UpdateExpression:    aws.String("SET #a = :at ADD #n :one"),
		ExpressionAttributeNames: map[string]string{
			"#s": "status", "#a": QueuedAtAttribute, "#n": sweepsAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":q": str(string(jobs.Queued)), ":p": str(string(jobs.Processing)), ":at": num(at.Unix()), ":one": num(1),
		},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		status := stringAttr(ccf.Item, "status")
		if status == "" { // no such job, or a store that does not return it
			cur, gerr := s.Get(ctx, id)
			if errors.Is(gerr, jobs.ErrNotFound) {
				return 0, jobs.ErrNotFound
			}
			if gerr != nil {
				return 0, fmt.Errorf("sweep job %s: %w (and reading it: %v)", id, jobs.ErrConflict, gerr)
			}
			status = string(cur.Status)
		}
		return 0, fmt.Errorf("sweep job %s: status is %s: %w", id, status, jobs.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("sweep job %s: %w", id, err)
	}
	n := numberAttr(out.Attributes, sweepsAttribute)
	if n <= 0 {
		return 0, fmt.Errorf("sweep job %s: no sweep count returned", id)
	}
	return int(n), nil
}
