package localstore

import (
	"bytes"
	"strings"
	"testing"
)

// TestArena: what keep returns holds what was appended, is not changed by
// what is appended after it (in the arena's space or past it), and comes
// from the arena's space while it has room; a nil arena allocates each.
func TestArena(t *testing.T) {
	tests := []struct {
		name  string
		a     *arena
		parts []string
	}{
		{"nil arena", nil, []string{"a", "bc", ""}},
		{"small parts", &arena{}, []string{"key-1", "value-1", "", "key-2"}},
		{"a part over its room", &arena{}, []string{"x", strings.Repeat("y", 3000), "z"}},
		{"parts past a block", &arena{}, []string{strings.Repeat("p", arenaBlock-10), strings.Repeat("q", 40), "r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept [][]byte
			for _, p := range tt.parts {
				b := tt.a.buf(min(len(p), 16)) // room under the size: an append may outgrow it
				b = append(b, p...)
				k := tt.a.keep(b)
				if cap(k) != len(k) {
					t.Errorf("keep(%d bytes): capacity %d, want it clipped", len(k), cap(k))
				}
				kept = append(kept, k)
			}
			kept = append(kept, tt.a.bytes("tail"))
			want := append(append([]string(nil), tt.parts...), "tail")
			for i, k := range kept {
				if string(k) != want[i] {
					t.Errorf("part %d = %q, want %q", i, k, want[i])
				}
			}
			// Appending to what keep returned reallocates: nothing kept
			// after it changes.
			if len(kept) > 1 {
				_ = append(kept[0], bytes.Repeat([]byte{'!'}, 8)...)
				if string(kept[1]) != want[1] {
					t.Errorf("part 1 = %q after an append to part 0, want %q", kept[1], want[1])
				}
			}
		})
	}
	a := &arena{}
	first := a.bytes("one")
	second := a.bytes("two")
	if &first[:1][0] == &second[:1][0] || &a.b[0] != &first[0] || &a.b[3] != &second[0] {
		t.Error("two small parts are not side by side in one block")
	}
}

// TestArenaBufBeforeKeep: a second buf before the first buffer is kept
// would hand out the same space; it panics instead.
func TestArenaBufBeforeKeep(t *testing.T) {
	a := &arena{}
	a.buf(8)
	defer func() {
		if recover() == nil {
			t.Error("buf before keep did not panic")
		}
	}()
	a.buf(8)
}
