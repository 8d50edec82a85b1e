package synthetic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/speech"
)

// Speech is the synthetic speech provider (model synthetic-speech): a
// deterministic tone pattern standing for the input (media.WriteSpeech:
// one tone per letter, 15 characters a second at speed 1), its base pitch
// and timbre from the voice and the instructions, as MP3, WAV or raw PCM
// (24 kHz, as OpenAI's pcm), streamed as it is synthesised: the reader
// gets each piece as soon as it is made, and synthesis waits for the
// reader (it never runs ahead of the client).
//
// An input beginning with FailPrefix fails as a chat message does (see
// the package doc): "fail:503" (any status from 400 to 599) and
// "fail:drop" before any audio, a failure another model can answer;
// plain "fail:" after the first pieces of audio, a failure nothing can
// hide; "fail:policy" is refused as a vendor refuses a text on content
// grounds (content_policy). "fail:503@synthetic-speech" fails only that
// model. Safe for concurrent use.
type Speech struct{}

var _ speech.Provider = Speech{}

// failAfter is how many writes (the header, then pieces of audio) a plain
// fail: lets through before the failure.
const failAfter = 3

// Speak implements speech.Provider.
func (Speech) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	text := strings.TrimSpace(c.Input)
	if trigger, only, named, _ := failTrigger(text); trigger == "policy" && (!named || only == c.Model.ID) {
		return nil, speech.ContentPolicy("The synthetic provider refused this input (it starts with "+FailPrefix+"policy).", nil)
	}
	early, plain := failures(text, c.Model.ID)
	if early != nil {
		return nil, early
	}
	speed := c.Speed
	if speed == 0 {
		speed = 1
	}
	pr, pw := io.Pipe()
	var w io.Writer = pw
	if plain {
		w = &failing{w: pw, left: failAfter}
	}
	go func() {
		// Returns when the reader has taken everything, or closed
		// (the client went away): the pipe's writes fail then.
		err := media.WriteSpeech(w, c.Input, Seed("speech", c.Voice, c.Instructions), speed, c.Format)
		if errors.Is(err, media.ErrInvalidArgument) {
			err = &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamBadRequest, Status: 400,
				Message: "The synthetic provider cannot speak this request.", Err: err}
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// failing passes left writes to w, then fails every one with the
// mid-stream failure of a plain fail:.
type failing struct {
	w    io.Writer
	left int
}

func (f *failing) Write(p []byte) (int, error) {
	if f.left == 0 {
		return 0, &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
			Message: "synthetic failure requested by an input starting with " + FailPrefix,
			Err:     fmt.Errorf("audio cut after %d writes: %w", failAfter, io.ErrUnexpectedEOF)}
	}
	f.left--
	return f.w.Write(p)
}
