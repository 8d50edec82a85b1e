package media

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unicode"
)

// Synthetic speech: a tone pattern that stands for a text being read, for
// the synthetic speech model. Each character takes one slot of
// 1/(SpeechCharsPerSecond*speed) seconds, so the audio grows with the text
// at a steady rate (15 characters a second is about how fast a voice reads
// English): a vowel is a sustained tone, a consonant a short higher one, a
// digit a tone two octaves up, and a space, punctuation or any other
// character a silence. The pitch of each letter follows the letter; the
// base pitch and timbre follow the seed (the voice).

// SpeechCharsPerSecond is the synthetic reading rate at speed 1.
const SpeechCharsPerSecond = 15

// SpeechRate is the sample rate of speech as WAV or raw PCM: 24 kHz, the
// rate of OpenAI's text-to-speech output (whose "pcm" format is raw 16-bit
// little-endian mono samples at 24 kHz). Synthetic speech is made at it,
// and the vendor adapters that choose a rate (ElevenLabs' pcm_24000) ask
// for it. Synthetic speech as MP3 is at SampleRate, the MP3 encoder's
// rate.
const SpeechRate = 24000

// ContentTypePCM is raw 16-bit little-endian mono samples.
const ContentTypePCM = "audio/pcm"

// Speed limits of WriteSpeech (OpenAI's).
const (
	MinSpeechSpeed = 0.25
	MaxSpeechSpeed = 4.0
)

// speechPiece is how many characters WriteSpeech synthesises and writes
// at a time: about a quarter of a second at speed 1, so the audio starts
// at once and arrives as it is made.
const speechPiece = 4

// speechSlot is the samples of one character at speed and rate.
func speechSlot(speed float64, rate int) int {
	return max(1, int(math.Round(float64(rate)/(SpeechCharsPerSecond*speed))))
}

// SpeechSamples returns how many samples WriteSpeech makes for text at
// speed in format: one slot per character (Unicode code point).
func SpeechSamples(text string, speed float64, format string) int {
	rate := SpeechRate
	if format == "mp3" {
		rate = SampleRate
	}
	n := 0
	for range text {
		n++
	}
	return n * speechSlot(speed, rate)
}

// WriteSpeech synthesises text as a tone pattern (see above), with the base
// pitch and timbre of seed, at speed (MinSpeechSpeed to MaxSpeechSpeed; 1
// is SpeechCharsPerSecond), and writes it to w as format: "mp3" (audio/mpeg,
// streamed frame by frame, see MP3Stream), "wav" (audio/wav, 16-bit mono at
// SpeechRate, its exact length in the header) or "pcm" (the same samples
// with no header). The header comes first, then the audio a few
// characters at a time as it is synthesised. The output is a pure function
// of the arguments. The error wraps ErrInvalidArgument for an empty text,
// a speed or format out of range, or a length past MaxStreamSeconds;
// otherwise it is w's.
func WriteSpeech(w io.Writer, text string, seed uint64, speed float64, format string) error {
	if text == "" {
		return fmt.Errorf("media: no text to speak: %w", ErrInvalidArgument)
	}
	if !(speed >= MinSpeechSpeed && speed <= MaxSpeechSpeed) {
		return fmt.Errorf("media: speech speed %g not in [%g, %g]: %w", speed, MinSpeechSpeed, MaxSpeechSpeed, ErrInvalidArgument)
	}
	rate := SpeechRate
	switch format {
	case "mp3":
		rate = SampleRate
	case "wav", "pcm":
	default:
		return fmt.Errorf("media: speech format %q not mp3, wav or pcm: %w", format, ErrInvalidArgument)
	}
	runes := []rune(text)
	slot := speechSlot(speed, rate)
	total := len(runes) * slot
	if total > MaxStreamSeconds*rate {
		return fmt.Errorf("media: speech of %d s is longer than %d s: %w", total/rate, MaxStreamSeconds, ErrInvalidArgument)
	}
	v := newSpeechVoice(seed, float64(rate))
	var mp3 *MP3Stream
	var raw []byte
	switch format {
	case "mp3":
		var err error
		if mp3, err = NewMP3Stream(w, total); err != nil {
			return err
		}
	case "wav":
		if _, err := w.Write(WAVHeader(rate, int64(2*total))); err != nil {
			return err
		}
	}
	pcm := make([]float64, speechPiece*slot)
	for i := 0; i < len(runes); i += speechPiece {
		piece := runes[i:min(i+speechPiece, len(runes))]
		out := pcm[:len(piece)*slot]
		clear(out)
		for k, r := range piece {
			v.say(out[k*slot:(k+1)*slot], r)
		}
		if mp3 != nil {
			if err := mp3.Write(out); err != nil {
				return err
			}
			continue
		}
		raw = raw[:0]
		for _, x := range out {
			s := math.Round(math.Max(-1, math.Min(1, x)) * 32767)
			raw = binary.LittleEndian.AppendUint16(raw, uint16(int16(s)))
		}
		if _, err := w.Write(raw); err != nil {
			return err
		}
	}
	if mp3 != nil {
		return mp3.Close()
	}
	return nil
}

// speechVoice is a seed's base pitch and timbre.
type speechVoice struct {
	rate   float64
	base   float64 // Hz: the pitch of degree 0
	h2, h3 float64 // harmonic weights
}

func newSpeechVoice(seed uint64, rate float64) speechVoice {
	r := rng{s: seed}
	return speechVoice{rate: rate, base: r.between(150, 280), h2: r.between(0.1, 0.4), h3: r.between(0, 0.2)}
}

// pentatonic degrees, in semitones: any two letters' tones are consonant.
var pentatonic = [...]float64{0, 2, 4, 7, 9, 12, 14, 16, 19, 21}

// say adds the sound of r to slot (its samples).
func (v speechVoice) say(slot []float64, r rune) {
	n := float64(len(slot))
	lower := unicode.ToLower(r)
	switch {
	case lower >= 'a' && lower <= 'z' && isVowel(lower):
		toneAt(slot, v.rate, 0, int(0.85*n), v.freq(int(lower-'a'), 0), 0.5, 1, v.h2, v.h3, 0.006*v.rate, 0.5*v.rate)
	case unicode.IsLetter(r):
		// Consonants, and letters of other scripts, by code point.
		toneAt(slot, v.rate, 0, int(0.4*n), v.freq(int(lower), 12), 0.35, 1, v.h2/2, 0, 0.003*v.rate, 0.05*v.rate)
	case unicode.IsDigit(r):
		toneAt(slot, v.rate, 0, int(0.6*n), v.freq(int(r), 24), 0.3, 1, 0, 0, 0.003*v.rate, 0.2*v.rate)
	}
	// Spaces, punctuation and the rest: a silence.
}

// freq is the pitch of a character: the voice's base, up octave
// semitones, on the pentatonic degree k picks.
func (v speechVoice) freq(k int, octave float64) float64 {
	return v.base * math.Exp2((octave+pentatonic[k%len(pentatonic)])/12)
}

func isVowel(r rune) bool {
	switch r {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}
