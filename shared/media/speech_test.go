package media

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestMP3StreamMatchesAudio: a stream's audio frames are exactly the
// frames encodeMP3 makes of the same samples, whatever the sizes of the
// writes; its Info frame counts them and the bytes, and has no LAME tag.
func TestMP3StreamMatchesAudio(t *testing.T) {
	pcm := synthMusic(9, 3*SampleRate+123)
	normalize(pcm)
	whole, err := encodeMP3(pcm, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []int{1, 100, 1152, 5000, len(pcm)} {
		t.Run(fmt.Sprintf("writes of %d", piece), func(t *testing.T) {
			var out bytes.Buffer
			s, err := NewMP3Stream(&out, len(pcm))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(pcm); i += piece {
				if err := s.Write(pcm[i:min(i+piece, len(pcm))]); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			b := out.Bytes()
			if !bytes.Equal(b[mp3InfoBytes:], whole[mp3InfoBytes:]) {
				t.Fatalf("stream audio frames (%d bytes) differ from encodeMP3's (%d bytes)", len(b)-mp3InfoBytes, len(whole)-mp3InfoBytes)
			}
			frames := walkMP3(t, b)
			p := mp3HeaderBytes + mp3SideInfoBytes
			info := b[:mp3InfoBytes]
			be := binary.BigEndian
			if string(info[p:p+4]) != "Info" || int(be.Uint32(info[p+8:])) != len(frames)-1 || int(be.Uint32(info[p+12:])) != len(b) {
				t.Errorf("Info frame says %q, %d frames, %d bytes; want Info, %d, %d", info[p:p+4], be.Uint32(info[p+8:]), be.Uint32(info[p+12:]), len(frames)-1, len(b))
			}
			if tag := info[p+120:]; !bytes.Equal(tag, make([]byte, len(tag))) {
				t.Errorf("Info frame has an encoder tag %q; a stream cannot know its music CRC", tag[:9])
			}
		})
	}
}

// TestMP3StreamLength: a stream refuses samples past its declared length,
// and a Close before all of them.
func TestMP3StreamLength(t *testing.T) {
	var out bytes.Buffer
	s, err := NewMP3Stream(&out, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(make([]float64, 1500)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrMP3Length) {
		t.Errorf("Close after 1500 of 2000 samples = %v; want ErrMP3Length", err)
	}
	s, _ = NewMP3Stream(&out, 2000)
	if err := s.Write(make([]float64, 2001)); !errors.Is(err, ErrMP3Length) {
		t.Errorf("Write of 2001 of 2000 samples = %v; want ErrMP3Length", err)
	}
	if _, err := NewMP3Stream(&out, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewMP3Stream(-1) = %v; want ErrInvalidArgument", err)
	}
}

// pieces records each Write it gets.
type pieces struct {
	bytes.Buffer
	sizes []int
}

func (p *pieces) Write(b []byte) (int, error) {
	p.sizes = append(p.sizes, len(b))
	return p.Buffer.Write(b)
}

func speech(t *testing.T, text string, seed uint64, speed float64, format string) *pieces {
	t.Helper()
	var p pieces
	if err := WriteSpeech(&p, text, seed, speed, format); err != nil {
		t.Fatalf("WriteSpeech(%q, %s) = %v", text, format, err)
	}
	return &p
}

// speechWAV parses a speech WAV (24 kHz) and returns its samples.
func speechWAV(t *testing.T, b []byte) []float64 {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < wavHeaderBytes || string(b[:4]) != "RIFF" || string(b[36:40]) != "data" {
		t.Fatalf("not a WAV: %q", b[:min(len(b), 44)])
	}
	if got := le.Uint32(b[24:]); got != SpeechRate {
		t.Errorf("sample rate = %d; want %d", got, SpeechRate)
	}
	if le.Uint32(b[4:]) != uint32(len(b)-8) || le.Uint32(b[40:]) != uint32(len(b)-wavHeaderBytes) {
		t.Errorf("RIFF, data sizes = %d, %d; want %d, %d (the exact length)", le.Uint32(b[4:]), le.Uint32(b[40:]), len(b)-8, len(b)-wavHeaderBytes)
	}
	return pcmSamples(b[wavHeaderBytes:])
}

func pcmSamples(b []byte) []float64 {
	out := make([]float64, len(b)/2)
	for i := range out {
		out[i] = float64(int16(binary.LittleEndian.Uint16(b[2*i:]))) / 32768
	}
	return out
}

// zeroCrossings counts the sign changes of x.
func zeroCrossings(x []float64) int {
	n := 0
	for i := 1; i < len(x); i++ {
		if (x[i-1] < 0) != (x[i] < 0) && x[i] != 0 {
			n++
		}
	}
	return n
}

// TestWriteSpeech checks the synthetic speech: its length (one slot per
// character, at the speed), its sounds (a vowel's tone at its pitch, a
// space silent), WAV and PCM the same samples, and the audio written in
// pieces as it is made, the header first.
func TestWriteSpeech(t *testing.T) {
	const text = "Hello, world 42"
	slot := SpeechRate / SpeechCharsPerSecond
	wav := speech(t, text, 7, 1, "wav")
	samples := speechWAV(t, wav.Bytes())
	if want := 15 * slot; len(samples) != want || SpeechSamples(text, 1, "wav") != want {
		t.Fatalf("WAV of %d chars has %d samples (SpeechSamples %d); want %d", 15, len(samples), SpeechSamples(text, 1, "wav"), want)
	}
	if wav.sizes[0] != wavHeaderBytes || len(wav.sizes) != 1+(15+speechPiece-1)/speechPiece {
		t.Errorf("writes = %v; want the header, then one write per %d characters", wav.sizes, speechPiece)
	}
	pcm := speech(t, text, 7, 1, "pcm")
	if !bytes.Equal(pcm.Bytes(), wav.Bytes()[wavHeaderBytes:]) {
		t.Errorf("pcm is not the WAV's samples")
	}
	// "e" (index 1) is a vowel: a tone of its pitch; "," (5) and " " (6)
	// are silent; "H" (0) a short consonant tone.
	at := func(i int) []float64 { return samples[i*slot : (i+1)*slot] }
	if r := rms(at(1)); r < 0.1 {
		t.Errorf("RMS of the vowel e = %.3f; want >= 0.1", r)
	}
	for _, i := range []int{5, 6} {
		if r := rms(at(i)); r != 0 {
			t.Errorf("RMS of %q = %.4f; want 0 (silence)", text[i], r)
		}
	}
	v := newSpeechVoice(7, SpeechRate)
	want := v.freq(int('e'-'a'), 0)
	sounding := at(1)[:int(0.85*float64(slot))]
	got := float64(zeroCrossings(sounding)) / 2 / (float64(len(sounding)) / SpeechRate)
	if math.Abs(got-want)/want > 0.05 {
		t.Errorf("pitch of e = %.1f Hz; want %.1f Hz ± 5%%", got, want)
	}
	if r := rms(at(0)[int(0.45*float64(slot)):]); r != 0 {
		t.Errorf("a consonant sounds past 40%% of its slot (RMS %.4f)", r)
	}

	// Speed: twice as fast, half as long.
	if n := len(speech(t, text, 7, 2, "pcm").Bytes()) / 2; n != len(samples)/2 {
		t.Errorf("speed 2: %d samples; want %d", n, len(samples)/2)
	}
	// Deterministic, and the seed (the voice) matters.
	if !bytes.Equal(speech(t, text, 7, 1, "wav").Bytes(), wav.Bytes()) {
		t.Errorf("two runs differ")
	}
	if bytes.Equal(speech(t, text, 8, 1, "wav").Bytes(), wav.Bytes()) {
		t.Errorf("seeds 7 and 8 give the same audio")
	}
	// Non-ASCII text takes a slot per code point.
	if n := len(speech(t, "héllo, 世界", 7, 1, "pcm").Bytes()) / 2; n != 9*slot {
		t.Errorf("9 code points: %d samples; want %d", n, 9*slot)
	}
}

// TestWriteSpeechMP3: the MP3 is the Info frame, then frames as the text is
// synthesised, and decodes to the speech (go-mp3: the Info frame and the
// encoder's delay as silence, then the samples).
func TestWriteSpeechMP3(t *testing.T) {
	const text = "a quick test of the tone pattern"
	p := speech(t, text, 3, 1, "mp3")
	b := p.Bytes()
	if p.sizes[0] != mp3InfoBytes || len(p.sizes) < 10 {
		t.Errorf("writes = %v; want the Info frame first, then many frames", p.sizes)
	}
	n := SpeechSamples(text, 1, "mp3")
	frames := walkMP3(t, b)
	if len(frames)-1 != mp3StreamFrames(n) {
		t.Errorf("%d audio frames; want %d", len(frames)-1, mp3StreamFrames(n))
	}
	out := decodeMP3(t, b)
	start := mp3FrameSamples + mp3Delay
	if len(out) < start+n {
		t.Fatalf("decoded %d samples; want at least %d", len(out), start+n)
	}
	if r := rms(out[start : start+n]); r < 0.05 {
		t.Errorf("decoded RMS = %.3f; want >= 0.05", r)
	}
	if !bytes.Equal(speech(t, text, 3, 1, "mp3").Bytes(), b) {
		t.Errorf("two runs differ")
	}
}

func TestWriteSpeechInvalid(t *testing.T) {
	tests := []struct {
		text   string
		speed  float64
		format string
	}{
		{"", 1, "mp3"}, {"hi", 0.2, "mp3"}, {"hi", 4.5, "wav"}, {"hi", math.NaN(), "wav"}, {"hi", 1, "aac"}, {"hi", 1, ""},
	}
	for _, tt := range tests {
		if err := WriteSpeech(&bytes.Buffer{}, tt.text, 1, tt.speed, tt.format); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WriteSpeech(%q, %g, %q) = %v; want ErrInvalidArgument", tt.text, tt.speed, tt.format, err)
		}
	}
}

// TestFFprobeSpeech runs ffprobe and ffmpeg, when installed, on synthetic
// speech: the MP3's codec and duration (the Info frame's frames: the
// speech, the encoder's delay and padding, so at most 50 ms more), the
// WAV's exact duration at 24 kHz, and a stream of unknown length (the
// WAVStreamHeader before the PCM, as a vendor's streamed WAV comes), which
// ffmpeg decodes to the end: every sample, none more.
func TestFFprobeSpeech(t *testing.T) {
	ffprobe := lookTool(t, "ffprobe")
	ffmpeg := lookTool(t, "ffmpeg")
	text := "The synthetic voice reads one character every fifteenth of a second."
	secs := float64(len(text)) / SpeechCharsPerSecond
	dir := t.TempDir()
	probe := func(t *testing.T, name string, data []byte) (codec string, rate int, duration float64) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration:stream=codec_name,sample_rate", "-of", "json", path).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", name, err)
		}
		var p struct {
			Streams []struct {
				CodecName  string `json:"codec_name"`
				SampleRate string `json:"sample_rate"`
			} `json:"streams"`
			Format struct {
				Duration string `json:"duration"`
			} `json:"format"`
		}
		if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) != 1 {
			t.Fatalf("ffprobe %s: %s (%v)", name, out, err)
		}
		rate, _ = strconv.Atoi(p.Streams[0].SampleRate)
		duration, _ = strconv.ParseFloat(p.Format.Duration, 64)
		return p.Streams[0].CodecName, rate, duration
	}
	t.Run("mp3", func(t *testing.T) {
		codec, rate, d := probe(t, "speech.mp3", speech(t, text, 1, 1, "mp3").Bytes())
		if codec != "mp3" || rate != SampleRate || d < secs || d > secs+0.05 {
			t.Errorf("ffprobe: %s at %d Hz, %g s; want mp3 at %d Hz, %g s to %g s", codec, rate, d, SampleRate, secs, secs+0.05)
		}
	})
	t.Run("wav", func(t *testing.T) {
		codec, rate, d := probe(t, "speech.wav", speech(t, text, 1, 1, "wav").Bytes())
		if codec != "pcm_s16le" || rate != SpeechRate || math.Abs(d-secs) > 0.001 {
			t.Errorf("ffprobe: %s at %d Hz, %g s; want pcm_s16le at %d Hz, %g s", codec, rate, d, SpeechRate, secs)
		}
	})
	t.Run("streamed wav", func(t *testing.T) {
		pcm := speech(t, text, 1, 1, "pcm").Bytes()
		path := filepath.Join(dir, "stream.wav")
		if err := os.WriteFile(path, append(WAVStreamHeader(SpeechRate), pcm...), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(ffmpeg, "-nostdin", "-hide_banner", "-v", "error", "-i", path, "-f", "s16le", "-")
		cmd.Stderr = &stderr
		raw, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("ffmpeg decode: %v: %s", err, stderr.String())
		}
		if !bytes.Equal(raw, pcm) {
			t.Errorf("ffmpeg decoded %d bytes of the streamed WAV; want the %d PCM bytes as they are", len(raw), len(pcm))
		}
	})
}
