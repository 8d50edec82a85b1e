package synthetic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

var speechModel = &catalog.Model{ID: "synthetic-speech", Type: catalog.TypeSpeech}

func speak(t *testing.T, c speech.Call) ([]byte, error) {
	t.Helper()
	if c.Model == nil {
		c.Model = speechModel
	}
	body, err := Speech{}.Speak(context.Background(), &c)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// TestSpeech: the audio is media.WriteSpeech's, seeded by the voice and
// the instructions, at the call's speed and format.
func TestSpeech(t *testing.T) {
	base := speech.Call{Input: "Hello there.", Voice: "alloy", Format: "wav"}
	want := func(c speech.Call) []byte {
		speed := c.Speed
		if speed == 0 {
			speed = 1
		}
		var b bytes.Buffer
		if err := media.WriteSpeech(&b, c.Input, Seed("speech", c.Voice, c.Instructions), speed, c.Format); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	variants := map[string]func(c speech.Call) speech.Call{
		"as it is":      func(c speech.Call) speech.Call { return c },
		"another voice": func(c speech.Call) speech.Call { c.Voice = "echo"; return c },
		"instructions":  func(c speech.Call) speech.Call { c.Instructions = "whisper"; return c },
		"faster":        func(c speech.Call) speech.Call { c.Speed = 2; return c },
		"mp3":           func(c speech.Call) speech.Call { c.Format = "mp3"; return c },
		"pcm":           func(c speech.Call) speech.Call { c.Format = "pcm"; return c },
	}
	seen := map[string]string{}
	for name, v := range variants {
		c := v(base)
		got, err := speak(t, c)
		if err != nil {
			t.Fatalf("%s: Speak = %v", name, err)
		}
		if !bytes.Equal(got, want(c)) {
			t.Errorf("%s: %d bytes; want media.WriteSpeech's %d", name, len(got), len(want(c)))
		}
		if other, dup := seen[string(got)]; dup {
			t.Errorf("%s and %s sound the same", name, other)
		}
		seen[string(got)] = name
	}
}

// TestSpeechStreams: the first read has the header alone: the audio is
// handed over as it is synthesised, not when it is all made.
func TestSpeechStreams(t *testing.T) {
	body, err := Speech{}.Speak(context.Background(), &speech.Call{Model: speechModel, Input: "a long enough text to take many pieces", Voice: "alloy", Format: "wav"})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	buf := make([]byte, 1<<20)
	n, err := body.Read(buf)
	if err != nil || n != 44 || string(buf[:4]) != "RIFF" {
		t.Errorf("first read = %d bytes %q, %v; want the 44-byte WAV header alone", n, buf[:min(n, 8)], err)
	}
	// Closing early stops the synthesis (its writes fail): reads end.
	body.Close()
	if _, err := body.Read(buf); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read after Close = %v; want io.ErrClosedPipe", err)
	}
}

// TestSpeechFailures: the fail: triggers, classified as a vendor's
// failures would be.
func TestSpeechFailures(t *testing.T) {
	tests := []struct {
		input  string
		before bool // fails before any audio (Speak's error); else after some
		status int
		class  route.Class
	}{
		{"fail:503 hello", true, 503, route.Transient},
		{"fail:429 hello", true, 429, route.RateLimited},
		{"fail:400 hello", true, 400, route.Final},
		{"fail:503@synthetic-speech hello", true, 503, route.Transient},
		{"fail:drop hello", true, 0, route.Transient},
		{"fail: hello", false, 0, route.Transient},
	}
	for _, tt := range tests {
		got, err := speak(t, speech.Call{Input: tt.input, Voice: "alloy", Format: "mp3"})
		var ue *chat.UpstreamError
		if !errors.As(err, &ue) || ue.Status != tt.status || ue.Failure().Class != tt.class {
			t.Errorf("Speak(%q) = %v; want an upstream error, status %d, %v", tt.input, err, tt.status, tt.class)
			continue
		}
		if (len(got) == 0) != tt.before {
			t.Errorf("Speak(%q) gave %d bytes before failing; want some: %v", tt.input, len(got), !tt.before)
		}
	}
	if _, err := speak(t, speech.Call{Input: "fail:policy hello", Voice: "alloy", Format: "mp3"}); apierr.As(err) == nil || apierr.As(err).Code != "content_policy" {
		t.Errorf("Speak(fail:policy) = %v; want content_policy", err)
	}
	// A trigger naming another model fails nothing.
	if got, err := speak(t, speech.Call{Input: "fail:503@tts-1 hello", Voice: "alloy", Format: "mp3"}); err != nil || len(got) == 0 {
		t.Errorf("Speak(fail:503@tts-1) = %d bytes, %v; want the audio", len(got), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Speech{}).Speak(ctx, &speech.Call{Model: speechModel, Input: "hi", Voice: "alloy", Format: "mp3"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Speak(cancelled) = %v; want context.Canceled", err)
	}
}
