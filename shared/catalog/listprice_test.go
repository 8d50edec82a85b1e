package catalog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// TestShippedPrices names every shipped model whose price is missing or
// unexplained: each chat model is priced (input and output above zero,
// in its base prices and every service tier and long-context set) or
// marked free on purpose, and each model priced from a vendor has a
// source and the date it was read. A new model without them fails here,
// by name.
func TestShippedPrices(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatalf("Default() = %v", err)
	}
	var unpriced, unsourced []string
	for i := range c.Models {
		m := &c.Models[i]
		if m.Alias() {
			continue
		}
		p, prov := m.Price, c.byProvider[m.Provider]
		if m.Type == TypeChat {
			free := prov.IsFree() && (p == nil || p.Free)
			priced := p != nil && full(p.TokenPrices)
			if priced && p.LongContext != nil {
				priced = full(p.LongContext.TokenPrices)
			}
			if p != nil {
				for _, tp := range p.ServiceTiers {
					priced = priced && full(tp)
				}
			}
			if !free && !priced {
				unpriced = append(unpriced, m.ID)
			}
		}
		if p != nil && !prov.IsFree() && (p.Source == "" || p.AsOf == "") {
			unsourced = append(unsourced, m.ID)
		}
		if p != nil && p.AsOf != "" {
			if d, err := time.Parse(time.DateOnly, p.AsOf); err != nil || d.Year() < 2025 {
				t.Errorf("%s: as_of %q; want the date its price was read", m.ID, p.AsOf)
			}
		}
	}
	if len(unpriced) > 0 {
		t.Errorf("shipped chat models without a price (input and output above zero) or a free marker of a free provider: %s", strings.Join(unpriced, ", "))
	}
	if len(unsourced) > 0 {
		t.Errorf("shipped models priced without a source and as_of: %s", strings.Join(unsourced, ", "))
	}
}

// full reports whether tp prices input and output above zero.
func full(tp TokenPrices) bool {
	r := tp.Rates()
	return r.Input > 0 && r.Output > 0
}

// TestShippedConversions checks some shipped list prices as credits at
// the default credit value ($0.01, no markup): each class, a service
// tier under both of OpenAI's names, long context, and media units.
func TestShippedConversions(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	model := func(id string) *Price {
		m, ok := c.Model(id)
		if !ok || m.Price == nil {
			t.Fatalf("Model(%q) = %v, %v; want a priced model", id, m, ok)
		}
		return m.Price
	}
	cr := func(s string) credits.Amount {
		a, err := credits.ParseAmount(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name string
		got  credits.TokenRates
		want credits.TokenRates
	}{
		{"gpt-5", model("openai/gpt-5").TokenPrices.Rates(),
			credits.TokenRates{Input: cr("125"), CachedInput: cr("12.5"), CacheWrite: cr("125"), CacheWrite1h: cr("125"), Output: cr("1000")}},
		{"gpt-5 flex", model("openai/gpt-5").ServiceTiers["flex"].Rates(),
			credits.TokenRates{Input: cr("62.5"), CachedInput: cr("6.25"), CacheWrite: cr("62.5"), CacheWrite1h: cr("62.5"), Output: cr("500")}},
		{"gpt-5 priority", model("openai/gpt-5").ServiceTiers["priority"].Rates(),
			credits.TokenRates{Input: cr("250"), CachedInput: cr("25"), CacheWrite: cr("250"), CacheWrite1h: cr("250"), Output: cr("2000")}},
		{"gpt-5 fast", model("openai/gpt-5").ServiceTiers["fast"].Rates(),
			credits.TokenRates{Input: cr("250"), CachedInput: cr("25"), CacheWrite: cr("250"), CacheWrite1h: cr("250"), Output: cr("2000")}},
		{"claude-sonnet-4-5", model("anthropic/claude-sonnet-4-5").TokenPrices.Rates(),
			credits.TokenRates{Input: cr("300"), CachedInput: cr("30"), CacheWrite: cr("375"), CacheWrite1h: cr("600"), Output: cr("1500")}},
		{"gemini-2.5-pro above 200k", model("gemini/gemini-2.5-pro").LongContext.Rates(),
			credits.TokenRates{Input: cr("250"), CachedInput: cr("25"), CacheWrite: cr("250"), CacheWrite1h: cr("250"), Output: cr("1500")}},
		{"deepseek-chat", model("deepseek/deepseek-chat").TokenPrices.Rates(),
			credits.TokenRates{Input: cr("14"), CachedInput: cr("0.28"), CacheWrite: cr("14"), CacheWrite1h: cr("14"), Output: cr("28")}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: rates %+v; want %+v", tt.name, tt.got, tt.want)
		}
	}
	if lc := model("gemini/gemini-2.5-pro").LongContext; lc.AbovePromptTokens != 200_000 {
		t.Errorf("gemini-2.5-pro long_context above %d prompt tokens; want 200000", lc.AbovePromptTokens)
	}
	for _, tt := range []struct {
		name      string
		got, want credits.Amount
	}{
		{"elevenlabs-sfx per job", model("elevenlabs-sfx").CreditsPerJob, cr("12")},
		{"elevenlabs-sfx per second", model("elevenlabs-sfx").CreditsPerSecond, 0},
		{"veo-3.1-fast per second", model("veo-3.1-fast").CreditsPerSecond, cr("12")},
		{"gpt-image-1.5 low", model("gpt-image-1.5").CreditsPerImageByQuality["low"], cr("1.3")},
		{"gpt-image-1.5 default", model("gpt-image-1.5").CreditsPerImage, cr("5")},
		{"flux-schnell", model("flux-schnell").CreditsPerImage, cr("0.3")},
		{"tts-1 per 1k chars", model("tts-1").CreditsPer1KChars, cr("1.5")},
		{"musicgen, stated in credits", model("musicgen").CreditsPerSecond, cr("1")},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %s; want %s", tt.name, tt.got, tt.want)
		}
	}
}

// TestPricingCredits: a list price becomes credits exactly, with the
// credit value and markup, rounded up to the micro-credit per unit.
func TestPricingCredits(t *testing.T) {
	tests := []struct {
		usd, credit, markup string
		want                credits.Amount
	}{
		{"0.15", "", "", 15 * credits.Credit},                           // the default: 1 credit = $0.01
		{"0.15", "0.01", "0", 15 * credits.Credit},                      // the same, said
		{"0.15", "0.003", "12.5", 56_250_000},                           // 0.15 x 1.125 / 0.003 = 56.25
		{"0.1", "0.003", "", 33_333_334},                                // 33.3333333... rounded up
		{"0.1", "0.003", "12.5", 37_500_000},                            // 37.5
		{"0.0028", "0.003", "12.5", 1_050_000},                          // 1.05
		{"0.138", "0.003", "12.5", 51_750_000},                          // 51.75
		{"0.000000001", "0.01", "", 1},                                  // 1e-7 credits: at least 1 µcr
		{"0.000000001", "0.003", "12.5", 1},                             // 3.75e-7: 1 µcr
		{"10", "0.003", "12.5", 3750 * credits.Credit},                  // 3750
		{"0.017", "0.0123", "7.25", 1_482_318},                          // 0.017 x 1.0725 / 0.0123 = 1.48231707...
		{"3.3", "1", "", 3_300_000},                                     // 1 credit = $1
		{"0", "0.003", "12.5", 0},                                       // free stays free
		{"1000000000", "0.001", "", 1_000_000_000_000 * credits.Credit}, // 1e12 credits: the maximum
	}
	for _, tt := range tests {
		pr, err := ParsePricing(tt.credit, tt.markup)
		if err != nil {
			t.Fatalf("ParsePricing(%q, %q) = %v", tt.credit, tt.markup, err)
		}
		u, err := ParseUSD(tt.usd)
		if err != nil {
			t.Fatalf("ParseUSD(%q) = %v", tt.usd, err)
		}
		got, err := pr.Credits(u)
		if err != nil || got != tt.want {
			t.Errorf("Credits($%s) at %s = %s, %v; want %s", tt.usd, pr, got, err, tt.want)
		}
	}
	pr, _ := ParsePricing("0.0001", "")
	if a, err := pr.Credits(MaxUSD); err == nil {
		t.Errorf("Credits(MaxUSD) at $0.0001 a credit = %s, nil; want an error (beyond the maximum amount)", a)
	}
}

func TestParsePricing(t *testing.T) {
	for _, tt := range []struct {
		credit, markup, want string // want: String(), or an error's words
	}{
		{"", "", "1 credit = US$0.01, markup 0%"},
		{"0.003", "12.5", "1 credit = US$0.003, markup 12.5%"},
		{"1", "0", "1 credit = US$1, markup 0%"},
		{"1e-3", "1E1", "1 credit = US$0.001, markup 10%"},
		{"0", "", "above 0"},
		{"-0.01", "", "above 0"},
		{"1/100", "", "above 0"},
		{"0.01 ", "", "above 0"},
		{"abc", "", "above 0"},
		{"", "-5", "from 0 to 10000"},
		{"", "10001", "from 0 to 10000"},
		{"", "12,5", "from 0 to 10000"},
	} {
		p, err := ParsePricing(tt.credit, tt.markup)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = p.String()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("ParsePricing(%q, %q) = %q; want %q", tt.credit, tt.markup, got, tt.want)
		}
	}
}

func TestUSD(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0.15", "0.15"}, {"3", "3"}, {"0.0028", "0.0028"}, {"2.5e-3", "0.0025"}, {"0.000000001", "0.000000001"},
		{"1E2", "100"}, {"0", "0"},
		{"0.0000000001", "more than 9 decimal places"}, {"-1", "negative"}, {"1e10", "beyond"}, {"0x10", "not a decimal"}, {"", "not a decimal"},
	} {
		u, err := ParseUSD(tt.in)
		got := u.String()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("ParseUSD(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	var p struct {
		A USD  `json:"a"`
		B *USD `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a": 0.075, "b": 12.5}`), &p); err != nil || p.A != 75_000_000 || p.B == nil || *p.B != 12_500_000_000 {
		t.Errorf("Unmarshal = %v, %d, %v; want 0.075 and 12.5 dollars", err, p.A, p.B)
	}
	if b, _ := json.Marshal(p); string(b) != `{"a":0.075,"b":12.5}` {
		t.Errorf("Marshal = %s; want the same numbers", b)
	}
}

// priceCatalog is a catalog with one paid provider ("v", kind openai),
// one free one ("local"), the synthetic provider, and the models %s.
const priceCatalog = `{"providers":[{"name":"v","kind":"openai","key_env":"V_KEY"},{"name":"local","kind":"openai","key_optional":true,"base_url_env":"LOCAL_URL","free":true},
{"name":"synthetic","kind":"synthetic"},{"name":"fal","kind":"fal"}],"models":[%s]}`

// TestListPriceLoad: a catalog's prices in USD are converted at load, and
// what is wrong with a price is an error naming the model and the field.
func TestListPriceLoad(t *testing.T) {
	const src = `"source":"https://example.com/pricing","as_of":"2026-11-28"`
	chat := func(price string) string {
		return `{"id":"v/m","type":"chat","provider":"v","price":` + price + `}`
	}
	tests := []struct {
		name, models, wantErr string
	}{
		{"list price", chat(`{"usd_per_million_input_tokens":0.15,"usd_per_million_output_tokens":0.6,` + src + `}`), ""},
		{"credits as written", chat(`{"credits_per_million_input_tokens":15,"credits_per_million_output_tokens":60}`), ""},
		{"one class each way", chat(`{"usd_per_million_input_tokens":0.15,"credits_per_million_output_tokens":60,` + src + `}`), ""},
		{"input both ways", chat(`{"usd_per_million_input_tokens":0.15,"credits_per_million_input_tokens":15,` + src + `}`),
			`model "v/m": price.usd_per_million_input_tokens and price.credits_per_million_input_tokens: a price states each class once`},
		{"zero credits and USD", chat(`{"usd_per_million_output_tokens":0.6,"credits_per_million_output_tokens":0,"credits_per_million_input_tokens":1,` + src + `}`),
			`price.usd_per_million_output_tokens and price.credits_per_million_output_tokens`},
		{"a tier both ways", chat(`{"usd_per_million_input_tokens":1,"service_tiers":{"flex":{"usd_per_million_cached_input_tokens":0.1,"credits_per_million_cached_input_tokens":10}},` + src + `}`),
			`price.service_tiers.flex.usd_per_million_cached_input_tokens and price.service_tiers.flex.credits_per_million_cached_input_tokens`},
		{"long context both ways", chat(`{"usd_per_million_input_tokens":1,"long_context":{"above_prompt_tokens":200000,"usd_per_million_cache_write_1h_tokens":2,"credits_per_million_cache_write_1h_tokens":200},` + src + `}`),
			`price.long_context.usd_per_million_cache_write_1h_tokens and price.long_context.credits_per_million_cache_write_1h_tokens`},
		{"ten decimal places", chat(`{"usd_per_million_input_tokens":0.0000000001,` + src + `}`),
			`model "v/m": price.usd_per_million_input_tokens: 0.0000000001 dollars has more than 9 decimal places`},
		{"negative", chat(`{"usd_per_million_output_tokens":-1,` + src + `}`), `model "v/m": price.usd_per_million_output_tokens: -1 is negative`},
		{"a string", chat(`{"usd_per_million_input_tokens":"0.15",` + src + `}`), `model "v/m": price.usd_per_million_input_tokens: must be a number of US dollars, not string`},
		{"in a tier", chat(`{"usd_per_million_input_tokens":1,"service_tiers":{"flex":{"usd_per_million_input_tokens":"x"}},` + src + `}`),
			`model "v/m": price.service_tiers.usd_per_million_input_tokens: must be a number of US dollars`},
		{"no source", chat(`{"usd_per_million_input_tokens":0.15,"as_of":"2026-11-28"}`), `model "v/m": price: a list price in USD needs its "source"`},
		{"no date", chat(`{"usd_per_million_input_tokens":0.15,"source":"https://example.com"}`), `"as_of" (the date it was read, YYYY-MM-DD)`},
		{"a bad date", chat(`{"usd_per_million_input_tokens":0.15,"source":"https://example.com","as_of":"28/11/2026"}`), `model "v/m": price.as_of: "28/11/2026" is not a date`},
		{"image qualities", `{"id":"img","type":"image","provider":"fal","sizes":["1x1"],"default_size":"1x1","max_images":1,"formats":["png"],"qualities":["low","high"],
			"price":{"usd_per_image":0.05,"usd_per_image_by_quality":{"low":0.013},"credits_per_image_by_quality":{"high":20},` + src + `}}`, ""},
		{"a quality both ways", `{"id":"img","type":"image","provider":"fal","sizes":["1x1"],"default_size":"1x1","max_images":1,"formats":["png"],"qualities":["low"],
			"price":{"usd_per_image":0.05,"usd_per_image_by_quality":{"low":0.013},"credits_per_image_by_quality":{"low":2},` + src + `}}`,
			`model "img": price.usd_per_image_by_quality.low and price.credits_per_image_by_quality.low`},
		{"a job both ways", `{"id":"sfx","type":"sfx","provider":"fal","formats":["mp3"],"max_duration":30,"price":{"usd_per_job":0.12,"credits_per_job":12,` + src + `}}`,
			`model "sfx": price.usd_per_job and price.credits_per_job`},
		{"speech in USD", `{"id":"say","type":"speech","provider":"fal","formats":["mp3"],"voices":["a"],"max_input":100,"price":{"usd_per_1k_chars":0.015,` + src + `}}`, ""},
		{"speech without a price", `{"id":"say","type":"speech","provider":"fal","formats":["mp3"],"voices":["a"],"max_input":100}`, `"usd_per_1k_chars": N`},
		{"image without a price", `{"id":"img","type":"image","provider":"fal","sizes":["1x1"],"default_size":"1x1","max_images":1,"formats":["png"]}`, `"usd_per_image": N`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(priceCatalog, tt.models)), Pricing{})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Parse = %v; want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
	tiny, _ := ParsePricing("0.0001", "")
	_, err := Parse([]byte(fmt.Sprintf(priceCatalog, chat(`{"usd_per_million_input_tokens":1000000000,`+src+`}`))), tiny)
	if want := `model "v/m": price.usd_per_million_input_tokens: $1000000000 is beyond`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse($1e9 at $0.0001 a credit) = %v; want an error containing %q", err, want)
	}
}

// TestListPriceConversion: Parse converts every class, tier, long
// context and media unit with the deployment's credit value and markup,
// keeps the list prices, and takes prices in credits as written.
func TestListPriceConversion(t *testing.T) {
	pr, err := ParsePricing("0.003", "12.5")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(fmt.Sprintf(priceCatalog, `{"id":"v/m","type":"chat","provider":"v","price":{
		"usd_per_million_input_tokens":0.1,"usd_per_million_cached_input_tokens":0.01,"usd_per_million_cache_write_tokens":0.125,
		"usd_per_million_cache_write_1h_tokens":0.2,"credits_per_million_output_tokens":7,
		"service_tiers":{"flex":{"usd_per_million_input_tokens":0.05,"usd_per_million_output_tokens":0.2}},
		"long_context":{"above_prompt_tokens":1000,"usd_per_million_input_tokens":0.2,"usd_per_million_output_tokens":0.8},
		"source":"https://example.com/pricing","as_of":"2026-11-28","note":"a note"}},
		{"id":"clip","type":"video","provider":"fal","formats":["mp4"],"max_duration":10,"price":{"usd_per_second":0.07,"usd_per_job":0.35,"source":"https://example.com","as_of":"2026-11-28"}}`)), pr)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if got := c.Pricing().String(); got != "1 credit = US$0.003, markup 12.5%" {
		t.Errorf("Pricing() = %q", got)
	}
	m, _ := c.Model("v/m")
	p := m.Price
	want := credits.TokenRates{Input: 37_500_000, CachedInput: 3_750_000, CacheWrite: 46_875_000, CacheWrite1h: 75_000_000, Output: 7 * credits.Credit}
	if got := p.TokenPrices.Rates(); got != want {
		t.Errorf("rates = %+v; want %+v", got, want)
	}
	if got := p.ServiceTiers["flex"].Rates(); got.Input != 18_750_000 || got.CachedInput != 18_750_000 || got.Output != 75_000_000 {
		t.Errorf("flex rates = %+v; want 18.75 in and cached, 75 out", got)
	}
	if got := p.LongContext.Rates(); got.Input != 75_000_000 || got.Output != 300_000_000 {
		t.Errorf("long context rates = %+v; want 75 in, 300 out", got)
	}
	if p.USDPerMillionInput == nil || *p.USDPerMillionInput != 100_000_000 || p.Source != "https://example.com/pricing" || p.AsOf != "2026-11-28" || p.Note != "a note" {
		t.Errorf("list price kept = %v, %q, %q, %q; want $0.1 and its source, date and note", p.USDPerMillionInput, p.Source, p.AsOf, p.Note)
	}
	// 100 input + 10 output tokens at 37.5 and 7 per million: 0.00375 +
	// 0.00007 credits.
	if cost, _ := p.ChatCost(credits.Tokens{Prompt: 100, Completion: 10}, ""); cost != 3820 {
		t.Errorf("ChatCost(100 in, 10 out) = %d µcr; want 3820", cost)
	}
	clip, _ := c.Model("clip")
	if got := clip.Price.JobCost(10); got != 262_500_000+131_250_000 { // 10 x 26.25 + 131.25
		t.Errorf("JobCost(10 s) = %s; want 393.75", got)
	}
}

// TestFreeMarker: a paid provider's chat model needs a price or the free
// marker (the error names it and both ways out); a free provider's (or
// the synthetic provider's) may have neither; the marker goes with no
// price, on chat models only; an alias has no price.
func TestFreeMarker(t *testing.T) {
	const src = `"source":"https://example.com","as_of":"2026-11-28"`
	tests := []struct {
		name, models, wantErr string
		free                  bool // v/m, local/m or synthetic/m is free (does not charge tokens)
	}{
		{"paid, no price", `{"id":"v/m","type":"chat","provider":"v"}`,
			`chat model "v/m" (provider "v") has no price: give it one (its vendor's list price: "price": {"usd_per_million_input_tokens"`, false},
		{"paid, zero price", `{"id":"v/m","type":"chat","provider":"v","price":{"credits_per_million_input_tokens":0,"credits_per_million_output_tokens":0}}`,
			`or mark it free on purpose ("price": {"free": true})`, false},
		{"paid, a source but no price", `{"id":"v/m","type":"chat","provider":"v","price":{` + src + `}}`, `chat model "v/m" (provider "v") has no price`, false},
		{"paid, only a tier priced", `{"id":"v/m","type":"chat","provider":"v","price":{"service_tiers":{"flex":{"credits_per_million_input_tokens":1}}}}`, `chat model "v/m" (provider "v") has no price`, false},
		{"paid, marked free", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true}}`, "", true},
		{"paid, free with a note", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true,"note":"our own deal"}}`, "", true},
		{"paid, output only", `{"id":"v/m","type":"chat","provider":"v","price":{"credits_per_million_output_tokens":1}}`, "", false},
		{"free provider, no price", `{"id":"local/m","type":"chat","provider":"local"}`, "", true},
		{"free provider, a price", `{"id":"local/m","type":"chat","provider":"local","price":{"credits_per_million_input_tokens":1}}`, "", false},
		{"synthetic, no price", `{"id":"synthetic/m","type":"chat","provider":"synthetic"}`, "", true},
		{"free and a price", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true,"credits_per_million_input_tokens":1}}`,
			`model "v/m": price.free: a model marked free has no price`, false},
		{"free and a list price", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true,"usd_per_million_output_tokens":1,` + src + `}}`,
			`price.free: a model marked free has no price`, false},
		{"free and a zero price", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true,"credits_per_million_input_tokens":0}}`,
			`price.free: a model marked free has no price`, false},
		{"free and a tier", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true,"service_tiers":{"flex":{}}}}`,
			`price.free: a model marked free has no price`, false},
		{"a free job model", `{"id":"sfx","type":"sfx","provider":"fal","formats":["mp3"],"max_duration":30,"price":{"free":true}}`,
			`model "sfx": price.free: only a chat model may be marked free`, false},
		{"an alias with the marker", `{"id":"v/m","type":"chat","provider":"v","price":{"free":true}},{"id":"fast","type":"chat","targets":[{"model":"v/m","weight":1}],"price":{"free":true}}`,
			"price: an alias", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(fmt.Sprintf(priceCatalog, tt.models)), Pricing{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v; want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse = %v; want nil", err)
			}
			m := &c.Models[0]
			if got := !m.Price.ChargesTokens(); got != tt.free {
				t.Errorf("%s free = %v; want %v", m.ID, got, tt.free)
			}
		})
	}
}

// TestTierNames: OpenAI's "priority" and "fast" are one tier; a price
// stating one has the other, and one stating both keeps both.
func TestTierNames(t *testing.T) {
	for _, tt := range []struct {
		tiers      string
		prio, fast credits.Amount // input price per million
	}{
		{`{"priority":{"credits_per_million_input_tokens":2}}`, 2 * credits.Credit, 2 * credits.Credit},
		{`{"fast":{"credits_per_million_input_tokens":3}}`, 3 * credits.Credit, 3 * credits.Credit},
		{`{"priority":{"credits_per_million_input_tokens":2},"fast":{"credits_per_million_input_tokens":3}}`, 2 * credits.Credit, 3 * credits.Credit},
	} {
		c, err := Parse([]byte(fmt.Sprintf(priceCatalog, `{"id":"v/m","type":"chat","provider":"v","price":{"credits_per_million_input_tokens":1,"service_tiers":`+tt.tiers+`}}`)), Pricing{})
		if err != nil {
			t.Fatalf("Parse(%s) = %v", tt.tiers, err)
		}
		m, _ := c.Model("v/m")
		prio, fast := m.Price.ChatRates(credits.Tokens{Prompt: 1}, TierPriority), m.Price.ChatRates(credits.Tokens{Prompt: 1}, TierFast)
		if prio.Input != tt.prio || fast.Input != tt.fast {
			t.Errorf("tiers %s: priority %s, fast %s; want %s, %s", tt.tiers, prio.Input, fast.Input, tt.prio, tt.fast)
		}
	}
}

// TestCatalogRoundTrip: a loaded catalog written back as JSON states each
// price as it was stated, so that it parses to the same prices (a tool
// that edits a catalog and writes it back, a test that adds a model).
func TestCatalogRoundTrip(t *testing.T) {
	pr, _ := ParsePricing("0.003", "12.5")
	c, err := Load("", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b, pr)
	if err != nil {
		t.Fatalf("Parse(Marshal(Default())) = %v", err)
	}
	for i := range c.Models {
		m := &c.Models[i]
		n, ok := again.Model(m.ID)
		if !ok || !reflect.DeepEqual(m.Price, n.Price) {
			t.Errorf("%s: price after a round trip %+v; want %+v", m.ID, n.Price, m.Price)
		}
	}
}
