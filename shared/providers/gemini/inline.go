package gemini

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
)

// Vertex AI answers a finished generation with the video inline, as a
// base64 string in the operation's JSON (tens of megabytes for a few
// seconds of 1080p). Decoding that with encoding/json would hold the
// string and its bytes in memory at once, for each job a worker runs. The
// payloadFilter below streams it instead: it passes the JSON through with
// the key's string values emptied, and decodes those values into a sink
// (a temporary file) as they go by. Memory stays at a few buffers,
// whatever the video's size.

// payloadError is a diverted value that cannot be a video: not base64,
// too large, or escaped in a way base64 never is.
type payloadError struct{ err error }

func (e *payloadError) Error() string { return "inline video: " + e.err.Error() }
func (e *payloadError) Unwrap() error { return e.err }

// sinkError is a failure to write the decoded video (the local disk).
type sinkError struct{ err error }

func (e *sinkError) Error() string { return "inline video: write: " + e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// errPayloadTooLarge is a diverted value that decodes to more than the
// filter's limit.
var errPayloadTooLarge = errors.New("larger than the limit")

// payloadFilter reads a JSON document from r and passes it on with every
// string value of member key replaced by "", writing the first such value,
// base64-decoded (standard alphabet, padded or not), to sink; later ones
// are decoded and dropped. It knows just enough JSON to find member names
// and string ends: the document itself is the reader's to check.
type payloadFilter struct {
	r    io.Reader
	key  string
	sink io.Writer
	max  int64 // decoded bytes allowed in sink

	buf  []byte // input read from r
	in   []byte // the part of buf not yet processed
	rerr error  // r's error, returned once in is drained
	err  error  // sticky: the filter's own failure

	inString bool
	escaped  bool
	matchPos int  // bytes of key matched by the current string; -1: no match
	isKey    bool // the last string closed was key (a member name, if ':' follows)
	armed    bool // key and ':' seen: a string value now is diverted
	divert   bool // inside a diverted value
	values   int  // diverted values seen

	b64     []byte // base64 text not yet decoded (less than a quantum, or a chunk)
	decoded []byte
	written int64
}

func newPayloadFilter(r io.Reader, key string, sink io.Writer, max int64) *payloadFilter {
	return &payloadFilter{r: r, key: key, sink: sink, max: max, buf: make([]byte, 32<<10), matchPos: -1}
}

// Written is how many decoded bytes went to the sink.
func (f *payloadFilter) Written() int64 { return f.written }

// Read implements io.Reader.
func (f *payloadFilter) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if f.err != nil {
			return 0, f.err
		}
		if len(f.in) == 0 {
			if f.rerr != nil {
				if f.rerr == io.EOF && f.divert {
					f.rerr = io.ErrUnexpectedEOF
				}
				return 0, f.rerr
			}
			n, err := f.r.Read(f.buf)
			f.in, f.rerr = f.buf[:n], err
			continue
		}
		n := 0
		i := 0
		for ; i < len(f.in) && n < len(p); i++ {
			if c, pass := f.step(f.in[i]); pass {
				p[n] = c
				n++
			}
			if f.err != nil {
				break
			}
		}
		f.in = f.in[i:]
		if f.err == nil {
			f.flush(false)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// step takes one input byte and returns the byte to pass on, if any.
func (f *payloadFilter) step(c byte) (byte, bool) {
	switch {
	case f.divert:
		if f.escaped {
			f.escaped = false
			if c != '/' { // "\/" is the only escape base64 text may wear
				f.err = &payloadError{fmt.Errorf("escape \\%c in base64 text", c)}
				return 0, false
			}
			f.b64 = append(f.b64, c)
			return 0, false
		}
		switch c {
		case '\\':
			f.escaped = true
		case '"':
			f.divert = false
			f.flush(true)
			f.values++
			return c, true
		default:
			f.b64 = append(f.b64, c)
			if len(f.b64) >= 16<<10 {
				f.flush(false)
			}
		}
		return 0, false
	case f.inString:
		if f.escaped {
			f.escaped = false
			f.matchPos = -1
			return c, true
		}
		switch {
		case c == '\\':
			f.escaped = true
		case c == '"':
			f.inString = false
			f.isKey = f.matchPos == len(f.key)
		case f.matchPos >= 0 && f.matchPos < len(f.key) && f.key[f.matchPos] == c:
			f.matchPos++
		default:
			f.matchPos = -1
		}
		return c, true
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		return c, true
	case ':':
		f.armed = f.isKey
		f.isKey = false
		return c, true
	case '"':
		f.isKey = false
		if f.armed {
			f.armed = false
			f.divert = true
			return c, true
		}
		f.inString = true
		f.matchPos = 0
		return c, true
	}
	f.isKey, f.armed = false, false
	return c, true
}

// flush decodes the whole base64 quanta collected (all of it at the
// value's end) and writes them to the sink, the first value only.
func (f *payloadFilter) flush(end bool) {
	n := len(f.b64)
	if !end {
		n -= n % 4
	}
	if n == 0 {
		return
	}
	enc := base64.StdEncoding
	if end && n%4 != 0 {
		enc = base64.RawStdEncoding
	}
	need := enc.DecodedLen(n)
	if cap(f.decoded) < need {
		f.decoded = make([]byte, need)
	}
	m, err := enc.Decode(f.decoded[:need], f.b64[:n])
	if err != nil {
		f.err = &payloadError{err}
		return
	}
	f.b64 = f.b64[:copy(f.b64, f.b64[n:])]
	if f.values > 0 { // a second video: not asked for, not kept
		return
	}
	if f.written+int64(m) > f.max {
		f.err = &payloadError{errPayloadTooLarge}
		return
	}
	if _, err := f.sink.Write(f.decoded[:m]); err != nil {
		f.err = &sinkError{err}
		return
	}
	f.written += int64(m)
}

// spool is the temporary file an inline video is decoded into, and then
// read from as the job's Result.Body. It is made at the first byte
// written and unlinked at once where the system allows (so a process that
// dies leaves nothing behind), else removed at Close.
type spool struct {
	dir      string
	f        *os.File
	unlinked bool
}

// Write implements io.Writer.
func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "genway-veo-*.mp4")
		if err != nil {
			return 0, err
		}
		s.f = f
		s.unlinked = os.Remove(f.Name()) == nil
	}
	return s.f.Write(p)
}

// rewind makes the spool readable from its first byte.
func (s *spool) rewind() error {
	if s.f == nil {
		return errors.New("inline video: nothing was written")
	}
	_, err := s.f.Seek(0, io.SeekStart)
	return err
}

// Read implements io.Reader (after rewind).
func (s *spool) Read(p []byte) (int, error) { return s.f.Read(p) }

// Close closes and removes the file. It is safe to call more than once.
func (s *spool) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if !s.unlinked {
		os.Remove(s.f.Name())
	}
	s.f = nil
	return err
}
