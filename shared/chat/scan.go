package chat

import (
	"github.com/genway/genway/shared/rawjson"
)

// ScanParams decodes b, a chat completion request, into p, which must be
// the zero Params, as json.Unmarshal(b, p) would, without reflection: the
// HTTP edge's fast path (FuzzScanParams compares the two). It takes the
// members a request mostly carries, messages (role, content, name,
// tool_call_id, refusal, tool_calls, cache_control), tools and
// response_format among them, and skips the members Params has no field
// for.
//
// It reports false, and leaves p zero, for anything it does not take:
// malformed JSON, a body that is not an object, a member whose name is
// written with escapes or non-ASCII bytes or differs only in case from a
// field's (json.Unmarshal matches those), logit_bias and metadata (maps),
// a repeated array member (json.Unmarshal decodes the second into the
// first's elements), a null or non-object element of messages, tool_calls
// or tools, a value of the wrong type, an integer that is not a plain
// int64, a number out of float64's range, a decoded string (not a raw
// member, kept as written) with invalid UTF-8 or half a surrogate pair
// (json.Unmarshal replaces those with U+FFFD), nesting deeper than
// rawjson's Scanner reads. The caller then decodes b
// with encoding/json, which also makes the error of a request it
// refuses.
//
// The raw members of p (content, max_tokens, stop, a tool's parameters,
// ...) are slices of b, not copies: b must not change while p is in use.
// Each slice's capacity ends with it, so that appending to one copies it.
func ScanParams(b []byte, p *Params) bool {
	return rawjson.Taken(p, scanParams(b, p))
}

// paramsNames are the JSON names of Params' decoded fields.
var paramsNames = []string{"model", "models", "messages", "stream", "stream_options", "max_tokens",
	"max_completion_tokens", "reasoning_effort", "temperature", "top_p", "stop", "seed", "presence_penalty",
	"frequency_penalty", "logit_bias", "user", "metadata", "n", "tools", "tool_choice", "parallel_tool_calls",
	"response_format", "service_tier", "verbosity", "prompt_cache_key", "safety_identifier", "functions",
	"function_call", "logprobs", "top_logprobs", "store", "modalities", "audio", "prediction", "web_search_options"}

// scanParams is ScanParams, leaving p partly filled when it declines.
func scanParams(b []byte, p *Params) bool {
	s := rawjson.NewScanner(b)
	var seen struct{ models, messages, tools, modalities bool }
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "model":
			return s.StringInto(&p.Model)
		case "models":
			return rawjson.Once(&seen.models) && s.Strings(&p.Models)
		case "messages":
			return rawjson.Once(&seen.messages) && scanMessages(&s, p)
		case "stream":
			return s.Bool(&p.Stream)
		case "stream_options":
			return rawjson.Ptr(&s, &p.StreamOptions, func(o *StreamOptions) bool {
				return s.Object(func(key []byte) bool {
					if string(key) == "include_usage" {
						return s.Bool(&o.IncludeUsage)
					}
					return !rawjson.FoldsTo(key, "include_usage") && s.Skip()
				})
			})
		case "max_tokens":
			return rawjson.RawInto(&s, &p.MaxTokens)
		case "max_completion_tokens":
			return rawjson.RawInto(&s, &p.MaxCompletionTokens)
		case "reasoning_effort":
			return s.OptString(&p.ReasoningEffort, "none", "minimal", "low", "medium", "high", "xhigh")
		case "temperature":
			return s.OptFloat(&p.Temperature)
		case "top_p":
			return s.OptFloat(&p.TopP)
		case "stop":
			return rawjson.RawInto(&s, &p.Stop)
		case "seed":
			return s.OptInt64(&p.Seed)
		case "presence_penalty":
			return s.OptFloat(&p.PresencePenalty)
		case "frequency_penalty":
			return s.OptFloat(&p.FrequencyPenalty)
		case "user":
			return s.StringInto(&p.User)
		case "n":
			return s.OptInt(&p.N)
		case "tools":
			return rawjson.Once(&seen.tools) && scanTools(&s, p)
		case "tool_choice":
			return rawjson.RawInto(&s, &p.ToolChoice)
		case "parallel_tool_calls":
			return s.OptBool(&p.ParallelToolCalls)
		case "response_format":
			return scanResponseFormat(&s, p)
		case "service_tier":
			return s.StringIntoKnown(&p.ServiceTier, "auto", "default", "flex", "priority", "scale")
		case "verbosity":
			return s.StringIntoKnown(&p.Verbosity, "low", "medium", "high")
		case "prompt_cache_key":
			return s.StringInto(&p.PromptCacheKey)
		case "safety_identifier":
			return s.StringInto(&p.SafetyIdentifier)
		case "functions":
			return rawjson.RawInto(&s, &p.Functions)
		case "function_call":
			return rawjson.RawInto(&s, &p.FunctionCall)
		case "logprobs":
			return s.OptBool(&p.Logprobs)
		case "top_logprobs":
			return s.OptInt(&p.TopLogprobs)
		case "store":
			return s.OptBool(&p.Store)
		case "modalities":
			return rawjson.Once(&seen.modalities) && s.Strings(&p.Modalities)
		case "audio":
			return rawjson.RawInto(&s, &p.Audio)
		case "prediction":
			return rawjson.RawInto(&s, &p.Prediction)
		case "web_search_options":
			return rawjson.RawInto(&s, &p.WebSearchOptions)
		case "logit_bias", "metadata":
			return false
		}
		return !rawjson.FoldsTo(key, paramsNames...) && s.Skip()
	})
	return ok && s.End()
}

// messageNames are the JSON names of ParamsMessage's decoded fields.
var messageNames = []string{"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "cache_control"}

// scanMessages reads messages into p.Messages: null leaves it nil, an
// empty array makes it empty, not nil, as json.Unmarshal does. The first
// few are read on the stack, and copied to the heap once.
func scanMessages(s *rawjson.Scanner, p *Params) bool {
	if s.Null() {
		return true
	}
	var (
		buf   [8]ParamsMessage
		n     int             // in buf
		spill []ParamsMessage // all of them, once more than buf holds
	)
	ok := s.Array(func() bool {
		if s.Peek() != '{' {
			return false
		}
		var m *ParamsMessage
		switch {
		case spill != nil:
			spill = append(spill, ParamsMessage{})
			m = &spill[len(spill)-1]
		case n == len(buf):
			spill = make([]ParamsMessage, n+1, 2*len(buf))
			copy(spill, buf[:])
			m = &spill[n]
		default:
			m = &buf[n]
			n++
		}
		return scanMessage(s, m)
	})
	if spill == nil {
		spill = make([]ParamsMessage, n)
		copy(spill, buf[:n])
	}
	p.Messages = spill
	return ok
}

// scanMessage reads one message into m.
func scanMessage(s *rawjson.Scanner, m *ParamsMessage) bool {
	seenCalls := false
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return s.StringIntoKnown(&m.Role, RoleSystem, RoleUser, RoleAssistant, RoleTool, "developer")
		case "content":
			return rawjson.RawInto(s, &m.Content)
		case "name":
			return s.StringInto(&m.Name)
		case "tool_calls":
			return rawjson.Once(&seenCalls) && scanToolCalls(s, m)
		case "tool_call_id":
			return s.StringInto(&m.ToolCallID)
		case "refusal":
			return s.OptString(&m.Refusal)
		case "cache_control":
			return rawjson.RawInto(s, &m.CacheControl)
		}
		return !rawjson.FoldsTo(key, messageNames...) && s.Skip()
	})
}

// scanToolCalls reads an assistant message's tool_calls into m.ToolCalls.
func scanToolCalls(s *rawjson.Scanner, m *ParamsMessage) bool {
	if s.Null() {
		return true
	}
	m.ToolCalls = []ParamsToolCall{}
	return rawjson.Objects(s, &m.ToolCalls, func(tc *ParamsToolCall) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "id":
				return s.StringInto(&tc.ID)
			case "type":
				return s.StringIntoKnown(&tc.Type, "function")
			case "function":
				if s.Null() {
					return true // a struct: null leaves it as it is
				}
				f := &tc.Function
				return s.Object(func(key []byte) bool {
					switch string(key) {
					case "name":
						return s.StringInto(&f.Name)
					case "arguments":
						return s.StringInto(&f.Arguments)
					}
					return !rawjson.FoldsTo(key, "name", "arguments") && s.Skip()
				})
			}
			return !rawjson.FoldsTo(key, "id", "type", "function") && s.Skip()
		})
	})
}

// functionNames are the JSON names of ParamsFunction's fields.
var functionNames = []string{"name", "description", "parameters", "strict", "cache_control"}

// scanTools reads tools into p.Tools.
func scanTools(s *rawjson.Scanner, p *Params) bool {
	if s.Null() {
		return true
	}
	p.Tools = []ParamsTool{}
	return rawjson.Objects(s, &p.Tools, func(t *ParamsTool) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&t.Type, "function")
			case "function":
				return rawjson.Ptr(s, &t.Function, func(f *ParamsFunction) bool {
					return s.Object(func(key []byte) bool {
						switch string(key) {
						case "name":
							return s.StringInto(&f.Name)
						case "description":
							return s.StringInto(&f.Description)
						case "parameters":
							return rawjson.RawInto(s, &f.Parameters)
						case "strict":
							return s.OptBool(&f.Strict)
						case "cache_control":
							return rawjson.RawInto(s, &f.CacheControl)
						}
						return !rawjson.FoldsTo(key, functionNames...) && s.Skip()
					})
				})
			case "cache_control":
				return rawjson.RawInto(s, &t.CacheControl)
			}
			return !rawjson.FoldsTo(key, "type", "function", "cache_control") && s.Skip()
		})
	})
}

// scanResponseFormat reads response_format into p.ResponseFormat. A
// repeated member decodes into the first's, as json.Unmarshal decodes a
// pointer that is set.
func scanResponseFormat(s *rawjson.Scanner, p *Params) bool {
	return rawjson.Ptr(s, &p.ResponseFormat, func(rf *ParamsResponseFormat) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&rf.Type, "text", FormatJSONObject, FormatJSONSchema)
			case "json_schema":
				return rawjson.Ptr(s, &rf.JSONSchema, func(js *ParamsJSONSchema) bool {
					return s.Object(func(key []byte) bool {
						switch string(key) {
						case "name":
							return s.StringInto(&js.Name)
						case "description":
							return s.StringInto(&js.Description)
						case "schema":
							return rawjson.RawInto(s, &js.Schema)
						case "strict":
							return s.OptBool(&js.Strict)
						}
						return !rawjson.FoldsTo(key, "name", "description", "schema", "strict") && s.Skip()
					})
				})
			}
			return !rawjson.FoldsTo(key, "type", "json_schema") && s.Skip()
		})
	})
}
