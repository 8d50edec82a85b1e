package dynamostore

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// ChangeFromImages turns a jobs-table stream record's images into a
// credits.Change. It reports false for records that are not a job's status
// change: idempotency items, removals (no new image), items without an id or
// status, and modifications that left the status as it was (moto, and a
// Transition that only bumps attempts, emit those). An insert is a change
// from "" to the new status. oldImage may be nil. The change is the one
// jobs.Job.Change reports (Model: the model that served a completed job).
func ChangeFromImages(oldImage, newImage map[string]types.AttributeValue) (credits.Change, bool) {
	id := stringAttr(newImage, "id")
	status := stringAttr(newImage, "status")
	if id == "" || status == "" || strings.HasPrefix(id, idemPrefix) {
		return credits.Change{}, false
	}
	old := stringAttr(oldImage, "status")
	if old == status {
		return credits.Change{}, false
	}
	// Price and hold are numbers of credits (amount.go); one that is not
	// reads as 0, as an absent one does (such a record holds nothing).
	price, _ := amountAttr(newImage, "price")
	hold, _ := amountAttr(newImage, "hold")
	j := jobs.Job{
		ID: id, Account: stringAttr(newImage, "account"), Type: stringAttr(newImage, "type"),
		Model: stringAttr(newImage, "model"), Status: jobs.Status(status), Price: price, Hold: hold,
		Candidate: int(numberAttr(newImage, "candidate")), Key: stringAttr(newImage, "key_id"),
	}
	// The candidates name the model that served a completed job; a list
	// that does not decode leaves the job's own model in the change.
	if c, ok := newImage["candidates"]; ok {
		var it jobItem
		if err := unmarshalMap(map[string]types.AttributeValue{"candidates": c}, &it); err == nil {
			for _, c := range it.Candidates {
				j.Candidates = append(j.Candidates, jobs.Candidate{Model: c.Model, Price: credits.Amount(c.Price)})
			}
		}
	}
	return j.Change(jobs.Status(old), numberAttr(newImage, "updated")), true
}

func stringAttr(m map[string]types.AttributeValue, name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// numberAttr returns the integer attribute name, 0 if absent or not an
// integer.
func numberAttr(m map[string]types.AttributeValue, name string) int64 {
	if v, ok := m[name].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}
