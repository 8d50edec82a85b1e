package dynamostore

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
)

func TestChangeFromImages(t *testing.T) {
	const cr = credits.Credit
	job := func(status string, extra ...string) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{
			"id": str("job_1"), "account": str("acct1"), "type": str("sfx"), "model": str("sfx-1"), "price": num(30), "updated": num(99),
			"input": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"prompt": str("p")}},
		}
		if status != "" {
			m["status"] = str(status)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = str(extra[i+1])
		}
		return m
	}
	withNum := func(m map[string]types.AttributeValue, kv ...any) map[string]types.AttributeValue {
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = num(int64(kv[i+1].(int)))
		}
		return m
	}
	withCandidates := func(m map[string]types.AttributeValue) map[string]types.AttributeValue {
		cand := func(model string, price int64) types.AttributeValue {
			return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"model": str(model), "price": num(price)}}
		}
		m["candidates"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{cand("sfx-1", 30), cand("sfx-cheap", 8)}}
		return m
	}
	idem := map[string]types.AttributeValue{"id": str("idem#acct1/k"), "job_id": str("job_1"), "expires": num(5)}
	tests := []struct {
		name     string
		old, new map[string]types.AttributeValue
		want     credits.Change
		ok       bool
	}{
		{"completed", job("processing"), job("completed"), credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "completed", Price: 30 * cr, At: 99}, true},
		{"failed from queued", job("queued"), job("failed"), credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "queued", NewStatus: "failed", Price: 30 * cr, At: 99}, true},
		{"insert", nil, job("queued"), credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", NewStatus: "queued", Price: 30 * cr, At: 99}, true},
		{"no type or model", job("processing"), func() map[string]types.AttributeValue {
			m := job("completed")
			delete(m, "type")
			delete(m, "model")
			return m
		}(), credits.Change{JobID: "job_1", Account: "acct1", OldStatus: "processing", NewStatus: "completed", Price: 30 * cr, At: 99}, true},
		{"no-op modify", job("completed"), job("completed"), credits.Change{}, false},
		{"attempts only", job("processing"), job("processing", "attempts", "2"), credits.Change{}, false},
		{"remove", job("completed"), nil, credits.Change{}, false},
		{"idempotency insert", nil, idem, credits.Change{}, false},
		{"idempotency modify", idem, idem, credits.Change{}, false},
		{"no status", nil, job(""), credits.Change{}, false},
		{"served by a cheaper fallback", job("processing"), withCandidates(withNum(job("completed"), "price", 8, "hold", 30, "candidate", 1)),
			credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-cheap", OldStatus: "processing", NewStatus: "completed", Price: 8 * cr, Hold: 30 * cr, At: 99}, true},
		{"failed at a fallback", job("processing"), withCandidates(withNum(job("failed"), "hold", 30, "candidate", 1)),
			credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "failed", Price: 30 * cr, Hold: 30 * cr, At: 99}, true},
		{"served by the lead", job("processing"), withCandidates(withNum(job("completed"), "hold", 30)),
			credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "completed", Price: 30 * cr, Hold: 30 * cr, At: 99}, true},
		{"candidates that do not decode", job("processing"), withNum(job("completed", "candidates", "x"), "candidate", 1),
			credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "completed", Price: 30 * cr, At: 99}, true},
		// Amounts are numbers of credits, as DynamoDB writes them back.
		{"decimal amounts", job("processing"), func() map[string]types.AttributeValue {
			m := job("completed")
			m["price"], m["hold"] = &types.AttributeValueMemberN{Value: "2.5"}, &types.AttributeValueMemberN{Value: "1E+1"}
			return m
		}(), credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "completed", Price: 2_500_000, Hold: 10 * cr, At: 99}, true},
		{"bad price", job("processing"), job("completed", "price", "x"), credits.Change{JobID: "job_1", Account: "acct1", JobType: "sfx", Model: "sfx-1", OldStatus: "processing", NewStatus: "completed", At: 99}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ChangeFromImages(tt.old, tt.new)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ChangeFromImages(%s) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
}
