package chat_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// deltaRecorder is a Writer that records calls: a delta's content, or "|" for
// a flush; fail makes the next call fail.
type deltaRecorder struct {
	calls []string
	fail  bool
}

var errGone = errors.New("client gone")

func (r *deltaRecorder) Delta(d chat.Delta) error {
	r.calls = append(r.calls, d.Content)
	if r.fail {
		return errGone
	}
	return nil
}

func (r *deltaRecorder) Flush() error {
	r.calls = append(r.calls, "|")
	if r.fail {
		return errGone
	}
	return nil
}

func TestBatch(t *testing.T) {
	type step struct {
		emit  string // emit a delta with this content; "" means Flush
		fails bool   // the writer fails this call
	}
	tests := []struct {
		name     string
		steps    []step
		want     []string
		wantErrs []error // of each step (nil for a Flush)
	}{
		{"flush without a delta written does nothing", []step{{}, {emit: "a"}, {}, {}},
			[]string{"a", "|"}, []error{nil, nil, nil, nil}},
		{"a burst then a flush", []step{{emit: "a"}, {emit: "b"}, {}, {emit: "c"}, {}},
			[]string{"a", "b", "|", "c", "|"}, []error{nil, nil, nil, nil, nil}},
		{"a failed flush fails the next emit", []step{{emit: "a"}, {fails: true}, {emit: "b"}, {}},
			[]string{"a", "|"}, []error{nil, nil, errGone, nil}},
		{"a failed emit is returned", []step{{emit: "a", fails: true}},
			[]string{"a"}, []error{errGone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &deltaRecorder{}
			b := chat.NewBatch(r)
			for i, s := range tt.steps {
				r.fail = s.fails
				var err error
				if s.emit != "" {
					err = b.Emit(chat.Delta{Content: s.emit})
				} else {
					b.Flush()
				}
				if !errors.Is(err, tt.wantErrs[i]) || (err != nil) != (tt.wantErrs[i] != nil) {
					t.Errorf("step %d: error = %v; want %v", i, err, tt.wantErrs[i])
				}
			}
			if !reflect.DeepEqual(r.calls, tt.want) {
				t.Errorf("writer calls %q; want %q", r.calls, tt.want)
			}
		})
	}
}
