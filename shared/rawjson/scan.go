package rawjson

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads a JSON value from its data, member by member, for a
// decoder that keeps a few fields of a known shape and leaves everything
// else to encoding/json: each method reads one thing and returns false
// for what it does not take (malformed JSON among it), and the decoder
// then declines the whole value. What it takes it reads as encoding/json
// would; each decoder built on it has a fuzz test comparing the two
// (openai.FuzzScanChunk, anthropic.FuzzScanEvent, gemini.FuzzScanEvent). It reads each byte once
// and allocates only the strings it returns.
//
// Member names are compared as written: Object declines a name with
// escapes or non-ASCII bytes, and a decoder declines one that FoldsTo a
// field's name, which encoding/json would match case-insensitively.
type Scanner struct {
	data []byte
	i    int
}

// NewScanner returns a Scanner at the start of data.
func NewScanner(data []byte) Scanner { return Scanner{data: data} }

// Bool reads true or false into dst, or a null, which leaves dst as it
// is.
func (s *Scanner) Bool(dst *bool) bool {
	switch {
	case s.literal("true"):
		*dst = true
	case s.literal("false"):
		*dst = false
	default:
		return s.Null()
	}
	return true
}

// Skip reads any value, checking it, and keeps nothing.
func (s *Scanner) Skip() bool { return s.skip(0) }

// Raw reads any value, checking it as Skip does, and returns it as
// written, without the whitespace around it: the bytes a json.RawMessage
// keeps. The result is a slice of the scanner's data whose capacity ends
// with it, so that an append to it copies instead of writing over what
// follows.
func (s *Scanner) Raw() ([]byte, bool) {
	s.space()
	start := s.i
	if !s.skip(0) {
		return nil, false
	}
	return s.data[start:s.i:s.i], true
}

// End reports whether only whitespace is left: the value was the whole
// data.
func (s *Scanner) End() bool {
	s.space()
	return s.i == len(s.data)
}

// maxScanDepth bounds the nesting Skip reads (encoding/json allows
// 10000; a deeper value is declined).
const maxScanDepth = 64

// Null consumes a null if it comes next.
func (s *Scanner) Null() bool { return s.literal("null") }

// space skips JSON whitespace.
func (s *Scanner) space() { s.i = skipSpace(s.data, s.i) }

// Peek returns the next byte after whitespace, 0 at the end.
func (s *Scanner) Peek() byte {
	s.space()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// literal consumes lit if it comes next.
func (s *Scanner) literal(lit string) bool {
	if s.Peek() == lit[0] && bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// Object reads an object, calling member for each member's name (ASCII,
// without escapes) with the scanner at its value, which member must
// consume.
func (s *Scanner) Object(member func(key []byte) bool) bool {
	if s.Peek() != '{' {
		return false
	}
	s.i++
	if s.Peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.Peek() != '"' {
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
		if s.Peek() != ':' {
			return false
		}
		s.i++
		if !member(s.data[start:end]) {
			return false
		}
		switch s.Peek() {
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

// Array reads an array, calling elem with the scanner at each element.
func (s *Scanner) Array(elem func() bool) bool {
	if s.Peek() != '[' {
		return false
	}
	s.i++
	if s.Peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.Peek() {
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

// Objects reads an array of objects onto the end of *list, as
// json.Unmarshal reads an array's elements into a slice: each element is
// the next of the slice's backing array while it lasts (its old value
// left for the element's members to decode over) and a zero T appended
// after; elem reads the element's object (s is at its '{'). It reports
// false for an element that is not an object, null included (encoding/json
// zeroes those: a caller's fallback), or when elem does. Resetting *list
// before, as json.Unmarshal does, is the caller's.
func Objects[T any](s *Scanner, list *[]T, elem func(e *T) bool) bool {
	return s.Array(func() bool {
		if s.Peek() != '{' {
			return false
		}
		if l := *list; len(l) < cap(l) {
			*list = l[:len(l)+1]
		} else {
			var zero T
			*list = append(l, zero)
		}
		return elem(&(*list)[len(*list)-1])
	})
}

// Ptr reads a value into *dst as json.Unmarshal reads one into a
// pointer: null sets *dst to nil; anything else is read by read into
// *dst, made first when nil (a pointer already set, by a repeated
// member, is read into again, not replaced).
func Ptr[T any](s *Scanner, dst **T, read func(v *T) bool) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	if *dst == nil {
		*dst = new(T)
	}
	return read(*dst)
}

// Int reads an integer (of at most 18 digits) into dst, or a null,
// which leaves dst as it is.
func (s *Scanner) Int(dst *int) bool {
	if s.Null() {
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

// StringInto reads a string into dst, or a null, which leaves dst as it
// is.
func (s *Scanner) StringInto(dst *string) bool {
	if s.Null() {
		return true
	}
	v, ok := s.ReadString()
	if ok {
		*dst = v
	}
	return ok
}

// ReadString reads a string. It takes the escapes of JSON except a \u escape of
// half a surrogate pair without its other half, and only valid UTF-8
// (encoding/json replaces what is not with U+FFFD).
func (s *Scanner) ReadString() (string, bool) { return s.readString(nil) }

// StringIntoKnown is StringInto for a member whose value is mostly one
// of known (an event's type, a service tier): such a value is set to the
// known string, without allocating a copy.
func (s *Scanner) StringIntoKnown(dst *string, known ...string) bool {
	if s.Null() {
		return true
	}
	v, ok := s.readString(known)
	if ok {
		*dst = v
	}
	return ok
}

// readString is ReadString, returning the element of known that equals
// a string written without escapes instead of a copy of it.
func (s *Scanner) readString(known []string) (string, bool) {
	if s.Peek() != '"' {
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
			for _, k := range known {
				if string(raw) == k {
					return k, true
				}
			}
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
func (s *Scanner) unquote(start int) (string, bool) {
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

// number reads a JSON number.
func (s *Scanner) number() bool {
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

// skip is Skip at depth. Unlike skipValue, which trusts JSON a decoder
// accepted, it checks every byte: what it takes, encoding/json takes.
func (s *Scanner) skip(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	switch s.Peek() {
	case '{':
		s.i++
		if s.Peek() == '}' {
			s.i++
			return true
		}
		for {
			if s.Peek() != '"' || !s.skipString() || s.Peek() != ':' {
				return false
			}
			s.i++
			if !s.skip(depth + 1) {
				return false
			}
			switch s.Peek() {
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
		return s.Array(func() bool { return s.skip(depth + 1) })
	case '"':
		return s.skipString()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.Null()
	}
	return s.number()
}

// skipString reads a string, checking its escapes, keeping nothing.
func (s *Scanner) skipString() bool {
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

// FoldsTo reports whether key equals one of names in ASCII case but not
// exactly: encoding/json would decode it into that field.
func FoldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && string(key) != n && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
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

// Decoders built on the Scanner read a member the way json.Unmarshal
// reads it into a field of each kind below (each is fuzzed against
// encoding/json through the decoders that use it: chat.ScanParams, the
// Messages request's, the Responses request's).

// Once reports whether *seen was false, and sets it: a decoder's guard
// for an array member met a second time, which it declines
// (json.Unmarshal decodes the second array into the first's elements).
func Once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// Taken returns ok, first setting *v to its zero value when ok is false:
// a scanned decode that declines may have filled part of *v, and its
// caller's fallback (encoding/json) starts from zero.
func Taken[T any](v *T, ok bool) bool {
	if !ok {
		var zero T
		*v = zero
	}
	return ok
}

// Strings reads an array of strings into *dst: null leaves it as it is,
// a null element is "".
func (s *Scanner) Strings(dst *[]string) bool {
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

// RawInto reads any value into *dst as json.RawMessage keeps it (null as
// the bytes null): a slice of the scanner's data (Raw).
func RawInto[T ~[]byte](s *Scanner, dst *T) bool {
	v, ok := s.Raw()
	*dst = v
	return ok
}

// RawsInto reads an array into *dst, each element as RawInto keeps it
// (a null element as null): null leaves *dst as it is, an empty array
// makes it empty, not nil.
func RawsInto[T ~[]byte](s *Scanner, dst *[]T) bool {
	if s.Null() {
		return true
	}
	v := []T{}
	ok := s.Array(func() bool {
		v = append(v, nil)
		return RawInto(s, &v[len(v)-1])
	})
	*dst = v
	return ok
}

// StringMap reads an object of strings into a new *dst, as
// json.Unmarshal reads it into a nil map[string]string (a null value is
// "", a repeated key's last value wins), or a null, which sets *dst to
// nil. A key Object does not take (escapes, non-ASCII bytes) declines it.
func (s *Scanner) StringMap(dst *map[string]string) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	m := map[string]string{}
	*dst = m
	return s.Object(func(key []byte) bool {
		var v string
		if !s.StringInto(&v) {
			return false
		}
		m[string(key)] = v
		return true
	})
}

// OptString reads a string into a new *dst, or a null, which sets *dst to
// nil. A value among known is not copied (StringIntoKnown).
func (s *Scanner) OptString(dst **string, known ...string) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	v := new(string)
	*dst = v
	return s.StringIntoKnown(v, known...)
}

// OptBool reads a boolean into a new *dst, or a null, which sets *dst to
// nil.
func (s *Scanner) OptBool(dst **bool) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	v := new(bool)
	*dst = v
	return s.Bool(v)
}

// Number reads a number, or a null (nil), and returns it as written.
func (s *Scanner) Number() (lit []byte, ok bool) {
	if s.Null() {
		return nil, true
	}
	if c := s.Peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return s.Raw()
}

// OptFloat reads a number into a new *dst, parsed as json.Unmarshal
// parses it (strconv.ParseFloat), or a null, which sets *dst to nil; one
// out of float64's range is declined.
func (s *Scanner) OptFloat(dst **float64) bool {
	lit, ok := s.Number()
	if !ok || lit == nil {
		*dst = nil
		return ok
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false
	}
	*dst = &f
	return true
}

// OptInt64 reads an integer into a new *dst, or a null, which sets *dst
// to nil. A fraction, an exponent or a value out of range is declined, as
// json.Unmarshal refuses it.
func (s *Scanner) OptInt64(dst **int64) bool { return optInt(s, dst, 64) }

// OptInt is OptInt64 for an *int.
func (s *Scanner) OptInt(dst **int) bool { return optInt(s, dst, strconv.IntSize) }

// optInt reads an integer of bits bits into a new *dst, or a null (nil).
func optInt[T int | int64](s *Scanner, dst **T, bits int) bool {
	lit, ok := s.Number()
	if !ok || lit == nil {
		*dst = nil
		return ok
	}
	n, err := strconv.ParseInt(string(lit), 10, bits)
	if err != nil {
		return false
	}
	v := T(n)
	*dst = &v
	return true
}
