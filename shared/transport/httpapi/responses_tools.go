package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// The Responses API's tools, translated to the chat functions every
// provider can call, and their calls translated back.
//
//   - function: a function (strict, defer_loading, output_schema and the
//     other fields OpenAI adds are accepted; a defer_loading function is
//     offered once a tool_search_output in the input loads it).
//   - namespace: its functions (and custom tools), each under the flat
//     name <namespace>__<name> (or, when that is not a valid name of at
//     most 64 characters or is taken, a name with a hash of both); a call
//     comes back as {"type": "function_call", "namespace", "name"}.
//   - custom (free text, or a lark or regex grammar): a function with one
//     string parameter, input, whose description carries the grammar; a
//     call comes back as a custom_tool_call with that input.
//   - tool_search with execution "client": a function with the tool's
//     parameters; a call comes back as a tool_search_call (arguments an
//     object), and each tool_search_output of the input adds its tools to
//     what the model is offered.
//   - local_shell, shell (run locally) and apply_patch: functions whose
//     calls come back as local_shell_call, shell_call and apply_patch_call.
//   - every other type (web_search, file_search, code_interpreter,
//     image_generation, computer_use_preview, mcp, a server tool_search,
//     shell in a container...) is a hosted tool, which no provider behind
//     Genway runs: the request is served without it, and the answer's
//     OmittedToolsHeader names it. A tool_choice that forces one is a 400.

// OmittedToolsHeader names, comma-separated, the tools of a request that
// were left out of what the model was offered because the serving
// provider cannot run them: a Responses request's hosted tools (their
// types, each once), a Messages request's server tools (web_search_*,
// code_execution_*, ...); the access log names them too (omitted_tools).
const OmittedToolsHeader = "X-Genway-Omitted-Tools"

// toolKind is what the chat function offered for a Responses tool stands
// for.
type toolKind uint8

const (
	kindFunction   toolKind = iota // function, or a namespace's function
	kindCustom                     // custom: free text input
	kindToolSearch                 // tool_search, run by the client
	kindLocalShell                 // local_shell
	kindShell                      // shell, run by the client
	kindApplyPatch                 // apply_patch
)

// builtinNames are the chat names of the built-in kinds.
var builtinNames = map[toolKind]string{kindToolSearch: "tool_search", kindLocalShell: "local_shell", kindShell: "shell", kindApplyPatch: "apply_patch"}

// offeredTool is one chat function offered for a Responses tool.
type offeredTool struct {
	kind      toolKind
	namespace string // of a namespace's function or custom tool
	name      string // the Responses name of a function or custom tool
	chatName  string // the name the model sees
}

// toolKey finds an offered tool from a Responses call: its kind,
// namespace and name (built-ins have neither).
type toolKey struct {
	kind            toolKind
	namespace, name string
}

// toolSet is the tools of one Responses request as the model is offered
// them (chat tools, in order) and the way back from their calls.
type toolSet struct {
	tools   []chat.ParamsTool
	paths   []string // the Responses path of each of tools, for errors
	byChat  map[string]*offeredTool
	byKey   map[toolKey]*offeredTool
	omitted []string // the hosted tools' types left out, each once
}

// responsesTool is one entry of tools, or a tool inside a namespace or a
// tool_search_output.
type responsesTool struct {
	Type         string            `json:"type"`
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	Parameters   json.RawMessage   `json:"parameters"`
	Strict       *bool             `json:"strict"`
	DeferLoading bool              `json:"defer_loading"`
	CacheControl json.RawMessage   `json:"cache_control"` // a prompt-cache breakpoint, as in chat completions
	Tools        []json.RawMessage `json:"tools"`         // a namespace's
	Format       *customFormat     `json:"format"`        // a custom tool's
	Execution    string            `json:"execution"`     // tool_search: "client" or "server" (the default)
	Environment  *struct {
		Type string `json:"type"`
	} `json:"environment"` // shell: local, or a container (hosted)
}

// customFormat is a custom tool's input format: {"type": "text"} or
// {"type": "grammar", "syntax": "lark" | "regex", "definition"}.
type customFormat struct {
	Type       string `json:"type"`
	Syntax     string `json:"syntax"`
	Definition string `json:"definition"`
}

// chatToolName is what every provider takes as a function name.
var chatToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// newToolSet translates the request's tools and the tools that the
// input's tool_search_output items loaded (loaded, with their paths).
func newToolSet(tools []json.RawMessage, loaded []json.RawMessage, loadedPaths []string) (*toolSet, error) {
	s := &toolSet{byChat: map[string]*offeredTool{}, byKey: map[toolKey]*offeredTool{}}
	for i, raw := range tools {
		if err := s.add(raw, fmt.Sprintf("tools[%d]", i), "", false); err != nil {
			return nil, err
		}
	}
	for i, raw := range loaded {
		if err := s.add(raw, loadedPaths[i], "", true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// add translates one tool at path at (in namespace ns, if not ""). A
// function or custom tool with defer_loading is left for a
// tool_search_output to load: a loaded tool (from one) is offered unless
// the model has it already.
func (s *toolSet) add(raw json.RawMessage, at, ns string, loaded bool) error {
	var t responsesTool
	if err := json.Unmarshal(raw, &t); err != nil {
		return apierr.Invalidf(at, "invalid_value", "a tool must be an object with a type")
	}
	switch t.Type {
	case "function", "custom":
		kind, desc, params := kindFunction, t.Description, t.Parameters
		if t.Type == "custom" {
			kind, desc, params = kindCustom, customDescription(t.Description, t.Format), customParameters
		}
		key := toolKey{kind, ns, t.Name}
		if t.DeferLoading && !loaded || loaded && s.byKey[key] != nil {
			return nil
		}
		s.offer(key, at, desc, params, t.Strict, t.CacheControl)
	case "namespace":
		if ns != "" {
			return refuse(at+".type", "A namespace cannot hold another namespace.")
		}
		if t.Name == "" {
			return apierr.Invalidf(at+".name", "missing_field", "name is required in a namespace tool")
		}
		for j, inner := range t.Tools {
			if err := s.add(inner, fmt.Sprintf("%s.tools[%d]", at, j), t.Name, loaded); err != nil {
				return err
			}
		}
	case "tool_search":
		if t.Execution != "client" {
			s.omit(t.Type) // OpenAI's own search
			return nil
		}
		params := t.Parameters
		if !isSetRaw(params) {
			params = toolSearchParameters
		}
		desc := t.Description
		if desc == "" {
			desc = "Searches for more tools, and loads those that match for the next turn."
		}
		s.offer(toolKey{kind: kindToolSearch}, at, desc, params, nil, t.CacheControl)
	case "local_shell":
		s.offer(toolKey{kind: kindLocalShell}, at, "Runs a command on the user's machine and returns its output.", localShellParameters, nil, t.CacheControl)
	case "shell":
		if e := t.Environment; e != nil && e.Type != "" && e.Type != "local" {
			s.omit(t.Type) // in a container OpenAI runs
			return nil
		}
		s.offer(toolKey{kind: kindShell}, at, "Runs shell commands on the user's machine and returns their output.", shellParameters, nil, t.CacheControl)
	case "apply_patch":
		s.offer(toolKey{kind: kindApplyPatch}, at, "Creates, updates or deletes a file: an update's or a new file's content is a diff.", applyPatchParameters, nil, t.CacheControl)
	case "":
		return apierr.Invalidf(at+".type", "missing_field", "type is required in a tool")
	default:
		if ns != "" {
			return refuse(at+".type", fmt.Sprintf("A namespace holds function and custom tools, not %q.", t.Type))
		}
		s.omit(t.Type)
	}
	return nil
}

// offer adds the chat function for key: a function or custom tool under
// its name (flattened with its namespace's), a built-in under its own.
func (s *toolSet) offer(key toolKey, at, desc string, params json.RawMessage, strict *bool, cache json.RawMessage) {
	if s.byKey[key] != nil {
		// Defined twice: the gateway refuses the second definition of a name.
		s.tools = append(s.tools, chat.ParamsTool{Type: "function", Function: &chat.ParamsFunction{Name: s.byKey[key].chatName}})
		s.paths = append(s.paths, at)
		return
	}
	o := &offeredTool{kind: key.kind, namespace: key.namespace, name: key.name}
	switch {
	case key.kind == kindFunction || key.kind == kindCustom:
		o.chatName = s.freeName(key.namespace, key.name)
	default:
		o.chatName = s.freeName("", builtinNames[key.kind])
	}
	s.byKey[key], s.byChat[o.chatName] = o, o
	s.tools = append(s.tools, chat.ParamsTool{Type: "function", CacheControl: cache, Function: &chat.ParamsFunction{
		Name: o.chatName, Description: desc, Parameters: params, Strict: strict}})
	s.paths = append(s.paths, at)
}

// freeName returns the chat name for name in namespace ns: name itself
// outside a namespace (the gateway checks it), else ns__name; when that
// is not a valid chat name, or is taken, a name made of name's valid
// characters and a hash of both.
func (s *toolSet) freeName(ns, name string) string {
	if ns == "" && s.byChat[name] == nil {
		return name
	}
	if n := ns + "__" + name; ns != "" && chatToolName.MatchString(n) && s.byChat[n] == nil {
		return n
	}
	sum := sha256.Sum256([]byte(ns + "\x00" + name))
	h := hex.EncodeToString(sum[:4])
	clean := []byte(name)
	for i, c := range clean {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			clean[i] = '_'
		}
	}
	clean = clean[:min(len(clean), 64-len(h)-2-4)] // room for the hash, and a number
	n := string(clean) + "__" + h
	for k := 2; s.byChat[n] != nil; k++ {
		n = fmt.Sprintf("%s__%s_%d", clean, h, k)
	}
	return n
}

// omit notes a hosted tool of type typ, left out.
func (s *toolSet) omit(typ string) {
	if !slices.Contains(s.omitted, typ) {
		s.omitted = append(s.omitted, typ)
	}
}

// chatName returns the chat name of the tool a call in the input
// (function_call, custom_tool_call, ...) names: the offered tool's, or,
// for a tool no longer offered, the name it would have had.
func (s *toolSet) chatName(kind toolKind, ns, name string) string {
	if o := s.byKey[toolKey{kind, ns, name}]; o != nil {
		return o.chatName
	}
	switch {
	case kind == kindFunction || kind == kindCustom:
		if ns == "" {
			return name
		}
		if n := ns + "__" + name; chatToolName.MatchString(n) {
			return n
		}
		return (&toolSet{byChat: map[string]*offeredTool{}}).freeName(ns, name)
	default:
		return builtinNames[kind]
	}
}

// customParameters is the one parameter of a custom tool's function.
var customParameters = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's whole input, as free text."}},"required":["input"],"additionalProperties":false}`)

// customDescription is a custom tool's description, followed by how to
// give its input: as free text, matching its grammar if it has one.
// Only OpenAI's models are held to the grammar; others follow it as an
// instruction.
func customDescription(desc string, f *customFormat) string {
	var b strings.Builder
	b.WriteString(desc)
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString("Give the tool's whole input as free text (not JSON) in the input parameter.")
	if f != nil && f.Type == "grammar" && f.Definition != "" {
		syntax := f.Syntax
		if syntax == "" {
			syntax = "lark"
		}
		fmt.Fprintf(&b, " The input must match this %s grammar:\n\n%s", syntax, f.Definition)
	}
	return b.String()
}

var (
	toolSearchParameters = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What the tools you need do."},` +
		`"limit":{"type":"number","description":"The most tools to load."}},"required":["query"],"additionalProperties":false}`)
	localShellParameters = json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"array","items":{"type":"string"},"description":"The program and its arguments, as in [\"bash\", \"-lc\", \"ls -l\"]."},` +
		`"working_directory":{"type":"string","description":"The directory to run it in."},` +
		`"timeout_ms":{"type":"integer","description":"A time limit, in milliseconds."},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables to set."}},"required":["command"]}`)
	shellParameters = json.RawMessage(`{"type":"object","properties":{` +
		`"commands":{"type":"array","items":{"type":"string"},"description":"Shell commands to run, in order."},` +
		`"timeout_ms":{"type":"integer","description":"A time limit, in milliseconds."},` +
		`"max_output_length":{"type":"integer","description":"The most characters of output to return."}},"required":["commands"]}`)
	applyPatchParameters = json.RawMessage(`{"type":"object","properties":{` +
		`"type":{"type":"string","enum":["create_file","update_file","delete_file"]},` +
		`"path":{"type":"string","description":"The file's path, relative to the workspace root."},` +
		`"diff":{"type":"string","description":"For create_file and update_file: the change, as a diff."}},"required":["type","path"]}`)
)

// toolChoice translates the request's tool_choice into the chat one
// (nil for none), restricting s's tools for allowed_tools. Forcing a
// hosted tool is a 400 naming tool_choice.
func (s *toolSet) toolChoice(raw json.RawMessage) (json.RawMessage, error) {
	if !isSetRaw(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		return raw, nil
	}
	var c struct {
		Type        string            `json:"type"`
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Mode        string            `json:"mode"`
		Tools       []json.RawMessage `json:"tools"`
		ServerLabel string            `json:"server_label"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, apierr.Invalidf("tool_choice", "invalid_value", `tool_choice must be "none", "auto", "required" or an object with a type`)
	}
	named := func(kind toolKind, ns, name string) json.RawMessage {
		return rawJSON(map[string]any{"type": "function", "function": map[string]string{"name": s.chatName(kind, ns, name)}})
	}
	switch c.Type {
	case "function":
		return named(kindFunction, c.Namespace, c.Name), nil
	case "custom":
		return named(kindCustom, c.Namespace, c.Name), nil
	case "apply_patch":
		return named(kindApplyPatch, "", ""), nil
	case "shell":
		return named(kindShell, "", ""), nil
	case "local_shell":
		return named(kindLocalShell, "", ""), nil
	case "tool_search":
		if s.byKey[toolKey{kind: kindToolSearch}] != nil {
			return named(kindToolSearch, "", ""), nil
		}
	case "allowed_tools":
		return s.allowed(c.Mode, c.Tools)
	case "":
		return nil, apierr.Invalidf("tool_choice.type", "missing_field", "tool_choice.type is required")
	}
	return nil, cannotTranslate("tool_choice", fmt.Sprintf("tool_choice forces the hosted tool %q, which only OpenAI's own models run here.", c.Type))
}

// allowed restricts s's tools to those listed (hosted ones are left
// out), with the mode as the chat tool_choice.
func (s *toolSet) allowed(mode string, list []json.RawMessage) (json.RawMessage, error) {
	if mode != chat.ToolAuto && mode != chat.ToolRequired {
		return nil, apierr.Invalidf("tool_choice.mode", "invalid_value", `tool_choice.mode must be "auto" or "required", not %q`, mode)
	}
	keep := map[string]bool{}
	for _, raw := range list {
		var t struct {
			Type, Name, Namespace string
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		kinds := map[string]toolKind{"function": kindFunction, "custom": kindCustom, "tool_search": kindToolSearch,
			"local_shell": kindLocalShell, "shell": kindShell, "apply_patch": kindApplyPatch}
		if k, ok := kinds[t.Type]; ok {
			if k != kindFunction && k != kindCustom {
				t.Name, t.Namespace = "", ""
			}
			keep[s.chatName(k, t.Namespace, t.Name)] = true
		}
	}
	var tools []chat.ParamsTool
	var paths []string
	for i, t := range s.tools {
		if keep[t.Function.Name] {
			tools, paths = append(tools, t), append(paths, s.paths[i])
		}
	}
	if len(tools) == 0 && mode == chat.ToolRequired {
		return nil, cannotTranslate("tool_choice", "tool_choice requires one of its allowed tools, and none of them can run here but on OpenAI's own models.")
	}
	s.tools, s.paths = tools, paths
	return rawJSON(mode), nil
}

// toolSearchOutputText is the result a tool_search_output gives the
// model: the names of the tools it loaded, as the model now sees them.
func (s *toolSet) toolSearchOutputText(tools []json.RawMessage) string {
	var names []string
	var walk func(raws []json.RawMessage, ns string)
	walk = func(raws []json.RawMessage, ns string) {
		for _, raw := range raws {
			var t responsesTool
			if json.Unmarshal(raw, &t) != nil {
				continue
			}
			switch t.Type {
			case "namespace":
				walk(t.Tools, t.Name)
			case "function":
				names = append(names, s.chatName(kindFunction, ns, t.Name))
			case "custom":
				names = append(names, s.chatName(kindCustom, ns, t.Name))
			}
		}
	}
	walk(tools, "")
	if len(names) == 0 {
		return "No tools were loaded."
	}
	return "Loaded tools: " + strings.Join(names, ", ") + "."
}

// callItem returns the output item of the model's call c (for
// output_item events and the response's output), by the tool it calls.
func (s *toolSet) callItem(c chat.ToolCall, status string) outputItem {
	o := s.byChat[c.Name]
	if o == nil {
		o = &offeredTool{kind: kindFunction, name: c.Name}
	}
	it := outputItem{CallID: c.ID, Status: status}
	switch o.kind {
	case kindFunction:
		args := c.Arguments
		it.Type, it.ID, it.Namespace, it.Name, it.Arguments = "function_call", encodeCallID(c), o.namespace, o.name, &args
	case kindCustom:
		input := customInput(c.Arguments)
		it.Type, it.ID, it.Namespace, it.Name, it.Input = "custom_tool_call", newID("ctc_"), o.namespace, o.name, &input
	case kindToolSearch:
		it.Type, it.ID, it.Execution, it.Arguments = "tool_search_call", newID("tsc_"), "client", argsObject(c.Arguments)
	case kindLocalShell:
		it.Type, it.ID, it.Action = "local_shell_call", newID("lsc_"), localShellAction(c.Arguments)
	case kindShell:
		it.Type, it.ID, it.Action = "shell_call", newID("sh_"), argsObject(c.Arguments)
	case kindApplyPatch:
		it.Type, it.ID, it.Operation = "apply_patch_call", newID("apc_"), argsObject(c.Arguments)
	}
	return it
}

// customInput is a custom tool call's input: the input parameter of its
// function's arguments, or, if the model did not give one, the arguments
// themselves.
func customInput(args string) string {
	var a struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &a) == nil && a.Input != nil {
		return *a.Input
	}
	return args
}

// argsObject returns a call's arguments as a JSON object ({} if they are
// not one).
func argsObject(args string) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return json.RawMessage(`{}`)
	}
	return b.Bytes()
}

// localShellAction is the action of a local_shell_call: an exec of the
// call's command (a string is one word), with env always an object.
func localShellAction(args string) json.RawMessage {
	var a map[string]any
	if json.Unmarshal([]byte(args), &a) != nil || a == nil {
		a = map[string]any{}
	}
	if s, ok := a["command"].(string); ok {
		a["command"] = []string{s}
	}
	if _, ok := a["command"].([]any); !ok {
		if _, ok := a["command"].([]string); !ok {
			a["command"] = []string{}
		}
	}
	if _, ok := a["env"].(map[string]any); !ok {
		a["env"] = map[string]any{}
	}
	a["type"] = "exec"
	return rawJSON(a)
}
