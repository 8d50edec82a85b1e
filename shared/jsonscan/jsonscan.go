// Package jsonscan is a strict, allocation-light JSON scanner for the
// gateway's hot path: it reads the fields a caller knows, validates and
// skips every other value, and gives up on anything unusual. Callers fall
// back to encoding/json whenever a method reports false, so a scanner
// that reports true must have read exactly what encoding/json would (the
// callers' fuzz tests check this against encoding/json).
//
// It also has the appenders that hand-written encoders build on
// (AppendString, AppendFloat): their output is byte for byte encoding/json's.
package jsonscan

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is how deeply Skip nests arrays and objects before it reports
// false (encoding/json allows far more; the caller falls back to it).
const maxDepth = 64

// Scanner reads JSON from Buf starting at Pos. Every method that reads a
// value skips white space before it, advances Pos past what it read, and
// reports false when the input is malformed or not handled; Pos is then
// unspecified and the caller should fall back to encoding/json.
type Scanner struct {
	// Buf is the input; strings and numbers the Scanner returns may
	// alias it.
	Buf []byte
	// Pos is the offset of the next byte to read.
	Pos int
	// SimpleEscapes makes String report false for a string with a \b,
	// \f or \u escape, leaving only \" \\ \/ \n \r \t.
	SimpleEscapes bool

	depth int
}

// WS skips JSON white space.
func (s *Scanner) WS() {
	buf, i := s.Buf, s.Pos // locals: the loop keeps them in registers
	for i < len(buf) {
		switch buf[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			s.Pos = i
			return
		}
	}
	s.Pos = i
}

// Eat skips white space and then c, reporting whether c was there.
func (s *Scanner) Eat(c byte) bool {
	s.WS()
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == c {
		s.Pos++
		return true
	}
	return false
}

// Literal skips white space and then lit (such as true), reporting
// whether lit was there.
func (s *Scanner) Literal(lit string) bool {
	s.WS()
	if len(s.Buf)-s.Pos >= len(lit) && string(s.Buf[s.Pos:s.Pos+len(lit)]) == lit {
		s.Pos += len(lit)
		return true
	}
	return false
}

// Null consumes a null literal if one is next.
func (s *Scanner) Null() bool {
	return s.Literal("null")
}

// Fields parses an object. known lists the field names the caller
// handles (ASCII, at most 64), separated by spaces; for a key that is the
// n-th of them (from 0), field(n) parses the value, and other values are
// skipped. These are not handled (Fields reports false), because
// encoding/json would treat them differently: a known key seen twice (it
// merges), a key with an escape or a non-ASCII byte, or one that equals a
// known name only case-insensitively (it matches).
func (s *Scanner) Fields(known string, field func(n int) bool) bool {
	if !s.Eat('{') {
		return false
	}
	if s.Eat('}') {
		return true
	}
	var seen uint64
	for {
		if !s.Eat('"') {
			return false
		}
		start := s.Pos
		s.plain()
		if s.Pos == len(s.Buf) || s.Buf[s.Pos] != '"' {
			return false // the end, or an escape, control or non-ASCII byte in a key
		}
		key := s.Buf[start:s.Pos]
		s.Pos++
		if !s.Eat(':') {
			return false
		}
		n := -1
		for i, j := 0, 0; j < len(known); i++ { // the i-th word of known is known[j:end]
			end := j
			for end < len(known) && known[end] != ' ' {
				end++
			}
			if end-j == len(key) {
				if string(key) == known[j:end] {
					n = i
					break
				}
				if asciiEqualFold(key, known[j:end]) {
					return false
				}
			}
			j = end + 1
		}
		switch {
		case n < 0:
			if !s.Skip() {
				return false
			}
		case seen&(1<<n) != 0:
			return false
		default:
			seen |= 1 << n
			if !field(n) {
				return false
			}
		}
		if s.Eat(',') {
			continue
		}
		return s.Eat('}')
	}
}

// asciiEqualFold reports whether the ASCII strings a and b are equal
// ignoring case.
func asciiEqualFold(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// String parses a string value and returns it decoded, escapes and
// surrogate pairs included. A string with a lone surrogate or invalid
// UTF-8 (which encoding/json replaces with U+FFFD) is not handled, nor,
// with SimpleEscapes, one with a \b, \f or \u escape.
func (s *Scanner) String() (string, bool) {
	if !s.Eat('"') {
		return "", false
	}
	start := s.Pos
	ascii := true
	for s.Pos < len(s.Buf) {
		if s.plain(); s.Pos == len(s.Buf) {
			break
		}
		c := s.Buf[s.Pos]
		switch {
		case c == '"':
			v := s.Buf[start:s.Pos]
			s.Pos++
			if !ascii && !utf8.Valid(v) {
				return "", false
			}
			return string(v), true
		case c == '\\':
			return s.escapedString(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.Pos++
	}
	return "", false
}

// escapedString finishes a string that starts at start and has an escape
// at Pos.
func (s *Scanner) escapedString(start int) (string, bool) {
	out := make([]byte, 0, s.Pos-start+16)
	out = append(out, s.Buf[start:s.Pos]...)
	for s.Pos < len(s.Buf) {
		c := s.Buf[s.Pos]
		switch {
		case c == '"':
			s.Pos++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			s.Pos++
			continue
		}
		if s.Pos+1 >= len(s.Buf) {
			return "", false
		}
		e := s.Buf[s.Pos+1]
		s.Pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			if s.SimpleEscapes {
				return "", false
			}
			out = append(out, '\b')
		case 'f':
			if s.SimpleEscapes {
				return "", false
			}
			out = append(out, '\f')
		case 'u':
			if s.SimpleEscapes {
				return "", false
			}
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || s.Pos+1 >= len(s.Buf) || s.Buf[s.Pos] != '\\' || s.Buf[s.Pos+1] != 'u' {
					return "", false
				}
				s.Pos += 2
				r2, ok := s.hex4()
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (s *Scanner) hex4() (rune, bool) {
	if len(s.Buf)-s.Pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.Buf[s.Pos : s.Pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.Pos += 4
	return r, true
}

// Skip validates and skips any value; it reports false for arrays and
// objects nested more than 64 deep.
func (s *Scanner) Skip() bool {
	s.WS()
	if s.Pos >= len(s.Buf) {
		return false
	}
	switch c := s.Buf[s.Pos]; {
	case c == '{':
		if s.depth++; s.depth > maxDepth {
			return false
		}
		ok := s.Fields("", nil)
		s.depth--
		return ok
	case c == '[':
		if s.depth++; s.depth > maxDepth {
			return false
		}
		s.Pos++
		ok := s.Eat(']')
		for !ok {
			if !s.Skip() {
				break
			}
			if s.Eat(',') {
				continue
			}
			ok = s.Eat(']')
			break
		}
		s.depth--
		return ok
	case c == '"':
		s.Pos++
		for s.Pos < len(s.Buf) {
			if s.plain(); s.Pos == len(s.Buf) {
				break
			}
			switch c := s.Buf[s.Pos]; {
			case c == '"':
				s.Pos++
				return true
			case c < 0x20:
				return false
			case c == '\\':
				if s.Pos+1 >= len(s.Buf) {
					return false
				}
				switch s.Buf[s.Pos+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					s.Pos += 2
				case 'u':
					s.Pos += 2
					if _, ok := s.hex4(); !ok {
						return false
					}
				default:
					return false
				}
			default:
				s.Pos++
			}
		}
		return false
	case c == 't':
		return s.Literal("true")
	case c == 'f':
		return s.Literal("false")
	case c == 'n':
		return s.Literal("null")
	default:
		return s.number()
	}
}

// Number skips white space and a number, returning the number's bytes
// (aliasing Buf) for strconv to parse.
func (s *Scanner) Number() ([]byte, bool) {
	s.WS()
	start := s.Pos
	if !s.number() {
		return nil, false
	}
	return s.Buf[start:s.Pos], true
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) number() bool {
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == '-' {
		s.Pos++
	}
	start := s.Pos
	if n := s.digits(); n == 0 || (n > 1 && s.Buf[start] == '0') {
		return false
	}
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == '.' {
		s.Pos++
		if s.digits() == 0 {
			return false
		}
	}
	if s.Pos < len(s.Buf) && (s.Buf[s.Pos] == 'e' || s.Buf[s.Pos] == 'E') {
		s.Pos++
		if s.Pos < len(s.Buf) && (s.Buf[s.Pos] == '+' || s.Buf[s.Pos] == '-') {
			s.Pos++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// digits skips decimal digits, returning how many.
func (s *Scanner) digits() int {
	start := s.Pos
	for s.Pos < len(s.Buf) && '0' <= s.Buf[s.Pos] && s.Buf[s.Pos] <= '9' {
		s.Pos++
	}
	return s.Pos - start
}

// Integer skips white space and parses an integer that fits in bitSize
// bits (as strconv.ParseInt takes it: 0 means int). A number with a
// fraction or an exponent is not handled (encoding/json rejects it for an
// integer field, and the caller falls back to it for the error).
func (s *Scanner) Integer(bitSize int) (int64, bool) {
	s.WS()
	start := s.Pos
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == '-' {
		s.Pos++
	}
	digits := s.Pos
	if n := s.digits(); n == 0 || (n > 1 && s.Buf[digits] == '0') {
		return 0, false
	}
	if s.Pos < len(s.Buf) && (s.Buf[s.Pos] == '.' || s.Buf[s.Pos] == 'e' || s.Buf[s.Pos] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.Buf[start:s.Pos]), 10, bitSize)
	if err != nil {
		return 0, false
	}
	return n, true
}

// plainBytes[c] is 1 for a byte a JSON string holds as it is and that
// needs no further look: ASCII from space on, except " and \. A constant,
// so the lookup needs no bounds check and no mutable state.
const plainBytes = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// plain advances Pos over plain string bytes (plainBytes), stopping at a
// quote, a backslash, a control or non-ASCII byte, or the end.
func (s *Scanner) plain() {
	buf, i := s.Buf, s.Pos // locals: the loop keeps them in registers
	for i < len(buf) && plainBytes[buf[i]] != 0 {
		i++
	}
	s.Pos = i
}
