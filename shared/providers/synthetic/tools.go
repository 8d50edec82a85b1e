package synthetic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/genway/genway/shared/chat"
)

// Tool calling and structured output, deterministically.
//
// With tools, the synthetic model calls them when
//   - tool_choice names a function: that one;
//   - the last user message says CALL_TOOL <name>, optionally followed by
//     the call's arguments as a JSON object (CALL_TOOL exec_command
//     {"cmd": "ls"}): each such tool, in the message's order (only the
//     first when parallel_tool_calls is false);
//   - else the last user message names tools (a word equal to a tool's
//     name, case-insensitive): each named tool, in the order of tools
//     (only the first when parallel_tool_calls is false);
//   - tool_choice is "required" and no tool is named: the first tool;
//
// unless tool_choice is "none" or the conversation's last message is a
// tool result, which it answers in words: "Tool <name> returned: <the
// result>". A name matches a tool's name, or the function of a tool a
// namespace flattened ("close_agent", or "multi_agent_v1.close_agent",
// matches the Responses API's "multi_agent_v1__close_agent"). A call's
// arguments are the JSON given with CALL_TOOL, else a minimal example of
// its parameters schema: the required properties only, a string as its
// first enum value or "synthetic", numbers 1, booleans true, arrays
// empty, objects recursively. Call ids are "call_<n>_<i>", n the number
// of messages, i the call's index.
//
// With response_format json_schema, the content is an example of the
// schema (every property); with json_object, {"answer": <the echo
// sentence>}.

// CallTool is the explicit tool-call trigger of a user message (see above).
const CallTool = "CALL_TOOL"

// toolCalls returns the calls the synthetic model makes for req, or nil.
func toolCalls(req *chat.Request) []chat.ToolCall {
	if len(req.Tools) == 0 || req.ToolChoice.Mode == chat.ToolNone {
		return nil
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == chat.RoleTool {
		return nil
	}
	var text string
	if last := lastUser(req); last != nil {
		text = last.Text()
	}
	var picked []chat.ToolCall // Name and, when given, Arguments
	switch {
	case req.ToolChoice.Mode == chat.ToolFunction:
		for _, t := range req.Tools {
			if t.Name == req.ToolChoice.Name {
				picked = append(picked, chat.ToolCall{Name: t.Name})
			}
		}
	case strings.Contains(text, CallTool):
		picked = explicitCalls(req.Tools, text)
	default:
		words := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
			return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			words[w] = true
		}
		for _, t := range req.Tools {
			name := strings.ToLower(t.Name)
			_, fn, namespaced := strings.Cut(name, "__")
			if words[name] || namespaced && words[fn] {
				picked = append(picked, chat.ToolCall{Name: t.Name})
			}
		}
	}
	if len(picked) == 0 && req.ToolChoice.Mode == chat.ToolRequired {
		picked = []chat.ToolCall{{Name: req.Tools[0].Name}}
	}
	if len(picked) > 1 && req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		picked = picked[:1]
	}
	if len(picked) == 0 {
		return nil
	}
	for i := range picked {
		c := &picked[i]
		c.ID = fmt.Sprintf("call_%d_%d", len(req.Messages), i)
		if c.Arguments == "" {
			for _, t := range req.Tools {
				if t.Name == c.Name {
					c.Arguments = minimalExample(t.Parameters)
				}
			}
		}
	}
	return picked
}

// explicitCalls returns the calls text asks for with CallTool, of the
// tools offered: the name, and the arguments when a JSON object follows it.
func explicitCalls(tools []chat.Tool, text string) []chat.ToolCall {
	var calls []chat.ToolCall
	for rest := text; ; {
		i := strings.Index(rest, CallTool)
		if i < 0 {
			return calls
		}
		rest = strings.TrimLeft(rest[i+len(CallTool):], " \t\r\n")
		end := strings.IndexFunc(rest, unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		}
		name := rest[:end]
		rest = strings.TrimLeft(rest[end:], " \t\r\n")
		var c chat.ToolCall
		if strings.HasPrefix(rest, "{") {
			var args json.RawMessage
			dec := json.NewDecoder(strings.NewReader(rest))
			if dec.Decode(&args) == nil {
				var b bytes.Buffer
				if json.Compact(&b, args) == nil {
					c.Arguments = b.String()
				}
				rest = rest[dec.InputOffset():]
			}
		}
		if t := findTool(tools, name); t != nil {
			c.Name = t.Name
			calls = append(calls, c)
		}
	}
}

// findTool returns the tool of tools that name names (see above), or nil.
func findTool(tools []chat.Tool, name string) *chat.Tool {
	name = strings.ToLower(strings.ReplaceAll(name, ".", "__"))
	var suffix *chat.Tool
	for i := range tools {
		t := strings.ToLower(tools[i].Name)
		if t == name {
			return &tools[i]
		}
		if suffix == nil && strings.HasSuffix(t, "__"+name) {
			suffix = &tools[i]
		}
	}
	return suffix
}

// lastUser returns the last user message of req, or nil.
func lastUser(req *chat.Request) *chat.Message {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == chat.RoleUser {
			return &req.Messages[i]
		}
	}
	return nil
}

// toolAnswer is the words answering a last message that is a tool
// result, or nil.
func toolAnswer(req *chat.Request) []string {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != chat.RoleTool {
		return nil
	}
	m := req.Messages[n-1]
	return append([]string{"Tool", m.ToolName, "returned:"}, strings.Fields(m.Text())...)
}

// structured returns the JSON content for req's response format, or "".
func structured(req *chat.Request, echo []string) string {
	rf := req.ResponseFormat
	switch {
	case rf == nil:
		return ""
	case rf.Type == chat.FormatJSONSchema:
		return example(rf.Schema)
	default:
		b, _ := json.Marshal(map[string]string{"answer": strings.Join(echo, " ")})
		return string(b)
	}
}

// example returns a JSON value that fits schema, with every property
// (see the comment above).
func example(schema json.RawMessage) string { return exampleJSON(schema, false) }

// minimalExample returns the arguments object of a call: an example of
// schema with its required properties only.
func minimalExample(schema json.RawMessage) string { return exampleJSON(schema, true) }

func exampleJSON(schema json.RawMessage, minimal bool) string {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return "{}"
	}
	b, _ := json.Marshal(exampleOf(s, s, 0, minimal))
	return string(b)
}

// exampleOf builds the example of schema s, of its objects' required
// properties only if minimal; root resolves local $refs.
func exampleOf(s, root map[string]any, depth int, minimal bool) any {
	if depth > 16 {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		return exampleOf(resolve(root, ref), root, depth+1, minimal)
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := s["const"]; ok {
		return c
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if a, ok := alts[0].(map[string]any); ok {
				return exampleOf(a, root, depth+1, minimal)
			}
		}
	}
	typ := s["type"]
	if ts, ok := typ.([]any); ok && len(ts) > 0 { // ["string", "null"]
		typ = ts[0]
	}
	switch typ {
	case "string":
		return "synthetic"
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	case "array":
		return []any{}
	}
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	required, _ := s["required"].([]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		if !minimal || slices.Contains(required, any(k)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if ps, ok := props[k].(map[string]any); ok {
			out[k] = exampleOf(ps, root, depth+1, minimal)
		}
	}
	return out
}

// resolve finds a local reference ("#/$defs/x") in root.
func resolve(root map[string]any, ref string) map[string]any {
	cur := root
	for _, seg := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		next, ok := cur[seg].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		cur = next
	}
	return cur
}

// pieces splits s into the pieces a stream sends: at most 16 bytes each,
// so that a client sees arguments and JSON arrive in parts.
func pieces(s string) []string {
	var out []string
	for len(s) > 16 {
		n := 16
		for n > 1 && !utf8.RuneStart(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
