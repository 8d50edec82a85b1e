// Package media synthesises honest, playable media for the built-in synthetic
// job provider: melodies and sound effects as WAV or MP3, and moving-shape
// clips as H.264 in MP4.
//
// Output is a pure function of the arguments: the same seed gives the same
// bytes (callers derive the seed from the prompt), a different seed gives
// different media. Bytes may differ between CPU architectures, where the Go
// compiler may fuse floating-point multiply-adds; they never vary between runs
// or with the number of CPUs. Every function is safe for concurrent use; the package
// holds no mutable state. Only the standard library is used; the MP3 encoder,
// the H.264 encoder and the MP4 muxer are written here.
package media

import (
	"errors"
	"fmt"
	"runtime"
)

// SampleRate is the audio sample rate in Hz. Audio is mono, 16-bit PCM (WAV)
// or MPEG-1 Layer III at 128 kbit/s CBR (MP3).
const SampleRate = 44100

// Limits on the arguments. They bound memory and time; the job catalog's
// max_duration values are well inside them.
const (
	MaxAudioSeconds = 600
	MaxVideoSeconds = 120
	MinVideoSize    = 16
	MaxVideoSize    = 4096
)

// Content types of the formats.
const (
	ContentTypeMP3 = "audio/mpeg"
	ContentTypeWAV = "audio/wav"
	ContentTypeMP4 = "video/mp4"
)

// ErrInvalidArgument is wrapped by every error caused by a bad argument
// (unknown kind or format, duration or size out of range).
var ErrInvalidArgument = errors.New("invalid argument")

// AudioKind selects what Audio synthesises.
type AudioKind int

// The audio kinds.
const (
	// Music is a melody over a bass line and, for most seeds, drums; key,
	// scale, tempo and tune follow from the seed.
	Music AudioKind = iota + 1
	// SFX is a sequence of sound effects: beeps, sweeps, filtered noise
	// impacts, whooshes and pick-up arpeggios.
	SFX
)

// String returns "music", "sfx" or "AudioKind(n)".
func (k AudioKind) String() string {
	switch k {
	case Music:
		return "music"
	case SFX:
		return "sfx"
	}
	return fmt.Sprintf("AudioKind(%d)", int(k))
}

// Audio synthesises seconds of audio of the given kind and encodes it as
// format, "mp3" (audio/mpeg) or "wav" (audio/wav), returning the file and its
// content type. Both formats decode to exactly seconds*SampleRate samples (MP3
// through gapless decoders, which read the Info tag; others add at most about
// 50 ms of silence). The error wraps ErrInvalidArgument if kind or format is
// unknown or seconds is outside [1, MaxAudioSeconds].
func Audio(kind AudioKind, seed uint64, seconds int, format string) (data []byte, contentType string, err error) {
	if seconds < 1 || seconds > MaxAudioSeconds {
		return nil, "", fmt.Errorf("media: audio duration %d s not in [1, %d]: %w", seconds, MaxAudioSeconds, ErrInvalidArgument)
	}
	if format != "mp3" && format != "wav" {
		return nil, "", fmt.Errorf("media: audio format %q not mp3 or wav: %w", format, ErrInvalidArgument)
	}
	n := seconds * SampleRate
	var pcm []float64
	switch kind {
	case Music:
		pcm = synthMusic(seed, n)
	case SFX:
		pcm = synthSFX(seed, n)
	default:
		return nil, "", fmt.Errorf("media: unknown audio kind %v: %w", kind, ErrInvalidArgument)
	}
	if format == "wav" {
		return encodeWAV(pcm), ContentTypeWAV, nil
	}
	data, err = encodeMP3(pcm, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, "", fmt.Errorf("media: encode %v: %w", kind, err)
	}
	return data, ContentTypeMP3, nil
}
