package httpapi

import (
	"github.com/genway/genway/shared/rawjson"
)

// scanResponsesRequest decodes b, a Responses request body, into rp,
// which must be the zero responsesRequest, as json.Unmarshal(b, rp)
// would, without reflection: serveResponses' fast path
// (FuzzScanResponsesRequest compares the two). It takes every member
// responsesRequest has a field for, and skips the others, as
// json.Unmarshal does. The input stays raw: rp.items decodes it.
//
// It reports false, and leaves rp zero, for anything it does not take,
// by chat.ScanParams' rules: malformed JSON, a body that is not an
// object, a member whose name is written with escapes or non-ASCII bytes
// or differs only in case from a field's, a repeated array or map member
// (models, tools, include, metadata, client_metadata: json.Unmarshal
// decodes the second into the first), a map member whose keys are
// written with escapes or non-ASCII bytes or whose values are not
// strings or null, a value of the wrong type, an integer that is not a
// plain int, a number out of float64's range, a decoded string with
// invalid UTF-8 or half a surrogate pair, nesting deeper than rawjson's
// Scanner reads. The caller then decodes b with encoding/json, which
// also makes the error of a request it refuses.
//
// The raw members of rp (input, each tool, tool_choice, ...) are slices
// of b, not copies: b must not change while rp is in use. Each slice's
// capacity ends with it.
func scanResponsesRequest(b []byte, rp *responsesRequest) bool {
	return rawjson.Taken(rp, scanResponsesBody(b, rp))
}

// responsesNames are the JSON names of responsesRequest's fields.
var responsesNames = []string{"model", "models", "input", "instructions", "max_output_tokens", "reasoning", "tools",
	"tool_choice", "parallel_tool_calls", "text", "stream", "stream_options", "store", "previous_response_id",
	"temperature", "top_p", "user", "metadata", "truncation", "include", "service_tier", "prompt_cache_key",
	"safety_identifier", "max_tool_calls", "background", "conversation", "prompt", "top_logprobs", "seed",
	"client_metadata"}

// scanResponsesBody is scanResponsesRequest, leaving rp partly filled
// when it declines.
func scanResponsesBody(b []byte, rp *responsesRequest) bool {
	s := rawjson.NewScanner(b)
	var seen struct{ models, tools, include, metadata, clientMetadata bool }
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "model":
			return s.StringInto(&rp.Model)
		case "models":
			return rawjson.Once(&seen.models) && s.Strings(&rp.Models)
		case "input":
			return rawjson.RawInto(&s, &rp.Input)
		case "instructions":
			return s.OptString(&rp.Instructions)
		case "max_output_tokens":
			return rawjson.RawInto(&s, &rp.MaxOutputTokens)
		case "reasoning":
			return scanResponsesReasoning(&s, rp)
		case "tools":
			return rawjson.Once(&seen.tools) && rawjson.RawsInto(&s, &rp.Tools)
		case "tool_choice":
			return rawjson.RawInto(&s, &rp.ToolChoice)
		case "parallel_tool_calls":
			return s.OptBool(&rp.ParallelToolCalls)
		case "text":
			return scanResponsesText(&s, rp)
		case "stream":
			return s.Bool(&rp.Stream)
		case "stream_options":
			return rawjson.RawInto(&s, &rp.StreamOptions)
		case "store":
			return s.OptBool(&rp.Store)
		case "previous_response_id":
			return s.OptString(&rp.PreviousResponseID)
		case "temperature":
			return s.OptFloat(&rp.Temperature)
		case "top_p":
			return s.OptFloat(&rp.TopP)
		case "user":
			return s.StringInto(&rp.User)
		case "metadata":
			return rawjson.Once(&seen.metadata) && s.StringMap(&rp.Metadata)
		case "truncation":
			return s.StringIntoKnown(&rp.Truncation, "auto", "disabled")
		case "include":
			return rawjson.Once(&seen.include) && s.Strings(&rp.Include)
		case "service_tier":
			return s.StringIntoKnown(&rp.ServiceTier, "auto", "default", "flex", "priority", "scale")
		case "prompt_cache_key":
			return s.StringInto(&rp.PromptCacheKey)
		case "safety_identifier":
			return s.StringInto(&rp.SafetyIdentifier)
		case "max_tool_calls":
			return s.OptInt(&rp.MaxToolCalls)
		case "background":
			return s.OptBool(&rp.Background)
		case "conversation":
			return rawjson.RawInto(&s, &rp.Conversation)
		case "prompt":
			return rawjson.RawInto(&s, &rp.Prompt)
		case "top_logprobs":
			return s.OptInt(&rp.TopLogprobs)
		case "seed":
			return s.OptInt64(&rp.Seed)
		case "client_metadata":
			return rawjson.Once(&seen.clientMetadata) && s.StringMap(&rp.ClientMetadata)
		}
		return !rawjson.FoldsTo(key, responsesNames...) && s.Skip()
	})
	return ok && s.End()
}

// scanResponsesReasoning reads reasoning into rp.Reasoning. A repeated
// member decodes into the first's, as json.Unmarshal decodes a pointer
// that is set.
func scanResponsesReasoning(s *rawjson.Scanner, rp *responsesRequest) bool {
	return rawjson.Ptr(s, &rp.Reasoning, func(r *responsesReasoning) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "effort":
				return s.OptString(&r.Effort, "none", "minimal", "low", "medium", "high", "xhigh")
			case "summary":
				return s.OptString(&r.Summary, "auto", "concise", "detailed")
			}
			return !rawjson.FoldsTo(key, "effort", "summary") && s.Skip()
		})
	})
}

// formatNames are the JSON names of responsesFormat's fields.
var formatNames = []string{"type", "name", "description", "schema", "strict"}

// scanResponsesText reads text into rp.Text, as scanResponsesReasoning
// reads reasoning.
func scanResponsesText(s *rawjson.Scanner, rp *responsesRequest) bool {
	return rawjson.Ptr(s, &rp.Text, func(t *responsesText) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "verbosity":
				return s.StringIntoKnown(&t.Verbosity, "low", "medium", "high")
			case "format":
				return rawjson.Ptr(s, &t.Format, func(f *responsesFormat) bool {
					return s.Object(func(key []byte) bool {
						switch string(key) {
						case "type":
							return s.StringIntoKnown(&f.Type, "text", "json_object", "json_schema")
						case "name":
							return s.StringInto(&f.Name)
						case "description":
							return s.StringInto(&f.Description)
						case "schema":
							return rawjson.RawInto(s, &f.Schema)
						case "strict":
							return s.OptBool(&f.Strict)
						}
						return !rawjson.FoldsTo(key, formatNames...) && s.Skip()
					})
				})
			}
			return !rawjson.FoldsTo(key, "format", "verbosity") && s.Skip()
		})
	})
}

// scanResponsesItems decodes b, a Responses request's input array, into
// items, which must be nil, as json.Unmarshal(b, items) would, without
// reflection: rp.items' fast path (FuzzScanResponsesItems compares the
// two). Every item shape is one flat responsesItem (a message's content,
// a call's arguments, an output... stay raw), so it takes each item
// Codex sends (message, reasoning, function_call, custom_tool_call,
// their outputs, tool_search_call...) and the others alike, skipping the
// members responsesItem has no field for.
//
// It reports false, and leaves items nil, by scanResponsesRequest's
// rules, and for a null or non-object item (json.Unmarshal leaves a
// null item zero) or a repeated tools member in an item. The caller then
// decodes b with encoding/json.
//
// The raw members of the items are slices of b, as scanResponsesRequest's
// are.
func scanResponsesItems(b []byte, items *[]responsesItem) bool {
	return rawjson.Taken(items, scanItems(b, items))
}

// itemNames are the JSON names of responsesItem's fields.
var itemNames = []string{"type", "role", "content", "id", "call_id", "namespace", "name", "arguments", "input",
	"action", "operation", "output", "status", "tools", "encrypted_content", "cache_control"}

// scanItems is scanResponsesItems, leaving items partly filled when it
// declines.
func scanItems(b []byte, items *[]responsesItem) bool {
	s := rawjson.NewScanner(b)
	if s.Null() {
		return s.End()
	}
	*items = []responsesItem{}
	ok := rawjson.Objects(&s, items, func(it *responsesItem) bool {
		seenTools := false
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return s.StringIntoKnown(&it.Type, "message", "reasoning", "function_call", "function_call_output",
					"custom_tool_call", "custom_tool_call_output", "tool_search_call", "tool_search_output",
					"local_shell_call", "local_shell_call_output", "item_reference")
			case "role":
				return s.StringIntoKnown(&it.Role, "user", "assistant", "system", "developer")
			case "content":
				return rawjson.RawInto(&s, &it.Content)
			case "id":
				return s.StringInto(&it.ID)
			case "call_id":
				return s.StringInto(&it.CallID)
			case "namespace":
				return s.StringInto(&it.Namespace)
			case "name":
				return s.StringInto(&it.Name)
			case "arguments":
				return rawjson.RawInto(&s, &it.Arguments)
			case "input":
				return s.OptString(&it.Input)
			case "action":
				return rawjson.RawInto(&s, &it.Action)
			case "operation":
				return rawjson.RawInto(&s, &it.Operation)
			case "output":
				return rawjson.RawInto(&s, &it.Output)
			case "status":
				return s.StringIntoKnown(&it.Status, "completed", "in_progress", "incomplete")
			case "tools":
				return rawjson.Once(&seenTools) && rawjson.RawsInto(&s, &it.Tools)
			case "encrypted_content":
				return s.StringInto(&it.EncryptedContent)
			case "cache_control":
				return rawjson.RawInto(&s, &it.CacheControl)
			}
			return !rawjson.FoldsTo(key, itemNames...) && s.Skip()
		})
	})
	return ok && s.End()
}
