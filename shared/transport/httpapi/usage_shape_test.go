package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// detailsProvider answers every request with resp: whole, or as one
// content delta and resp's usage.
type detailsProvider struct{ resp chat.Response }

func (p detailsProvider) Complete(context.Context, *chat.Request) (*chat.Response, error) {
	r := p.resp
	return &r, nil
}

func (p detailsProvider) Stream(_ context.Context, _ *chat.Request, w chat.Writer) (*chat.Response, error) {
	if err := w.Delta(chat.Delta{Content: p.resp.Content}); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	r := p.resp
	r.Content = ""
	return &r, nil
}

// usageCatalog prices synthetic/priced per token class (per million:
// input 2.5, cached 1.25, cache write 3.125, 1-hour write 5, output 10);
// synthetic/free has no price.
const usageCatalog = `{
  "providers": [{"name": "synthetic", "kind": "synthetic"}],
  "models": [
    {"id": "synthetic/free", "type": "chat", "provider": "synthetic"},
    {"id": "synthetic/priced", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 2.5, "credits_per_million_cached_input_tokens": 1.25,
       "credits_per_million_cache_write_tokens": 3.125, "credits_per_million_cache_write_1h_tokens": 5,
       "credits_per_million_output_tokens": 10}}
  ]
}`

// usageDetails is an answer of 1,000 prompt tokens (600 read from the
// cache, 100 written for 5 minutes, 50 for an hour) and 200 completion
// tokens (150 reasoning). On synthetic/priced it costs 250 x 2.5 + 600 x
// 1.25 + 100 x 3.125 + 50 x 5 + 200 x 10 = 3,937.5 millionths of a
// credit, rounded up once: 0.003938.
var usageDetails = chat.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200,
	CachedTokens: 600, CacheWriteTokens: 100, CacheWrite1hTokens: 50, ReasoningTokens: 150}

// TestUsageShapes checks the usage object of each answer shape, exactly:
// the chat.completion and the final chunk of a chat stream; the
// Responses object and its response.completed event. Details are always
// sent, zeros included; cost is the credits charged, 0 when unpriced.
func TestUsageShapes(t *testing.T) {
	cat, err := catalog.Parse([]byte(usageCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"synthetic": detailsProvider{chat.Response{Content: "ok", FinishReason: chat.FinishStop, Usage: usageDetails}}}})
	srv := apiServer(t, gw)
	const (
		chatPriced = `{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,` +
			`"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":150,"cache_write_1h_tokens":50},` +
			`"completion_tokens_details":{"reasoning_tokens":150},"cost":0.003938}`
		chatFree = `{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,` +
			`"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":150,"cache_write_1h_tokens":50},` +
			`"completion_tokens_details":{"reasoning_tokens":150},"cost":0}`
		respPriced = `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600,"cache_write_tokens":150,"cache_write_1h_tokens":50},` +
			`"output_tokens":200,"output_tokens_details":{"reasoning_tokens":150},"total_tokens":1200,"cost":0.003938}`
	)
	tests := []struct {
		name  string
		path  string
		model string
		want  string
	}{
		{"chat.completion", "/v1/chat/completions", "synthetic/priced", chatPriced},
		{"chat stream", "/v1/chat/completions", "synthetic/priced", chatPriced},
		{"chat.completion unpriced", "/v1/chat/completions", "synthetic/free", chatFree},
		{"response", "/v1/responses", "synthetic/priced", respPriced},
		{"response stream", "/v1/responses", "synthetic/priced", respPriced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := strings.Contains(tt.name, "stream")
			body := `{"model":"` + tt.model + `","messages":[{"role":"user","content":"hi"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			if tt.path == "/v1/responses" {
				body = `{"model":"` + tt.model + `","input":"hi","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			}
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s = %d", tt.path, resp.StatusCode)
			}
			var obj struct {
				Type     string          `json:"type"` // a Responses event
				Usage    json.RawMessage `json:"usage"`
				Response struct {
					Usage json.RawMessage `json:"usage"`
				} `json:"response"`
			}
			var usages []string
			if !stream {
				if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
					t.Fatal(err)
				}
				usages = append(usages, string(obj.Usage))
			} else {
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					data, ok := strings.CutPrefix(sc.Text(), "data: ")
					if !ok || data == "[DONE]" {
						continue
					}
					obj.Usage, obj.Response.Usage = nil, nil
					if err := json.Unmarshal([]byte(data), &obj); err != nil {
						t.Fatalf("event %s: %v", data, err)
					}
					switch {
					case len(obj.Usage) > 0 && string(obj.Usage) != "null":
						usages = append(usages, string(obj.Usage))
					case obj.Type == "response.completed":
						usages = append(usages, string(obj.Response.Usage))
					}
				}
			}
			if len(usages) != 1 || usages[0] != tt.want {
				t.Errorf("POST %s %s: usage %q; want once %s", tt.path, body, usages, tt.want)
			}
		})
	}
}

// TestUsageDetailsOpenAIClient reads the details and the cost with the
// official client, unmodified: chat whole and streamed (its accumulator
// sums the counts of the chunks, so usage is on one chunk only; the cost
// is an extra field of that chunk's), and the Responses API.
func TestUsageDetailsOpenAIClient(t *testing.T) {
	cat, err := catalog.Parse([]byte(usageCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"synthetic": detailsProvider{chat.Response{Content: "ok", FinishReason: chat.FinishStop, Usage: usageDetails}}}})
	c := client(apiServer(t, gw))
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "synthetic/priced", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}
	check := func(how string, u oai.CompletionUsage, cost string) {
		t.Helper()
		if u.PromptTokens != 1000 || u.CompletionTokens != 200 || u.PromptTokensDetails.CachedTokens != 600 ||
			u.CompletionTokensDetails.ReasoningTokens != 150 || cost != "0.003938" {
			t.Errorf("%s: usage %+v, cost %s; want the details and cost 0.003938", how, u, cost)
		}
	}
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("chat.completion", whole.Usage, whole.Usage.JSON.ExtraFields["cost"].Raw())

	s := c.Chat.Completions.NewStreaming(ctx, params)
	var acc oai.ChatCompletionAccumulator
	var cost string
	usages := 0
	for s.Next() {
		ch := s.Current()
		acc.AddChunk(ch)
		if ch.JSON.Usage.Valid() {
			usages++
			cost = ch.Usage.JSON.ExtraFields["cost"].Raw()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	check("accumulated stream", acc.Usage, cost)
	if usages != 1 {
		t.Errorf("%d chunks with usage; want 1 (the accumulator sums them)", usages)
	}

	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "synthetic/priced", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Usage; u.InputTokens != 1000 || u.InputTokensDetails.CachedTokens != 600 || u.OutputTokensDetails.ReasoningTokens != 150 ||
		u.JSON.ExtraFields["cost"].Raw() != "0.003938" {
		t.Errorf("response usage %s; want the details and cost 0.003938", u.RawJSON())
	}
}
