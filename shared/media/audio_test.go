package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	mp3 "github.com/hajimehoshi/go-mp3"
)

// decodeMP3 decodes b with go-mp3 and returns the left channel (the stream is
// mono; go-mp3 always outputs stereo) as floats in [-1, 1).
func decodeMP3(t *testing.T, b []byte) []float64 {
	t.Helper()
	d, err := mp3.NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("mp3.NewDecoder: %v", err)
	}
	if d.SampleRate() != SampleRate {
		t.Fatalf("SampleRate() = %d; want %d", d.SampleRate(), SampleRate)
	}
	raw, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decode mp3: %v", err)
	}
	out := make([]float64, len(raw)/4)
	for i := range out {
		out[i] = float64(int16(binary.LittleEndian.Uint16(raw[4*i:]))) / 32768
	}
	return out
}

func rms(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s / float64(len(x)))
}

// correlation returns the normalised correlation of a and b (same length).
func correlation(a, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * b[i]
		aa += a[i] * a[i]
		bb += b[i] * b[i]
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// wavSamples parses a canonical 44-byte-header WAV file as written by
// encodeWAV and returns its samples; it fails the test on any header field
// that is not PCM, mono, 16-bit, SampleRate.
func wavSamples(t *testing.T, b []byte) []float64 {
	t.Helper()
	if len(b) < wavHeaderBytes {
		t.Fatalf("wav of %d bytes; want at least %d", len(b), wavHeaderBytes)
	}
	le := binary.LittleEndian
	checks := []struct {
		name      string
		got, want any
	}{
		{"RIFF", string(b[0:4]), "RIFF"},
		{"RIFF size", le.Uint32(b[4:]), uint32(len(b) - 8)},
		{"WAVE", string(b[8:12]), "WAVE"},
		{"fmt", string(b[12:16]), "fmt "},
		{"fmt size", le.Uint32(b[16:]), uint32(16)},
		{"format", le.Uint16(b[20:]), uint16(1)},
		{"channels", le.Uint16(b[22:]), uint16(1)},
		{"sample rate", le.Uint32(b[24:]), uint32(SampleRate)},
		{"byte rate", le.Uint32(b[28:]), uint32(2 * SampleRate)},
		{"block align", le.Uint16(b[32:]), uint16(2)},
		{"bits", le.Uint16(b[34:]), uint16(16)},
		{"data", string(b[36:40]), "data"},
		{"data size", le.Uint32(b[40:]), uint32(len(b) - wavHeaderBytes)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("wav %s = %v; want %v", c.name, c.got, c.want)
		}
	}
	out := make([]float64, (len(b)-wavHeaderBytes)/2)
	for i := range out {
		out[i] = float64(int16(le.Uint16(b[wavHeaderBytes+2*i:]))) / 32768
	}
	return out
}

func TestAudioInvalid(t *testing.T) {
	tests := []struct {
		kind    AudioKind
		seconds int
		format  string
	}{
		{Music, 0, "mp3"},
		{Music, -1, "wav"},
		{SFX, MaxAudioSeconds + 1, "mp3"},
		{Music, 5, "ogg"},
		{Music, 5, "MP3"},
		{Music, 5, ""},
		{AudioKind(0), 5, "mp3"},
		{AudioKind(7), 5, "wav"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%v/%d/%q", tt.kind, tt.seconds, tt.format)
		t.Run(name, func(t *testing.T) {
			data, ct, err := Audio(tt.kind, 1, tt.seconds, tt.format)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Audio(%s) error = %v; want ErrInvalidArgument", name, err)
			}
			if data != nil || ct != "" {
				t.Errorf("Audio(%s) = %d bytes, %q; want nothing", name, len(data), ct)
			}
		})
	}
}

func TestAudioWAV(t *testing.T) {
	tests := []struct {
		kind    AudioKind
		seconds int
	}{
		{Music, 1}, {Music, 7}, {SFX, 1}, {SFX, 22},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%ds", tt.kind, tt.seconds), func(t *testing.T) {
			data, ct, err := Audio(tt.kind, 99, tt.seconds, "wav")
			if err != nil {
				t.Fatalf("Audio() error = %v", err)
			}
			if ct != ContentTypeWAV {
				t.Errorf("content type = %q; want %q", ct, ContentTypeWAV)
			}
			pcm := wavSamples(t, data)
			if want := tt.seconds * SampleRate; len(pcm) != want {
				t.Errorf("wav samples = %d; want %d", len(pcm), want)
			}
			if got := rms(pcm); got < 0.05 {
				t.Errorf("wav RMS = %.4f; want >= 0.05 (not silent)", got)
			}
			// Every second has sound: no dead air.
			for s := 0; s+1 <= tt.seconds; s++ {
				if got := rms(pcm[s*SampleRate : (s+1)*SampleRate]); got < 0.01 {
					t.Errorf("wav RMS of second %d = %.4f; want >= 0.01", s, got)
				}
			}
		})
	}
}

// mp3Frame is one parsed frame header.
type mp3Frame struct {
	offset, size int
}

// walkMP3 checks that b is a sequence of MPEG-1 Layer III, 128 kbit/s,
// 44.1 kHz mono frames with nothing between or after them.
func walkMP3(t *testing.T, b []byte) []mp3Frame {
	t.Helper()
	var frames []mp3Frame
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			t.Fatalf("%d trailing bytes at %d", len(b)-off, off)
		}
		h := binary.BigEndian.Uint32(b[off:])
		fields := []struct {
			name      string
			got, want uint32
		}{
			{"sync", h >> 21, 0x7FF},
			{"version", h >> 19 & 3, 3},
			{"layer", h >> 17 & 3, 1},
			{"no CRC", h >> 16 & 1, 1},
			{"bitrate index", h >> 12 & 15, 9},
			{"sample rate index", h >> 10 & 3, 0},
			{"mode", h >> 6 & 3, 3},
		}
		for _, f := range fields {
			if f.got != f.want {
				t.Fatalf("frame %d at %d: %s = %d; want %d", len(frames), off, f.name, f.got, f.want)
			}
		}
		size := 144*128000/44100 + int(h>>9&1)
		if off+size > len(b) {
			t.Fatalf("frame %d at %d: size %d runs past the end (%d)", len(frames), off, size, len(b))
		}
		frames = append(frames, mp3Frame{off, size})
		off += size
	}
	return frames
}

func TestAudioMP3(t *testing.T) {
	tests := []struct {
		kind    AudioKind
		seed    uint64
		seconds int
	}{
		{Music, 1, 1},
		{Music, 2, 5},
		{Music, 0xDEADBEEF, 30},
		{SFX, 3, 1},
		{SFX, 4, 5},
		{SFX, 5, 22},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d/%ds", tt.kind, tt.seed, tt.seconds), func(t *testing.T) {
			data, ct, err := Audio(tt.kind, tt.seed, tt.seconds, "mp3")
			if err != nil {
				t.Fatalf("Audio() error = %v", err)
			}
			if ct != ContentTypeMP3 {
				t.Errorf("content type = %q; want %q", ct, ContentTypeMP3)
			}
			n := tt.seconds * SampleRate
			frames := walkMP3(t, data)
			audioFrames := len(frames) - 1

			// The Info frame: frame and byte counts, and the LAME-layout
			// delay and padding that let gapless decoders return n samples.
			info := data[:frames[0].size]
			p := mp3HeaderBytes + mp3SideInfoBytes
			be := binary.BigEndian
			if got := string(info[p : p+4]); got != "Info" {
				t.Fatalf("Info tag = %q; want %q", got, "Info")
			}
			if got := int(be.Uint32(info[p+8:])); got != audioFrames {
				t.Errorf("Info frames = %d; want %d", got, audioFrames)
			}
			if got := int(be.Uint32(info[p+12:])); got != len(data) {
				t.Errorf("Info bytes = %d; want %d", got, len(data))
			}
			tag := info[p+120:]
			delay := int(tag[21])<<4 | int(tag[22])>>4
			pad := int(tag[22]&15)<<8 | int(tag[23])
			if got := audioFrames*mp3FrameSamples - delay - pad; got != n {
				t.Errorf("gapless length = %d frames*1152 - %d delay - %d padding = %d; want %d",
					audioFrames, delay, pad, got, n)
			}
			if delay+mp3DecoderDelay != mp3Delay || pad < mp3DecoderDelay {
				t.Errorf("Info delay, padding = %d, %d; want %d, >= %d", delay, pad, mp3Delay-mp3DecoderDelay, mp3DecoderDelay)
			}
			if got, want := crc16(0, info[:p+154]), be.Uint16(info[p+154:]); got != want {
				t.Errorf("tag CRC = %#04x; stored %#04x", got, want)
			}

			out := decodeMP3(t, data)
			// go-mp3 is not gapless: it returns the Info frame as silence
			// and the encoder's delay and padding.
			if want := len(frames) * mp3FrameSamples; len(out) != want {
				t.Errorf("decoded samples = %d; want %d (%d frames)", len(out), want, len(frames))
			}
			if len(out) < n || len(out) > n+mp3Delay+2*mp3FrameSamples {
				t.Errorf("decoded samples = %d; want within [%d, %d]", len(out), n, n+mp3Delay+2*mp3FrameSamples)
			}
			start := mp3FrameSamples + mp3Delay
			if len(out) < start+n {
				t.Fatalf("decoded samples = %d; want at least %d", len(out), start+n)
			}
			got := out[start : start+n]
			if r := rms(got); r < 0.03 {
				t.Errorf("decoded RMS = %.4f; want >= 0.03 (not silent)", r)
			}
			// The decoded audio is the synthesised audio, at the same level.
			wav, _, err := Audio(tt.kind, tt.seed, tt.seconds, "wav")
			if err != nil {
				t.Fatalf("Audio(wav) error = %v", err)
			}
			pcm := wavSamples(t, wav)
			c := correlation(pcm, got)
			t.Logf("correlation(wav, decoded mp3) = %.3f, RMS ratio %.3f", c, rms(got)/rms(pcm))
			if c < 0.7 {
				t.Errorf("correlation(wav, decoded mp3) = %.3f; want >= 0.7", c)
			}
			if ratio := rms(got) / rms(pcm); ratio < 0.7 || ratio > 1.4 {
				t.Errorf("RMS(decoded mp3) / RMS(wav) = %.3f; want within [0.7, 1.4]", ratio)
			}
		})
	}
}

// TestMP3Tones checks the encoder itself on pure tones across the band: each
// comes back at the right delay, frequency and level.
func TestMP3Tones(t *testing.T) {
	for _, freq := range []float64{110, 440, 1000, 2500, 6000, 12000} {
		t.Run(fmt.Sprintf("%gHz", freq), func(t *testing.T) {
			n := SampleRate / 2
			pcm := make([]float64, n)
			for i := range pcm {
				pcm[i] = 0.5 * math.Sin(2*math.Pi*freq*float64(i)/SampleRate)
			}
			data, err := encodeMP3(pcm, 2)
			if err != nil {
				t.Fatalf("encodeMP3() error = %v", err)
			}
			out := decodeMP3(t, data)
			start := mp3FrameSamples + mp3Delay
			lo, hi := 2048, n-2048 // away from the onset and the end
			c := correlation(pcm[lo:hi], out[start+lo:start+hi])
			t.Logf("correlation = %.3f, RMS ratio %.3f", c, rms(out[start+lo:start+hi])/rms(pcm[lo:hi]))
			if c < 0.85 {
				t.Errorf("correlation(tone, decoded) = %.3f; want >= 0.85", c)
			}
			if ratio := rms(out[start+lo:start+hi]) / rms(pcm[lo:hi]); ratio < 0.7 || ratio > 1.4 {
				t.Errorf("RMS ratio = %.3f; want within [0.7, 1.4]", ratio)
			}
		})
	}
}

// TestMP3Delay checks mp3Delay on an onset: silence, then a chirp.
func TestMP3Delay(t *testing.T) {
	n := SampleRate / 2
	pcm := make([]float64, n)
	ph := 0.0
	for i := n / 4; i < n; i++ {
		ph += 2 * math.Pi * (200 + 4000*float64(i)/float64(n)) / SampleRate
		pcm[i] = 0.5 * math.Sin(ph)
	}
	data, err := encodeMP3(pcm, 2)
	if err != nil {
		t.Fatalf("encodeMP3() error = %v", err)
	}
	out := decodeMP3(t, data)
	best, bestLag := -2.0, 0
	for lag := 0; lag < 3*mp3FrameSamples; lag++ {
		if lag+n > len(out) {
			break
		}
		if c := correlation(pcm, out[lag:lag+n]); c > best {
			best, bestLag = c, lag
		}
	}
	if want := mp3FrameSamples + mp3Delay; bestLag != want {
		t.Errorf("best lag = %d (correlation %.3f); want %d", bestLag, best, want)
	}
}

func TestAudioDeterministic(t *testing.T) {
	for _, kind := range []AudioKind{Music, SFX} {
		for _, format := range []string{"mp3", "wav"} {
			t.Run(fmt.Sprintf("%v/%s", kind, format), func(t *testing.T) {
				a, _, errA := Audio(kind, 7, 3, format)
				b, _, errB := Audio(kind, 7, 3, format)
				c, _, errC := Audio(kind, 8, 3, format)
				if err := errors.Join(errA, errB, errC); err != nil {
					t.Fatalf("Audio() error = %v", err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("Audio(%v, 7) twice gave different bytes", kind)
				}
				if bytes.Equal(a, c) {
					t.Errorf("Audio(%v, 7) = Audio(%v, 8); want different", kind, kind)
				}
			})
		}
	}
}

func TestAudioKindString(t *testing.T) {
	tests := []struct {
		kind AudioKind
		want string
	}{
		{Music, "music"}, {SFX, "sfx"}, {AudioKind(9), "AudioKind(9)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("AudioKind(%d).String() = %q; want %q", int(tt.kind), got, tt.want)
		}
	}
}

func TestCRC16(t *testing.T) {
	// The CRC-16/ARC check value.
	if got := crc16(0, []byte("123456789")); got != 0xBB3D {
		t.Errorf("crc16(%q) = %#04x; want 0xbb3d", "123456789", got)
	}
}

// TestMP3Workers checks that parallel encoding gives the sequential bytes.
func TestMP3Workers(t *testing.T) {
	pcm := synthMusic(11, 4*SampleRate)
	want, err := encodeMP3(pcm, 1)
	if err != nil {
		t.Fatalf("encodeMP3(1 worker) error = %v", err)
	}
	for _, workers := range []int{2, 3, 8} {
		got, err := encodeMP3(pcm, workers)
		if err != nil {
			t.Fatalf("encodeMP3(%d workers) error = %v", workers, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encodeMP3(%d workers) differs from encodeMP3(1 worker)", workers)
		}
	}
}
