package openai

import (
	"encoding/json"

	"github.com/genway/genway/shared/rawjson"
)

// decodeChunk decodes one streamed chunk's JSON into c, which the caller
// has reset (wireChunk.reset). It takes the fast path, scanChunk, and
// falls back to encoding/json when that declines: the result is what
// json.Unmarshal gives in every case (FuzzScanChunk compares the two).
func decodeChunk(data []byte, c *wireChunk) error {
	if scanChunk(data, c) {
		return nil
	}
	c.reset() // the scan may have filled part of c
	return json.Unmarshal(data, c)
}

// scanChunk decodes data into c as json.Unmarshal would, for the chunks
// OpenAI-compatible servers stream: an object whose choices carry deltas
// of content, reasoning, refusal or tool calls and a finish reason, with
// usage and service_tier, and any other members skipped. It reads each
// byte once and allocates only the strings it keeps.
//
// It returns false, leaving c partly filled, for anything it does not
// take: malformed JSON, a member whose name differs only in case from a
// field's (json.Unmarshal matches those), names with escapes or non-ASCII
// bytes, an error member, a value of the wrong type, numbers that are not
// plain integers, strings whose bytes are not valid UTF-8 or whose escapes
// it does not decode, a repeated choices member, nesting deeper than
// maxScanDepth. The caller then decodes data with encoding/json, which
// also makes the error of a malformed chunk.
func scanChunk(data []byte, c *wireChunk) bool {
	return scanTop(data, c, nil)
}

// scanTop reads the object of a chunk (into c) or of a whole completion
// (into r; c nil) in data: its choices (once: a repeated member is
// declined), usage and service_tier, any other member skipped; it
// declines an error member and a name json.Unmarshal would fold onto a
// field.
func scanTop(data []byte, c *wireChunk, r *wireResponse) bool {
	var usage **wireUsage
	var tier *string
	if c != nil {
		usage, tier = &c.Usage, &c.ServiceTier
	} else {
		usage, tier = &r.Usage, &r.ServiceTier
	}
	s := rawjson.NewScanner(data)
	seenChoices := false
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			if seenChoices {
				return false
			}
			seenChoices = true
			if c != nil {
				return scanChoices(&s, c)
			}
			return scanResponseChoices(&s, r)
		case "usage":
			return rawjson.Ptr(&s, usage, func(v *wireUsage) bool { return scanUsage(&s, v) })
		case "service_tier":
			return s.StringIntoKnown(tier, "default", "flex", "priority", "auto", "scale")
		case "error", "error_type":
			return false
		}
		return !rawjson.FoldsTo(key, "choices", "usage", "service_tier", "error", "error_type") && s.Skip()
	})
	return ok && s.End()
}

// scanResponse is scanChunk for a whole (non-streamed) chat completion:
// it decodes data into r, which must be zero, as json.Unmarshal would, or
// returns false for what it does not take (FuzzScanResponse).
func scanResponse(data []byte, r *wireResponse) bool {
	return scanTop(data, nil, r)
}

// responseChoices reads a whole completion's choices into r.Choices.
func scanResponseChoices(s *rawjson.Scanner, r *wireResponse) bool {
	return rawjson.Objects(s, &r.Choices, func(ch *wireResponseChoice) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "message":
				return s.Null() || scanMessage(s, &ch.Message)
			case "finish_reason":
				return s.StringInto(&ch.FinishReason)
			}
			return !rawjson.FoldsTo(key, "message", "finish_reason") && s.Skip()
		})
	})
}

// choices reads the choices array into c.Choices, reusing its backing
// array as json.Unmarshal does.
func scanChoices(s *rawjson.Scanner, c *wireChunk) bool {
	// Null elements and the wrong types go to encoding/json.
	return rawjson.Objects(s, &c.Choices, func(ch *wireChoice) bool {
		return s.Object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return s.Int(&ch.Index)
			case "delta":
				return s.Null() || scanMessage(s, &ch.Delta)
			case "finish_reason":
				if s.Null() {
					ch.FinishReason = nil
					return true
				}
				var v string
				ok := s.StringIntoKnown(&v, "stop", "length", "tool_calls", "content_filter")
				ch.FinishReason = &v
				return ok
			}
			return !rawjson.FoldsTo(key, "index", "delta", "finish_reason") && s.Skip()
		})
	})
}

// message reads a choice's message, or a chunk's delta, into m.
func scanMessage(s *rawjson.Scanner, m *wireMessageOut) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return s.StringInto(&m.Content)
		case "refusal":
			return s.StringInto(&m.Refusal)
		case "reasoning_content":
			return s.StringInto(&m.ReasoningContent)
		case "reasoning":
			return s.StringInto(&m.Reasoning)
		case "tool_calls":
			if s.Null() {
				m.ToolCalls = nil
				return true
			}
			m.ToolCalls = m.ToolCalls[:0]
			return rawjson.Objects(s, &m.ToolCalls, func(tc *wireToolCall) bool { return scanToolCall(s, tc) })
		}
		return !rawjson.FoldsTo(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls") && s.Skip()
	})
}

// toolCall reads a piece of a tool call into tc.
func scanToolCall(s *rawjson.Scanner, tc *wireToolCall) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return s.Int(&tc.Index)
		case "id":
			return s.StringInto(&tc.ID)
		case "type":
			return s.StringIntoKnown(&tc.Type, "function")
		case "function":
			if s.Null() {
				return true
			}
			return s.Object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return s.StringInto(&tc.Function.Name)
				case "arguments":
					return s.StringInto(&tc.Function.Arguments)
				}
				return !rawjson.FoldsTo(key, "name", "arguments") && s.Skip()
			})
		}
		return !rawjson.FoldsTo(key, "index", "id", "type", "function") && s.Skip()
	})
}

// usage reads a usage object into u.
func scanUsage(s *rawjson.Scanner, u *wireUsage) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return s.Int(&u.PromptTokens)
		case "completion_tokens":
			return s.Int(&u.CompletionTokens)
		case "total_tokens":
			return s.Int(&u.TotalTokens)
		case "prompt_cache_hit_tokens":
			return s.Int(&u.PromptCacheHitTokens)
		case "prompt_tokens_details":
			if s.Null() {
				return true
			}
			d := &u.PromptTokensDetails
			return s.Object(func(key []byte) bool {
				switch string(key) {
				case "cached_tokens":
					return s.Int(&d.CachedTokens)
				case "cache_write_tokens":
					return s.Int(&d.CacheWriteTokens)
				}
				return !rawjson.FoldsTo(key, "cached_tokens", "cache_write_tokens") && s.Skip()
			})
		case "completion_tokens_details":
			if s.Null() {
				return true
			}
			return s.Object(func(key []byte) bool {
				if string(key) == "reasoning_tokens" {
					return s.Int(&u.CompletionTokensDetails.ReasoningTokens)
				}
				return !rawjson.FoldsTo(key, "reasoning_tokens") && s.Skip()
			})
		}
		return !rawjson.FoldsTo(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens",
			"prompt_tokens_details", "completion_tokens_details") && s.Skip()
	})
}
