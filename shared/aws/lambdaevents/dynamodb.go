package lambdaevents

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
)

// Decoder turns a stream record's old and new images into a credits change;
// ok is false for records that are not job status changes (other items,
// inserts, deletions). dynamostore.ChangeFromImages is the one in use.
type Decoder func(oldImage, newImage map[string]types.AttributeValue) (c credits.Change, ok bool)

// Credits returns the credits function's DynamoDB Streams handler: Changes
// with credits.Apply on store as apply.
func Credits(store credits.Store, decode Decoder, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return Changes(decode, func(ctx context.Context, c credits.Change) error { return credits.Apply(ctx, store, c) }, log)
}

// Changes returns a DynamoDB Streams handler of job changes. For each
// record, in order, it converts the images, decodes them with decode and
// hands the change to apply (credits.Apply settles it and ignores changes
// that are not final transitions, and redeliveries; the credits function
// also schedules the job's webhook). When a record fails, it and every
// later record of the batch are reported in BatchItemFailures by sequence
// number, and the later ones are not attempted: Lambda retries from the
// first failure, so a job's changes are applied in order. The handler
// itself never returns an error. log may be nil.
func Changes(decode Decoder, apply func(context.Context, credits.Change) error, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log = orDiscard(log)
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		res := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
		for i, rec := range ev.Records {
			if err := handle(ctx, decode, apply, rec); err != nil {
				log.ErrorContext(ctx, "stream record failed; it and the rest of the batch will be retried",
					"event_id", rec.EventID, "sequence_number", rec.Change.SequenceNumber, "later_records", len(ev.Records)-i-1, "err", err)
				for _, r := range ev.Records[i:] {
					res.BatchItemFailures = append(res.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
				}
				break
			}
		}
		return res, nil
	}
}

func handle(ctx context.Context, decode Decoder, apply func(context.Context, credits.Change) error, rec events.DynamoDBEventRecord) error {
	oldImage, err := Image(rec.Change.OldImage)
	if err != nil {
		return fmt.Errorf("old image: %w", err)
	}
	newImage, err := Image(rec.Change.NewImage)
	if err != nil {
		return fmt.Errorf("new image: %w", err)
	}
	c, ok := decode(oldImage, newImage)
	if !ok {
		return nil
	}
	return apply(ctx, c)
}

// Image converts a stream record image (aws-lambda-go's representation) to
// the DynamoDB SDK's. A nil or empty image gives nil.
func Image(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if len(img) == 0 {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := AttributeValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

// AttributeValue converts one attribute value, recursively for lists and
// maps. It fails for a value of unknown type.
func AttributeValue(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := v.List()
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			av, err := AttributeValue(e)
			if err != nil {
				return nil, fmt.Errorf("list item %d: %w", i, err)
			}
			out[i] = av
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case events.DataTypeMap:
		m, err := Image(v.Map())
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]types.AttributeValue{}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unknown attribute type %d", v.DataType())
}
