package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// summary is a chat request in short: each tool's name, and each message
// as role(content) with its calls and the call a tool message answers.
func summary(p *chat.Params) (tools []string, msgs []string) {
	for _, t := range p.Tools {
		tools = append(tools, t.Function.Name)
	}
	for _, m := range p.Messages {
		s := m.Role
		if len(m.Content) > 0 && string(m.Content) != "null" {
			var text string
			var parts []chat.ParamsPart
			if json.Unmarshal(m.Content, &text) != nil && json.Unmarshal(m.Content, &parts) == nil {
				for _, pt := range parts {
					if pt.ImageURL != nil {
						text += "[image " + pt.ImageURL.URL + "]"
					} else {
						text += "[" + *pt.Text + "]"
					}
				}
			}
			s += "(" + text + ")"
		}
		for _, c := range m.ToolCalls {
			s += fmt.Sprintf(" %s=%s%s", c.ID, c.Function.Name, c.Function.Arguments)
		}
		if m.ToolCallID != "" {
			s += " <" + m.ToolCallID
		}
		msgs = append(msgs, s)
	}
	return tools, msgs
}

// TestResponsesToolsToChat: each tool type of the Responses API as the
// model is offered it (chat functions), hosted tools left out and named,
// and the calls and outputs of the input as chat turns.
func TestResponsesToolsToChat(t *testing.T) {
	const ns = `{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
		{"type":"function","name":"close_agent","strict":false,"parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}},
		{"type":"function","name":"spawn_agent","defer_loading":true,"parameters":{"type":"object","properties":{}}}]}`
	const patch = `{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}}`
	const search = `{"type":"tool_search","execution":"client","description":"Find tools.","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}`
	tests := []struct {
		name      string
		tools     string // the request's tools
		input     string // its input items
		choice    string // its tool_choice
		wantTools []string
		wantMsgs  []string
		omitted   []string
		check     func(t *testing.T, p *chat.Params)
	}{
		{
			name:  "namespace: flat names, deferred functions left for a search",
			tools: `[{"type":"function","name":"exec_command","strict":false,"parameters":{"type":"object"}},` + ns + `]`,
			input: `[{"type":"message","id":"msg_1","role":"user","content":[{"type":"input_text","text":"hi"}]},
				{"type":"function_call","id":"fc_x","status":"completed","namespace":"multi_agent_v1","name":"close_agent","arguments":"{\"target\":\"a\"}","call_id":"c1"},
				{"type":"function_call_output","id":"fco_1","call_id":"c1","output":"closed"}]`,
			wantTools: []string{"exec_command", "multi_agent_v1__close_agent"},
			wantMsgs:  []string{"user([hi])", `assistant c1=multi_agent_v1__close_agent{"target":"a"}`, "tool(closed) <c1"},
		},
		{
			name:      "custom tool with a grammar: one string parameter, the grammar in the description",
			tools:     `[` + patch + `]`,
			input:     `[{"type":"custom_tool_call","id":"ctc_1","status":"completed","call_id":"c1","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"},{"type":"custom_tool_call_output","id":"ctco_1","call_id":"c1","output":"Done."}]`,
			wantTools: []string{"apply_patch"},
			wantMsgs:  []string{`assistant c1=apply_patch{"input":"*** Begin Patch\n*** End Patch\n"}`, "tool(Done.) <c1"},
			check: func(t *testing.T, p *chat.Params) {
				f := p.Tools[0].Function
				if !strings.Contains(f.Description, "Edit files.") || !strings.Contains(f.Description, "lark grammar:\n\nstart: begin_patch hunk+ end_patch") {
					t.Errorf("description = %q; want the tool's and its grammar", f.Description)
				}
				if string(f.Parameters) != string(customParameters) {
					t.Errorf("parameters = %s; want one string input", f.Parameters)
				}
			},
		},
		{
			name:  "tool_search: a function; its output loads the tools it found and answers the call",
			tools: `[` + search + `,` + ns + `]`,
			input: `[{"type":"tool_search_call","id":"tsc_1","call_id":"c1","status":"completed","execution":"client","arguments":{"query":"spawn agent","limit":2}},
				{"type":"tool_search_output","id":"tso_1","call_id":"c1","status":"completed","execution":"client","tools":[{"type":"namespace","name":"multi_agent_v1","tools":[
					{"type":"function","name":"spawn_agent","defer_loading":true,"parameters":{"type":"object","properties":{}}},
					{"type":"function","name":"close_agent","defer_loading":true,"parameters":{"type":"object"}}]}]}]`,
			wantTools: []string{"tool_search", "multi_agent_v1__close_agent", "multi_agent_v1__spawn_agent"},
			wantMsgs: []string{`assistant c1=tool_search{"query":"spawn agent","limit":2}`,
				"tool(Loaded tools: multi_agent_v1__spawn_agent, multi_agent_v1__close_agent.) <c1"},
		},
		{
			name:  "built-ins: local_shell, shell, apply_patch; outputs by call id (a local shell's by its item id)",
			tools: `[{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"}]`,
			input: `[{"type":"local_shell_call","id":"lsc_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}},
				{"type":"shell_call","call_id":"c2","action":{"commands":["pwd"]}},
				{"type":"apply_patch_call","call_id":"c3","status":"completed","operation":{"type":"delete_file","path":"a.txt"}},
				{"type":"local_shell_call_output","id":"lsc_1","output":"a.txt"},
				{"type":"shell_call_output","call_id":"c2","output":[{"stdout":"/w","stderr":"","outcome":{"type":"exit","exit_code":0}}]},
				{"type":"apply_patch_call_output","call_id":"c3","status":"completed"}]`,
			wantTools: []string{"local_shell", "shell", "apply_patch"},
			wantMsgs: []string{`assistant c1=local_shell{"command":["ls"],"env":{}} c2=shell{"commands":["pwd"]} c3=apply_patch{"type":"delete_file","path":"a.txt"}`,
				"tool(a.txt) <c1", "tool(/w\n(exit code 0)\n) <c2", "tool(The patch was applied: completed.) <c3"},
		},
		{
			name: "hosted tools left out, named once each",
			tools: `[{"type":"web_search","external_web_access":false,"search_content_types":["text","image"]},{"type":"file_search","vector_store_ids":["v"]},
				{"type":"mcp","server_label":"x"},{"type":"tool_search"},{"type":"shell","environment":{"type":"container_auto"}},
				{"type":"web_search"},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"f"}]`,
			input:     `[{"role":"user","content":"hi"}]`,
			wantTools: []string{"f"},
			wantMsgs:  []string{"user(hi)"},
			omitted:   []string{"web_search", "file_search", "mcp", "tool_search", "shell", "code_interpreter"},
		},
		{
			name:  "an assistant turn is one message: its text, then its calls; a hosted call item is left out",
			tools: `[{"type":"function","name":"f"}]`,
			input: `[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[],"content":null,"encrypted_content":"gAAAA_openai"},
				{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Let me see.","annotations":[]}]},
				{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}},
				{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":"1"},{"type":"function_call_output","call_id":"c2","output":"2"}]`,
			wantTools: []string{"f"},
			wantMsgs:  []string{"user(hi)", `assistant([Let me see.]) c1=f{} c2=f{}`, "tool(1) <c1", "tool(2) <c2"},
		},
		{
			// As Codex's view_image answers: the image goes in a user
			// message after the turn's tool results (a tool message
			// carries none).
			name:  "an image in a tool output",
			tools: `[{"type":"function","name":"view_image"},{"type":"function","name":"f"}]`,
			input: `[{"role":"user","content":"look"},{"type":"function_call","call_id":"c1","name":"view_image","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]},
				{"type":"function_call_output","call_id":"c2","output":"ok"}]`,
			wantTools: []string{"view_image", "f"},
			wantMsgs: []string{"user(look)", "assistant c1=view_image{} c2=f{}", "tool([1 image(s): in the next message]) <c1", "tool(ok) <c2",
				"user([image data:image/png;base64,iVBORw0KGgo=][(The images the tools returned.)])"},
		},
		{
			name:      "a long namespaced name is hashed to a valid one",
			tools:     `[{"type":"namespace","name":"a_very_long_namespace_name_for_the_tools_of_a_server","tools":[{"type":"function","name":"and.a.dotted.function.name"}]}]`,
			input:     `[{"role":"user","content":"hi"}]`,
			wantTools: []string{"and_a_dotted_function_name__318eedfb"},
			wantMsgs:  []string{"user(hi)"},
		},
		{
			name:      "a flat name that is taken gets a hashed one",
			tools:     `[{"type":"function","name":"ns__f"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}]`,
			input:     `[{"role":"user","content":"hi"}]`,
			wantTools: []string{"ns__f", "f__a7988ed3"},
			wantMsgs:  []string{"user(hi)"},
		},
		{
			name:      "tool_choice names a namespaced function",
			tools:     `[` + ns + `]`,
			input:     `[{"role":"user","content":"hi"}]`,
			choice:    `{"type":"function","namespace":"multi_agent_v1","name":"close_agent"}`,
			wantTools: []string{"multi_agent_v1__close_agent"},
			wantMsgs:  []string{"user(hi)"},
			check: func(t *testing.T, p *chat.Params) {
				if string(p.ToolChoice) != `{"function":{"name":"multi_agent_v1__close_agent"},"type":"function"}` {
					t.Errorf("tool_choice = %s", p.ToolChoice)
				}
			},
		},
		{
			name:      "allowed_tools keeps the listed ones",
			tools:     `[{"type":"function","name":"f"},{"type":"function","name":"g"},` + patch + `,{"type":"web_search"}]`,
			input:     `[{"role":"user","content":"hi"}]`,
			choice:    `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"},{"type":"custom","name":"apply_patch"},{"type":"web_search"}]}`,
			wantTools: []string{"g", "apply_patch"},
			wantMsgs:  []string{"user(hi)"},
			omitted:   []string{"web_search"},
			check: func(t *testing.T, p *chat.Params) {
				if string(p.ToolChoice) != `"required"` {
					t.Errorf("tool_choice = %s; want required", p.ToolChoice)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"synthetic/echo","tools":` + tt.tools + `,"input":` + tt.input
			if tt.choice != "" {
				body += `,"tool_choice":` + tt.choice
			}
			var rp responsesRequest
			if err := json.Unmarshal([]byte(body+"}"), &rp); err != nil {
				t.Fatal(err)
			}
			var tr translation
			p, err := rp.chatParams(&tr)
			if err != nil {
				t.Fatalf("chatParams(%s) = %v", body, err)
			}
			tools, msgs := summary(p)
			if !slices.Equal(tools, tt.wantTools) {
				t.Errorf("tools = %q; want %q", tools, tt.wantTools)
			}
			if !slices.Equal(msgs, tt.wantMsgs) {
				t.Errorf("messages =\n%q\nwant\n%q", msgs, tt.wantMsgs)
			}
			if !slices.Equal(tr.tools.omitted, tt.omitted) {
				t.Errorf("omitted = %q; want %q", tr.tools.omitted, tt.omitted)
			}
			for _, n := range tools {
				if !chatToolName.MatchString(n) {
					t.Errorf("tool name %q is not one every provider takes", n)
				}
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

// TestResponsesToolErrors: what cannot be served is a 400 naming the
// Responses field, with the path of the tool or item it came from.
func TestResponsesToolErrors(t *testing.T) {
	gw := syntheticGateway(t)
	tests := []struct{ body, code, param string }{
		{`{"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "unsupported_parameter", "tool_choice"},
		{`{"tools":[{"type":"mcp","server_label":"x"}],"tool_choice":{"type":"mcp","server_label":"x"}}`, "unsupported_parameter", "tool_choice"},
		{`{"tools":[{"type":"image_generation"}],"tool_choice":{"type":"image_generation"}}`, "unsupported_parameter", "tool_choice"},
		{`{"tools":[{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}}`, "unsupported_parameter", "tool_choice"},
		{`{"tools":[{"type":"tool_search"}],"tool_choice":{"type":"tool_search"}}`, "unsupported_parameter", "tool_choice"},
		{`{"tools":[{"type":"function","name":"f"},{"type":"namespace","name":"n","tools":[{"type":"function","name":"g","parameters":3}]}]}`, "invalid_value", "tools[1].tools[0].parameters"},
		{`{"tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]}`, "unsupported_parameter", "tools[0].tools[0].type"},
		{`{"tools":[{"name":"f"}]}`, "missing_field", "tools[0].type"},
		{`{"tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]}`, "invalid_value", "tools[1].name"},
		{`{"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "invalid_value", "tool_choice.name"},
		{`{"input":[{"type":"custom_tool_call","name":"p","input":"x"}]}`, "missing_field", "input[0].call_id"},
		{`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}]}`, "invalid_value", "input[0].arguments"},
		{`{"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call","call_id":"","name":"g","arguments":"{}"}]}`,
			"missing_field", "input[2].call_id"},
		{`{"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"","arguments":"{}"}]}`,
			"missing_field", "input[2].name"}, // the second call of one assistant message
		{`{"input":[{"type":"reasoning","summary":[],"encrypted_content":"gw1.not-base64!"}]}`, "invalid_value", "input[0].encrypted_content"},
		{`{"input":[{"type":"shell_call_output","call_id":"nope","output":[]}]}`, "invalid_value", "input[0].call_id"},
		{`{"input":[{"type":"compaction_summary","text":"x"}]}`, "unsupported_parameter", "input[0].type"},
		{`{"input":[{"role":"user","content":"look"},{"type":"function_call","call_id":"c","name":"view_image","arguments":"{}"},
			{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`,
			"model_not_vision_capable", "input[2].output[0]"}, // synthetic/echo takes no image
		{`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_id":"f"}]}]}`, "unsupported_parameter", "input[0].output[0].file_id"},
		{`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBE"}]}]}`, "unsupported_parameter", "input[0].output[0]"},
	}
	for _, tt := range tests {
		body := strings.Replace(tt.body, "{", `{"model":"synthetic/echo",`, 1)
		if !strings.Contains(body, `"input"`) {
			body = strings.Replace(body, "{", `{"input":"hi",`, 1)
		}
		var rp responsesRequest
		var tr translation
		err := json.Unmarshal([]byte(body), &rp)
		if err == nil {
			var p *chat.Params
			if p, err = rp.chatParams(&tr); err == nil {
				_, err = gw.Prepare(t.Context(), p)
			}
		}
		e := apierr.As(responsesParam(err, &tr))
		if e == nil || e.Code != tt.code || e.Param != tt.param {
			t.Errorf("%s: %v; want 400 %s naming %s", body, err, tt.code, tt.param)
		}
	}
}

// TestResponsesCallItems: a model's call of each kind of tool comes back
// as the item of that tool, as the Responses API (and Codex) has it.
func TestResponsesCallItems(t *testing.T) {
	var rp responsesRequest
	if err := json.Unmarshal([]byte(`{"tools":[{"type":"function","name":"get_weather"},
		{"type":"namespace","name":"multi_agent_v1","tools":[{"type":"function","name":"close_agent"},{"type":"custom","name":"note"}]},
		{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
		{"type":"tool_search","execution":"client"},{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"}],"input":"hi"}`), &rp); err != nil {
		t.Fatal(err)
	}
	var tr translation
	if _, err := rp.chatParams(&tr); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, o := range tr.tools.byChat {
		names[fmt.Sprint(o.kind, o.namespace, o.name)] = o.chatName
	}
	tests := []struct {
		call chat.ToolCall
		want string // the item without its id
	}{
		{chat.ToolCall{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			`{"type":"function_call","status":"completed","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`},
		{chat.ToolCall{ID: "c2", Name: "multi_agent_v1__close_agent", Arguments: `{"target":"a1"}`},
			`{"type":"function_call","status":"completed","call_id":"c2","namespace":"multi_agent_v1","name":"close_agent","arguments":"{\"target\":\"a1\"}"}`},
		{chat.ToolCall{ID: "c3", Name: "apply_patch", Arguments: `{"input":"*** Begin Patch\n*** End Patch\n"}`},
			`{"type":"custom_tool_call","status":"completed","call_id":"c3","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"}`},
		{chat.ToolCall{ID: "c4", Name: "multi_agent_v1__note", Arguments: `not json`},
			`{"type":"custom_tool_call","status":"completed","call_id":"c4","namespace":"multi_agent_v1","name":"note","input":"not json"}`},
		{chat.ToolCall{ID: "c5", Name: "tool_search", Arguments: `{"query":"spawn agent", "limit":2}`},
			`{"type":"tool_search_call","status":"completed","call_id":"c5","arguments":{"query":"spawn agent","limit":2},"execution":"client"}`},
		{chat.ToolCall{ID: "c6", Name: "local_shell", Arguments: `{"command":"ls","working_directory":"/w"}`},
			`{"type":"local_shell_call","status":"completed","call_id":"c6","action":{"command":["ls"],"env":{},"type":"exec","working_directory":"/w"}}`},
		{chat.ToolCall{ID: "c7", Name: "shell", Arguments: `{"commands":["pwd"]}`},
			`{"type":"shell_call","status":"completed","call_id":"c7","action":{"commands":["pwd"]}}`},
		{chat.ToolCall{ID: "c8", Name: names[fmt.Sprint(kindApplyPatch, "", "")], Arguments: `{"type":"update_file","path":"a.go","diff":"@@ x"}`},
			`{"type":"apply_patch_call","status":"completed","call_id":"c8","operation":{"type":"update_file","path":"a.go","diff":"@@ x"}}`},
		{chat.ToolCall{ID: "c9", Name: "not_offered", Arguments: `{}`},
			`{"type":"function_call","status":"completed","call_id":"c9","name":"not_offered","arguments":"{}"}`},
	}
	for _, tt := range tests {
		it := tr.tools.callItem(tt.call, "completed")
		if it.ID == "" {
			t.Errorf("callItem(%+v) has no id", tt.call)
		}
		b, _ := json.Marshal(it)
		var got map[string]any
		var want any
		json.Unmarshal(b, &got)
		delete(got, "id")
		json.Unmarshal([]byte(tt.want), &want)
		if gb, wb := fmt.Sprint(got), fmt.Sprint(want); gb != wb {
			t.Errorf("callItem(%+v) =\n%s\nwant\n%s", tt.call, b, tt.want)
		}
	}
}
