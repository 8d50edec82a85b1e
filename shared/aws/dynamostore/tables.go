package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TTLAttribute is the attribute both tables expire items by.
const TTLAttribute = "expires"

// tableWait bounds how long CreateTables waits for a table to be ACTIVE.
const tableWait = 2 * time.Minute

// CreateTables creates the jobs and accounts tables (on-demand; the jobs
// table with a NEW_AND_OLD_IMAGES stream, QueuedIndex and AccountIndex) and
// enables TTL on both. It is idempotent: existing tables are kept as they
// are (a jobs table without one of the indexes gets it, one at a time), and
// it returns once both tables and the indexes are ACTIVE. It is for `genway aws init` and tests; deployments create the
// tables with the SAM template.
func CreateTables(ctx context.Context, client *dynamodb.Client, jobsTable, accountsTable string) error {
	tables := []*dynamodb.CreateTableInput{
		{
			TableName:   aws.String(jobsTable),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(QueuedShardAttribute), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(QueuedAtAttribute), AttributeType: types.ScalarAttributeTypeN},
				{AttributeName: aws.String(AccountAttribute), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(CreatedIDAttribute), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema:              []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{queuedIndex(), accountIndex()},
			StreamSpecification: &types.StreamSpecification{
				StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages,
			},
		},
		{
			TableName:   aws.String(accountsTable),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
			},
		},
	}
	for _, in := range tables {
		name := aws.ToString(in.TableName)
		_, err := client.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", name, err)
		}
		w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, tableWait); err != nil {
			return fmt.Errorf("wait for table %s: %w", name, err)
		}
		if err := enableTTL(ctx, client, name); err != nil {
			return err
		}
	}
	if err := ensureIndex(ctx, client, jobsTable, queuedIndex(), []types.AttributeDefinition{
		{AttributeName: aws.String(QueuedShardAttribute), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(QueuedAtAttribute), AttributeType: types.ScalarAttributeTypeN},
	}); err != nil {
		return err
	}
	return ensureIndex(ctx, client, jobsTable, accountIndex(), []types.AttributeDefinition{
		{AttributeName: aws.String(AccountAttribute), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(CreatedIDAttribute), AttributeType: types.ScalarAttributeTypeS},
	})
}

// queuedIndex is QueuedIndex's definition.
func queuedIndex() types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(QueuedIndex),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(QueuedShardAttribute), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(QueuedAtAttribute), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}
}

// accountIndex is AccountIndex's definition.
func accountIndex() types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(AccountIndex),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AccountAttribute), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(CreatedIDAttribute), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: accountIndexAttributes()},
	}
}

// ensureIndex adds index g (its key attributes defined by defs) to a jobs
// table made before it existed, and waits (up to tableWait) until it is
// ACTIVE. DynamoDB builds it from the items already there (backfill);
// items without its keys stay out of it (QueuedIndex: jobs no longer
// waiting; AccountIndex: jobs created before created_id existed).
func ensureIndex(ctx context.Context, client *dynamodb.Client, table string, g types.GlobalSecondaryIndex, defs []types.AttributeDefinition) error {
	name := aws.ToString(g.IndexName)
	status := func() (types.IndexStatus, bool, error) {
		d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return "", false, fmt.Errorf("describe table %s: %w", table, err)
		}
		for _, g := range d.Table.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) == name {
				return g.IndexStatus, true, nil
			}
		}
		return "", false, nil
	}
	st, ok, err := status()
	if err != nil {
		return err
	}
	if !ok {
		_, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:            aws.String(table),
			AttributeDefinitions: defs,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection,
			}}},
		})
		if err != nil {
			return fmt.Errorf("add index %s to table %s: %w", name, table, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, tableWait)
	defer cancel()
	for delay := 100 * time.Millisecond; st != types.IndexStatusActive; delay = min(2*delay, 2*time.Second) {
		if st, _, err = status(); err != nil {
			return err
		}
		if st == types.IndexStatusActive || st == "" { // "": a store that reports no status
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-wctx.Done():
			t.Stop()
			return fmt.Errorf("wait for index %s of table %s: %w", name, table, wctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// enableTTL turns on TTL on TTLAttribute unless it is on already (DynamoDB
// refuses to enable it twice).
func enableTTL(ctx context.Context, client *dynamodb.Client, table string) error {
	d, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe TTL of %s: %w", table, err)
	}
	if ttl := d.TimeToLiveDescription; ttl != nil && aws.ToString(ttl.AttributeName) == TTLAttribute &&
		(ttl.TimeToLiveStatus == types.TimeToLiveStatusEnabled || ttl.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", table, err)
	}
	return nil
}

// StreamARN returns the ARN of table's latest stream, or an error if it has
// none.
func StreamARN(ctx context.Context, client *dynamodb.Client, table string) (string, error) {
	d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", table, err)
	}
	arn := aws.ToString(d.Table.LatestStreamArn)
	if arn == "" {
		return "", fmt.Errorf("table %s has no stream", table)
	}
	return arn, nil
}
