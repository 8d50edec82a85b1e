package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/app/localserver"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/dynamostream"
	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/credits"
)

// queueVisibility is the jobs queue's visibility timeout for `genway aws
// init`: six times the worker's timeout, as in template.yaml.
const queueVisibility = 6 * int(localserver.WorkerTimeout/time.Second)

// webhooksVisibility is the webhooks queue's visibility timeout for
// `genway aws init`: six times the webhooks function's timeout (60 s), as
// in template.yaml.
const webhooksVisibility = 6 * 60

// lambdaEvents plays Lambda's event source mappings for
// GENWAY_BACKEND=aws: the batches the server's pollers read become the
// events Lambda would send (sqsEvent, dynamoDBEvent), handed to the
// handlers the worker, webhooks and credits functions run
// (lambdaevents.SQS, lambdaevents.Changes).
func lambdaEvents() localserver.Events {
	return localserver.Events{
		SQS: func(process func(context.Context, string) error, log *slog.Logger) sqsqueue.Handler {
			handler := lambdaevents.SQS(process, log)
			return func(ctx context.Context, msgs []sqsqueue.Message) []string {
				resp, _ := handler(ctx, sqsEvent(msgs))
				failed := make([]string, 0, len(resp.BatchItemFailures))
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				return failed
			}
		},
		Stream: func(apply func(context.Context, credits.Change) error, log *slog.Logger) dynamostream.Handler {
			handler := lambdaevents.Changes(dynamostore.ChangeFromImages, apply, log)
			return func(ctx context.Context, recs []dynamostream.Record) error {
				resp, _ := handler(ctx, dynamoDBEvent(recs))
				if n := len(resp.BatchItemFailures); n > 0 {
					return fmt.Errorf("%d stream records failed to settle, from sequence %s", n, resp.BatchItemFailures[0].ItemIdentifier)
				}
				return nil
			}
		},
	}
}

// sqsEvent builds the event Lambda's SQS event source mapping would send.
func sqsEvent(msgs []sqsqueue.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		attrs["ApproximateReceiveCount"] = strconv.Itoa(m.ReceiveCount)
		ev.Records[i] = events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: m.Body,
			Md5OfBody: m.MD5OfBody, Attributes: attrs, EventSource: "aws:sqs"}
	}
	return ev
}

// dynamoDBEvent builds the event Lambda's DynamoDB stream mapping would send.
func dynamoDBEvent(recs []dynamostream.Record) events.DynamoDBEvent {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(recs))}
	for i, r := range recs {
		ev.Records[i] = events.DynamoDBEventRecord{
			EventID: r.EventID, EventName: r.EventName, EventSource: r.EventSource, EventVersion: r.EventVersion, AWSRegion: r.AWSRegion,
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: r.SequenceNumber, StreamViewType: r.StreamViewType,
				Keys:     eventImage(dynamostream.ToDynamoDB(r.Keys)),
				OldImage: eventImage(dynamostream.ToDynamoDB(r.OldImage)),
				NewImage: eventImage(dynamostream.ToDynamoDB(r.NewImage)),
			},
		}
	}
	return ev
}

func eventImage(m map[string]ddbtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = eventValue(v)
	}
	return out
}

func eventValue(v ddbtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *ddbtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = eventValue(e)
		}
		return events.NewListAttribute(l)
	case *ddbtypes.AttributeValueMemberM:
		return events.NewMapAttribute(eventImage(v.Value))
	}
	return events.NewNullAttribute()
}

// awsCmd runs `genway aws init`: create the tables, queues and bucket that
// the functions and GENWAY_BACKEND=aws use, idempotently, with the names
// from the same environment variables the functions read.
func awsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) >= 1 && isHelp(args[len(args)-1]) {
		fmt.Fprint(stdout, "Usage:\n  genway aws init   create the DynamoDB tables, SQS queues and S3 bucket (idempotent)\n\n"+
			"It uses the AWS credential chain and region (AWS_REGION), and AWS_ENDPOINT_URL for moto or another emulator.\n")
		return nil
	}
	if len(args) != 1 || args[0] != "init" {
		return usageError("usage: genway aws init")
	}
	conf, err := app.LoadConfig(app.Serve, getenv)
	if err != nil {
		return err
	}
	cfg, err := awsenv.LoadConfig(ctx, conf.AWS)
	if err != nil {
		return err
	}
	names := conf.Names
	ddb := dynamodb.NewFromConfig(cfg, awsenv.LocalDynamoDB(conf.AWS))
	if err := dynamostore.CreateTables(ctx, ddb, names.JobsTable, names.AccountsTable); err != nil {
		return err
	}
	if err := dynamostore.CreateRecordsTable(ctx, ddb, names.RecordsTable); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tables %s, %s, %s: ready\n", names.JobsTable, names.AccountsTable, names.RecordsTable)
	url, err := sqsqueue.CreateQueues(ctx, sqs.NewFromConfig(cfg), names.JobsQueue, names.JobsDLQ, queueVisibility)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s (dead letters: %s): ready\n", url, names.JobsDLQ)
	hooksURL, err := sqsqueue.CreateQueues(ctx, sqs.NewFromConfig(cfg), names.WebhooksQueue, names.WebhooksDLQ, webhooksVisibility)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s (dead letters: %s): ready\n", hooksURL, names.WebhooksDLQ)
	if err := s3media.CreateBucket(ctx, s3media.NewClient(cfg), names.MediaBucket); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bucket %s: ready\n", names.MediaBucket)
	return nil
}
