package httpapi

import (
	"encoding/json"

	"github.com/genway/genway/shared/rawjson"
)

// scanMessagesRequest decodes b, a Messages request body, into mr, which
// must be the zero messagesRequest, as json.Unmarshal(b, mr) would,
// without reflection: decodeMessages' fast path (FuzzScanMessagesRequest
// compares the two). It takes every member messagesRequest has a field
// for, and skips the others (context_management, a turn's output_config,
// ...), as json.Unmarshal does.
//
// It reports false, and leaves mr zero, for anything it does not take,
// by chat.ScanParams' rules: malformed JSON, a body that is not an
// object, a member whose name is written with escapes or non-ASCII bytes
// or differs only in case from a field's, a repeated array member
// (models, messages, stop_sequences, tools), a null or non-object turn
// or tool, a value of the wrong type, an integer that is not a plain int,
// a number out of float64's range, a decoded string with invalid UTF-8
// or half a surrogate pair, nesting deeper than rawjson's Scanner reads.
// The caller then decodes b with encoding/json, which also makes the
// error of a request it refuses.
//
// The raw members of mr (system, each turn's content, a tool's
// input_schema, ...) are slices of b, not copies: b must not change
// while mr is in use. Each slice's capacity ends with it.
func scanMessagesRequest(b []byte, mr *messagesRequest) bool {
	return rawjson.Taken(mr, scanMessagesBody(b, mr))
}

// messagesNames are the JSON names of messagesRequest's fields.
var messagesNames = []string{"model", "models", "max_tokens", "system", "messages", "stream", "stop_sequences",
	"temperature", "top_p", "top_k", "metadata", "thinking", "output_config", "tools", "tool_choice",
	"cache_control", "container", "mcp_servers"}

// scanMessagesBody is scanMessagesRequest, leaving mr partly filled when
// it declines.
func scanMessagesBody(b []byte, mr *messagesRequest) bool {
	s := rawjson.NewScanner(b)
	var seen struct{ models, messages, stops, tools bool }
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "model":
			return s.StringInto(&mr.Model)
		case "models":
			return rawjson.Once(&seen.models) && s.Strings(&mr.Models)
		case "max_tokens":
			return rawjson.RawInto(&s, &mr.MaxTokens)
		case "system":
			return rawjson.RawInto(&s, &mr.System)
		case "messages":
			return rawjson.Once(&seen.messages) && scanTurns(&s, mr)
		case "stream":
			return s.Bool(&mr.Stream)
		case "stop_sequences":
			return rawjson.Once(&seen.stops) && s.Strings(&mr.StopSequences)
		case "temperature":
			return s.OptFloat(&mr.Temperature)
		case "top_p":
			return s.OptFloat(&mr.TopP)
		case "top_k":
			return s.OptInt(&mr.TopK)
		case "metadata":
			if s.Null() {
				mr.Metadata = nil
				return true
			}
			if mr.Metadata == nil {
				mr.Metadata = &struct {
					UserID string `json:"user_id"`
				}{}
			}
			md := mr.Metadata
			return s.Object(func(key []byte) bool {
				if string(key) == "user_id" {
					return s.StringInto(&md.UserID)
				}
				return !rawjson.FoldsTo(key, "user_id") && s.Skip()
			})
		case "thinking":
			return scanThinking(&s, mr)
		case "output_config":
			return scanOutputConfig(&s, mr)
		case "tools":
			return rawjson.Once(&seen.tools) && scanMessagesTools(&s, mr)
		case "tool_choice":
			return scanToolChoice(&s, mr)
		case "cache_control":
			return rawjson.RawInto(&s, &mr.CacheControl)
		case "container":
			return rawjson.RawInto(&s, &mr.Container)
		case "mcp_servers":
			return rawjson.RawInto(&s, &mr.MCPServers)
		}
		return !rawjson.FoldsTo(key, messagesNames...) && s.Skip()
	})
	return ok && s.End()
}

// scanTurns reads messages into mr.Messages: null leaves it nil, an empty
// array makes it empty, not nil, as json.Unmarshal does. A turn's members
// other than role and content (Claude Code's output_config) are skipped.
func scanTurns(s *rawjson.Scanner, mr *messagesRequest) bool {
	if s.Null() {
		return true
	}
	mr.Messages = []messagesTurn{}
	return rawjson.Objects(s, &mr.Messages, func(t *messagesTurn) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "role":
				return s.StringIntoKnown(&t.Role, "user", "assistant", "system")
			case "content":
				return rawjson.RawInto(s, &t.Content)
			}
			return !rawjson.FoldsTo(key, "role", "content") && s.Skip()
		})
	})
}

// thinkingNames are the JSON names of messagesThinking's fields.
var thinkingNames = []string{"type", "budget_tokens", "display"}

// scanThinking reads thinking into mr.Thinking. A repeated member decodes
// into the first's, as json.Unmarshal decodes a pointer that is set.
func scanThinking(s *rawjson.Scanner, mr *messagesRequest) bool {
	return rawjson.Ptr(s, &mr.Thinking, func(th *messagesThinking) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&th.Type, "enabled", "adaptive", "disabled")
			case "budget_tokens":
				return s.OptInt(&th.BudgetTokens)
			case "display":
				return s.StringIntoKnown(&th.Display, "summarized", "omitted")
			}
			return !rawjson.FoldsTo(key, thinkingNames...) && s.Skip()
		})
	})
}

// scanOutputConfig reads output_config into mr.OutputConfig, as
// scanThinking reads thinking.
func scanOutputConfig(s *rawjson.Scanner, mr *messagesRequest) bool {
	return rawjson.Ptr(s, &mr.OutputConfig, func(oc *messagesOutput) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "effort":
				return s.StringIntoKnown(&oc.Effort, "low", "medium", "high", "xhigh", "max")
			case "format":
				if s.Null() {
					oc.Format = nil
					return true
				}
				if oc.Format == nil {
					oc.Format = &struct {
						Type   string          `json:"type"`
						Schema json.RawMessage `json:"schema"`
					}{}
				}
				f := oc.Format
				return s.Object(func(key []byte) bool {
					switch string(key) {
					case "type":
						return s.StringIntoKnown(&f.Type, "json_schema")
					case "schema":
						return rawjson.RawInto(s, &f.Schema)
					}
					return !rawjson.FoldsTo(key, "type", "schema") && s.Skip()
				})
			}
			return !rawjson.FoldsTo(key, "effort", "format") && s.Skip()
		})
	})
}

// toolNames are the JSON names of messagesTool's fields.
var toolNames = []string{"type", "name", "description", "input_schema", "strict", "defer_loading", "cache_control"}

// scanMessagesTools reads tools into mr.Tools.
func scanMessagesTools(s *rawjson.Scanner, mr *messagesRequest) bool {
	if s.Null() {
		return true
	}
	mr.Tools = []messagesTool{}
	return rawjson.Objects(s, &mr.Tools, func(t *messagesTool) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&t.Type, "custom")
			case "name":
				return s.StringInto(&t.Name)
			case "description":
				return s.StringInto(&t.Description)
			case "input_schema":
				return rawjson.RawInto(s, &t.InputSchema)
			case "strict":
				return s.OptBool(&t.Strict)
			case "defer_loading":
				return s.Bool(&t.DeferLoading)
			case "cache_control":
				return rawjson.RawInto(s, &t.CacheControl)
			}
			return !rawjson.FoldsTo(key, toolNames...) && s.Skip()
		})
	})
}

// toolPickNames are the JSON names of messagesToolPick's fields.
var toolPickNames = []string{"type", "name", "disable_parallel_tool_use"}

// scanToolChoice reads tool_choice into mr.ToolChoice, as scanThinking
// reads thinking.
func scanToolChoice(s *rawjson.Scanner, mr *messagesRequest) bool {
	return rawjson.Ptr(s, &mr.ToolChoice, func(tc *messagesToolPick) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&tc.Type, "auto", "any", "tool", "none")
			case "name":
				return s.StringInto(&tc.Name)
			case "disable_parallel_tool_use":
				return s.Bool(&tc.DisableParallelToolUse)
			}
			return !rawjson.FoldsTo(key, toolPickNames...) && s.Skip()
		})
	})
}
