package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
)

// The records table (Store.RecordsTable) keeps the record of each request
// (credits.Record), one item per record, partition key "id" (S), TTL on
// "expires" (the record's retention after its time). Two global secondary
// indexes, projecting every attribute, list them newest first:
//
//	RecordsByAccount   partition "account", sort "at_id": an account's records
//	RecordsByTime      partition "shard" (rec#0..rec#15, from the id), sort
//	                   "at_id": every record, the operator's listing merges
//	                   the 16 partitions
//
// at_id is the record's Unix milliseconds, 13 digits, "#" and its id, so
// that the string order is the time order. Sixteen partitions because one
// index partition takes about 1000 writes a second: every request writes
// a record, and one partition would cap the service there. The records
// are a table of their own, not items of the accounts table: their two
// indexes would be the accounts table's first, and a stack update cannot
// add two indexes to a table at once; their retention and their cost are
// their own.
const (
	RecordsByAccount = "by_account"
	RecordsByTime    = "by_time"
	// RecordAccountAttribute, RecordShardAttribute and RecordAtIDAttribute
	// are the indexes' key attributes (S).
	RecordAccountAttribute = "account"
	RecordShardAttribute   = "shard"
	RecordAtIDAttribute    = "at_id"
	recordShards           = 16
	// recordWorkers is how many records one AddRecords writes at once
	// (one transaction each).
	recordWorkers = 8
	// recordsMaxPages bounds the index pages one partition's listing
	// reads for a page of filtered records; recordsFilteredPage is the
	// Limit of one such Query.
	recordsMaxPages     = 10
	recordsFilteredPage = 500
)

// ErrNoRecordsTable is returned by the record methods of a Store without
// a RecordsTable.
var ErrNoRecordsTable = errors.New("no records table configured")

var _ credits.RecordStore = (*Store)(nil)

// recordItem is a record as stored: credits.Record's attributes (its json
// tags), its amounts as numbers of credits, and the indexes' keys.
type recordItem struct {
	ID           string         `json:"id"`
	Kind         string         `json:"kind"`
	Account      string         `json:"account"`
	Key          string         `json:"key,omitempty"`
	ModelAsked   string         `json:"model_asked,omitempty"`
	Model        string         `json:"model,omitempty"`
	Provider     string         `json:"provider,omitempty"`
	Attempts     string         `json:"attempts,omitempty"`
	ServiceTier  string         `json:"service_tier,omitempty"`
	Tokens       credits.Tokens `json:"tokens"`
	Rates        ratesItem      `json:"rates"`
	Units        int64          `json:"units,omitempty"`
	UnitPrice    amount         `json:"unit_price,omitempty"`
	Cost         amount         `json:"cost"`
	Status       string         `json:"status"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Partial      bool           `json:"partial,omitempty"`
	Estimated    bool           `json:"estimated,omitempty"`
	Stream       bool           `json:"stream,omitempty"`
	LatencyMS    int64          `json:"latency_ms,omitempty"`
	FirstTokenMS int64          `json:"first_token_ms,omitempty"`
	At           int64          `json:"at"`
	Expires      int64          `json:"expires"`
	AtID         string         `json:"at_id"`
	Shard        string         `json:"shard"`
}

// ratesItem is credits.TokenRates as stored.
type ratesItem struct {
	Input        amount `json:"input,omitempty"`
	CachedInput  amount `json:"cached_input,omitempty"`
	CacheWrite   amount `json:"cache_write,omitempty"`
	CacheWrite1h amount `json:"cache_write_1h,omitempty"`
	Output       amount `json:"output,omitempty"`
}

func newRecordItem(r credits.Record, retention time.Duration) recordItem {
	rt := r.Rates
	return recordItem{ID: r.ID, Kind: r.Kind, Account: r.Account, Key: r.Key, ModelAsked: r.ModelAsked, Model: r.Model,
		Provider: r.Provider, Attempts: r.Attempts, ServiceTier: r.ServiceTier, Tokens: r.Tokens,
		Rates: ratesItem{amount(rt.Input), amount(rt.CachedInput), amount(rt.CacheWrite), amount(rt.CacheWrite1h), amount(rt.Output)},
		Units: r.Units, UnitPrice: amount(r.UnitPrice), Cost: amount(r.Cost), Status: r.Status, FinishReason: r.FinishReason,
		Partial: r.Partial, Estimated: r.Estimated, Stream: r.Stream, LatencyMS: r.LatencyMS, FirstTokenMS: r.FirstTokenMS,
		At: r.At, Expires: r.ExpiresAfter(retention), AtID: recordAtID(r.At, r.ID), Shard: recordShard(r.ID)}
}

func (it recordItem) record() credits.Record {
	rt := it.Rates
	return credits.Record{ID: it.ID, Kind: it.Kind, Account: it.Account, Key: it.Key, ModelAsked: it.ModelAsked, Model: it.Model,
		Provider: it.Provider, Attempts: it.Attempts, ServiceTier: it.ServiceTier, Tokens: it.Tokens,
		Rates: credits.TokenRates{Input: credits.Amount(rt.Input), CachedInput: credits.Amount(rt.CachedInput),
			CacheWrite: credits.Amount(rt.CacheWrite), CacheWrite1h: credits.Amount(rt.CacheWrite1h), Output: credits.Amount(rt.Output)},
		Units: it.Units, UnitPrice: credits.Amount(it.UnitPrice), Cost: credits.Amount(it.Cost), Status: it.Status,
		FinishReason: it.FinishReason, Partial: it.Partial, Estimated: it.Estimated, Stream: it.Stream, LatencyMS: it.LatencyMS,
		FirstTokenMS: it.FirstTokenMS, At: it.At, Expires: it.Expires}
}

// recordAtID is the indexes' sort key of the record (at, id).
func recordAtID(at int64, id string) string { return fmt.Sprintf("%013d#%s", at, id) }

// parseRecordAtID is recordAtID's inverse.
func parseRecordAtID(s string) (credits.RecordCursor, bool) {
	a, id, ok := strings.Cut(s, "#")
	n, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil || id == "" {
		return credits.RecordCursor{}, false
	}
	return credits.RecordCursor{At: n, ID: id}, true
}

// recordShard is the RecordsByTime partition of record id.
func recordShard(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("rec#%d", h.Sum32()%recordShards)
}

func (s *Store) recordRetention() time.Duration {
	if s.RecordRetention > 0 {
		return s.RecordRetention
	}
	return credits.DefaultRecordRetention
}

// recordPut is the conditional Put of r (written once: attribute_not_exists).
func (s *Store) recordPut(r credits.Record) (*types.Put, error) {
	item, err := marshalMap(newRecordItem(r, s.recordRetention()))
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", r.ID, err)
	}
	return &types.Put{TableName: aws.String(s.RecordsTable), Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")}, nil
}

// AddRecords implements credits.RecordStore: one write per record,
// recordWorkers at a time. A record that moves nothing (a failed request,
// a free image or speech) is one conditional PutItem; any other is one
// TransactWriteItems of its Put (attribute_not_exists(id): a record
// written before cancels the transaction, and AddRecords reports it
// written), its usage row's ADD and, when it costs something, the
// account's debit (conditioned on the account existing and the balance
// staying within ±credits.MaxAmount), its Chat ledger entry and its key's
// spend, as AddUsage did for a sum.
func (s *Store) AddRecords(ctx context.Context, rs []credits.Record) []error {
	errs := make([]error, len(rs))
	if s.RecordsTable == "" {
		for i := range errs {
			errs[i] = fmt.Errorf("add record %s: %w", rs[i].ID, ErrNoRecordsTable)
		}
		return errs
	}
	sem := make(chan struct{}, recordWorkers)
	var wg sync.WaitGroup
	for i, r := range rs {
		if errs[i] = credits.CheckAddRecord(r); errs[i] != nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.addRecord(ctx, r); err != nil {
				errs[i] = fmt.Errorf("add record %s of %s: %w", r.ID, r.Account, err)
			}
		}()
	}
	wg.Wait()
	return errs
}

// addRecord writes one checked record and what it moves.
func (s *Store) addRecord(ctx context.Context, r credits.Record) error {
	put, err := s.recordPut(r)
	if err != nil {
		return err
	}
	inc, counted := credits.UsageOf(r)
	charge, charged := credits.ChargeOf(r)
	if !counted && !charged {
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil // written before
		}
		return err
	}
	tooMuch := func(what string) error {
		return fmt.Errorf("%s: %w: %w", what, credits.ErrInvalidRecord, credits.ErrAmountRange)
	}
	items := []types.TransactWriteItem{{Put: put}}
	usageAt, acctAt, keyAt := -1, -1, -1
	if counted {
		usageAt = len(items)
		items = append(items, types.TransactWriteItem{Update: s.usageUpdate(inc)})
	}
	if charged {
		entry, err := marshalMap(newLedgerItem(charge))
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		acctAt = len(items)
		items = append(items,
			types.TransactWriteItem{Update: &types.Update{
				TableName:           aws.String(s.accounts),
				Key:                 acctKey(r.Account),
				ConditionExpression: aws.String("attribute_exists(pk) AND balance >= :floor AND available >= :floor"),
				// The debit as + of the negated amount: see amount.go.
				UpdateExpression: aws.String("SET balance = balance + :na, available = available + :na"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":na": amountNum(-charge.Amount), ":floor": amountNum(-credits.MaxAmount + charge.Amount),
				},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.accounts), Item: entry, ConditionExpression: aws.String("attribute_not_exists(sk)")}},
		)
		if r.Key != "" {
			keyAt = len(items)
			items = append(items, types.TransactWriteItem{Update: s.settleOnKey(r.Key, charge.Amount, 0)})
		}
	}
	return s.transact(ctx, "write", items, func(reasons []types.CancellationReason) (bool, error) {
		switch {
		case failed(reasons, 0):
			return true, nil // the record exists: written before
		case acctAt >= 0 && failed(reasons, acctAt) && len(reasons[acctAt].Item) > 0:
			return true, tooMuch("balance")
		case acctAt >= 0 && failed(reasons, acctAt):
			// No account, or a store that does not return the old item:
			// one read tells.
			if _, err := s.Account(ctx, r.Account); err == nil {
				return true, tooMuch("balance")
			}
			return true, credits.ErrAccountNotFound
		case usageAt >= 0 && failed(reasons, usageAt):
			return true, tooMuch("usage credits")
		case keyAt >= 0 && failed(reasons, keyAt):
			return true, tooMuch("spent of key " + r.Key)
		}
		return false, nil
	})
}

// usageUpdate is the ADD of increment u to its usage row's counters, only
// if its credits stay within credits.MaxAmount.
func (s *Store) usageUpdate(u credits.Usage) *types.Update {
	return &types.Update{
		TableName: aws.String(s.accounts),
		Key:       map[string]types.AttributeValue{"pk": str(acctPrefix + u.Account), "sk": str(usagePrefix + u.Day + "#" + u.Model)},
		UpdateExpression: aws.String("SET #d = :day, #m = :model " +
			"ADD requests :n, prompt_tokens :p, completion_tokens :c, cached_tokens :ca, cache_write_tokens :cw, " +
			"cache_write_1h_tokens :cw1, reasoning_tokens :rt, credits :cr"),
		ConditionExpression:      aws.String("attribute_not_exists(credits) OR credits <= :room"),
		ExpressionAttributeNames: map[string]string{"#d": "day", "#m": "model"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":day": str(u.Day), ":model": str(u.Model), ":n": num(u.Requests),
			":p": num(u.PromptTokens), ":c": num(u.CompletionTokens), ":ca": num(u.CachedTokens), ":cw": num(u.CacheWriteTokens),
			":cw1": num(u.CacheWrite1hTokens), ":rt": num(u.ReasoningTokens), ":cr": amountNum(u.Credits),
			":room": amountNum(credits.MaxAmount - u.Credits),
		},
	}
}

// Record implements credits.RecordReader with one strongly consistent
// GetItem; a record past its expiry (which DynamoDB deletes within a day
// or two) is gone already.
func (s *Store) Record(ctx context.Context, id string) (credits.Record, error) {
	if s.RecordsTable == "" {
		return credits.Record{}, fmt.Errorf("get record %s: %w", id, ErrNoRecordsTable)
	}
	if id == "" || len(id) > credits.MaxRecordID {
		return credits.Record{}, credits.ErrRecordNotFound
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.RecordsTable), Key: map[string]types.AttributeValue{"id": str(id)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return credits.Record{}, fmt.Errorf("get record %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return credits.Record{}, credits.ErrRecordNotFound
	}
	var it recordItem
	if err := unmarshalMap(out.Item, &it); err != nil {
		return credits.Record{}, fmt.Errorf("get record %s: decode: %w", id, err)
	}
	r := it.record()
	if r.Expired(s.clock().Unix()) {
		return credits.Record{}, credits.ErrRecordNotFound
	}
	return r, nil
}

// partitionPage is what one index partition gave a listing: its matches,
// newest first, and, if it stopped before its end with fewer than it was
// asked for, the position it examined down to ("" if it did not).
type partitionPage struct {
	items []recordItem
	cut   string
}

// Records implements credits.RecordReader: with q.Account, Queries of
// RecordsByAccount's partition of the account; without, of each of
// RecordsByTime's 16 partitions, merged. Each Query reads newest first
// from the cursor, with the filters as a FilterExpression (and records
// past their expiry left out), until it has the page plus one, its
// partition ends, or recordsMaxPages pages were read; a partition cut
// short that way bounds the page (the records above the lowest position
// every partition examined), and the next page starts there. The indexes
// are eventually consistent: a record written a moment ago may be
// missing. Cost: per partition, the index pages read (one small page
// without filters).
func (s *Store) Records(ctx context.Context, q credits.RecordQuery) ([]credits.Record, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	if s.RecordsTable == "" {
		return nil, "", fmt.Errorf("list records: %w", ErrNoRecordsTable)
	}
	cur, _ := credits.DecodeRecordCursor(q.Cursor) // checked by Normalize
	index, attr, parts := RecordsByTime, RecordShardAttribute, make([]string, recordShards)
	for i := range parts {
		parts[i] = fmt.Sprintf("rec#%d", i)
	}
	if q.Account != "" {
		index, attr, parts = RecordsByAccount, RecordAccountAttribute, []string{q.Account}
	}
	pages := make([]partitionPage, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages[i], errs[i] = s.queryRecords(ctx, index, attr, p, q, cur)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, "", fmt.Errorf("list records: %w", err)
	}
	var all []recordItem
	cut := ""
	for _, p := range pages {
		all = append(all, p.items...)
		if p.cut > cut {
			cut = p.cut
		}
	}
	slices.SortFunc(all, func(a, b recordItem) int { return strings.Compare(b.AtID, a.AtID) })
	if cut != "" {
		n := 0
		for n < len(all) && all[n].AtID > cut {
			n++
		}
		all = all[:n]
	}
	out := make([]credits.Record, 0, min(len(all), q.Limit))
	for _, it := range all[:min(len(all), q.Limit)] {
		out = append(out, it.record())
	}
	var next string
	switch {
	case len(all) > q.Limit:
		next = credits.CursorOf(out[len(out)-1]).Encode()
	case cut != "":
		c, ok := parseRecordAtID(cut)
		if !ok {
			return nil, "", fmt.Errorf("list records: malformed index position %q", cut)
		}
		next = c.Encode()
	}
	return out, next, nil
}

// queryRecords reads one index partition for Records.
func (s *Store) queryRecords(ctx context.Context, index, attr, part string, q credits.RecordQuery, cur credits.RecordCursor) (partitionPage, error) {
	names := map[string]string{"#p": attr, "#x": "expires"}
	vals := map[string]types.AttributeValue{":p": str(part), ":now": num(s.clock().Unix())}
	cond := "#p = :p"
	if !cur.IsZero() {
		cond += " AND at_id < :cur"
		vals[":cur"] = str(recordAtID(cur.At, cur.ID))
	}
	filters := []string{"#x > :now"}
	filtered := false
	for _, f := range []struct{ name, attr, v string }{{"#k", "key", q.Key}, {"#s", "status", q.Status}, {"#kind", "kind", q.Kind}} {
		if f.v != "" {
			names[f.name], vals[":"+f.name[1:]] = f.attr, str(f.v)
			filters = append(filters, f.name+" = :"+f.name[1:])
			filtered = true
		}
	}
	if q.Model != "" {
		names["#m"], names["#ma"], vals[":m"] = "model", "model_asked", str(q.Model)
		filters = append(filters, "(#m = :m OR #ma = :m)")
		filtered = true
	}
	limit := int32(q.Limit + 1)
	if filtered {
		limit = recordsFilteredPage
	}
	var page partitionPage
	var start map[string]types.AttributeValue
	for n := 0; ; n++ {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.RecordsTable), IndexName: aws.String(index),
			KeyConditionExpression: aws.String(cond), FilterExpression: aws.String(strings.Join(filters, " AND ")),
			ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
			ScanIndexForward: aws.Bool(false), Limit: aws.Int32(limit), ExclusiveStartKey: start,
		})
		if err != nil {
			return page, err
		}
		for _, m := range out.Items {
			var it recordItem
			if err := unmarshalMap(m, &it); err != nil {
				return page, fmt.Errorf("decode record: %w", err)
			}
			page.items = append(page.items, it)
		}
		start = out.LastEvaluatedKey
		switch {
		case len(start) == 0 || len(page.items) > q.Limit:
			return page, nil
		case n+1 == recordsMaxPages:
			if v, ok := start[RecordAtIDAttribute].(*types.AttributeValueMemberS); ok {
				page.cut = v.Value
			}
			return page, nil
		}
	}
}

// CreateRecordsTable creates the records table (on-demand, its two
// indexes, TTL on TTLAttribute) unless it exists, and returns once it and
// its indexes are ACTIVE. It is for `genway aws init` and tests;
// deployments create it with the SAM template.
func CreateRecordsTable(ctx context.Context, client *dynamodb.Client, table string) error {
	all := &types.Projection{ProjectionType: types.ProjectionTypeAll}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(RecordAccountAttribute), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(RecordShardAttribute), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(RecordAtIDAttribute), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String(RecordsByAccount), Projection: all, KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(RecordAccountAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(RecordAtIDAttribute), KeyType: types.KeyTypeRange},
			}},
			{IndexName: aws.String(RecordsByTime), Projection: all, KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(RecordShardAttribute), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(RecordAtIDAttribute), KeyType: types.KeyTypeRange},
			}},
		},
	}
	_, err := client.CreateTable(ctx, in)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, tableWait); err != nil {
		return fmt.Errorf("wait for table %s: %w", table, err)
	}
	return enableTTL(ctx, client, table)
}
