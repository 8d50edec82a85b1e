package chat

import (
	"encoding/json"
	"strconv"

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
	if scanParams(b, p) {
		return true
	}
	*p = Params{}
	return false
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
			return once(&seen.models) && scanStrings(&s, &p.Models)
		case "messages":
			return once(&seen.messages) && scanMessages(&s, p)
		case "stream":
			return s.Bool(&p.Stream)
		case "stream_options":
			if s.Null() {
				p.StreamOptions = nil
				return true
			}
			if p.StreamOptions == nil {
				p.StreamOptions = new(StreamOptions)
			}
			o := p.StreamOptions
			return s.Object(func(key []byte) bool {
				if string(key) == "include_usage" {
					return s.Bool(&o.IncludeUsage)
				}
				return !rawjson.FoldsTo(key, "include_usage") && s.Skip()
			})
		case "max_tokens":
			return scanRaw(&s, &p.MaxTokens)
		case "max_completion_tokens":
			return scanRaw(&s, &p.MaxCompletionTokens)
		case "reasoning_effort":
			return scanOptString(&s, &p.ReasoningEffort, "none", "minimal", "low", "medium", "high", "xhigh")
		case "temperature":
			return scanFloat(&s, &p.Temperature)
		case "top_p":
			return scanFloat(&s, &p.TopP)
		case "stop":
			return scanRaw(&s, &p.Stop)
		case "seed":
			return scanInt64(&s, &p.Seed)
		case "presence_penalty":
			return scanFloat(&s, &p.PresencePenalty)
		case "frequency_penalty":
			return scanFloat(&s, &p.FrequencyPenalty)
		case "user":
			return s.StringInto(&p.User)
		case "n":
			return scanInt(&s, &p.N)
		case "tools":
			return once(&seen.tools) && scanTools(&s, p)
		case "tool_choice":
			return scanRaw(&s, &p.ToolChoice)
		case "parallel_tool_calls":
			return scanOptBool(&s, &p.ParallelToolCalls)
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
			return scanRaw(&s, &p.Functions)
		case "function_call":
			return scanRaw(&s, &p.FunctionCall)
		case "logprobs":
			return scanOptBool(&s, &p.Logprobs)
		case "top_logprobs":
			return scanInt(&s, &p.TopLogprobs)
		case "store":
			return scanOptBool(&s, &p.Store)
		case "modalities":
			return once(&seen.modalities) && scanStrings(&s, &p.Modalities)
		case "audio":
			return scanRaw(&s, &p.Audio)
		case "prediction":
			return scanRaw(&s, &p.Prediction)
		case "web_search_options":
			return scanRaw(&s, &p.WebSearchOptions)
		case "logit_bias", "metadata":
			return false
		}
		return !rawjson.FoldsTo(key, paramsNames...) && s.Skip()
	})
	return ok && s.End()
}

// once reports whether *seen was false, setting it: an array member met
// a second time is declined.
func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
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
			return scanRaw(s, &m.Content)
		case "name":
			return s.StringInto(&m.Name)
		case "tool_calls":
			return once(&seenCalls) && scanToolCalls(s, m)
		case "tool_call_id":
			return s.StringInto(&m.ToolCallID)
		case "refusal":
			return scanOptString(s, &m.Refusal)
		case "cache_control":
			return scanRaw(s, &m.CacheControl)
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
				if s.Null() {
					t.Function = nil
					return true
				}
				if t.Function == nil {
					t.Function = new(ParamsFunction)
				}
				f := t.Function
				return s.Object(func(key []byte) bool {
					switch string(key) {
					case "name":
						return s.StringInto(&f.Name)
					case "description":
						return s.StringInto(&f.Description)
					case "parameters":
						return scanRaw(s, &f.Parameters)
					case "strict":
						return scanOptBool(s, &f.Strict)
					case "cache_control":
						return scanRaw(s, &f.CacheControl)
					}
					return !rawjson.FoldsTo(key, functionNames...) && s.Skip()
				})
			case "cache_control":
				return scanRaw(s, &t.CacheControl)
			}
			return !rawjson.FoldsTo(key, "type", "function", "cache_control") && s.Skip()
		})
	})
}

// scanResponseFormat reads response_format into p.ResponseFormat. A
// repeated member decodes into the first's, as json.Unmarshal decodes a
// pointer that is set.
func scanResponseFormat(s *rawjson.Scanner, p *Params) bool {
	if s.Null() {
		p.ResponseFormat = nil
		return true
	}
	if p.ResponseFormat == nil {
		p.ResponseFormat = new(ParamsResponseFormat)
	}
	rf := p.ResponseFormat
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.StringIntoKnown(&rf.Type, "text", FormatJSONObject, FormatJSONSchema)
		case "json_schema":
			if s.Null() {
				rf.JSONSchema = nil
				return true
			}
			if rf.JSONSchema == nil {
				rf.JSONSchema = new(ParamsJSONSchema)
			}
			js := rf.JSONSchema
			return s.Object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return s.StringInto(&js.Name)
				case "description":
					return s.StringInto(&js.Description)
				case "schema":
					return scanRaw(s, &js.Schema)
				case "strict":
					return scanOptBool(s, &js.Strict)
				}
				return !rawjson.FoldsTo(key, "name", "description", "schema", "strict") && s.Skip()
			})
		}
		return !rawjson.FoldsTo(key, "type", "json_schema") && s.Skip()
	})
}

// scanStrings reads an array of strings into *dst: null leaves it nil, a
// null element is "".
func scanStrings(s *rawjson.Scanner, dst *[]string) bool {
	if s.Null() {
		return true
	}
	v := []string{}
	ok := s.Array(func() bool {
		v = append(v, "")
		return s.StringInto(&v[len(v)-1])
	})
	*dst = v
	return ok
}

// scanRaw reads any value into *dst as json.RawMessage keeps it (null as
// the bytes null), a slice of the scanner's data.
func scanRaw(s *rawjson.Scanner, dst *json.RawMessage) bool {
	v, ok := s.Raw()
	*dst = v
	return ok
}

// scanOptString reads a string into a new *dst, or a null, which sets
// *dst to nil. A value among known is not copied.
func scanOptString(s *rawjson.Scanner, dst **string, known ...string) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	v := new(string)
	*dst = v
	return s.StringIntoKnown(v, known...)
}

// scanOptBool reads a boolean into a new *dst, or a null, which sets *dst
// to nil.
func scanOptBool(s *rawjson.Scanner, dst **bool) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	v := new(bool)
	*dst = v
	return s.Bool(v)
}

// number reads a number, or a null (nil), and returns it as written.
func number(s *rawjson.Scanner) (lit []byte, ok bool) {
	if s.Null() {
		return nil, true
	}
	if c := s.Peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return s.Raw()
}

// scanFloat reads a number into a new *dst, parsed as json.Unmarshal
// parses it (strconv.ParseFloat), or a null, which sets *dst to nil.
func scanFloat(s *rawjson.Scanner, dst **float64) bool {
	lit, ok := number(s)
	if !ok || lit == nil {
		*dst = nil
		return ok
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false // out of range: json.Unmarshal's error
	}
	*dst = &f
	return true
}

// scanInt64 reads an integer into a new *dst, or a null, which sets *dst
// to nil. A fraction, an exponent or a value out of range is declined, as
// json.Unmarshal refuses it.
func scanInt64(s *rawjson.Scanner, dst **int64) bool {
	lit, ok := number(s)
	if !ok || lit == nil {
		*dst = nil
		return ok
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

// scanInt is scanInt64 for an *int.
func scanInt(s *rawjson.Scanner, dst **int) bool {
	lit, ok := number(s)
	if !ok || lit == nil {
		*dst = nil
		return ok
	}
	n, err := strconv.ParseInt(string(lit), 10, strconv.IntSize)
	if err != nil {
		return false
	}
	v := int(n)
	*dst = &v
	return true
}
