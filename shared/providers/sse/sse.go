// Package sse reads server-sent event streams (the text/event-stream format
// of the WHATWG HTML standard, section 9.2 "Server-sent events") as sent by
// upstream model APIs: Anthropic's Messages API, Gemini's
// streamGenerateContent?alt=sse, OpenAI's chat completions.
//
// A Reader is not safe for concurrent use; it is meant to be owned by the
// goroutine that reads one upstream response body.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// DefaultMaxEventSize is the largest event (the sum of its field lines) a
// Reader made by NewReader accepts.
const DefaultMaxEventSize = 4 << 20

// ErrTooLarge is returned by Next when an event, or a single line, exceeds
// the Reader's maximum event size.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event: its type (the last "event:" field, "" if
// none was sent) and its data (the "data:" fields joined with "\n").
type Event struct {
	Name string
	Data string
}

// Reader reads events from a stream. Lines may end in LF, CRLF or CR;
// comment lines (starting with ':') and the "id" and "retry" fields are
// skipped; a blank line dispatches the event being built if it has data.
type Reader struct {
	br  *bufio.Reader
	max int

	line     []byte // the current line, reused
	data     []byte // the data buffer of the event being built
	name     string
	lastName string // the last event name read, reused when the next repeats it
	hasDat   bool   // a data field was seen for the event being built
	skipLF   bool   // the previous line ended in CR: a following LF is part of it
	err      error
	onWait   func() // called before a read that may block; nil: none
	stray    []byte // lines that are no SSE field, up to maxStray bytes (Stray)
}

// maxStray bounds what a Reader keeps of a stream's stray lines.
const maxStray = 16 << 10

// NewReader returns a Reader of r that accepts events of up to
// DefaultMaxEventSize bytes.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, DefaultMaxEventSize) }

// NewReaderSize returns a Reader of r that accepts events of up to max bytes
// (the sum of the lengths of an event's field lines; comment lines are not
// counted, but no single line may exceed max); max <= 0 means
// DefaultMaxEventSize.
func NewReaderSize(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxEventSize
	}
	return &Reader{br: bufio.NewReaderSize(r, 4096), max: max}
}

// keepBuffer is the largest line or data buffer Reset keeps.
const keepBuffer = 64 << 10

// Reset makes r read a new stream from src, as NewReaderSize(src, max)
// would, but reusing r's buffers: a server reading many streams can keep
// Readers (in a sync.Pool) instead of allocating a buffer per stream.
func (r *Reader) Reset(src io.Reader) {
	r.br.Reset(src)
	r.line, r.data = r.line[:0], r.data[:0]
	if cap(r.line) > keepBuffer || cap(r.data) > keepBuffer {
		r.line, r.data = nil, nil // do not keep a huge event's buffers
	}
	r.name, r.hasDat, r.skipLF, r.err, r.onWait = "", false, false, nil, nil
	r.stray = nil
}

// OnWait sets f to be called each time the Reader is about to read from
// its source with nothing left in its buffer, that is just before it may
// wait for the network; nil removes it. A proxy that passes on at once
// what arrives together flushes its output there (see chat.Batch). Reset
// removes it too.
func (r *Reader) OnWait(f func()) { r.onWait = f }

// fill is called before a read of the buffered reader that may have to
// read the source.
func (r *Reader) fill() {
	if r.onWait != nil && r.br.Buffered() == 0 {
		r.onWait()
	}
}

// Next returns the next event. It returns io.EOF when the stream ends; an
// event whose final blank line is missing at the end of the stream is still
// returned if it has data (upstreams do not always send the last blank
// line). Other errors are the underlying reader's, or ErrTooLarge; after an
// error, Next keeps returning it.
func (r *Reader) Next() (Event, error) {
	name, data, err := r.NextBytes()
	if err != nil {
		return Event{}, err
	}
	return Event{Name: name, Data: string(data)}, nil
}

// NextBytes is Next without copying the event's data: data is the
// Reader's own buffer, valid only until the next call of Next or
// NextBytes. A decoder that parses each event at once saves a copy per
// event.
func (r *Reader) NextBytes() (name string, data []byte, err error) {
	if r.err != nil {
		return "", nil, r.err
	}
	size := 0
	for {
		line, err := r.readLine(r.max - size)
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				r.field(line)
			}
			if err == io.EOF && r.hasDat {
				r.err = io.EOF
				name, data = r.dispatch()
				return name, data, nil
			}
			r.err = err
			return "", nil, err
		}
		if len(line) == 0 {
			if r.hasDat {
				name, data = r.dispatch()
				return name, data, nil
			}
			r.name = "" // an event without data is not dispatched
			size = 0
			continue
		}
		if line[0] != ':' { // comments (heartbeats) are not kept: no limit
			size += len(line)
		}
		r.field(line)
	}
}

// dispatch returns the event being built and resets the builder; data
// stays valid until the builder is next written to.
func (r *Reader) dispatch() (name string, data []byte) {
	name, data = r.name, r.data
	r.name, r.data, r.hasDat = "", r.data[:0], false
	return name, data
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		return // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		if string(value) != r.lastName { // a stream's events mostly repeat a name: kept without a copy
			r.lastName = string(value)
		}
		r.name = r.lastName
	case "data":
		if r.hasDat {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasDat = true
	case "id", "retry":
	default:
		// Not a field the standard knows, and so ignored; but an upstream
		// may write an error as raw JSON into its stream: kept for Stray.
		if len(r.stray)+len(line) < maxStray {
			if len(r.stray) > 0 {
				r.stray = append(r.stray, '\n')
			}
			r.stray = append(r.stray, line...)
		}
	}
}

// Stray returns the lines read so far that were no SSE field (no comment,
// no event, data, id or retry field), joined with "\n", up to 16 KiB: the
// standard ignores them, but some upstreams write an error as raw JSON
// into an event stream (Gemini's {"error": {...}} after its last event,
// spread over several lines), which a decoder reads here at the end of the
// stream. The result is the Reader's own buffer: later reads may append to
// it, and Reset empties it.
func (r *Reader) Stray() []byte { return r.stray }

// readLine returns the next line without its terminator. It returns
// ErrTooLarge if the line is longer than limit bytes, and io.EOF (with the
// unterminated rest, possibly empty) at the end of the stream.
func (r *Reader) readLine(limit int) ([]byte, error) {
	r.line = r.line[:0]
	if r.skipLF {
		r.skipLF = false
		r.fill()
		b, err := r.br.ReadByte()
		if err == io.EOF {
			return r.line, io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("sse: read: %w", err)
		}
		if b != '\n' {
			_ = r.br.UnreadByte()
		}
	}
	for {
		r.fill()
		buf, err := r.br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return r.line, io.EOF
			}
			return nil, fmt.Errorf("sse: read: %w", err)
		}
		buf, _ = r.br.Peek(r.br.Buffered())
		i := lineEnd(buf)
		n := i
		if i < 0 {
			n = len(buf)
		}
		if len(r.line)+n > limit {
			return nil, ErrTooLarge
		}
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			_, _ = r.br.Discard(n)
			continue
		}
		cr := buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		if cr {
			// Do not wait for the next byte: the line is complete now, and a
			// following LF is skipped on the next call.
			r.skipLF = true
		}
		return r.line, nil
	}
}

// lineEnd returns the index of the first CR or LF in buf, or -1: two
// IndexByte scans (vectorised), the second only over the line, are much
// faster than bytes.IndexAny on a busy stream.
func lineEnd(buf []byte) int {
	i := bytes.IndexByte(buf, '\n')
	line := buf
	if i >= 0 {
		line = buf[:i]
	}
	if j := bytes.IndexByte(line, '\r'); j >= 0 {
		return j
	}
	return i
}

// ReadFiles returns the data of every event in the files that pattern
// (filepath.Glob) names, in order: the recorded streams a decoder's tests
// take their cases from.
func ReadFiles(pattern string) ([]string, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var data []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		r := NewReader(f)
		for {
			ev, err := r.Next()
			if err != nil {
				f.Close()
				if err != io.EOF {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				break
			}
			data = append(data, ev.Data)
		}
	}
	return data, nil
}
