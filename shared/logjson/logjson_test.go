package logjson

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// attrsOf builds attributes from fuzz bytes: a kind per byte, values from
// the strings and numbers given, so that every kind (the fast path's and
// the JSONHandler's) comes up, in any order.
func attrsOf(kinds []byte, s string, n int64, f float64) []slog.Attr {
	var as []slog.Attr
	for i, k := range kinds {
		key := s
		if i%3 == 1 {
			key = "k" + string(rune('a'+i%26))
		}
		switch k % 12 {
		case 0:
			as = append(as, slog.String(key, s))
		case 1:
			as = append(as, slog.Int64(key, n))
		case 2:
			as = append(as, slog.Uint64(key, uint64(n)))
		case 3:
			as = append(as, slog.Float64(key, f))
		case 4:
			as = append(as, slog.Bool(key, n%2 == 0))
		case 5:
			as = append(as, slog.Duration(key, time.Duration(n)))
		case 6:
			as = append(as, slog.Time(key, time.Unix(0, n).UTC()))
		case 7:
			as = append(as, slog.Any(key, errors.New(s)))
		case 8:
			as = append(as, slog.Group(key, slog.String("in", s)))
		case 9:
			as = append(as, slog.Any(key, nil))
		case 10:
			as = append(as, slog.Any(key, map[string]any{"m": s}))
		case 11:
			as = append(as, slog.String("", ""))
		}
	}
	return as
}

// FuzzHandler: a Handler writes what slog.NewJSONHandler(w, nil) writes,
// byte for byte, for any record (time, level, message, attributes of any
// kind), under WithAttrs and WithGroup too.
//
//	go test ./shared/logjson -run '^$' -fuzz FuzzHandler -fuzztime 60s
func FuzzHandler(f *testing.F) {
	f.Add(int64(1764000000123456789), 0, "request", []byte{0, 1, 3, 4, 0, 0}, "dur\"ation_ms", int64(42), 1.234, byte(0))
	f.Add(int64(0), 4, "line\nbreak \u2028 \xff <&>", []byte{2, 5, 6, 7, 8, 9, 10, 11}, "\x01\x7f\t", int64(-7), 1e21, byte(1))
	f.Add(int64(-62135596800000000), 8, "", []byte{3}, "", int64(math.MinInt64), 1e-7, byte(2))
	f.Add(int64(1), -4, "m", []byte{3, 3}, "x", int64(3), math.Inf(1), byte(3))
	f.Add(int64(1), 2, "m", []byte{3}, "x", int64(3), -0.0, byte(0))
	f.Add(int64(5), 0, "\b\f", []byte{0, 0}, "back\bfeed\f", int64(1), 0.5, byte(0))
	f.Fuzz(func(t *testing.T, nanos int64, level int, msg string, kinds []byte, s string, n int64, fl float64, with byte) {
		if len(kinds) > 32 {
			kinds = kinds[:32]
		}
		var at time.Time
		if nanos != 0 {
			at = time.Unix(0, nanos)
		}
		r := slog.NewRecord(at, slog.Level(level), msg, 0)
		r.AddAttrs(attrsOf(kinds, s, n, fl)...)
		var got, want bytes.Buffer
		var h, ref slog.Handler = New(&got), slog.NewJSONHandler(&want, nil)
		switch with % 4 {
		case 1:
			h, ref = h.WithAttrs([]slog.Attr{slog.String("svc", s)}), ref.WithAttrs([]slog.Attr{slog.String("svc", s)})
		case 2:
			h, ref = h.WithGroup(s), ref.WithGroup(s)
		case 3:
			h, ref = h.WithAttrs(nil).WithGroup(""), ref.WithAttrs(nil).WithGroup("")
		}
		ctx := context.Background()
		if h.Enabled(ctx, r.Level) != ref.Enabled(ctx, r.Level) {
			t.Fatalf("Enabled(%v) differs", r.Level)
		}
		errGot, errWant := h.Handle(ctx, r.Clone()), ref.Handle(ctx, r.Clone())
		if got.String() != want.String() || (errGot == nil) != (errWant == nil) {
			t.Errorf("Handle wrote\n%q (%v)\nslog.JSONHandler\n%q (%v)", got.String(), errGot, want.String(), errWant)
		}
	})
}

// TestHandlerAccessLine: an access log line takes the fast path and is
// JSONHandler's line.
func TestHandlerAccessLine(t *testing.T) {
	var got, want bytes.Buffer
	at := time.Date(2026, 11, 29, 4, 40, 1, 123456789, time.UTC)
	attrs := []slog.Attr{slog.String("request_id", "req_1"), slog.String("method", "POST"), slog.String("route", "POST /v1/chat/completions"),
		slog.Int("status", 200), slog.Float64("duration_ms", 0.412), slog.Int64("bytes", 512), slog.String("account", "dev"),
		slog.String("model", "openai/gpt-4o-mini"), slog.Int("prompt_tokens", 9), slog.Bool("aborted", true)}
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(attrs...)
	if _, ok := appendFlat(nil, r); !ok {
		t.Fatal("an access log line does not take the fast path")
	}
	New(&got).Handle(context.Background(), r)
	slog.NewJSONHandler(&want, nil).Handle(context.Background(), r)
	if got.String() != want.String() {
		t.Errorf("got\n%s\nwant\n%s", got.String(), want.String())
	}
}

// TestHandlerConcurrent: lines written at once by the fast path and by
// the JSONHandler (a group) come out whole, one per line (run with -race).
func TestHandlerConcurrent(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(&buf))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if i%2 == 0 {
					log.Info("flat", "n", i)
				} else {
					log.Info("grouped", slog.Group("g", "n", i))
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines; want 400", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"time":"`) || !strings.HasSuffix(l, "}") {
			t.Fatalf("a line is not whole: %q", l)
		}
	}
}

// BenchmarkAccessLine writes an access log line with a Handler and with
// slog.JSONHandler, to io.Discard.
//
//	go test ./shared/logjson -run '^$' -bench AccessLine -benchmem
func BenchmarkAccessLine(b *testing.B) {
	for _, tt := range []struct {
		name string
		h    slog.Handler
	}{{"logjson", New(discard{})}, {"slog.JSONHandler", slog.NewJSONHandler(discard{}, nil)}} {
		b.Run(tt.name, func(b *testing.B) {
			log := slog.New(tt.h)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("request_id", "req_01JXYZ"), slog.String("method", "POST"),
					slog.String("route", "POST /v1/chat/completions"), slog.Int("status", 200), slog.Float64("duration_ms", 0.412),
					slog.Int64("bytes", 512), slog.String("account", "dev"), slog.String("key_id", "key_0123"),
					slog.String("model", "openai/gpt-4o-mini"), slog.String("served_model", "openai/gpt-4o-mini"), slog.Int("attempts", 1),
					slog.Int("prompt_tokens", 9), slog.Int("completion_tokens", 16))
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
