package gemini

import (
	"encoding/json"

	"github.com/genway/genway/shared/rawjson"
)

// decodeEvent decodes one stream event's data into g, which is zero. It
// takes the fast path, scanEvent, and falls back to encoding/json when
// that declines: the result is what json.Unmarshal gives in every case
// (FuzzScanEvent compares the two).
func decodeEvent(data []byte, g *generateResponse) error {
	if scanEvent(data, g) {
		return nil
	}
	return json.Unmarshal(data, g)
}

// scanEvent decodes data into g as json.Unmarshal would, for the events
// of a streamed answer: candidates whose content has text parts (thoughts
// among them, with their signatures) and a finish reason, usage metadata
// and the response id, any other member skipped. It returns false,
// leaving g zero, for an event with a function call, inline data, a
// prompt feedback or an error, and for anything rawjson.Scanner does not
// take.
func scanEvent(data []byte, g *generateResponse) bool {
	return rawjson.Taken(g, scanEventMembers(data, g))
}

// scanEventMembers is scanEvent, leaving g partly filled when it declines.
func scanEventMembers(data []byte, g *generateResponse) bool {
	s := rawjson.NewScanner(data)
	seenCandidates := false
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "candidates":
			if seenCandidates {
				return false
			}
			seenCandidates = true
			if s.Peek() == '[' && g.Candidates == nil {
				g.Candidates = []candidate{} // [] is empty, not nil, as encoding/json makes it
			}
			return rawjson.Objects(&s, &g.Candidates, func(c *candidate) bool { return scanCandidate(&s, c) })
		case "usageMetadata":
			return rawjson.Ptr(&s, &g.UsageMetadata, func(v *usageMetadata) bool { return scanUsage(&s, v) })
		case "responseId":
			return s.StringInto(&g.ResponseID)
		case "promptFeedback", "error":
			return false
		}
		return !rawjson.FoldsTo(key, "candidates", "usageMetadata", "responseId", "promptFeedback", "error") && s.Skip()
	})
	return ok && s.End()
}

// scanCandidate reads a candidate into c.
func scanCandidate(s *rawjson.Scanner, c *candidate) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "content":
			if s.Null() {
				c.Content = nil
				return true
			}
			if c.Content != nil {
				return false // a repeated content: encoding/json merges it
			}
			c.Content = new(content)
			return scanContent(s, c.Content)
		case "finishReason":
			return s.StringIntoKnown(&c.FinishReason, "STOP", "MAX_TOKENS", "SAFETY")
		}
		return !rawjson.FoldsTo(key, "content", "finishReason") && s.Skip()
	})
}

// scanContent reads a candidate's content into c: its role and text
// parts.
func scanContent(s *rawjson.Scanner, c *content) bool {
	seenParts := false
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return s.StringIntoKnown(&c.Role, "model")
		case "parts":
			if seenParts {
				return false
			}
			seenParts = true
			if s.Null() {
				c.Parts = nil
				return true
			}
			if s.Peek() == '[' && c.Parts == nil {
				c.Parts = []part{}
			}
			return rawjson.Objects(s, &c.Parts, func(p *part) bool {
				return s.Object(func(key []byte) bool {
					switch string(key) {
					case "text":
						return s.StringInto(&p.Text)
					case "thought":
						return s.Bool(&p.Thought)
					case "thoughtSignature":
						return s.StringInto(&p.ThoughtSignature)
					case "inlineData", "functionCall", "functionResponse":
						return false
					}
					return !rawjson.FoldsTo(key, "text", "thought", "thoughtSignature", "inlineData", "functionCall", "functionResponse") && s.Skip()
				})
			})
		}
		return !rawjson.FoldsTo(key, "role", "parts") && s.Skip()
	})
}

// scanUsage reads usage metadata into u.
func scanUsage(s *rawjson.Scanner, u *usageMetadata) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "promptTokenCount":
			return s.Int(&u.PromptTokenCount)
		case "cachedContentTokenCount":
			return s.Int(&u.CachedContentTokenCount)
		case "candidatesTokenCount":
			return s.Int(&u.CandidatesTokenCount)
		case "thoughtsTokenCount":
			return s.Int(&u.ThoughtsTokenCount)
		case "totalTokenCount":
			return s.Int(&u.TotalTokenCount)
		}
		return !rawjson.FoldsTo(key, "promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
			"thoughtsTokenCount", "totalTokenCount") && s.Skip()
	})
}
