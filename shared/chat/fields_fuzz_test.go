package chat_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// FuzzPrepare feeds arbitrary chat requests (tools, tool turns,
// response_format, sampling fields) to Gateway.Prepare: never a panic,
// every refusal an *apierr.Error, and an accepted request's tool turns
// consistent (each tool message answers a call, each call has an id).
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{
		`{"model":"synthetic/echo","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"user","content":"f"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		`{"model":"synthetic/echo","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"seed":1,"presence_penalty":1,"logit_bias":{"1":2},"messages":[{"role":"developer","content":[{"type":"text","text":"x"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(f), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}})
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
	})
}
