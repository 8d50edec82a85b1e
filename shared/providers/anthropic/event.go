package anthropic

import (
	"encoding/json"

	"github.com/genway/genway/shared/rawjson"
)

// decodeEvent decodes one stream event's data into se, which is zero. It
// takes the fast path, scanEvent, and falls back to encoding/json when
// that declines: the result is what json.Unmarshal gives in every case
// (FuzzScanEvent compares the two).
func decodeEvent(data []byte, se *streamEvent) error {
	if scanEvent(data, se) {
		return nil
	}
	return json.Unmarshal(data, se)
}

// eventTypes are the types of a Messages stream's events, and of its
// content blocks, that the scanners read without a copy (most frequent
// first).
var eventTypes = []string{"content_block_delta", "content_block_start", "content_block_stop", "ping", "message_start",
	"message_delta", "message_stop", "error", "text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"}

// scanEvent decodes data into se as json.Unmarshal would, for the events
// that make up most of a stream: an object of a type, an index and a
// delta of strings (content_block_delta: text, thinking, a signature, a
// tool's partial JSON; content_block_stop; ping), any other member
// skipped. It returns false, leaving se zero, for an event that
// carries a message, a content block, usage or an error (message_start,
// content_block_start, message_delta, error: one each in a stream), and
// for anything rawjson.Scanner does not take.
func scanEvent(data []byte, se *streamEvent) bool {
	return rawjson.Taken(se, scanEventMembers(data, se))
}

// scanEventMembers is scanEvent, leaving se partly filled when it declines.
func scanEventMembers(data []byte, se *streamEvent) bool {
	s := rawjson.NewScanner(data)
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.StringIntoKnown(&se.Type, eventTypes...)
		case "index":
			return s.Int(&se.Index)
		case "delta":
			return rawjson.Ptr(&s, &se.Delta, func(v *streamDelta) bool { return scanDelta(&s, v) })
		case "message", "content_block", "usage", "error":
			return false
		}
		return !rawjson.FoldsTo(key, "type", "index", "delta", "message", "content_block", "usage", "error") && s.Skip()
	})
	return ok && s.End()
}

// scanDelta reads an event's delta into d.
func scanDelta(s *rawjson.Scanner, d *streamDelta) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.StringIntoKnown(&d.Type, "text_delta", "thinking_delta", "input_json_delta", "signature_delta")
		case "text":
			return s.StringInto(&d.Text)
		case "thinking":
			return s.StringInto(&d.Thinking)
		case "signature":
			return s.StringInto(&d.Signature)
		case "partial_json":
			return s.StringInto(&d.PartialJSON)
		case "stop_reason":
			return s.StringIntoKnown(&d.StopReason, "end_turn", "max_tokens", "tool_use", "stop_sequence")
		}
		return !rawjson.FoldsTo(key, "type", "text", "thinking", "signature", "partial_json", "stop_reason") && s.Skip()
	})
}
