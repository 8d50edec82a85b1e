package elevenlabs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/speech"
)

var _ speech.Provider = (*Provider)(nil)

// speechFormats are the output_format asked for each response format:
// 128 kbit/s MP3 at 44.1 kHz (the API's default), and raw PCM at
// media.SpeechRate (pcm_24000, OpenAI's pcm) for pcm and for wav, which
// Speak wraps in a streamed WAV header.
var speechFormats = map[string]string{"mp3": "mp3_44100_128", "pcm": fmt.Sprintf("pcm_%d", media.SpeechRate), "wav": fmt.Sprintf("pcm_%d", media.SpeechRate)}

// ttsRequest is the body of the streaming text-to-speech call, as the
// SDK's textToSpeech.stream sends it.
type ttsRequest struct {
	Text          string         `json:"text"`
	ModelID       string         `json:"model_id"`
	VoiceSettings *voiceSettings `json:"voice_settings,omitempty"`
}

// voiceSettings override the voice's stored settings for one request;
// only speed is set (0.7 to 1.2, the catalog's range).
type voiceSettings struct {
	Speed float64 `json:"speed"`
}

// Speak implements speech.Provider with ElevenLabs' streaming text to
// speech: POST {base}/v1/text-to-speech/{voice_id}/stream?output_format=
// with {"text", "model_id", "voice_settings": {"speed"}} (speed only when
// the request set it), the key in xi-api-key. c.Voice is an ElevenLabs
// voice id (the catalog maps OpenAI's voice names to default voices). The
// audio is ElevenLabs' as it arrives: MP3, or raw PCM at 24 kHz; for wav,
// the PCM after a WAV header whose sizes are 0xFFFFFFFF (the length is
// not known when it starts: media.WAVStreamHeader), sent with the first
// bytes of audio, not before them.
//
// Failures are *chat.UpstreamError, classified as chat's are (a refused
// key, or a used-up quota, which ElevenLabs answers 401, rests the key;
// 429 too_many_concurrent_requests is rate limited; a 422 of the request
// is the client's), with ElevenLabs' message; a refusal of the text on
// content grounds is speech.ContentPolicy's 400.
func (p *Provider) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	format, ok := speechFormats[c.Format]
	if !ok {
		return nil, &chat.UpstreamError{Provider: "elevenlabs", Kind: chat.UpstreamBadRequest,
			Message: fmt.Sprintf("ElevenLabs streams no %s through Genway.", c.Format)}
	}
	r := ttsRequest{Text: c.Input, ModelID: c.Model.Upstream}
	if c.Speed != 0 {
		r.VoiceSettings = &voiceSettings{Speed: c.Speed}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("elevenlabs: encode speech request: %w", err)
	}
	u := p.base + "/v1/text-to-speech/" + url.PathEscape(c.Voice) + "/stream?output_format=" + url.QueryEscape(format)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("elevenlabs: new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("xi-api-key", p.keys.Key(ctx))
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, chat.TransportError(ctx, "elevenlabs", "send request", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		ref := apiError(resp.StatusCode, body)
		cause := fmt.Errorf("text to speech: HTTP %d: %s", resp.StatusCode, ref.Message)
		if ref.Code == jobs.CodeContentPolicy {
			return nil, speech.ContentPolicy(ref.Message, cause)
		}
		return nil, chat.StatusError("elevenlabs", resp.StatusCode, resp.Header, ref.Message, cause)
	}
	body := chat.TransportBody(ctx, "elevenlabs", resp.Body)
	if c.Format == "wav" {
		return &wavStream{body: body}, nil
	}
	return body, nil
}

// wavStream is raw PCM at media.SpeechRate behind a streamed WAV header, the
// header held back until the first bytes of audio are here (so that a
// vendor that fails before any audio has sent nothing).
type wavStream struct {
	body    io.ReadCloser
	pending []byte // the header and the first audio, not yet read
	started bool
	err     error // the first read's error, for after pending
}

func (w *wavStream) Read(p []byte) (int, error) {
	if !w.started {
		buf := make([]byte, 32<<10)
		n, err := w.body.Read(buf)
		if n == 0 {
			return 0, err
		}
		w.started, w.err = true, err
		w.pending = append(media.WAVStreamHeader(media.SpeechRate), buf[:n]...)
	}
	if len(w.pending) > 0 {
		n := copy(p, w.pending)
		w.pending = w.pending[n:]
		return n, nil
	}
	if w.err != nil {
		return 0, w.err
	}
	return w.body.Read(p)
}

func (w *wavStream) Close() error { return w.body.Close() }
