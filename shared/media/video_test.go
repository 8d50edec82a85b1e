package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image/jpeg"
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
	}{
		{1, 1, 16, 16},
		{2, 2, 33, 17}, // odd sizes
		{3, 5, 640, 360},
		{4, 3, 1280, 720},
		{5, 1, 4096, 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%ds/%dx%d", tt.seconds, tt.w, tt.h), func(t *testing.T) {
			data, err := Video(tt.seed, tt.seconds, tt.w, tt.h)
			if err != nil {
				t.Fatalf("Video() error = %v", err)
			}
			boxes := map[string]box{}
			walkBoxes(t, data, 0, "", boxes)
			for _, p := range []string{"ftyp", "moov/mvhd", "moov/trak/tkhd", "moov/trak/mdia/mdhd",
				"moov/trak/mdia/hdlr", "moov/trak/mdia/minf/vmhd", "moov/trak/mdia/minf/dinf/dref",
				"moov/trak/mdia/minf/stbl/stsd", "moov/trak/mdia/minf/stbl/stts", "moov/trak/mdia/minf/stbl/stsc",
				"moov/trak/mdia/minf/stbl/stsz", "moov/trak/mdia/minf/stbl/stco", "mdat"} {
				if _, ok := boxes[p]; !ok {
					t.Fatalf("box %s missing", p)
				}
			}
			be := binary.BigEndian
			frames := tt.seconds * FrameRate
			mvhd := boxes["moov/mvhd"].payload
			mdhd := boxes["moov/trak/mdia/mdhd"].payload
			tkhd := boxes["moov/trak/tkhd"].payload
			stbl := "moov/trak/mdia/minf/stbl/"
			stsd := boxes[stbl+"stsd"].payload
			stts := boxes[stbl+"stts"].payload
			stsc := boxes[stbl+"stsc"].payload
			stsz := boxes[stbl+"stsz"].payload
			stco := boxes[stbl+"stco"].payload
			checks := []struct {
				name      string
				got, want any
			}{
				{"ftyp major brand", string(boxes["ftyp"].payload[:4]), "isom"},
				{"mvhd duration/timescale", float64(be.Uint32(mvhd[16:])) / float64(be.Uint32(mvhd[12:])), float64(tt.seconds)},
				{"mdhd timescale", be.Uint32(mdhd[12:]), uint32(FrameRate)},
				{"mdhd duration", be.Uint32(mdhd[16:]), uint32(frames)},
				{"tkhd duration", be.Uint32(tkhd[20:]), be.Uint32(mvhd[16:])},
				{"tkhd width", be.Uint32(tkhd[76:]) >> 16, uint32(tt.w)},
				{"tkhd height", be.Uint32(tkhd[80:]) >> 16, uint32(tt.h)},
				{"hdlr type", string(boxes["moov/trak/mdia/hdlr"].payload[8:12]), "vide"},
				{"stsd entries", be.Uint32(stsd[4:]), uint32(1)},
				{"sample entry", string(stsd[12:16]), "jpeg"},
				{"sample entry width", be.Uint16(stsd[16+24:]), uint16(tt.w)},
				{"sample entry height", be.Uint16(stsd[16+26:]), uint16(tt.h)},
				{"stts entries", be.Uint32(stts[4:]), uint32(1)},
				{"stts count", be.Uint32(stts[8:]), uint32(frames)},
				{"stts delta", be.Uint32(stts[12:]), uint32(1)},
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
			// The samples tile mdat exactly, and each is a JPEG of WxH.
			mdat := boxes["mdat"].payload
			sizes := make([]int, frames)
			total := 0
			for i := range sizes {
				sizes[i] = int(be.Uint32(stsz[12+4*i:]))
				total += sizes[i]
			}
			if total != len(mdat) {
				t.Fatalf("sum of sample sizes = %d; want mdat size %d", total, len(mdat))
			}
			off := 0
			for i, s := range sizes {
				sample := mdat[off : off+s]
				off += s
				if i != 0 && i != frames-1 && i != frames/2 {
					if !bytes.HasPrefix(sample, []byte{0xFF, 0xD8}) {
						t.Errorf("sample %d does not start with a JPEG SOI marker", i)
					}
					continue
				}
				img, err := jpeg.Decode(bytes.NewReader(sample))
				if err != nil {
					t.Fatalf("jpeg.Decode(sample %d) error = %v", i, err)
				}
				if b := img.Bounds(); b.Dx() != tt.w || b.Dy() != tt.h {
					t.Errorf("sample %d is %dx%d; want %dx%d", i, b.Dx(), b.Dy(), tt.w, tt.h)
				}
			}
		})
	}
}

// TestVideoMoves checks that frames differ: the ball, bar and counter move.
func TestVideoMoves(t *testing.T) {
	sc := newScene(9, 320, 180, 24)
	var prev []byte
	for i := 0; i < sc.frames; i++ {
		img := newFrame(320, 180)
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
