package media

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"math"
	"runtime"
	"sync"
)

// FrameRate is the video frame rate in frames per second. A clip of s seconds
// has exactly FrameRate*s frames, each lasting 1/FrameRate s.
const FrameRate = 12

// Video synthesises a clip of seconds at width x height pixels: a ball
// bouncing over a seed-coloured gradient, a bar sweeping across once per
// clip, and the frame number drawn as a row of binary blocks. It returns an
// MP4 file (content type ContentTypeMP4) with one H.264 track (Constrained
// Baseline, lossless: see h264.go) of FrameRate*seconds frames whose movie
// and track durations are exactly seconds, playable in every browser. An
// IDR frame (a sync sample) starts every two seconds.
//
// H.264 codes 4:2:0 pictures, whose sides are even: the clip's size is
// VideoSize(width, height), one pixel wider or taller than asked if a side
// is odd.
//
// Frames are encoded in parallel (one run of frames per CPU); memory is
// about twice the output size plus two frame buffers per worker. The error
// wraps ErrInvalidArgument if seconds is outside [1, MaxVideoSeconds] or a
// side is outside [MinVideoSize, MaxVideoSize].
func Video(seed uint64, seconds, width, height int) ([]byte, error) {
	if seconds < 1 || seconds > MaxVideoSeconds {
		return nil, fmt.Errorf("media: video duration %d s not in [1, %d]: %w", seconds, MaxVideoSeconds, ErrInvalidArgument)
	}
	if width < MinVideoSize || width > MaxVideoSize || height < MinVideoSize || height > MaxVideoSize {
		return nil, fmt.Errorf("media: video size %dx%d not within %d..%d: %w", width, height, MinVideoSize, MaxVideoSize, ErrInvalidArgument)
	}
	return video(seed, seconds, width, height, runtime.GOMAXPROCS(0))
}

// video is Video with the number of workers: the bytes do not depend on it.
func video(seed uint64, seconds, width, height, workers int) ([]byte, error) {
	width, height = VideoSize(width, height)
	enc, err := newH264Encoder(width, height, FrameRate)
	if err != nil {
		return nil, err
	}
	sc := newScene(seed, width, height, seconds*FrameRate)
	frames := make([][]byte, sc.frames)
	workers = max(1, min(workers, sc.frames))
	var wg sync.WaitGroup
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A P frame codes what changed since the frame before, so each
			// worker takes a run of frames and draws the one before it.
			first, end := wk*sc.frames/workers, (wk+1)*sc.frames/workers
			cur, prev := sc.newFrame(), sc.newFrame()
			if !isIDR(first) {
				sc.draw(prev, first-1)
			}
			var buf []byte
			var scratch h264Scratch
			for i := first; i < end; i++ {
				sc.draw(cur, i)
				buf = enc.encodeFrame(buf[:0], cur, prev, i, []image.Point{sc.motion(i)}, &scratch)
				frames[i] = bytes.Clone(buf)
				cur, prev = prev, cur
			}
		}()
	}
	wg.Wait()
	m := mp4Movie{width: width, height: height, fps: FrameRate, sizes: make([]int, len(frames)), avcC: enc.avcC()}
	total := 0
	for i, f := range frames {
		m.sizes[i] = len(f)
		total += len(f)
		if isIDR(i) {
			m.sync = append(m.sync, i)
		}
	}
	head, err := mp4Header(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+total)
	out = append(out, head...)
	for i := range frames {
		out = append(out, frames[i]...)
		frames[i] = nil
	}
	return out, nil
}

// VideoSize returns the size of the clip Video makes when asked for width
// x height: each odd side rounded up to even.
func VideoSize(width, height int) (int, int) {
	return width + width%2, height + height%2
}

// scene holds what every frame shares: the background planes and the
// seed-derived motion. It is read-only once built.
//
// Frames are w x h pictures padded to whole 16x16 macroblocks (pw x ph),
// the padding being background: the encoder codes the padding and the
// decoder crops it.
type scene struct {
	w, h, frames int
	pw, ph       int    // padded size
	bgY          []byte // background luma, pw*ph
	bgCb, bgCr   []byte // background chroma, (pw/2)*(ph/2)
	ball         yCbCr
	bar          yCbCr
	on, off      yCbCr // frame-counter blocks
	radius       float64
	x0, y0       float64 // ball start, as a fraction of the free range
	vx, vy       float64 // ball speed, free ranges per second (signed)
}

type yCbCr struct{ y, cb, cr uint8 }

// toYCbCr converts c to BT.601 limited ("video") range, the range an H.264
// stream without a full-range flag is shown in: Y in [16, 235], Cb and Cr
// in [16, 240].
func toYCbCr(c color.RGBA) yCbCr {
	y, cb, cr := color.RGBToYCbCr(c.R, c.G, c.B) // BT.601, full range
	chroma := func(v uint8) uint8 {
		d := (int(v) - 128) * 224
		if d < 0 {
			return uint8(128 - (-d+127)/255)
		}
		return uint8(128 + (d+127)/255)
	}
	return yCbCr{uint8(16 + (int(y)*219+127)/255), chroma(cb), chroma(cr)}
}

// hsv returns an opaque colour; h in [0, 1), s and v in [0, 1].
func hsv(h, s, v float64) color.RGBA {
	h = math.Mod(h, 1) * 6
	i := math.Floor(h)
	f := h - i
	p, q, t := v*(1-s), v*(1-s*f), v*(1-s*(1-f))
	var r, g, b float64
	switch int(i) {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return color.RGBA{uint8(r*255 + 0.5), uint8(g*255 + 0.5), uint8(b*255 + 0.5), 255}
}

func newScene(seed uint64, w, h, frames int) *scene {
	r := rng{s: seed}
	hue := r.float()
	sc := &scene{
		w: w, h: h, frames: frames,
		pw: (w + 15) &^ 15, ph: (h + 15) &^ 15,
		ball:   toYCbCr(hsv(hue+0.5, 0.8, 1)),
		bar:    toYCbCr(hsv(hue+0.25, 0.5, 0.95)),
		on:     toYCbCr(color.RGBA{255, 255, 255, 255}),
		off:    toYCbCr(color.RGBA{40, 40, 40, 255}),
		radius: float64(min(w, h)) / 8,
		x0:     r.float(),
		y0:     r.float(),
		vx:     r.between(0.3, 0.8) * float64(1-2*r.intn(2)),
		vy:     r.between(0.4, 1.0) * float64(1-2*r.intn(2)),
	}
	// Background: a vertical gradient from a dark to a lighter shade of the
	// seed's hue. The padding below repeats the last row.
	cw := sc.pw / 2
	sc.bgY = make([]byte, sc.pw*sc.ph)
	sc.bgCb = make([]byte, cw*sc.ph/2)
	sc.bgCr = make([]byte, cw*sc.ph/2)
	for yy := 0; yy < sc.ph; yy++ {
		c := toYCbCr(hsv(hue, 0.6, 0.35+0.4*float64(min(yy, h-1))/float64(h)))
		row := sc.bgY[yy*sc.pw : (yy+1)*sc.pw]
		for x := range row {
			row[x] = c.y
		}
		if yy%2 == 0 {
			cy := yy / 2
			for x := 0; x < cw; x++ {
				sc.bgCb[cy*cw+x] = c.cb
				sc.bgCr[cy*cw+x] = c.cr
			}
		}
	}
	return sc
}

// newFrame returns a frame buffer for draw: pw x ph, 4:2:0.
func (sc *scene) newFrame() *image.YCbCr {
	return image.NewYCbCr(image.Rect(0, 0, sc.pw, sc.ph), image.YCbCrSubsampleRatio420)
}

// bounce maps a position that moves at constant speed to one that reflects
// off both ends of [0, 1].
func bounce(p float64) float64 {
	p = math.Mod(p, 2)
	if p < 0 {
		p += 2
	}
	if p > 1 {
		p = 2 - p
	}
	return p
}

// draw renders frame i into img, which must come from newFrame.
func (sc *scene) draw(img *image.YCbCr, i int) {
	copy(img.Y, sc.bgY)
	copy(img.Cb, sc.bgCb)
	copy(img.Cr, sc.bgCr)
	t := float64(i) / FrameRate
	// The sweeping bar crosses the frame once over the clip.
	barX, barW := sc.barAt(i)
	sc.fillRect(img, barX, 0, barX+barW, sc.h, sc.bar)
	// The ball bounces off the edges.
	rad := sc.radius
	cx := rad + bounce(sc.x0+sc.vx*t)*(float64(sc.w)-2*rad)
	cy := rad + bounce(sc.y0+sc.vy*t)*(float64(sc.h)-2*rad)
	sc.fillCircle(img, cx, cy, rad, sc.ball)
	// The frame number in binary, most significant bit first, as blocks.
	const bitsShown = 12
	block := max(2, min(sc.w/(2*bitsShown+2), sc.h/12))
	for b := 0; b < bitsShown; b++ {
		c := sc.off
		if i>>(bitsShown-1-b)&1 == 1 {
			c = sc.on
		}
		x := block/2 + 2*b*block
		if x+block > sc.w {
			break
		}
		sc.fillRect(img, x, block/2, x+block, block/2+block, c)
	}
}

// barAt returns the sweeping bar's left edge and width in frame i. Both are
// even, so that the bar's edges fall between chroma samples and it moves
// by whole chroma samples: the encoder then codes its moves as motion.
func (sc *scene) barAt(i int) (x, w int) {
	w = max(2, sc.w/40&^1)
	return int(float64(i)/float64(sc.frames)*float64(sc.w-w+1)) &^ 1, w
}

// motion returns how far the parts of the scene that slide (the bar) moved
// from frame i-1 to frame i, for the encoder to try as motion vectors.
func (sc *scene) motion(i int) image.Point {
	a, _ := sc.barAt(i - 1)
	b, _ := sc.barAt(i)
	return image.Pt(b-a, 0)
}

// fillRect paints [x0, x1) x [y0, y1), clipped to the picture (not its
// padding).
func (sc *scene) fillRect(img *image.YCbCr, x0, y0, x1, y1 int, c yCbCr) {
	x0, y0 = max(x0, 0), max(y0, 0)
	x1, y1 = min(x1, sc.w), min(y1, sc.h)
	for y := y0; y < y1; y++ {
		row := img.Y[y*img.YStride:]
		for x := x0; x < x1; x++ {
			row[x] = c.y
		}
	}
	for y := y0 / 2; y < (y1+1)/2; y++ {
		for x := x0 / 2; x < (x1+1)/2; x++ {
			img.Cb[y*img.CStride+x] = c.cb
			img.Cr[y*img.CStride+x] = c.cr
		}
	}
}

// fillCircle paints the disc of radius r centred on (cx, cy), clipped.
func (sc *scene) fillCircle(img *image.YCbCr, cx, cy, r float64, c yCbCr) {
	x0, x1 := max(int(cx-r), 0), min(int(cx+r)+1, sc.w)
	y0, y1 := max(int(cy-r), 0), min(int(cy+r)+1, sc.h)
	r2 := r * r
	for y := y0; y < y1; y++ {
		dy := float64(y) + 0.5 - cy
		row := img.Y[y*img.YStride:]
		for x := x0; x < x1; x++ {
			dx := float64(x) + 0.5 - cx
			if dx*dx+dy*dy <= r2 {
				row[x] = c.y
			}
		}
	}
	for y := y0 / 2; y < (y1+1)/2; y++ {
		dy := float64(2*y) + 1 - cy
		for x := x0 / 2; x < (x1+1)/2; x++ {
			dx := float64(2*x) + 1 - cx
			if dx*dx+dy*dy <= r2 {
				img.Cb[y*img.CStride+x] = c.cb
				img.Cr[y*img.CStride+x] = c.cr
			}
		}
	}
}
