package media

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

// The MP3 encoder writes MPEG-1 Layer III, 44.1 kHz, mono, constant bit rate.
//
// It is deliberately small: a polyphase analysis filterbank (a root-raised-
// cosine prototype in place of the standard's tabulated window, close enough
// for the decoder's synthesis bank to cancel most aliasing), an MDCT with long
// blocks only, and a quantiser that sends every spectral value as -1, 0 or +1
// in the count1 region (big_values = 0, Huffman table B, a fixed 4-bit code).
// Each scalefactor band's amplitude is carried by global_gain and the
// scalefactors (scalefac_scale = 1, so one scalefactor step is 6 dB). A
// granule needs at most 74 + 105*4 + 418 = 912 bits and a 417-byte frame has
// 3168 bits of main data for two, so the bit reservoir is never used
// (main_data_begin = 0).
//
// The stream starts with an Info frame (the CBR form of the Xing header) in the
// LAME tag layout, carrying the frame count, byte count, a seek table and the
// encoder delay and padding, so that gapless decoders (ffmpeg, browsers) return
// exactly the input length and duration-reporting tools read it without scanning.

const (
	mp3Bitrate       = 128000
	mp3BitrateIndex  = 9 // 128 kbit/s in the MPEG-1 Layer III table
	mp3FrameSamples  = 1152
	mp3GranuleLines  = 576
	mp3SideInfoBytes = 17 // MPEG-1 mono
	mp3HeaderBytes   = 4

	// mp3Delay is the number of samples between an input sample and the same
	// sample in the decoder's output (counted from the first audio frame): 576
	// for the MDCT overlap plus 481 for the analysis and synthesis filterbanks
	// (512 taps each, centred). Measured with go-mp3 in the tests.
	mp3Delay = 576 + 481
	// mp3DecoderDelay is the part of mp3Delay that gapless decoders add on their
	// own to the Info tag's encoder delay.
	mp3DecoderDelay = 529

	// mp3TopLine is the first spectral line that is never coded: scalefactor
	// band 21 (above 16 kHz at 44.1 kHz) has no scalefactor of its own.
	mp3TopLine = 418
)

const (
	// scalefac_compress 15 gives slen1 = 4 bits (bands 0-10), slen2 = 3 (11-20).
	mp3ScalefacCompress = 15
	mp3Slen1            = 4
	mp3Slen2            = 3
)

// mp3Tables holds the encoder's precomputed filter coefficients. It is built
// per call (it is small and cheap) so the package keeps no mutable state.
type mp3Tables struct {
	c      [512]float64    // analysis window, C[i] in the standard's notation
	m      [32][32]float64 // folded matrixing, cos((2i+1)a pi/64)
	mdct   [18][36]float64 // windowed MDCT basis
	cs, ca [8]float64      // alias-reduction butterflies
	sfb    [23]int         // long-block scalefactor band boundaries at 44.1 kHz
	sfbMax [21]int         // largest scalefactor per band
	levels [256]float64    // 2^((g-210)/4), the dequantised amplitude for level g
}

func newMP3Tables() *mp3Tables {
	t := &mp3Tables{
		sfb: [23]int{0, 4, 8, 12, 16, 20, 24, 30, 36, 44, 52, 62, 74, 90, 110, 134, 162, 196, 238, 288, 342, 418, 576},
	}
	// Prototype low-pass: root-raised-cosine with its -3 dB point at pi/64 (half a
	// subband), roll-off 0.5, Kaiser-windowed to 511 taps centred on 256.
	const (
		period  = 64.0
		rolloff = 0.5
		beta    = 6.0
	)
	i0beta := besselI0(beta)
	for n := 1; n < 512; n++ {
		x := float64(n-256) / period
		var h float64
		switch {
		case n == 256:
			h = 1 - rolloff + 4*rolloff/math.Pi
		case math.Abs(math.Abs(4*rolloff*x)-1) < 1e-9:
			h = rolloff / math.Sqrt2 * ((1+2/math.Pi)*math.Sin(math.Pi/(4*rolloff)) + (1-2/math.Pi)*math.Cos(math.Pi/(4*rolloff)))
		default:
			h = (math.Sin(math.Pi*x*(1-rolloff)) + 4*rolloff*x*math.Cos(math.Pi*x*(1+rolloff))) /
				(math.Pi * x * (1 - 16*rolloff*rolloff*x*x))
		}
		r := float64(n-256) / 256
		w := besselI0(beta*math.Sqrt(math.Max(0, 1-r*r))) / i0beta
		h *= w / period
		if (n/64)%2 == 1 {
			h = -h
		}
		t.c[n] = h
	}
	for i := 0; i < 32; i++ {
		for a := 0; a < 32; a++ {
			t.m[i][a] = math.Cos(float64((2*i+1)*a) * math.Pi / 64)
		}
	}
	for k := 0; k < 18; k++ {
		for n := 0; n < 36; n++ {
			win := math.Sin(math.Pi / 36 * (float64(n) + 0.5))
			t.mdct[k][n] = win * math.Cos(math.Pi/72*float64((2*n+1+18)*(2*k+1)))
		}
	}
	ci := [8]float64{-0.6, -0.535, -0.33, -0.185, -0.095, -0.041, -0.0142, -0.0037}
	for i, c := range ci {
		sq := math.Sqrt(1 + c*c)
		t.cs[i] = 1 / sq
		t.ca[i] = c / sq
	}
	for b := range t.sfbMax {
		if b <= 10 {
			t.sfbMax[b] = 1<<mp3Slen1 - 1
		} else {
			t.sfbMax[b] = 1<<mp3Slen2 - 1
		}
	}
	for g := range t.levels {
		t.levels[g] = math.Exp2(float64(g-210) / 4)
	}
	return t
}

// besselI0 is the zeroth-order modified Bessel function of the first kind, for
// the Kaiser window.
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 50; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < 1e-12*sum {
			break
		}
	}
	return sum
}

// mp3Scale maps full-scale PCM (±1.0) to the spectral scale the decoder expects,
// so that decoded output has the input's level. Measured against go-mp3.
const mp3Scale = 0.215

// encodeMP3 encodes mono 44.1 kHz samples (nominally in [-1, 1]) as an MPEG-1
// Layer III stream at 128 kbit/s, preceded by an Info frame. Gapless decoders
// return exactly len(pcm) samples; others return up to two frames more.
//
// Frames are independent (no bit reservoir, and the filterbank reads the
// whole input), so runs of frames are encoded by up to workers goroutines;
// the output does not depend on workers. An error means a frame overflowed, which the bit budget rules out; it is
// reported rather than written as a corrupt stream.
func encodeMP3(pcm []float64, workers int) ([]byte, error) {
	t := newMP3Tables()
	n := len(pcm)
	frames := max(1, (n+mp3Delay+mp3FrameSamples-1)/mp3FrameSamples)
	// in holds 512 samples of silence (the filterbank's history), the input, and
	// silence up to the end of the last frame.
	in := make([]float64, 512+frames*mp3FrameSamples)
	for i, v := range pcm {
		in[512+i] = v * mp3Scale
	}

	offsets := make([]int, frames+1)
	offsets[0] = mp3InfoBytes // the Info frame, never padded
	rem := 0
	for f := 0; f < frames; f++ {
		offsets[f+1] = offsets[f] + nextFrameSize(&rem)
	}
	out := make([]byte, offsets[frames])

	workers = max(1, min(workers, (frames+63)/64))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		first, last := frames*w/workers, frames*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = encodeFrames(t, in, out, offsets, first, last)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	writeInfoFrame(out[:offsets[0]], frames, len(out), n, out[offsets[0]:])
	return out, nil
}

// encodeFrames writes audio frames [first, last) into out; frame f occupies
// out[offsets[f]:offsets[f+1]].
func encodeFrames(t *mp3Tables, in []float64, out []byte, offsets []int, first, last int) error {
	e := &frameEncoder{t: t}
	if first > 0 { // the MDCT overlaps the previous granule
		t.analyze(in, 2*first-1, &e.sb[1])
	}
	for f := first; f < last; f++ {
		if err := e.encode(in, 2*f, out[offsets[f]:offsets[f+1]]); err != nil {
			return fmt.Errorf("media: mp3 frame %d: %w", f, err)
		}
	}
	return nil
}

// Frame sizes alternate between 417 and 418 bytes to average 128 kbit/s.
const (
	mp3SizeNum   = 144 * mp3Bitrate
	mp3SizeDen   = SampleRate
	mp3InfoBytes = mp3SizeNum / mp3SizeDen // an unpadded frame: the Info frame's size
)

// nextFrameSize returns the size of the next audio frame, 417 or 418
// bytes, carrying the padding's remainder from frame to frame in rem
// (0 before the first frame).
func nextFrameSize(rem *int) int {
	size := mp3InfoBytes
	*rem += mp3SizeNum % mp3SizeDen
	if *rem >= mp3SizeDen {
		*rem -= mp3SizeDen
		size++
	}
	return size
}

// frameEncoder encodes consecutive frames: it carries the subband samples
// from granule to granule (the MDCT overlaps them) and its scratch space.
type frameEncoder struct {
	t    *mp3Tables
	sb   [2][18][32]float64 // subband samples: previous and current granule
	xr   [mp3GranuleLines]float64
	gr   [2]granule
	bits bitWriter
}

// encode writes the frame of granules gi and gi+1 of in (see analyze)
// into dst, which is exactly the frame's size (padded if it is one byte
// longer than an unpadded frame).
func (e *frameEncoder) encode(in []float64, gi int, dst []byte) error {
	for g := 0; g < 2; g++ {
		e.sb[0] = e.sb[1]
		e.t.analyze(in, gi+g, &e.sb[1])
		e.t.mdctGranule(&e.sb, &e.xr)
		e.gr[g].quantize(e.t, &e.xr)
	}
	writeFrame(dst, len(dst)-mp3InfoBytes, &e.gr, &e.bits)
	if e.bits.overflow {
		return fmt.Errorf("overflows %d bytes", len(dst))
	}
	return nil
}

// analyze runs the polyphase analysis filterbank over granule gi (18 times 32
// new samples) and stores its subband samples in sb, with the odd time samples
// of odd subbands negated to undo the decoder's frequency inversion.
func (t *mp3Tables) analyze(in []float64, gi int, sb *[18][32]float64) {
	var y [64]float64
	var yf [32]float64
	base := 512 + gi*mp3GranuleLines
	for s := 0; s < 18; s++ {
		// Window: Y[k] = sum over j of C[k+64j] * X[k+64j], X[0] the newest.
		x := in[base+32*s+31-511 : base+32*s+32]
		for k := 0; k < 64; k++ {
			var acc float64
			for j := k; j < 512; j += 64 {
				acc += t.c[j] * x[511-j]
			}
			y[k] = acc
		}
		// Matrixing S[i] = sum over k of cos((2i+1)(k-16)pi/64) Y[k], folded
		// with the cosine's symmetries to 32 terms (Y[48] has weight 0).
		yf[0] = y[16]
		for a := 1; a <= 16; a++ {
			yf[a] = y[16+a] + y[16-a]
		}
		for a := 17; a < 32; a++ {
			yf[a] = y[16+a] - y[80-a]
		}
		row := &sb[s]
		for i := 0; i < 32; i++ {
			var acc float64
			m := &t.m[i]
			for a := 0; a < 32; a++ {
				acc += m[a] * yf[a]
			}
			if i&1 == 1 && s&1 == 1 {
				acc = -acc
			}
			row[i] = acc
		}
	}
}

// mdctGranule turns the previous and current granule's subband samples into
// 576 spectral lines: an MDCT with the long-block sine window per subband,
// then the inverse of the decoder's alias-reduction butterflies.
func (t *mp3Tables) mdctGranule(sb *[2][18][32]float64, xr *[mp3GranuleLines]float64) {
	var z [36]float64
	for band := 0; band < 32; band++ {
		for s := 0; s < 18; s++ {
			z[s] = sb[0][s][band]
			z[s+18] = sb[1][s][band]
		}
		for k := 0; k < 18; k++ {
			var acc float64
			row := &t.mdct[k]
			for i := 0; i < 36; i++ {
				acc += row[i] * z[i]
			}
			xr[band*18+k] = acc
		}
	}
	for band := 1; band < 32; band++ {
		for i := 0; i < 8; i++ {
			li := 18*band - 1 - i
			ui := 18*band + i
			lb, ub := xr[li], xr[ui]
			xr[li] = lb*t.cs[i] + ub*t.ca[i]
			xr[ui] = ub*t.cs[i] - lb*t.ca[i]
		}
	}
}

// granule is one quantised granule of one channel.
type granule struct {
	globalGain int
	sf         [21]int
	q          [mp3GranuleLines]int8
	count1End  int // lines [0, count1End) are coded; a multiple of 4
}

// quantize picks global_gain, the scalefactors and a value in {-1, 0, 1} per
// line to minimise the squared error of each band.
func (gr *granule) quantize(t *mp3Tables, xr *[mp3GranuleLines]float64) {
	*gr = granule{}
	var peak float64
	for _, v := range xr[:mp3TopLine] {
		peak = math.Max(peak, math.Abs(v))
	}
	if peak < 1e-9 {
		return
	}
	g := int(math.Ceil(4*math.Log2(peak) + 210))
	g = min(max(g, 0), 255)
	gr.globalGain = g
	last := -1
	for b := 0; b < 21; b++ {
		lo, hi := t.sfb[b], t.sfb[b+1]
		var energy float64
		for _, v := range xr[lo:hi] {
			energy += v * v
		}
		bestErr, bestSF, bestA := energy, 0, 0.0
		for sf := 0; sf <= t.sfbMax[b]; sf++ {
			level := g - 4*sf
			if level < 0 {
				break
			}
			a := t.levels[level]
			e := 0.0
			for _, v := range xr[lo:hi] {
				d := math.Abs(v) - a
				if d*d < v*v {
					e += d * d
				} else {
					e += v * v
				}
			}
			if e < bestErr {
				bestErr, bestSF, bestA = e, sf, a
			}
		}
		gr.sf[b] = bestSF
		if bestA == 0 {
			continue
		}
		for i := lo; i < hi; i++ {
			v := xr[i]
			d := math.Abs(v) - bestA
			if d*d < v*v {
				if v < 0 {
					gr.q[i] = -1
				} else {
					gr.q[i] = 1
				}
				last = i
			}
		}
	}
	gr.count1End = (last + 4) / 4 * 4
}

// part23Length is the number of main-data bits of the granule: scalefactors,
// then a 4-bit code and the sign bits per quadruple.
func (gr *granule) part23Length() int {
	n := 11*mp3Slen1 + 10*mp3Slen2
	for i := 0; i < gr.count1End; i++ {
		if i%4 == 0 {
			n += 4
		}
		if gr.q[i] != 0 {
			n++
		}
	}
	return n
}

// writeFrame writes one audio frame of exactly len(dst) bytes.
func writeFrame(dst []byte, padding int, gr *[2]granule, w *bitWriter) {
	clear(dst)
	putHeader(dst, padding)
	w.reset(dst[mp3HeaderBytes:])
	w.put(0, 9) // main_data_begin: no bit reservoir
	w.put(0, 5) // private_bits
	w.put(0, 4) // scfsi
	for g := range gr {
		w.put(uint32(gr[g].part23Length()), 12)
		w.put(0, 9) // big_values
		w.put(uint32(gr[g].globalGain), 8)
		w.put(mp3ScalefacCompress, 4)
		w.put(0, 1)  // window_switching_flag
		w.put(0, 15) // table_select[3]
		w.put(0, 4)  // region0_count
		w.put(0, 3)  // region1_count
		w.put(0, 1)  // preflag
		w.put(1, 1)  // scalefac_scale
		w.put(1, 1)  // count1table_select: table B
	}
	for g := range gr {
		for b := 0; b < 21; b++ {
			if b <= 10 {
				w.put(uint32(gr[g].sf[b]), mp3Slen1)
			} else {
				w.put(uint32(gr[g].sf[b]), mp3Slen2)
			}
		}
		q := &gr[g].q
		for i := 0; i < gr[g].count1End; i += 4 {
			var code uint32
			for j := 0; j < 4; j++ {
				if q[i+j] != 0 {
					code |= 8 >> j
				}
			}
			w.put(15-code, 4) // table B: the complement of vwxy
			for j := 0; j < 4; j++ {
				switch q[i+j] {
				case 1:
					w.put(0, 1)
				case -1:
					w.put(1, 1)
				}
			}
		}
	}
}

// putHeader writes the 4-byte frame header: MPEG-1 Layer III, no CRC,
// 128 kbit/s, 44.1 kHz, mono, original.
func putHeader(dst []byte, padding int) {
	h := uint32(0x7FF)<<21 | 3<<19 | 1<<17 | 1<<16 | mp3BitrateIndex<<12 | 0<<10 |
		uint32(padding)<<9 | 3<<6 | 1<<2
	binary.BigEndian.PutUint32(dst, h)
}

// writeXing fills the first frame with an Info header (the Xing layout
// for CBR) counting frames audio frames and total bytes (the Info frame's
// too), with a linear seek table, and no encoder tag.
func writeXing(dst []byte, frames, total int) {
	clear(dst)
	putHeader(dst, 0)
	p := mp3HeaderBytes + mp3SideInfoBytes
	copy(dst[p:], "Info")
	binary.BigEndian.PutUint32(dst[p+4:], 0x0F) // frames, bytes, TOC, quality
	binary.BigEndian.PutUint32(dst[p+8:], uint32(frames))
	binary.BigEndian.PutUint32(dst[p+12:], uint32(total))
	for i := 0; i < 100; i++ { // linear seek table: this is CBR
		dst[p+16+i] = byte(i * 256 / 100)
	}
	binary.BigEndian.PutUint32(dst[p+116:], 0) // quality
}

// writeInfoFrame fills the first frame with an Info header (Xing layout for CBR)
// followed by a LAME-layout tag carrying the encoder delay and padding.
// audio is the bytes of the audio frames, for the tag's music CRC.
func writeInfoFrame(dst []byte, frames, total, samples int, audio []byte) {
	writeXing(dst, frames, total)
	p := mp3HeaderBytes + mp3SideInfoBytes
	tag := dst[p+120:]
	copy(tag, "LAMEgnwy0")
	tag[9] = 0x01 // tag revision 0, CBR
	tag[10] = 160 // low-pass: 16 kHz, in units of 100 Hz
	tag[20] = 128 // bit rate, kbit/s
	// LAME's convention: delay + samples + padding = frames*1152, in the
	// encoder's time; decoders add their own 529 samples to both ends.
	delay := mp3Delay - mp3DecoderDelay
	pad := frames*mp3FrameSamples - samples - delay
	tag[21] = byte(delay >> 4)
	tag[22] = byte(delay<<4) | byte(pad>>8)
	tag[23] = byte(pad)
	binary.BigEndian.PutUint32(tag[28:], uint32(total))
	binary.BigEndian.PutUint16(tag[32:], crc16(0, audio))
	crcAt := p + 120 + 34
	binary.BigEndian.PutUint16(dst[crcAt:], crc16(0, dst[:crcAt]))
}

// crc16 is CRC-16/ARC (polynomial 0x8005, reflected), as used by the LAME tag.
func crc16(crc uint16, b []byte) uint16 {
	var table [256]uint16
	for i := range table {
		c := uint16(i)
		for k := 0; k < 8; k++ {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		table[i] = c
	}
	for _, v := range b {
		crc = crc>>8 ^ table[byte(crc)^v]
	}
	return crc
}
