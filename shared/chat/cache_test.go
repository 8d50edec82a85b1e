package chat_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// cachingProvider is a fakeProvider that forwards cache breakpoints by
// rules (chat.CacheProvider).
type cachingProvider struct {
	fakeProvider
	rules chat.CacheRules
}

func (c *cachingProvider) CacheRules(*catalog.Model) chat.CacheRules { return c.rules }

// cacheGateway serves anthropic/* by Anthropic's rules (4 breakpoints,
// tools, one hour), bedrock/* by Nova's (4, no tools, five minutes) and
// openai/* by a provider that forwards none.
func cacheGateway(t *testing.T) (*chat.Gateway, map[string]*fakeProvider) {
	t.Helper()
	anth := &cachingProvider{rules: chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}}
	nova := &cachingProvider{rules: chat.CacheRules{Breakpoints: 4}}
	oai := &fakeProvider{resp: chat.Response{Content: "ok"}}
	gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{
		"anthropic": anth, "bedrock": nova, "openai": oai,
	}})
	return gw, map[string]*fakeProvider{"anthropic": &anth.fakeProvider, "bedrock": &nova.fakeProvider, "openai": oai}
}

// breakpoints lists the breakpoints of req, in the order of its tools and
// messages: "tools[0] 1h", "messages[1].content[0] 5m".
func breakpoints(req *chat.Request) []string {
	var out []string
	for i, t := range req.Tools {
		if t.Cache != nil {
			out = append(out, fmt.Sprintf("tools[%d] %s", i, t.Cache.TTL))
		}
	}
	for i, m := range req.Messages {
		for j, p := range m.Parts {
			if p.Cache != nil {
				out = append(out, fmt.Sprintf("messages[%d].content[%d] %s", i, j, p.Cache.TTL))
			}
		}
		if m.Cache != nil {
			out = append(out, fmt.Sprintf("messages[%d].tool_calls %s", i, m.Cache.TTL))
		}
	}
	return out
}

// cacheBody is a chat request for model with tools and messages (JSON
// array elements).
func cacheBody(model, tools string, msgs ...string) string {
	s := `{"model":"` + model + `","messages":[` + strings.Join(msgs, ",") + `]`
	if tools != "" {
		s += `,"tools":[` + tools + `]`
	}
	return s + "}"
}

const (
	eph   = `"cache_control":{"type":"ephemeral"}`
	eph5m = `"cache_control":{"type":"ephemeral","ttl":"5m"}`
	eph1h = `"cache_control":{"type":"ephemeral","ttl":"1h"}`
)

// textPart is a text part, with extra fields (a cache_control).
func textPart(text string, extra ...string) string {
	return `{"type":"text","text":"` + text + `"` + strings.Join(append([]string{""}, extra...), ",") + `}`
}

func msg(role string, parts ...string) string {
	return `{"role":"` + role + `","content":[` + strings.Join(parts, ",") + `]}`
}

func fnTool(name string, extra ...string) string {
	return `{"type":"function","function":{"name":"` + name + `"}` + strings.Join(append([]string{""}, extra...), ",") + `}`
}

// TestCacheControlErrors checks that a malformed cache_control is a 400
// naming it, wherever it is and whatever the provider.
func TestCacheControlErrors(t *testing.T) {
	gw, _ := cacheGateway(t)
	user := msg("user", textPart("hi"))
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	png := `{"type":"image_url","image_url":{"url":"` + dataURI("image/png", pngBytes(t, 2, 2)) + `"}`
	tests := []struct {
		name, tools string
		msgs        []string
		code, param string
	}{
		{"type missing", "", []string{msg("system", textPart("s", `"cache_control":{}`)), user}, "missing_field", "messages[0].content[0].cache_control.type"},
		{"type wrong", "", []string{msg("system", textPart("s", `"cache_control":{"type":"persistent"}`)), user}, "invalid_value", "messages[0].content[0].cache_control.type"},
		{"type not a string", "", []string{msg("developer", textPart("s"), textPart("t", `"cache_control":{"type":1}`)), user}, "invalid_value", "messages[0].content[1].cache_control.type"},
		{"ttl unknown", "", []string{user, msg("user", textPart("a", `"cache_control":{"type":"ephemeral","ttl":"10m"}`))}, "invalid_value", "messages[1].content[0].cache_control.ttl"},
		{"ttl a number", "", []string{msg("user", textPart("a", `"cache_control":{"type":"ephemeral","ttl":300}`))}, "invalid_value", "messages[0].content[0].cache_control.ttl"},
		{"not an object", "", []string{msg("user", textPart("a", `"cache_control":"ephemeral"`))}, "invalid_value", "messages[0].content[0].cache_control"},
		{"on an image", "", []string{msg("user", textPart("look"), png+`,"cache_control":{"type":"ephemeral","ttl":"2h"}}`)}, "invalid_value", "messages[0].content[1].cache_control.ttl"},
		{"on an assistant part", "", []string{user, msg("assistant", textPart("a", `"cache_control":{"ttl":"1h"}`)), user}, "missing_field", "messages[1].content[0].cache_control.type"},
		{"on an empty text part", "", []string{msg("user", textPart("", `"cache_control":{"type":"x"}`), textPart("a"))}, "invalid_value", "messages[0].content[0].cache_control.type"},
		{"on a tool result", fnTool("f"), []string{user, call, `{"role":"tool","tool_call_id":"c1","content":[` + textPart("r", `"cache_control":{"type":"ephemeral","ttl":"1d"}`) + `]}`}, "invalid_value", "messages[2].content[0].cache_control.ttl"},
		{"on a tool", fnTool("f", `"cache_control":{"type":"ephemeral","ttl":"1 hour"}`), []string{user}, "invalid_value", "tools[0].cache_control.ttl"},
		{"on a function", fnTool("f") + `,{"type":"function","function":{"name":"g","cache_control":{"type":"lasting"}}}`, []string{user}, "invalid_value", "tools[1].function.cache_control.type"},
		{"on a tool and its function", `{"type":"function","function":{"name":"f",` + eph + `},` + eph + `}`, []string{user}, "invalid_value", "tools[0].function.cache_control"},
		{"on a message", "", []string{`{"role":"system","content":"long","cache_control":{"type":"ephemeral","ttl":"forever"}}`, user}, "invalid_value", "messages[0].cache_control.ttl"},
		{"on an assistant message that calls tools", fnTool("f"), []string{user, `{"role":"assistant","content":null,"cache_control":{"type":"ephemral"},"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`}, "invalid_value", "messages[1].cache_control.type"},
	}
	for _, model := range []string{"anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"} {
		for _, tt := range tests {
			t.Run(model+"/"+tt.name, func(t *testing.T) {
				body := cacheBody(model, tt.tools, tt.msgs...)
				_, err := gw.Prepare(context.Background(), params(t, body))
				e := apierr.As(err)
				if e == nil || e.Kind != apierr.Invalid || e.Code != tt.code || e.Param != tt.param {
					t.Fatalf("Prepare(%s) = %v; want a 400 %s naming %s", body, err, tt.code, tt.param)
				}
			})
		}
	}
}

// TestCacheBreakpoints checks each provider's rules: the breakpoints a
// provider forwards are kept where the client put them, within its limit
// (over it, or a one-hour breakpoint after a five-minute one, is a 400
// naming the breakpoint); those it does not forward are removed, never
// refused.
func TestCacheBreakpoints(t *testing.T) {
	const (
		anth = "anthropic/claude-sonnet-4-5"
		nova = "bedrock/nova-lite"
		oai  = "openai/gpt-4o-mini"
	)
	user := msg("user", textPart("hi"))
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	// five breakpoints: tools[0], the system message after the first
	// user message, then messages[1], messages[3] twice.
	five := []string{
		msg("user", textPart("a")),
		msg("user", textPart("b", eph)),
		msg("system", textPart("s", eph)),
		msg("user", textPart("c", eph), textPart("d", eph)),
	}
	tests := []struct {
		name, model, tools string
		msgs               []string
		want               []string // the breakpoints the provider gets
		param              string   // else: the breakpoint refused
	}{
		{"four kept", anth, fnTool("f", eph1h), []string{msg("system", textPart("s", eph1h)), msg("user", textPart("a", eph5m), textPart("b")), msg("user", textPart("c", eph))},
			[]string{"tools[0] 1h", "messages[0].content[0] 1h", "messages[1].content[0] 5m", "messages[2].content[0] 5m"}, ""},
		{"five refused", anth, fnTool("f", eph), five, nil, "messages[3].content[1].cache_control"},
		{"five counted in the order tools, system, messages", anth, fnTool("f", eph),
			[]string{msg("user", textPart("a", eph), textPart("b", eph), textPart("c", eph)), msg("system", textPart("s", eph))}, nil, "messages[0].content[2].cache_control"},
		{"five, not forwarded", oai, fnTool("f", eph), five, nil, ""},
		{"one hour after five minutes", anth, fnTool("f", eph), []string{msg("system", textPart("s", eph1h)), user}, nil, "messages[0].content[0].cache_control"},
		{"one hour after five minutes, system before messages", anth, "", []string{msg("user", textPart("a", eph1h)), msg("system", textPart("s", eph))}, nil, "messages[0].content[0].cache_control"},
		{"one hour first", anth, fnTool("f", eph1h), []string{msg("system", textPart("s", eph1h)), msg("user", textPart("a", eph))},
			[]string{"tools[0] 1h", "messages[0].content[0] 1h", "messages[1].content[0] 5m"}, ""},
		{"one hour sent as five minutes without it", nova, "", []string{msg("system", textPart("s", eph)), msg("user", textPart("a", eph1h))},
			[]string{"messages[0].content[0] 5m", "messages[1].content[0] 5m"}, ""},
		{"tools' breakpoints removed and not counted", nova, fnTool("f", eph), []string{msg("system", textPart("s", eph)), msg("user", textPart("a", eph), textPart("b", eph), textPart("c", eph))},
			[]string{"messages[0].content[0] 5m", "messages[1].content[0] 5m", "messages[1].content[1] 5m", "messages[1].content[2] 5m"}, ""},
		{"tools' breakpoints forwarded", anth, fnTool("f", eph1h) + "," + fnTool("g") + "," + `{"type":"function","function":{"name":"h",` + eph + `}}`, []string{user},
			[]string{"tools[0] 1h", "tools[2] 5m"}, ""},
		{"a tool result is one breakpoint", anth, fnTool("f"), []string{user, call,
			`{"role":"tool","tool_call_id":"c1","content":[` + textPart("r1", eph) + `,` + textPart("r2", eph1h) + `]}`, msg("user", textPart("a", eph), textPart("b", eph), textPart("c", eph))},
			[]string{"messages[2].content[0] 5m", "messages[3].content[0] 5m", "messages[3].content[1] 5m", "messages[3].content[2] 5m"}, ""},
		{"an empty text part's breakpoint is dropped with it", anth, "", []string{msg("user", textPart("", eph), textPart("a", eph), textPart("b", eph), textPart("c", eph), textPart("d", eph))},
			[]string{"messages[0].content[1] 5m", "messages[0].content[2] 5m", "messages[0].content[3] 5m", "messages[0].content[4] 5m"}, ""},
		{"on a message with a string content: its text", anth, "", []string{`{"role":"system","content":"long",` + eph1h + `}`, `{"role":"user","content":"hi",` + eph + `}`},
			[]string{"messages[0].content[0] 1h", "messages[1].content[0] 5m"}, ""},
		{"on a message with parts: its last non-empty part", anth, "", []string{`{"role":"user","content":[` + textPart("a") + `,` + textPart("b") + `,` + textPart("") + `],` + eph + `}`},
			[]string{"messages[0].content[1] 5m"}, ""},
		{"on a message whose last part has its own: that one", anth, "", []string{`{"role":"user","content":[` + textPart("a") + `,` + textPart("b", eph1h) + `],` + eph + `}`},
			[]string{"messages[0].content[1] 1h"}, ""},
		{"on an assistant message that calls tools: after the calls", anth, fnTool("f"), []string{user,
			`{"role":"assistant","content":"Let me look.",` + eph + `,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
			`{"role":"tool","tool_call_id":"c1","content":"sunny",` + eph + `}`},
			[]string{"messages[1].tool_calls 5m", "messages[2].content[0] 5m"}, ""},
		{"after the calls, counted after the message's parts", anth, "", []string{
			`{"role":"assistant","content":[` + textPart("a", eph) + `,` + textPart("b", eph) + `,` + textPart("c", eph) + `,` + textPart("d", eph) + `],` + eph + `,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
			nil, "messages[0].cache_control"},
		{"nothing forwarded to a provider that caches on its own", oai, fnTool("f", eph1h), []string{msg("system", textPart("s", eph)), msg("user", textPart("a", eph1h))}, nil, ""},
	}
	gw, provs := cacheGateway(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := cacheBody(tt.model, tt.tools, tt.msgs...)
			c, err := gw.Prepare(context.Background(), params(t, body))
			if tt.param != "" {
				e := apierr.As(err)
				if e == nil || e.Kind != apierr.Invalid || e.Code != "invalid_value" || e.Param != tt.param {
					t.Fatalf("Prepare(%s) = %v; want a 400 naming %s", body, err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare(%s) = %v", body, err)
			}
			if got := breakpoints(c.Request); !slices.Equal(got, tt.want) {
				t.Errorf("Prepare(%s) breakpoints %q; want %q", body, got, tt.want)
			}
		})
	}
	// Run sends the Request Prepare made.
	p := params(t, cacheBody(anth, fnTool("f", eph1h), msg("system", textPart("s", eph)), user))
	if err := gw.Run(context.Background(), "acct", p, &sink{}); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if got := breakpoints(provs["anthropic"].got[0]); !slices.Equal(got, []string{"tools[0] 1h", "messages[0].content[0] 5m"}) {
		t.Errorf("upstream got breakpoints %q", got)
	}
}

// TestCacheBreakpointsFallback checks that each candidate is checked
// against its own provider's rules: a request over Anthropic's limit is
// served by a fallback that caches on its own, without breakpoints; when
// no candidate can take it, the lead's refusal is the answer.
func TestCacheBreakpointsFallback(t *testing.T) {
	gw, provs := cacheGateway(t)
	over := []string{msg("system", textPart("s", eph)), msg("user", textPart("a", eph), textPart("b", eph), textPart("c", eph), textPart("d", eph))}
	body := `{"model":"anthropic/claude-sonnet-4-5","models":["openai/gpt-4o-mini"],"messages":[` + strings.Join(over, ",") + `]}`
	var got chat.Answer
	if err := gw.Run(context.Background(), "acct", params(t, body), &answerSink{sink: &sink{}, answer: &got}); err != nil {
		t.Fatalf("Run(over the limit, with a fallback) = %v", err)
	}
	if got.Model != "openai/gpt-4o-mini" || len(provs["anthropic"].got) != 0 {
		t.Errorf("answered by %q (anthropic got %d requests); want openai/gpt-4o-mini only", got.Model, len(provs["anthropic"].got))
	}
	if bp := breakpoints(provs["openai"].got[0]); len(bp) != 0 {
		t.Errorf("the fallback got breakpoints %q; want none", bp)
	}
	body = `{"model":"anthropic/claude-sonnet-4-5","models":["bedrock/nova-lite"],"messages":[` + strings.Join(over, ",") + `]}`
	err := gw.Run(context.Background(), "acct", params(t, body), &sink{})
	if e := apierr.As(err); e == nil || e.Param != "messages[1].content[3].cache_control" {
		t.Errorf("Run(over every candidate's limit) = %v; want the lead's 400 naming messages[1].content[3].cache_control", err)
	}
}
