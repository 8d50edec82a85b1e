package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/route"
)

// UsageRecorder records what a request did and cost: Gateway.Run calls it
// once per request that reached a provider, with its record
// (credits.Record: the answer's id, the models asked and served, the
// attempts, the tokens by class, the rates, the cost the model's catalog
// price makes of them, 0 for unpriced models, the status, latency and time
// to first token); a request no candidate answered has a record of status
// failed and no cost. The store writes the record with its usage and its
// charge (credits.RecordStore.AddRecords). Implementations are safe for
// concurrent use; an error is logged, it does not fail the completion the
// client already has. StoreRecorder writes each record at once;
// BufferedRecorder keeps them in memory and writes them periodically.
//
// Whether a recorder writes at once or holds records is part of its
// contract (InMemory, UnwrittenCredits), never guessed from its type.
type UsageRecorder interface {
	Record(ctx context.Context, r credits.Record) error
	// InMemory reports whether Record only adds to memory and never
	// waits on a store (BufferedRecorder): Run then does not flush the
	// sink before recording.
	InMemory() bool
	// UnwrittenCredits returns the cost of account's records that Record
	// took and the store does not show yet: 0 for a recorder that writes
	// each record before Record returns. Admit counts it against the
	// account's available credits.
	UnwrittenCredits(account string) credits.Amount
}

// Config is what a Gateway needs. Catalog is required; the other fields may
// be zero.
type Config struct {
	Catalog *catalog.Catalog
	// Providers are the configured upstreams by catalog provider name
	// (see package upstreams). A model whose provider is missing answers
	// 503 upstream_unavailable.
	Providers map[string]Provider
	// Images fetches image URLs for providers that need bytes; nil means
	// NewImageFetcher(ImageFetcherConfig{}) (public addresses only).
	Images *ImageFetcher
	// MaxImageBytes caps a data URI image; 0 means DefaultMaxImageBytes.
	MaxImageBytes int
	// MaxImages caps the image parts of one request; 0 means
	// DefaultMaxImages. MaxRequestImageBytes caps their bytes together
	// (data URIs and fetched images); 0 means DefaultMaxRequestImageBytes.
	MaxImages            int
	MaxRequestImageBytes int
	// ImageFetchTimeout bounds all of one request's image fetches
	// together; 0 means DefaultImageFetchTimeout.
	ImageFetchTimeout time.Duration
	Usage             UsageRecorder // nil: usage is not recorded
	// Balances is read by Admit for priced models, to refuse an account
	// with no credits left; nil: Admit admits every call.
	Balances Balances
	// Holds is where the priced completions of an API key with a credit
	// limit are held (see Holds); the stores (localstore.Store,
	// dynamostore.Store) are Holds, and the wiring sets it beside
	// Balances. With Balances set and Holds nil, such a completion is
	// refused (500): its key's limit could not be kept. With neither,
	// credits are off and nothing is held.
	Holds Holds
	// AdmitTTL is how long Admit may use an account's credits as it read
	// them before it reads them again; 0 means DefaultAdmitTTL, a
	// negative value reads them for every request.
	AdmitTTL time.Duration
	Log      *slog.Logger // nil: discard
	// Timeout bounds one completion, streamed or not, all its attempts
	// together; 0 means 10 minutes.
	Timeout time.Duration
	// Router routes each completion over its candidates (retries,
	// fallbacks, key pools, breakers); nil means a router of its own
	// with route.DefaultPolicy.
	Router *route.Router
	// Rand returns a uniformly random int in [0, n): it draws the order
	// of an alias's targets for each request (route.WeightedOrder). nil
	// means math/rand/v2's IntN; another (a seeded source, in tests) must
	// be safe for concurrent use if the Gateway is used concurrently.
	Rand func(n int) int
}

// Gateway applies the chat completion rules of docs/api.md in front of the
// providers, in one call per request (Run): it validates a request against
// the catalog, refuses a priced model to an account with no credits left
// (Admit), fetches images for providers that need bytes, calls the
// provider into the caller's Sink and, once the sink has the end of the
// answer, records usage. A Gateway is safe for concurrent use.
type Gateway struct {
	cat        *catalog.Catalog
	providers  map[string]Provider
	images     *ImageFetcher
	maxImage   int
	maxImages  int
	maxAll     int
	fetchLimit time.Duration
	usage      UsageRecorder
	balances   Balances
	holds      Holds
	admitTTL   time.Duration
	admitted   sync.Map     // account -> admitRead, Admit's last read of it
	admittedN  atomic.Int64 // accounts in admitted, about
	log        *slog.Logger
	timeout    time.Duration
	router     *route.Router
	rand       func(n int) int
}

// NewGateway returns a Gateway for cfg.
func NewGateway(cfg Config) *Gateway {
	g := &Gateway{
		cat:       cfg.Catalog,
		providers: cfg.Providers,
		images:    cfg.Images,
		maxImage:  cfg.MaxImageBytes,
		maxImages: cfg.MaxImages, maxAll: cfg.MaxRequestImageBytes, fetchLimit: cfg.ImageFetchTimeout,
		usage:    cfg.Usage,
		balances: cfg.Balances,
		holds:    cfg.Holds,
		admitTTL: cfg.AdmitTTL,
		log:      cfg.Log,
		timeout:  cfg.Timeout,
		router:   cfg.Router,
		rand:     cfg.Rand,
	}
	if g.admitTTL == 0 {
		g.admitTTL = DefaultAdmitTTL
	}
	if g.rand == nil {
		g.rand = rand.IntN
	}
	if g.images == nil {
		g.images = NewImageFetcher(ImageFetcherConfig{})
	}
	if g.maxImage <= 0 {
		g.maxImage = DefaultMaxImageBytes
	}
	if g.maxImages <= 0 {
		g.maxImages = DefaultMaxImages
	}
	if g.maxAll <= 0 {
		g.maxAll = DefaultMaxRequestImageBytes
	}
	if g.fetchLimit <= 0 {
		g.fetchLimit = DefaultImageFetchTimeout
	}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if g.timeout <= 0 {
		g.timeout = 10 * time.Minute
	}
	if g.router == nil {
		g.router = route.New(route.DefaultPolicy, g.log)
	}
	return g
}

// Call is a validated request bound to the provider that will serve it.
type Call struct {
	Request  *Request
	Stream   bool // the client asked for an SSE stream
	provider Provider
	// native: the provider speaks the request's API and is sent its body
	// (see NativeProvider); Request then carries only what the native
	// path needs (the model, MaxTokens, APIHeaders, ServiceTier, Native).
	native bool
	// fetches are the image URLs to download before the call (for a
	// provider that needs bytes); imageBytes counts the data URIs' bytes.
	fetches    []pendingFetch
	imageBytes int
}

// Prepare validates p and returns the Call to run. Every failure is an
// *apierr.Error: Invalid (400) with Param naming the field, NotFound (404,
// model_not_found) or UpstreamUnavailable (503, the model's provider is not
// configured). For providers that need image bytes, Prepare fetches image
// URLs (a failed fetch is a 400 on that URL).
//
// A p with Native whose model's provider speaks its API (NativeProvider)
// is a native Call: only the model and max_tokens are checked (the body
// goes to the provider as the client sent it, and the provider checks
// the rest), and nothing is translated. For a provider that does not
// speak it, p is validated as any request, after the translation's own
// refusal (Native.Refusal) if it has one.
func (g *Gateway) Prepare(ctx context.Context, p *Params) (*Call, error) {
	if p.Model == "" {
		return nil, apierr.Invalidf("model", "missing_field", "model is required")
	}
	m, ok := g.cat.Model(p.Model)
	if !ok {
		return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q does not exist. GET /v1/models lists the models.", p.Model)}
	}
	if m.Type != catalog.TypeChat {
		return nil, apierr.Invalidf("model", "model_type_mismatch", "model %q is a %s model, not a chat model", m.ID, m.Type)
	}
	if err := unsupported(p); err != nil {
		return nil, err
	}
	req := &Request{Model: m, Temperature: p.Temperature, TopP: p.TopP, Seed: p.Seed}
	var err error
	if req.MaxTokens, err = maxTokens(p, m); err != nil {
		return nil, err
	}
	if p.Native != nil {
		if prov := g.providers[m.Provider]; prov != nil && speaks(p, prov) {
			req := &Request{Model: m, MaxTokens: req.MaxTokens, APIHeaders: p.APIHeaders, ServiceTier: p.ServiceTier, Native: p.Native}
			return &Call{Request: req, Stream: p.Stream, provider: prov, native: true}, nil
		}
		if p.Native.Refusal != nil {
			return nil, p.Native.Refusal
		}
	}
	if p.ReasoningEffort != nil {
		switch e := *p.ReasoningEffort; e {
		case "low", "medium", "high":
			if m.Capabilities != nil && m.Capabilities.Reasoning {
				req.ReasoningEffort = e
				req.ReasoningBudget, req.ReasoningDisplay = p.ReasoningBudget, p.ReasoningDisplay
			}
		default:
			return nil, apierr.Invalidf("reasoning_effort", "invalid_value", "reasoning_effort must be low, medium or high, not %q", e)
		}
	}
	if k := p.TopK; k != nil {
		if *k < 0 {
			return nil, apierr.Invalidf("top_k", "invalid_value", "top_k must be a non-negative integer")
		}
		req.TopK = k
	}
	req.APIHeaders = p.APIHeaders
	if t := p.Temperature; t != nil && (*t < 0 || *t > 2) {
		return nil, apierr.Invalidf("temperature", "invalid_value", "temperature must be between 0 and 2")
	}
	if t := p.TopP; t != nil && (*t < 0 || *t > 1) {
		return nil, apierr.Invalidf("top_p", "invalid_value", "top_p must be between 0 and 1")
	}
	if req.Stop, err = stops(p.Stop); err != nil {
		return nil, err
	}
	if err := sampling(p, req); err != nil {
		return nil, err
	}
	if err := tools(p, req, m); err != nil {
		return nil, err
	}
	if err := responseFormat(p, req, m); err != nil {
		return nil, err
	}
	var fetches []pendingFetch
	if req.Messages, fetches, err = g.messages(p.Messages, m); err != nil {
		return nil, err
	}
	prov, ok := g.providers[m.Provider]
	if !ok || prov == nil {
		return nil, &apierr.Error{Kind: apierr.UpstreamUnavailable, Code: "upstream_unavailable",
			Message: fmt.Sprintf("The provider %q of model %q is not configured on this server.", m.Provider, m.ID)}
	}
	caps := Capabilities(prov)
	if err := checkFeatures(req, caps); err != nil {
		return nil, err
	}
	if err := cacheBreakpoints(req, caps); err != nil {
		return nil, err
	}
	c := &Call{Request: req, Stream: p.Stream, provider: prov}
	if err := g.imageLimits(c); err != nil {
		return nil, err
	}
	if caps.needsImageBytes() {
		c.fetches = fetches
	}
	return c, nil
}

// imageLimits refuses a request with more than MaxImages images, or whose
// data URIs hold more than MaxRequestImageBytes, naming the image that
// crosses the line; it sets c.imageBytes.
func (g *Gateway) imageLimits(c *Call) error {
	n := 0
	for i := range c.Request.Messages {
		for j, pt := range c.Request.Messages[i].Parts {
			if pt.Image == nil {
				continue
			}
			param := fmt.Sprintf("messages[%d].content[%d]", i, j)
			if n++; n > g.maxImages {
				return apierr.Invalidf(param, "invalid_value", "a request may carry at most %d images", g.maxImages)
			}
			if c.imageBytes += len(pt.Image.Data); c.imageBytes > g.maxAll {
				return apierr.Invalidf(param, "invalid_value", "the request's images are larger than %d bytes together", g.maxAll)
			}
		}
	}
	return nil
}

// FetchImages downloads the image URLs of c for a provider that needs
// image bytes (Run calls it after Admit, so a refused call fetches
// nothing): at most fetchConcurrency at a time, all of them within the
// ImageFetchTimeout, their bytes with the data URIs' at most
// MaxRequestImageBytes. The first URL that fails is a 400 naming it, and
// the other fetches are stopped.
func (g *Gateway) FetchImages(parent context.Context, c *Call) error {
	if len(c.fetches) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, g.fetchLimit)
	defer cancel()
	type result struct {
		mt   string
		data []byte
	}
	results := make([]result, len(c.fetches))
	var mu sync.Mutex
	failed, failure := -1, error(nil)
	total := c.imageBytes
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed < 0 {
			failed, failure = i, err
			cancel() // the request fails: stop the other fetches
		}
	}
	sem := make(chan struct{}, fetchConcurrency)
	var wg sync.WaitGroup
	for i, f := range c.fetches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				fail(i, errors.New("image URL did not answer in time"))
				return
			}
			defer func() { <-sem }()
			mt, data, err := g.images.Fetch(ctx, f.img.URL)
			if err != nil {
				fail(i, err)
				return
			}
			// The byte budget is kept as images arrive, so a request never
			// holds more than it (plus the fetches in flight).
			mu.Lock()
			total += len(data)
			over := total > g.maxAll
			mu.Unlock()
			if over {
				fail(i, &apierr.Error{Kind: apierr.Invalid, Code: "invalid_value", Param: f.param,
					Message: fmt.Sprintf("the request's images are larger than %d bytes together", g.maxAll)})
				return
			}
			results[i] = result{mt, data}
		}()
	}
	wg.Wait()
	if err := parent.Err(); err != nil { // the client went away
		return fmt.Errorf("fetch images: %w", err)
	}
	if failed >= 0 {
		if e := apierr.As(failure); e != nil {
			return e
		}
		return &apierr.Error{Kind: apierr.Invalid, Code: "invalid_image_url", Param: c.fetches[failed].param, Message: failure.Error()}
	}
	for i, f := range c.fetches {
		f.img.URL, f.img.MediaType, f.img.Data = "", results[i].mt, results[i].data
	}
	return nil
}

// pendingFetch is an image URL to fetch if the provider needs bytes.
type pendingFetch struct {
	img   *Image
	param string
}

func (g *Gateway) messages(in []ParamsMessage, m *catalog.Model) ([]Message, []pendingFetch, error) {
	if len(in) == 0 {
		return nil, nil, apierr.Invalidf("messages", "missing_field", "messages must be a non-empty array")
	}
	vision := m.Capabilities != nil && m.Capabilities.Vision
	out := make([]Message, len(in))
	var fetches []pendingFetch
	for i, pm := range in {
		// Parameter paths (messages[i].content...) are formatted only for errors.
		at := func(field string) string { return fmt.Sprintf("messages[%d]%s", i, field) }
		switch pm.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
			out[i].Role = pm.Role
		case "developer":
			out[i].Role = RoleSystem
		case "":
			return nil, nil, apierr.Invalidf(at(".role"), "missing_field", "role is required")
		default:
			return nil, nil, apierr.Invalidf(at(".role"), "invalid_value", "role must be system, developer, user, assistant or tool, not %q", pm.Role)
		}
		out[i].Name = pm.Name
		if err := toolTurn(&out[i], pm, out[:i], at); err != nil {
			return nil, nil, err
		}
		if len(pm.Thoughts) > 0 {
			if out[i].Role != RoleAssistant {
				return nil, nil, apierr.Invalidf(at(".content"), "invalid_value", "thinking is only allowed in assistant messages")
			}
			out[i].Thoughts = pm.Thoughts
		}
		if pm.ToolError {
			if out[i].Role != RoleTool {
				return nil, nil, apierr.Invalidf(at(".is_error"), "invalid_value", "is_error is only allowed on tool results")
			}
			out[i].ToolError = true
		}
		content := bytes.TrimSpace(pm.Content)
		if len(content) == 0 || bytes.Equal(content, []byte("null")) {
			if out[i].Role == RoleAssistant && (len(out[i].ToolCalls) > 0 || pm.Refusal != nil || len(out[i].Thoughts) > 0) {
				if pm.Refusal != nil {
					out[i].Parts = []Part{{Text: *pm.Refusal}}
				}
				continue // an assistant turn that only called tools
			}
			return nil, nil, apierr.Invalidf(at(".content"), "missing_field", "content is required")
		}
		switch content[0] {
		case '"':
			s, ok := plainString(content)
			if !ok {
				if err := json.Unmarshal(content, &s); err != nil {
					return nil, nil, apierr.Invalidf(at(".content"), "invalid_value", "content is not a valid string")
				}
			}
			out[i].Parts = []Part{{Text: s}}
			continue
		case '[':
		default:
			return nil, nil, apierr.Invalidf(at(".content"), "invalid_value", "content must be a string or an array of content parts")
		}
		var raw []partJSON
		if err := json.Unmarshal(content, &raw); err != nil {
			return nil, nil, apierr.Invalidf(at(".content"), "invalid_value", "content must be a string or an array of content parts")
		}
		if len(raw) == 0 {
			return nil, nil, apierr.Invalidf(at(".content"), "invalid_value", "content must not be an empty array")
		}
		out[i].Parts = make([]Part, len(raw))
		for j, r := range raw {
			pat := func(field string) string { return fmt.Sprintf("messages[%d].content[%d]%s", i, j, field) }
			var pp ParamsPart
			if err := json.Unmarshal(r, &pp); err != nil {
				return nil, nil, apierr.Invalidf(pat(""), "invalid_value", "content part must be an object with type text or image_url")
			}
			switch pp.Type {
			case "text":
				if pp.Text == nil {
					return nil, nil, apierr.Invalidf(pat(".text"), "missing_field", "text is required in a text part")
				}
				out[i].Parts[j].Text = *pp.Text
			case "refusal":
				if out[i].Role != RoleAssistant {
					return nil, nil, apierr.Invalidf(pat(".type"), "invalid_value", "refusal parts are only allowed in assistant messages")
				}
				var rp struct {
					Refusal string `json:"refusal"`
				}
				_ = json.Unmarshal(r, &rp)
				out[i].Parts[j].Text = rp.Refusal
			case "image_url":
				if out[i].Role != RoleUser {
					return nil, nil, apierr.Invalidf(pat(".type"), "invalid_value", "image parts are only allowed in user messages")
				}
				if !vision {
					return nil, nil, apierr.Invalidf(pat(""), "model_not_vision_capable", "model %q does not accept image input", m.ID)
				}
				uat := pat(".image_url.url")
				if pp.ImageURL == nil || pp.ImageURL.URL == "" {
					return nil, nil, apierr.Invalidf(uat, "missing_field", "image_url.url is required in an image part")
				}
				img, reason := g.image(pp.ImageURL.URL)
				if reason != "" {
					return nil, nil, apierr.Invalidf(uat, "invalid_image_url", "%s", reason)
				}
				out[i].Parts[j].Image = img
				if img.URL != "" {
					fetches = append(fetches, pendingFetch{img: img, param: uat})
				}
			case "":
				return nil, nil, apierr.Invalidf(pat(".type"), "missing_field", "type is required in a content part")
			default:
				return nil, nil, apierr.Invalidf(pat(".type"), "invalid_value", "content part type must be text or image_url, not %q", pp.Type)
			}
			if len(pp.CacheControl) > 0 {
				c, err := cacheControl(pp.CacheControl, pat(".cache_control"))
				if err != nil {
					return nil, nil, err
				}
				if out[i].Parts[j].Image != nil || out[i].Parts[j].Text != "" {
					out[i].Parts[j].Cache = c // an empty text part is dropped upstream, and its breakpoint with it
				}
			}
		}
	}
	for i := range in {
		if len(in[i].CacheControl) > 0 {
			c, err := cacheControl(in[i].CacheControl, fmt.Sprintf("messages[%d].cache_control", i))
			if err != nil {
				return nil, nil, err
			}
			messageCache(&out[i], c)
		}
	}
	return out, fetches, nil
}

// partJSON is one content part's JSON as a slice of its message's content,
// not a copy (json.RawMessage copies: an image part may be megabytes). It
// is only decoded by json.Unmarshal from the content, which outlives it
// and which nothing changes.
type partJSON []byte

// UnmarshalJSON keeps b, a slice of the content being decoded.
func (p *partJSON) UnmarshalJSON(b []byte) error {
	*p = b
	return nil
}

// toolTurn checks the tool parts of message m, decoded from pm: an
// assistant's tool_calls (each with an id and a function name; arguments
// default to "{}"), and a tool message's tool_call_id, which must answer a
// call of an earlier assistant message (whose function name it takes).
func toolTurn(m *Message, pm ParamsMessage, earlier []Message, at func(string) string) error {
	if len(pm.ToolCalls) > 0 && m.Role != RoleAssistant {
		return apierr.Invalidf(at(".tool_calls"), "invalid_value", "tool_calls are only allowed in assistant messages")
	}
	for k, tc := range pm.ToolCalls {
		cat := func(f string) string { return at(fmt.Sprintf(".tool_calls[%d]%s", k, f)) }
		if tc.ID == "" {
			return apierr.Invalidf(cat(".id"), "missing_field", "id is required in a tool call")
		}
		if tc.Type != "" && tc.Type != "function" {
			return apierr.Invalidf(cat(".type"), "invalid_value", "a tool call's type must be function, not %q", tc.Type)
		}
		if tc.Function.Name == "" {
			return apierr.Invalidf(cat(".function.name"), "missing_field", "function.name is required in a tool call")
		}
		args := tc.Function.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args, Signature: tc.Signature, SignedBy: tc.SignedBy})
	}
	if m.Role != RoleTool {
		if pm.ToolCallID != "" {
			return apierr.Invalidf(at(".tool_call_id"), "invalid_value", "tool_call_id is only allowed in tool messages")
		}
		return nil
	}
	if pm.ToolCallID == "" {
		return apierr.Invalidf(at(".tool_call_id"), "missing_field", "tool_call_id is required in a tool message")
	}
	m.ToolCallID = pm.ToolCallID
	for i := len(earlier) - 1; i >= 0; i-- {
		for _, tc := range earlier[i].ToolCalls {
			if tc.ID == pm.ToolCallID {
				m.ToolName = tc.Name
				return nil
			}
		}
	}
	return apierr.Invalidf(at(".tool_call_id"), "invalid_value", "tool_call_id %q answers no tool call of an earlier assistant message", pm.ToolCallID)
}

// plainString returns the value of raw, a JSON string as the decoder of
// the request body delimited it, when it needs no unescaping: no escapes
// and valid UTF-8 (which json.Unmarshal would change to U+FFFD), the
// common case; it reports false otherwise.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// image validates an image URL: a data URI is decoded, an http(s) URL kept.
func (g *Gateway) image(u string) (*Image, string) {
	if checkImageURL(u) {
		return &Image{URL: u}, ""
	}
	mt, data, reason := parseDataURI(u, g.maxImage)
	if reason != "" {
		return nil, reason
	}
	return &Image{MediaType: mt, Data: data}, ""
}

// maxTokens applies the max_tokens / max_completion_tokens alias rule and
// caps the value at the model's limit.
func maxTokens(p *Params, m *catalog.Model) (int, error) {
	a, err := positiveInt("max_tokens", p.MaxTokens)
	if err != nil {
		return 0, err
	}
	b, err := positiveInt("max_completion_tokens", p.MaxCompletionTokens)
	if err != nil {
		return 0, err
	}
	if a != 0 && b != 0 && a != b {
		return 0, apierr.Invalidf("max_completion_tokens", "invalid_value",
			"max_tokens (%d) and max_completion_tokens (%d) are aliases; set one, or both to the same value", a, b)
	}
	n := max(a, b)
	if m.MaxTokens > 0 && n > m.MaxTokens {
		n = m.MaxTokens // an upper bound above the model's own is the model's
	}
	return n, nil
}

// positiveInt parses an optional JSON integer field; absent or null is 0.
func positiveInt(param string, raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil || n <= 0 {
		return 0, apierr.Invalidf(param, "invalid_value", "%s must be a positive integer", param)
	}
	return int(n), nil
}

// stops decodes stop: a string or an array of at most 4 strings.
func stops(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) > 4 {
		return nil, apierr.Invalidf("stop", "invalid_value", "stop must be a string or an array of at most 4 strings")
	}
	return many, nil
}

// Run runs one completion of p for account into sink, the one call a
// handler makes, routed by the gateway's route.Router over the request's
// candidates (candidates: the model, then the request's models or the
// model's catalog fallbacks; an alias among them: its targets, by
// weight). Each candidate is prepared on its first
// attempt: validated (Prepare), admitted (Admit: a priced model with no
// credits left is refused before any upstream call) and its images
// fetched; one that cannot serve the request is skipped, and when none
// can, the lead's refusal is the error. The sink is started before the
// first upstream call; an attempt's deltas reach it only from the
// attempt's first token (Sink.Begin names the model that answers), so a
// failure before that moves on by the policy, unseen by the client. The
// Response ends the sink. Usage is recorded, for the model that
// answered, after End, also when End failed (the client went away: the
// usage happened), and when the recorder may wait on a store the sink is
// flushed first, so the client has its whole answer before the write.
//
// A priced completion asked for with an API key that has a credit limit
// is held first (see Holds): refused with a 402 before any call when its
// most possible cost does not fit the key's limit or the account's
// credits. Its usage is then written to the store and the hold released
// before the sink's End, so that the key's next request sees what is
// left (the answer's end waits for those two writes).
//
// Answers that end early are charged (Response.Status, Partial,
// Estimated say how):
//   - A stream cut short after its first token, by the client (it went
//     away, or the sink failed) or by the upstream, is charged for its
//     input and the output produced, as a whole answer is (recorded, a
//     hold settled), but without the sink's End: Run returns the
//     *AttemptsError around the failure. The counts are the provider's
//     where it reported them before the end (see Provider.Stream), else
//     estimated (see Estimates).
//   - A stream whose client goes away while an upstream attempt is under
//     way, before the first token, is charged the same way: the input
//     (the upstream took it), and any output the provider reported.
//   - A whole (non-streamed) answer's upstream call is detached from the
//     client: when the client goes away it runs on, within the gateway's
//     timeout, and its exact usage is charged. No new attempt is made
//     for a client gone.
//   - An answer of a priced model that ends without usage is charged by
//     the estimate too, logged and counted.
//
// Every request that reached a provider leaves one record (UsageRecorder;
// for a held completion written at once with its charge): its id is
// p.ID (Run makes one, chatcmpl-..., when p has none) and its kind p.Kind
// (credits.KindChat when empty). A request refused before any upstream
// call (Prepare, Admit, a hold) leaves none.
//
// A completion no candidate answered returns an *AttemptsError with the
// attempts made around the last one's error: Prepare's, Admit's, the
// provider's (*UpstreamError) or the sink's. Its record has status
// failed and costs nothing.
func (g *Gateway) Run(ctx context.Context, account string, p *Params, sink Sink) error {
	start := time.Now()
	if _, ok := sink.(NativeSink); p.Native != nil && !ok {
		return errNativeSink
	}
	ids, err := g.candidates(ctx, p)
	if err != nil {
		return err
	}
	h, err := g.hold(ctx, account, p, ids)
	if err != nil {
		return err
	}
	defer h.release(ctx, g)
	client := ctx
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	rt := &routed{g: g, account: account, p: p, ids: ids, calls: make([]*Call, len(ids)), errs: make([]error, len(ids)), sink: sink, hold: h,
		client: client, start: start}
	targets := make([]route.Target, len(ids))
	for i, id := range ids {
		targets[i].Model = id
		if m, ok := g.cat.Model(id); ok {
			targets[i].Provider = m.Provider
			targets[i].Keys = route.PoolKeys(g.providers[m.Provider])
		}
	}
	res, err := g.router.Run(ctx, targets, classify, rt.attempt)
	if err != nil {
		var s skipped
		if errors.As(err, &s) {
			err = s.error // the refusal as Prepare or Admit made it
		}
		err = &AttemptsError{Attempts: res.Attempts, Err: err}
		switch {
		case rt.resp != nil:
			g.chargeCut(ctx, account, rt, res.Attempts, err)
		case rt.called: // no answer, no charge: a failed record
			r := rt.record(ctx, nil, credits.TokenRates{}, res.Attempts)
			if h != nil {
				h.record(ctx, g, r)
			} else {
				g.recordUsage(ctx, r)
			}
		}
		return err
	}
	g.meter(ctx, p, rt.served, rt.resp, rt.out)
	rates := price(rt.served, rt.resp)
	if rt.client.Err() != nil {
		rt.resp.Status = credits.StatusClientClosed // a whole answer finished for a client gone
	}
	if h != nil {
		// Charged and released before the answer ends, so that the key's
		// next request sees what it has left.
		h.record(ctx, g, rt.record(ctx, rt.resp, rates, res.Attempts))
		h.release(ctx, g)
		return sink.End(rt.resp)
	}
	err = sink.End(rt.resp)
	if err == nil && g.usageWaits() {
		err = sink.Flush()
	}
	if err != nil {
		rt.resp.Status = credits.StatusClientClosed
	}
	g.recordUsage(ctx, rt.record(ctx, rt.resp, rates, res.Attempts))
	return err
}

// chargeCut charges rt's answer that ended after its first token with
// err (the AttemptsError Run returns, after attempts): cut short
// (Partial), or whole but its client gone before it could be begun. It is
// metered (what the provider did not report is estimated), priced and
// recorded as a whole answer is, a held one's hold released; the sink's
// End is not called.
func (g *Gateway) chargeCut(ctx context.Context, account string, rt *routed, attempts []route.Attempt, err error) {
	c, resp := rt.served, rt.resp
	g.meter(ctx, rt.p, c, resp, rt.out)
	rates := price(c, resp)
	g.log.InfoContext(ctx, "chat: answer ended early; charged for what it produced", "account", account, "model", c.Request.Model.ID,
		"status", resp.Status, "partial", resp.Partial, "estimated", resp.Estimated,
		"prompt_tokens", resp.Usage.PromptTokens, "completion_tokens", resp.Usage.CompletionTokens, "cost", resp.Usage.Cost, "err", err)
	r := rt.record(ctx, resp, rates, attempts)
	if h := rt.hold; h != nil {
		h.record(ctx, g, r)
		h.release(ctx, g)
		return
	}
	g.recordUsage(ctx, r)
}

// price sets resp.Usage.Cost to what the completion c answered costs:
// its model's catalog price (Price.ChatCost) of its tokens by class, at
// the service tier the upstream served at, else the one the request asked
// for (see pricedTier). It returns the rates charged. Run prices every
// answer before the sink's End, so that the answer carries its cost, and
// charges exactly that.
//
// A tier the request asked for and the upstream did not confirm (it
// reports none) is never a discount: the completion is charged the higher
// of that tier's price and the model's own, so that a client cannot pay
// flex prices through an upstream that ignores service_tier and bills the
// operator its standard rate.
func price(c *Call, resp *Response) credits.TokenRates {
	p := c.Request.Model.Price
	t := resp.Usage.Tokens()
	var rates credits.TokenRates
	resp.Usage.Cost, rates = p.ChatCost(t, pricedTier(p, resp.ServiceTier, c.Request.ServiceTier))
	if resp.ServiceTier == "" && c.Request.ServiceTier != "" {
		if cost, r := p.ChatCost(t, ""); cost > resp.Usage.Cost {
			resp.Usage.Cost, rates = cost, r
		}
	}
	return rates
}

// pricedTier returns the service tier a completion is priced at: served,
// the tier the upstream reported, else asked, the one the request named.
// A tier with two names is found under either: OpenAI renamed priority
// processing "fast" (a request may say "fast" or "priority", the answer
// says "priority"), so a catalog that prices only one of the names prices
// both.
func pricedTier(p *catalog.Price, served, asked string) string {
	tier := served
	if tier == "" {
		tier = asked
	}
	if p == nil || len(p.ServiceTiers) == 0 {
		return tier
	}
	if _, ok := p.ServiceTiers[tier]; ok {
		return tier
	}
	other := ""
	switch tier {
	case "priority":
		other = "fast"
	case "fast":
		other = "priority"
	}
	if _, ok := p.ServiceTiers[other]; ok && other != "" {
		return other
	}
	return tier
}

// normalize fills in what a provider may leave out, the finish reason
// (stop) and the total tokens, and bounds the usage's details by what
// they are parts of, so that no token is priced twice: cache reads and
// writes within the prompt (in that order), reasoning within the
// completion.
func normalize(resp *Response) {
	if resp.FinishReason == "" {
		resp.FinishReason = FinishStop
	}
	u := &resp.Usage
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	left := max(u.PromptTokens, 0)
	for _, n := range []*int{&u.CachedTokens, &u.CacheWriteTokens, &u.CacheWrite1hTokens} {
		*n = min(max(*n, 0), left)
		left -= *n
	}
	u.ReasoningTokens = min(max(u.ReasoningTokens, 0), max(u.CompletionTokens, 0))
}

// usageWaits reports whether recordUsage may wait on a store: the gateway
// has a UsageRecorder and it is not one that only adds to memory
// (UsageRecorder.InMemory). Run flushes the sink before recording when it
// does, so that the client need not wait for the write, and skips that
// flush (which costs a write of its own) when it does not.
func (g *Gateway) usageWaits() bool {
	return g.usage != nil && !g.usage.InMemory()
}

// recordUsage records r: the usage and cost of a request (0 for unpriced
// models, and for a request that failed). It runs even if ctx is
// cancelled (the client may be gone; the usage happened regardless), and
// a recorder error is logged, not returned: the client already has its
// answer. Without a UsageRecorder it does nothing.
func (g *Gateway) recordUsage(ctx context.Context, r credits.Record) {
	if g.usage == nil {
		return
	}
	g.noteCharge(r.Account, r.Cost)
	if err := g.usage.Record(context.WithoutCancel(ctx), r); err != nil {
		g.log.ErrorContext(ctx, "record chat usage", "account", r.Account, "model", r.Model, "record", r.ID, "err", err)
	}
}

// observeUpstream records one upstream call's duration and outcome by
// provider: ok, or the UpstreamError's kind; a call the client cancelled
// is "cancelled".
func observeUpstream(provider string, d time.Duration, err error) {
	outcome := "ok"
	var ue *UpstreamError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		outcome = ue.Kind.String()
		if ue.Kind == UpstreamBadRequest {
			outcome = "bad_request"
		}
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	default:
		outcome = "error"
	}
	metrics.Default.Observe("genway_upstream_seconds", "Chat upstream calls: duration (whole answer), by provider and outcome.",
		upstreamLabels, []string{provider, outcome}, d.Seconds())
}

// upstreamLabels are genway_upstream_seconds' label names (a metric's
// family keeps them: one slice for every call).
var upstreamLabels = []string{"provider", "outcome"}
