package openai

import (
	"math"
	"strconv"

	"github.com/genway/genway/shared/rawjson"
)

// appendJSON appends w's JSON to b, the bytes json.Marshal makes of it,
// written without reflection, for the requests most clients send: text
// messages (and assistant tool calls, tool results), the sampling fields
// and a stream's options. It returns false, with b in an unspecified
// state, for what it leaves to json.Marshal: image parts, tools,
// tool_choice, response_format, logit_bias, and numbers that have no JSON
// form (FuzzRequestJSON compares the two).
func (w *wireRequest) appendJSON(b []byte) ([]byte, bool) {
	if len(w.Tools) > 0 || w.ToolChoice != nil || w.ResponseFormat != nil || len(w.LogitBias) > 0 {
		return b, false
	}
	b = append(b, `{"model":`...)
	b = rawjson.AppendString(b, w.Model, true)
	b = append(b, `,"messages":`...)
	if w.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range w.Messages {
			m := &w.Messages[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = rawjson.AppendString(b, m.Role, true)
			b = append(b, `,"content":`...)
			switch c := m.Content.(type) {
			case nil:
				b = append(b, "null"...)
			case string:
				b = rawjson.AppendString(b, c, true)
			default:
				return b, false // parts: json.Marshal
			}
			if m.Name != "" {
				b = append(b, `,"name":`...)
				b = rawjson.AppendString(b, m.Name, true)
			}
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for k := range m.ToolCalls {
					tc := &m.ToolCalls[k]
					if k > 0 {
						b = append(b, ',')
					}
					b = append(b, '{')
					n := len(b)
					if tc.Index != 0 {
						b = append(b, `"index":`...)
						b = strconv.AppendInt(b, int64(tc.Index), 10)
					}
					if tc.ID != "" {
						b = comma(b, n)
						b = append(b, `"id":`...)
						b = rawjson.AppendString(b, tc.ID, true)
					}
					if tc.Type != "" {
						b = comma(b, n)
						b = append(b, `"type":`...)
						b = rawjson.AppendString(b, tc.Type, true)
					}
					b = comma(b, n)
					b = append(b, `"function":{`...)
					if tc.Function.Name != "" {
						b = append(b, `"name":`...)
						b = rawjson.AppendString(b, tc.Function.Name, true)
						b = append(b, ',')
					}
					b = append(b, `"arguments":`...)
					b = rawjson.AppendString(b, tc.Function.Arguments, true)
					b = append(b, "}}"...)
				}
				b = append(b, ']')
			}
			if m.ToolCallID != "" {
				b = append(b, `,"tool_call_id":`...)
				b = rawjson.AppendString(b, m.ToolCallID, true)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if w.MaxCompletionTokens != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(w.MaxCompletionTokens), 10)
	}
	b = optString(b, `,"reasoning_effort":`, w.ReasoningEffort)
	var ok bool
	if b, ok = optFloat(b, `,"temperature":`, w.Temperature); !ok {
		return b, false
	}
	if b, ok = optFloat(b, `,"top_p":`, w.TopP); !ok {
		return b, false
	}
	if len(w.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range w.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = rawjson.AppendString(b, s, true)
		}
		b = append(b, ']')
	}
	if w.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *w.Seed, 10)
	}
	if w.Stream {
		b = append(b, `,"stream":true`...)
	}
	if w.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, w.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	if b, ok = optFloat(b, `,"presence_penalty":`, w.PresencePenalty); !ok {
		return b, false
	}
	if b, ok = optFloat(b, `,"frequency_penalty":`, w.FrequencyPenalty); !ok {
		return b, false
	}
	b = optString(b, `,"user":`, w.User)
	if w.ParallelToolCalls != nil {
		b = append(b, `,"parallel_tool_calls":`...)
		b = strconv.AppendBool(b, *w.ParallelToolCalls)
	}
	b = optString(b, `,"service_tier":`, w.ServiceTier)
	b = optString(b, `,"verbosity":`, w.Verbosity)
	b = optString(b, `,"prompt_cache_key":`, w.PromptCacheKey)
	b = optString(b, `,"safety_identifier":`, w.SafetyIdentifier)
	return append(b, '}'), true
}

// sizeHint is about the length of w's JSON: its texts and some room.
func (w *wireRequest) sizeHint() int {
	n := 256
	for i := range w.Messages {
		if c, ok := w.Messages[i].Content.(string); ok {
			n += len(c) + 32
		}
	}
	return n
}

// comma appends a comma to b unless it is at n, an object's first member.
func comma(b []byte, n int) []byte {
	if len(b) > n {
		return append(b, ',')
	}
	return b
}

// optString appends the member name: s unless s is empty (omitempty).
func optString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return rawjson.AppendString(append(b, name...), s, true)
}

// optFloat appends the member name: *f unless f is nil (omitempty), as
// encoding/json writes a float64; false for NaN and infinities, which
// json.Marshal refuses.
func optFloat(b []byte, name string, f *float64) ([]byte, bool) {
	if f == nil {
		return b, true
	}
	v := *f
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b, false
	}
	return rawjson.AppendFloat(append(b, name...), v), true
}
