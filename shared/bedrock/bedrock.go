// Package bedrock is the chat.Provider for Amazon Bedrock's Converse and
// ConverseStream APIs, through aws-sdk-go-v2's bedrockruntime client: system
// blocks, text and image (bytes) blocks, inferenceConfig, Claude extended
// thinking through additionalModelRequestFields, and usage from the stream's
// metadata event.
//
// Bedrock needs image bytes: Provider implements NeedsImageBytes, and the
// gateway fetches image URLs before calling it.
//
// A Provider is safe for concurrent use (the SDK client is).
package bedrock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// Name is the provider name used in errors.
const Name = "bedrock"

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

var _ chat.Provider = (*Provider)(nil)

// New returns a Provider using client. The client's retry settings apply;
// a gateway usually wants few retries (RetryMaxAttempts) so that a client's
// timeout is not spent waiting on backoff.
func New(client ConverseStreamer) *Provider { return &Provider{client: client} }

// NeedsImageBytes reports that Bedrock takes images as bytes only: the
// gateway must fetch image URLs into Image.Data before calling the Provider.
func (p *Provider) NeedsImageBytes() bool { return true }

// Complete calls Converse. Every upstream failure is a *chat.UpstreamError;
// a cancelled ctx returns an error wrapping ctx.Err().
func (p *Provider) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	in, err := buildInput(req)
	if err != nil {
		return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamBadRequest, Message: err.Error(), Err: err}
	}
	out, err := p.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: in.ModelId, Messages: in.Messages, System: in.System, InferenceConfig: in.InferenceConfig,
		AdditionalModelRequestFields: in.AdditionalModelRequestFields,
	})
	if err != nil {
		return nil, upstreamError(ctx, err)
	}
	resp := &chat.Response{FinishReason: finishReason(out.StopReason), Usage: usage(out.Usage)}
	if msg, ok := out.Output.(*types.ConverseOutputMemberMessage); ok {
		var content, reasoning strings.Builder
		for _, b := range msg.Value.Content {
			switch b := b.(type) {
			case *types.ContentBlockMemberText:
				content.WriteString(b.Value)
			case *types.ContentBlockMemberReasoningContent:
				if rt, ok := b.Value.(*types.ReasoningContentBlockMemberReasoningText); ok {
					reasoning.WriteString(aws.ToString(rt.Value.Text))
				}
			}
		}
		resp.Content, resp.Reasoning = content.String(), reasoning.String()
	}
	return resp, nil
}

// Stream calls ConverseStream and writes to w each text or reasoning
// delta as it arrives. It returns when the event stream ends; an exception
// event, or a stream without messageStop, is a *chat.UpstreamError. If emit
// fails, Stream returns its error unchanged. Returning closes the stream,
// which cancels the upstream request.
func (p *Provider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	in, err := buildInput(req)
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
	return readStream(ctx, stream.Events(), stream.Err, w)
}

// readStream consumes events until the channel closes, then checks errFn
// for the error that ended the stream.
func readStream(ctx context.Context, events <-chan types.ConverseStreamOutput, errFn func() error, w chat.Writer) (*chat.Response, error) {
	resp := &chat.Response{}
	var content, reasoning strings.Builder
	stopped := false
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
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch delta := ev.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				d.Content = delta.Value
			case *types.ContentBlockDeltaMemberReasoningContent:
				if t, ok := delta.Value.(*types.ReasoningContentBlockDeltaMemberText); ok {
					d.Reasoning = t.Value
				}
				// signature and redactedContent deltas are not chat text.
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			resp.FinishReason = finishReason(ev.Value.StopReason)
			stopped = true
		case *types.ConverseStreamOutputMemberMetadata:
			resp.Usage = usage(ev.Value.Usage)
		}
		// messageStart, contentBlockStart/Stop and unknown events carry no chat data.
		if d.Content == "" && d.Reasoning == "" {
			continue
		}
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
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
		return nil, &chat.UpstreamError{Provider: Name, Kind: chat.UpstreamFailed, Message: "stream ended before messageStop"}
	}
	resp.Content, resp.Reasoning = content.String(), reasoning.String()
	return resp, nil
}

// usage converts Bedrock's token usage; cache reads and writes count as
// prompt tokens.
func usage(u *types.TokenUsage) chat.Usage {
	if u == nil {
		return chat.Usage{}
	}
	prompt := int(aws.ToInt32(u.InputTokens) + aws.ToInt32(u.CacheReadInputTokens) + aws.ToInt32(u.CacheWriteInputTokens))
	completion := int(aws.ToInt32(u.OutputTokens))
	return chat.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// finishReason maps a stopReason to an OpenAI finish_reason.
func finishReason(s types.StopReason) string {
	switch s {
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return chat.FinishLength
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return chat.FinishContentFilter
	default: // end_turn, stop_sequence, tool_use, ...
		return chat.FinishStop
	}
}

// upstreamError classifies an SDK error: ctx's own error if ctx was
// cancelled (not an upstream failure), UpstreamTimeout past a deadline, and
// by the API error's code otherwise.
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
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		e.Message = "request failed"
		return e
	}
	e.Message = ae.ErrorMessage()
	switch ae.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException":
		e.Kind = chat.UpstreamBadRequest
		if e.Status == 0 {
			e.Status = http.StatusBadRequest
		}
	case "ThrottlingException", "ServiceQuotaExceededException":
		e.Kind = chat.UpstreamRateLimited
		if e.Status == 0 {
			e.Status = http.StatusTooManyRequests
		}
	case "ServiceUnavailableException", "ModelNotReadyException":
		e.Kind = chat.UpstreamUnavailable
	case "ModelTimeoutException":
		e.Kind = chat.UpstreamTimeout
	default: // AccessDeniedException (our credentials), InternalServerException, ModelErrorException, ModelStreamErrorException...
		e.Kind = chat.UpstreamFailed
	}
	return e
}

// buildInput translates req to a ConverseStream input (Converse takes the
// same fields).
func buildInput(req *chat.Request) (*bedrockruntime.ConverseStreamInput, error) {
	model := req.Model
	if model == nil {
		model = &catalog.Model{}
	}
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model.Upstream)}
	for _, m := range req.Messages {
		if m.Role == chat.RoleSystem {
			if t := m.Text(); t != "" {
				in.System = append(in.System, &types.SystemContentBlockMemberText{Value: t})
			}
			continue
		}
		blocks, err := contentBlocks(m.Parts)
		if err != nil {
			return nil, err
		}
		if len(blocks) == 0 {
			continue
		}
		role := types.ConversationRoleUser
		if m.Role == chat.RoleAssistant {
			role = types.ConversationRoleAssistant
		}
		// Converse requires alternating roles: merge consecutive messages.
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	if len(in.Messages) == 0 {
		return nil, errors.New("at least one user or assistant message with content is required")
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
	if req.ReasoningEffort != "" {
		switch model.Thinking {
		case catalog.ThinkingBudget:
			budget, ok := thinkingBudgets[req.ReasoningEffort]
			if !ok {
				budget = thinkingBudgets["medium"]
			}
			in.AdditionalModelRequestFields = document.NewLazyDocument(map[string]any{
				"thinking": map[string]any{"type": "enabled", "budget_tokens": budget},
			})
			// maxTokens counts thinking and must exceed the budget.
			if maxTokens <= budget {
				maxTokens += budget
			}
			if model.MaxTokens > budget && maxTokens > model.MaxTokens {
				maxTokens = model.MaxTokens
			}
			cfg.Temperature, cfg.TopP = nil, nil // Claude rejects them with thinking
		case catalog.ThinkingAdaptive:
			in.AdditionalModelRequestFields = document.NewLazyDocument(map[string]any{
				"thinking":      map[string]any{"type": "adaptive"},
				"output_config": map[string]any{"effort": req.ReasoningEffort},
			})
			cfg.Temperature, cfg.TopP = nil, nil
		}
	}
	cfg.MaxTokens = aws.Int32(int32(min(maxTokens, 1<<30)))
	in.InferenceConfig = cfg
	return in, nil
}

// imageFormats maps media types to Bedrock image formats.
var imageFormats = map[string]types.ImageFormat{
	"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg, "image/jpg": types.ImageFormatJpeg,
	"image/gif": types.ImageFormatGif, "image/webp": types.ImageFormatWebp,
}

// contentBlocks translates message parts; empty text parts are dropped.
func contentBlocks(parts []chat.Part) ([]types.ContentBlock, error) {
	var out []types.ContentBlock
	for _, p := range parts {
		switch {
		case p.Image == nil:
			if p.Text != "" {
				out = append(out, &types.ContentBlockMemberText{Value: p.Text})
			}
		case len(p.Image.Data) > 0:
			f, ok := imageFormats[p.Image.MediaType]
			if !ok {
				return nil, fmt.Errorf("image type %q is not supported; use png, jpeg, gif or webp", p.Image.MediaType)
			}
			out = append(out, &types.ContentBlockMemberImage{Value: types.ImageBlock{
				Format: f, Source: &types.ImageSourceMemberBytes{Value: p.Image.Data}}})
		default:
			return nil, errors.New("image URLs are not supported by this model's provider; send the image as a data URI")
		}
	}
	return out, nil
}
