package media

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The MP4 muxer writes one H.264 video track (sample entry 'avc1' with its
// avcC, ISO/IEC 14496-15), all samples in one chunk, with the moov box
// before mdat so players can start before the download ends. Every sample
// lasts one tick of a timescale of fps ticks per second, and decoding order
// is presentation order, so there is no ctts box and no edit list; stss
// lists the IDR samples.
//
// Layout: ftyp, moov (mvhd, trak (tkhd, mdia (mdhd, hdlr, minf (vmhd, dinf
// (dref (url)), stbl (stsd (avc1 (avcC, colr, pasp)), stts, stss, stsc,
// stsz, stco))))), mdat.

// mp4Movie describes the track being muxed.
type mp4Movie struct {
	width, height int
	fps           int    // media timescale: one tick per frame
	sizes         []int  // sample sizes in bytes, in order
	sync          []int  // the sync (IDR) samples, 0-based, ascending
	avcC          []byte // the AVCDecoderConfigurationRecord
}

// boxWriter appends ISO BMFF boxes to a byte slice.
type boxWriter struct{ b []byte }

// open starts a box and returns its offset for close.
func (w *boxWriter) open(typ string) int {
	at := len(w.b)
	w.b = append(w.b, 0, 0, 0, 0)
	w.b = append(w.b, typ...)
	return at
}

// openFull starts a full box (with version and flags).
func (w *boxWriter) openFull(typ string, version byte, flags uint32) int {
	at := w.open(typ)
	w.u32(uint32(version)<<24 | flags&0xFFFFFF)
	return at
}

// close fills in the size of the box started at at.
func (w *boxWriter) close(at int) {
	binary.BigEndian.PutUint32(w.b[at:], uint32(len(w.b)-at))
}

func (w *boxWriter) u8(v uint8)   { w.b = append(w.b, v) }
func (w *boxWriter) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *boxWriter) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *boxWriter) zeros(n int)  { w.b = append(w.b, make([]byte, n)...) }
func (w *boxWriter) str(s string) { w.b = append(w.b, s...) }
func (w *boxWriter) matrix()      { w.u32s(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000) }
func (w *boxWriter) u32s(v ...uint32) {
	for _, x := range v {
		w.u32(x)
	}
}

// mp4Header returns ftyp, moov and the mdat box header for a movie whose
// samples (total bytes) follow immediately after it.
func mp4Header(m mp4Movie) ([]byte, error) {
	var payload int64
	for _, s := range m.sizes {
		payload += int64(s)
	}
	frames := len(m.sizes)
	if frames == 0 || m.fps <= 0 {
		return nil, fmt.Errorf("media: mp4 with %d frames at %d fps", frames, m.fps)
	}
	if len(m.sync) == 0 || m.sync[0] != 0 {
		return nil, fmt.Errorf("media: mp4 whose first sample is not a sync sample")
	}
	// The chunk offset is the length of everything written here, known only
	// at the end: write a placeholder and patch it.
	durationMs := uint32(int64(frames) * 1000 / int64(m.fps))

	w := &boxWriter{b: make([]byte, 0, 1024+len(m.avcC)+4*frames+4*len(m.sync))}
	ftyp := w.open("ftyp")
	w.str("isom")
	w.u32(0x200)
	w.str("isomiso2avc1mp41")
	w.close(ftyp)

	moov := w.open("moov")
	mvhd := w.openFull("mvhd", 0, 0)
	w.u32s(0, 0, 1000, durationMs) // creation, modification, timescale (ms), duration
	w.u32(0x00010000)              // rate 1.0
	w.u16(0x0100)                  // volume 1.0
	w.zeros(10)                    // reserved
	w.matrix()
	w.zeros(24) // pre_defined
	w.u32(2)    // next_track_ID
	w.close(mvhd)

	trak := w.open("trak")
	tkhd := w.openFull("tkhd", 0, 3) // enabled, in movie
	w.u32s(0, 0, 1, 0, durationMs)   // creation, modification, track_ID, reserved, duration
	w.zeros(8)                       // reserved
	w.u16(0)                         // layer
	w.u16(0)                         // alternate_group
	w.u16(0)                         // volume: video
	w.u16(0)                         // reserved
	w.matrix()
	w.u32(uint32(m.width) << 16)
	w.u32(uint32(m.height) << 16)
	w.close(tkhd)

	mdia := w.open("mdia")
	mdhd := w.openFull("mdhd", 0, 0)
	w.u32s(0, 0, uint32(m.fps), uint32(frames)) // creation, modification, timescale, duration
	w.u16(0x55C4)                               // language "und"
	w.u16(0)                                    // pre_defined
	w.close(mdhd)
	hdlr := w.openFull("hdlr", 0, 0)
	w.u32(0) // pre_defined
	w.str("vide")
	w.zeros(12)
	w.str("VideoHandler\x00")
	w.close(hdlr)

	minf := w.open("minf")
	vmhd := w.openFull("vmhd", 0, 1)
	w.zeros(8) // graphicsmode, opcolor
	w.close(vmhd)
	dinf := w.open("dinf")
	dref := w.openFull("dref", 0, 0)
	w.u32(1)
	url := w.openFull("url ", 0, 1) // media is in this file
	w.close(url)
	w.close(dref)
	w.close(dinf)

	stbl := w.open("stbl")
	stsd := w.openFull("stsd", 0, 0)
	w.u32(1)
	entry := w.open("avc1")
	w.zeros(6) // reserved
	w.u16(1)   // data_reference_index
	w.zeros(16)
	w.u16(uint16(m.width))
	w.u16(uint16(m.height))
	w.u32(0x00480000) // 72 dpi
	w.u32(0x00480000)
	w.u32(0)      // reserved
	w.u16(1)      // frame_count
	w.zeros(32)   // compressorname: none
	w.u16(0x18)   // depth
	w.u16(0xFFFF) // pre_defined = -1
	avcC := w.open("avcC")
	w.b = append(w.b, m.avcC...)
	w.close(avcC)
	colr := w.open("colr") // as the SPS's VUI says: BT.601 limited range
	w.str("nclx")
	w.u16(6) // colour_primaries: SMPTE 170M
	w.u16(6) // transfer_characteristics
	w.u16(6) // matrix_coefficients
	w.u8(0)  // full_range_flag 0, reserved
	w.close(colr)
	pasp := w.open("pasp") // square pixels
	w.u32s(1, 1)
	w.close(pasp)
	w.close(entry)
	w.close(stsd)

	stts := w.openFull("stts", 0, 0)
	w.u32s(1, uint32(frames), 1) // every frame lasts one tick
	w.close(stts)
	stss := w.openFull("stss", 0, 0)
	w.u32(uint32(len(m.sync)))
	for _, i := range m.sync {
		w.u32(uint32(i + 1)) // sample numbers start at 1
	}
	w.close(stss)
	stsc := w.openFull("stsc", 0, 0)
	w.u32s(1, 1, uint32(frames), 1) // one chunk holds every sample
	w.close(stsc)
	stsz := w.openFull("stsz", 0, 0)
	w.u32s(0, uint32(frames))
	for _, s := range m.sizes {
		w.u32(uint32(s))
	}
	w.close(stsz)
	stco := w.openFull("stco", 0, 0)
	w.u32(1)
	chunkAt := len(w.b)
	w.u32(0) // patched below
	w.close(stco)
	w.close(stbl)
	w.close(minf)
	w.close(mdia)
	w.close(trak)
	w.close(moov)

	// mdat: a 64-bit size if the payload needs it.
	if payload+8 <= math.MaxUint32 {
		w.u32(uint32(payload + 8))
		w.str("mdat")
	} else {
		w.u32(1)
		w.str("mdat")
		w.b = binary.BigEndian.AppendUint64(w.b, uint64(payload+16))
	}
	if len(w.b) > math.MaxUint32 {
		return nil, fmt.Errorf("media: mp4 header of %d bytes", len(w.b))
	}
	binary.BigEndian.PutUint32(w.b[chunkAt:], uint32(len(w.b)))
	return w.b, nil
}
