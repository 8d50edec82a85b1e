package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
)

// The H.264 encoder writes a Constrained Baseline stream (ITU-T H.264,
// profile_idc 66 with constraint_set0 and constraint_set1) that every
// browser's decoder plays, and that is lossless for 4:2:0 8-bit samples.
// Each macroblock takes the first of these codings that reproduces it
// exactly:
//
//   - in a P picture, P_Skip (counted in an mb_skip_run): the previous
//     picture at the vector a skip infers from its neighbours, mostly zero;
//   - in a P picture, P_L0_16x16 with no residual: the previous picture at
//     a zero vector or at one of the displacements the scene says its
//     sliding parts moved by (whole even pixels, so that luma and chroma
//     are copied, never interpolated);
//   - Intra_16x16 with no residual: a 16x16 luma and an 8x8 chroma
//     prediction from its neighbours (flat or row-constant areas: most of
//     the synthetic scene);
//   - I_PCM: the raw samples, 384 bytes (edges that move).
//
// So the decoder's output is exactly the encoder's input, with no transform
// and no entropy coding beyond the header-level syntax: Exp-Golomb codes and
// one CAVLC coeff_token (the empty Intra16x16DCLevel block). The encoder
// tracks each macroblock's vector to predict the next ones' as the decoder
// does (8.4.1). One slice per picture, one reference frame, an IDR picture
// every h264IDRInterval frames, picture order type 2 (output order is
// decoding order), the deblocking filter off, CAVLC. Sizes that are not a
// multiple of 16 are coded as whole macroblocks and cropped (frame_cropping
// in the SPS; the padding repeats the background). The VUI says: square
// pixels, BT.601 (SMPTE 170M) limited-range colour, the frame rate, and no
// frame reordering.
//
// Level: the lowest whose frame size and macroblock rate fit. I_PCM
// macroblocks exceed what the levels allow for bit rate and compression
// ratio (MaxBR, MinCR); decoders do not enforce those limits.

// h264IDRInterval is the distance in frames between IDR pictures: the
// random-access points that seeking starts decoding from.
const h264IDRInterval = 2 * FrameRate

// log2MaxFrameNum is the bit length of frame_num, which counts the frames
// since the last IDR picture: it never wraps, as h264IDRInterval is below
// 1<<log2MaxFrameNum.
const log2MaxFrameNum = 8

// NAL unit types and headers (forbidden_zero_bit, nal_ref_idc, type).
const (
	nalSlice    = 0x40 | 1 // non-IDR slice, nal_ref_idc 2
	nalSliceIDR = 0x60 | 5 // IDR slice, nal_ref_idc 3
	nalSPS      = 0x60 | 7
	nalPPS      = 0x60 | 8
)

// Macroblock types (Table 7-11): in P slices the intra types follow the
// five P types.
const (
	mbTypeI16x16 = 1 // + prediction mode, with no coded residual
	mbTypeIPCM   = 25
	mbTypePIntra = 5
)

// Intra prediction modes: Intra_16x16 luma (8.3.3) and chroma (8.3.4),
// numbered as the syntax numbers them; the plane modes are not used.
const (
	predVertical   = 0
	predHorizontal = 1
	predDC         = 2

	chromaDC         = 0
	chromaHorizontal = 1
	chromaVertical   = 2
)

// appendNAL appends one NAL unit in MP4 form: a 4-byte big-endian length,
// the header byte, and the RBSP with emulation prevention bytes (0x03
// after two zero bytes that a byte <= 3 would follow).
func appendNAL(dst []byte, header byte, rbsp []byte) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0, header)
	zeros := 0
	for len(rbsp) > 0 {
		if zeros < 2 {
			// Copy up to the next zero byte in one go.
			i := bytes.IndexByte(rbsp, 0)
			if i < 0 {
				dst = append(dst, rbsp...)
				break
			}
			if i > 0 {
				dst = append(dst, rbsp[:i]...)
				rbsp = rbsp[i:]
				zeros = 0
				continue
			}
		}
		c := rbsp[0]
		if zeros == 2 && c <= 3 {
			dst = append(dst, 3)
			zeros = 0
		}
		dst = append(dst, c)
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
		rbsp = rbsp[1:]
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// h264Level is one row of Table A-1: the level_idc and the limits that
// decide it here.
type h264Level struct {
	idc    byte
	maxFS  int // macroblocks per frame
	maxMBS int // macroblocks per second
}

var h264Levels = []h264Level{
	{10, 99, 1485}, {11, 396, 3000}, {12, 396, 6000}, {13, 396, 11880},
	{20, 396, 11880}, {21, 792, 19800}, {22, 1620, 20250},
	{30, 1620, 40500}, {31, 3600, 108000}, {32, 5120, 216000},
	{40, 8192, 245760}, {41, 8192, 245760}, {42, 8704, 522240},
	{50, 22080, 589824}, {51, 36864, 983040}, {52, 36864, 2073600},
	{60, 139264, 4177920}, {61, 139264, 8355840}, {62, 139264, 16711680},
}

// levelFor returns the lowest level whose frame size (in all, and per
// side: at most sqrt(8*MaxFS) macroblocks) and macroblock rate fit.
func levelFor(mbw, mbh, fps int) (byte, error) {
	fs := mbw * mbh
	for _, l := range h264Levels {
		if fs <= l.maxFS && mbw*mbw <= 8*l.maxFS && mbh*mbh <= 8*l.maxFS && fs*fps <= l.maxMBS {
			return l.idc, nil
		}
	}
	return 0, fmt.Errorf("media: %dx%d macroblocks at %d fps exceed every H.264 level", mbw, mbh, fps)
}

// h264Encoder holds a stream's parameters; it is read-only once built, so
// frames can be encoded in parallel.
type h264Encoder struct {
	w, h     int // the picture's size (even), cropped from
	mbw, mbh int // its size in macroblocks
	fps      int
	level    byte
	sps, pps []byte // RBSPs
}

// newH264Encoder returns an encoder for w x h pictures (both even) at fps.
func newH264Encoder(w, h, fps int) (*h264Encoder, error) {
	if w%2 != 0 || h%2 != 0 || w <= 0 || h <= 0 {
		return nil, fmt.Errorf("media: H.264 4:2:0 size %dx%d is not even", w, h)
	}
	e := &h264Encoder{w: w, h: h, mbw: (w + 15) / 16, mbh: (h + 15) / 16, fps: fps}
	var err error
	if e.level, err = levelFor(e.mbw, e.mbh, fps); err != nil {
		return nil, err
	}
	e.sps = e.spsRBSP()
	e.pps = ppsRBSP()
	return e, nil
}

// spsRBSP returns the sequence parameter set (7.3.2.1.1) with its VUI
// (E.1.1).
func (e *h264Encoder) spsRBSP() []byte {
	var w bitWriter
	w.resetGrow(nil)
	w.put(66, 8)   // profile_idc: Baseline
	w.put(0xC0, 8) // constraint_set0_flag and constraint_set1_flag: Constrained Baseline
	w.put(uint32(e.level), 8)
	w.ue(0) // seq_parameter_set_id
	w.ue(log2MaxFrameNum - 4)
	w.ue(2)     // pic_order_cnt_type: output order is decoding order
	w.ue(1)     // max_num_ref_frames
	w.put(0, 1) // gaps_in_frame_num_value_allowed_flag
	w.ue(uint32(e.mbw - 1))
	w.ue(uint32(e.mbh - 1)) // pic_height_in_map_units_minus1
	w.put(1, 1)             // frame_mbs_only_flag
	w.put(1, 1)             // direct_8x8_inference_flag
	crop := e.mbw*16 != e.w || e.mbh*16 != e.h
	w.flag(crop)
	if crop { // in units of 2 samples (4:2:0)
		w.ue(0)
		w.ue(uint32(e.mbw*16-e.w) / 2)
		w.ue(0)
		w.ue(uint32(e.mbh*16-e.h) / 2)
	}
	w.put(1, 1) // vui_parameters_present_flag
	w.put(1, 1) // aspect_ratio_info_present_flag
	w.put(1, 8) // aspect_ratio_idc: 1:1
	w.put(0, 1) // overscan_info_present_flag
	w.put(1, 1) // video_signal_type_present_flag
	w.put(5, 3) // video_format: unspecified
	w.put(0, 1) // video_full_range_flag: limited range
	w.put(1, 1) // colour_description_present_flag
	w.put(6, 8) // colour_primaries: SMPTE 170M
	w.put(6, 8) // transfer_characteristics: SMPTE 170M
	w.put(6, 8) // matrix_coefficients: SMPTE 170M (BT.601)
	w.put(0, 1) // chroma_loc_info_present_flag
	w.put(1, 1) // timing_info_present_flag
	w.put(1, 32)
	w.put(uint32(2*e.fps), 32) // time_scale: two ticks per frame
	w.put(1, 1)                // fixed_frame_rate_flag
	w.put(0, 1)                // nal_hrd_parameters_present_flag
	w.put(0, 1)                // vcl_hrd_parameters_present_flag
	w.put(0, 1)                // pic_struct_present_flag
	w.put(1, 1)                // bitstream_restriction_flag
	w.put(1, 1)                // motion_vectors_over_pic_boundaries_flag
	w.ue(0)                    // max_bytes_per_pic_denom: no limit
	w.ue(0)                    // max_bits_per_mb_denom: no limit
	w.ue(15)                   // log2_max_mv_length_horizontal
	w.ue(15)                   // log2_max_mv_length_vertical
	w.ue(0)                    // max_num_reorder_frames: none, so frames are shown as decoded
	w.ue(1)                    // max_dec_frame_buffering
	w.trailing()
	return w.bytes()
}

// ppsRBSP returns the picture parameter set (7.3.2.2).
func ppsRBSP() []byte {
	var w bitWriter
	w.resetGrow(nil)
	w.ue(0)     // pic_parameter_set_id
	w.ue(0)     // seq_parameter_set_id
	w.put(0, 1) // entropy_coding_mode_flag: CAVLC
	w.put(0, 1) // bottom_field_pic_order_in_frame_present_flag
	w.ue(0)     // num_slice_groups_minus1
	w.ue(0)     // num_ref_idx_l0_default_active_minus1
	w.ue(0)     // num_ref_idx_l1_default_active_minus1
	w.put(0, 1) // weighted_pred_flag
	w.put(0, 2) // weighted_bipred_idc
	w.se(0)     // pic_init_qp_minus26
	w.se(0)     // pic_init_qs_minus26
	w.se(0)     // chroma_qp_index_offset
	w.put(1, 1) // deblocking_filter_control_present_flag: slices turn it off
	w.put(0, 1) // constrained_intra_pred_flag
	w.put(0, 1) // redundant_pic_cnt_present_flag
	w.trailing()
	return w.bytes()
}

// avcC returns the AVCDecoderConfigurationRecord (ISO/IEC 14496-15) that
// carries the parameter sets in the MP4 sample entry.
func (e *h264Encoder) avcC() []byte {
	sps := appendNAL(nil, nalSPS, e.sps)[4:]
	pps := appendNAL(nil, nalPPS, e.pps)[4:]
	b := []byte{1, 66, 0xC0, e.level, 0xFF, 0xE1} // version, profile, constraints, level, 4-byte lengths, 1 SPS
	b = binary.BigEndian.AppendUint16(b, uint16(len(sps)))
	b = append(b, sps...)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(pps)))
	return append(b, pps...)
}

// isIDR reports whether frame i is an IDR picture.
func isIDR(i int) bool { return i%h264IDRInterval == 0 }

// encodeFrame appends frame i (cur) as one MP4 sample: a length-prefixed
// slice NAL unit. prev is frame i-1, ignored for an IDR frame. Both are
// padded frames of mbw*16 x mbh*16 (see scene.newFrame). motion lists
// displacements, in whole even pixels, that parts of prev may have moved
// by to make cur (the scene knows them: its sweeping bar's); a P frame
// tries them on its changed macroblocks. scratch is reused between calls.
func (e *h264Encoder) encodeFrame(dst []byte, cur, prev *image.YCbCr, i int, motion []image.Point, s *h264Scratch) []byte {
	idr := isIDR(i)
	if n := e.mbw * e.mbh; len(s.mbs) != n {
		s.mbs = make([]mbInfo, n)
	}
	w := &s.bits
	w.resetGrow(w.buf)
	// Slice header (7.3.3).
	w.ue(0) // first_mb_in_slice
	if idr {
		w.ue(7) // slice_type: I, as every slice of the picture
	} else {
		w.ue(5) // slice_type: P, as every slice of the picture
	}
	w.ue(0) // pic_parameter_set_id
	w.put(uint32(i%h264IDRInterval), log2MaxFrameNum)
	if idr {
		w.ue(uint32(i / h264IDRInterval % 65536)) // idr_pic_id: consecutive IDRs differ
	} else {
		w.put(0, 1) // num_ref_idx_active_override_flag
		w.put(0, 1) // ref_pic_list_modification_flag_l0
	}
	if idr {
		w.put(0, 1) // no_output_of_prior_pics_flag
		w.put(0, 1) // long_term_reference_flag
	} else {
		w.put(0, 1) // adaptive_ref_pic_marking_mode_flag: sliding window
	}
	w.se(0) // slice_qp_delta
	w.ue(1) // disable_deblocking_filter_idc: off

	// The motion vectors a P macroblock may take, in quarter samples.
	s.cands = append(s.cands[:0], mv{})
	for _, d := range motion {
		if d.X%2 == 0 && d.Y%2 == 0 && d != (image.Point{}) {
			s.cands = append(s.cands, mv{-4 * d.X, -4 * d.Y}) // a vector points back to where the samples were
		}
	}

	// Slice data (7.3.4), CAVLC.
	mbBase := uint32(0)
	if !idr {
		mbBase = mbTypePIntra
	}
	skipRun := uint32(0)
	for my := 0; my < e.mbh; my++ {
		for mx := 0; mx < e.mbw; mx++ {
			mb := &s.mbs[my*e.mbw+mx]
			if !idr {
				pred, skip := e.mvPred(s.mbs, mx, my)
				if e.interMatches(cur, prev, mx, my, skip) {
					*mb = mbInfo{mv: skip}
					skipRun++
					continue
				}
				w.ue(skipRun)
				skipRun = 0
				coded := false
				for _, c := range s.cands {
					if e.interMatches(cur, prev, mx, my, c) {
						w.ue(0) // mb_type P_L0_16x16
						w.se(int32(c.x - pred.x))
						w.se(int32(c.y - pred.y))
						w.ue(0) // coded_block_pattern 0: no residual (codeNum 0, inter)
						*mb = mbInfo{mv: c}
						coded = true
						break
					}
				}
				if coded {
					continue
				}
			}
			luma, chroma, ok := exactIntra16x16(cur, mx, my, &s.pred)
			if !ok {
				*mb = mbInfo{intra: true, pcm: true}
				w.ue(mbBase + mbTypeIPCM)
				w.align() // pcm_alignment_zero_bit
				appendMB(w, cur, mx, my)
				continue
			}
			*mb = mbInfo{intra: true}
			w.ue(mbBase + mbTypeI16x16 + uint32(luma))
			w.ue(uint32(chroma)) // intra_chroma_pred_mode
			w.se(0)              // mb_qp_delta
			// The Intra16x16DCLevel block, empty: coeff_token with
			// TotalCoeff 0 and TrailingOnes 0 for this nC (Table 9-5).
			switch nC := e.nC(s.mbs, mx, my); {
			case nC < 2:
				w.put(1, 1)
			case nC < 4:
				w.put(3, 2)
			case nC < 8:
				w.put(15, 4)
			default:
				w.put(3, 6)
			}
		}
	}
	if skipRun > 0 {
		w.ue(skipRun)
	}
	w.trailing()
	header := byte(nalSlice)
	if idr {
		header = nalSliceIDR
	}
	return appendNAL(dst, header, w.bytes())
}

// mv is a luma motion vector in quarter samples.
type mv struct{ x, y int }

// mbInfo is what later macroblocks of the picture need of a coded one.
type mbInfo struct {
	intra bool // intra-coded: no motion vector (refIdx -1)
	pcm   bool // I_PCM
	mv    mv   // an inter macroblock's vector (refIdx 0, the one reference)
}

// h264Scratch is one worker's reusable buffers.
type h264Scratch struct {
	bits  bitWriter // the slice's RBSP
	mbs   []mbInfo  // the current picture's macroblocks, as coded
	cands []mv
	pred  [256]byte
}

// mvPred returns the motion vector prediction of the 16x16 macroblock
// (mx, my) of a P picture (8.4.1.3), and the vector a P_Skip macroblock
// there takes (8.4.1.1), from the macroblocks coded before it: A on the
// left, B above, C above right (or D above left where C is outside the
// picture).
func (e *h264Encoder) mvPred(mbs []mbInfo, mx, my int) (pred, skip mv) {
	type neighbour struct {
		avail bool
		ref   int // 0, or -1 if unavailable or intra
		mv    mv
	}
	at := func(x, y int) neighbour {
		if x < 0 || y < 0 || x >= e.mbw {
			return neighbour{ref: -1}
		}
		m := mbs[y*e.mbw+x]
		if m.intra {
			return neighbour{avail: true, ref: -1}
		}
		return neighbour{avail: true, mv: m.mv}
	}
	a, b, c := at(mx-1, my), at(mx, my-1), at(mx+1, my-1)
	if !c.avail {
		c = at(mx-1, my-1)
	}
	if !b.avail && !c.avail && a.avail {
		b, c = a, a
	}
	switch {
	case a.ref == 0 && b.ref != 0 && c.ref != 0:
		pred = a.mv
	case a.ref != 0 && b.ref == 0 && c.ref != 0:
		pred = b.mv
	case a.ref != 0 && b.ref != 0 && c.ref == 0:
		pred = c.mv
	default:
		pred = mv{median(a.mv.x, b.mv.x, c.mv.x), median(a.mv.y, b.mv.y, c.mv.y)}
	}
	// P_Skip: a zero vector at the picture's top or left edge, or next to
	// a zero-vector inter macroblock on the left or above.
	a, b = at(mx-1, my), at(mx, my-1)
	if !a.avail || !b.avail || a.ref == 0 && a.mv == (mv{}) || b.ref == 0 && b.mv == (mv{}) {
		return pred, mv{}
	}
	return pred, pred
}

func median(a, b, c int) int {
	return max(min(a, b), min(max(a, b), c))
}

// interMatches reports whether the inter prediction of macroblock (mx, my)
// from ref with vector v, with no residual, is exactly cur's macroblock.
// Only vectors of whole even luma samples are tried (others interpolate
// luma or chroma), and report false. Samples outside ref repeat its edge
// samples, as the decoder's do (8.4.2.2).
func (e *h264Encoder) interMatches(cur, ref *image.YCbCr, mx, my int, v mv) bool {
	if v == (mv{}) {
		return sameMB(cur, ref, mx, my)
	}
	if v.x%8 != 0 || v.y%8 != 0 {
		return false
	}
	return blockMoved(cur.Y, ref.Y, cur.YStride, e.mbw*16, e.mbh*16, mx*16, my*16, 16, v.x/4, v.y/4) &&
		blockMoved(cur.Cb, ref.Cb, cur.CStride, e.mbw*8, e.mbh*8, mx*8, my*8, 8, v.x/8, v.y/8) &&
		blockMoved(cur.Cr, ref.Cr, cur.CStride, e.mbw*8, e.mbh*8, mx*8, my*8, 8, v.x/8, v.y/8)
}

// blockMoved reports whether the n x n block of cur at (x0, y0) equals the
// block of ref at (x0+dx, y0+dy), ref's samples outside its w x h repeating
// its edge.
func blockMoved(cur, ref []byte, stride, w, h, x0, y0, n, dx, dy int) bool {
	inside := x0+dx >= 0 && x0+dx+n <= w
	for y := 0; y < n; y++ {
		c := cur[(y0+y)*stride+x0 : (y0+y)*stride+x0+n]
		row := ref[min(max(y0+y+dy, 0), h-1)*stride:]
		if inside {
			if !bytes.Equal(c, row[x0+dx:x0+dx+n]) {
				return false
			}
			continue
		}
		for x := 0; x < n; x++ {
			if c[x] != row[min(max(x0+x+dx, 0), w-1)] {
				return false
			}
		}
	}
	return true
}

// nC is the CAVLC table selector of a macroblock's first luma block
// (9.2.1): the mean of the coefficient counts of the blocks left of and
// above it. Here a neighbouring block holds 16 coefficients if its
// macroblock is I_PCM and none otherwise (skipped, inter or Intra_16x16
// with no residual).
func (e *h264Encoder) nC(mbs []mbInfo, mx, my int) int {
	count := func(addr int) int {
		if mbs[addr].pcm {
			return 16
		}
		return 0
	}
	switch {
	case mx > 0 && my > 0:
		return (count(my*e.mbw+mx-1) + count((my-1)*e.mbw+mx) + 1) >> 1
	case mx > 0:
		return count(my*e.mbw + mx - 1)
	case my > 0:
		return count((my-1)*e.mbw + mx)
	}
	return 0
}

// sameMB reports whether macroblock (mx, my) is the same in a and b.
func sameMB(a, b *image.YCbCr, mx, my int) bool {
	for y := 0; y < 16; y++ {
		o := (my*16+y)*a.YStride + mx*16
		if !bytes.Equal(a.Y[o:o+16], b.Y[o:o+16]) {
			return false
		}
	}
	for y := 0; y < 8; y++ {
		o := (my*8+y)*a.CStride + mx*8
		if !bytes.Equal(a.Cb[o:o+8], b.Cb[o:o+8]) || !bytes.Equal(a.Cr[o:o+8], b.Cr[o:o+8]) {
			return false
		}
	}
	return true
}

// appendMB writes the samples of macroblock (mx, my) as I_PCM does: 256
// luma samples in raster order, then 64 Cb, then 64 Cr.
func appendMB(w *bitWriter, f *image.YCbCr, mx, my int) {
	for y := 0; y < 16; y++ {
		o := (my*16+y)*f.YStride + mx*16
		w.raw(f.Y[o : o+16])
	}
	for _, p := range [][]byte{f.Cb, f.Cr} {
		for y := 0; y < 8; y++ {
			o := (my*8+y)*f.CStride + mx*8
			w.raw(p[o : o+8])
		}
	}
}

// exactIntra16x16 returns an Intra_16x16 luma prediction mode and a chroma
// prediction mode that reproduce macroblock (mx, my) of f exactly from its
// already decoded neighbours (f's own samples: the coding is lossless), and
// whether there are such modes. It tries the cheapest codes first.
//
// Only the modes that fit the synthetic scene are tried: luma vertical and
// horizontal (its areas are flat or constant along rows), chroma DC,
// horizontal and vertical. DC and plane luma prediction, and plane chroma
// prediction, never reproduced one of its macroblocks exactly.
func exactIntra16x16(f *image.YCbCr, mx, my int, pred *[256]byte) (luma, chroma int, ok bool) {
	luma = -1
	for _, m := range []int{predVertical, predHorizontal} {
		if predictBlock(pred[:256], f.Y, f.YStride, mx*16, my*16, 16, m) && matches(pred[:256], f.Y, f.YStride, mx*16, my*16, 16) {
			luma = m
			break
		}
	}
	if luma < 0 {
		return 0, 0, false
	}
	for _, m := range []int{chromaDC, chromaHorizontal, chromaVertical} {
		pm := [...]int{chromaDC: predDC, chromaHorizontal: predHorizontal, chromaVertical: predVertical}[m]
		if predictBlock(pred[:64], f.Cb, f.CStride, mx*8, my*8, 8, pm) && matches(pred[:64], f.Cb, f.CStride, mx*8, my*8, 8) &&
			predictBlock(pred[:64], f.Cr, f.CStride, mx*8, my*8, 8, pm) && matches(pred[:64], f.Cr, f.CStride, mx*8, my*8, 8) {
			return luma, m, true
		}
	}
	return 0, 0, false
}

// matches reports whether the n x n block of plane at (x0, y0) equals pred.
func matches(pred, plane []byte, stride, x0, y0, n int) bool {
	for y := 0; y < n; y++ {
		o := (y0+y)*stride + x0
		if !bytes.Equal(pred[y*n:y*n+n], plane[o:o+n]) {
			return false
		}
	}
	return true
}

// predictBlock writes into pred the n x n intra prediction of the block at
// (x0, y0) of plane: the Intra_16x16 luma vertical or horizontal
// prediction (8.3.3.1-2, n 16), or the chroma DC, horizontal or vertical
// one (8.3.4.1-3 and 8.3.4.5-6, n 8, 4:2:0), mode being predVertical,
// predHorizontal or predDC (chroma only). The neighbours are available when
// the block is not on the picture's top or left edge (one slice per
// picture). It returns false if the mode needs a neighbour that is not
// available.
func predictBlock(pred, plane []byte, stride, x0, y0, n, mode int) bool {
	top, left := y0 > 0, x0 > 0
	switch mode {
	case predVertical:
		if !top {
			return false
		}
		for y := 0; y < n; y++ {
			copy(pred[y*n:y*n+n], plane[(y0-1)*stride+x0:])
		}
	case predHorizontal:
		if !left {
			return false
		}
		for y := 0; y < n; y++ {
			v := plane[(y0+y)*stride+x0-1]
			for x := 0; x < n; x++ {
				pred[y*n+x] = v
			}
		}
	case predDC:
		// Chroma DC is per 4x4 block: the corner blocks average the
		// samples above and on the left, the others prefer their own
		// side: above for the top row, left for the left column.
		for yo := 0; yo < n; yo += 4 {
			for xo := 0; xo < n; xo += 4 {
				useTop, useLeft := top, left
				switch {
				case xo > 0 && yo == 0:
					useLeft = left && !top
				case xo == 0 && yo > 0:
					useTop = top && !left
				}
				sum, count := 0, 0
				if useTop {
					for x := 0; x < 4; x++ {
						sum += int(plane[(y0-1)*stride+x0+xo+x])
					}
					count += 4
				}
				if useLeft {
					for y := 0; y < 4; y++ {
						sum += int(plane[(y0+yo+y)*stride+x0-1])
					}
					count += 4
				}
				dc := byte(128)
				if count > 0 {
					dc = byte((sum + count/2) / count)
				}
				for y := yo; y < yo+4; y++ {
					for x := xo; x < xo+4; x++ {
						pred[y*n+x] = dc
					}
				}
			}
		}
	default:
		return false
	}
	return true
}
