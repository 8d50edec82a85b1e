package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/storetest"
)

// TestRecordsContract runs the records contract that localstore also
// meets, on moto, through mototest.Serialize (moto does not isolate
// concurrent transactions).
func TestRecordsContract(t *testing.T) {
	endpoint := mototest.Serialize(t, mototest.Start(t))
	client := dynamodb.NewFromConfig(mototest.Config(endpoint))
	s := newRecordsStore(t, client)
	storetest.RunRecords(t, func(t *testing.T) storetest.RecordsBackend { return s })

	t.Run("Layout", func(t *testing.T) {
		ctx := context.Background()
		at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
		r := credits.Record{ID: "chatcmpl-layout1", Kind: credits.KindChat, Account: "acct-reclayout", ModelAsked: "m", Model: "m",
			Tokens: credits.Tokens{Prompt: 3, Completion: 4}, Rates: credits.TokenRates{Input: 150_000, Output: 600_000},
			Status: credits.StatusCompleted, At: at.UnixMilli(), Expires: at.Unix() + 86400}
		if err := s.AddRecords(ctx, []credits.Record{r})[0]; err != nil {
			t.Fatal(err)
		}
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("records"), Key: map[string]types.AttributeValue{"id": str(r.ID)}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		var it recordItem
		if err := unmarshalMap(out.Item, &it); err != nil {
			t.Fatal(err)
		}
		// The indexes' keys, the TTL attribute, and the amounts as
		// numbers of credits.
		rates := out.Item["rates"]
		if it.AtID != "1767323045678#chatcmpl-layout1" || it.Shard != recordShard(r.ID) || it.Expires != at.Unix()+86400 || rates == nil {
			t.Errorf("record item = %+v; want at_id 1767323045678#chatcmpl-layout1, its shard, expires %d", it, at.Unix()+86400)
		}
		if n, ok := out.Item["rates"].(*types.AttributeValueMemberM); !ok || n.Value["input"].(*types.AttributeValueMemberN).Value != "0.15" {
			t.Errorf("rates = %#v; want input 0.15 (a number of credits)", out.Item["rates"])
		}
	})
}
