package dynamostream

import (
	"reflect"
	"testing"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestToDynamoDB(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]types.AttributeValue
		want map[string]ddb.AttributeValue
	}{
		{"nil", nil, nil},
		{"scalars", map[string]types.AttributeValue{
			"s": &types.AttributeValueMemberS{Value: "x"}, "n": &types.AttributeValueMemberN{Value: "1"},
			"b": &types.AttributeValueMemberB{Value: []byte{1}}, "t": &types.AttributeValueMemberBOOL{Value: true},
			"z": &types.AttributeValueMemberNULL{Value: true},
		}, map[string]ddb.AttributeValue{
			"s": &ddb.AttributeValueMemberS{Value: "x"}, "n": &ddb.AttributeValueMemberN{Value: "1"},
			"b": &ddb.AttributeValueMemberB{Value: []byte{1}}, "t": &ddb.AttributeValueMemberBOOL{Value: true},
			"z": &ddb.AttributeValueMemberNULL{Value: true},
		}},
		{"sets", map[string]types.AttributeValue{
			"ss": &types.AttributeValueMemberSS{Value: []string{"a"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"2"}},
			"bs": &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		}, map[string]ddb.AttributeValue{
			"ss": &ddb.AttributeValueMemberSS{Value: []string{"a"}}, "ns": &ddb.AttributeValueMemberNS{Value: []string{"2"}},
			"bs": &ddb.AttributeValueMemberBS{Value: [][]byte{{3}}},
		}},
		{"nested", map[string]types.AttributeValue{
			"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "e"}}},
			}},
		}, map[string]ddb.AttributeValue{
			"m": &ddb.AttributeValueMemberM{Value: map[string]ddb.AttributeValue{
				"l": &ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{&ddb.AttributeValueMemberS{Value: "e"}}},
			}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToDynamoDB(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ToDynamoDB(%v) = %v; want %v", tt.in, got, tt.want)
			}
		})
	}
}
