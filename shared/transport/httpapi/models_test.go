package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/route"
)

// everyProvider configures every provider of the default catalog.
func everyProvider(string) bool { return true }

// TestListModelsFormats checks that GET /v1/models shows, for every job
// model, the formats it produces: mp3/wav for audio, exactly mp4 for
// video (Veo and Kling included); and for every speech model the
// response formats it streams.
func TestListModelsFormats(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ListModels(cat, everyProvider, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models = %d %s, %v", resp.StatusCode, b, err)
	}
	var list struct {
		Data []struct {
			ID      string    `json:"id"`
			Type    string    `json:"type"`
			Formats *[]string `json:"formats"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	got := map[string][]string{}
	for _, m := range list.Data {
		switch {
		case m.Type == catalog.TypeChat && m.Formats != nil:
			t.Errorf("chat model %s lists formats %q; want none", m.ID, *m.Formats)
		case m.Type != catalog.TypeChat && m.Formats == nil:
			t.Errorf("job model %s lists no formats", m.ID)
		case m.Type != catalog.TypeChat:
			got[m.ID] = *m.Formats
		}
	}
	tests := []struct {
		model string
		want  []string
	}{
		{"synthetic-music", []string{"mp3", "wav"}},
		{"synthetic-sfx", []string{"mp3", "wav"}},
		{"synthetic-video", []string{"mp4"}},
		{"elevenlabs-sfx", []string{"mp3", "wav"}},
		{"elevenlabs-music", []string{"mp3", "wav"}},
		{"musicgen", []string{"mp3", "wav"}},
		{"veo-3.1", []string{"mp4"}},
		{"veo-3.1-fast", []string{"mp4"}},
		{"kling-2.5-turbo", []string{"mp4"}},
		{"synthetic-speech", []string{"mp3", "wav", "pcm"}},
		{"tts-1", []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}},
		{"tts-1-hd", []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}},
		{"gpt-4o-mini-tts", []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}},
		{"eleven-multilingual-v2", []string{"mp3", "wav", "pcm"}},
		{"eleven-flash-v2-5", []string{"mp3", "wav", "pcm"}},
		{"synthetic-image", []string{"png", "jpeg"}}, // no WebP encoder in Go's standard library
		{"gpt-image-1.5", []string{"png", "jpeg", "webp"}},
		{"gemini-2.5-flash-image", []string{"png"}},
		{"flux-dev", []string{"jpeg", "png"}},
		{"flux-schnell", []string{"png", "jpeg", "webp"}},
	}
	for _, tt := range tests {
		if !slices.Equal(got[tt.model], tt.want) {
			t.Errorf("GET /v1/models: %s formats = %q; want %q", tt.model, got[tt.model], tt.want)
		}
	}
	if len(got) != len(tests) {
		t.Errorf("GET /v1/models lists %d job models (%v); the table has %d: add the new ones", len(got), got, len(tests))
	}
}

// TestCreateJobFormat checks format on POST /v1/jobs: a video job takes
// mp4 (its default) and refuses anything else with a 400 naming format,
// as an audio job refuses a format its model does not make.
func TestCreateJobFormat(t *testing.T) {
	e := jtServer(t)
	tests := []struct {
		name, body string
		status     int
		format     string // the job's input.format when 200
	}{
		{"video without format", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1}`, 200, "mp4"},
		{"video mp4", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":"mp4"}`, 200, "mp4"},
		{"video webm", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":"webm"}`, 400, ""},
		{"video wav", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":"wav"}`, 400, ""},
		{"video empty", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":""}`, 400, ""},
		{"video null (as absent)", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":null}`, 200, "mp4"},
		{"video number", `{"type":"video","model":"synthetic-video","prompt":"p","duration":1,"format":4}`, 400, ""},
		{"sfx wav", `{"type":"sfx","model":"synthetic-sfx","prompt":"p","duration":1,"format":"wav"}`, 200, "wav"},
		{"sfx mp4", `{"type":"sfx","model":"synthetic-sfx","prompt":"p","duration":1,"format":"mp4"}`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := e.do(t, "a", "POST", "/v1/jobs", tt.body)
			if status != tt.status {
				t.Fatalf("POST /v1/jobs %s = %d %s; want %d", tt.body, status, b, tt.status)
			}
			if status == 200 {
				var j struct {
					Input struct{ Format string } `json:"input"`
				}
				if err := json.Unmarshal(b, &j); err != nil || j.Input.Format != tt.format {
					t.Errorf("POST /v1/jobs %s: input.format = %q (%v); want %q", tt.body, j.Input.Format, err, tt.format)
				}
				return
			}
			var env struct {
				Error struct{ Type, Param string } `json:"error"`
			}
			if err := json.Unmarshal(b, &env); err != nil || env.Error.Param != "format" || env.Error.Type != "invalid_request_error" {
				t.Errorf("POST /v1/jobs %s = %s; want an invalid_request_error naming format", tt.body, b)
			}
		})
	}
}

// TestListImageModels: GET /v1/models?type=image lists the image models
// of the configured providers with their image fields: sizes, the
// default size, max_images, formats, qualities, the default response
// format, the prompt limit and the price per image.
func TestListImageModels(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "k"} // synthetic and openai only
	srv := httptest.NewServer(ListModels(cat, cat.ConfiguredFunc(catalog.Setup{Vars: env}), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/models?type=image")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models?type=image = %d, %v", resp.StatusCode, err)
	}
	got := map[string]string{}
	for _, m := range list.Data {
		b, _ := json.Marshal(map[string]any{"type": m["type"], "sizes": m["sizes"], "default_size": m["default_size"], "max_images": m["max_images"],
			"formats": m["formats"], "qualities": m["qualities"], "default_quality": m["default_quality"],
			"default_response_format": m["default_response_format"], "max_prompt": m["max_prompt"], "price": m["price"]})
		got[m["id"].(string)] = string(b)
	}
	want := map[string]string{
		"synthetic-image": `{"default_quality":null,"default_response_format":"b64_json","default_size":"1024x1024","formats":["png","jpeg"],` +
			`"max_images":10,"max_prompt":32000,"price":{"credits_per_image":1},"qualities":null,` +
			`"sizes":["256x256","512x512","1024x1024","1536x1024","1024x1536","1792x1024","1024x1792"],"type":"image"}`,
		"gpt-image-1.5": `{"default_quality":"medium","default_response_format":"b64_json","default_size":"auto","formats":["png","jpeg","webp"],` +
			`"max_images":10,"max_prompt":32000,"price":{"credits_per_image":5,"credits_per_image_by_quality":{"auto":20,"high":20,"low":1.3,"medium":5}},` +
			`"qualities":["low","medium","high","auto"],"sizes":["1024x1024","1536x1024","1024x1536","auto"],"type":"image"}`,
	}
	if len(got) != len(want) {
		t.Errorf("GET /v1/models?type=image lists %v; want only the configured providers' %d", got, len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s:\n got %s\nwant %s", id, got[id], w)
		}
	}
}

// TestModelsAlias: GET /v1/models lists an alias with its targets and
// weights, the capabilities all its targets have, owned_by genway, when
// one of its targets' providers is configured (and the key may use it);
// GET /v1/models/{id} answers it likewise; the admin API shows it with no
// provider, configured as its targets are, and no breaker of its own.
func TestModelsAlias(t *testing.T) {
	cat := aliasCatalog(t)
	a, _ := cat.Model(modelA)
	b, _ := cat.Model(modelB)
	wantCaps := catalog.Capabilities{Vision: a.Capabilities.Vision && b.Capabilities.Vision, Reasoning: a.Capabilities.Reasoning && b.Capabilities.Reasoning,
		Streaming: a.Capabilities.Streaming && b.Capabilities.Streaming, Tools: a.Capabilities.Tools && b.Capabilities.Tools,
		StructuredOutputs: a.Capabilities.StructuredOutputs && b.Capabilities.StructuredOutputs}
	type view struct {
		ID           string                `json:"id"`
		OwnedBy      string                `json:"owned_by"`
		Type         string                `json:"type"`
		Capabilities *catalog.Capabilities `json:"capabilities"`
		Targets      []catalog.Target      `json:"targets"`
		Provider     *string               `json:"provider"`
		Configured   bool                  `json:"configured"`
		Routing      json.RawMessage       `json:"routing"`
	}
	get := func(t *testing.T, h http.Handler, path string, principal *auth.Principal, out any) int {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		if principal != nil {
			req = req.WithContext(auth.WithPrincipal(req.Context(), *principal))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == 200 {
			if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
				t.Fatalf("GET %s: %s: %v", path, w.Body, err)
			}
		}
		return w.Code
	}
	groqOnly := cat.ConfiguredFunc(catalog.Setup{Vars: map[string]string{"GROQ_API_KEY": "gsk"}})
	mux := func(configured func(string) bool) http.Handler {
		log := slog.New(slog.DiscardHandler)
		return NewMux(log, Route{Method: "GET", Pattern: "/v1/models", Handler: ListModels(cat, configured, log)},
			Route{Method: "GET", Pattern: "/v1/models/{id...}", Handler: GetModel(cat, configured, log)})
	}
	check := func(t *testing.T, v view) {
		t.Helper()
		if v.OwnedBy != catalog.AliasOwner || v.Type != "chat" || v.Capabilities == nil || *v.Capabilities != wantCaps ||
			!slices.Equal(v.Targets, []catalog.Target{{Model: modelA, Weight: 3}, {Model: modelB, Weight: 1}}) {
			t.Errorf("alias %+v (capabilities %+v); want owned_by genway, targets A 3, B 1, capabilities %+v", v, v.Capabilities, wantCaps)
		}
	}

	var list struct{ Data []view }
	if code := get(t, mux(groqOnly), "/v1/models?type=chat", nil, &list); code != 200 {
		t.Fatalf("GET /v1/models = %d", code)
	}
	i := slices.IndexFunc(list.Data, func(v view) bool { return v.ID == "balanced" })
	if i < 0 {
		t.Fatalf("GET /v1/models with groq configured lists no balanced: %+v", list.Data)
	}
	check(t, list.Data[i])
	var one view
	if code := get(t, mux(groqOnly), "/v1/models/balanced", nil, &one); code != 200 {
		t.Fatalf("GET /v1/models/balanced = %d", code)
	}
	check(t, one)
	// A key allowed only the alias sees only it.
	list.Data = nil
	get(t, mux(groqOnly), "/v1/models", &auth.Principal{Account: "acct", KeyID: "k", Models: []string{"balanced"}}, &list)
	if len(list.Data) != 1 || list.Data[0].ID != "balanced" {
		t.Errorf("GET /v1/models with a key for balanced = %+v; want balanced alone", list.Data)
	}
	// Neither target's provider configured: not offered.
	none := cat.ConfiguredFunc(catalog.Setup{})
	list.Data = nil
	get(t, mux(none), "/v1/models", nil, &list)
	if slices.ContainsFunc(list.Data, func(v view) bool { return v.ID == "balanced" }) {
		t.Errorf("GET /v1/models with neither target configured lists balanced")
	}
	if code := get(t, mux(none), "/v1/models/balanced", nil, &one); code != 404 {
		t.Errorf("GET /v1/models/balanced with neither target configured = %d; want 404", code)
	}

	adminH := AdminAPI(AdminConfig{Catalog: cat, Configured: func(p string) bool { return p == "groq" },
		Router: route.New(route.DefaultPolicy, nil), Log: slog.New(slog.DiscardHandler)})
	var models struct{ Data []view }
	if code := get(t, adminH, "/admin/v1/models", nil, &models); code != 200 {
		t.Fatalf("GET /admin/v1/models = %d", code)
	}
	got := map[string]view{}
	for _, v := range models.Data {
		got[v.ID] = v
	}
	al, ok := got["balanced"]
	if !ok || al.Provider != nil || !al.Configured || al.Routing != nil {
		t.Errorf("admin alias %+v; want no provider, configured (groq is), no routing of its own", al)
	}
	check(t, al)
	if m := got[modelA]; m.Provider == nil || *m.Provider != "openai" || m.Configured || m.Routing == nil {
		t.Errorf("admin %s %+v; want provider openai, not configured, its routing", modelA, m)
	}
}

// TestListModelsPrices: GET /v1/models shows every chat model's price in
// credits, every token class resolved, its service tiers (priority and
// fast alike) and long context, or free: true; never a price in US
// dollars, its source or the markup. The admin API shows those too.
func TestListModelsPrices(t *testing.T) {
	pr, err := catalog.ParsePricing("0.003", "12.5")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load("", pr)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	ListModels(cat, everyProvider, slog.New(slog.DiscardHandler)).ServeHTTP(w, httptest.NewRequest("GET", "/v1/models", nil))
	body := w.Body.String()
	for _, secret := range []string{"usd", "source", "as_of", "note", "markup", "credit_usd", "https://", "$"} {
		if strings.Contains(body, secret) {
			t.Errorf("GET /v1/models shows %q; the list price, its source and the markup are the operator's", secret)
		}
	}
	type tokens map[string]json.Number
	var list struct {
		Data []struct {
			ID    string `json:"id"`
			Type  string `json:"type"`
			Price *struct {
				Free         bool              `json:"free"`
				ServiceTiers map[string]tokens `json:"service_tiers"`
				LongContext  tokens            `json:"long_context"`
			} `json:"price"`
		} `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	prices := map[string]map[string]any{}
	var all struct {
		Data []struct {
			ID    string         `json:"id"`
			Price map[string]any `json:"price"`
		} `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &all); err != nil {
		t.Fatal(err)
	}
	for _, m := range all.Data {
		prices[m.ID] = m.Price
	}
	classes := []string{"credits_per_million_input_tokens", "credits_per_million_cached_input_tokens", "credits_per_million_cache_write_tokens",
		"credits_per_million_cache_write_1h_tokens", "credits_per_million_output_tokens"}
	var chats int
	for _, m := range list.Data {
		if m.Type != catalog.TypeChat {
			continue
		}
		chats++
		switch p := prices[m.ID]; {
		case p == nil:
			t.Errorf("%s shows no price", m.ID)
		case p["free"] == true:
			if len(p) != 1 {
				t.Errorf("%s: free with a price %v", m.ID, p)
			}
		default:
			for _, c := range classes {
				if _, ok := p[c]; !ok {
					t.Errorf("%s: price %v lacks %s", m.ID, p, c)
				}
			}
			for tier, tp := range m.Price.ServiceTiers {
				if len(tp) != len(classes) {
					t.Errorf("%s: tier %s shows %v; want every class", m.ID, tier, tp)
				}
			}
		}
	}
	if chats < 20 {
		t.Fatalf("listed %d chat models; want every one of the catalog", chats)
	}
	// $1.25 per million x 1.125 / $0.003 = 468.75 credits; priority and
	// fast are one tier.
	gpt5, _ := json.Marshal(prices["openai/gpt-5"])
	for _, want := range []string{`"credits_per_million_input_tokens":468.75`, `"credits_per_million_cached_input_tokens":46.875`,
		`"credits_per_million_cache_write_tokens":468.75`, `"credits_per_million_output_tokens":3750`,
		`"fast":{"credits_per_million_cache_write_1h_tokens":937.5,"credits_per_million_cache_write_tokens":937.5,"credits_per_million_cached_input_tokens":93.75,"credits_per_million_input_tokens":937.5,"credits_per_million_output_tokens":7500}`,
		`"priority":{"credits_per_million_cache_write_1h_tokens":937.5,"credits_per_million_cache_write_tokens":937.5,"credits_per_million_cached_input_tokens":93.75,"credits_per_million_input_tokens":937.5,"credits_per_million_output_tokens":7500}`,
		`"flex":{`} {
		if !strings.Contains(string(gpt5), want) {
			t.Errorf("openai/gpt-5 price %s; want %s", gpt5, want)
		}
	}
	pro, _ := json.Marshal(prices["gemini/gemini-2.5-pro"])
	if want := `"long_context":{"above_prompt_tokens":200000,"credits_per_million_cache_write_1h_tokens":937.5,"credits_per_million_cache_write_tokens":937.5,"credits_per_million_cached_input_tokens":93.75,"credits_per_million_input_tokens":937.5,"credits_per_million_output_tokens":5625}`; !strings.Contains(string(pro), want) {
		t.Errorf("gemini-2.5-pro price %s; want %s", pro, want)
	}
	sonnet, _ := json.Marshal(prices["anthropic/claude-sonnet-4-5"])
	if want := `"credits_per_million_cache_write_1h_tokens":2250,"credits_per_million_cache_write_tokens":1406.25,"credits_per_million_cached_input_tokens":112.5,"credits_per_million_input_tokens":1125,"credits_per_million_output_tokens":5625`; !strings.Contains(string(sonnet), want) {
		t.Errorf("claude-sonnet-4-5 price %s; want %s", sonnet, want)
	}
	for _, id := range []string{"synthetic/echo", "ollama/llama3.2", "vllm/default"} {
		if p, _ := json.Marshal(prices[id]); string(p) != `{"free":true}` {
			t.Errorf("%s price %s; want {\"free\":true}", id, p)
		}
	}
	if p, _ := json.Marshal(prices["elevenlabs-sfx"]); string(p) != `{"credits_per_job":45}` {
		t.Errorf("elevenlabs-sfx price %s; want {\"credits_per_job\":45} ($0.12 x 1.125 / 0.003)", p)
	}

	admin := httptest.NewRecorder()
	AdminAPI(AdminConfig{Catalog: cat, Log: slog.New(slog.DiscardHandler)}).ServeHTTP(admin, httptest.NewRequest("GET", "/admin/v1/models", nil))
	var adm struct {
		Data []struct {
			ID            string          `json:"id"`
			Price         json.RawMessage `json:"price"`
			CatalogPrice  json.RawMessage `json:"catalog_price"`
			CreditUSD     json.Number     `json:"credit_usd"`
			MarkupPercent json.Number     `json:"markup_percent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(admin.Body.Bytes(), &adm); err != nil || admin.Code != 200 {
		t.Fatalf("GET /admin/v1/models = %d %v", admin.Code, err)
	}
	for _, m := range adm.Data {
		if m.ID != "openai/gpt-5" {
			continue
		}
		for _, want := range []string{`"usd_per_million_input_tokens":1.25`, `"source":"https://developers.openai.com/api/docs/pricing"`, `"as_of":"2026-11-28"`, `"note":"`} {
			if !strings.Contains(string(m.CatalogPrice), want) {
				t.Errorf("admin gpt-5 catalog_price %s; want %s", m.CatalogPrice, want)
			}
		}
		if m.CreditUSD != "0.003" || m.MarkupPercent != "12.5" || !strings.Contains(string(m.Price), `"credits_per_million_input_tokens":468.75`) {
			t.Errorf("admin gpt-5: credit_usd %s, markup_percent %s, price %s; want 0.003, 12.5, 468.75 credits in", m.CreditUSD, m.MarkupPercent, m.Price)
		}
		return
	}
	t.Errorf("GET /admin/v1/models lists no openai/gpt-5")
}
