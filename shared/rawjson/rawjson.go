// Package rawjson reads and edits the members of JSON objects as bytes,
// without decoding them: the native path's way (see chat.NativeProvider)
// to change only what it must of a body or an event it relays, at the
// cost of a scan, and to leave every other byte as it came. It also holds
// the pieces of the hot path's own JSON: Scanner, which reads the few
// fields a decoder keeps, and AppendString, which writes a string as
// encoding/json does.
//
// Member, Set and Delete take a JSON object, possibly surrounded by whitespace.
// Keys are compared as they are written, between their quotes: a key
// written with escapes is not found by its unescaped name. They scan only
// as far as they need: a malformed object may be reported as one, or, past
// what they read, not noticed; give them JSON a decoder accepted.
package rawjson

import (
	"bytes"
	"errors"
)

// ErrNotObject is the error for input that is not a JSON object, as far
// as it was read.
var ErrNotObject = errors.New("rawjson: not a JSON object")

// span is where a member is in its object: from the start of its key
// to the end of its value, and the value's own span.
type span struct {
	key, start, end int
}

// find returns the span of key's member in obj (ok false if it has
// none), and the index of the object's opening brace and of its closing
// one (when the whole object was scanned: the key is not there).
func find(obj []byte, key string) (m span, open, close int, ok bool, err error) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return m, 0, 0, false, ErrNotObject
	}
	open = i
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return m, open, i, false, nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return m, 0, 0, false, ErrNotObject
		}
		ks := i
		if i, err = skipString(obj, i); err != nil {
			return m, 0, 0, false, err
		}
		k := obj[ks+1 : i-1]
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != ':' {
			return m, 0, 0, false, ErrNotObject
		}
		vs := skipSpace(obj, i+1)
		if i, err = skipValue(obj, vs); err != nil {
			return m, 0, 0, false, err
		}
		if string(k) == key {
			return span{ks, vs, i}, open, 0, true, nil
		}
		i = skipSpace(obj, i)
		switch {
		case i < len(obj) && obj[i] == ',':
			i = skipSpace(obj, i+1)
		case i < len(obj) && obj[i] == '}':
			return m, open, i, false, nil
		default:
			return m, 0, 0, false, ErrNotObject
		}
	}
}

// Member returns the value of key in obj, as it is written there (a
// slice of obj), and whether obj has it; false for obj that is not an
// object.
func Member(obj []byte, key string) ([]byte, bool) {
	m, _, _, ok, err := find(obj, key)
	if err != nil || !ok {
		return nil, false
	}
	return obj[m.start:m.end], true
}

// Set returns a copy of obj with the member at path (keys of nested
// objects) set to value, a JSON value written as it is: replaced where
// obj has it, added first in its object where not; an object on the path
// that is missing, or is not an object (null), is made.
func Set(obj, value []byte, path ...string) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("rawjson: Set needs a path")
	}
	m, open, _, ok, err := find(obj, path[0])
	if err != nil {
		return nil, err
	}
	if len(path) > 1 {
		inner := []byte("{}")
		if ok {
			if v := obj[m.start:m.end]; v[0] == '{' {
				inner = v
			}
		}
		if value, err = Set(inner, value, path[1:]...); err != nil {
			return nil, err
		}
	}
	if ok {
		return splice(obj, m.start, m.end, value), nil
	}
	member := make([]byte, 0, len(path[0])+len(value)+4)
	member = append(quote(member, path[0]), ':')
	member = append(member, value...)
	if j := skipSpace(obj, open+1); j < len(obj) && obj[j] != '}' {
		member = append(member, ',')
	}
	return splice(obj, open+1, open+1, member), nil
}

// Delete returns a copy of obj without key's member (obj as it is when it
// has none).
func Delete(obj []byte, key string) ([]byte, error) {
	m, open, _, ok, err := find(obj, key)
	if err != nil || !ok {
		return obj, err
	}
	start, end := m.key, m.end
	if j := skipSpace(obj, end); j < len(obj) && obj[j] == ',' {
		end = skipSpace(obj, j+1) // the comma after it
	} else if p := lastNonSpace(obj, open+1, start); p >= 0 && obj[p] == ',' {
		start = p // it was last: the comma before it
	}
	return splice(obj, start, end, nil), nil
}

// splice returns a copy of b with b[i:j] replaced by s.
func splice(b []byte, i, j int, s []byte) []byte {
	out := make([]byte, 0, len(b)-(j-i)+len(s))
	out = append(out, b[:i]...)
	out = append(out, s...)
	return append(out, b[j:]...)
}

// quote appends s, a key without characters to escape, quoted.
func quote(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// lastNonSpace returns the index of the last byte of b[from:to] that is
// not whitespace, -1 if none.
func lastNonSpace(b []byte, from, to int) int {
	for p := to - 1; p >= from; p-- {
		if !isSpace(b[p]) {
			return p
		}
	}
	return -1
}

// skipString returns the index after the string that begins at b[i].
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return 0, ErrNotObject
		}
		j += q
		n := 0 // the backslashes before the quote: an odd number escapes it
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, nil
		}
	}
}

// skipValue returns the index after the value that begins at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrNotObject
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, ErrNotObject
	}
	j := i // a number, true, false or null
	for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	if j == i {
		return 0, ErrNotObject
	}
	return j, nil
}
