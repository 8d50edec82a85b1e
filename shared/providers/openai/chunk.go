package openai

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
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
	s := scanner{data: data}
	seenChoices := false
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			if seenChoices {
				return false
			}
			seenChoices = true
			if c != nil {
				return s.choices(c)
			}
			return s.responseChoices(r)
		case "usage":
			if s.null() {
				*usage = nil
				return true
			}
			if *usage == nil {
				*usage = new(wireUsage)
			}
			return s.usage(*usage)
		case "service_tier":
			return s.stringInto(tier)
		case "error", "error_type":
			return false
		}
		return !foldsTo(key, "choices", "usage", "service_tier", "error", "error_type") && s.skip(0)
	})
	s.space()
	return ok && s.i == len(s.data)
}

// scanResponse is scanChunk for a whole (non-streamed) chat completion:
// it decodes data into r, which must be zero, as json.Unmarshal would, or
// returns false for what it does not take (FuzzScanResponse).
func scanResponse(data []byte, r *wireResponse) bool {
	return scanTop(data, nil, r)
}

// responseChoices reads a whole completion's choices into r.Choices.
func (s *scanner) responseChoices(r *wireResponse) bool {
	return s.array(func() bool {
		if s.peek() != '{' {
			return false
		}
		r.Choices = append(r.Choices, wireResponseChoice{})
		ch := &r.Choices[len(r.Choices)-1]
		return s.object(func(key []byte) bool {
			switch string(key) {
			case "message":
				return s.null() || s.message(&ch.Message)
			case "finish_reason":
				return s.stringInto(&ch.FinishReason)
			}
			return !foldsTo(key, "message", "finish_reason") && s.skip(0)
		})
	})
}

// maxScanDepth bounds the nesting scanChunk skips (encoding/json allows
// 10000; deeper chunks go to it).
const maxScanDepth = 64

// scanner reads JSON from data at i.
type scanner struct {
	data []byte
	i    int
}

// space skips JSON whitespace.
func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// literal consumes lit if it comes next.
func (s *scanner) literal(lit string) bool {
	if s.peek() == lit[0] && bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// null consumes a null if it comes next.
func (s *scanner) null() bool { return s.literal("null") }

// object reads an object, calling member for each member's name (ASCII,
// without escapes) with the scanner at its value, which member must
// consume.
func (s *scanner) object(member func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.i + 1
		end := start
		for end < len(s.data) && s.data[end] != '"' {
			if b := s.data[end]; b == '\\' || b < 0x20 || b >= utf8.RuneSelf {
				return false
			}
			end++
		}
		if end == len(s.data) {
			return false
		}
		s.i = end + 1
		if s.peek() != ':' {
			return false
		}
		s.i++
		if !member(s.data[start:end]) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with the scanner at each element.
func (s *scanner) array(elem func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// foldsTo reports whether key equals one of names in ASCII case but not
// exactly: encoding/json would decode it into that field.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && string(key) != n && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// choices reads the choices array into c.Choices, reusing its backing
// array as json.Unmarshal does.
func (s *scanner) choices(c *wireChunk) bool {
	return s.array(func() bool {
		if s.peek() != '{' {
			return false // null elements and the wrong types go to encoding/json
		}
		if len(c.Choices) < cap(c.Choices) {
			c.Choices = c.Choices[:len(c.Choices)+1]
		} else {
			c.Choices = append(c.Choices, wireChoice{})
		}
		ch := &c.Choices[len(c.Choices)-1]
		return s.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return s.intInto(&ch.Index)
			case "delta":
				return s.null() || s.message(&ch.Delta)
			case "finish_reason":
				if s.null() {
					ch.FinishReason = nil
					return true
				}
				v, ok := s.str()
				ch.FinishReason = &v
				return ok
			}
			return !foldsTo(key, "index", "delta", "finish_reason") && s.skip(0)
		})
	})
}

// message reads a choice's message, or a chunk's delta, into m.
func (s *scanner) message(m *wireMessageOut) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return s.stringInto(&m.Content)
		case "refusal":
			return s.stringInto(&m.Refusal)
		case "reasoning_content":
			return s.stringInto(&m.ReasoningContent)
		case "reasoning":
			return s.stringInto(&m.Reasoning)
		case "tool_calls":
			if s.null() {
				m.ToolCalls = nil
				return true
			}
			m.ToolCalls = m.ToolCalls[:0]
			return s.array(func() bool {
				if s.peek() != '{' {
					return false
				}
				if len(m.ToolCalls) < cap(m.ToolCalls) {
					m.ToolCalls = m.ToolCalls[:len(m.ToolCalls)+1]
				} else {
					m.ToolCalls = append(m.ToolCalls, wireToolCall{})
				}
				return s.toolCall(&m.ToolCalls[len(m.ToolCalls)-1])
			})
		}
		return !foldsTo(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls") && s.skip(0)
	})
}

// toolCall reads a piece of a tool call into tc.
func (s *scanner) toolCall(tc *wireToolCall) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return s.intInto(&tc.Index)
		case "id":
			return s.stringInto(&tc.ID)
		case "type":
			return s.stringInto(&tc.Type)
		case "function":
			if s.null() {
				return true
			}
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return s.stringInto(&tc.Function.Name)
				case "arguments":
					return s.stringInto(&tc.Function.Arguments)
				}
				return !foldsTo(key, "name", "arguments") && s.skip(0)
			})
		}
		return !foldsTo(key, "index", "id", "type", "function") && s.skip(0)
	})
}

// usage reads a usage object into u.
func (s *scanner) usage(u *wireUsage) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return s.intInto(&u.PromptTokens)
		case "completion_tokens":
			return s.intInto(&u.CompletionTokens)
		case "total_tokens":
			return s.intInto(&u.TotalTokens)
		case "prompt_cache_hit_tokens":
			return s.intInto(&u.PromptCacheHitTokens)
		case "prompt_tokens_details":
			if s.null() {
				return true
			}
			d := &u.PromptTokensDetails
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "cached_tokens":
					return s.intInto(&d.CachedTokens)
				case "cache_write_tokens":
					return s.intInto(&d.CacheWriteTokens)
				}
				return !foldsTo(key, "cached_tokens", "cache_write_tokens") && s.skip(0)
			})
		case "completion_tokens_details":
			if s.null() {
				return true
			}
			return s.object(func(key []byte) bool {
				if string(key) == "reasoning_tokens" {
					return s.intInto(&u.CompletionTokensDetails.ReasoningTokens)
				}
				return !foldsTo(key, "reasoning_tokens") && s.skip(0)
			})
		}
		return !foldsTo(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens",
			"prompt_tokens_details", "completion_tokens_details") && s.skip(0)
	})
}

// intInto reads an integer (of at most 18 digits) into dst, or a null,
// which leaves dst as it is.
func (s *scanner) intInto(dst *int) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.number() {
		return false
	}
	tok := s.data[start:s.i]
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) > 18 {
		return false
	}
	n := 0
	for _, b := range tok {
		if b < '0' || b > '9' {
			return false // a fraction or an exponent: encoding/json refuses it for an int
		}
		n = n*10 + int(b-'0')
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

// stringInto reads a string into dst, or a null, which leaves dst as it
// is.
func (s *scanner) stringInto(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str()
	if ok {
		*dst = v
	}
	return ok
}

// str reads a string. It takes the escapes of JSON except a \u escape of
// half a surrogate pair without its other half, and only valid UTF-8
// (encoding/json replaces what is not with U+FFFD).
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	ascii := true
	for i := start; i < len(s.data); i++ {
		switch b := s.data[i]; {
		case b == '"':
			raw := s.data[start:i]
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			s.i = i + 1
			return string(raw), true
		case b == '\\':
			return s.unquote(start)
		case b < 0x20:
			return "", false
		case b >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// unquote reads the string starting at start (after its quote) that has
// escapes.
func (s *scanner) unquote(start int) (string, bool) {
	out := make([]byte, 0, 64)
	i := start
	for i < len(s.data) {
		b := s.data[i]
		switch {
		case b == '"':
			if !utf8.Valid(out) {
				return "", false
			}
			s.i = i + 1
			return string(out), true
		case b < 0x20:
			return "", false
		case b != '\\':
			out = append(out, b)
			i++
			continue
		}
		if i+1 >= len(s.data) {
			return "", false
		}
		switch e := s.data[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s.data[i+2:])
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a whole pair: a lone half becomes U+FFFD in
				// encoding/json, which decodes those.
				if i+1 >= len(s.data) || s.data[i] != '\\' || s.data[i+1] != 'u' {
					return "", false
				}
				r2, ok := hex4(s.data[i+2:])
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a JSON number.
func (s *scanner) number() bool {
	d, i := s.data, s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}

// skip reads and checks any value, keeping nothing; depth is how deep it
// is nested.
func (s *scanner) skip(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	switch s.peek() {
	case '{':
		s.i++
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			if s.peek() != '"' || !s.skipString() || s.peek() != ':' {
				return false
			}
			s.i++
			if !s.skip(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case '"':
		return s.skipString()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.null()
	}
	return s.number()
}

// skipString reads a string, checking its escapes, keeping nothing.
func (s *scanner) skipString() bool {
	i := s.i + 1
	for i < len(s.data) {
		switch b := s.data[i]; {
		case b == '"':
			s.i = i + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			if i+1 >= len(s.data) {
				return false
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(s.data[i+2:]); !ok {
					return false
				}
				i += 6
			default:
				return false
			}
		default:
			i++
		}
	}
	return false
}
