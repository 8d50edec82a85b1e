package catalog

import (
	"fmt"
	"math/bits"

	"github.com/genway/genway/shared/credits"
)

// Price is what a model costs, in exact amounts of credits (decoded from
// the catalog's JSON decimals with no float; more than 6 decimal places of
// credits is a load error naming the model and field). Job models use
// CreditsPerSecond (of requested duration) and/or CreditsPerJob; chat
// models per-million-token prices; image models CreditsPerImage;
// speech models CreditsPer1KChars. The cost methods (ChatCost, SpeechCost,
// ImageCost, JobCost) compute exactly and round up at most once per
// request, to the micro-credit; a cost beyond credits.MaxAmount is
// credits.MaxAmount (no account can pay it).
//
// A catalog states each price one of two ways: as the vendor's list
// price in US dollars (the usd_ fields, with the Source it was read from
// and the date it was read, AsOf), which Parse converts into the credits
// field of the same class with the deployment's Pricing (the credit value
// and markup), rounding up to the micro-credit per unit; or in credits
// (the credits_ fields), used as written. A class stated both ways is a
// load error. After Parse the credits fields hold every price; the usd_
// fields keep the list prices, for the operator's eyes only.
type Price struct {
	CreditsPerSecond credits.Amount `json:"credits_per_second,omitempty"`
	CreditsPerJob    credits.Amount `json:"credits_per_job,omitempty"`
	// TokenPrices are a chat model's prices per MILLION tokens of each
	// class: 0.15 is 0.000015 credits for 100 input tokens.
	TokenPrices
	// ServiceTiers, if set, replace TokenPrices for a completion served
	// at a tier it names (OpenAI's service_tier "flex", "priority"): the
	// tier the upstream reports serving at, else the one asked for.
	// "priority" and "fast" (OpenAI's new name for it) are one tier:
	// Parse gives the one not stated the other's prices.
	ServiceTiers map[string]TokenPrices `json:"service_tiers,omitempty"`
	// LongContext, if set, replaces TokenPrices for a completion whose
	// prompt is longer than its AbovePromptTokens (Gemini 2.5 Pro above
	// 200k): every token of such a request is charged at its prices.
	LongContext *LongContext `json:"long_context,omitempty"`
	// CreditsPerImage is an image model's price of one image;
	// CreditsPerImageByQuality, if set, replaces it for the qualities it
	// names (a vendor whose price depends on the quality asked for).
	CreditsPerImage          credits.Amount            `json:"credits_per_image,omitempty"`
	CreditsPerImageByQuality map[string]credits.Amount `json:"credits_per_image_by_quality,omitempty"`
	// CreditsPer1KChars is a speech model's price per 1,000 characters
	// of input (Unicode code points, as the vendors count them).
	CreditsPer1KChars credits.Amount `json:"credits_per_1k_chars,omitempty"`

	// The list prices in US dollars, per the same units as the credits
	// fields they convert into (TokenPrices, ServiceTiers and
	// LongContext have theirs).
	USDPerSecond         *USD           `json:"usd_per_second,omitempty"`
	USDPerJob            *USD           `json:"usd_per_job,omitempty"`
	USDPerImage          *USD           `json:"usd_per_image,omitempty"`
	USDPerImageByQuality map[string]USD `json:"usd_per_image_by_quality,omitempty"`
	USDPer1KChars        *USD           `json:"usd_per_1k_chars,omitempty"`
	// Source is where the list price was read (a URL); AsOf the date it
	// was read (YYYY-MM-DD); both are required with a price in USD. Note
	// says what an operator should know of it (a third party's numbers,
	// a derived price, a model being retired).
	Source string `json:"source,omitempty"`
	AsOf   string `json:"as_of,omitempty"`
	Note   string `json:"note,omitempty"`

	// Free marks a chat model that costs nothing on purpose (a test model,
	// a server on the operator's own hardware): it states no price. A
	// chat model of a provider that is not free must have a price or
	// this marker (see Parse).
	Free bool `json:"free,omitempty"`
}

// TokenPrices are one set of a chat model's prices per million tokens,
// one per token class. A class without a price of its own is charged at
// another's: cached input and cache writes at the input price, 1-hour
// cache writes at the cache write price. Reasoning tokens are output.
// Each class may be stated in credits or as a list price in US dollars
// (the usd_ fields), which Parse converts into the credits field (see
// Price).
type TokenPrices struct {
	CreditsPerMillionInput        credits.Amount  `json:"credits_per_million_input_tokens,omitempty"`
	CreditsPerMillionCachedInput  *credits.Amount `json:"credits_per_million_cached_input_tokens,omitempty"`
	CreditsPerMillionCacheWrite   *credits.Amount `json:"credits_per_million_cache_write_tokens,omitempty"`
	CreditsPerMillionCacheWrite1h *credits.Amount `json:"credits_per_million_cache_write_1h_tokens,omitempty"`
	CreditsPerMillionOutput       credits.Amount  `json:"credits_per_million_output_tokens,omitempty"`

	USDPerMillionInput        *USD `json:"usd_per_million_input_tokens,omitempty"`
	USDPerMillionCachedInput  *USD `json:"usd_per_million_cached_input_tokens,omitempty"`
	USDPerMillionCacheWrite   *USD `json:"usd_per_million_cache_write_tokens,omitempty"`
	USDPerMillionCacheWrite1h *USD `json:"usd_per_million_cache_write_1h_tokens,omitempty"`
	USDPerMillionOutput       *USD `json:"usd_per_million_output_tokens,omitempty"`
}

// LongContext is the price of a chat completion whose prompt is longer
// than AbovePromptTokens.
type LongContext struct {
	AbovePromptTokens int `json:"above_prompt_tokens"`
	TokenPrices
}

// Rates returns tp with every class priced: a class without a price of
// its own at the price it falls back to.
func (tp TokenPrices) Rates() credits.TokenRates {
	r := credits.TokenRates{Input: tp.CreditsPerMillionInput, CachedInput: tp.CreditsPerMillionInput,
		CacheWrite: tp.CreditsPerMillionInput, Output: tp.CreditsPerMillionOutput}
	if tp.CreditsPerMillionCachedInput != nil {
		r.CachedInput = *tp.CreditsPerMillionCachedInput
	}
	if tp.CreditsPerMillionCacheWrite != nil {
		r.CacheWrite = *tp.CreditsPerMillionCacheWrite
	}
	r.CacheWrite1h = r.CacheWrite
	if tp.CreditsPerMillionCacheWrite1h != nil {
		r.CacheWrite1h = *tp.CreditsPerMillionCacheWrite1h
	}
	return r
}

// charges reports whether tp prices any class above zero.
func (tp TokenPrices) charges() bool {
	r := tp.Rates()
	return r.Input > 0 || r.CachedInput > 0 || r.CacheWrite > 0 || r.CacheWrite1h > 0 || r.Output > 0
}

// ChargesTokens reports whether p makes a chat completion cost credits:
// some token class of some tier is priced above zero.
func (p *Price) ChargesTokens() bool {
	if p == nil {
		return false
	}
	if p.TokenPrices.charges() || (p.LongContext != nil && p.LongContext.charges()) {
		return true
	}
	for _, tp := range p.ServiceTiers {
		if tp.charges() {
			return true
		}
	}
	return false
}

// ChatRates returns the per-million-token rates a completion of t tokens
// served at service tier tier ("" for none) is charged at: the tier's
// prices if p has them, else the long-context prices when t's prompt is
// above their threshold, else p's own.
func (p *Price) ChatRates(t credits.Tokens, tier string) credits.TokenRates {
	if p == nil {
		return credits.TokenRates{}
	}
	if tp, ok := p.ServiceTiers[tier]; ok && tier != "" {
		return tp.Rates()
	}
	if lc := p.LongContext; lc != nil && t.Prompt > int64(lc.AbovePromptTokens) {
		return lc.Rates()
	}
	return p.TokenPrices.Rates()
}

// MaxChatCost returns the most a chat completion of prompt input tokens
// and completion output tokens can cost, whatever its service tier,
// prompt length and use of the cache: every input token at the highest
// input-side rate (fresh, cached or written to the cache) and every
// output token at the highest output rate, over p's own prices, its
// service tiers and its long-context prices. What a hold reserves.
func (p *Price) MaxChatCost(prompt, completion int64) credits.Amount {
	if p == nil {
		return 0
	}
	var in, out credits.Amount
	highest := func(tp TokenPrices) {
		r := tp.Rates()
		in = max(in, r.Input, r.CachedInput, r.CacheWrite, r.CacheWrite1h)
		out = max(out, r.Output)
	}
	highest(p.TokenPrices)
	for _, tp := range p.ServiceTiers {
		highest(tp)
	}
	if p.LongContext != nil {
		highest(p.LongContext.TokenPrices)
	}
	return perMillion(tokens{prompt, in}, tokens{completion, out})
}

// tokens is one class of a chat completion's tokens and its price per
// million of them.
type tokens struct {
	n     int64
	price credits.Amount // per million tokens
}

// ChatCost returns what a chat completion of t tokens, served at service
// tier tier ("" for none), costs, and the rates it is charged at (see
// ChatRates): over its token classes (fresh input, cached input, cache
// writes of each lifetime, output; reasoning is output), the sum of
// tokens x price per million tokens, divided by a million and rounded up
// once, to the micro-credit, with every product exact (128 bits). Fresh
// input is the prompt less its cached and cache-write tokens. 100 prompt
// tokens at 0.15 credits per million cost exactly 0.000015 credits; any
// priced completion with a token costs at least 0.000001. 0 if the model
// has no token price.
func (p *Price) ChatCost(t credits.Tokens, tier string) (credits.Amount, credits.TokenRates) {
	if p == nil {
		return 0, credits.TokenRates{}
	}
	r := p.ChatRates(t, tier)
	fresh := t.Prompt - max(t.Cached, 0) - max(t.CacheWrite, 0) - max(t.CacheWrite1h, 0)
	return perMillion(
		tokens{fresh, r.Input},
		tokens{t.Cached, r.CachedInput},
		tokens{t.CacheWrite, r.CacheWrite},
		tokens{t.CacheWrite1h, r.CacheWrite1h},
		tokens{t.Completion, r.Output},
	), r
}

// perMillion returns the sum of each class's tokens x its price per
// million, divided by a million, rounded up to the micro-credit: the one
// rounding of a chat cost. Negative counts and prices count as 0.
func perMillion(classes ...tokens) credits.Amount {
	var hi, lo uint64
	for _, c := range classes {
		if c.n <= 0 || c.price <= 0 {
			continue
		}
		h, l := bits.Mul64(uint64(c.n), uint64(c.price))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, _ = bits.Add64(hi, h, carry) // at most 2^126 per class: no overflow for the classes we have
	}
	return ceilDiv(hi, lo, 1_000_000)
}

// ceilDiv returns the 128-bit (hi, lo) divided by d, rounded up, as an
// Amount; beyond credits.MaxAmount it is credits.MaxAmount.
func ceilDiv(hi, lo, d uint64) credits.Amount {
	if hi >= d { // the quotient needs more than 64 bits
		return credits.MaxAmount
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++ // cannot wrap: q < 2^64 - 1 when hi < d
	}
	if q > uint64(credits.MaxAmount) {
		return credits.MaxAmount
	}
	return credits.Amount(q)
}

// SpeechCost returns what speaking chars characters costs: chars x the
// price per 1,000 characters, divided by 1,000 and rounded up once, to the
// micro-credit (so any input of a priced model costs at least 0.000001).
func (p *Price) SpeechCost(chars int) credits.Amount {
	if p == nil || chars <= 0 || p.CreditsPer1KChars <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(chars), uint64(p.CreditsPer1KChars))
	return ceilDiv(hi, lo, 1000)
}

// ImageCost returns what n images of quality cost (quality "" or one
// without a price of its own: CreditsPerImage): n x the price per image,
// exact (no rounding).
func (p *Price) ImageCost(quality string, n int) credits.Amount {
	if p == nil || n <= 0 {
		return 0
	}
	per := p.CreditsPerImage
	if q, ok := p.CreditsPerImageByQuality[quality]; ok {
		per = q
	}
	return saturate(per.Mul(int64(n)))
}

// JobCost returns what a job of duration seconds costs: CreditsPerJob +
// CreditsPerSecond x duration, exact (no rounding).
func (p *Price) JobCost(duration int) credits.Amount {
	if p == nil {
		return 0
	}
	perSecond := saturate(p.CreditsPerSecond.Mul(int64(max(duration, 0))))
	return saturate(p.CreditsPerJob.Add(perSecond))
}

// saturate returns a, or credits.MaxAmount for a cost beyond it (err).
func saturate(a credits.Amount, err error) credits.Amount {
	if err != nil {
		return credits.MaxAmount
	}
	return a
}

// check refuses a negative price, naming its field.
func (p *Price) check() error {
	if p == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		a    credits.Amount
	}{
		{"credits_per_second", p.CreditsPerSecond}, {"credits_per_job", p.CreditsPerJob},
		{"credits_per_image", p.CreditsPerImage}, {"credits_per_1k_chars", p.CreditsPer1KChars},
	} {
		if f.a < 0 {
			return fmt.Errorf("price.%s: %s is negative", f.name, f.a)
		}
	}
	for q, a := range p.CreditsPerImageByQuality {
		if a < 0 {
			return fmt.Errorf("price.credits_per_image_by_quality.%s: %s is negative", q, a)
		}
	}
	if err := p.TokenPrices.check("price."); err != nil {
		return err
	}
	for tier, tp := range p.ServiceTiers {
		if err := tp.check("price.service_tiers." + tier + "."); err != nil {
			return err
		}
	}
	if lc := p.LongContext; lc != nil {
		if lc.AbovePromptTokens <= 0 {
			return fmt.Errorf("price.long_context.above_prompt_tokens: must be a positive number of tokens")
		}
		if err := lc.check("price.long_context."); err != nil {
			return err
		}
	}
	return nil
}

// check refuses a negative token price, naming its field after prefix.
func (tp TokenPrices) check(prefix string) error {
	r := tp.Rates()
	for _, f := range []struct {
		name string
		a    credits.Amount
	}{
		{"credits_per_million_input_tokens", r.Input}, {"credits_per_million_cached_input_tokens", r.CachedInput},
		{"credits_per_million_cache_write_tokens", r.CacheWrite}, {"credits_per_million_cache_write_1h_tokens", r.CacheWrite1h},
		{"credits_per_million_output_tokens", r.Output},
	} {
		if f.a < 0 {
			return fmt.Errorf("%s%s: %s is negative", prefix, f.name, f.a)
		}
	}
	return nil
}
