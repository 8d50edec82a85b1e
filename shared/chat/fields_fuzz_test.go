package chat_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// FuzzPrepare feeds arbitrary chat requests (tools, tool turns,
// response_format, sampling fields, cache_control) to Gateway.Prepare:
// never a panic, every refusal an *apierr.Error, an accepted request's
// tool turns consistent (each tool message answers a call, each call has
// an id), and its cache breakpoints within its provider's rules (none
// for one that takes none).
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{
		`{"model":"synthetic/echo","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"user","content":"f"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		`{"model":"synthetic/echo","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"seed":1,"presence_penalty":1,"logit_bias":{"1":2},"messages":[{"role":"developer","content":[{"type":"text","text":"x"}]}]}`,
		`{"model":"anthropic/claude-sonnet-4-5","tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"text","text":"f","cache_control":{"type":"ephemeral","ttl":"5m"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}}]}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","cache_control":{"type":"ephemeral"}}}],"messages":[{"role":"user","content":[{"type":"text","text":"","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	rules := chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}
	gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(f), Providers: map[string]chat.Provider{
		"synthetic": &fakeProvider{}, "anthropic": &cachingProvider{rules: rules}}})
	f.Fuzz(func(t *testing.T, body []byte) {
		var p chat.Params
		if json.Unmarshal(body, &p) != nil {
			return
		}
		c, err := gw.Prepare(context.Background(), &p)
		if err != nil {
			if apierr.As(err) == nil {
				t.Fatalf("Prepare error %v is not an *apierr.Error", err)
			}
			return
		}
		calls := map[string]bool{}
		for _, m := range c.Request.Messages {
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" || tc.Arguments == "" {
					t.Errorf("accepted tool call %+v lacks id, name or arguments", tc)
				}
				calls[tc.ID] = true
			}
			if m.Role == chat.RoleTool && (!calls[m.ToolCallID] || m.ToolName == "") {
				t.Errorf("accepted tool message %+v answers no earlier call", m)
			}
		}
		for _, tl := range c.Request.Tools {
			if len(tl.Parameters) == 0 || !json.Valid(tl.Parameters) {
				t.Errorf("accepted tool %q has parameters %q", tl.Name, tl.Parameters)
			}
		}
		bp := breakpoints(c.Request)
		if c.Request.Model.Provider != "anthropic" && len(bp) > 0 {
			t.Errorf("accepted request to %s has breakpoints %q; want none", c.Request.Model.Provider, bp)
		}
		if len(bp) > rules.Breakpoints {
			t.Errorf("accepted request has %d breakpoints; want at most %d", len(bp), rules.Breakpoints)
		}
	})
}
