package media

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// bitString returns the bits w wrote, as "0" and "1".
func bitString(w *bitWriter) string {
	var sb strings.Builder
	for i := 0; i < w.pos; i++ {
		sb.WriteByte('0' + w.buf[i>>3]>>(7-i&7)&1)
	}
	return sb.String()
}

func TestExpGolomb(t *testing.T) {
	tests := []struct {
		write func(w *bitWriter)
		want  string
	}{
		{func(w *bitWriter) { w.ue(0) }, "1"},
		{func(w *bitWriter) { w.ue(1) }, "010"},
		{func(w *bitWriter) { w.ue(2) }, "011"},
		{func(w *bitWriter) { w.ue(3) }, "00100"},
		{func(w *bitWriter) { w.ue(25) }, "000011010"},
		{func(w *bitWriter) { w.ue(30) }, "000011111"},
		{func(w *bitWriter) { w.ue(1<<32 - 1) }, strings.Repeat("0", 32) + "1" + strings.Repeat("0", 32)},
		{func(w *bitWriter) { w.se(0) }, "1"},
		{func(w *bitWriter) { w.se(1) }, "010"},
		{func(w *bitWriter) { w.se(-1) }, "011"},
		{func(w *bitWriter) { w.se(2) }, "00100"},
		{func(w *bitWriter) { w.se(-2) }, "00101"},
		{func(w *bitWriter) { w.put(5, 3); w.align() }, "10100000"},
		{func(w *bitWriter) { w.put(1, 1); w.trailing() }, "11000000"},
		{func(w *bitWriter) { w.trailing() }, "10000000"},
		{func(w *bitWriter) { w.put(0, 8); w.align(); w.raw([]byte{0xA5}) }, "0000000010100101"},
	}
	for i, tt := range tests {
		var w bitWriter
		w.resetGrow(nil)
		tt.write(&w)
		if got := bitString(&w); got != tt.want {
			t.Errorf("case %d: bits %s; want %s", i, got, tt.want)
		}
	}
}

func TestAppendNAL(t *testing.T) {
	tests := []struct{ rbsp, want []byte }{
		{[]byte{0x80}, []byte{0x80}},
		{[]byte{0, 0, 0, 0x80}, []byte{0, 0, 3, 0, 0x80}},
		{[]byte{0, 0, 1}, []byte{0, 0, 3, 1}},
		{[]byte{0, 0, 2, 0, 0, 3}, []byte{0, 0, 3, 2, 0, 0, 3, 3}},
		{[]byte{0, 0, 4, 0, 0}, []byte{0, 0, 4, 0, 0}},
		{[]byte{0, 0, 0, 0, 0, 1}, []byte{0, 0, 3, 0, 0, 3, 0, 1}},
		{[]byte{7, 0, 1, 0, 0, 0xFF, 0, 0, 0}, []byte{7, 0, 1, 0, 0, 0xFF, 0, 0, 3, 0}},
	}
	for _, tt := range tests {
		got := appendNAL([]byte{0xEE}, 0x65, tt.rbsp)
		want := append([]byte{0xEE, 0, 0, 0, byte(len(tt.want) + 1), 0x65}, tt.want...)
		if !bytes.Equal(got, want) {
			t.Errorf("appendNAL(%x) = %x; want %x", tt.rbsp, got, want)
		}
	}
}

func TestLevelFor(t *testing.T) {
	tests := []struct {
		w, h int
		want byte
	}{
		{16, 16, 10}, {176, 144, 10}, {320, 240, 12}, {640, 360, 22}, {640, 480, 22},
		{1280, 720, 31}, {1920, 1080, 40}, {4096, 16, 40}, {2048, 1080, 42},
		{3840, 2160, 51}, {4096, 4096, 60},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d", tt.w, tt.h), func(t *testing.T) {
			got, err := levelFor((tt.w+15)/16, (tt.h+15)/16, FrameRate)
			if err != nil || got != tt.want {
				t.Errorf("levelFor(%dx%d) = %d, %v; want %d", tt.w, tt.h, got, err, tt.want)
			}
		})
	}
	if _, err := levelFor(400, 400, FrameRate); err == nil {
		t.Error("levelFor(6400x6400) = nil error; want one")
	}
}

// TestIntraPrediction checks the prediction modes against samples worked
// out by hand from the formulas of 8.3.3 and 8.3.4.
func TestIntraPrediction(t *testing.T) {
	// 2x2 macroblocks: a 32x32 luma plane and a 16x16 chroma plane, both
	// ramps: 10 + x + 2y.
	ramp := func(n int) []byte {
		p := make([]byte, n*n)
		for y := 0; y < n; y++ {
			for x := 0; x < n; x++ {
				p[y*n+x] = byte(10 + x + 2*y)
			}
		}
		return p
	}
	luma, chroma := ramp(32), ramp(16)
	var pred [256]byte
	tests := []struct {
		name         string
		x0, y0, size int
		mode         int
		avail        bool
		at           [][3]int // x, y, want
	}{
		{"luma vertical, no top", 16, 0, 16, predVertical, false, nil},
		{"luma horizontal, no left", 0, 16, 16, predHorizontal, false, nil},
		{"luma vertical", 0, 16, 16, predVertical, true, [][3]int{{0, 0, 10 + 30}, {5, 9, 10 + 5 + 30}}},
		{"luma horizontal", 16, 0, 16, predHorizontal, true, [][3]int{{0, 0, 10 + 15}, {9, 3, 10 + 15 + 6}}},
		{"chroma vertical", 8, 8, 8, predVertical, true, [][3]int{{3, 0, 10 + 11 + 14}, {3, 7, 10 + 11 + 14}}},
		{"chroma horizontal", 8, 8, 8, predHorizontal, true, [][3]int{{0, 5, 10 + 7 + 26}, {7, 5, 10 + 7 + 26}}},
		{"chroma DC, none", 0, 0, 8, predDC, true, [][3]int{{0, 0, 128}, {7, 7, 128}}},
		// Top only (x0 0): every 4x4 block uses the samples above it.
		{"chroma DC, top only", 0, 8, 8, predDC, true, [][3]int{
			{0, 0, (4*(10+14) + 6 + 2) >> 2}, {4, 0, (4*(10+14) + 22 + 2) >> 2},
			{0, 4, (4*(10+14) + 6 + 2) >> 2}, {4, 4, (4*(10+14) + 22 + 2) >> 2}}},
		// Left only (y0 0): every 4x4 block uses the samples left of its rows.
		{"chroma DC, left only", 8, 0, 8, predDC, true, [][3]int{
			{0, 0, (4*(10+7) + 12 + 2) >> 2}, {4, 0, (4*(10+7) + 12 + 2) >> 2},
			{0, 4, (4*(10+7) + 44 + 2) >> 2}, {4, 4, (4*(10+7) + 44 + 2) >> 2}}},
		// Both: the corner blocks average both sides; the top-right block
		// takes the samples above, the bottom-left one those on the left.
		{"chroma DC, both", 8, 8, 8, predDC, true, [][3]int{
			{0, 0, (4*(10+14) + 38 + 4*(10+7) + 2*(8+9+10+11) + 4) >> 3},
			{4, 0, (4*(10+14) + 54 + 2) >> 2},
			{0, 4, (4*(10+7) + 2*(12+13+14+15) + 2) >> 2},
			{4, 4, (4*(10+14) + 54 + 4*(10+7) + 2*(12+13+14+15) + 4) >> 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plane, stride := luma, 32
			if tt.size == 8 {
				plane, stride = chroma, 16
			}
			ok := predictBlock(pred[:tt.size*tt.size], plane, stride, tt.x0, tt.y0, tt.size, tt.mode)
			if ok != tt.avail {
				t.Fatalf("predictBlock() = %v; want %v", ok, tt.avail)
			}
			for _, c := range tt.at {
				if got := int(pred[c[1]*tt.size+c[0]]); got != c[2] {
					t.Errorf("pred[%d,%d] = %d; want %d", c[0], c[1], got, c[2])
				}
			}
		})
	}
}

// TestMVPred checks motion vector prediction (8.4.1.3) and the P_Skip
// vector (8.4.1.1) on a 3x2-macroblock picture whose first row is coded as
// each case says; the macroblock predicted is (mx, my).
func TestMVPred(t *testing.T) {
	inter := func(x, y int) mbInfo { return mbInfo{mv: mv{x, y}} }
	intra := mbInfo{intra: true}
	tests := []struct {
		name       string
		row        [3]mbInfo // the first row; (0, 1) is inter (-40, 0)
		mx, my     int
		pred, skip mv
	}{
		{"top left: nothing around", [3]mbInfo{}, 0, 0, mv{}, mv{}},
		// Top row: B and C are outside, so both take A's vector; a skip
		// there has a zero vector (no B).
		{"top row", [3]mbInfo{inter(-40, 0)}, 1, 0, mv{-40, 0}, mv{}},
		// Only A is inter: its vector; the skip takes it too (B is intra).
		{"only A inter", [3]mbInfo{intra, intra, intra}, 1, 1, mv{-40, 0}, mv{-40, 0}},
		// A zero-vector B makes a skip's vector zero; the median is A's.
		{"B zero", [3]mbInfo{intra, inter(0, 0), inter(-40, 8)}, 1, 1, mv{-40, 0}, mv{}},
		// Three inter neighbours: the median of each component.
		{"median", [3]mbInfo{intra, inter(-8, 16), inter(-24, -8)}, 1, 1, mv{-24, 0}, mv{-24, 0}},
		// Right edge: C is outside, so D (above left) stands for it; A,
		// (1, 1), is intra.
		{"C outside: D", [3]mbInfo{inter(-16, 0), inter(-8, 0), intra}, 2, 1, mv{-8, 0}, mv{-8, 0}},
		// Left edge: A is outside (refIdx -1, vector 0), so C is the only
		// inter neighbour; a skip there has a zero vector.
		{"A outside", [3]mbInfo{intra, inter(-16, 0), inter(-8, 0)}, 0, 1, mv{-16, 0}, mv{}},
		{"A outside, two inter", [3]mbInfo{inter(-16, 8), inter(-8, 0), intra}, 0, 1, mv{-8, 0}, mv{}},
	}
	e := &h264Encoder{mbw: 3, mbh: 2}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mbs := append(tt.row[:], inter(-40, 0), intra, intra)
			if tt.my == 0 {
				mbs = append(tt.row[:1:1], intra, intra, intra, intra, intra)
			}
			pred, skip := e.mvPred(mbs, tt.mx, tt.my)
			if pred != tt.pred || skip != tt.skip {
				t.Errorf("mvPred(%d, %d) = %v, %v; want %v, %v", tt.mx, tt.my, pred, skip, tt.pred, tt.skip)
			}
		})
	}
}

// TestBlockMoved checks the motion-compensated comparison, inside the
// picture and past its edges, where the reference repeats its edge
// samples.
func TestBlockMoved(t *testing.T) {
	// A 32x16 plane (stride 40, 8 unused columns) whose samples are 1+x,
	// and blocks of 8x8.
	const stride, w, h = 40, 32, 16
	ref := make([]byte, stride*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			ref[y*stride+x] = byte(1 + x)
		}
	}
	block := func(f func(x int) int) []byte {
		cur := make([]byte, stride*h)
		for y := 0; y < 8; y++ {
			for x := 0; x < 8; x++ {
				cur[(4+y)*stride+8+x] = byte(f(x))
			}
		}
		return cur
	}
	tests := []struct {
		name   string
		cur    []byte
		dx, dy int
		want   bool
	}{
		{"same place", block(func(x int) int { return 9 + x }), 0, 0, true},
		{"moved left by 4", block(func(x int) int { return 5 + x }), -4, 0, true},
		{"moved left by 4, wrong vector", block(func(x int) int { return 5 + x }), -2, 0, false},
		{"vertical move, columns constant", block(func(x int) int { return 9 + x }), 0, 6, true},
		{"past the left edge", block(func(x int) int { return max(1, 1+x-12) }), -20, 0, true},
		{"past the right edge", block(func(x int) int { return min(32, 31+x) }), 22, 0, true},
		{"past the right edge, not repeated", block(func(x int) int { return 31 + x }), 22, 0, false},
		{"past the bottom edge", block(func(x int) int { return 9 + x }), 0, 30, true},
	}
	for _, tt := range tests {
		if got := blockMoved(tt.cur, ref, stride, w, h, 8, 4, 8, tt.dx, tt.dy); got != tt.want {
			t.Errorf("%s: blockMoved(%d, %d) = %v; want %v", tt.name, tt.dx, tt.dy, got, tt.want)
		}
	}
}
