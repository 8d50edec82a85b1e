package rawjson

import (
	"math"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to b as a JSON string, escaped byte for byte as
// encoding/json escapes it: ", \ and control characters (\n, \r, \t, \b
// and \f by name, the others as \u00XX), U+2028 and U+2029, and each byte
// of invalid UTF-8 as U+FFFD; with escapeHTML also <, > and & (encoding/json's
// default; a json.Encoder with SetEscapeHTML(false) leaves them).
func AppendString(b []byte, s string, escapeHTML bool) []byte {
	return appendString(b, s, escapeHTML, true)
}

// AppendLogString appends s to b as log/slog's JSONHandler writes a
// string: as AppendString without HTML escaping, but with \b and \f as
// \u0008 and \u000c (slog names only \n, \r and \t).
func AppendLogString(b []byte, s string) []byte { return appendString(b, s, false, false) }

// appendString is AppendString, \b and \f by name or not.
func appendString(b []byte, s string, escapeHTML, namedBF bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				if !namedBF {
					b = append(b, '\\', 'u', '0', '0', '0', '8')
					break
				}
				b = append(b, '\\', 'b')
			case '\f':
				if !namedBF {
					b = append(b, '\\', 'u', '0', '0', '0', 'c')
					break
				}
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f to b as encoding/json writes a float64: %f
// between 1e-6 and 1e21, else %e with an exponent of at least two
// digits. f must be finite (encoding/json refuses NaN and infinities).
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
