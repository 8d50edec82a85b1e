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

// TestFFprobe runs ffprobe, when installed, on each kind of output and checks
// the codec, duration and size it reports.
func TestFFprobe(t *testing.T) {
	ffprobe, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Skip("ffprobe not on PATH; skipping the external decoder check")
	}
	type output struct {
		name  string
		make  func() ([]byte, error)
		codec string
		secs  float64
		w, h  int
	}
	audio := func(kind AudioKind, secs int, format string) func() ([]byte, error) {
		return func() ([]byte, error) {
			b, _, err := Audio(kind, 5, secs, format)
			return b, err
		}
	}
	tests := []output{
		{"music.mp3", audio(Music, 30, "mp3"), "mp3", 30, 0, 0},
		{"sfx.mp3", audio(SFX, 3, "mp3"), "mp3", 3, 0, 0},
		{"music.wav", audio(Music, 7, "wav"), "pcm_s16le", 7, 0, 0},
		{"clip.mp4", func() ([]byte, error) { return Video(5, 4, 640, 360) }, "mjpeg", 4, 640, 360},
		{"odd.mp4", func() ([]byte, error) { return Video(6, 1, 101, 37) }, "mjpeg", 1, 101, 37},
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
				"format=duration:stream=codec_name,width,height,nb_read_frames", "-of", "json", path).Output()
			if err != nil {
				t.Fatalf("ffprobe %s: %v", tt.name, err)
			}
			var probe struct {
				Streams []struct {
					CodecName string `json:"codec_name"`
					Width     int    `json:"width"`
					Height    int    `json:"height"`
					Frames    string `json:"nb_read_frames"`
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
			if tt.codec == "mjpeg" {
				if want := strconv.Itoa(int(tt.secs) * FrameRate); s.Frames != want {
					t.Errorf("nb_read_frames = %q; want %q", s.Frames, want)
				}
			}
			d, err := strconv.ParseFloat(probe.Format.Duration, 64)
			if err != nil || math.Abs(d-tt.secs) > 0.1 {
				t.Errorf("duration = %q; want %g ± 0.1", probe.Format.Duration, tt.secs)
			}
		})
	}
}

// TestFFmpegDecode decodes the MP3 with ffmpeg, when installed: it must
// decode without errors to exactly the WAV's length (ffmpeg honours the
// Info tag's delay and padding) and sound like the WAV.
func TestFFmpegDecode(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not on PATH; skipping the external decoder check")
	}
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
