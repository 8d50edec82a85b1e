package chat

import (
	"context"
	"encoding/json"

	"github.com/genway/genway/shared/metrics"
)

// Estimates: a priced completion whose provider did not report a token
// count (a stream cut short before its usage came, or an upstream that
// sends none) is charged for an estimate of it, made from what was sent
// and what was delivered, so that nothing a client or an upstream does
// makes tokens free:
//
//   - input: ceil(bytes / bytesPerToken) of each text the request sent
//     (a message's content, name, tool call id and refusal, each tool
//     call's name and arguments, each tool's name, description and
//     parameters, the response format's schema), imageTokenEstimate per
//     image and messageTokenEstimate per message and per tool call; at
//     most inputBound, what a hold reserves for it;
//   - output: ceil(bytes / bytesPerToken) of the content and tool calls
//     (names and arguments) handed to the client, plus as much of its
//     reasoning text (counted as reasoning tokens too); at most the
//     request's max_tokens when it has one.
//
// A count the provider reported is charged as it is.
const (
	// bytesPerToken is the bytes of text one token stands for: about 4
	// for English with the providers' tokenizers (OpenAI's rule of
	// thumb); fewer for other scripts and code, so that an estimate
	// tends to be low rather than high.
	bytesPerToken = 4
	// imageTokenEstimate is the tokens estimated for one image part:
	// OpenAI's count for a 1024x1024 image at high detail (Anthropic
	// counts about 1,400 for it, Gemini 258).
	imageTokenEstimate = 765
	// messageTokenEstimate is each message's framing (role, separators):
	// OpenAI counts 3 or 4.
	messageTokenEstimate = 4
)

// inputSize is what a request sends, measured once for its bound
// (inputBound, for holds) and its estimate (inputEstimate).
type inputSize struct {
	bytes  int  // of its texts
	tokens int  // the sum over its texts of ceil(bytes / bytesPerToken)
	images int  // image parts
	frames int  // messages and tool calls, each framed by the provider
	tools  bool // tools or a response format: the provider adds a tool prompt
}

// text counts one text of n bytes.
func (s *inputSize) text(n int) {
	s.bytes += n
	s.tokens += (n + bytesPerToken - 1) / bytesPerToken
}

// bound is an upper bound of the input's tokens: a token is at least a
// byte (see hold.go), plus the assumed bounds of what bytes do not show.
func (s inputSize) bound() int {
	n := s.bytes + s.images*imageTokenBound + s.frames*messageTokenBound
	if s.tools {
		n += toolsTokenBound
	}
	return n
}

// estimate is the input's estimated tokens, at most its bound.
func (s inputSize) estimate() int {
	return min(s.tokens+s.images*imageTokenEstimate+s.frames*messageTokenEstimate, s.bound())
}

// measureInput measures what p sends: its messages' texts (a string
// content's JSON as sent, or each text part), names, tool call ids,
// refusals and tool calls; its tools; its response format's schema.
func measureInput(p *Params) inputSize {
	var s inputSize
	for _, msg := range p.Messages {
		s.frames++
		s.text(len(msg.Name))
		s.text(len(msg.ToolCallID))
		if msg.Refusal != nil {
			s.text(len(*msg.Refusal))
		}
		for _, tc := range msg.ToolCalls {
			s.frames++
			s.text(len(tc.Function.Name))
			s.text(len(tc.Function.Arguments))
		}
		s.content(msg.Content)
	}
	for _, t := range p.Tools {
		if f := t.Function; f != nil {
			s.text(len(f.Name))
			s.text(len(f.Description))
			s.text(len(f.Parameters))
		}
	}
	s.tools = len(p.Tools) > 0 || p.ResponseFormat != nil
	if p.ResponseFormat != nil && p.ResponseFormat.JSONSchema != nil {
		s.text(len(p.ResponseFormat.JSONSchema.Schema))
	}
	return s
}

// content measures a message's content as sent: a string's JSON, or its
// parts (each text, each image); content that is neither counts its
// bytes (Prepare refuses it).
func (s *inputSize) content(raw json.RawMessage) {
	var parts []ParamsPart
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		s.text(len(raw))
		return
	}
	for _, part := range parts {
		switch {
		case part.Text != nil:
			s.text(len(*part.Text))
		case part.ImageURL != nil:
			s.images++
		}
	}
}

// outputSize counts the output of an answer handed to the client, in
// bytes: a few integer adds per delta, on every delta of every stream.
type outputSize struct {
	text      int // content, and tool calls' names and arguments
	reasoning int
}

// add counts d.
func (o *outputSize) add(d Delta) {
	o.text += len(d.Content)
	o.reasoning += len(d.Reasoning)
	if tc := d.ToolCall; tc != nil {
		o.text += len(tc.Name) + len(tc.Arguments)
	}
}

// answerSize is the output of a whole answer.
func answerSize(resp *Response) outputSize {
	o := outputSize{text: len(resp.Content), reasoning: len(resp.Reasoning)}
	for _, tc := range resp.ToolCalls {
		o.text += len(tc.Name) + len(tc.Arguments)
	}
	return o
}

// tokens is the output's estimated tokens, and how many of them are
// reasoning, at most maxTokens when it is > 0.
func (o outputSize) tokens(maxTokens int) (completion, reasoning int) {
	reasoning = (o.reasoning + bytesPerToken - 1) / bytesPerToken
	completion = (o.text+bytesPerToken-1)/bytesPerToken + reasoning
	if maxTokens > 0 {
		completion = min(completion, maxTokens)
	}
	return completion, min(reasoning, completion)
}

// Reasons an estimate was made (the reason label of
// genway_chat_usage_estimated_total): the upstream's answer ended without
// usage, or it was cut short (the answer's Status).
const reasonNoUsage = "no_usage"

// meter completes the usage of resp, the answer to c of request p with
// out its output delivered (streamed; a whole answer's is its own), where
// the provider did not report it: the input when PromptTokens is 0, the
// output when CompletionTokens is 0 and there was output. Those counts
// are estimated (see Estimates), resp.Estimated set, and the estimate
// counted in genway_chat_usage_estimated_total by provider and reason
// (reasonNoUsage, or a cut answer's Status); an upstream that ended an
// answer without usage is logged. Only the answers of priced models are
// metered: an unpriced model's usage is what its provider reported.
func (g *Gateway) meter(ctx context.Context, p *Params, c *Call, resp *Response, out outputSize) {
	u := &resp.Usage
	input, output := u.PromptTokens == 0, false
	if u.CompletionTokens == 0 {
		if !c.Stream {
			out = answerSize(resp)
		}
		output = out.text+out.reasoning > 0
	}
	if !input && !output || !charges(c.Request.Model.Price) {
		return
	}
	if input {
		u.PromptTokens = measureInput(p).estimate()
	}
	if output {
		u.CompletionTokens, u.ReasoningTokens = out.tokens(c.Request.MaxTokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	resp.Estimated = true
	m := c.Request.Model
	reason := reasonNoUsage
	if resp.Partial {
		reason = resp.Status
	} else {
		g.log.WarnContext(ctx, "chat: the upstream reported no usage; charged by estimate", "provider", m.Provider, "model", m.ID,
			"prompt_estimated", input, "completion_estimated", output, "prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens)
	}
	metrics.Default.Add("genway_chat_usage_estimated_total",
		"Chat answers of priced models charged for estimated tokens, by provider and reason: no_usage (the upstream sent none), client_closed or upstream_error (cut short before its usage).",
		[]string{"provider", "reason"}, []string{m.Provider, reason}, 1)
}
