package gemini

// The Gemini API wire format, as documented at
// https://ai.google.dev/api/generate-content (GenerateContentRequest,
// GenerateContentResponse, GenerationConfig, ThinkingConfig, UsageMetadata),
// https://ai.google.dev/gemini-api/docs/thinking,
// https://ai.google.dev/api/caching#Tool (Tool, FunctionDeclaration,
// ToolConfig, FunctionCallingConfig, FunctionCall, FunctionResponse),
// https://ai.google.dev/gemini-api/docs/function-calling and
// https://ai.google.dev/gemini-api/docs/structured-output
// (responseMimeType, responseJsonSchema).

import (
	"encoding/json"
	"strings"
	"time"
)

type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

// tool is a Tool holding function declarations (the only kind sent).
type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

// functionDeclaration takes the client's JSON Schema as it is, in
// parametersJsonSchema (full JSON Schema; parameters is an OpenAPI subset
// that refuses keywords such as additionalProperties or $defs).
type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO, ANY or NONE
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"` // user or model
	Parts []part `json:"parts"`
}

// part is a Part. ThoughtSignature is Gemini's signature of the
// model's reasoning, on the part it came with (a functionCall part, a text
// part, or a part with no text): it goes back on a later turn where it
// came (https://ai.google.dev/gemini-api/docs/thought-signatures).
type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`     // model turns
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"` // user turns
}

// functionCall is a call the model asks for; Args is a JSON object.
type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// functionResponse is a tool's result; Response must be a JSON object.
type functionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"` // base64
}

type generationConfig struct {
	MaxOutputTokens  int             `json:"maxOutputTokens,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	StopSequences    []string        `json:"stopSequences,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	PresencePenalty  *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64        `json:"frequencyPenalty,omitempty"`
	ResponseMimeType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage `json:"responseJsonSchema,omitempty"` // JSON Schema; needs responseMimeType application/json
	ThinkingConfig   *thinkingConfig `json:"thinkingConfig,omitempty"`
	// Image output (https://ai.google.dev/gemini-api/docs/image-generation):
	// responseModalities ["IMAGE"] and imageConfig.aspectRatio.
	ResponseModalities []string     `json:"responseModalities,omitempty"`
	ImageConfig        *imageConfig `json:"imageConfig,omitempty"`
}

type imageConfig struct {
	AspectRatio string `json:"aspectRatio,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  int  `json:"thinkingBudget"`
	IncludeThoughts bool `json:"includeThoughts"`
}

type generateResponse struct {
	Candidates     []candidate     `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ResponseID     string          `json:"responseId"`
	Error          *apiError       `json:"error"` // seen mid-stream
}

type candidate struct {
	Content      *content `json:"content"`
	FinishReason string   `json:"finishReason"`
}

type promptFeedback struct {
	BlockReason string `json:"blockReason"`
}

// usageMetadata is an answer's token counts. promptTokenCount includes
// cachedContentTokenCount (the part read from a context cache, explicit
// or implicit); thoughtsTokenCount is not part of candidatesTokenCount.
// https://ai.google.dev/api/generate-content#UsageMetadata
type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

type errorBody struct {
	Error *apiError `json:"error"`
}

// apiError is a google.rpc.Status.
type apiError struct {
	Code    int           `json:"code"`
	Message string        `json:"message"`
	Status  string        `json:"status"`
	Details []errorDetail `json:"details"`
}

type errorDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`     // google.rpc.ErrorInfo
	RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo
	Violations []struct {
		QuotaID string `json:"quotaId"` // "GenerateRequestsPerDayPerProjectPerModel"
	} `json:"violations"` // google.rpc.QuotaFailure
}

func (e *apiError) hasReason(r string) bool {
	for _, d := range e.Details {
		if d.Reason == r {
			return true
		}
	}
	return false
}

// retryDelay returns the delay of a google.rpc.RetryInfo detail ("30s"),
// 0 if there is none.
func (e *apiError) retryDelay() time.Duration {
	for _, d := range e.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// dailyQuota reports whether a google.rpc.QuotaFailure detail names a
// daily quota (its quotaId has "PerDay"): used up until the day ends.
func (e *apiError) dailyQuota() bool {
	for _, d := range e.Details {
		for _, v := range d.Violations {
			if strings.Contains(v.QuotaID, "PerDay") {
				return true
			}
		}
	}
	return false
}
