package chat

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// This file turns the optional fields of Params (tools, tool_choice,
// response_format, the sampling penalties and the OpenAI-only fields) into
// a Request, and refuses what cannot be honoured, each refusal a 400 that
// names the field.

// toolName is what OpenAI allows as a function name (and what Anthropic,
// Gemini and Bedrock accept).
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// emptySchema is the parameters schema of a function that takes none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Refuse is the 400 unsupported_parameter for a field Genway or the
// model's provider cannot honour, naming it (param) and saying that
// nothing was sent upstream.
func Refuse(param, format string, args ...any) error {
	return &apierr.Error{Kind: apierr.Invalid, Code: "unsupported_parameter", Param: param,
		Message: fmt.Sprintf(format, args...) + " The request was not sent upstream."}
}

// isSet reports whether a raw field was sent with a value (not absent, not
// null).
func isSet(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// unsupported refuses the fields no provider behind Genway can honour,
// naming the field: answering as if they were not there would change the
// answer the client expects. Their default forms pass (n 1, logprobs
// false, store false, modalities ["text"], function_call "none"/"auto").
func unsupported(p *Params) error {
	switch {
	case isSet(p.Functions):
		return Refuse("functions", "The deprecated functions field is not supported; send tools.")
	case isSet(p.FunctionCall) && !slices.Contains([]string{`"none"`, `"auto"`}, string(bytes.TrimSpace(p.FunctionCall))):
		return Refuse("function_call", "The deprecated function_call field is not supported; send tool_choice.")
	case p.N != nil && *p.N != 1:
		return Refuse("n", "More than one choice (n) is not supported.")
	case p.Logprobs != nil && *p.Logprobs:
		return Refuse("logprobs", "logprobs are not supported.")
	case p.TopLogprobs != nil:
		return Refuse("top_logprobs", "logprobs are not supported.")
	case p.Store != nil && *p.Store:
		return Refuse("store", "Genway does not store completions (store must be false).")
	case len(p.Modalities) > 0 && !slices.Equal(p.Modalities, []string{"text"}):
		return Refuse("modalities", "Only text output is supported.")
	case isSet(p.Audio):
		return Refuse("audio", "Audio output is not supported.")
	case isSet(p.Prediction):
		return Refuse("prediction", "Predicted outputs are not supported.")
	case isSet(p.WebSearchOptions):
		return Refuse("web_search_options", "Web search is not supported.")
	}
	return nil
}

// sampling copies the penalties, logit_bias, user and the OpenAI-only
// fields into req, checking ranges.
func sampling(p *Params, req *Request) error {
	for _, f := range []struct {
		param string
		v     *float64
	}{{"presence_penalty", p.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty}} {
		if f.v != nil && (*f.v < -2 || *f.v > 2) {
			return apierr.Invalidf(f.param, "invalid_value", "%s must be between -2 and 2", f.param)
		}
	}
	for k, v := range p.LogitBias {
		if v < -100 || v > 100 {
			return apierr.Invalidf("logit_bias", "invalid_value", "logit_bias[%q] must be between -100 and 100", k)
		}
	}
	req.PresencePenalty, req.FrequencyPenalty = p.PresencePenalty, p.FrequencyPenalty
	if len(p.LogitBias) > 0 {
		req.LogitBias = p.LogitBias
	}
	req.User = p.User
	req.ServiceTier, req.Verbosity, req.PromptCacheKey, req.SafetyIdentifier = p.ServiceTier, p.Verbosity, p.PromptCacheKey, p.SafetyIdentifier
	req.verbosityHint = p.VerbosityHint
	req.ParallelToolCalls = p.ParallelToolCalls
	return nil
}

// tools decodes tools and tool_choice into req.
func tools(p *Params, req *Request, m *catalog.Model) error {
	if len(p.Tools) > 0 && (m.Capabilities == nil || !m.Capabilities.Tools) {
		return apierr.Invalidf("tools", "model_not_tool_capable", "model %q does not take tools", m.ID)
	}
	seen := map[string]bool{}
	for i, t := range p.Tools {
		at := func(f string) string { return fmt.Sprintf("tools[%d]%s", i, f) }
		if t.Type != "function" {
			if t.Type == "" {
				return apierr.Invalidf(at(".type"), "missing_field", "type is required in a tool")
			}
			return Refuse(at(".type"), "Only function tools are supported, not %q.", t.Type)
		}
		if t.Function == nil {
			return apierr.Invalidf(at(".function"), "missing_field", "function is required in a function tool")
		}
		f := t.Function
		if !toolName.MatchString(f.Name) {
			return apierr.Invalidf(at(".function.name"), "invalid_value", "a function name is 1 to 64 letters, digits, _ or -, not %q", f.Name)
		}
		if seen[f.Name] {
			return apierr.Invalidf(at(".function.name"), "invalid_value", "the function %q is defined twice", f.Name)
		}
		seen[f.Name] = true
		tool := Tool{Name: f.Name, Description: f.Description, Parameters: emptySchema, Strict: f.Strict != nil && *f.Strict}
		var err error
		if tool.Cache, err = toolCache(t, i); err != nil {
			return err
		}
		if isSet(f.Parameters) {
			if !isObject(f.Parameters) {
				return apierr.Invalidf(at(".function.parameters"), "invalid_value", "parameters must be a JSON Schema object")
			}
			tool.Parameters = f.Parameters
		}
		req.Tools = append(req.Tools, tool)
	}
	if !isSet(p.ToolChoice) {
		return nil
	}
	var mode string
	if err := json.Unmarshal(p.ToolChoice, &mode); err == nil {
		switch mode {
		case ToolAuto, ToolNone:
		case ToolRequired:
			if len(req.Tools) == 0 {
				return apierr.Invalidf("tool_choice", "invalid_value", "tool_choice %q needs tools", mode)
			}
		default:
			return apierr.Invalidf("tool_choice", "invalid_value", "tool_choice must be none, auto, required or a function, not %q", mode)
		}
		req.ToolChoice = ToolChoice{Mode: mode}
		return nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(p.ToolChoice, &named); err != nil || named.Type != "function" {
		return apierr.Invalidf("tool_choice", "invalid_value", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
	}
	if !seen[named.Function.Name] {
		return apierr.Invalidf("tool_choice.function.name", "invalid_value", "tool_choice names %q, which is not in tools", named.Function.Name)
	}
	req.ToolChoice = ToolChoice{Mode: ToolFunction, Name: named.Function.Name}
	return nil
}

// responseFormat decodes response_format into req.
func responseFormat(p *Params, req *Request, m *catalog.Model) error {
	rf := p.ResponseFormat
	if rf == nil || rf.Type == "text" {
		return nil
	}
	if m.Capabilities == nil || !m.Capabilities.StructuredOutputs {
		return apierr.Invalidf("response_format", "model_not_structured_output_capable", "model %q does not take response_format %q", m.ID, rf.Type)
	}
	switch rf.Type {
	case FormatJSONObject:
		req.ResponseFormat = &ResponseFormat{Type: FormatJSONObject}
	case FormatJSONSchema:
		js := rf.JSONSchema
		if js == nil {
			return apierr.Invalidf("response_format.json_schema", "missing_field", "json_schema is required with type json_schema")
		}
		if !toolName.MatchString(js.Name) {
			return apierr.Invalidf("response_format.json_schema.name", "invalid_value", "a schema name is 1 to 64 letters, digits, _ or -, not %q", js.Name)
		}
		if !isObject(js.Schema) {
			return apierr.Invalidf("response_format.json_schema.schema", "invalid_value", "schema must be a JSON Schema object")
		}
		req.ResponseFormat = &ResponseFormat{Type: FormatJSONSchema, Name: js.Name, Description: js.Description,
			Schema: js.Schema, Strict: js.Strict != nil && *js.Strict}
	case "":
		return apierr.Invalidf("response_format.type", "missing_field", "response_format.type is required")
	default:
		return apierr.Invalidf("response_format.type", "invalid_value", "response_format.type must be text, json_object or json_schema, not %q", rf.Type)
	}
	return nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// usesTools reports whether req carries tools or tool turns.
func usesTools(req *Request) bool {
	if len(req.Tools) > 0 {
		return true
	}
	for _, m := range req.Messages {
		if len(m.ToolCalls) > 0 || m.Role == RoleTool {
			return true
		}
	}
	return false
}

// checkFeatures refuses what req uses and the provider of its model,
// whose capabilities are caps, cannot honour (see Features).
func checkFeatures(req *Request, caps Caps) error {
	f, name := caps.features(), req.Model.Provider
	switch {
	case !f.Tools && usesTools(req):
		return Refuse("tools", "The %s provider does not support tool calling.", name)
	case !f.ToolChoiceNone && req.ToolChoice.Mode == ToolNone && len(req.Tools) > 0:
		return Refuse("tool_choice", `The %s provider cannot be told not to call the tools it is given (tool_choice "none"); send the request without tools.`, name)
	case !f.ParallelToolCalls && req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0:
		return Refuse("parallel_tool_calls", "The %s provider cannot be limited to one tool call (parallel_tool_calls false).", name)
	case !f.ResponseFormat && req.ResponseFormat != nil:
		return Refuse("response_format", "The %s provider does not support response_format %q.", name, req.ResponseFormat.Type)
	case !f.ToolsWithFormat && req.ResponseFormat != nil && len(req.Tools) > 0:
		return Refuse("response_format", "The %s provider cannot take tools and response_format in one request.", name)
	case !f.Seed && req.Seed != nil:
		return Refuse("seed", "The %s provider has no seed.", name)
	case !f.Penalties && req.PresencePenalty != nil:
		return Refuse("presence_penalty", "The %s provider has no presence_penalty.", name)
	case !f.Penalties && req.FrequencyPenalty != nil:
		return Refuse("frequency_penalty", "The %s provider has no frequency_penalty.", name)
	case !f.LogitBias && len(req.LogitBias) > 0:
		return Refuse("logit_bias", "The %s provider has no logit_bias.", name)
	case !f.TopK && req.TopK != nil:
		return Refuse("top_k", "The %s provider has no top_k.", name)
	}
	if !f.OpenAIOnly {
		// Hints that only steer the upstream are left out, not refused:
		// prompt_cache_key (OpenAI's prompt-cache routing; it changes
		// cost, never the answer) and a verbosity the request marks a
		// hint (Params.VerbosityHint).
		req.PromptCacheKey = ""
		if req.verbosityHint {
			req.Verbosity = ""
		}
		for _, o := range []struct{ param, v string }{
			{"service_tier", req.ServiceTier}, {"verbosity", req.Verbosity}, {"safety_identifier", req.SafetyIdentifier},
		} {
			if o.v != "" {
				return Refuse(o.param, "%s is an OpenAI field; the %s provider does not take it.", o.param, name)
			}
		}
	}
	return nil
}

// safeCallID is what every provider takes as a tool call id (Anthropic's
// and Bedrock's pattern).
var safeCallID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// SafeCallID returns the id to send a tool call of the conversation (and
// the tool result that answers it) with to a provider whose ids must be
// letters, digits, _ and - (Anthropic, Bedrock): id itself, the common
// case (Anthropic's toolu_ ids, OpenAI's call_ ids, Genway's own), or,
// for an id another provider made that it would refuse (with dots or
// colons, or too long), "toolu_" and a digest of id: the same for the
// call and its result, so that they still pair. Answers keep the
// provider's own ids.
func SafeCallID(id string) string {
	if safeCallID.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "toolu_" + hex.EncodeToString(sum[:12])
}
