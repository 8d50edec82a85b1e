package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

func TestDefaultParses(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatalf("Default() = %v", err)
	}
	for _, m := range c.Models {
		if m.Type != TypeChat && m.Price == nil {
			t.Errorf("job model %s has no price", m.ID)
		}
		if _, ok := c.Provider(m.Provider); !ok {
			t.Errorf("model %s: unknown provider %s", m.ID, m.Provider)
		}
		if m.Type != TypeChat && len(m.Formats) == 0 {
			t.Errorf("job model %s lists no formats", m.ID)
		}
	}
}

// TestFormats checks that every job model must list the formats it
// produces, and that a video model's are exactly mp4.
func TestFormats(t *testing.T) {
	const cat = `{"providers":[{"name":"v","kind":"fal"}],"models":[{"id":"m","type":%q,"provider":"v","max_duration":8,"price":{"credits_per_second":1}%s}]}`
	tests := []struct {
		name, typ, formats, wantErr string
	}{
		{"video mp4", "video", `,"formats":["mp4"]`, ""},
		{"video without formats", "video", ``, `"formats": ["mp4"]`},
		{"video empty formats", "video", `,"formats":[]`, `"formats": ["mp4"]`},
		{"video webm", "video", `,"formats":["webm"]`, `"formats": ["mp4"]`},
		{"video mp4 and webm", "video", `,"formats":["mp4","webm"]`, `"formats": ["mp4"]`},
		{"music mp3 and wav", "music", `,"formats":["mp3","wav"],"modes":["DESCRIPTION"]`, ""},
		{"music without formats", "music", `,"modes":["DESCRIPTION"]`, `needs "formats"`},
		{"sfx wav", "sfx", `,"formats":["wav"]`, ""},
		{"sfx without formats", "sfx", ``, `needs "formats"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(cat, tt.typ, tt.formats)), Pricing{})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Parse(%s) = %v; want nil", tt.formats, err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Parse(%s) = %v; want an error containing %q", tt.formats, err, tt.wantErr)
			}
		})
	}
}

// TestJobLimits checks that a job model's defaults are among the values it
// allows, so that a request with no duration or size is never refused.
func TestJobLimits(t *testing.T) {
	const head = `{"providers":[{"name":"v","kind":"fal"}],"models":[{"id":"m","type":"video","provider":"v","formats":["mp4"],"price":{"credits_per_second":1},`
	tests := []struct {
		name, model, wantErr string
	}{
		{"plain", `"max_duration":8}`, ""},
		{"durations with their default", `"max_duration":8,"durations":[4,6,8],"default_duration":8}`, ""},
		{"durations without a default", `"max_duration":8,"durations":[4,8]}`, "need a default_duration"},
		{"default not allowed", `"max_duration":8,"durations":[4,8],"default_duration":6}`, "not one of durations"},
		{"duration over max", `"max_duration":8,"durations":[4,10],"default_duration":4}`, "not within"},
		{"default over max", `"max_duration":8,"default_duration":9}`, "not within"},
		{"default size not allowed", `"max_duration":8,"sizes":["1280x720"],"default_size":"640x360"}`, "not one of sizes"},
		{"size durations of an unknown size", `"max_duration":8,"sizes":["1280x720"],"size_durations":{"1920x1080":[8]}}`, "not one of sizes"},
		{"size durations", `"max_duration":8,"sizes":["1280x720","1920x1080"],"default_size":"1280x720","size_durations":{"1920x1080":[8]}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tt.model+`]}`), Pricing{})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Parse = %v; want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestHostedMusicModes: a hosted music model with no lyrics input must
// refuse LYRICS mode instead of dropping the lyrics.
func TestHostedMusicModes(t *testing.T) {
	const cat = `{"providers":[{"name":"r","kind":"replicate"}],"models":[{"id":"m","type":"music","provider":"r","formats":["mp3"],"max_duration":30,"price":{"credits_per_job":1},"input":{"prompt":"p"}%s}]}`
	if _, err := Parse([]byte(fmt.Sprintf(cat, "")), Pricing{}); err == nil || !strings.Contains(err.Error(), "modes") {
		t.Errorf("Parse(no modes) = %v; want an error naming modes", err)
	}
	if _, err := Parse([]byte(fmt.Sprintf(cat, `,"modes":["DESCRIPTION"]`)), Pricing{}); err != nil {
		t.Errorf("Parse(DESCRIPTION only) = %v; want nil", err)
	}
}

func TestDeadline(t *testing.T) {
	if d := (&Model{}).Deadline(); d != DefaultDeadline {
		t.Errorf("Deadline() = %v; want %v", d, DefaultDeadline)
	}
	if d := (&Model{DeadlineSeconds: 60}).Deadline(); d != time.Minute {
		t.Errorf("Deadline() = %v; want 1m", d)
	}
}

func TestInputBuild(t *testing.T) {
	tests := []struct {
		name string
		in   *Input
		want string
	}{
		{"nil maps the prompt only", nil, `{"prompt":"p"}`},
		{"kling-like", &Input{Duration: "duration", DurationString: true, AspectRatio: "aspect_ratio", Fixed: map[string]any{"cfg_scale": 0.5}},
			`{"aspect_ratio":"16:9","cfg_scale":0.5,"duration":"5","prompt":"p"}`},
		{"numbers, resolution, size", &Input{Prompt: "text", Duration: "seconds", Resolution: "resolution", Size: "size"},
			`{"resolution":"720p","seconds":5,"size":"1280x720","text":"p"}`},
		{"milliseconds, lyrics, format; mapped fields override fixed", &Input{DurationMS: "length_ms", Lyrics: "lyrics", Format: "output_format", Fixed: map[string]any{"output_format": "flac", "prompt": "x"}},
			`{"length_ms":5000,"lyrics":"la","output_format":"mp3","prompt":"p"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size, lyrics, format := "1280x720", "", ""
			if strings.Contains(tt.name, "lyrics") {
				size, lyrics, format = "", "la", "mp3"
			}
			b, _ := json.Marshal(tt.in.Build("p", "", 5, size, lyrics, format))
			if string(b) != tt.want {
				t.Errorf("Build = %s; want %s", b, tt.want)
			}
		})
	}
	if got := (&Input{}).Build("door", "impact", 5, "", "", ""); got["prompt"] != "impact: door" {
		t.Errorf("unmapped category: prompt = %v; want it folded in", got["prompt"])
	}
	if got := (&Input{Category: "cat"}).Build("door", "impact", 5, "", "", ""); got["prompt"] != "door" || got["cat"] != "impact" {
		t.Errorf("mapped category = %v; want its own field", got)
	}
	if got := (&Input{AspectRatio: "ar"}).Build("p", "", 5, "720x1280", "", ""); got["ar"] != "9:16" {
		t.Errorf("portrait aspect ratio = %v; want 9:16", got["ar"])
	}
}

func TestConfigured(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		setup Setup
		name  string
		want  bool
	}{
		{Setup{}, "synthetic", true},
		{Setup{NoSynthetic: true}, "synthetic", false},
		{Setup{Configured: []string{"synthetic"}, NoSynthetic: true}, "synthetic", false},
		{Setup{}, "fal", false},
		{Setup{Vars: map[string]string{"FAL_KEY": "k"}}, "fal", true},
		{Setup{Vars: map[string]string{"FAL_KEY": "k1,k2"}}, "fal", true}, // a key pool
		{Setup{Vars: map[string]string{"FAL_KEY": " , "}}, "fal", false},  // a pool of no key
		{Setup{Configured: []string{"gemini", "fal"}}, "fal", true},
		{Setup{Configured: []string{"gemini"}}, "fal", false},
		{Setup{Configured: []string{"fal"}}, "nope", false},
	}
	for _, tt := range tests {
		if got := c.ConfiguredFunc(tt.setup)(tt.name); got != tt.want {
			t.Errorf("configured(%s) with %+v = %v; want %v", tt.name, tt.setup, got, tt.want)
		}
	}
}

// TestNative: a provider speaks natively only the API of its kind
// (responses for kind openai, messages for kind anthropic); NativeAPIs
// names them, none with GENWAY_NATIVE=off.
func TestNative(t *testing.T) {
	const cat = `{"providers":[{"name":"p","kind":%q,"native":[%q]}],"models":[]}`
	for _, tt := range []struct {
		kind, api string
		ok        bool
	}{{"openai", "responses", true}, {"anthropic", "messages", true}, {"openai", "messages", false},
		{"anthropic", "responses", false}, {"gemini", "responses", false}, {"openai", "chat", false}} {
		c, err := Parse([]byte(fmt.Sprintf(cat, tt.kind, tt.api)), Pricing{})
		if !tt.ok {
			if err == nil || !strings.Contains(err.Error(), "native") {
				t.Errorf("Parse(kind %s, native %s) = %v; want an error naming native", tt.kind, tt.api, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(kind %s, native %s) = %v", tt.kind, tt.api, err)
		}
		p := &c.Providers[0]
		if got := p.NativeAPIs(Setup{}); len(got) != 1 || got[0] != tt.api {
			t.Errorf("NativeAPIs() = %v; want [%s]", got, tt.api)
		}
		if got := p.NativeAPIs(Setup{NoNative: true}); got != nil {
			t.Errorf("NativeAPIs() with GENWAY_NATIVE=off = %v; want none", got)
		}
	}
}

// TestTokensPerSecond: only a synthetic chat model may be paced, and only
// at a positive rate; other providers would ignore the setting.
func TestTokensPerSecond(t *testing.T) {
	const cat = `{"providers":[{"name":"synthetic","kind":"synthetic"},{"name":"openai","kind":"openai"}],"models":[%s]}`
	tests := []struct {
		name, model string
		ok          bool
	}{
		{"synthetic chat", `{"id":"synthetic/slow","type":"chat","provider":"synthetic","tokens_per_second":40}`, true},
		{"negative", `{"id":"synthetic/slow","type":"chat","provider":"synthetic","tokens_per_second":-1}`, false},
		{"another provider", `{"id":"openai/gpt-4o","type":"chat","provider":"openai","tokens_per_second":40}`, false},
		{"a job model", `{"id":"synthetic-sfx","type":"sfx","provider":"synthetic","formats":["mp3"],"max_duration":5,"price":{"credits_per_job":1},"tokens_per_second":40}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(fmt.Sprintf(cat, tt.model)), Pricing{})
			if tt.ok {
				if err != nil {
					t.Fatalf("Parse = %v; want nil", err)
				}
				if m, _ := c.Model("synthetic/slow"); m.TokensPerSecond != 40 {
					t.Errorf("tokens_per_second = %d; want 40", m.TokensPerSecond)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "tokens_per_second") {
				t.Errorf("Parse = %v; want an error naming tokens_per_second", err)
			}
		})
	}
}

// TestImageModels: an image model needs a price per image, sizes with its
// default among them, max_images, and formats among png, jpeg and webp;
// its default quality and its prices by quality are among its qualities.
// max_prompt and default_response_format get their defaults.
func TestImageModels(t *testing.T) {
	const cat = `{"providers":[{"name":"v","kind":"openai"}],"models":[{"id":"m","type":"image","provider":"v"%s}]}`
	const ok = `,"sizes":["1024x1024","auto"],"default_size":"auto","max_images":4,"formats":["png"],"price":{"credits_per_image":2}`
	tests := []struct {
		name, fields, wantErr string
	}{
		{"ok", ok, ""},
		{"no price", `,"sizes":["1024x1024"],"default_size":"1024x1024","max_images":4,"formats":["png"]`, "credits_per_image"},
		{"zero price", strings.Replace(ok, `"credits_per_image":2`, `"credits_per_image":0`, 1), "credits_per_image"},
		{"no max_images", strings.Replace(ok, `"max_images":4,`, "", 1), "max_images"},
		{"no sizes", strings.Replace(ok, `"sizes":["1024x1024","auto"],`, "", 1), "sizes"},
		{"default size not offered", strings.Replace(ok, `"default_size":"auto"`, `"default_size":"512x512"`, 1), "default_size"},
		{"a size that is no size", strings.Replace(ok, `"1024x1024",`, `"big",`, 1), `size "big"`},
		{"no formats", strings.Replace(ok, `"formats":["png"],`, "", 1), "formats"},
		{"gif", strings.Replace(ok, `["png"]`, `["png","gif"]`, 1), `format "gif"`},
		{"default quality not offered", ok + `,"qualities":["low"],"default_quality":"high"`, "default_quality"},
		{"price of a quality not offered", strings.Replace(ok, `{"credits_per_image":2}`, `{"credits_per_image":2,"credits_per_image_by_quality":{"high":9}}`, 1), "credits_per_image_by_quality"},
		{"response format", ok + `,"default_response_format":"html"`, "default_response_format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(fmt.Sprintf(cat, tt.fields)), Pricing{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v; want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			m, _ := c.Model("m")
			if m.MaxPrompt != DefaultMaxPrompt || m.DefaultResponseFormat != "b64_json" || m.ImageDeadline() != DefaultImageDeadline {
				t.Errorf("defaults: max_prompt %d, default_response_format %q, deadline %s", m.MaxPrompt, m.DefaultResponseFormat, m.ImageDeadline())
			}
		})
	}
}

// TestImageCost: n images cost n times their quality's price (the price
// per image without one), exactly.
func TestImageCost(t *testing.T) {
	p := &Price{CreditsPerImage: 5 * credits.Credit, CreditsPerImageByQuality: map[string]credits.Amount{"low": 1_500_000, "high": 20 * credits.Credit, "tiny": credits.Micro}}
	tests := []struct {
		quality string
		n       int
		want    credits.Amount
	}{
		{"", 1, 5 * credits.Credit}, {"medium", 2, 10 * credits.Credit}, {"low", 1, 1_500_000}, {"low", 3, 4_500_000},
		{"high", 3, 60 * credits.Credit}, {"high", 0, 0}, {"tiny", 7, 7}, {"", -1, 0},
	}
	for _, tt := range tests {
		if got := p.ImageCost(tt.quality, tt.n); got != tt.want {
			t.Errorf("ImageCost(%q, %d) = %s; want %s", tt.quality, tt.n, got, tt.want)
		}
	}
	if got := (*Price)(nil).ImageCost("", 1); got != 0 {
		t.Errorf("nil price: %s", got)
	}
	huge := &Price{CreditsPerImage: credits.MaxAmount}
	if got := huge.ImageCost("", 2); got != credits.MaxAmount {
		t.Errorf("ImageCost past the maximum = %s; want %s", got, credits.MaxAmount)
	}
}

// TestJobCost: per job plus per second times the duration, exactly.
func TestJobCost(t *testing.T) {
	tests := []struct {
		p        Price
		duration int
		want     credits.Amount
	}{
		{Price{CreditsPerSecond: credits.Credit}, 10, 10 * credits.Credit},
		{Price{CreditsPerSecond: 333_333}, 3, 999_999},
		{Price{CreditsPerJob: 2_500_000}, 30, 2_500_000},
		{Price{CreditsPerJob: credits.Credit, CreditsPerSecond: 100_001}, 10, 2_000_010},
		{Price{CreditsPerSecond: credits.MaxAmount}, 2, credits.MaxAmount},
		{Price{CreditsPerJob: credits.MaxAmount, CreditsPerSecond: 1}, 1, credits.MaxAmount},
	}
	for _, tt := range tests {
		if got := tt.p.JobCost(tt.duration); got != tt.want {
			t.Errorf("%+v.JobCost(%d) = %s; want %s", tt.p, tt.duration, got, tt.want)
		}
	}
	if got := (*Price)(nil).JobCost(5); got != 0 {
		t.Errorf("nil price: JobCost = %s; want 0", got)
	}
}

// tp returns token prices of in and out credits per million (µcr).
func tp(in, out credits.Amount) TokenPrices {
	return TokenPrices{CreditsPerMillionInput: in, CreditsPerMillionOutput: out}
}

// amt returns a pointer to a.
func amt(a credits.Amount) *credits.Amount { return &a }

// TestChatCost: tokens times the price per million of their class,
// summed over the classes, rounded up once to the micro-credit; a
// 100-token request costs its exact price, not a whole credit. Cached
// input and cache writes are parts of the prompt, each at its own price
// (the input price where the model has none), reasoning is output; a
// service tier or a long prompt selects other prices.
func TestChatCost(t *testing.T) {
	gpt := &Price{TokenPrices: tp(150_000, 600_000)} // 0.15 and 0.6 credits per million
	cached := &Price{TokenPrices: TokenPrices{CreditsPerMillionInput: 3_000_000, CreditsPerMillionOutput: 15_000_000,
		CreditsPerMillionCachedInput: amt(300_000), CreditsPerMillionCacheWrite: amt(3_750_000), CreditsPerMillionCacheWrite1h: amt(6_000_000)}}
	tiers := &Price{TokenPrices: tp(1_250_000, 10_000_000), ServiceTiers: map[string]TokenPrices{
		"flex": tp(625_000, 5_000_000), "priority": tp(2_500_000, 20_000_000)}}
	long := &Price{TokenPrices: tp(1_250_000, 10_000_000), LongContext: &LongContext{AbovePromptTokens: 200_000, TokenPrices: tp(2_500_000, 15_000_000)}}
	tok := func(prompt, completion int64) credits.Tokens {
		return credits.Tokens{Prompt: prompt, Completion: completion}
	}
	tests := []struct {
		name string
		p    *Price
		t    credits.Tokens
		tier string
		want credits.Amount
	}{
		{"100 prompt tokens", gpt, tok(100, 0), "", 15}, // 100 x 0.15 / 1e6 = 0.000015 credits
		{"prompt and completion", gpt, tok(60, 40), "", 9 + 24},
		{"rounds up", gpt, tok(1, 0), "", 1},                // 0.00000015 rounds up to 0.000001
		{"one rounding", gpt, tok(1, 1), "", 1},             // 0.00000075: one rounding for the request, not one per class
		{"not per class", gpt, tok(3, 3), "", 3},            // 0.00000225 -> 0.000003, where rounding each class would give 4
		{"a million each", gpt, tok(1e6, 1e6), "", 750_000}, // 0.75 credits
		{"nothing", gpt, tok(0, 0), "", 0},
		{"input only", &Price{TokenPrices: tp(3*credits.Credit, 0)}, tok(1000, 5000), "", 3000},
		{"no prices", &Price{}, tok(100, 100), "", 0},
		{"nil", nil, tok(100, 100), "", 0},
		{"negative counts as 0", gpt, tok(-5, 10), "", 6},
		{"past 64 bits", &Price{TokenPrices: tp(credits.MaxAmount, 0)}, tok(1<<40, 0), "", credits.MaxAmount},
		{"past the maximum", &Price{TokenPrices: tp(1_000_000_000_000, 0)}, tok(1<<62, 0), "", credits.MaxAmount},
		{"exact past 2^31", &Price{TokenPrices: tp(1_000_003, 1_000_003)}, tok(1<<30, 1<<30), "", 2_147_490_091}, // 2^31 x 1.000003 = 2147490090.944 -> up
		// 1000 prompt tokens: 100 fresh at 3, 500 cached at 0.3, 300 written
		// for 5 minutes at 3.75, 100 for an hour at 6; 200 output at 15
		// (50 of them reasoning, output all the same).
		{"classes", cached, credits.Tokens{Prompt: 1000, Cached: 500, CacheWrite: 300, CacheWrite1h: 100, Completion: 200, Reasoning: 50}, "",
			300 + 150 + 1125 + 600 + 3000},
		{"cached at the input price without one", gpt, credits.Tokens{Prompt: 100, Cached: 100}, "", 15},
		{"1-hour writes at the write price without one", &Price{TokenPrices: TokenPrices{CreditsPerMillionInput: 1_000_000,
			CreditsPerMillionCacheWrite: amt(2_000_000)}}, credits.Tokens{Prompt: 1000, CacheWrite1h: 1000}, "", 2000},
		{"parts above the prompt charge no fresh input", cached, credits.Tokens{Prompt: 10, Cached: 20}, "", 6},
		{"flex", tiers, tok(1000, 1000), "flex", 625 + 5000},
		{"priority", tiers, tok(1000, 1000), "priority", 2500 + 20000},
		{"a tier without prices", tiers, tok(1000, 1000), "default", 1250 + 10000},
		{"at the long-context threshold", long, tok(200_000, 1000), "", 250_000 + 10_000},
		{"above it", long, tok(200_001, 1000), "", 500_003 + 15_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := tt.p.ChatCost(tt.t, tt.tier); got != tt.want {
				t.Errorf("%+v.ChatCost(%+v, %q) = %s; want %s", tt.p, tt.t, tt.tier, got, tt.want)
			}
		})
	}
	if _, r := cached.ChatCost(tok(1, 1), ""); r != (credits.TokenRates{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000}) {
		t.Errorf("ChatCost rates = %+v; want every class's price", r)
	}
	if _, r := gpt.ChatCost(tok(1, 1), ""); r != (credits.TokenRates{Input: 150_000, CachedInput: 150_000, CacheWrite: 150_000, CacheWrite1h: 150_000, Output: 600_000}) {
		t.Errorf("ChatCost rates = %+v; want the input price for the cache classes", r)
	}
}

// TestMaxChatCost: the bound a hold reserves is the highest input-side
// and output rates over every tier and the long-context prices.
func TestMaxChatCost(t *testing.T) {
	tests := []struct {
		name               string
		p                  *Price
		prompt, completion int64
		want               credits.Amount
	}{
		{"plain", &Price{TokenPrices: tp(150_000, 600_000)}, 1000, 1000, 150 + 600},
		{"cache writes cost more than input", &Price{TokenPrices: TokenPrices{CreditsPerMillionInput: 3_000_000, CreditsPerMillionOutput: 15_000_000,
			CreditsPerMillionCacheWrite1h: amt(6_000_000)}}, 1000, 1000, 6000 + 15000},
		{"priority tier", &Price{TokenPrices: tp(1_250_000, 10_000_000), ServiceTiers: map[string]TokenPrices{"priority": tp(2_500_000, 20_000_000)}}, 1000, 1000, 2500 + 20000},
		{"long context", &Price{TokenPrices: tp(1_250_000, 10_000_000), LongContext: &LongContext{AbovePromptTokens: 1, TokenPrices: tp(2_500_000, 15_000_000)}}, 1000, 1000, 2500 + 15000},
		{"nil", nil, 1000, 1000, 0},
	}
	for _, tt := range tests {
		if got := tt.p.MaxChatCost(tt.prompt, tt.completion); got != tt.want {
			t.Errorf("%s: MaxChatCost(%d, %d) = %s; want %s", tt.name, tt.prompt, tt.completion, got, tt.want)
		}
	}
}

// TestPriceDecoding: catalog prices are read exactly from their JSON
// decimals; more than 6 decimal places, a price past the maximum or a
// negative price is a load error naming the model and the field; the
// models list shows the prices as the same numbers.
func TestPriceDecoding(t *testing.T) {
	const cat = `{"providers":[{"name":"v","kind":"openai"}],"models":[{"id":"v/m","type":"chat","provider":"v","price":%s}]}`
	c, err := Parse([]byte(fmt.Sprintf(cat, `{"credits_per_million_input_tokens":0.15,"credits_per_million_output_tokens":6E-1}`)), Pricing{})
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	m, _ := c.Model("v/m")
	if m.Price.CreditsPerMillionInput != 150_000 || m.Price.CreditsPerMillionOutput != 600_000 {
		t.Errorf("prices = %d, %d µcr; want 150000, 600000", m.Price.CreditsPerMillionInput, m.Price.CreditsPerMillionOutput)
	}
	if b, _ := json.Marshal(m.Price); string(b) != `{"credits_per_million_input_tokens":0.15,"credits_per_million_output_tokens":0.6}` {
		t.Errorf("price as JSON = %s", b)
	}
	for _, tt := range []struct{ price, says string }{
		{`{"credits_per_million_input_tokens":0.0000001}`, `model "v/m": price.credits_per_million_input_tokens: 0.0000001 credits has more than 6 decimal places`},
		{`{"credits_per_million_output_tokens":1e13}`, `model "v/m": price.credits_per_million_output_tokens: 1e13 credits is beyond`},
		{`{"credits_per_million_output_tokens":"1"}`, `model "v/m": price.credits_per_million_output_tokens: must be a number of credits, not string`},
		{`{"credits_per_million_input_tokens":-1}`, `model "v/m": price.credits_per_million_input_tokens: -1 is negative`},
	} {
		_, err := Parse([]byte(fmt.Sprintf(cat, tt.price)), Pricing{})
		if err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Parse(price %s) = %v; want an error saying %q", tt.price, err, tt.says)
		}
	}
	_, err = Parse([]byte(`{"providers":[{"name":"v","kind":"fal"}],"models":[{"id":"img","type":"image","provider":"v","sizes":["1x1"],"default_size":"1x1","max_images":1,"formats":["png"],"qualities":["low"],"price":{"credits_per_image":1,"credits_per_image_by_quality":{"low":0.1234567}}}]}`), Pricing{})
	if err == nil || !strings.Contains(err.Error(), `model "img": price.credits_per_image_by_quality`) || !strings.Contains(err.Error(), "more than 6 decimal places") {
		t.Errorf("Parse(a quality's price with 7 places) = %v; want an error naming the model and the field", err)
	}
}

func TestAspectRatio(t *testing.T) {
	for size, want := range map[string]string{"1920x1080": "16:9", "1024x1024": "1:1", "1344x768": "7:4", "auto": "", "x": ""} {
		if got, ok := AspectRatio(size); got != want || ok != (want != "") {
			t.Errorf("AspectRatio(%q) = %q, %v; want %q", size, got, ok, want)
		}
	}
}

// TestSpeechModels checks a speech model's fields: its price per 1,000
// characters, max_input, formats (mp3 among them), voices and their
// defaults and mappings, and its speed range.
func TestSpeechModels(t *testing.T) {
	const cat = `{"providers":[{"name":"v","kind":"openai"}],"models":[{"id":"m","type":"speech","provider":"v"%s}]}`
	const ok = `,"formats":["mp3","wav"],"voices":["alloy","echo"],"max_input":100,"price":{"credits_per_1k_chars":2}`
	tests := []struct {
		name, fields, wantErr string
	}{
		{"plain", ok, ""},
		{"free", `,"formats":["mp3"],"voices":["alloy"],"max_input":100,"price":{}`, ""},
		{"no price", `,"formats":["mp3"],"voices":["alloy"],"max_input":100`, "credits_per_1k_chars"},
		{"a job price", `,"formats":["mp3"],"voices":["alloy"],"max_input":100,"price":{"credits_per_second":1}`, "no other price"},
		{"no max_input", `,"formats":["mp3"],"voices":["alloy"],"price":{"credits_per_1k_chars":1}`, "max_input"},
		{"no mp3", `,"formats":["wav"],"voices":["alloy"],"max_input":100,"price":{"credits_per_1k_chars":1}`, "must include mp3"},
		{"unknown format", `,"formats":["mp3","ogg"],"voices":["alloy"],"max_input":100,"price":{"credits_per_1k_chars":1}`, `"ogg" is not one of`},
		{"no voices", `,"formats":["mp3"],"max_input":100,"price":{"credits_per_1k_chars":1}`, "voices"},
		{"pattern only", `,"formats":["mp3"],"voice_pattern":"[a-z]{4}","default_voice":"abcd","max_input":100,"price":{"credits_per_1k_chars":1}`, ""},
		{"bad pattern", `,"formats":["mp3"],"voice_pattern":"[a-z","max_input":100,"price":{"credits_per_1k_chars":1}`, "voice_pattern"},
		{"default voice", ok + `,"default_voice":"echo"`, ""},
		{"default voice not taken", ok + `,"default_voice":"nova"`, "default_voice"},
		{"mapping", ok + `,"upstream_voices":{"alloy":"V1"}`, ""},
		{"mapping of another voice", ok + `,"upstream_voices":{"nova":"V1"}`, "upstream_voices"},
		{"speeds", ok + `,"min_speed":0.7,"max_speed":1.2`, ""},
		{"speeds past OpenAI's", ok + `,"min_speed":0.1,"max_speed":1.2`, "min_speed"},
		{"speeds without 1", ok + `,"min_speed":1.5,"max_speed":2`, "min_speed"},
		{"min speed alone", ok + `,"min_speed":0.5`, "min_speed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(cat, tt.fields)), Pricing{})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Parse(%s) = %v; want nil", tt.fields, err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Parse(%s) = %v; want an error containing %q", tt.fields, err, tt.wantErr)
			}
		})
	}
}

// TestSpeechVoices checks which voices the catalog's ElevenLabs speech
// model takes and where each goes: OpenAI's names, mapped to ElevenLabs
// default voices, and ElevenLabs voice ids as they are.
func TestSpeechVoices(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("eleven-multilingual-v2")
	if !ok {
		t.Fatal("no eleven-multilingual-v2 in the catalog")
	}
	tests := []struct {
		voice    string
		takes    bool
		upstream string
	}{
		{"alloy", true, "SAz9YHcvj6GT2YYXdXww"},
		{"fable", true, "JBFqnCBsd6RMkjVDRZzb"},
		{"cedar", true, "CwhRBWXzGAHq8TQ4Fs17"},
		{"JBFqnCBsd6RMkjVDRZzb", true, "JBFqnCBsd6RMkjVDRZzb"},
		{"21m00Tcm4TlvDq8ikWAM", true, "21m00Tcm4TlvDq8ikWAM"},
		{"Alloy", false, ""},
		{"JBFqnCBsd6RMkjVDRZz", false, ""},      // 19 characters
		{"JBFqnCBsd6RMkjVDRZzb/x", false, ""},   // not an id
		{"../../v1/user", false, ""},            // never a path
		{"JBFqnCBsd6RMkjVDRZzbJBFq", false, ""}, // anchored
	}
	for _, tt := range tests {
		if got := m.TakesVoice(tt.voice); got != tt.takes {
			t.Errorf("TakesVoice(%q) = %v; want %v", tt.voice, got, tt.takes)
		}
		if tt.takes {
			if got := m.UpstreamVoice(tt.voice); got != tt.upstream {
				t.Errorf("UpstreamVoice(%q) = %q; want %q", tt.voice, got, tt.upstream)
			}
		}
	}
	for _, v := range m.Voices {
		if _, ok := m.UpstreamVoices[v]; !ok {
			t.Errorf("voice %q has no ElevenLabs voice in upstream_voices", v)
		}
	}
}

// TestSpeechCost: characters times the price per 1,000, rounded up once
// to the micro-credit.
func TestSpeechCost(t *testing.T) {
	tests := []struct {
		perK  credits.Amount
		chars int
		want  credits.Amount
	}{
		{1_500_000, 1000, 1_500_000}, {1_500_000, 1, 1500}, {10 * credits.Credit, 900, 9 * credits.Credit},
		{5 * credits.Credit, 4096, 20_480_000}, {0, 4096, 0}, {3 * credits.Credit, 0, 0},
		{1, 1, 1},            // 0.001 µcr rounds up to 1
		{1, 1000, 1},         // exactly 1 µcr
		{1, 1001, 2},         // 1.001 µcr
		{333, 3, 1},          // 0.999 µcr
		{1_234_567, 7, 8642}, // 8.641969 µcr
	}
	for _, tt := range tests {
		p := &Price{CreditsPer1KChars: tt.perK}
		if got := p.SpeechCost(tt.chars); got != tt.want {
			t.Errorf("SpeechCost(%s per 1k, %d chars) = %s; want %s", tt.perK, tt.chars, got, tt.want)
		}
	}
	if got := (*Price)(nil).SpeechCost(100); got != 0 {
		t.Errorf("nil price: SpeechCost = %s; want 0", got)
	}
}

// aliasCatalog is a catalog of two OpenAI-compatible deployments (a: vision
// and tools, b: tools only), a video model, and the models given.
const aliasCatalog = `{"providers":[{"name":"a","kind":"openai","key_env":"A_KEY"},{"name":"b","kind":"openai","key_env":"B_KEY"},{"name":"v","kind":"fal"}],"models":[
{"id":"a/m","type":"chat","provider":"a","capabilities":{"vision":true,"streaming":true,"tools":true},"price":{"free":true}},
{"id":"b/m","type":"chat","provider":"b","capabilities":{"streaming":true,"tools":true,"reasoning":true},"price":{"free":true}},
{"id":"vid","type":"video","provider":"v","formats":["mp4"],"max_duration":8,"price":{"credits_per_second":1}}%s]}`

// TestAliases checks an alias's validation at load: each error names the
// field at fault.
func TestAliases(t *testing.T) {
	tests := []struct {
		name, models, wantErr string
	}{
		{"two weighted targets", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":3},{"model":"b/m","weight":1}]}`, ""},
		{"one target", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1}]}`, ""},
		{"with fallbacks", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1}],"fallbacks":["b/m"]}`, ""},
		{"a model falls back to an alias", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1}]},{"id":"a/n","type":"chat","provider":"a","fallbacks":["fast"],"price":{"free":true}}`, ""},
		{"no targets", `{"id":"fast","type":"chat","targets":[]}`, "targets: an alias needs at least one target"},
		{"on a video model", `{"id":"v2","type":"video","provider":"v","formats":["mp4"],"max_duration":8,"price":{"credits_per_second":1},"targets":[{"model":"vid","weight":1}]}`, `targets: only a chat model may have targets, not a "video" model`},
		{"without a type", `{"id":"fast","targets":[{"model":"a/m","weight":1}]}`, "targets: only a chat model"},
		{"without an id", `{"type":"chat","targets":[{"model":"a/m","weight":1}]}`, "id: an alias needs an id"},
		{"weight 0", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":3},{"model":"b/m","weight":0}]}`, "targets[1].weight: must be an integer >= 1, not 0"},
		{"weight missing", `{"id":"fast","type":"chat","targets":[{"model":"a/m"}]}`, "targets[0].weight"},
		{"negative weight", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":-2}]}`, "targets[0].weight"},
		{"fractional weight", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1.5}]}`, "targets.weight"},
		{"unknown target", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1},{"model":"c/m","weight":1}]}`, `targets[1].model: unknown model "c/m"`},
		{"a job model as target", `{"id":"fast","type":"chat","targets":[{"model":"vid","weight":1}]}`, `targets[0].model: "vid" is a video model, not chat`},
		{"an alias as target", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1}]},{"id":"faster","type":"chat","targets":[{"model":"fast","weight":1}]}`, `targets[0].model: "fast" is an alias`},
		{"itself as target", `{"id":"fast","type":"chat","targets":[{"model":"fast","weight":1}]}`, `targets[0].model: "fast" is an alias`},
		{"a target twice", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1},{"model":"b/m","weight":1},{"model":"a/m","weight":2}]}`, `targets[2].model: "a/m" is listed twice`},
		{"a provider", `{"id":"a/fast","type":"chat","provider":"a","targets":[{"model":"a/m","weight":1}]}`, "provider: an alias"},
		{"an upstream", `{"id":"fast","type":"chat","upstream":"m","targets":[{"model":"a/m","weight":1}]}`, "upstream: an alias"},
		{"capabilities", `{"id":"fast","type":"chat","capabilities":{"vision":true},"targets":[{"model":"a/m","weight":1}]}`, "capabilities: an alias"},
		{"a price", `{"id":"fast","type":"chat","price":{"credits_per_million_input_tokens":1},"targets":[{"model":"a/m","weight":1}]}`, "price: an alias"},
		{"max_tokens", `{"id":"fast","type":"chat","max_tokens":10,"targets":[{"model":"a/m","weight":1}]}`, "max_tokens: an alias"},
		{"thinking", `{"id":"fast","type":"chat","thinking":"effort","targets":[{"model":"a/m","weight":1}]}`, "thinking: an alias"},
		{"unknown fallback", `{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":1}],"fallbacks":["c/m"]}`, `fallbacks: unknown model "c/m"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(aliasCatalog, ","+tt.models)), Pricing{})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Parse = %v; want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestAliasListing checks what the catalog makes of a valid alias: the
// capabilities every target has, owned_by genway, and listed when one of
// its targets' providers is configured.
func TestAliasListing(t *testing.T) {
	c, err := Parse([]byte(fmt.Sprintf(aliasCatalog, `,{"id":"fast","type":"chat","targets":[{"model":"a/m","weight":3},{"model":"b/m","weight":1}]}`)), Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("fast")
	if !ok || !m.Alias() {
		t.Fatalf("Model(fast) = %+v, %v; want an alias", m, ok)
	}
	if want := (Capabilities{Streaming: true, Tools: true}); *m.Capabilities != want {
		t.Errorf("capabilities = %+v; want the intersection %+v", *m.Capabilities, want)
	}
	if m.OwnedBy != AliasOwner || m.Provider != "" || m.Upstream != "" {
		t.Errorf("owned_by %q, provider %q, upstream %q; want %q and none", m.OwnedBy, m.Provider, m.Upstream, AliasOwner)
	}
	if a, _ := c.Model("a/m"); a.Alias() {
		t.Errorf("a/m is an alias")
	}
	for _, tt := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{}},
		{map[string]string{"B_KEY": "k"}, []string{"b/m", "fast"}},
		{map[string]string{"A_KEY": "k", "B_KEY": "k"}, []string{"a/m", "b/m", "fast"}},
	} {
		configured := c.ConfiguredFunc(Setup{Vars: tt.env})
		got := []string{}
		for _, m := range c.List(TypeChat, configured) {
			got = append(got, m.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("List(chat) with %v = %v; want %v", tt.env, got, tt.want)
		}
	}
}
