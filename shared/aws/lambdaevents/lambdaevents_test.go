package lambdaevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/aws/lambdaevents"
	"github.com/genway/genway/shared/credits"
)

func TestSQS(t *testing.T) {
	b, err := os.ReadFile("testdata/sqs.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	process := func(ctx context.Context, id string) error {
		mu.Lock()
		seen = append(seen, id)
		mu.Unlock()
		if id == "job_bad" {
			return errors.New("upstream busy")
		}
		return nil
	}
	res, err := lambdaevents.SQS(process, nil)(context.Background(), ev)
	if err != nil {
		t.Fatalf("SQS handler error = %v", err)
	}
	want := []events.SQSBatchItemFailure{{ItemIdentifier: "msg-2"}}
	if !reflect.DeepEqual(res.BatchItemFailures, want) {
		t.Errorf("BatchItemFailures = %v; want %v", res.BatchItemFailures, want)
	}
	sort.Strings(seen)
	if w := []string{"job_bad", "job_ok", "job_ok2"}; !reflect.DeepEqual(seen, w) {
		t.Errorf("processed %v; want %v (malformed bodies dropped)", seen, w)
	}
	// The wire form Lambda reads.
	out, _ := json.Marshal(res)
	if string(out) != `{"batchItemFailures":[{"itemIdentifier":"msg-2"}]}` {
		t.Errorf("json = %s", out)
	}
}

// fakeStore is a credits.Store whose Settle records entries and fails for
// jobs in failFor.
type fakeStore struct {
	credits.Store
	failFor map[string]bool
	settled []credits.Entry
}

func (s *fakeStore) Settle(ctx context.Context, e credits.Entry) error {
	if s.failFor[e.JobID] {
		return errors.New("transaction cancelled")
	}
	s.settled = append(s.settled, e)
	return nil
}

// decode reads the test images: id, account, status, price.
func decode(oldImage, newImage map[string]types.AttributeValue) (credits.Change, bool) {
	s := func(img map[string]types.AttributeValue, k string) string {
		switch v := img[k].(type) {
		case *types.AttributeValueMemberS:
			return v.Value
		case *types.AttributeValueMemberN:
			return v.Value
		}
		return ""
	}
	if newImage == nil || s(newImage, "id") == "" {
		return credits.Change{}, false
	}
	price, _ := credits.ParseAmount(s(newImage, "price"))
	return credits.Change{JobID: s(newImage, "id"), Account: s(newImage, "account"),
		OldStatus: s(oldImage, "status"), NewStatus: s(newImage, "status"), Price: price}, true
}

func streamRecord(seq, id, from, to string) events.DynamoDBEventRecord {
	img := func(status string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{
			"id": events.NewStringAttribute(id), "account": events.NewStringAttribute("acct"),
			"status": events.NewStringAttribute(status), "price": events.NewNumberAttribute("7"),
		}
	}
	return events.DynamoDBEventRecord{EventName: "MODIFY", EventID: "ev" + seq,
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, OldImage: img(from), NewImage: img(to)}}
}

func TestCredits(t *testing.T) {
	tests := []struct {
		name     string
		records  []events.DynamoDBEventRecord
		failFor  map[string]bool
		failures []string
		settled  []string
	}{
		{
			name: "all settle",
			records: []events.DynamoDBEventRecord{
				streamRecord("100", "job_a", "processing", "completed"),
				streamRecord("101", "job_b", "processing", "failed"),
				streamRecord("102", "job_c", "queued", "processing"), // not final: ignored
			},
			failures: []string{}, settled: []string{"job_a:capture", "job_b:release"},
		},
		{
			name: "a failure reports it and every later record",
			records: []events.DynamoDBEventRecord{
				streamRecord("200", "job_a", "processing", "completed"),
				streamRecord("201", "job_x", "processing", "completed"),
				streamRecord("202", "job_b", "processing", "completed"),
			},
			failFor:  map[string]bool{"job_x": true},
			failures: []string{"201", "202"}, settled: []string{"job_a:capture"},
		},
		{
			name:     "records that are not jobs are skipped",
			records:  []events.DynamoDBEventRecord{{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "300"}}},
			failures: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{failFor: tt.failFor}
			res, err := lambdaevents.Credits(st, decode, nil)(context.Background(), events.DynamoDBEvent{Records: tt.records})
			if err != nil {
				t.Fatalf("Credits handler error = %v", err)
			}
			got := []string{}
			for _, f := range res.BatchItemFailures {
				got = append(got, f.ItemIdentifier)
			}
			if !reflect.DeepEqual(got, tt.failures) {
				t.Errorf("BatchItemFailures = %v; want %v", got, tt.failures)
			}
			var settled []string
			for _, e := range st.settled {
				settled = append(settled, e.JobID+":"+e.Kind)
			}
			if !reflect.DeepEqual(settled, tt.settled) {
				t.Errorf("settled = %v; want %v", settled, tt.settled)
			}
		})
	}
}

func TestCreditsCapturedEvent(t *testing.T) {
	b, err := os.ReadFile("testdata/dynamodb.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{}
	res, _ := lambdaevents.Credits(st, decode, nil)(context.Background(), ev)
	if len(res.BatchItemFailures) != 0 || len(st.settled) != 1 || st.settled[0].Kind != credits.Capture || st.settled[0].Amount != 7*credits.Credit {
		t.Errorf("Credits(captured event) = %v, settled %v; want no failures, one capture of 7", res, st.settled)
	}
}

func TestAttributeValue(t *testing.T) {
	in := map[string]events.DynamoDBAttributeValue{
		"s":    events.NewStringAttribute("x"),
		"n":    events.NewNumberAttribute("12.5"),
		"b":    events.NewBinaryAttribute([]byte{1, 2}),
		"bool": events.NewBooleanAttribute(true),
		"null": events.NewNullAttribute(),
		"ss":   events.NewStringSetAttribute([]string{"a", "b"}),
		"ns":   events.NewNumberSetAttribute([]string{"1"}),
		"bs":   events.NewBinarySetAttribute([][]byte{{9}}),
		"l":    events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("y")}),
		"m":    events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": events.NewNumberAttribute("1")}),
		"em":   events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
	}
	want := map[string]types.AttributeValue{
		"s":    &types.AttributeValueMemberS{Value: "x"},
		"n":    &types.AttributeValueMemberN{Value: "12.5"},
		"b":    &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{9}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "y"}}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}},
		"em":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
	got, err := lambdaevents.Image(in)
	if err != nil {
		t.Fatalf("Image() error = %v", err)
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("Image()[%q] = %#v; want %#v", k, got[k], w)
		}
	}
	if img, err := lambdaevents.Image(nil); img != nil || err != nil {
		t.Errorf("Image(nil) = %v, %v; want nil, nil", img, err)
	}
}
