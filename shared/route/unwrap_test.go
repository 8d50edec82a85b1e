package route

import (
	"slices"
	"testing"
)

type link interface{ name() string }

type leaf string

func (l leaf) name() string { return string(l) }

type wrapper struct {
	n    string
	next link
}

func (w *wrapper) name() string { return w.n }
func (w *wrapper) Unwrap() link { return w.next }

func TestUnwrapped(t *testing.T) {
	loop := &wrapper{n: "loop"}
	loop.next = loop
	tests := []struct {
		name string
		p    link
		want []string
	}{
		{"nil", nil, nil},
		{"no Unwrap", leaf("a"), []string{"a"}},
		{"a chain", &wrapper{"w1", &wrapper{"w2", leaf("a")}}, []string{"w1", "w2", "a"}},
		{"a chain ending in nil", &wrapper{"w1", nil}, []string{"w1"}},
		{"a loop stops at 8", loop, []string{"loop", "loop", "loop", "loop", "loop", "loop", "loop", "loop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			Unwrapped(tt.p, func(p link) { got = append(got, p.name()) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("Unwrapped visited %q; want %q", got, tt.want)
			}
		})
	}
}
