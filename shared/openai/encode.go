package openai

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/jsonscan"
)

// The request body is encoded by hand, appending to one buffer sized up
// front: json.Marshal of wire structs (reflection, the structs themselves,
// an any per message) was a measurable share of the gateway's CPU. The
// output is byte for byte what json.Marshal gives for the wire request
// types kept in encode_test.go as the reference; the tests and a fuzz
// test check the two against each other.

// appendRequest appends the JSON body of POST /chat/completions for req
// to b: model, messages (a string content, or parts when the message has
// an image: URLs as given, bytes as base64 data URIs),
// max_completion_tokens, reasoning_effort (only for models whose catalog
// thinking style is "effort"), temperature, top_p, stop, seed, and for a
// stream "stream":true with stream_options.include_usage; unset and zero
// optional fields are left out. req.Temperature and req.TopP must be
// finite (see checkRequest).
func appendRequest(b []byte, req *chat.Request, stream bool) []byte {
	b = append(b, `{"model":`...)
	b = jsonscan.AppendString(b, req.Model.Upstream)
	b = append(b, `,"messages":[`...)
	for i := range req.Messages {
		m := &req.Messages[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = jsonscan.AppendString(b, m.Role)
		b = append(b, `,"content":`...)
		if hasImage(m) {
			b = appendParts(b, m.Parts)
		} else {
			b = appendText(b, m)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if req.MaxTokens != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if req.Model.Thinking == catalog.ThinkingEffort && req.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = jsonscan.AppendString(b, req.ReasoningEffort)
	}
	if req.Temperature != nil {
		b = append(b, `,"temperature":`...)
		b = jsonscan.AppendFloat(b, *req.Temperature)
	}
	if req.TopP != nil {
		b = append(b, `,"top_p":`...)
		b = jsonscan.AppendFloat(b, *req.TopP)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, s)
		}
		b = append(b, ']')
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
	if stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}')
}

// appendText appends the content of a message without images: its text
// parts as one string.
func appendText(b []byte, m *chat.Message) []byte {
	switch len(m.Parts) {
	case 0:
		return append(b, `""`...)
	case 1:
		return jsonscan.AppendString(b, m.Parts[0].Text)
	}
	// Escaping the parts one by one could differ from escaping their
	// concatenation (invalid UTF-8 split across parts), so join them.
	return jsonscan.AppendString(b, m.Text())
}

// appendParts appends the content of a message with images: an array of
// text and image_url parts.
func appendParts(b []byte, parts []chat.Part) []byte {
	b = append(b, '[')
	for i := range parts {
		pt := &parts[i]
		if i > 0 {
			b = append(b, ',')
		}
		if pt.Image == nil {
			b = append(b, `{"type":"text","text":`...)
			b = jsonscan.AppendString(b, pt.Text)
		} else {
			b = append(b, `{"type":"image_url","image_url":{"url":`...)
			b = appendImageURL(b, pt.Image)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendImageURL appends the URL of img as a JSON string: img.URL, or a
// data URI when img has bytes.
func appendImageURL(b []byte, img *chat.Image) []byte {
	if img.Data == nil {
		return jsonscan.AppendString(b, img.URL)
	}
	if !plainASCII(img.MediaType) { // never for the media types the gateway accepts
		return jsonscan.AppendString(b, "data:"+img.MediaType+";base64,"+base64.StdEncoding.EncodeToString(img.Data))
	}
	// Base64 (A-Z a-z 0-9 + / =) needs no escaping.
	b = append(b, `"data:`...)
	b = append(b, img.MediaType...)
	b = append(b, ";base64,"...)
	b = base64.StdEncoding.AppendEncode(b, img.Data)
	return append(b, '"')
}

// plainASCII reports whether s is printable ASCII that a JSON string
// holds as it is (no quote, backslash or HTML character to escape).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func hasImage(m *chat.Message) bool {
	for i := range m.Parts {
		if m.Parts[i].Image != nil {
			return true
		}
	}
	return false
}

// requestSize estimates the length of appendRequest's output for req, so
// that the body is usually one allocation; text that needs many escapes
// makes the buffer grow.
func requestSize(req *chat.Request) int {
	// 256 covers the fixed field names and the longest numbers.
	n := 256 + len(req.Model.Upstream) + len(req.ReasoningEffort)
	for _, s := range req.Stop {
		n += len(s) + 3
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		n += 32 + len(m.Role)
		for j := range m.Parts {
			switch pt := &m.Parts[j]; {
			case pt.Image == nil:
				n += 32 + len(pt.Text) + len(pt.Text)/16
			case pt.Image.Data != nil:
				n += 64 + len(pt.Image.MediaType) + base64.StdEncoding.EncodedLen(len(pt.Image.Data))
			default:
				n += 64 + len(pt.Image.URL) + len(pt.Image.URL)/16
			}
		}
	}
	return n
}

// checkRequest returns an error for a request that has no JSON encoding,
// which encoding/json refused too: a NaN or infinite temperature or top_p.
func checkRequest(req *chat.Request) error {
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0)) {
		return fmt.Errorf("temperature %v is not a JSON number", *t)
	}
	if p := req.TopP; p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
		return fmt.Errorf("top_p %v is not a JSON number", *p)
	}
	return nil
}
