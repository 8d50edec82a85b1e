package synthetic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/genway/genway/shared/jobs"
)

// TestMediaStart checks what the synthetic job provider reports of the
// media it makes: type, extension, size and duration, and that a video's
// odd side is reported as made, one pixel longer.
func TestMediaStart(t *testing.T) {
	tests := []struct {
		name        string
		typ         string
		in          jobs.Input
		contentType string
		ext         string
		w, h        int
		magic       string // the file's first bytes (for MP4, from offset 4)
	}{
		{"music mp3", jobs.TypeMusic, jobs.Input{Prompt: "tune", Duration: 1, Format: "mp3"}, "audio/mpeg", "mp3", 0, 0, "\xff\xfb"},
		{"sfx wav", jobs.TypeSFX, jobs.Input{Prompt: "beep", Duration: 1, Format: "wav"}, "audio/wav", "wav", 0, 0, "RIFF"},
		{"video", jobs.TypeVideo, jobs.Input{Prompt: "ball", Duration: 1, Size: "320x240"}, "video/mp4", "mp4", 320, 240, "ftyp"},
		{"video odd size", jobs.TypeVideo, jobs.Input{Prompt: "ball", Duration: 1, Size: "101x37"}, "video/mp4", "mp4", 102, 38, "ftyp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step, err := Media{}.Start(context.Background(), nil, &jobs.Job{ID: "job_x", Type: tt.typ, Input: tt.in})
			if err != nil {
				t.Fatalf("Start() error = %v", err)
			}
			r := step.Result
			if r == nil {
				t.Fatalf("Start() = %+v; want a result", step)
			}
			data, err := io.ReadAll(r.Body)
			if err != nil || int64(len(data)) != r.Size {
				t.Fatalf("body: %d bytes, %v; Size says %d", len(data), err, r.Size)
			}
			at := 0
			if tt.magic == "ftyp" {
				at = 4
			}
			if r.ContentType != tt.contentType || r.Ext != tt.ext || r.Width != tt.w || r.Height != tt.h || r.Duration != tt.in.Duration ||
				!bytes.HasPrefix(data[at:], []byte(tt.magic)) {
				t.Errorf("result %s .%s %dx%d %d s, starting %q; want %s .%s %dx%d %d s, %q",
					r.ContentType, r.Ext, r.Width, r.Height, r.Duration, data[:min(8, len(data))], tt.contentType, tt.ext, tt.w, tt.h, tt.in.Duration, tt.magic)
			}
		})
	}
	t.Run("fail prefix", func(t *testing.T) {
		_, err := Media{}.Start(context.Background(), nil, &jobs.Job{ID: "job_y", Type: jobs.TypeVideo, Input: jobs.Input{Prompt: "fail: now", Duration: 1, Size: "64x64"}})
		var pe *jobs.ProviderError
		if !errors.As(err, &pe) || pe.Code != jobs.CodeUpstream {
			t.Errorf("Start(fail:) error = %v; want a ProviderError with code %s", err, jobs.CodeUpstream)
		}
	})
}
