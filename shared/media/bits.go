package media

import "math/bits"

// bitWriter writes big-endian bit fields into a byte slice, for the MP3
// and the H.264 encoders. After reset, the slice is fixed and zeroed (an
// MP3 frame has a size known in advance): writing past its end sets
// overflow and drops the bits. After resetGrow, the slice grows as bits
// are written (an H.264 RBSP).
type bitWriter struct {
	buf      []byte
	pos      int // in bits
	overflow bool
	grow     bool
}

// reset starts writing into buf, which must be zeroed, and not past it.
func (w *bitWriter) reset(buf []byte) { w.buf, w.pos, w.overflow, w.grow = buf, 0, false, false }

// resetGrow starts writing from scratch into a slice that grows, reusing
// buf's storage.
func (w *bitWriter) resetGrow(buf []byte) { w.buf, w.pos, w.overflow, w.grow = buf[:0], 0, false, true }

// put writes the low n bits of v, most significant first.
func (w *bitWriter) put(v uint32, n int) {
	for n > 0 {
		i := w.pos >> 3
		if i >= len(w.buf) {
			if !w.grow {
				w.overflow = true
				return
			}
			w.buf = append(w.buf, 0)
		}
		free := 8 - w.pos&7
		take := min(free, n)
		bitsv := (v >> (n - take)) & (1<<take - 1)
		w.buf[i] |= byte(bitsv << (free - take))
		w.pos += take
		n -= take
	}
}

// flag writes one bit: 1 for true.
func (w *bitWriter) flag(v bool) {
	if v {
		w.put(1, 1)
	} else {
		w.put(0, 1)
	}
}

// ue writes v as an unsigned Exp-Golomb code, H.264's ue(v).
func (w *bitWriter) ue(v uint32) {
	n := bits.Len64(uint64(v) + 1)
	w.put(0, n-1)
	if n > 32 { // v is 1<<32 - 1: a one, then 32 zeros
		w.put(1, 1)
		w.put(0, 32)
		return
	}
	w.put(v+1, n)
}

// se writes v as a signed Exp-Golomb code, H.264's se(v).
func (w *bitWriter) se(v int32) {
	if v > 0 {
		w.ue(uint32(v)*2 - 1)
	} else {
		w.ue(uint32(-int64(v) * 2))
	}
}

// align writes zero bits up to the next byte boundary.
func (w *bitWriter) align() {
	if r := w.pos & 7; r != 0 {
		w.put(0, 8-r)
	}
}

// raw appends p after the bits written so far, which must end on a byte
// boundary (align), to a growing slice.
func (w *bitWriter) raw(p []byte) {
	w.buf = append(w.buf[:w.pos>>3], p...)
	w.pos += 8 * len(p)
}

// trailing writes H.264's rbsp_trailing_bits: a one, then zeros to the
// byte boundary.
func (w *bitWriter) trailing() {
	w.put(1, 1)
	w.align()
}

// bytes returns the bytes written so far, the last one padded with zeros.
func (w *bitWriter) bytes() []byte { return w.buf[:(w.pos+7)>>3] }
