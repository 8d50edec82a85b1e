package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event of r, at most limit of them.
func readAll(r *Reader, limit int) ([]Event, error) {
	var evs []Event
	for range limit {
		ev, err := r.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, errors.New("too many events")
}

// reference parses s the simple way (split into lines first), following the
// WHATWG event stream interpretation, plus this package's one deviation: an
// unterminated last event with data is dispatched.
func reference(s string) []Event {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	var evs []Event
	var name string
	var data []string
	has := false
	for _, l := range lines {
		if l == "" {
			if has {
				evs = append(evs, Event{Name: name, Data: strings.Join(data, "\n")})
			}
			name, data, has = "", nil, false
			continue
		}
		if l[0] == ':' {
			continue
		}
		f, v, ok := strings.Cut(l, ":")
		if ok {
			v = strings.TrimPrefix(v, " ")
		}
		switch f {
		case "event":
			name = v
		case "data":
			data = append(data, v)
			has = true
		}
	}
	if has {
		evs = append(evs, Event{Name: name, Data: strings.Join(data, "\n")})
	}
	return evs
}

func TestNext(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"empty", "", nil},
		{"one", "data: hello\n\n", []Event{{Data: "hello"}}},
		{"named", "event: ping\ndata: {\"type\": \"ping\"}\n\n", []Event{{Name: "ping", Data: `{"type": "ping"}`}}},
		{"multiline data", "data: a\ndata: b\ndata\n\n", []Event{{Data: "a\nb\n"}}},
		{"crlf", "event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []Event{{Name: "x", Data: "1"}, {Data: "2"}}},
		{"cr only", "data: 1\r\rdata: 2\r\r", []Event{{Data: "1"}, {Data: "2"}}},
		{"comments and heartbeats", ": keep-alive\n\n:\ndata: x\n: inside\n\n", []Event{{Data: "x"}}},
		{"no space after colon", "data:x\n\n", []Event{{Data: "x"}}},
		{"only one space stripped", "data:  x\n\n", []Event{{Data: " x"}}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: x\n\n", []Event{{Data: "x"}}},
		{"event without data not dispatched", "event: a\n\ndata: b\n\n", []Event{{Data: "b"}}},
		{"name does not leak", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{{Name: "a", Data: "1"}, {Data: "2"}}},
		{"unterminated last event", "data: 1\n\ndata: 2", []Event{{Data: "1"}, {Data: "2"}}},
		{"unterminated after newline", "data: 1\n", []Event{{Data: "1"}}},
		{"empty data field", "data:\n\n", []Event{{Data: ""}}},
		{"colon in value", "data: {\"a\":\"b:c\"}\n\n", []Event{{Data: `{"a":"b:c"}`}}},
		{"bom-free unknown field", "foo: bar\ndata: x\n\n", []Event{{Data: "x"}}},
		{"many blank lines", "\n\n\n\ndata: x\n\n\n", []Event{{Data: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "one byte"} {
				var src io.Reader = strings.NewReader(tt.in)
				if mode == "one byte" {
					src = iotest.OneByteReader(src)
				}
				got, err := readAll(NewReader(src), 100)
				if err != nil {
					t.Fatalf("%s: readAll(%q) error %v", mode, tt.in, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: readAll(%q) = %q; want %q", mode, tt.in, got, tt.want)
				}
				if ref := reference(tt.in); !reflect.DeepEqual(ref, tt.want) {
					t.Errorf("reference(%q) = %q; want %q", tt.in, ref, tt.want)
				}
			}
		})
	}
}

func TestNextTooLarge(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []Event
		wantErr error
	}{
		{"long line", "data: " + strings.Repeat("x", 100) + "\n\n", 50, nil, ErrTooLarge},
		{"many lines", strings.Repeat("data: xxxxxxxxxx\n", 10) + "\n", 50, nil, ErrTooLarge},
		{"fits, then too large", "data: ok\n\ndata: " + strings.Repeat("x", 100) + "\n\n", 50, []Event{{Data: "ok"}}, ErrTooLarge},
		{"comments do not count", strings.Repeat(": heartbeat\n", 20) + "data: ok\n\n", 20, []Event{{Data: "ok"}}, nil},
		{"limit is per event", strings.Repeat("data: 0123456789\n\n", 3), 20, []Event{{Data: "0123456789"}, {Data: "0123456789"}, {Data: "0123456789"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReaderSize(strings.NewReader(tt.in), tt.max)
			got, err := readAll(r, 100)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("readAll(%.20q..., max %d) error = %v; want %v", tt.in, tt.max, err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("readAll(%.20q..., max %d) = %q; want %q", tt.in, tt.max, got, tt.want)
			}
			if tt.wantErr == nil {
				return
			}
			if _, err := r.Next(); !errors.Is(err, tt.wantErr) {
				t.Errorf("Next after error = %v; want %v again", err, tt.wantErr)
			}
		})
	}
}

func TestNextReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: 1\n\ndata: 2\n"), iotest.ErrReader(boom)))
	got, err := readAll(r, 10)
	if !errors.Is(err, boom) {
		t.Fatalf("readAll error = %v; want %v", err, boom)
	}
	if want := []Event{{Data: "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("readAll = %q; want %q", got, want)
	}
}

// errAfter returns s, then fails every further read with errReadTooFar.
type errAfter struct{ s string }

var errReadTooFar = errors.New("read past the end of the event")

func (e *errAfter) Read(p []byte) (int, error) {
	if e.s == "" {
		return 0, errReadTooFar
	}
	n := copy(p, e.s)
	e.s = e.s[n:]
	return n, nil
}

// TestNextIncremental checks that an event is returned as soon as its blank
// line has been read, without reading further: a streaming proxy must not
// hold an event back until the upstream sends the next one.
func TestNextIncremental(t *testing.T) {
	tests := []string{"data: first\n\n", "data: first\r\n\r", "data: first\r\r", ": hb\n\nevent: x\ndata: first\n\n"}
	for _, in := range tests {
		t.Run(in, func(t *testing.T) {
			r := NewReader(&errAfter{s: in})
			ev, err := r.Next()
			if err != nil || ev.Data != "first" {
				t.Fatalf("Next() on %q = %q, %v; want first, nil", in, ev, err)
			}
			if _, err := r.Next(); !errors.Is(err, errReadTooFar) {
				t.Errorf("second Next() = %v; want %v", err, errReadTooFar)
			}
		})
	}
}

func TestFixtures(t *testing.T) {
	// testdata/anthropic_basic.sse is the "Basic streaming request" response
	// of https://docs.anthropic.com/en/docs/build-with-claude/streaming.
	b, err := os.ReadFile("testdata/anthropic_basic.sse")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(NewReader(strings.NewReader(string(b))), 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range got {
		names = append(names, ev.Name)
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("event names = %q; want %q", names, want)
	}
}

// FuzzNext checks that Next never fails on any input held in memory, agrees
// with the simple reference parser, and does not depend on how the input is
// split into reads.
func FuzzNext(f *testing.F) {
	for _, s := range []string{
		"data: x\n\n", "event: a\r\ndata: b\r\n\r\n", "data: 1\r\rdata: 2\r", ": c\n\ndata\n\n",
		"data:  x\ndata:y\n\n\n", "event: e\nid: 1\nretry: 5\n\n", "\r\n\r\n\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want := reference(in)
		for _, mode := range []string{"whole", "one byte", "half"} {
			var src io.Reader = strings.NewReader(in)
			switch mode {
			case "one byte":
				src = iotest.OneByteReader(src)
			case "half":
				src = iotest.HalfReader(src)
			}
			got, err := readAll(NewReader(src), len(in)+1)
			if err != nil {
				t.Fatalf("%s: readAll(%q) error %v", mode, in, err)
			}
			if len(got) == 0 && len(want) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: readAll(%q) = %q; want %q", mode, in, got, want)
			}
		}
	})
}

func BenchmarkNext(b *testing.B) {
	ev := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello world\"}}\n\n"
	in := strings.Repeat(ev, 100)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(strings.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// pieces returns its strings one per Read.
type pieces struct{ s []string }

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.s) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.s[0])
	if p.s[0] = p.s[0][n:]; p.s[0] == "" {
		p.s = p.s[1:]
	}
	return n, nil
}

// TestOnWait: the hook runs before every read of the source, once the
// events already read are consumed, and never while a complete event is
// in the buffer.
func TestOnWait(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"one read", []string{"data: a\n\ndata: b\n\n"}, "wait a b wait"},
		{"two reads", []string{"data: a\n\ndata: b\n\n", "data: c\n\n"}, "wait a b wait c wait"},
		{"event split across reads", []string{"data: a\n\ndata: ", "b\n\n"}, "wait a wait b wait"},
		{"CR line end then LF in the next read", []string{"data: a\r\r", "\ndata: b\r\r"}, "wait a wait b wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			r := NewReader(&pieces{s: slices.Clone(tt.in)})
			r.OnWait(func() { got = append(got, "wait") })
			for range 10 {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("Next() = %v", err)
				}
				got = append(got, ev.Data)
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("events and waits = %q; want %q", s, tt.want)
			}
		})
	}
}

func TestLineEnd(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", -1}, {"abc", -1}, {"\n", 0}, {"\r", 0}, {"ab\ncd", 2}, {"ab\rcd", 2},
		{"ab\r\ncd", 2}, {"ab\n\rcd", 2}, {"a\rb\nc", 1}, {"ab\ncd\r", 2},
	}
	for _, tt := range tests {
		if got, want := lineEnd([]byte(tt.in)), bytes.IndexAny([]byte(tt.in), "\r\n"); got != tt.want || got != want {
			t.Errorf("lineEnd(%q) = %d; want %d (bytes.IndexAny %d)", tt.in, got, tt.want, want)
		}
	}
}

func TestStray(t *testing.T) {
	// Gemini writes an error as raw, indented JSON after its last event
	// (github.com/vercel/ai/issues/5217).
	in := "data: {\"candidates\": []}\n\n{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"
	tests := []struct {
		name, in, want string
	}{
		{"raw JSON after the events", in, "{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}"},
		{"fields and comments are not stray", ": ping\nevent: e\nid: 7\nretry: 10\ndata: x\n\n", ""},
		{"one line", "data: x\n\n{\"error\":{\"message\":\"boom\"}}", "{\"error\":{\"message\":\"boom\"}}"},
	}
	for _, tt := range tests {
		r := NewReader(strings.NewReader(tt.in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		if got := string(r.Stray()); got != tt.want {
			t.Errorf("%s: Stray() = %q; want %q", tt.name, got, tt.want)
		}
		r.Reset(strings.NewReader(""))
		if got := r.Stray(); len(got) != 0 {
			t.Errorf("%s: Stray() after Reset = %q; want empty", tt.name, got)
		}
	}
	// Bounded: a stream of garbage is not kept whole.
	r := NewReader(strings.NewReader(strings.Repeat("garbage line\n", 10000)))
	r.Next()
	if n := len(r.Stray()); n == 0 || n > maxStray {
		t.Errorf("len(Stray()) = %d after 130 KB of garbage; want 0 < n <= %d", n, maxStray)
	}
}

// TestReadFiles: the data of every event of every file the pattern
// names, files in order, comments and ids left out.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.sse": "event: x\ndata: one\n\n: comment\nid: 7\ndata: two\ndata: lines\n\n",
		"b.sse": "data: three",
		"c.txt": "data: not a stream\n\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFiles(filepath.Join(dir, "*.sse"))
	if want := []string{"one", "two\nlines", "three"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ReadFiles = %q, %v; want %q", got, err, want)
	}
}
