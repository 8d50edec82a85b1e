package dynamostore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/jobs"
)

// The index of an account's jobs (see the package doc).
const (
	// AccountIndex is the jobs table's global secondary index of jobs by
	// account, newest first. Projection INCLUDE status, type, model: the
	// filters of List run in the index, and the index is written only when
	// a job is created or changes status (not on every poll claim).
	AccountIndex = "by_account"
	// AccountAttribute is its partition key (S): the job's account.
	AccountAttribute = "account"
	// CreatedIDAttribute is its sort key (S): createdID(created, id).
	CreatedIDAttribute = "created_id"
	// createdDigits zero-pads the created second so that the string order
	// is the numeric one.
	createdDigits = 12
	// idCeiling sorts after every job id character ([a-z0-9_]).
	idCeiling = "~"
	// listMaxPages bounds the index pages one List reads: a page whose
	// filters match few jobs stops there with a cursor (has_more).
	listMaxPages = 10
	// listFilteredPage is the Limit of one index Query when filters apply
	// (index items are about 150 bytes: 500 is under 20 read units).
	listFilteredPage = 500
	// batchGetMax is BatchGetItem's key limit (jobs.MaxListLimit fits).
	batchGetMax = 100
)

func accountIndexAttributes() []string { return []string{"status", "type", "model"} }

// createdID is the AccountIndex sort key of the job (created, id).
func createdID(created int64, id string) string {
	return fmt.Sprintf("%0*d#%s", createdDigits, created, id)
}

// parseCreatedID is createdID's inverse.
func parseCreatedID(s string) (jobs.Cursor, bool) {
	c, id, ok := strings.Cut(s, "#")
	if !ok || len(c) != createdDigits || id == "" {
		return jobs.Cursor{}, false
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil {
		return jobs.Cursor{}, false
	}
	return jobs.Cursor{Created: n, ID: id}, true
}

// List implements jobs.Store.
//
// With q.Account set it Queries AccountIndex (eventually consistent)
// newest first (ascending with q.Ascending), with a key condition for the cursor, q.Since and q.Until
// and a FilterExpression for status, type and model, until the page is
// full plus one match (has_more), the index is exhausted, or listMaxPages
// pages were read (the page then ends at the last index item read, with a
// cursor). It then reads the page's jobs with one strongly consistent
// BatchGetItem and drops any that expired or no longer match (their
// status changed since the index saw it). Cost: the index pages read (at
// most listMaxPages x 1 MB; one small page without filters) plus one read
// unit per job returned.
//
// With q.Key it keeps that key's jobs only (listOfKey).
//
// With q.Account "" (the operator's listing of every account) it Scans
// the whole jobs table with the filters, keeping the first q.Limit+1
// matches in q's order: its cost is the table's size in read units on every page,
// which is acceptable for an operator tool and for nothing on the
// request path. (A sharded index like QueuedIndex would make it a Query,
// at the price of a second index written on every create and status
// change.)
func (s *Store) List(ctx context.Context, q jobs.ListQuery) ([]*jobs.Job, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	cur, _ := jobs.DecodeCursor(q.Cursor) // checked by Normalize
	if q.Key != "" && q.Account != "" {
		return s.listOfKey(ctx, q, cur)
	}
	var keys []jobs.Cursor
	var next string
	var err error
	if q.Account != "" {
		keys, next, err = s.queryAccount(ctx, q, cur)
	} else {
		keys, next, err = s.scanAll(ctx, q, cur)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	js, err := s.getJobs(ctx, keys)
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	out := js[:0]
	for _, j := range js {
		if q.Match(j) {
			out = append(out, j)
		}
	}
	return out, next, nil
}

// listOfKey is List of the jobs one key of q.Account created (q.Key): the
// index has no key, so it reads the account's pages as List does and
// keeps the key's jobs, page after page (at most listMaxPages), until it
// has q.Limit of them or the listing ends. A page cut short by that bound
// ends with a cursor, as a filtered List does. Cost: per page read, an
// index Query and a BatchGetItem of up to q.Limit jobs, whether they are
// the key's or not.
func (s *Store) listOfKey(ctx context.Context, q jobs.ListQuery, cur jobs.Cursor) ([]*jobs.Job, string, error) {
	var out []*jobs.Job
	next := ""
	for page := 0; page < listMaxPages; page++ {
		keys, n, err := s.queryAccount(ctx, q, cur)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		js, err := s.getJobs(ctx, keys)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range js {
			if !q.Match(j) {
				continue
			}
			if len(out) == q.Limit {
				return out, jobs.CursorOf(out[len(out)-1]).Encode(), nil
			}
			out = append(out, j)
		}
		if next = n; next == "" {
			return out, "", nil
		}
		if cur, err = jobs.DecodeCursor(next); err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
	}
	return out, next, nil
}

// keyRange returns the inclusive created_id bounds of q after cur ("" for
// none) and the created_id to skip (the cursor's own job): the cursor
// bounds the range from above newest first, from below ascending.
func keyRange(q *jobs.ListQuery, cur jobs.Cursor) (lo, hi, skip string) {
	if q.Since != 0 {
		lo = fmt.Sprintf("%0*d#", createdDigits, q.Since)
	}
	if q.Until != 0 {
		hi = fmt.Sprintf("%0*d#%s", createdDigits, q.Until, idCeiling)
	}
	if !cur.IsZero() {
		c := createdID(cur.Created, cur.ID)
		switch {
		case q.Ascending && (lo == "" || c > lo):
			lo, skip = c, c
		case !q.Ascending && (hi == "" || c < hi):
			hi, skip = c, c
		}
	}
	return lo, hi, skip
}

// filterExpr returns the FilterExpression of q's status, type and model
// ("" if none), adding its names and values.
func filterExpr(q *jobs.ListQuery, names map[string]string, vals map[string]types.AttributeValue) string {
	var parts []string
	add := func(attr, v string) {
		if v == "" {
			return
		}
		n := fmt.Sprintf("#f%d", len(parts))
		names[n] = attr
		vals[":"+n[1:]] = str(v)
		parts = append(parts, n+" = :"+n[1:])
	}
	add("status", string(q.Status))
	add("type", q.Type)
	add("model", q.Model)
	return strings.Join(parts, " AND ")
}

// queryAccount returns the keys of a page of q.Account's jobs after cur
// and the next page's cursor.
func (s *Store) queryAccount(ctx context.Context, q jobs.ListQuery, cur jobs.Cursor) ([]jobs.Cursor, string, error) {
	names := map[string]string{"#a": AccountAttribute}
	vals := map[string]types.AttributeValue{":a": str(q.Account)}
	cond := "#a = :a"
	lo, hi, skip := keyRange(&q, cur)
	if lo != "" || hi != "" {
		names["#k"] = CreatedIDAttribute
	}
	switch {
	case lo != "" && hi != "":
		cond += " AND #k BETWEEN :lo AND :hi"
		vals[":lo"], vals[":hi"] = str(lo), str(hi)
	case hi != "":
		cond += " AND #k <= :hi"
		vals[":hi"] = str(hi)
	case lo != "":
		cond += " AND #k >= :lo"
		vals[":lo"] = str(lo)
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.jobs),
		IndexName:                aws.String(AccountIndex),
		KeyConditionExpression:   aws.String(cond),
		ExpressionAttributeNames: names,
		ScanIndexForward:         aws.Bool(q.Ascending),
		// The page, one more to know whether there is a next one, and
		// the cursor's own item.
		Limit: aws.Int32(int32(q.Limit + 2)),
	}
	if f := filterExpr(&q, names, vals); f != "" {
		in.FilterExpression = aws.String(f)
		in.Limit = aws.Int32(listFilteredPage)
	}
	if s.queryPage > 0 { // tests: small pages
		in.Limit = aws.Int32(int32(s.queryPage))
	}
	in.ExpressionAttributeValues = vals
	var keys []jobs.Cursor
	for page := 0; page < listMaxPages; page++ {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("query %s: %w", AccountIndex, err)
		}
		for _, item := range out.Items {
			k := stringAttr(item, CreatedIDAttribute)
			c, ok := parseCreatedID(k)
			if !ok {
				return nil, "", fmt.Errorf("query %s: malformed %s %q", AccountIndex, CreatedIDAttribute, k)
			}
			if k == skip {
				continue
			}
			if len(keys) == q.Limit {
				return keys, keys[len(keys)-1].Encode(), nil
			}
			keys = append(keys, c)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return keys, "", nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	// Bounded: the next page starts after the last index item read.
	last, ok := parseCreatedID(stringAttr(in.ExclusiveStartKey, CreatedIDAttribute))
	if !ok {
		return nil, "", fmt.Errorf("query %s: malformed last evaluated key", AccountIndex)
	}
	return keys, last.Encode(), nil
}

// scanAll returns the keys of a page of every account's jobs after cur
// and the next page's cursor, Scanning the whole table.
func (s *Store) scanAll(ctx context.Context, q jobs.ListQuery, cur jobs.Cursor) ([]jobs.Cursor, string, error) {
	names := map[string]string{"#k": CreatedIDAttribute, "#x": TTLAttribute}
	vals := map[string]types.AttributeValue{":now": num(s.clock().Unix())}
	parts := []string{"attribute_exists(#k)", "(attribute_not_exists(#x) OR #x > :now)"}
	lo, hi, skip := keyRange(&q, cur)
	if lo != "" {
		parts = append(parts, "#k >= :lo")
		vals[":lo"] = str(lo)
	}
	if hi != "" {
		parts = append(parts, "#k <= :hi")
		vals[":hi"] = str(hi)
	}
	if f := filterExpr(&q, names, vals); f != "" {
		parts = append(parts, f)
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(s.jobs),
		FilterExpression:          aws.String(strings.Join(parts, " AND ")),
		ProjectionExpression:      aws.String("#k"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
	if s.queryPage > 0 {
		in.Limit = aws.Int32(int32(s.queryPage))
	}
	// The first q.Limit+1 matches in q's order, kept sorted.
	want := q.Limit + 1
	order := func(top []string) {
		if q.Ascending {
			sort.Strings(top)
		} else {
			sort.Sort(sort.Reverse(sort.StringSlice(top)))
		}
	}
	var top []string
	for {
		out, err := s.db.Scan(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("scan %s: %w", s.jobs, err)
		}
		for _, item := range out.Items {
			if k := stringAttr(item, CreatedIDAttribute); k != skip {
				top = append(top, k)
			}
		}
		if len(top) > 4*want || len(out.LastEvaluatedKey) == 0 {
			order(top)
			top = top[:min(len(top), want)]
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	keys := make([]jobs.Cursor, 0, len(top))
	for _, k := range top {
		c, ok := parseCreatedID(k)
		if !ok {
			return nil, "", fmt.Errorf("scan %s: malformed %s %q", s.jobs, CreatedIDAttribute, k)
		}
		keys = append(keys, c)
	}
	if len(keys) > q.Limit {
		keys = keys[:q.Limit]
		return keys, keys[len(keys)-1].Encode(), nil
	}
	return keys, "", nil
}

// getJobs reads the jobs of keys with strongly consistent BatchGetItems,
// in keys' order; a job gone (or expired) since the index listed it is
// left out.
func (s *Store) getJobs(ctx context.Context, keys []jobs.Cursor) ([]*jobs.Job, error) {
	byID := make(map[string]*jobs.Job, len(keys))
	now := s.clock().Unix()
	for start := 0; start < len(keys); start += batchGetMax {
		var req []map[string]types.AttributeValue
		for _, k := range keys[start:min(start+batchGetMax, len(keys))] {
			req = append(req, map[string]types.AttributeValue{"id": str(k.ID)})
		}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				if attempt == maxTxAttempts {
					return nil, fmt.Errorf("batch get jobs: %d keys still unprocessed", len(req))
				}
				if err := backoff(ctx, attempt-1); err != nil {
					return nil, err
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.jobs: {Keys: req, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return nil, fmt.Errorf("batch get jobs: %w", err)
			}
			for _, item := range out.Responses[s.jobs] {
				if exp := numberAttr(item, TTLAttribute); exp > 0 && exp <= now {
					continue
				}
				j, err := decodeJob(item)
				if err != nil {
					return nil, err
				}
				byID[j.ID] = j
			}
			req = out.UnprocessedKeys[s.jobs].Keys
		}
	}
	js := make([]*jobs.Job, 0, len(keys))
	for _, k := range keys {
		if j, ok := byID[k.ID]; ok {
			js = append(js, j)
		}
	}
	return js, nil
}
