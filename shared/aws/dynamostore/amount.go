package dynamostore

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Amounts are stored as DynamoDB numbers of credits: the exact decimal of
// credits.Amount.String ("999.989"), never a count of micro-credits.
// DynamoDB numbers are exact decimals (38 digits), so conditions
// (available >= :a) and arithmetic on them are exact, and an item written
// before amounts had decimals ("balance": 1000) reads as the same 1000
// credits. Reads go through credits.ParseAmount, which also takes the forms
// DynamoDB and other writers may give back ("1E+3", "1000.0").
//
// moto (the test server) computes "x - :y" in float64 when either side has
// a decimal point, while "x + :y" and ADD are exact; real DynamoDB is exact
// either way. So no update expression here subtracts an amount: it adds
// the negated amount (amountNum(-a)) instead.

// amount is a credits.Amount inside an item marshalled with attributevalue:
// a number of credits, where the Amount itself (an int64 of micro-credits)
// would be marshalled as its count. The domain types know nothing of
// DynamoDB; the items here declare their amounts with this type.
type amount credits.Amount

// MarshalDynamoDBAttributeValue implements attributevalue.Marshaler.
func (a amount) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return amountNum(credits.Amount(a)), nil
}

// UnmarshalDynamoDBAttributeValue implements attributevalue.Unmarshaler: a
// number of credits (credits.ParseAmount), or NULL for none.
func (a *amount) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	switch v := av.(type) {
	case *types.AttributeValueMemberN:
		n, err := credits.ParseAmount(v.Value)
		if err != nil {
			return err
		}
		*a = amount(n)
		return nil
	case *types.AttributeValueMemberNULL:
		return nil
	}
	return fmt.Errorf("an amount of credits must be a number, not %T", av)
}

// amountNum is a as a DynamoDB number of credits.
func amountNum(a credits.Amount) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: a.String()}
}

// amountAttr returns the amount attribute name of m: 0 if absent, an error
// if it is not a number of credits.
func amountAttr(m map[string]types.AttributeValue, name string) (credits.Amount, error) {
	v, ok := m[name]
	if !ok {
		return 0, nil
	}
	var a amount
	if err := a.UnmarshalDynamoDBAttributeValue(v); err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return credits.Amount(a), nil
}

// jobItem is a job as stored: jobs.Job's attributes (its json tags), with
// its amounts (price, hold, the candidates' prices) as numbers of credits.
// The fields here shadow the Job's of the same name.
type jobItem struct {
	jobs.Job
	Price      amount          `json:"price"`
	Hold       amount          `json:"hold,omitempty"`
	Candidates []candidateItem `json:"candidates,omitempty"`
}

// candidateItem is a jobs.Candidate as stored.
type candidateItem struct {
	Model string `json:"model"`
	Price amount `json:"price"`
}

// encodeJob returns j as a jobs-table item.
func encodeJob(j *jobs.Job) (map[string]types.AttributeValue, error) {
	it := jobItem{Job: *j, Price: amount(j.Price), Hold: amount(j.Hold)}
	it.Job.Candidates = nil
	for _, c := range j.Candidates {
		it.Candidates = append(it.Candidates, candidateItem{Model: c.Model, Price: amount(c.Price)})
	}
	return marshalMap(&it)
}

// decodeJob reads a jobs-table item.
func decodeJob(item map[string]types.AttributeValue) (*jobs.Job, error) {
	var it jobItem
	if err := unmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("decode job: %w", err)
	}
	j := it.Job
	j.Price, j.Hold, j.Candidates = credits.Amount(it.Price), credits.Amount(it.Hold), nil
	for _, c := range it.Candidates {
		j.Candidates = append(j.Candidates, jobs.Candidate{Model: c.Model, Price: credits.Amount(c.Price)})
	}
	return &j, nil
}
