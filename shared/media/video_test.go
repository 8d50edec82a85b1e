package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// box is one ISO BMFF box found by walkBoxes: its type, payload and where the
// payload starts in the file.
type box struct {
	typ     string
	payload []byte
	at      int
}

// isContainer reports whether a box's payload is a sequence of boxes.
func isContainer(typ string) bool {
	switch typ {
	case "moov", "trak", "mdia", "minf", "dinf", "stbl":
		return true
	}
	return false
}

// walkBoxes returns every box of b keyed by its path ("moov/trak/tkhd"),
// failing the test on a size that does not fit its parent.
func walkBoxes(t *testing.T, b []byte, base int, prefix string, into map[string]box) {
	t.Helper()
	for off := 0; off < len(b); {
		if len(b)-off < 8 {
			t.Fatalf("%s: %d stray bytes at %d", prefix, len(b)-off, base+off)
		}
		size := int(binary.BigEndian.Uint32(b[off:]))
		typ := string(b[off+4 : off+8])
		head := 8
		if size == 1 {
			size = int(binary.BigEndian.Uint64(b[off+8:]))
			head = 16
		}
		if size < head || off+size > len(b) {
			t.Fatalf("%s%s at %d: size %d does not fit %d bytes", prefix, typ, base+off, size, len(b)-off)
		}
		path := prefix + typ
		if _, dup := into[path]; dup {
			t.Fatalf("duplicate box %s", path)
		}
		bx := box{typ: typ, payload: b[off+head : off+size], at: base + off + head}
		into[path] = bx
		if isContainer(typ) {
			walkBoxes(t, bx.payload, bx.at, path+"/", into)
		}
		off += size
	}
}

func TestVideoInvalid(t *testing.T) {
	tests := []struct{ seconds, w, h int }{
		{0, 640, 360},
		{-3, 640, 360},
		{MaxVideoSeconds + 1, 640, 360},
		{5, 15, 360},
		{5, 640, 15},
		{5, 4097, 360},
		{5, 640, 4097},
		{5, 0, 0},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%ds/%dx%d", tt.seconds, tt.w, tt.h)
		t.Run(name, func(t *testing.T) {
			data, err := Video(1, tt.seconds, tt.w, tt.h)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Video(%s) error = %v; want ErrInvalidArgument", name, err)
			}
			if data != nil {
				t.Errorf("Video(%s) = %d bytes; want nil", name, len(data))
			}
		})
	}
}

func TestVideo(t *testing.T) {
	tests := []struct {
		seed          uint64
		seconds, w, h int
		level         byte
	}{
		{1, 1, 16, 16, 10},
		{2, 2, 33, 17, 10}, // odd sizes: made 34x18
		{3, 5, 640, 360, 22},
		{4, 3, 1280, 720, 31},
		{5, 1, 4096, 16, 40},
		{6, 3, 1920, 1080, 40},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%ds/%dx%d", tt.seconds, tt.w, tt.h), func(t *testing.T) {
			data, err := Video(tt.seed, tt.seconds, tt.w, tt.h)
			if err != nil {
				t.Fatalf("Video() error = %v", err)
			}
			w, h := VideoSize(tt.w, tt.h)
			boxes := map[string]box{}
			walkBoxes(t, data, 0, "", boxes)
			for _, p := range []string{"ftyp", "moov/mvhd", "moov/trak/tkhd", "moov/trak/mdia/mdhd",
				"moov/trak/mdia/hdlr", "moov/trak/mdia/minf/vmhd", "moov/trak/mdia/minf/dinf/dref",
				"moov/trak/mdia/minf/stbl/stsd", "moov/trak/mdia/minf/stbl/stts", "moov/trak/mdia/minf/stbl/stss",
				"moov/trak/mdia/minf/stbl/stsc", "moov/trak/mdia/minf/stbl/stsz", "moov/trak/mdia/minf/stbl/stco", "mdat"} {
				if _, ok := boxes[p]; !ok {
					t.Fatalf("box %s missing", p)
				}
			}
			if _, ok := boxes["moov/trak/mdia/minf/stbl/ctts"]; ok {
				t.Error("a ctts box: decoding order is presentation order")
			}
			be := binary.BigEndian
			frames := tt.seconds * FrameRate
			mvhd := boxes["moov/mvhd"].payload
			mdhd := boxes["moov/trak/mdia/mdhd"].payload
			tkhd := boxes["moov/trak/tkhd"].payload
			stbl := "moov/trak/mdia/minf/stbl/"
			stsd := boxes[stbl+"stsd"].payload
			stts := boxes[stbl+"stts"].payload
			stss := boxes[stbl+"stss"].payload
			stsc := boxes[stbl+"stsc"].payload
			stsz := boxes[stbl+"stsz"].payload
			stco := boxes[stbl+"stco"].payload
			// The avc1 sample entry: 78 bytes of fields, then boxes.
			entry := map[string]box{}
			walkBoxes(t, stsd[8:], 0, "", entry)
			avc1, ok := entry["avc1"]
			if !ok {
				t.Fatalf("stsd holds %v; want avc1", entry)
			}
			walkBoxes(t, avc1.payload[78:], 0, "avc1/", entry)
			avcC, colr, pasp := entry["avc1/avcC"].payload, entry["avc1/colr"].payload, entry["avc1/pasp"].payload
			if len(avcC) < 8 || len(colr) != 11 || len(pasp) != 8 {
				t.Fatalf("avc1 boxes avcC %x, colr %x, pasp %x", avcC, colr, pasp)
			}
			checks := []struct {
				name      string
				got, want any
			}{
				{"ftyp major brand", string(boxes["ftyp"].payload[:4]), "isom"},
				{"mvhd duration/timescale", float64(be.Uint32(mvhd[16:])) / float64(be.Uint32(mvhd[12:])), float64(tt.seconds)},
				{"mdhd timescale", be.Uint32(mdhd[12:]), uint32(FrameRate)},
				{"mdhd duration", be.Uint32(mdhd[16:]), uint32(frames)},
				{"tkhd duration", be.Uint32(tkhd[20:]), be.Uint32(mvhd[16:])},
				{"tkhd width", be.Uint32(tkhd[76:]) >> 16, uint32(w)},
				{"tkhd height", be.Uint32(tkhd[80:]) >> 16, uint32(h)},
				{"hdlr type", string(boxes["moov/trak/mdia/hdlr"].payload[8:12]), "vide"},
				{"stsd entries", be.Uint32(stsd[4:]), uint32(1)},
				{"sample entry width", be.Uint16(avc1.payload[24:]), uint16(w)},
				{"sample entry height", be.Uint16(avc1.payload[26:]), uint16(h)},
				{"avcC version", avcC[0], byte(1)},
				{"avcC profile", avcC[1], byte(66)},
				{"avcC constraints", avcC[2], byte(0xC0)},
				{"avcC level", avcC[3], tt.level},
				{"avcC NAL length size", avcC[4] & 3, byte(3)},
				{"avcC SPS count", avcC[5] & 31, byte(1)},
				{"colr", string(colr[:4]) + fmt.Sprint(colr[4:]), "nclx[0 6 0 6 0 6 0]"},
				{"pasp", fmt.Sprint(pasp), "[0 0 0 1 0 0 0 1]"},
				{"stts entries", be.Uint32(stts[4:]), uint32(1)},
				{"stts count", be.Uint32(stts[8:]), uint32(frames)},
				{"stts delta", be.Uint32(stts[12:]), uint32(1)},
				{"stss entries", be.Uint32(stss[4:]), uint32((frames + h264IDRInterval - 1) / h264IDRInterval)},
				{"stsc entries", be.Uint32(stsc[4:]), uint32(1)},
				{"stsc samples per chunk", be.Uint32(stsc[12:]), uint32(frames)},
				{"stsz sample size", be.Uint32(stsz[4:]), uint32(0)},
				{"stsz count", be.Uint32(stsz[8:]), uint32(frames)},
				{"stco entries", be.Uint32(stco[4:]), uint32(1)},
				{"stco offset", int(be.Uint32(stco[8:])), boxes["mdat"].at},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
				}
			}
			if t.Failed() {
				return
			}
			// The parameter sets in avcC.
			spsLen := int(be.Uint16(avcC[6:]))
			sps := avcC[8 : 8+spsLen]
			rest := avcC[8+spsLen:]
			if rest[0] != 1 || int(be.Uint16(rest[1:]))+3 != len(rest) {
				t.Fatalf("avcC PPS part %x", rest)
			}
			pps := rest[3:]
			if sps[0] != nalSPS || pps[0] != nalPPS || !bytes.Equal(sps[1:4], avcC[1:4]) {
				t.Errorf("avcC SPS %x, PPS %x; want NAL types 7 and 8 and the SPS's profile and level", sps, pps)
			}
			checkEscaped(t, "SPS", sps[1:])
			checkEscaped(t, "PPS", pps[1:])
			sync := map[int]bool{}
			for i := 0; i < int(be.Uint32(stss[4:])); i++ {
				sync[int(be.Uint32(stss[8+4*i:]))-1] = true
			}
			// The samples tile mdat exactly; each is one slice NAL unit:
			// IDR on the sync samples, every two seconds, else non-IDR.
			mdat := boxes["mdat"].payload
			off := 0
			for i := 0; i < frames; i++ {
				size := int(be.Uint32(stsz[12+4*i:]))
				if off+size > len(mdat) || size < 6 {
					t.Fatalf("sample %d (%d bytes at %d) does not fit mdat (%d bytes)", i, size, off, len(mdat))
				}
				sample := mdat[off : off+size]
				off += size
				if n := int(be.Uint32(sample)); n != size-4 {
					t.Fatalf("sample %d: NAL unit of %d bytes in a sample of %d", i, n, size)
				}
				want := byte(nalSlice)
				if i%h264IDRInterval == 0 {
					want = nalSliceIDR
				}
				if sample[4] != want || sync[i] != (want == nalSliceIDR) {
					t.Errorf("sample %d: NAL header %#x, sync %v; want %#x", i, sample[4], sync[i], want)
				}
				checkEscaped(t, fmt.Sprintf("sample %d", i), sample[5:])
			}
			if off != len(mdat) {
				t.Errorf("sum of sample sizes = %d; want mdat size %d", off, len(mdat))
			}
		})
	}
}

// checkEscaped fails the test if a NAL unit's payload breaks the rules of
// emulation prevention (7.4.1): no 0x000000, 0x000001 or 0x000002
// anywhere, 0x000003 only before a byte <= 3, and no zero byte at the end.
func checkEscaped(t *testing.T, what string, p []byte) {
	t.Helper()
	for i := 2; i < len(p); i++ {
		if p[i-2] != 0 || p[i-1] != 0 {
			continue
		}
		if p[i] < 3 || p[i] == 3 && (i+1 == len(p) || p[i+1] > 3) {
			t.Errorf("%s: bytes %x at %d break emulation prevention", what, p[i-2:min(i+2, len(p))], i-2)
			return
		}
	}
	if len(p) == 0 || p[len(p)-1] == 0 {
		t.Errorf("%s: ends with a zero byte, or is empty", what)
	}
}

func TestVideoSize(t *testing.T) {
	tests := []struct{ w, h, wantW, wantH int }{
		{640, 360, 640, 360}, {101, 37, 102, 38}, {16, 17, 16, 18}, {4095, 4096, 4096, 4096},
	}
	for _, tt := range tests {
		if w, h := VideoSize(tt.w, tt.h); w != tt.wantW || h != tt.wantH {
			t.Errorf("VideoSize(%d, %d) = %d, %d; want %d, %d", tt.w, tt.h, w, h, tt.wantW, tt.wantH)
		}
	}
}

// TestVideoMoves checks that frames differ: the ball, bar and counter move.
func TestVideoMoves(t *testing.T) {
	sc := newScene(9, 320, 180, 24)
	var prev []byte
	for i := 0; i < sc.frames; i++ {
		img := sc.newFrame()
		sc.draw(img, i)
		if prev != nil && bytes.Equal(prev, img.Y) {
			t.Errorf("frame %d equals frame %d", i, i-1)
		}
		prev = img.Y
	}
}

func TestVideoDeterministic(t *testing.T) {
	a, errA := Video(7, 1, 96, 64)
	b, errB := Video(7, 1, 96, 64)
	c, errC := Video(8, 1, 96, 64)
	if err := errors.Join(errA, errB, errC); err != nil {
		t.Fatalf("Video() error = %v", err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("Video(7) twice gave different bytes")
	}
	if bytes.Equal(a, c) {
		t.Errorf("Video(7) = Video(8); want different")
	}
}

// TestVideoWorkers checks that parallel encoding gives the sequential
// bytes: a worker's first P frame is coded against the frame before it,
// which another worker encodes.
func TestVideoWorkers(t *testing.T) {
	want, err := video(12, 5, 176, 144, 1)
	if err != nil {
		t.Fatalf("video(1 worker) error = %v", err)
	}
	for _, workers := range []int{2, 3, 7, 100} {
		got, err := video(12, 5, 176, 144, workers)
		if err != nil {
			t.Fatalf("video(%d workers) error = %v", workers, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("video(%d workers) differs from video(1 worker)", workers)
		}
	}
}
