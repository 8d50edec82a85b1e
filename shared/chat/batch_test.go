package chat_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

func TestBatch(t *testing.T) {
	type step struct {
		emit  string // emit a delta with this content; "" means Flush
		fails bool   // the writer fails this call
	}
	boom := errors.New("client gone")
	tests := []struct {
		name     string
		steps    []step
		want     []chat.Delta
		wantErrs []error // of each step (nil for a Flush)
	}{
		{"flush without a held delta emits nothing", []step{{}, {emit: "a"}, {}, {}},
			[]chat.Delta{{Content: "a", More: true}, {}}, []error{nil, nil, nil, nil}},
		{"a burst then a flush", []step{{emit: "a"}, {emit: "b"}, {}, {emit: "c"}, {}},
			[]chat.Delta{{Content: "a", More: true}, {Content: "b", More: true}, {}, {Content: "c", More: true}, {}}, []error{nil, nil, nil, nil, nil}},
		{"a failed flush fails the next emit", []step{{emit: "a"}, {fails: true}, {emit: "b"}, {}},
			[]chat.Delta{{Content: "a", More: true}, {}}, []error{nil, nil, boom, nil}},
		{"a failed emit is returned", []step{{emit: "a", fails: true}},
			[]chat.Delta{{Content: "a", More: true}}, []error{boom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []chat.Delta
			fail := false
			b := chat.NewBatch(func(d chat.Delta) error {
				got = append(got, d)
				if fail {
					return boom
				}
				return nil
			})
			for i, s := range tt.steps {
				fail = s.fails
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
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("emitted %+v; want %+v", got, tt.want)
			}
		})
	}
}
