package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// stringSamples are string values: ok tells whether String handles them
// (with simple reporting the same under SimpleEscapes), want is the
// decoded value when it does.
var stringSamples = []struct {
	in     string
	ok     bool
	simple bool
	want   string
}{
	{`"plain"`, true, true, "plain"},
	{` "ws before"`, true, true, "ws before"},
	{`""`, true, true, ""},
	{`"日本語 🙂"`, true, true, "日本語 🙂"},
	{`"q\"b\\s\/n\nr\rt\t"`, true, true, "q\"b\\s/n\nr\rt\t"},
	{`"\b\f"`, true, false, "\b\f"},
	{`"caf\u00e9"`, true, false, "café"},
	{`"\u00E9\u0041"`, true, false, "éA"},
	{`"\ud83d\ude00"`, true, false, "😀"},
	{`"\u2028"`, true, false, "\u2028"},
	{`"lone \ud83d"`, false, false, ""},
	{`"lone \ude00"`, false, false, ""},
	{`"\ud83d\u0041"`, false, false, ""},
	{`"\u12g4"`, false, false, ""},
	{`"\u12"`, false, false, ""},
	{`"\x"`, false, false, ""},
	{"\"bad \xff\"", false, false, ""},
	{"\"bad \xff \\n\"", false, false, ""},
	{"\"ctl \x01\"", false, false, ""},
	{`"unterminated`, false, false, ""},
	{`"esc at end\`, false, false, ""},
	{`5`, false, false, ""},
	{``, false, false, ""},
}

func TestString(t *testing.T) {
	for _, tt := range stringSamples {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			got, ok := s.String()
			if ok != tt.ok || got != tt.want {
				t.Errorf("String(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
			if ok && s.Pos != len(tt.in) {
				t.Errorf("String(%q) Pos = %d; want %d", tt.in, s.Pos, len(tt.in))
			}
			s = Scanner{Buf: []byte(tt.in), SimpleEscapes: true}
			got, ok = s.String()
			want := tt.want
			if !tt.simple {
				want = ""
			}
			if ok != tt.simple || got != want {
				t.Errorf("SimpleEscapes String(%q) = %q, %v; want %q, %v", tt.in, got, ok, want, tt.simple)
			}
		})
	}
}

// skipSamples are single values: ok tells whether Skip accepts them.
var skipSamples = []struct {
	in string
	ok bool
}{
	{`null`, true},
	{`true`, true},
	{`false`, true},
	{` 0`, true},
	{`-0`, true},
	{`12.5e-3`, true},
	{`-1E+10`, true},
	{`"a\"\u00e9\b"`, true},
	{"\"\xff\"", true}, // encoding/json accepts invalid UTF-8 (as U+FFFD)
	{`[]`, true},
	{`{}`, true},
	{`[1, "x", {"a": [null, {}]}, []]`, true},
	{`{"a":1,"b":{"c":[true,false]}}`, true},
	{strings.Repeat("[", 64) + strings.Repeat("]", 64), true},
	{strings.Repeat("[", 65) + strings.Repeat("]", 65), false}, // too deep for Skip
	{`{"a\u0062":1}`, false},                                   // escaped key: left to encoding/json
	{`01`, false},
	{`1.`, false},
	{`.5`, false},
	{`1e`, false},
	{`-`, false},
	{`+1`, false},
	{`tru`, false},
	{`nul`, false},
	{`"\u12"`, false},
	{`"\q"`, false},
	{"\"\t\"", false},
	{`[1,]`, false},
	{`[1 2]`, false},
	{`{"a"}`, false},
	{`{"a":1,}`, false},
	{`{1:2}`, false},
	{``, false},
}

func TestSkip(t *testing.T) {
	for _, tt := range skipSamples {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			ok := s.Skip()
			if ok {
				s.WS()
				ok = s.Pos == len(s.Buf)
			}
			if ok != tt.ok {
				t.Errorf("Skip(%q) = %v; want %v", tt.in, ok, tt.ok)
			}
		})
	}
}

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
		ok   bool
	}{
		{` 1.5,`, "1.5", true},
		{`-0e0]`, "-0e0", true},
		{`123}`, "123", true},
		{`00`, "", false},
		{`-x`, "", false},
		{`"1"`, "", false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			got, ok := s.Number()
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("Number(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestInteger(t *testing.T) {
	for _, tt := range []struct {
		in      string
		bitSize int
		want    int64
		ok      bool
	}{
		{` 42,`, 64, 42, true},
		{`-7]`, 64, -7, true},
		{`0`, 64, 0, true},
		{`-0`, 64, 0, true},
		{`9223372036854775807`, 64, 9223372036854775807, true},
		{`9223372036854775808`, 64, 0, false},
		{`128`, 8, 0, false},
		{`127`, 8, 127, true},
		{`1.0`, 64, 0, false},
		{`1e3`, 64, 0, false},
		{`1E3`, 64, 0, false},
		{`01`, 64, 0, false},
		{`-`, 64, 0, false},
		{`null`, 64, 0, false},
		{``, 64, 0, false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			got, ok := s.Integer(tt.bitSize)
			if ok != tt.ok || got != tt.want {
				t.Errorf("Integer(%q, %d) = %d, %v; want %d, %v", tt.in, tt.bitSize, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestLiteral(t *testing.T) {
	for _, tt := range []struct {
		in, lit string
		ok      bool
		pos     int
	}{
		{` null`, "null", true, 5},
		{"\t\r\ntrue", "true", true, 7},
		{`nul`, "null", false, 0},
		{`false`, "true", false, 0},
	} {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			if ok := s.Literal(tt.lit); ok != tt.ok || (ok && s.Pos != tt.pos) {
				t.Errorf("Literal(%q, %q) = %v at %d; want %v at %d", tt.in, tt.lit, ok, s.Pos, tt.ok, tt.pos)
			}
		})
	}
}

func TestFields(t *testing.T) {
	const known = "id name"
	for _, tt := range []struct {
		in   string
		ok   bool
		want string // the known fields read, as n=value
	}{
		{`{}`, true, ""},
		{` { "id" : 1 , "name" : "x" } `, true, "0=1 1=x "},
		{`{"other":[1,{"id":2}],"name":"y"}`, true, "1=y "},
		{`{"id":1,"id":2}`, false, "0=1 "},           // duplicate: encoding/json merges
		{`{"ID":1}`, false, ""},                      // case-insensitive match
		{`{"Name":"x"}`, false, ""},                  // case-insensitive match
		{`{"i\u0064":1}`, false, ""},                 // escaped key
		{`{"idé":1}`, false, ""},                     // non-ASCII key
		{`{"idx":1,"nam":2,"other":null}`, true, ""}, // near misses are unknown fields
		{`{"id":1,}`, false, "0=1 "},
		{`{"id" 1}`, false, ""},
		{`{"id":1`, false, "0=1 "},
		{`[]`, false, ""},
	} {
		t.Run(tt.in, func(t *testing.T) {
			s := Scanner{Buf: []byte(tt.in)}
			var got strings.Builder
			ok := s.Fields(known, func(n int) bool {
				got.WriteByte(byte('0' + n))
				got.WriteByte('=')
				if n == 0 {
					v, ok := s.Integer(64)
					got.WriteByte(byte('0' + v))
					got.WriteByte(' ')
					return ok
				}
				v, ok := s.String()
				got.WriteString(v + " ")
				return ok
			})
			if ok {
				s.WS()
				ok = s.Pos == len(s.Buf)
			}
			if ok != tt.ok || got.String() != tt.want {
				t.Errorf("Fields(%q) = %v, read %q; want %v, %q", tt.in, ok, got.String(), tt.ok, tt.want)
			}
		})
	}
}

// FuzzString checks String against encoding/json: whatever String decodes,
// encoding/json decodes to the same string.
func FuzzString(f *testing.F) {
	for _, tt := range stringSamples {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, simple := range []bool{false, true} {
			s := Scanner{Buf: data, SimpleEscapes: simple}
			got, ok := s.String()
			if !ok {
				continue
			}
			s.WS()
			if s.Pos != len(data) {
				continue
			}
			var want string
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("String(%q) = %q; json.Unmarshal error %v", data, got, err)
			}
			if got != want {
				t.Errorf("String(%q) = %q; want %q", data, got, want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("String(%q) = %q; want valid UTF-8", data, got)
			}
		}
	})
}

// FuzzSkip checks Skip against encoding/json's validation: Skip accepts
// only valid JSON, and every valid value it rejects is one it leaves to
// encoding/json on purpose (an escaped or non-ASCII object key, or deep
// nesting). A string String handles must also be one Skip accepts.
func FuzzSkip(f *testing.F) {
	for _, tt := range skipSamples {
		f.Add([]byte(tt.in))
	}
	for _, tt := range stringSamples {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := Scanner{Buf: data}
		ok := s.Skip()
		if ok {
			s.WS()
			ok = s.Pos == len(data)
		}
		valid := json.Valid(data)
		if ok && !valid {
			t.Fatalf("Skip(%q) = true; json.Valid = false", data)
		}
		if !ok && valid && !leftToEncodingJSON(data) {
			t.Errorf("Skip(%q) = false; json.Valid = true", data)
		}
		str := Scanner{Buf: data}
		if _, sok := str.String(); sok {
			str.WS()
			if str.Pos == len(data) && !ok {
				t.Errorf("String(%q) handled; Skip = false", data)
			}
		}
	})
}

// leftToEncodingJSON reports whether valid JSON data has something Skip
// does not handle by design: an object key with an escape or a non-ASCII
// byte, or nesting deeper than maxDepth.
func leftToEncodingJSON(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	// stack holds, for each open container, -1 for an array or the number
	// of keys and values read so far for an object.
	var stack []int
	for {
		prev := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := len(stack) - 1
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return true
			}
			if tok == json.Delim('{') {
				stack = append(stack, 0)
			} else {
				stack = append(stack, -1)
			}
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			top--
		default:
			if top >= 0 && stack[top] >= 0 && stack[top]%2 == 0 {
				raw := data[prev:dec.InputOffset()]
				if bytes.ContainsFunc(raw, func(r rune) bool { return r == '\\' || r >= utf8.RuneSelf }) {
					return true
				}
			}
		}
		if top >= 0 && stack[top] >= 0 {
			stack[top]++
		}
	}
}

// TestPlainBytes checks the table against its definition, byte by byte.
func TestPlainBytes(t *testing.T) {
	if len(plainBytes) != 256 {
		t.Fatalf("len(plainBytes) = %d; want 256", len(plainBytes))
	}
	for c := 0; c < 256; c++ {
		want := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
		if got := plainBytes[c] != 0; got != want {
			t.Errorf("plainBytes[%#x] = %v; want %v", c, got, want)
		}
	}
}
