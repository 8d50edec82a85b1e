package dynamostream

import (
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// ToDynamoDB converts a stream image to the DynamoDB API's attribute types
// (what dynamostore.ChangeFromImages takes). nil stays nil.
func ToDynamoDB(m map[string]types.AttributeValue) map[string]ddb.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]ddb.AttributeValue, len(m))
	for k, v := range m {
		if c := convert(v); c != nil {
			out[k] = c
		}
	}
	return out
}

func convert(v types.AttributeValue) ddb.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &ddb.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &ddb.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &ddb.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &ddb.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &ddb.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &ddb.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &ddb.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &ddb.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberM:
		return &ddb.AttributeValueMemberM{Value: ToDynamoDB(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]ddb.AttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			if c := convert(e); c != nil {
				l = append(l, c)
			}
		}
		return &ddb.AttributeValueMemberL{Value: l}
	}
	return nil // an unknown member: dropped
}
