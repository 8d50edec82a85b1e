package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/speech"
)

var _ speech.Provider = (*Provider)(nil)

// speechRequest is the body of POST /audio/speech, as the openai SDK
// sends it (audio.speech.create): speed and instructions only when set.
type speechRequest struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          string   `json:"voice"`
	ResponseFormat string   `json:"response_format"`
	Speed          *float64 `json:"speed,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
}

// Speak implements speech.Provider: POST {base}/audio/speech, whose 200
// body is the audio in the response format, streamed (chunked) as OpenAI
// makes it; a streamed WAV comes with 0xFFFFFFFF sizes in its header, as
// OpenAI writes it. Failures are *chat.UpstreamError, classified as chat
// completions' are (the body's reads too: TransportBody); a 400 whose
// error code is its safety system's (moderated) is speech.ContentPolicy's
// 400 with OpenAI's message.
func (p *Provider) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	r := speechRequest{Model: c.Model.Upstream, Input: c.Input, Voice: c.Voice, ResponseFormat: c.Format, Instructions: c.Instructions}
	if c.Speed != 0 {
		r.Speed = &c.Speed
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%s: encode speech request: %w", p.name, err)
	}
	resp, errBody, err := p.post(ctx, p.speech, audioHeader, body)
	if ue := (*chat.UpstreamError)(nil); errors.As(err, &ue) && ue.Status == http.StatusBadRequest && refusedContent(errBody) {
		return nil, speech.ContentPolicy(errorMessage(errBody), ue)
	}
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" || mt == "text/event-stream" {
		resp.Body.Close()
		return nil, p.garbage(fmt.Errorf("a 200 of %s, not audio", mt))
	}
	return chat.TransportBody(ctx, p.name, resp.Body), nil
}

// refusedContent reports whether an error body is OpenAI's refusal of the
// input on content grounds (see moderated).
func refusedContent(body []byte) bool {
	code, _ := errorCode(body)
	return moderated(code)
}

// errorCode returns the code of OpenAI's error body {"error": {"code"}}
// ("" if it is not a string), and whether body is such an error.
func errorCode(body []byte) (string, bool) {
	var v struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil {
		return "", false
	}
	var code string
	_ = json.Unmarshal(v.Error.Code, &code)
	return code, true
}

// moderated reports whether an OpenAI error code is its safety system's
// refusal: moderation_blocked, or content_policy_violation (DALL-E's).
func moderated(code string) bool {
	return code == "moderation_blocked" || code == "content_policy_violation"
}
