package media

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// lookTool returns the path of ffprobe or ffmpeg (Debian package ffmpeg).
// Without it the test skips, except in CI (CI set), where it fails.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required in CI (scripts/test.sh installs Debian's ffmpeg)", name)
	}
	t.Skipf("%s not on PATH; skipping the external decoder check (apt-get install ffmpeg)", name)
	return ""
}

// TestFFprobe runs ffprobe, when installed, on each kind of output and checks
// the codec, duration and size it reports, and for video the profile and
// the number of frames it decodes.
func TestFFprobe(t *testing.T) {
	ffprobe := lookTool(t, "ffprobe")
	type output struct {
		name    string
		make    func() ([]byte, error)
		codec   string
		profile string
		secs    float64
		w, h    int
	}
	audio := func(kind AudioKind, secs int, format string) func() ([]byte, error) {
		return func() ([]byte, error) {
			b, _, err := Audio(kind, 5, secs, format)
			return b, err
		}
	}
	tests := []output{
		{"music.mp3", audio(Music, 30, "mp3"), "mp3", "", 30, 0, 0},
		{"sfx.mp3", audio(SFX, 3, "mp3"), "mp3", "", 3, 0, 0},
		{"music.wav", audio(Music, 7, "wav"), "pcm_s16le", "", 7, 0, 0},
		{"clip.mp4", func() ([]byte, error) { return Video(5, 4, 640, 360) }, "h264", "Constrained Baseline", 4, 640, 360},
		{"odd.mp4", func() ([]byte, error) { return Video(6, 1, 101, 37) }, "h264", "Constrained Baseline", 1, 102, 38},
		{"hd.mp4", func() ([]byte, error) { return Video(7, 8, 1280, 720) }, "h264", "Constrained Baseline", 8, 1280, 720},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.make()
			if err != nil {
				t.Fatalf("generate %s: %v", tt.name, err)
			}
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ffprobe, "-v", "error", "-count_frames", "-show_entries",
				"format=duration:stream=codec_name,profile,width,height,nb_read_frames,duration", "-of", "json", path).Output()
			if err != nil {
				t.Fatalf("ffprobe %s: %v", tt.name, err)
			}
			var probe struct {
				Streams []struct {
					CodecName string `json:"codec_name"`
					Profile   string `json:"profile"`
					Width     int    `json:"width"`
					Height    int    `json:"height"`
					Frames    string `json:"nb_read_frames"`
					Duration  string `json:"duration"`
				} `json:"streams"`
				Format struct {
					Duration string `json:"duration"`
				} `json:"format"`
			}
			if err := json.Unmarshal(out, &probe); err != nil {
				t.Fatalf("ffprobe output %q: %v", out, err)
			}
			if len(probe.Streams) != 1 {
				t.Fatalf("ffprobe streams = %d; want 1 (%s)", len(probe.Streams), out)
			}
			s := probe.Streams[0]
			if s.CodecName != tt.codec {
				t.Errorf("codec_name = %q; want %q", s.CodecName, tt.codec)
			}
			if s.Width != tt.w || s.Height != tt.h {
				t.Errorf("size = %dx%d; want %dx%d", s.Width, s.Height, tt.w, tt.h)
			}
			if tt.profile != "" && s.Profile != tt.profile {
				t.Errorf("profile = %q; want %q", s.Profile, tt.profile)
			}
			if tt.codec != "h264" {
				d, err := strconv.ParseFloat(probe.Format.Duration, 64)
				if err != nil || math.Abs(d-tt.secs) > 0.1 {
					t.Errorf("duration = %q; want %g ± 0.1", probe.Format.Duration, tt.secs)
				}
				return
			}
			// Video: every frame, and the durations exact.
			if want := strconv.Itoa(int(tt.secs) * FrameRate); s.Frames != want {
				t.Errorf("nb_read_frames = %q; want %q", s.Frames, want)
			}
			for _, d := range []string{probe.Format.Duration, s.Duration} {
				if v, err := strconv.ParseFloat(d, 64); err != nil || v != tt.secs {
					t.Errorf("format and stream durations = %q, %q; want %g exactly", probe.Format.Duration, s.Duration, tt.secs)
					break
				}
			}
		})
	}
}

// TestFFmpegDecode decodes the MP3 with ffmpeg, when installed: it must
// decode without errors to exactly the WAV's length (ffmpeg honours the
// Info tag's delay and padding) and sound like the WAV.
func TestFFmpegDecode(t *testing.T) {
	ffmpeg := lookTool(t, "ffmpeg")
	tests := []struct {
		kind    AudioKind
		seconds int
	}{
		{Music, 1}, {Music, 12}, {SFX, 2}, {SFX, 9},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%ds", tt.kind, tt.seconds), func(t *testing.T) {
			data, _, err := Audio(tt.kind, 21, tt.seconds, "mp3")
			if err != nil {
				t.Fatalf("Audio(mp3) error = %v", err)
			}
			wav, _, err := Audio(tt.kind, 21, tt.seconds, "wav")
			if err != nil {
				t.Fatalf("Audio(wav) error = %v", err)
			}
			path := filepath.Join(dir, "a.mp3")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(ffmpeg, "-nostdin", "-hide_banner", "-v", "error", "-i", path, "-f", "s16le", "-")
			cmd.Stderr = &stderr
			raw, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Fatalf("ffmpeg decode: %v: %s", err, stderr.String())
			}
			got := make([]float64, len(raw)/2)
			for i := range got {
				got[i] = float64(int16(binary.LittleEndian.Uint16(raw[2*i:]))) / 32768
			}
			want := wavSamples(t, wav)
			if len(got) != len(want) {
				t.Fatalf("ffmpeg decoded %d samples; want %d", len(got), len(want))
			}
			if c := correlation(want, got); c < 0.7 {
				t.Errorf("correlation(wav, ffmpeg-decoded mp3) = %.3f; want >= 0.7", c)
			}
		})
	}
}

// TestFFmpegDecodeVideo decodes clips with ffmpeg, when installed: every
// frame must decode without a message on stderr, and, the coding being
// lossless, equal the scene's frame sample for sample (Y, Cb and Cr, the
// padding cropped off). The cases cover cropping on both sides, odd sizes,
// two IDR periods, and a frame one macroblock high.
func TestFFmpegDecodeVideo(t *testing.T) {
	ffmpeg := lookTool(t, "ffmpeg")
	tests := []struct {
		seed          uint64
		seconds, w, h int
	}{
		{31, 1, 16, 16},
		{32, 2, 101, 37},
		{33, 3, 640, 360},
		{34, 1, 4096, 16},
		{35, 2, 1280, 720},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%ds/%dx%d", tt.seconds, tt.w, tt.h), func(t *testing.T) {
			data, err := Video(tt.seed, tt.seconds, tt.w, tt.h)
			if err != nil {
				t.Fatalf("Video() error = %v", err)
			}
			path := filepath.Join(dir, "v.mp4")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(ffmpeg, "-nostdin", "-hide_banner", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-")
			cmd.Stderr = &stderr
			raw, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Fatalf("ffmpeg decode: %v: %s", err, stderr.String())
			}
			w, h := VideoSize(tt.w, tt.h)
			sc := newScene(tt.seed, w, h, tt.seconds*FrameRate)
			size := w*h + 2*(w/2)*(h/2)
			if len(raw) != sc.frames*size {
				t.Fatalf("ffmpeg decoded %d bytes; want %d frames of %dx%d (%d bytes)", len(raw), sc.frames, w, h, sc.frames*size)
			}
			img := sc.newFrame()
			for i := 0; i < sc.frames; i++ {
				sc.draw(img, i)
				got := raw[i*size : (i+1)*size]
				planes := []struct {
					name         string
					want         []byte
					stride, w, h int
				}{
					{"Y", img.Y, img.YStride, w, h},
					{"Cb", img.Cb, img.CStride, w / 2, h / 2},
					{"Cr", img.Cr, img.CStride, w / 2, h / 2},
				}
				for _, p := range planes {
					for y := 0; y < p.h; y++ {
						want := p.want[y*p.stride : y*p.stride+p.w]
						for x := range want {
							if got[x] != want[x] {
								at := x &^ 7
								t.Fatalf("frame %d: %s row %d from column %d decodes to %v; want %v", i, p.name, y, at, got[at:min(at+16, p.w)], want[at:min(at+16, p.w)])
							}
						}
						got = got[p.w:]
					}
				}
			}
		})
	}
}
