package media

import (
	"errors"
	"fmt"
	"io"
)

// MP3Stream encodes mono SampleRate samples as MP3 (the same MPEG-1 Layer
// III frames Audio makes) and writes each frame to its writer as soon as
// the frame's samples are in, so that audio can be sent while it is being
// synthesised. The number of samples is declared up front: the stream
// starts with an Info frame (the Xing layout for CBR) that counts the
// frames and bytes to come, which lets players show the duration and seek.
// Unlike Audio's, that frame carries no LAME tag: the tag's CRC of the
// music would need every frame before the first is sent. Decoders
// therefore return the encoder's delay (1057 samples) and the last frame's
// padding as silence around the samples.
//
// An MP3Stream is not safe for concurrent use.
type MP3Stream struct {
	w      io.Writer
	enc    frameEncoder
	win    []float64 // the next frame's window: 512 samples of history, then samples not yet encoded (scaled)
	out    []byte    // one frame
	rem    int       // nextFrameSize's remainder
	frames int       // audio frames in the stream
	frame  int       // the next frame to write
	want   int       // samples declared
	got    int       // samples written
	err    error     // the first write error: the stream is broken
}

// mp3Window is how many samples of input the frame being encoded reads:
// 512 of the filterbank's history and the frame's 1152.
const mp3Window = 512 + mp3FrameSamples

// mp3StreamFrames is how many audio frames an MP3 of samples samples
// has (Audio's count: the samples, the encoder's delay, then padding).
func mp3StreamFrames(samples int) int {
	return max(1, (samples+mp3Delay+mp3FrameSamples-1)/mp3FrameSamples)
}

// MaxStreamSeconds bounds a stream's length: a stream holds one frame in
// memory however long it is, so this only keeps its counts in range.
const MaxStreamSeconds = 2 * 60 * 60

// NewMP3Stream returns a stream of samples samples (at most
// MaxStreamSeconds of them) that writes to w, after writing its Info
// frame. The error wraps ErrInvalidArgument for a length out of range, or
// is w's.
func NewMP3Stream(w io.Writer, samples int) (*MP3Stream, error) {
	if samples < 0 || samples > MaxStreamSeconds*SampleRate {
		return nil, fmt.Errorf("media: mp3 stream of %d samples not in [0, %d]: %w", samples, MaxStreamSeconds*SampleRate, ErrInvalidArgument)
	}
	s := &MP3Stream{w: w, enc: frameEncoder{t: newMP3Tables()}, frames: mp3StreamFrames(samples), want: samples,
		win: make([]float64, 512, 2*mp3Window), out: make([]byte, mp3InfoBytes+1)}
	total, rem := mp3InfoBytes, 0
	for f := 0; f < s.frames; f++ {
		total += nextFrameSize(&rem)
	}
	writeXing(s.out[:mp3InfoBytes], s.frames, total)
	if _, err := w.Write(s.out[:mp3InfoBytes]); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrMP3Length is the error of an MP3Stream given more samples than it
// declared (Write), or fewer (Close).
var ErrMP3Length = errors.New("media: mp3 stream length differs from the one declared")

// Write encodes pcm (nominally in [-1, 1]), the next samples, writing
// every frame they complete. Its error is the writer's, or ErrMP3Length
// past the declared length; after an error the stream writes nothing.
func (s *MP3Stream) Write(pcm []float64) error {
	if s.err != nil {
		return s.err
	}
	if s.got+len(pcm) > s.want {
		s.err = fmt.Errorf("%w: %d samples declared, %d written", ErrMP3Length, s.want, s.got+len(pcm))
		return s.err
	}
	s.got += len(pcm)
	for len(pcm) > 0 {
		n := min(len(pcm), mp3Window-len(s.win))
		for _, v := range pcm[:n] {
			s.win = append(s.win, v*mp3Scale)
		}
		pcm = pcm[n:]
		if len(s.win) == mp3Window {
			if err := s.writeFrame(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close writes the frames that remain: the last samples, the encoder's
// delay and the padding. It returns ErrMP3Length if fewer samples were
// written than declared (the stream is then not written to the end). It
// does not close the writer.
func (s *MP3Stream) Close() error {
	if s.err != nil {
		return s.err
	}
	if s.got != s.want {
		s.err = fmt.Errorf("%w: %d samples declared, %d written", ErrMP3Length, s.want, s.got)
		return s.err
	}
	for s.frame < s.frames {
		for len(s.win) < mp3Window {
			s.win = append(s.win, 0)
		}
		if err := s.writeFrame(); err != nil {
			return err
		}
	}
	return nil
}

// writeFrame encodes the window (full) as the next frame, writes it, and
// keeps the last 512 samples as the next window's history.
func (s *MP3Stream) writeFrame() error {
	dst := s.out[:nextFrameSize(&s.rem)]
	if err := s.enc.encode(s.win, 0, dst); err != nil {
		s.err = fmt.Errorf("media: mp3 frame %d: %w", s.frame, err)
		return s.err
	}
	s.frame++
	s.win = append(s.win[:0], s.win[mp3FrameSamples:]...)
	if _, err := s.w.Write(dst); err != nil {
		s.err = err
		return err
	}
	return nil
}
