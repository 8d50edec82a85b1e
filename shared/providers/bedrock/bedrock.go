// Package bedrock is the chat.Provider for Amazon Bedrock's Converse and
// ConverseStream APIs, through aws-sdk-go-v2's bedrockruntime client: system
// blocks, text and image (bytes) blocks, inferenceConfig, Claude extended
// thinking through additionalModelRequestFields, and usage from the stream's
// metadata event (cache reads and writes by lifetime; see usage) with the
// service tier it was served at.
//
// Tools are mapped to toolConfig (toolSpec with inputSchema.json); tool_choice
// "required" is toolChoice any, a named function is toolChoice tool, and
// "auto" is Bedrock's default (no toolChoice is sent: some models refuse
// one). Assistant tool calls are toolUse blocks and tool messages toolResult
// blocks in a user turn (consecutive results merge into one turn, as
// Converse requires alternating roles). Converse refuses toolUse/toolResult
// blocks without a toolConfig, so a request with tool turns but no tools
// declares the tools named in its history with an empty object schema.
// toolUse blocks in an answer become Response.ToolCalls (streamed as
// ToolCallDelta from contentBlockStart and the toolUse input pieces of
// contentBlockDelta), with finish reason tool_calls.
//
// Structured output (response_format) is a forced tool, as Bedrock's Claude
// and Nova models support it: a tool named after the schema ("json" for
// json_object) whose input schema is the schema ({"type":"object"} for
// json_object), forced through toolChoice tool; its input is returned as the
// content, finish reason stop. Forcing a tool (here or by tool_choice) is
// incompatible with Claude's extended thinking, so thinking is dropped from
// such a request; it is dropped too when the last assistant message calls
// tools without its signed thinking (a chat client's history), as Claude
// then wants that turn's thinking block.
//
// Claude's reasoning is kept for the next turn: an answer's
// reasoningContent blocks are chat.Thoughts (text and signature, or the
// redacted bytes in base64), streamed as reasoning deltas and a
// Delta.Thought at the block's contentBlockStop; an assistant message's
// Thoughts of Claude (this adapter's kind and Anthropic's), signed or
// redacted, go back as reasoningContent blocks before its text and tool
// calls, when the request thinks. The request's thinking budget and
// display, and top_k (Claude models only: another model's request with
// it fails), go in additionalModelRequestFields. Tool call ids Bedrock
// would refuse are sent as chat.SafeCallID makes them; a tool message's
// ToolError is the toolResult's status "error".
//
// Refused through Features (Bedrock has no such control): tool_choice
// "none" with tools, parallel_tool_calls false, tools together with
// response_format, seed, presence/frequency penalties, logit_bias and the
// OpenAI-only fields. The user field and Tool.Strict are ignored.
//
// Bedrock needs image bytes: Provider implements NeedsImageBytes, and the
// gateway fetches image URLs before calling it.
//
// Prompt-cache breakpoints (chat.CacheControl) are cachePoint blocks: after
// the marked system text (system prompts with one are sent a block per
// part), after the marked content block or tool result, after an
// assistant message's tool calls (chat.Message.Cache), after the marked
// tool's toolSpec; "ttl": "1h" only for the one-hour lifetime. CacheRules
// says which models take them.
//
// A Provider is safe for concurrent use (the SDK client is).
package bedrock

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithydocument "github.com/aws/smithy-go/document"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// Name is the provider name used in errors.
const Name = "bedrock"

// Kind is the provider kind of the Thoughts the adapter makes
// (chat.Thought.Provider); it sends back those and Anthropic's.
const Kind = "bedrock"

// MaxCacheBreakpoints is the most cachePoint blocks Bedrock takes in one
// request, for the models that cache (see Provider.CacheRules).
const MaxCacheBreakpoints = 4

// DefaultMaxTokens caps maxTokens when the request does not set it: the
// model's catalog maximum, at most this.
const DefaultMaxTokens = 8192

// thinkingBudgets maps reasoning_effort to Claude's budget_tokens for models
// with catalog.ThinkingBudget.
var thinkingBudgets = map[string]int{"low": 1024, "medium": 4096, "high": 16384}

// ConverseStreamer is the part of *bedrockruntime.Client a Provider uses.
type ConverseStreamer interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

var _ ConverseStreamer = (*bedrockruntime.Client)(nil)

// Provider talks to Bedrock through client.
type Provider struct {
	client ConverseStreamer
}

var (
	_ chat.Provider        = (*Provider)(nil)
	_ chat.FeatureProvider = (*Provider)(nil)
	_ chat.CacheProvider   = (*Provider)(nil)
)

// New returns a Provider using client. The client's retry settings apply;
// a gateway usually wants few retries (RetryMaxAttempts) so that a client's
// timeout is not spent waiting on backoff.
func New(client ConverseStreamer) *Provider { return &Provider{client: client} }

// NeedsImageBytes reports that Bedrock takes images as bytes only: the
// gateway must fetch image URLs into Image.Data before calling the Provider.
func (p *Provider) NeedsImageBytes() bool { return true }

// Features reports what Converse can honour: tools and structured output
// (a forced tool), but no tool_choice "none" (toolChoice has no such
// member), no limit to one tool call, no tools together with
// response_format (the format's forced tool would keep the model from
// calling them), and no seed, penalties or logit_bias (inferenceConfig has
// maxTokens, temperature, topP and stopSequences only).
func (p *Provider) Features() chat.Features {
	return chat.Features{Tools: true, ResponseFormat: true, TopK: true}
}

// Complete calls Converse. Every upstream failure is a *chat.UpstreamError;
// a cancelled ctx returns an error wrapping ctx.Err().
func (p *Provider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	in, format, err := buildInput(req)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	out, err := p.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: in.ModelId, Messages: in.Messages, System: in.System, InferenceConfig: in.InferenceConfig,
		AdditionalModelRequestFields: in.AdditionalModelRequestFields, ToolConfig: in.ToolConfig,
	})
	if err != nil {
		return nil, upstreamError(ctx, err)
	}
	resp := &chat.Response{Usage: usage(out.Usage), ServiceTier: serviceTier(out.ServiceTier)}
	if msg, ok := out.Output.(*types.ConverseOutputMemberMessage); ok {
		var content, reasoning strings.Builder
		formatSeen := false
		for _, b := range msg.Value.Content {
			switch b := b.(type) {
			case *types.ContentBlockMemberText:
				content.WriteString(b.Value)
			case *types.ContentBlockMemberReasoningContent:
				switch rc := b.Value.(type) {
				case *types.ReasoningContentBlockMemberReasoningText:
					text := aws.ToString(rc.Value.Text)
					reasoning.WriteString(text)
					resp.Thoughts = append(resp.Thoughts, chat.Thought{Provider: Kind, Text: text, Signature: aws.ToString(rc.Value.Signature)})
				case *types.ReasoningContentBlockMemberRedactedContent:
					resp.Thoughts = append(resp.Thoughts, chat.Thought{Provider: Kind, Redacted: base64.StdEncoding.EncodeToString(rc.Value)})
				}
			case *types.ContentBlockMemberToolUse:
				args, err := inputJSON(b.Value.Input)
				if err != nil {
					return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamFailed, Message: "malformed toolUse input", Err: err}
				}
				name := aws.ToString(b.Value.Name)
				if format != "" && name == format {
					// The structured output: the first call of the format's tool is the content.
					if !formatSeen {
						content.WriteString(args)
						formatSeen = true
					}
					continue
				}
				resp.ToolCalls = append(resp.ToolCalls, chat.ToolCall{ID: aws.ToString(b.Value.ToolUseId), Name: name, Arguments: args})
			}
		}
		resp.Content, resp.Reasoning = content.String(), reasoning.String()
	}
	resp.FinishReason = finishReason(out.StopReason, len(resp.ToolCalls) > 0)
	return resp, nil
}

// inputJSON returns a toolUse input as compact JSON text; a missing input
// is the empty object.
func inputJSON(doc document.Interface) (string, error) {
	if doc == nil {
		return "{}", nil
	}
	b, err := doc.MarshalSmithyDocument()
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "{}", nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "", err
	}
	if s := buf.String(); s != "" && s != "null" {
		return s, nil
	}
	return "{}", nil
}

// Stream calls ConverseStream and writes to w each text, reasoning or tool
// call delta as it arrives. It returns when the event stream ends; an
// exception event, or a stream without messageStop, is a
// *chat.UpstreamError. If emit fails, Stream returns its error unchanged.
// Returning closes the stream, which cancels the upstream request.
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	in, format, err := buildInput(req)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	// The stream's body is read under ctx: cancelling it aborts the read.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, err := p.client.ConverseStream(ctx, in)
	if err != nil {
		return nil, upstreamError(ctx, err)
	}
	stream := out.GetStream()
	defer stream.Close()
	return readStream(ctx, stream.Events(), stream.Err, w, format)
}

// streamBlock is a toolUse content block of a stream.
type streamBlock struct {
	call   int  // its index in the answer's tool calls
	format bool // the structured output's tool: its input is the content
	skip   bool // a second call of the format's tool: dropped
	input  bool // some input was written
}

// streamReasoning is a reasoningContent block of a stream: its text,
// signature and redacted bytes so far, a Thought at its contentBlockStop.
type streamReasoning struct {
	text, signature strings.Builder
	redacted        []byte
}

// thought returns r's Thought: its redacted bytes (base64), or its text
// and signature.
func (r *streamReasoning) thought() chat.Thought {
	if len(r.redacted) > 0 {
		return chat.Thought{Provider: Kind, Redacted: base64.StdEncoding.EncodeToString(r.redacted)}
	}
	return chat.Thought{Provider: Kind, Text: r.text.String(), Signature: r.signature.String()}
}

// readStream consumes events until the channel closes, then checks errFn
// for the error that ended the stream. format is the structured output's
// tool name, if any: its input is streamed as content.
func readStream(ctx context.Context, events <-chan types.ConverseStreamOutput, errFn func() error, w chat.Writer, format string) (*chat.Response, error) {
	resp := &chat.Response{}
	var content, reasoning strings.Builder
	var args []*strings.Builder // each tool call's arguments
	blocks := map[int32]*streamBlock{}
	reasonings := map[int32]*streamReasoning{}
	formatSeen, stopped := false, false
	var stopReason types.StopReason
read:
	for {
		var ev types.ConverseStreamOutput
		var ok bool
		select {
		case ev, ok = <-events:
		case <-ctx.Done():
			return nil, upstreamError(ctx, ctx.Err())
		}
		if !ok {
			break read
		}
		var d chat.Delta
		switch ev := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			tu, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
			if !ok {
				break
			}
			idx, name := aws.ToInt32(ev.Value.ContentBlockIndex), aws.ToString(tu.Value.Name)
			if format != "" && name == format {
				blocks[idx] = &streamBlock{format: true, skip: formatSeen}
				formatSeen = true
				break
			}
			n := len(resp.ToolCalls)
			id := aws.ToString(tu.Value.ToolUseId)
			resp.ToolCalls = append(resp.ToolCalls, chat.ToolCall{ID: id, Name: name})
			args = append(args, &strings.Builder{})
			blocks[idx] = &streamBlock{call: n}
			d.ToolCall = &chat.ToolCallDelta{Index: n, ID: id, Name: name}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch delta := ev.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				d.Content = delta.Value
			case *types.ContentBlockDeltaMemberReasoningContent:
				idx := aws.ToInt32(ev.Value.ContentBlockIndex)
				r := reasonings[idx]
				if r == nil {
					r = &streamReasoning{}
					reasonings[idx] = r
				}
				switch rc := delta.Value.(type) {
				case *types.ReasoningContentBlockDeltaMemberText:
					d.Reasoning = rc.Value
					r.text.WriteString(rc.Value)
				case *types.ReasoningContentBlockDeltaMemberSignature:
					r.signature.WriteString(rc.Value)
				case *types.ReasoningContentBlockDeltaMemberRedactedContent:
					r.redacted = append(r.redacted, rc.Value...)
				}
			case *types.ContentBlockDeltaMemberToolUse:
				b := blocks[aws.ToInt32(ev.Value.ContentBlockIndex)]
				if piece := aws.ToString(delta.Value.Input); b != nil && !b.skip && piece != "" {
					b.input = true
					d = b.delta(piece)
				}
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			idx := aws.ToInt32(ev.Value.ContentBlockIndex)
			// A reasoning block is whole: its signature closes it.
			if r := reasonings[idx]; r != nil {
				delete(reasonings, idx)
				t := r.thought()
				resp.Thoughts = append(resp.Thoughts, t)
				d.Thought = &t
			}
			// A tool without parameters may stream no input: its
			// arguments are still a JSON object.
			if b := blocks[idx]; b != nil && !b.skip && !b.input {
				b.input = true
				d = b.delta("{}")
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stopReason = ev.Value.StopReason
			stopped = true
		case *types.ConverseStreamOutputMemberMetadata:
			resp.Usage, resp.ServiceTier = usage(ev.Value.Usage), serviceTier(ev.Value.ServiceTier)
		}
		// messageStart, other contentBlockStart/Stop and unknown events carry no chat data.
		if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil && d.Thought == nil {
			continue
		}
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		if d.ToolCall != nil {
			args[d.ToolCall.Index].WriteString(d.ToolCall.Arguments)
		}
		// One event at a time from the SDK: each delta is flushed at once.
		if err := w.Delta(d); err != nil {
			return nil, err
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
	}
	if err := errFn(); err != nil {
		return nil, upstreamError(ctx, err)
	}
	if !stopped {
		return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped,
			Message: "stream ended before messageStop", Err: io.ErrUnexpectedEOF}
	}
	resp.Content, resp.Reasoning = content.String(), reasoning.String()
	for i := range resp.ToolCalls {
		resp.ToolCalls[i].Arguments = args[i].String()
	}
	resp.FinishReason = finishReason(stopReason, len(resp.ToolCalls) > 0)
	return resp, nil
}

// delta is the chat delta for a piece of b's input.
func (b *streamBlock) delta(piece string) chat.Delta {
	if b.format {
		return chat.Delta{Content: piece}
	}
	return chat.Delta{ToolCall: &chat.ToolCallDelta{Index: b.call, Arguments: piece}}
}

// usage converts Bedrock's token usage: inputTokens excludes the tokens
// read from the prompt cache and those written to it, which are added to
// make the prompt tokens the whole input; cacheDetails splits the writes
// by lifetime (5 minutes, 1 hour), and writes it does not split are
// 5-minute ones. Bedrock gives no count of reasoning tokens (they are part
// of outputTokens).
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html
func usage(u *types.TokenUsage) chat.Usage {
	if u == nil {
		return chat.Usage{}
	}
	reads, writes := int(aws.ToInt32(u.CacheReadInputTokens)), int(aws.ToInt32(u.CacheWriteInputTokens))
	var split, writes1h int
	for _, d := range u.CacheDetails {
		n := int(aws.ToInt32(d.InputTokens))
		split += n
		if d.Ttl == types.CacheTTLOneHour {
			writes1h += n
		}
	}
	writes = max(writes, split)
	prompt := int(aws.ToInt32(u.InputTokens)) + reads + writes
	completion := int(aws.ToInt32(u.OutputTokens))
	return chat.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		CachedTokens: reads, CacheWriteTokens: writes - writes1h, CacheWrite1hTokens: writes1h}
}

// serviceTier is the service tier Bedrock says it served at (priority,
// default, flex, reserved); "" if it said none.
func serviceTier(t *types.ServiceTier) string {
	if t == nil {
		return ""
	}
	return string(t.Type)
}

// finishReason maps a stopReason to an OpenAI finish_reason; calls says
// whether the answer has tool calls (not counting a structured output's
// forced tool, which finishes with stop).
func finishReason(s types.StopReason, calls bool) string {
	switch s {
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return chat.FinishLength
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return chat.FinishContentFilter
	case types.StopReasonToolUse:
		if calls {
			return chat.FinishToolCalls
		}
		return chat.FinishStop
	default: // end_turn, stop_sequence, ...
		return chat.FinishStop
	}
}

// upstreamError classifies an SDK error: ctx's own error if ctx was
// cancelled (not an upstream failure), UpstreamTimeout past a deadline, and
// by the API error's code otherwise, with the status the code stands for
// (errorStatuses) in Status: an exception event inside a 200 stream has no
// HTTP status of its own. Retry-After is the HTTP answer's, if any.
func upstreamError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamTimeout, Message: "upstream timed out", Err: err}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", Name, ctxErr)
	}
	e := &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamFailed, Err: err}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
		if re.Response != nil && re.Response.Response != nil {
			e.RetryAfter = chat.RetryAfter(re.Response.Header, time.Now())
		}
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		e.Message = "request failed"
		return e
	}
	e.Message = ae.ErrorMessage()
	code := ae.ErrorCode()
	if s, ok := errorStatuses[code]; ok {
		e.Status = s
	}
	switch code {
	case "ValidationException", "ResourceNotFoundException":
		e.Kind = chat.UpstreamBadRequest
	case "ThrottlingException", "ServiceQuotaExceededException":
		e.Kind = chat.UpstreamRateLimited
	case "ServiceUnavailableException", "ModelNotReadyException":
		e.Kind = chat.UpstreamUnavailable
	case "ModelTimeoutException":
		e.Kind = chat.UpstreamTimeout
	case "ModelErrorException", "ModelStreamErrorException":
		// The model behind Bedrock failed (HTTP 424): its own status, if
		// it says one, tells the client's fault (4xx) from its own.
		e.Status = http.StatusBadGateway
		if s := originalStatus(err); s >= 400 && s <= 599 {
			e.Status = s
		}
		e.Kind = chat.StatusKind(e.Status)
	default: // AccessDeniedException (our credentials), InternalServerException, ...
		e.Kind = chat.UpstreamFailed
	}
	if e.Status == 0 { // an unknown exception inside a stream
		e.Status = http.StatusBadGateway
	}
	return e
}

// errorStatuses are the HTTP statuses of the Bedrock runtime's errors, as
// its API reference lists them (API_runtime_Converse.html,
// API_runtime_ConverseStreamOutput.html): what an exception event inside a
// 200 stream stands for. ServiceQuotaExceededException is sent as 400
// but is a quota ("resubmit your request later"): it stands for 429.
var errorStatuses = map[string]int{
	"AccessDeniedException":         http.StatusForbidden,
	"InternalServerException":       http.StatusInternalServerError,
	"ModelNotReadyException":        http.StatusTooManyRequests,
	"ModelTimeoutException":         http.StatusRequestTimeout,
	"ResourceNotFoundException":     http.StatusNotFound,
	"ServiceQuotaExceededException": http.StatusTooManyRequests,
	"ServiceUnavailableException":   http.StatusServiceUnavailable,
	"ThrottlingException":           http.StatusTooManyRequests,
	"ValidationException":           http.StatusBadRequest,
}

// originalStatus returns the status the model itself answered with, of a
// ModelErrorException or ModelStreamErrorException; 0 if none.
func originalStatus(err error) int {
	var me *types.ModelErrorException
	var mse *types.ModelStreamErrorException
	switch {
	case errors.As(err, &me) && me.OriginalStatusCode != nil:
		return int(*me.OriginalStatusCode)
	case errors.As(err, &mse) && mse.OriginalStatusCode != nil:
		return int(*mse.OriginalStatusCode)
	}
	return 0
}

// emptySchema is the input schema of a tool declared only because the
// conversation used it (see buildInput).
var emptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

// formatToolDescription describes a structured output's tool when the
// response_format has no description.
const formatToolDescription = "Give your answer as the input of this tool."

// buildInput translates req to a ConverseStream input (Converse takes the
// same fields). format is the name of the forced tool that carries a
// structured output, "" without response_format.
func buildInput(req *chat.Request) (in *bedrockruntime.ConverseStreamInput, format string, err error) {
	model := req.Model
	if model == nil {
		model = &catalog.Model{}
	}
	in = &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model.Upstream)}
	var used []string   // tool names in the conversation, in order
	lastCalls := false  // the last assistant message calls tools
	lastThinks := false // ... and starts with its signed thinking
	in.System = system(req.Messages)
	for _, m := range req.Messages {
		if m.Role == chat.RoleSystem {
			continue
		}
		role := types.ConversationRoleUser
		var blocks []types.ContentBlock
		switch m.Role {
		case chat.RoleTool:
			// A tool's result is a toolResult block in a user turn.
			b, err := toolResult(m)
			if err != nil {
				return nil, "", err
			}
			blocks = []types.ContentBlock{b}
			for _, p := range m.Parts {
				if p.Cache != nil { // the result's first breakpoint marks it whole
					blocks = append(blocks, &types.ContentBlockMemberCachePoint{Value: cachePoint(p.Cache)})
					break
				}
			}
			if m.ToolName != "" {
				used = append(used, m.ToolName)
			}
		case chat.RoleAssistant:
			role = types.ConversationRoleAssistant
			if blocks, err = contentBlocks(m.Parts); err != nil {
				return nil, "", err
			}
			thoughts := reasoningBlocks(m.Thoughts)
			blocks = append(thoughts, blocks...)
			for _, tc := range m.ToolCalls {
				input, err := jsonDocument(tc.Arguments, "{}")
				if err != nil {
					return nil, "", fmt.Errorf("the arguments of tool call %q must be a JSON object: %w", tc.ID, err)
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(chat.SafeCallID(tc.ID)), Name: aws.String(tc.Name), Input: input}})
				used = append(used, tc.Name)
			}
			if m.Cache != nil && len(m.ToolCalls) > 0 {
				blocks = append(blocks, &types.ContentBlockMemberCachePoint{Value: cachePoint(m.Cache)})
			}
			lastCalls, lastThinks = len(m.ToolCalls) > 0, len(thoughts) > 0
		default:
			if blocks, err = contentBlocks(m.Parts); err != nil {
				return nil, "", err
			}
		}
		if len(blocks) == 0 {
			continue
		}
		// Converse requires alternating roles: merge consecutive messages
		// (consecutive tool results become one user turn).
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	if len(in.Messages) == 0 {
		return nil, "", errors.New("at least one user or assistant message with content is required")
	}

	in.ToolConfig, format, err = toolConfig(req, used)
	if err != nil {
		return nil, "", err
	}
	forced := false
	if in.ToolConfig != nil {
		switch in.ToolConfig.ToolChoice.(type) {
		case *types.ToolChoiceMemberAny, *types.ToolChoiceMemberTool:
			forced = true
		}
	}

	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
		if model.MaxTokens > 0 && model.MaxTokens < maxTokens {
			maxTokens = model.MaxTokens
		}
	}
	cfg := &types.InferenceConfiguration{StopSequences: req.Stop}
	if req.Temperature != nil {
		cfg.Temperature = aws.Float32(float32(*req.Temperature))
	}
	if req.TopP != nil {
		cfg.TopP = aws.Float32(float32(*req.TopP))
	}
	// Claude refuses extended thinking with a forced tool (toolChoice any
	// or tool: tool_choice required or a function, or a structured
	// output), and with thinking on, the last assistant message, when it
	// calls tools, must start with the thinking block that led to the
	// calls: the message carries it (chat.Message.Thoughts) when its
	// client sent it back; when it does not (a chat client's), the
	// request is sent without thinking rather than refused by the model.
	extra := map[string]any{}
	claudeModel := strings.Contains(model.Upstream, "anthropic.claude")
	if req.TopK != nil {
		if !claudeModel {
			return nil, "", errors.New("top_k is taken by Claude models only on Bedrock")
		}
		extra["top_k"] = *req.TopK
	}
	if req.ReasoningEffort != "" && !forced && (!lastCalls || lastThinks) {
		th := map[string]any{}
		if req.ReasoningDisplay != "" {
			th["display"] = req.ReasoningDisplay
		}
		switch model.Thinking {
		case catalog.ThinkingBudget:
			budget, ok := thinkingBudgets[req.ReasoningEffort]
			if !ok {
				budget = thinkingBudgets["medium"]
			}
			if req.ReasoningBudget > 0 {
				budget = req.ReasoningBudget // the client's own (thinking.budget_tokens)
			}
			th["type"], th["budget_tokens"] = "enabled", budget
			extra["thinking"] = th
			delete(extra, "top_k") // not with thinking
			// maxTokens counts thinking and must exceed the budget.
			if maxTokens <= budget {
				maxTokens += budget
			}
			if model.MaxTokens > budget && maxTokens > model.MaxTokens {
				maxTokens = model.MaxTokens
			}
			cfg.Temperature, cfg.TopP = nil, nil // Claude rejects them with thinking
		case catalog.ThinkingAdaptive:
			th["type"] = "adaptive"
			extra["thinking"] = th
			extra["output_config"] = map[string]any{"effort": req.ReasoningEffort}
			delete(extra, "top_k")
			cfg.Temperature, cfg.TopP = nil, nil
		}
	}
	if len(extra) > 0 {
		in.AdditionalModelRequestFields = document.NewLazyDocument(extra)
	}
	if extra["thinking"] == nil {
		// Signed reasoning is sent back only with thinking on, where it
		// is needed; without, a turn is its text and tool calls.
		in.Messages = withoutReasoning(in.Messages)
	}
	cfg.MaxTokens = aws.Int32(int32(min(maxTokens, 1<<30)))
	in.InferenceConfig = cfg
	return in, format, nil
}

// reasoningBlocks returns the reasoningContent blocks of an assistant
// message's thoughts: Claude's (this adapter's kind and Anthropic's),
// signed (reasoningText with its signature) or redacted (redactedContent:
// the thought's Redacted is base64, as this adapter writes it and as
// Anthropic's redacted_thinking data is); a thought without a signature,
// or another provider's, is left out.
func reasoningBlocks(thoughts []chat.Thought) []types.ContentBlock {
	var out []types.ContentBlock
	for _, t := range thoughts {
		if t.Provider != Kind && t.Provider != "anthropic" {
			continue
		}
		var rc types.ReasoningContentBlock
		switch {
		case t.Redacted != "":
			b, err := base64.StdEncoding.DecodeString(t.Redacted)
			if err != nil {
				continue // not a redacted block Bedrock could have made
			}
			rc = &types.ReasoningContentBlockMemberRedactedContent{Value: b}
		case t.Signature != "":
			rc = &types.ReasoningContentBlockMemberReasoningText{Value: types.ReasoningTextBlock{Text: aws.String(t.Text), Signature: aws.String(t.Signature)}}
		default:
			continue
		}
		out = append(out, &types.ContentBlockMemberReasoningContent{Value: rc})
	}
	return out
}

// withoutReasoning returns msgs without their reasoningContent blocks; a
// turn left empty is dropped, and the turns it separated merged.
func withoutReasoning(msgs []types.Message) []types.Message {
	out := msgs[:0]
	for _, m := range msgs {
		m.Content = slices.DeleteFunc(m.Content, func(b types.ContentBlock) bool {
			_, ok := b.(*types.ContentBlockMemberReasoningContent)
			return ok
		})
		if len(m.Content) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Content = append(out[n-1].Content, m.Content...)
			continue
		}
		out = append(out, m)
	}
	return out
}

// toolConfig builds the toolConfig: req's tools, the structured output's
// forced tool (format is its name), and the tools used in the conversation
// that neither declares, with an empty object schema (Converse refuses
// toolUse and toolResult blocks without a toolConfig that names them). It
// is nil when there is no tool at all.
func toolConfig(req *chat.Request, used []string) (cfg *types.ToolConfiguration, format string, err error) {
	var tools []types.Tool
	declared := map[string]bool{}
	add := func(name, description string, schema document.Interface) {
		spec := types.ToolSpecification{Name: aws.String(name), InputSchema: &types.ToolInputSchemaMemberJson{Value: schema}}
		if description != "" {
			spec.Description = aws.String(description)
		}
		tools = append(tools, &types.ToolMemberToolSpec{Value: spec})
		declared[name] = true
	}
	for _, t := range req.Tools {
		schema, err := jsonDocument(string(t.Parameters), `{"type":"object","properties":{}}`)
		if err != nil {
			return nil, "", fmt.Errorf("the parameters of tool %q must be a JSON Schema object: %w", t.Name, err)
		}
		add(t.Name, t.Description, schema)
		if t.Cache != nil {
			tools = append(tools, &types.ToolMemberCachePoint{Value: cachePoint(t.Cache)})
		}
	}
	var choice types.ToolChoice
	if rf := req.ResponseFormat; rf != nil {
		format = "json"
		raw, description := `{"type":"object"}`, rf.Description
		if rf.Type == chat.FormatJSONSchema {
			if rf.Name != "" {
				format = rf.Name
			}
			raw = string(rf.Schema)
		}
		if declared[format] {
			return nil, "", fmt.Errorf("response_format %q has the name of a tool", format)
		}
		schema, err := jsonDocument(raw, `{"type":"object"}`)
		if err != nil {
			return nil, "", fmt.Errorf("the response_format schema must be a JSON Schema object: %w", err)
		}
		if description == "" {
			description = formatToolDescription
		}
		add(format, description, schema)
		choice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(format)}}
	} else if len(req.Tools) > 0 {
		switch req.ToolChoice.Mode {
		case chat.ToolRequired:
			choice = &types.ToolChoiceMemberAny{}
		case chat.ToolFunction:
			choice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(req.ToolChoice.Name)}}
		case chat.ToolNone: // refused by the gateway (Features.ToolChoiceNone)
			return nil, "", errors.New(`tool_choice "none" is not supported with tools by this model's provider`)
		}
		// auto is Bedrock's default: no toolChoice.
	}
	// Tools named only in the conversation are declared so that its tool
	// turns are accepted; with no tools in the request (tool_choice "none"
	// included) the model may still call them.
	for _, name := range used {
		if !declared[name] {
			add(name, "", document.NewLazyDocument(emptySchema))
		}
	}
	if len(tools) == 0 {
		return nil, "", nil
	}
	return &types.ToolConfiguration{Tools: tools, ToolChoice: choice}, format, nil
}

// toolResult is a tool message as a toolResult block; an empty result is
// sent as "(no output)", since Converse refuses empty text blocks.
func toolResult(m chat.Message) (types.ContentBlock, error) {
	var content []types.ToolResultContentBlock
	if t := m.Text(); t != "" {
		content = append(content, &types.ToolResultContentBlockMemberText{Value: t})
	}
	for _, p := range m.Parts {
		if p.Image == nil {
			continue
		}
		b, err := imageBlock(p.Image)
		if err != nil {
			return nil, err
		}
		content = append(content, &types.ToolResultContentBlockMemberImage{Value: b})
	}
	if len(content) == 0 {
		content = append(content, &types.ToolResultContentBlockMemberText{Value: "(no output)"})
	}
	b := types.ToolResultBlock{ToolUseId: aws.String(chat.SafeCallID(m.ToolCallID)), Content: content}
	if m.ToolError {
		b.Status = types.ToolResultStatusError
	}
	return &types.ContentBlockMemberToolResult{Value: b}, nil
}

// jsonDocument decodes a JSON object (blank text is def) into a document
// for the SDK, numbers kept as they were written. It checks that the SDK
// can encode it, since the SDK's serializer drops encoding errors.
func jsonDocument(text, def string) (document.Interface, error) {
	if strings.TrimSpace(text) == "" {
		text = def
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("not a JSON object")
	}
	doc := document.NewLazyDocument(smithyNumbers(v))
	if _, err := doc.MarshalSmithyDocument(); err != nil {
		return nil, err
	}
	return doc, nil
}

// smithyNumbers replaces the json.Numbers in v (which the SDK's document
// encoder would write as strings) with smithy document numbers.
func smithyNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return smithydocument.Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = smithyNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = smithyNumbers(e)
		}
	}
	return v
}

// imageFormats maps media types to Bedrock image formats.
var imageFormats = map[string]types.ImageFormat{
	"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg, "image/jpg": types.ImageFormatJpeg,
	"image/gif": types.ImageFormatGif, "image/webp": types.ImageFormatWebp,
}

// contentBlocks translates message parts, a part's cache breakpoint as a
// cachePoint block after its block; empty text parts are dropped.
func contentBlocks(parts []chat.Part) ([]types.ContentBlock, error) {
	var out []types.ContentBlock
	for _, p := range parts {
		switch {
		case p.Image == nil:
			if p.Text == "" {
				continue
			}
			out = append(out, &types.ContentBlockMemberText{Value: p.Text})
		default:
			b, err := imageBlock(p.Image)
			if err != nil {
				return nil, err
			}
			out = append(out, &types.ContentBlockMemberImage{Value: b})
		}
		if p.Cache != nil {
			out = append(out, &types.ContentBlockMemberCachePoint{Value: cachePoint(p.Cache)})
		}
	}
	return out, nil
}

// system returns the system blocks of msgs: one text block per system
// message, or, when a part carries a cache breakpoint, one per non-empty
// part, each breakpoint a cachePoint block after its part's.
func system(msgs []chat.Message) []types.SystemContentBlock {
	marked := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			marked = marked || (m.Role == chat.RoleSystem && p.Cache != nil)
		}
	}
	var out []types.SystemContentBlock
	for _, m := range msgs {
		if m.Role != chat.RoleSystem {
			continue
		}
		if !marked {
			if t := m.Text(); t != "" {
				out = append(out, &types.SystemContentBlockMemberText{Value: t})
			}
			continue
		}
		for _, p := range m.Parts {
			if p.Image != nil || p.Text == "" {
				continue
			}
			out = append(out, &types.SystemContentBlockMemberText{Value: p.Text})
			if p.Cache != nil {
				out = append(out, &types.SystemContentBlockMemberCachePoint{Value: cachePoint(p.Cache)})
			}
		}
	}
	return out
}

// cachePoint is the cachePoint block of breakpoint c: the default type,
// with a TTL only for the one-hour lifetime (without one, Bedrock's
// default, five minutes, applies).
func cachePoint(c *chat.CacheControl) types.CachePointBlock {
	b := types.CachePointBlock{Type: types.CachePointTypeDefault}
	if c.TTL == chat.CacheTTL1h {
		b.Ttl = types.CacheTTLOneHour
	}
	return b
}

// claudeVersion matches the family and version of a Claude model id on
// Bedrock: anthropic.claude-sonnet-4-5-20250929-v1:0 (4.5),
// us.anthropic.claude-opus-4-20250514-v1:0 (4); not the 3.x ids
// (claude-3-7-sonnet-...), which name the version first.
var claudeVersion = regexp.MustCompile(`anthropic\.claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:[-:@]|$)`)

// CacheRules reports which Bedrock models take prompt-cache breakpoints
// (cachePoint blocks), by the model's Bedrock id, as the Bedrock user
// guide's prompt caching page lists them: Claude models up to 4, on
// tools too, with the one-hour lifetime from Claude 4.5 on (Sonnet,
// Haiku, Opus 4.5 were the first); Amazon Nova models up to 4, in system
// and messages only (Nova caches no tools). Another model (Llama,
// Mistral, an application inference profile's ARN) gets none: they are
// removed, as for providers that cache on their own.
func (p *Provider) CacheRules(m *catalog.Model) chat.CacheRules {
	id := m.Upstream
	switch {
	case strings.Contains(id, "anthropic.claude"):
		r := chat.CacheRules{Breakpoints: MaxCacheBreakpoints, Tools: true}
		if v := claudeVersion.FindStringSubmatch(id); v != nil {
			major, _ := strconv.Atoi(v[1])
			minor, _ := strconv.Atoi(v[2]) // "" is 0
			r.TTL1h = major > 4 || (major == 4 && minor >= 5)
		}
		return r
	case strings.Contains(id, "amazon.nova"):
		return chat.CacheRules{Breakpoints: MaxCacheBreakpoints}
	}
	return chat.CacheRules{}
}

// imageBlock translates an image with bytes.
func imageBlock(img *chat.Image) (types.ImageBlock, error) {
	if len(img.Data) == 0 {
		return types.ImageBlock{}, errors.New("image URLs are not supported by this model's provider; send the image as a data URI")
	}
	f, ok := imageFormats[img.MediaType]
	if !ok {
		return types.ImageBlock{}, fmt.Errorf("image type %q is not supported; use png, jpeg, gif or webp", img.MediaType)
	}
	return types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: img.Data}}, nil
}
