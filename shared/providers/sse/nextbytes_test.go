package sse

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// readAllBytes reads every event with NextBytes.
func readAllBytes(r *Reader, limit int) ([]Event, error) {
	var out []Event
	for range limit {
		name, data, err := r.NextBytes()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, Event{Name: name, Data: string(data)})
	}
	return out, nil
}

func TestNextBytes(t *testing.T) {
	for _, in := range []string{
		"",
		"data: hello\n\n",
		"event: ping\ndata: {\"type\": \"ping\"}\n\ndata: 2\n\n",
		"data: a\ndata: b\ndata\n\ndata: a much longer second event than the first\n\ndata: c\n\n",
		"event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
		"data: 1\r\rdata: 2\r\r",
		": keep-alive\n\n:\ndata: x\n: inside\n\n",
		"data: 1\n\ndata: 2",
		strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"w\"}}]}\n\n", 50) + "data: [DONE]\n\n",
	} {
		t.Run(in, func(t *testing.T) {
			want := reference(in)
			for _, mode := range []string{"whole", "one byte"} {
				var src io.Reader = strings.NewReader(in)
				if mode == "one byte" {
					src = iotest.OneByteReader(src)
				}
				got, err := readAllBytes(NewReader(src), 1000)
				if err != nil {
					t.Fatalf("%s: NextBytes on %q error %v", mode, in, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: NextBytes on %q = %q; want %q", mode, in, got, want)
				}
			}
		})
	}
}

// TestReset reads streams one after another with one Reader, including
// after an error and after a stream cut in the middle of an event and of
// a CRLF.
func TestReset(t *testing.T) {
	r := NewReaderSize(strings.NewReader("data: 1\r"), 24)
	if _, err := r.Next(); err != nil {
		t.Fatalf("Next() error %v", err)
	}
	for _, in := range []string{
		"\ndata: after a CR\n\n",
		"event: e\ndata: cut",
		"data: " + strings.Repeat("x", 30) + "\n\n",
		"event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
		"",
	} {
		r.Reset(strings.NewReader(in))
		got, err := readAllBytes(r, 100)
		want := reference(in)
		if strings.Contains(in, "xxxx") { // an event larger than the Reader's limit
			if err != ErrTooLarge {
				t.Errorf("after Reset, reading %q: error %v; want ErrTooLarge", in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("after Reset, reading %q = %q, %v; want %q", in, got, err, want)
		}
	}
}
