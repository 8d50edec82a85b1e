// Package logjson is the log/slog handler of Genway's logs: it writes
// exactly the lines slog.NewJSONHandler(w, nil) writes, and writes the
// flat ones itself (no group, no attributes added by WithAttrs, each
// attribute a string, a number, a bool or a duration: an access log line)
// in about a third of the time. Anything else it gives to a
// slog.JSONHandler over the same writer.
package logjson

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/genway/genway/shared/rawjson"
)

// Handler is a slog.Handler whose lines are slog.JSONHandler's (with no
// options). It is safe for concurrent use; each line is one Write.
type Handler struct {
	w     *lockedWriter
	inner slog.Handler // a JSONHandler over w: what the fast path does not take
	flat  bool         // no WithAttrs or WithGroup: the fast path applies
}

// New returns a Handler that writes to w.
func New(w io.Writer) *Handler {
	lw := &lockedWriter{w: w}
	return &Handler{w: lw, inner: slog.NewJSONHandler(lw, nil), flat: true}
}

// Enabled implements slog.Handler: Info and above, as JSONHandler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	return &Handler{w: h.w, inner: h.inner.WithAttrs(as)}
}

// WithGroup implements slog.Handler (JSONHandler opens a group even of
// an empty name: so does it).
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{w: h.w, inner: h.inner.WithGroup(name)}
}

// Handle implements slog.Handler: a flat record written directly, any
// other by the JSONHandler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.flat {
		return h.inner.Handle(ctx, r)
	}
	bp := lines.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooled {
			lines.Put(bp)
		}
	}()
	b, ok := appendFlat((*bp)[:0], r)
	*bp = b
	if !ok {
		return h.inner.Handle(ctx, r)
	}
	_, err := h.w.Write(b)
	return err
}

// lines are the buffers of the lines written directly.
var lines = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooled bounds the buffers lines keeps.
const maxPooled = 16 << 10

// lockedWriter serializes the writes of the fast path and of the
// JSONHandler, which share it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// appendFlat appends r's line as JSONHandler writes it, and reports
// whether r is flat (else what it appended is to be dropped): a time of
// a year JSONHandler writes, and attributes of the kinds it writes
// without encoding/json (and floats, which it writes through it).
func appendFlat(b []byte, r slog.Record) ([]byte, bool) {
	b = append(b, '{')
	if !r.Time.IsZero() {
		t := r.Time.Round(0)
		if y := t.Year(); y < 0 || y >= 10000 {
			return b, false // JSONHandler writes an error of it
		}
		b = append(b, `"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = rawjson.AppendLogString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = rawjson.AppendLogString(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value
		switch v.Kind() {
		case slog.KindString:
			b = appendKey(b, a.Key)
			b = rawjson.AppendLogString(b, v.String())
		case slog.KindInt64:
			b = appendKey(b, a.Key)
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = appendKey(b, a.Key)
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindFloat64:
			f := v.Float64()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				ok = false // encoding/json refuses it: JSONHandler writes the error
				return false
			}
			b = appendKey(b, a.Key)
			b = rawjson.AppendFloat(b, f) // as encoding/json, which JSONHandler calls for it
		case slog.KindBool:
			b = appendKey(b, a.Key)
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = appendKey(b, a.Key)
			b = strconv.AppendInt(b, int64(v.Duration()), 10)
		default: // times, groups, values to resolve, anything through encoding/json
			ok = false
			return false
		}
		return true
	})
	return append(b, "}\n"...), ok
}

// appendKey appends ,"key": to b.
func appendKey(b []byte, key string) []byte {
	b = append(b, ',')
	b = rawjson.AppendLogString(b, key)
	return append(b, ':')
}
