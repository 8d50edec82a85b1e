package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
)

// Images is the synthetic image provider (model synthetic-image): each
// image is a picture drawn from the prompt and the image's index, so the
// same request always gets the same images and another prompt visibly
// different ones: a gradient between two colours with a few translucent
// discs and bars, of exactly the requested size, in PNG (image/png) or
// JPEG (image/jpeg). There is no WebP: Go's standard library has no WebP
// encoder, so the catalog lists only png and jpeg.
//
// Failures on request, from the prompt (the chat triggers' syntax; a
// trigger may name the one model it fails, "fail:503@synthetic-image"):
//
//	fail: ...        a 502 from the vendor (retried, then the next candidate)
//	fail:NNN ...     the vendor's status NNN (400-599)
//	fail:policy ...  a refused prompt: content_policy, the vendor's words
//
// Images is safe for concurrent use.
type Images struct{}

var _ images.Provider = Images{}

// Generate implements images.Provider.
func (Images) Generate(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
	if err := imageFailure(strings.TrimSpace(p.Prompt), m.ID); err != nil {
		return nil, err
	}
	w, h, ok := catalog.ParseSize(p.Size)
	if !ok || w*h > 4096*4096 {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Status: http.StatusBadRequest,
			Message: fmt.Sprintf("The synthetic provider cannot draw an image of size %q.", p.Size)}
	}
	out := &images.Output{Size: p.Size}
	for i := range p.N {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var (
			b   bytes.Buffer
			err error
		)
		pic := Picture(Seed("image", p.Prompt, strconv.Itoa(i)), w, h)
		switch p.Format {
		case "png":
			err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, pic)
		case "jpeg":
			err = jpeg.Encode(&b, pic, &jpeg.Options{Quality: 90})
		default:
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Status: http.StatusBadRequest,
				Message: fmt.Sprintf("The synthetic provider does not make %q images.", p.Format)}
		}
		if err != nil {
			return nil, fmt.Errorf("synthetic: encode %s: %w", p.Format, err)
		}
		out.Images = append(out.Images, images.Image{Data: b.Bytes(), ContentType: images.ContentType(p.Format)})
	}
	return out, nil
}

// imageFailure is the failure a prompt asks of model, nil if none.
func imageFailure(prompt, model string) error {
	trigger, only, named, ok := failTrigger(prompt)
	if !ok || (named && only != model) {
		return nil
	}
	msg := "synthetic failure requested by a prompt starting with " + FailPrefix + trigger
	if trigger == "policy" {
		return &jobs.ProviderError{Code: jobs.CodeContentPolicy, Status: http.StatusBadRequest,
			Message: "The synthetic provider refused this prompt (it starts with " + FailPrefix + "policy)."}
	}
	if status, err := strconv.Atoi(trigger); err == nil && len(trigger) == 3 && status >= 400 && status <= 599 {
		return jobs.StatusError("synthetic generate", status, nil, jobs.Refusal{Message: msg})
	}
	return &jobs.TransientError{Status: http.StatusBadGateway, Err: errors.New(msg)}
}

// Picture draws the picture of seed, w x h pixels: a vertical gradient
// between two colours, then six translucent discs and bars, all placed
// and coloured by seed.
func Picture(seed uint64, w, h int) *image.NRGBA {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	top, bottom := randColor(r, 255), randColor(r, 255)
	for y := range h {
		c := mix(top, bottom, y, max(h-1, 1))
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := 0; x < len(row); x += 4 {
			row[x], row[x+1], row[x+2], row[x+3] = c.R, c.G, c.B, 255
		}
	}
	for range 6 {
		c := randColor(r, uint8(120+r.IntN(100)))
		cx, cy := r.IntN(w), r.IntN(h)
		if r.IntN(2) == 0 { // a disc
			rad := max(min(w, h)/8+r.IntN(max(min(w, h)/4, 1)), 1)
			for y := max(cy-rad, 0); y < min(cy+rad, h); y++ {
				for x := max(cx-rad, 0); x < min(cx+rad, w); x++ {
					if dx, dy := x-cx, y-cy; dx*dx+dy*dy <= rad*rad {
						blend(img, x, y, c)
					}
				}
			}
			continue
		}
		bw, bh := max(w/10+r.IntN(max(w/3, 1)), 1), max(h/16+r.IntN(max(h/6, 1)), 1) // a bar
		for y := cy; y < min(cy+bh, h); y++ {
			for x := cx; x < min(cx+bw, w); x++ {
				blend(img, x, y, c)
			}
		}
	}
	return img
}

func randColor(r *rand.Rand, alpha uint8) color.NRGBA {
	return color.NRGBA{R: uint8(r.IntN(256)), G: uint8(r.IntN(256)), B: uint8(r.IntN(256)), A: alpha}
}

// mix is the colour i/n of the way from a to b.
func mix(a, b color.NRGBA, i, n int) color.NRGBA {
	f := func(x, y uint8) uint8 { return uint8((int(x)*(n-i) + int(y)*i) / n) }
	return color.NRGBA{R: f(a.R, b.R), G: f(a.G, b.G), B: f(a.B, b.B), A: 255}
}

// blend paints c (with its alpha) over the opaque pixel at x, y.
func blend(img *image.NRGBA, x, y int, c color.NRGBA) {
	i := img.PixOffset(x, y)
	a := int(c.A)
	for k, v := range [3]uint8{c.R, c.G, c.B} {
		img.Pix[i+k] = uint8((int(v)*a + int(img.Pix[i+k])*(255-a)) / 255)
	}
}
