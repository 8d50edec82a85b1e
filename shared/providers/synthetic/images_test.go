package synthetic

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"strconv"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
)

func imageModel(t *testing.T) *catalog.Model {
	t.Helper()
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("synthetic-image")
	if !ok {
		t.Fatal("no synthetic-image in the catalog")
	}
	return m
}

// TestImagesExactSize: every catalog size decodes to exactly that size,
// in PNG and JPEG, one image per n.
func TestImagesExactSize(t *testing.T) {
	m := imageModel(t)
	for _, size := range m.Sizes {
		for _, format := range m.Formats {
			t.Run(size+"/"+format, func(t *testing.T) {
				out, err := Images{}.Generate(context.Background(), m, &images.Params{Prompt: "a red fox", N: 2, Size: size, Format: format})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Images) != 2 || out.Size != size {
					t.Fatalf("%d images of %s; want 2 of %s", len(out.Images), out.Size, size)
				}
				for _, img := range out.Images {
					var cfg image.Config
					if format == "png" {
						cfg, err = png.DecodeConfig(bytes.NewReader(img.Data))
					} else {
						cfg, err = jpeg.DecodeConfig(bytes.NewReader(img.Data))
					}
					if err != nil {
						t.Fatalf("decode %s: %v", format, err)
					}
					if got := sizeOf(cfg.Width, cfg.Height); got != size || img.ContentType != images.ContentType(format) {
						t.Errorf("image %s as %s; want %s as %s", got, img.ContentType, size, images.ContentType(format))
					}
				}
			})
		}
	}
}

// TestImagesDeterministic: the same prompt makes the same images; another
// prompt, or another index, visibly different ones (their pixels differ
// a lot, not in a corner).
func TestImagesDeterministic(t *testing.T) {
	m := imageModel(t)
	gen := func(prompt string) []images.Image {
		out, err := Images{}.Generate(context.Background(), m, &images.Params{Prompt: prompt, N: 2, Size: "256x256", Format: "png"})
		if err != nil {
			t.Fatal(err)
		}
		return out.Images
	}
	a, again, b := gen("a red fox"), gen("a red fox"), gen("a blue whale")
	if !bytes.Equal(a[0].Data, again[0].Data) || !bytes.Equal(a[1].Data, again[1].Data) {
		t.Error("the same prompt made different images")
	}
	for _, pair := range [][2][]byte{{a[0].Data, b[0].Data}, {a[0].Data, a[1].Data}} {
		if d := difference(t, pair[0], pair[1]); d < 0.25 {
			t.Errorf("%.0f%% of the pixels differ; want the pictures visibly different", d*100)
		}
	}
}

// difference is the share of pixels of two PNGs of one size that differ
// by more than a little.
func difference(t *testing.T, x, y []byte) float64 {
	t.Helper()
	ix, err := png.Decode(bytes.NewReader(x))
	if err != nil {
		t.Fatal(err)
	}
	iy, err := png.Decode(bytes.NewReader(y))
	if err != nil {
		t.Fatal(err)
	}
	b := ix.Bounds()
	diff := 0
	for py := b.Min.Y; py < b.Max.Y; py++ {
		for px := b.Min.X; px < b.Max.X; px++ {
			r1, g1, b1, _ := ix.At(px, py).RGBA()
			r2, g2, b2, _ := iy.At(px, py).RGBA()
			if d := absDiff(r1, r2) + absDiff(g1, g2) + absDiff(b1, b2); d > 3*0x1000 {
				diff++
			}
		}
	}
	return float64(diff) / float64(b.Dx()*b.Dy())
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

func sizeOf(w, h int) string {
	return strconv.Itoa(w) + "x" + strconv.Itoa(h)
}

// TestImagesFailures: the prompt's fail: triggers, each classified as
// the vendors' failures are; a trigger naming another model is none.
func TestImagesFailures(t *testing.T) {
	m := imageModel(t)
	tests := []struct {
		prompt string
		check  func(err error) bool
	}{
		{"fail: please", func(err error) bool {
			var te *jobs.TransientError
			return errors.As(err, &te) && te.Status == 502
		}},
		{"fail:policy draw it", func(err error) bool {
			var pe *jobs.ProviderError
			return errors.As(err, &pe) && pe.Code == jobs.CodeContentPolicy && pe.Status == 400
		}},
		{"fail:429 busy", func(err error) bool {
			var te *jobs.TransientError
			return errors.As(err, &te) && te.Status == 429
		}},
		{"fail:400 bad", func(err error) bool {
			var pe *jobs.ProviderError
			return errors.As(err, &pe) && pe.Status == 400 && pe.Code == jobs.CodeUpstream
		}},
		{"fail:503@synthetic-image down", func(err error) bool {
			var te *jobs.TransientError
			return errors.As(err, &te) && te.Status == 503
		}},
		{"fail:503@other-model down", func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		_, err := Images{}.Generate(context.Background(), m, &images.Params{Prompt: tt.prompt, N: 1, Size: "256x256", Format: "png"})
		if !tt.check(err) {
			t.Errorf("Generate(%q) = %v", tt.prompt, err)
		}
	}
}

func BenchmarkImagePNG1024(b *testing.B) {
	m := &catalog.Model{ID: "synthetic-image"}
	for b.Loop() {
		if _, err := (Images{}).Generate(context.Background(), m, &images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"}); err != nil {
			b.Fatal(err)
		}
	}
}
