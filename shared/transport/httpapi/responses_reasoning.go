package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// Signed reasoning round trip. Genway keeps nothing between requests, so
// the reasoning a provider signed (chat.Thought: Anthropic's thinking
// blocks and their signatures, redacted thinking, Gemini's thought
// signatures) and the signatures of its tool calls travel with the
// client: in a reasoning item's encrypted_content, which clients send
// back verbatim with the next request (Codex does with store false and
// include reasoning.encrypted_content; Genway adds it to every answer
// that has signed reasoning, since it is the only way back).
//
// The content is reasoningPrefix and the base64url of a small JSON
// document, versioned by the prefix. It is not encrypted and not signed
// by Genway: it holds the client's own conversation, and every signature
// in it is checked by the provider that made it, which refuses a forged
// one. encrypted_content that does not begin with reasoningPrefix (an
// OpenAI model's own, which Codex replays) is accepted and ignored.

// reasoningPrefix begins the encrypted_content Genway makes (version 1).
const reasoningPrefix = "gw1."

// sealedReasoning is the JSON in Genway's encrypted_content.
type sealedReasoning struct {
	Thoughts []sealedThought `json:"t,omitempty"`
	Calls    []sealedCall    `json:"c,omitempty"`
}

// sealedThought is a chat.Thought.
type sealedThought struct {
	Provider  string `json:"p"`
	Text      string `json:"x,omitempty"`
	Signature string `json:"s,omitempty"`
	Redacted  string `json:"r,omitempty"`
}

// sealedCall is a tool call's signature: its call id, the signature and
// the provider kind that made it.
type sealedCall struct {
	ID        string `json:"i"`
	Signature string `json:"s"`
	SignedBy  string `json:"b"`
}

// sealReasoning returns the encrypted_content that carries thoughts and
// the signatures of calls, "" if there is nothing to carry.
func sealReasoning(thoughts []chat.Thought, calls []chat.ToolCall) string {
	var r sealedReasoning
	for _, t := range thoughts {
		r.Thoughts = append(r.Thoughts, sealedThought(t))
	}
	for _, c := range calls {
		if c.Signature != "" {
			r.Calls = append(r.Calls, sealedCall{ID: c.ID, Signature: c.Signature, SignedBy: c.SignedBy})
		}
	}
	if len(r.Thoughts) == 0 && len(r.Calls) == 0 {
		return ""
	}
	b, _ := json.Marshal(r) // strings only: cannot fail
	return reasoningPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// openReasoning returns what sealReasoning sealed in s, the
// encrypted_content of the input item at path at: ok false for content
// Genway did not make (ignored), a 400 for Genway's that was altered.
func openReasoning(s, at string) (r sealedReasoning, ok bool, err error) {
	rest, mine := strings.CutPrefix(s, reasoningPrefix)
	if !mine {
		return r, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return r, false, apierr.Invalidf(at+".encrypted_content", "invalid_value",
			"encrypted_content begins as Genway's but is not what Genway made: send it back as it was answered")
	}
	return r, true, nil
}

// thoughts returns r's thoughts as the domain's.
func (r sealedReasoning) thoughts() []chat.Thought {
	out := make([]chat.Thought, len(r.Thoughts))
	for i, t := range r.Thoughts {
		out[i] = chat.Thought(t)
	}
	return out
}
