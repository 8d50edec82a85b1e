package credits

import (
	"strconv"

	"github.com/genway/genway/shared/rawjson"
)

// AppendJSON appends r's JSON to b: the very bytes encoding/json makes of
// it (the fields in order, the same omissions and escapes), without
// reflection, about 7 times faster (BenchmarkRecordJSON). The embedded
// store encodes a record for every request with it. (It is not
// MarshalJSON: encoding/json validates a marshaler's output again, which
// costs more than it saves.)
func (r Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = rawjson.AppendString(b, r.ID, true)
	b = append(b, `,"kind":`...)
	b = rawjson.AppendString(b, r.Kind, true)
	b = append(b, `,"account":`...)
	b = rawjson.AppendString(b, r.Account, true)
	if r.Key != "" {
		b = append(b, `,"key":`...)
		b = rawjson.AppendString(b, r.Key, true)
	}
	b = append(b, `,"model_asked":`...)
	b = rawjson.AppendString(b, r.ModelAsked, true)
	for _, f := range [...]struct{ name, v string }{{`,"model":`, r.Model}, {`,"provider":`, r.Provider},
		{`,"attempts":`, r.Attempts}, {`,"service_tier":`, r.ServiceTier}} {
		if f.v != "" {
			b = append(b, f.name...)
			b = rawjson.AppendString(b, f.v, true)
		}
	}
	t := r.Tokens
	b = append(b, `,"tokens":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, t.Prompt, 10)
	for _, f := range [...]struct {
		name string
		v    int64
	}{{`,"cached_tokens":`, t.Cached}, {`,"cache_write_tokens":`, t.CacheWrite}, {`,"cache_write_1h_tokens":`, t.CacheWrite1h}} {
		if f.v != 0 {
			b = append(b, f.name...)
			b = strconv.AppendInt(b, f.v, 10)
		}
	}
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, t.Completion, 10)
	if t.Reasoning != 0 {
		b = append(b, `,"reasoning_tokens":`...)
		b = strconv.AppendInt(b, t.Reasoning, 10)
	}
	rt := r.Rates
	b = append(b, `},"rates":{"input":`...)
	b = rt.Input.appendText(b)
	b = append(b, `,"cached_input":`...)
	b = rt.CachedInput.appendText(b)
	b = append(b, `,"cache_write":`...)
	b = rt.CacheWrite.appendText(b)
	b = append(b, `,"cache_write_1h":`...)
	b = rt.CacheWrite1h.appendText(b)
	b = append(b, `,"output":`...)
	b = rt.Output.appendText(b)
	b = append(b, '}')
	if r.Units != 0 {
		b = append(b, `,"units":`...)
		b = strconv.AppendInt(b, r.Units, 10)
	}
	if r.UnitPrice != 0 {
		b = append(b, `,"unit_price":`...)
		b = r.UnitPrice.appendText(b)
	}
	b = append(b, `,"cost":`...)
	b = r.Cost.appendText(b)
	b = append(b, `,"status":`...)
	b = rawjson.AppendString(b, r.Status, true)
	if r.FinishReason != "" {
		b = append(b, `,"finish_reason":`...)
		b = rawjson.AppendString(b, r.FinishReason, true)
	}
	b = append(b, `,"partial":`...)
	b = strconv.AppendBool(b, r.Partial)
	if r.Estimated {
		b = append(b, `,"estimated":true`...)
	}
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, r.Stream)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, r.LatencyMS, 10)
	if r.FirstTokenMS != 0 {
		b = append(b, `,"first_token_ms":`...)
		b = strconv.AppendInt(b, r.FirstTokenMS, 10)
	}
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, r.At, 10)
	if r.Expires != 0 {
		b = append(b, `,"expires":`...)
		b = strconv.AppendInt(b, r.Expires, 10)
	}
	return append(b, '}')
}

// AppendJSON appends e's JSON to b: the very bytes encoding/json makes of
// it (FuzzEntryJSON), without reflection. The embedded store writes a
// ledger entry for every charged request with it.
func (e Entry) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = rawjson.AppendString(b, e.ID, true)
	b = append(b, `,"account":`...)
	b = rawjson.AppendString(b, e.Account, true)
	b = append(b, `,"kind":`...)
	b = rawjson.AppendString(b, e.Kind, true)
	b = append(b, `,"amount":`...)
	b = e.Amount.appendText(b)
	if e.Hold != 0 {
		b = append(b, `,"hold":`...)
		b = e.Hold.appendText(b)
	}
	for _, f := range [...]struct{ name, v string }{
		{`,"job_id":`, e.JobID}, {`,"job_type":`, e.JobType}, {`,"model":`, e.Model}, {`,"key":`, e.Key},
	} {
		if f.v != "" {
			b = append(b, f.name...)
			b = rawjson.AppendString(b, f.v, true)
		}
	}
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, e.At, 10)
	return append(b, '}')
}
