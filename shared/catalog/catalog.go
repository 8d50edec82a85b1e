// Package catalog holds the models and providers the service offers. The
// catalog is data: a JSON file embedded in the binary (catalog.json), which an
// operator may replace with their own file (GENWAY_CATALOG).
//
// A Catalog is immutable after Load and safe for concurrent use.
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

//go:embed catalog.json
var embedded []byte

// Model types.
const (
	TypeChat  = "chat"
	TypeMusic = "music"
	TypeSFX   = "sfx"
	TypeVideo = "video"
	// TypeSpeech is a text-to-speech model (POST /v1/audio/speech).
	TypeSpeech = "speech"
	// TypeImage models make images synchronously (POST
	// /v1/images/generations), priced per image.
	TypeImage = "image"
)

// Thinking styles for reasoning models: how reasoning_effort reaches the
// provider.
const (
	ThinkingEffort   = "effort"   // pass reasoning_effort through (OpenAI o-series, GPT-5)
	ThinkingBudget   = "budget"   // a thinking token budget (Anthropic, Bedrock Claude, Gemini 2.5)
	ThinkingAdaptive = "adaptive" // Anthropic adaptive thinking with an effort level (newer Claude)
)

// Provider is an upstream the catalog's models run on.
type Provider struct {
	Name        string `json:"name"`                   // e.g. "openai", "groq"
	Kind        string `json:"kind"`                   // wire protocol: openai, anthropic, gemini, bedrock, synthetic
	BaseURL     string `json:"base_url,omitempty"`     // default base URL
	BaseURLEnv  string `json:"base_url_env,omitempty"` // env var overriding BaseURL
	KeyEnv      string `json:"key_env,omitempty"`      // env var holding the API key
	KeyOptional bool   `json:"key_optional,omitempty"` // configured by BaseURLEnv alone (Ollama, vLLM)
	Test        bool   `json:"test,omitempty"`
	// Free: the provider's models cost the operator nothing (a server on
	// the operator's own hardware: Ollama, vLLM), so a chat model of it
	// without a price is free; one with a price is charged it. The
	// synthetic provider (kind synthetic) is free whatever it says.
	Free bool `json:"free,omitempty"`
	// Native lists the client APIs the provider's server speaks itself,
	// whose requests it is sent as the client sent them instead of
	// translated (see chat.NativeProvider): "responses" (OpenAI's
	// Responses API, kind openai: OpenAI itself, not the servers that
	// only copy its chat API) and "messages" (Anthropic's Messages API,
	// kind anthropic). GENWAY_NATIVE=off turns them all off.
	Native []string `json:"native,omitempty"`
}

// nativeKinds are the provider kinds that may speak each native API.
var nativeKinds = map[string]string{"responses": "openai", "messages": "anthropic"}

// NativeAPIs returns the client APIs p speaks natively (see Native), none
// when s.NoNative (GENWAY_NATIVE=off): every request is then translated.
func (p *Provider) NativeAPIs(s Setup) []string {
	if s.NoNative {
		return nil
	}
	return p.Native
}

// IsFree reports whether p's models cost the operator nothing (see Free).
func (p *Provider) IsFree() bool { return p.Free || p.Kind == "synthetic" }

// Catalog is the set of providers and models.
type Catalog struct {
	Providers []Provider `json:"providers"`
	Models    []Model    `json:"models"`

	byID       map[string]*Model
	byProvider map[string]*Provider
	pricing    Pricing
}

// Default returns the embedded catalog, its list prices converted at the
// default credit value (Pricing{}: 1 credit = US$0.01, no markup).
func Default() (*Catalog, error) { return Parse(embedded, Pricing{}) }

// Load returns the catalog in the file at path, or the embedded one if path
// is empty, its list prices converted into credits with pricing (see
// Parse).
func Load(path string, pricing Pricing) (*Catalog, error) {
	if path == "" {
		return Parse(embedded, pricing)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load catalog: %w", err)
	}
	return Parse(b, pricing)
}

// Parse decodes and checks a catalog. Every list price in US dollars is
// converted into credits with pricing (the deployment's credit value and
// markup), rounded up to the micro-credit per unit; prices in credits are
// used as written (see Price).
//
// Nothing is free by accident: a chat model of a provider that is not
// free (see Provider.Free) needs a price of its own tokens, or the
// explicit marker "price": {"free": true}; without either it is refused,
// by name. An alias has no price (its targets' apply). Job, image and
// speech models need their price.
func Parse(b []byte, pricing Pricing) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	c.pricing = pricing
	c.byID = make(map[string]*Model, len(c.Models))
	c.byProvider = make(map[string]*Provider, len(c.Providers))
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Name == "" || p.Kind == "" {
			return nil, fmt.Errorf("parse catalog: provider %d needs name and kind", i)
		}
		for _, api := range p.Native {
			if kind, ok := nativeKinds[api]; !ok || kind != p.Kind {
				return nil, fmt.Errorf("parse catalog: provider %q: native %q is not an API a provider of kind %s speaks (responses: kind openai; messages: kind anthropic)", p.Name, api, p.Kind)
			}
		}
		c.byProvider[p.Name] = p
	}
	for i := range c.Models {
		m := &c.Models[i]
		if _, dup := c.byID[m.ID]; dup {
			return nil, fmt.Errorf("parse catalog: duplicate model %q", m.ID)
		}
		if m.Targets != nil {
			if err := m.checkAlias(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
			if m.OwnedBy == "" {
				m.OwnedBy = AliasOwner
			}
			c.byID[m.ID] = m
			continue
		}
		if _, ok := c.byProvider[m.Provider]; !ok {
			return nil, fmt.Errorf("parse catalog: model %q: unknown provider %q", m.ID, m.Provider)
		}
		if err := m.Price.convert(pricing); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if err := m.Price.check(); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if m.Price != nil && m.Price.Free && m.Type != TypeChat {
			return nil, fmt.Errorf("parse catalog: model %q: price.free: only a chat model may be marked free; a %s model needs a price", m.ID, m.Type)
		}
		if m.TokensPerSecond != 0 && (m.TokensPerSecond < 0 || m.Type != TypeChat || c.byProvider[m.Provider].Kind != "synthetic") {
			return nil, fmt.Errorf("parse catalog: model %q: tokens_per_second must be positive, on a chat model of the synthetic provider", m.ID)
		}
		switch m.Type {
		case TypeChat:
			if !strings.HasPrefix(m.ID, m.Provider+"/") {
				return nil, fmt.Errorf("parse catalog: chat model %q must be named %s/<model>", m.ID, m.Provider)
			}
			if m.Capabilities == nil {
				m.Capabilities = &Capabilities{Streaming: true}
			}
			if err := c.checkChatPrice(m); err != nil {
				return nil, fmt.Errorf("parse catalog: %w", err)
			}
		case TypeImage:
			if err := m.checkImage(); err != nil {
				return nil, fmt.Errorf("parse catalog: image model %q: %w", m.ID, err)
			}
		case TypeMusic, TypeSFX, TypeVideo:
			if m.MaxDuration <= 0 || m.Price == nil {
				return nil, fmt.Errorf("parse catalog: job model %q needs max_duration and price", m.ID)
			}
			if err := m.checkFormats(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
			if err := m.checkJobLimits(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
		case TypeSpeech:
			if err := m.checkSpeech(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
		default:
			return nil, fmt.Errorf("parse catalog: model %q: unknown type %q", m.ID, m.Type)
		}
		if m.Upstream == "" {
			m.Upstream = strings.TrimPrefix(m.ID, m.Provider+"/")
		}
		if m.OwnedBy == "" {
			m.OwnedBy = m.Provider
		}
		c.byID[m.ID] = m
	}
	for _, m := range c.byID {
		if err := c.checkTargets(m); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if err := c.checkFallbacks(m); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
	}
	sort.SliceStable(c.Models, func(i, j int) bool { return c.Models[i].ID < c.Models[j].ID })
	for i := range c.Models { // re-point after sorting
		c.byID[c.Models[i].ID] = &c.Models[i]
	}
	return &c, nil
}

// checkChatPrice refuses a chat model that would be free by accident: of
// a provider that is not free, with no price of its own tokens (input,
// cached input, cache writes or output above zero) and no free marker.
// The message names the model and the two ways out.
func (c *Catalog) checkChatPrice(m *Model) error {
	if c.byProvider[m.Provider].IsFree() || (m.Price != nil && (m.Price.Free || m.Price.TokenPrices.charges())) {
		return nil
	}
	return fmt.Errorf(`chat model %q (provider %q) has no price: give it one (its vendor's list price: `+
		`"price": {"usd_per_million_input_tokens": N, "usd_per_million_output_tokens": N, "source": URL, "as_of": DATE}, or credits_per_million_..._tokens), `+
		`or mark it free on purpose ("price": {"free": true})`, m.ID, m.Provider)
}

// Pricing returns the credit value and markup the catalog's list prices
// were converted with.
func (c *Catalog) Pricing() Pricing { return c.pricing }

// checkTargets checks that alias m's targets are chat models of the
// catalog that are not aliases, each listed once, and sets m's
// Capabilities to those every target has. A model without targets passes.
func (c *Catalog) checkTargets(m *Model) error {
	if !m.Alias() {
		return nil
	}
	caps := Capabilities{Vision: true, Reasoning: true, Streaming: true, Tools: true, StructuredOutputs: true}
	for i, t := range m.Targets {
		tm, ok := c.byID[t.Model]
		switch {
		case !ok:
			return fmt.Errorf("targets[%d].model: unknown model %q", i, t.Model)
		case tm.Type != TypeChat:
			return fmt.Errorf("targets[%d].model: %q is a %s model, not chat", i, t.Model, tm.Type)
		case tm.Alias():
			return fmt.Errorf("targets[%d].model: %q is an alias; a target is a model with a provider", i, t.Model)
		case slices.ContainsFunc(m.Targets[:i], func(o Target) bool { return o.Model == t.Model }):
			return fmt.Errorf("targets[%d].model: %q is listed twice", i, t.Model)
		}
		tc := tm.Capabilities
		caps.Vision = caps.Vision && tc.Vision
		caps.Reasoning = caps.Reasoning && tc.Reasoning
		caps.Streaming = caps.Streaming && tc.Streaming
		caps.Tools = caps.Tools && tc.Tools
		caps.StructuredOutputs = caps.StructuredOutputs && tc.StructuredOutputs
	}
	m.Capabilities = &caps
	return nil
}

// checkFallbacks checks that m's fallbacks are other models of its type,
// each listed once.
func (c *Catalog) checkFallbacks(m *Model) error {
	for i, id := range m.Fallbacks {
		f, ok := c.byID[id]
		switch {
		case !ok:
			return fmt.Errorf("fallbacks: unknown model %q", id)
		case id == m.ID:
			return fmt.Errorf("fallbacks: a model is not its own fallback")
		case f.Type != m.Type:
			return fmt.Errorf("fallbacks: %q is a %s model, not %s", id, f.Type, m.Type)
		case slices.Contains(m.Fallbacks[:i], id):
			return fmt.Errorf("fallbacks: %q is listed twice", id)
		}
	}
	return nil
}

// Model returns the model with id, and whether it exists.
func (c *Catalog) Model(id string) (*Model, bool) {
	m, ok := c.byID[id]
	return m, ok
}

// Provider returns the provider named name, and whether it exists.
func (c *Catalog) Provider(name string) (*Provider, bool) {
	p, ok := c.byProvider[name]
	return p, ok
}

// Setup is how a deployment configures the catalog's providers: the
// values of the variables the providers name (their keys and base URLs),
// and the switches. The zero Setup configures the synthetic provider
// alone, with the native APIs on. It is read once, at start (package app
// reads it from the environment).
type Setup struct {
	// Vars holds the values of the variables the providers name (each
	// KeyEnv and BaseURLEnv; see Catalog.EnvNames), by name; a variable
	// that is unset is absent or "".
	Vars map[string]string
	// Configured (GENWAY_CONFIGURED) names providers configured without
	// their key: for a function that only lists models or validates jobs
	// and must not hold vendor secrets. The synthetic provider is not
	// concerned.
	Configured []string
	// NoSynthetic (GENWAY_SYNTHETIC=off) hides and disables the synthetic
	// provider.
	NoSynthetic bool
	// Bedrock (GENWAY_BEDROCK=on) configures the providers of kind
	// bedrock (through the AWS credential chain).
	Bedrock bool
	// NoNative (GENWAY_NATIVE=off) translates every request (see
	// Provider.NativeAPIs).
	NoNative bool
}

// Configured reports whether provider p can be used under s: the
// synthetic provider always (unless s.NoSynthetic), others when their key
// (or, for key-optional ones, their base URL) is set, or when s.Configured
// names them.
func (p *Provider) Configured(s Setup) bool {
	if p.Kind != "synthetic" && slices.Contains(s.Configured, p.Name) {
		return true
	}
	switch {
	case p.Kind == "synthetic":
		return !s.NoSynthetic
	case p.Kind == "bedrock":
		return s.Bedrock
	case p.KeyOptional:
		return p.BaseURLEnv != "" && s.Vars[p.BaseURLEnv] != ""
	default: // a key, or a pool of keys separated by commas ("sk-a,sk-b")
		return p.KeyEnv != "" && strings.Trim(s.Vars[p.KeyEnv], ", \t") != ""
	}
}

// BaseURLFor returns the provider's base URL, overridden by its variable
// in s.
func (p *Provider) BaseURLFor(s Setup) string {
	if p.BaseURLEnv != "" {
		if v := s.Vars[p.BaseURLEnv]; v != "" {
			return strings.TrimRight(v, "/")
		}
	}
	return strings.TrimRight(p.BaseURL, "/")
}

// EnvNames returns the variables the catalog's providers name (each
// KeyEnv and BaseURLEnv), sorted, each once: those a Setup's Vars holds.
func (c *Catalog) EnvNames() []string {
	var names []string
	for i := range c.Providers {
		for _, n := range []string{c.Providers[i].KeyEnv, c.Providers[i].BaseURLEnv} {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ConfiguredFunc returns a function reporting, for a provider name, whether
// it is configured under s (unknown names are not). It is resolved once,
// now: configuration is settled at start, not per request.
func (c *Catalog) ConfiguredFunc(s Setup) func(provider string) bool {
	set := make(map[string]bool, len(c.Providers))
	for i := range c.Providers {
		if p := &c.Providers[i]; p.Configured(s) {
			set[p.Name] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// Serves reports whether a server whose providers are configured as
// configured says (see ConfiguredFunc; nil: every provider is) can serve
// m: m's provider is configured or, for an alias, one of its targets'.
func (c *Catalog) Serves(m *Model, configured func(provider string) bool) bool {
	if configured == nil {
		return true
	}
	if !m.Alias() {
		return configured(m.Provider)
	}
	for _, t := range m.Targets {
		if tm, ok := c.byID[t.Model]; ok && configured(tm.Provider) {
			return true
		}
	}
	return false
}

// List returns the models of type typ ("" for all) that the server can
// serve (see Serves; configured nil: every model), in id order.
func (c *Catalog) List(typ string, configured func(provider string) bool) []Model {
	var out []Model
	for i := range c.Models {
		m := &c.Models[i]
		if typ != "" && m.Type != typ {
			continue
		}
		if !c.Serves(m, configured) {
			continue
		}
		out = append(out, *m)
	}
	return out
}
