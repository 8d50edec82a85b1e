package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// The coding agents and the Anthropic SDK, the real ones (pinned in
// clients/npm, installed by scripts/test.sh), run against genway serve
// with the configuration docs/agents.md gives (the files of
// clients/npm/agents, used verbatim but for the address), offline: every
// run has the proxy variables pointed at a proxyTrap, and a test fails if
// a client reached for anything but loopback.

// agentSnippet is the default address in the snippets of
// clients/npm/agents, which a test replaces with its server's.
const agentSnippet = "http://127.0.0.1:8080"

// agentRunTimeout bounds one client run.
const agentRunTimeout = 3 * time.Minute

// proxyTrap is an HTTP proxy on 127.0.0.1 that forwards nothing: it
// counts every connection, records its first line (a CONNECT host:443 or
// a proxied request line), answers 403 and closes. A client run with the
// proxy variables pointed at it and NO_PROXY=127.0.0.1,localhost reaches
// loopback only, and whatever it tried beyond shows here.
type proxyTrap struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int      // connections accepted, syncs included
	syncs    int      // connections of check
	lines    []string // first lines of the clients' connections
	done     chan struct{}
}

// trapSync is the request line of the trap's own connections (see check).
const trapSync = "GENWAY-TRAP-SYNC / HTTP/1.1"

func newProxyTrap(t *testing.T) *proxyTrap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxyTrap{ln: ln, done: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() { ln.Close(); <-p.done })
	return p
}

func (p *proxyTrap) serve() {
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(io.LimitReader(c, 4096)).ReadString('\n')
			line = strings.TrimSpace(line)
			if line != trapSync {
				p.mu.Lock()
				p.lines = append(p.lines, line)
				p.mu.Unlock()
			}
			io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}()
	}
}

// env is the proxy variables, upper and lower case, pointed at the trap,
// with loopback exempt.
func (p *proxyTrap) env() []string {
	u := "http://" + p.ln.Addr().String()
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return append(env, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
}

// check fails t if any client connected to the trap. It first makes a
// connection of its own and waits for its answer: connections are
// accepted in order, so every earlier one has been counted by then.
func (p *proxyTrap) check(t *testing.T) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("trap sync: %v", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, trapSync+"\r\n\r\n")
	io.Copy(io.Discard, c)
	c.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs++
	if n := p.accepted - p.syncs; n > 0 {
		t.Errorf("the client reached beyond loopback through the proxy %d time(s): %q", n, p.lines)
	}
}

// frontRecorder is a reverse proxy on 127.0.0.1 in front of genway serve
// that records what a client asked and what it was answered: each
// request's method, path with query, headers and the answer's status. It
// shows how many requests a client made for a turn, and that none was a
// retry (Claude Code retries a 400 silently, with fewer features).
type frontRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []frontRequest
}

type frontRequest struct {
	method, path string
	header       http.Header
	status       int
}

func (f frontRequest) String() string { return fmt.Sprintf("%s %s = %d", f.method, f.path, f.status) }

func newFrontRecorder(t *testing.T, base string) *frontRecorder {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	f := &frontRecorder{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		f.mu.Lock()
		f.reqs = append(f.reqs, frontRequest{resp.Request.Method, resp.Request.URL.RequestURI(), resp.Request.Header.Clone(), resp.StatusCode})
		f.mu.Unlock()
		return nil
	}
	f.srv = httptest.NewServer(rp)
	t.Cleanup(f.srv.Close)
	return f
}

// take returns the requests recorded since the last take.
func (f *frontRecorder) take() []frontRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// agentSnippetText returns the snippet name of clients/npm/agents (dir
// is clients/npm) with its address replaced by base.
func agentSnippetText(t *testing.T, dir, name, base string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(agentSnippet)) {
		t.Fatalf("clients/npm/agents/%s does not name %s", name, agentSnippet)
	}
	return bytes.ReplaceAll(b, []byte(agentSnippet), []byte(base))
}

// writeFile writes b to path, or fails t.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// runAgent runs the command args in dir with only env (PATH added), stdin
// from /dev/null, within agentRunTimeout, and returns its stdout; stderr is
// logged. It fails t if the command fails.
func runAgent(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("%s:\n%s%s", filepath.Base(args[0]), out, stderr.String())
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(args[0]), err)
	}
	return out
}

// agentsCatalog writes the shipped catalog with two priced models of the
// tests' own (so that a retired model of the shipped catalog does not
// break them) and returns its path: openai/gpt-agent (OpenAI's
// gpt-4o-mini upstream) and anthropic/claude-agent (Anthropic's
// claude-sonnet-4-5 upstream), at whole credits per million tokens of
// each class (agentPrices).
func agentsCatalog(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile("../../shared/catalog/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Providers []json.RawMessage `json:"providers"`
		Models    []map[string]any  `json:"models"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	caps := map[string]any{"vision": true, "reasoning": false, "streaming": true, "tools": true, "structured_outputs": true}
	c.Models = append(c.Models, map[string]any{
		"id": "openai/gpt-agent", "type": "chat", "provider": "openai", "upstream": "gpt-4o-mini", "created": 1721172741,
		"capabilities": caps, "max_tokens": 16384,
		"price": map[string]any{"credits_per_million_input_tokens": 100, "credits_per_million_cached_input_tokens": 50, "credits_per_million_output_tokens": 400},
	})
	reasoning := map[string]any{}
	for k, v := range caps {
		reasoning[k] = v
	}
	reasoning["reasoning"] = true
	c.Models = append(c.Models, map[string]any{
		"id": "anthropic/claude-agent", "type": "chat", "provider": "anthropic", "upstream": "claude-sonnet-4-5", "created": 1759104000,
		"capabilities": reasoning, "max_tokens": 64000, "thinking": "budget",
		"price": map[string]any{"credits_per_million_input_tokens": 300, "credits_per_million_cached_input_tokens": 30,
			"credits_per_million_cache_write_tokens": 375, "credits_per_million_output_tokens": 1500},
	})
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenCost is what tokens cost at rates in whole credits per million
// tokens: tokens x rate micro-credits, each class's rate an integer here,
// so no rounding.
func tokenCost(fresh, cached, written, output, freshRate, cachedRate, writeRate, outputRate int64) credits.Amount {
	return credits.Amount(fresh*freshRate + cached*cachedRate + written*writeRate + output*outputRate)
}

// waitCharged polls the balance of s's key until it is before - want, at
// most 20 s, and fails t if it is not.
func waitCharged(t *testing.T, s *server, before, want credits.Amount) {
	t.Helper()
	var after balance
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.do(t, "GET", "/v1/credits", nil, nil, &after)
		if before-after.Balance >= want || time.Now().After(deadline) {
			break
		}
	}
	if got := before - after.Balance; got != want {
		t.Errorf("charged %s; want %s", got, want)
	}
}

// waitRecords returns the records of the dev account of model, newest
// first, once there are n, within 20 s.
func waitRecords(t *testing.T, getenv func(string) string, model string, n int) []credits.Record {
	t.Helper()
	op, closeOp, err := openOperator(t.Context(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOp()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rs, _, err := op.Requests(t.Context(), credits.RecordQuery{Account: "dev", Model: model, Limit: credits.MaxRecordLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) >= n || time.Now().After(deadline) {
			if len(rs) != n {
				t.Fatalf("records of %s: %d; want %d", model, len(rs), n)
			}
			return rs
		}
	}
}

// codexEvent is one line of codex exec --json.
type codexEvent struct {
	Type string `json:"type"`
	Item struct {
		Type             string `json:"type"`
		Text             string `json:"text"`
		Command          string `json:"command"`
		AggregatedOutput string `json:"aggregated_output"`
		Status           string `json:"status"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
}

// codexRun is one `codex exec --json` turn through front, with the
// configuration of clients/npm/agents/codex-config.toml in a fresh
// CODEX_HOME (also HOME), in a fresh working directory, offline (trap);
// extra are more codex exec arguments. It returns the events.
func codexRun(t *testing.T, dir, base, key string, trap *proxyTrap, prompt string, extra ...string) []codexEvent {
	t.Helper()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config.toml"), agentSnippetText(t, dir, "codex-config.toml", base))
	env := append([]string{"HOME=" + home, "CODEX_HOME=" + home, "GENWAY_API_KEY=" + key, "TMPDIR=" + t.TempDir()}, trap.env()...)
	args := append([]string{filepath.Join(dir, "node_modules", ".bin", "codex"), "exec", "--skip-git-repo-check", "--json"}, extra...)
	out := runAgent(t, t.TempDir(), env, append(args, prompt)...)
	trap.check(t)
	var evs []codexEvent
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev codexEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("codex event %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	if n := len(evs); n == 0 || evs[n-1].Type != "turn.completed" || evs[n-1].Usage == nil {
		t.Fatalf("codex's events end with %v; want turn.completed with its usage", evs[max(n-1, 0):])
	}
	return evs
}

// codexItems returns the completed items of evs of type typ.
func codexItems(evs []codexEvent, typ string) []codexEvent {
	var out []codexEvent
	for _, ev := range evs {
		if ev.Type == "item.completed" && ev.Item.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// turnRequests fails t unless reqs are n requests to path, all answered 200.
func turnRequests(t *testing.T, reqs []frontRequest, method, path string, n int) {
	t.Helper()
	ok := len(reqs) == n
	for _, r := range reqs {
		p, _, _ := strings.Cut(r.path, "?")
		ok = ok && r.method == method && p == path && r.status == 200
	}
	if !ok {
		t.Errorf("the client's requests = %v; want %d %s %s, each answered 200", reqs, n, method, path)
	}
}

// TestCodexCLI runs Codex CLI (@openai/codex, pinned) against genway
// serve: codex exec completes a turn with synthetic/echo; a turn in which
// the model calls Codex's exec_command (CALL_TOOL), which Codex runs
// (default read-only sandbox), and answers with its output; and a turn of
// a priced model (openai/gpt-agent) behind a fake OpenAI upstream, whose
// usage Codex reports as the upstream counted it and whose cost the
// account is charged and the request's record says. Each run is offline
// (proxyTrap) and makes the requests a turn needs, each answered 200.
func TestCodexCLI(t *testing.T) {
	_, dir := npmClients(t, filepath.Join(".bin", "codex"))
	up := newFakeOpenAI(t, fakeOpenAIUsage{prompt: 3000, cached: 1000, completion: 40})
	extra := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": up.srv.URL + "/v1",
		"GENWAY_CATALOG": agentsCatalog(t), "GENWAY_USAGE_FLUSH": "20ms"}
	data := t.TempDir()
	getenv := testEnv(data, extra)
	s := startServer(t, data, extra)
	front := newFrontRecorder(t, s.base)
	trap := newProxyTrap(t)

	t.Run("echo", func(t *testing.T) {
		evs := codexRun(t, dir, front.srv.URL, s.key, trap, "say hi")
		msgs := codexItems(evs, "agent_message")
		if len(msgs) != 1 || msgs[0].Item.Text != "You said: say hi" {
			t.Errorf("codex's messages = %+v; want synthetic/echo's answer", msgs)
		}
		turnRequests(t, front.take(), "POST", "/v1/responses", 1)
	})

	t.Run("tool", func(t *testing.T) {
		evs := codexRun(t, dir, front.srv.URL, s.key, trap, `CALL_TOOL exec_command {"cmd":"echo hi-from-codex"}`)
		cmds := codexItems(evs, "command_execution")
		if len(cmds) != 1 || !strings.Contains(cmds[0].Item.Command, "echo hi-from-codex") || cmds[0].Item.AggregatedOutput != "hi-from-codex\n" {
			t.Errorf("codex's commands = %+v; want echo hi-from-codex run", cmds)
		}
		msgs := codexItems(evs, "agent_message")
		if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Item.Text, "Tool exec_command returned:") || !strings.Contains(msgs[0].Item.Text, "hi-from-codex") {
			t.Errorf("codex's messages = %+v; want the answer quoting the command's output", msgs)
		}
		turnRequests(t, front.take(), "POST", "/v1/responses", 2)
	})

	t.Run("priced", func(t *testing.T) {
		before := balanceOf(t, s)
		evs := codexRun(t, dir, front.srv.URL, s.key, trap, "say hi", "-m", "openai/gpt-agent")
		if msgs := codexItems(evs, "agent_message"); len(msgs) != 1 || msgs[0].Item.Text != fakeOpenAIText {
			t.Errorf("codex's messages = %+v; want the upstream's answer", msgs)
		}
		turnRequests(t, front.take(), "POST", "/v1/responses", 1)
		if n := len(up.take()); n != 1 {
			t.Errorf("the upstream got %d requests; want 1", n)
		}
		u := evs[len(evs)-1].Usage
		if u.InputTokens != 3000 || u.CachedInputTokens != 1000 || u.OutputTokens != 40 {
			t.Errorf("codex's turn usage = %+v; want the upstream's 3000 input (1000 cached) and 40 output tokens", *u)
		}
		want := tokenCost(2000, 1000, 0, 40, 100, 50, 0, 400)
		waitCharged(t, s, before, want)
		r := waitRecords(t, getenv, "openai/gpt-agent", 1)[0]
		if r.Kind != credits.KindResponses || r.Model != "openai/gpt-agent" || r.Cost != want || r.Tokens.Prompt != 3000 ||
			r.Tokens.Cached != 1000 || r.Tokens.Completion != 40 || r.Status != credits.StatusCompleted || !r.Stream {
			t.Errorf("the turn's record = %+v; want a streamed responses record of 3000 (1000 cached) and 40 tokens costing %s", r, want)
		}
	})
}

// fakeOpenAIText is the fake OpenAI upstream's answer.
const fakeOpenAIText = "Hello from the fake upstream."

// fakeOpenAIUsage is the usage the fake OpenAI upstream reports.
type fakeOpenAIUsage struct{ prompt, cached, completion int }

// newFakeOpenAI is a fake OpenAI upstream that answers every streamed
// request with fakeOpenAIText and usage u: chat completions as chunks,
// the Responses API as its events (so that it answers however genway
// serve calls OpenAI).
func newFakeOpenAI(t *testing.T, u fakeOpenAIUsage) *streamUpstream {
	chat := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"` + fakeOpenAIText + `"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			u.prompt, u.completion, u.prompt+u.completion, u.cached),
		`[DONE]`,
	}
	msg := `{"type":"message","id":"msg_up1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + fakeOpenAIText + `","annotations":[]}]}`
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`,
		u.prompt, u.cached, u.completion, u.prompt+u.completion)
	responses := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_up1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o-mini","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_up1","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","sequence_number":2,"output_index":0,"item_id":"msg_up1","content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":3,"output_index":0,"item_id":"msg_up1","content_index":0,"delta":"` + fakeOpenAIText + `"}`,
		`{"type":"response.output_text.done","sequence_number":4,"output_index":0,"item_id":"msg_up1","content_index":0,"text":"` + fakeOpenAIText + `"}`,
		`{"type":"response.content_part.done","sequence_number":5,"output_index":0,"item_id":"msg_up1","content_index":0,"part":{"type":"output_text","text":"` + fakeOpenAIText + `","annotations":[]}}`,
		`{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":` + msg + `}`,
		`{"type":"response.completed","sequence_number":7,"response":{"id":"resp_up1","object":"response","created_at":1,"status":"completed","model":"gpt-4o-mini","output":[` + msg + `],"usage":` + usage + `}}`,
	}
	return newStreamUpstream(t, func(body []byte) []string {
		if bytes.Contains(body, []byte(`"messages"`)) {
			return chat
		}
		return responses
	})
}

// take returns the bodies recorded since the last take.
func (u *streamUpstream) take() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.bodies
	u.bodies = nil
	return b
}

// claudeResult is the JSON that claude -p --output-format json prints.
type claudeResult struct {
	Result   string `json:"result"`
	IsError  bool   `json:"is_error"`
	NumTurns int    `json:"num_turns"`
	Usage    struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
}

// claudeRun is one `claude -p` turn through front: bash sources
// clients/npm/agents/claude-code.sh (its address front's) and runs claude
// with a fresh HOME and CLAUDE_CONFIG_DIR, in a fresh working directory
// holding probe.txt (PROBE in prompt is its absolute path, as Read wants
// it), offline (trap); extra are more claude arguments.
func claudeRun(t *testing.T, dir, base, key string, trap *proxyTrap, prompt string, extra ...string) claudeResult {
	t.Helper()
	home, work := t.TempDir(), t.TempDir()
	snippet := filepath.Join(home, "claude-code.sh")
	writeFile(t, snippet, agentSnippetText(t, dir, "claude-code.sh", base))
	probe := filepath.Join(work, "probe.txt")
	writeFile(t, probe, []byte("a probe file for Read\n"))
	prompt = strings.ReplaceAll(prompt, "PROBE", probe)
	// Claude Code keeps per-directory scratch under $TMPDIR/claude-<uid>
	// unless told where: in the test's own directory, removed with it.
	env := append([]string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "GENWAY_API_KEY=" + key,
		"TMPDIR=" + t.TempDir(), "CLAUDE_CODE_TMPDIR=" + t.TempDir()}, trap.env()...)
	args := append([]string{"bash", "-c", `. "$0" && exec "$@"`, snippet,
		filepath.Join(dir, "node_modules", ".bin", "claude"), "-p", prompt, "--output-format", "json"}, extra...)
	out := runAgent(t, work, env, args...)
	trap.check(t)
	var r claudeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("claude's result %q: %v", out, err)
	}
	if r.IsError {
		t.Fatalf("claude's result is an error: %+v", r)
	}
	return r
}

// claudeTurn fails t unless reqs are n Messages requests, as Claude Code
// sends them (?beta=true), each answered 200 at its first try
// (X-Stainless-Retry-Count 0): a request Genway refused would have been
// retried with fewer features.
func claudeTurn(t *testing.T, reqs []frontRequest, n int) {
	t.Helper()
	turnRequests(t, reqs, "POST", "/v1/messages", n)
	for _, r := range reqs {
		if r.path != "/v1/messages?beta=true" || r.header.Get("X-Stainless-Retry-Count") != "0" {
			t.Errorf("claude's request %s, X-Stainless-Retry-Count %q; want /v1/messages?beta=true at its first try", r.path, r.header.Get("X-Stainless-Retry-Count"))
		}
	}
}

// claudeBashCall is the fake Anthropic upstream's first turn for Claude
// Code: signed thinking, then a Bash call.
const claudeBashCall = `event: message_start
data: {"type":"message_start","message":{"id":"msg_b1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"cache_creation_input_tokens":2000,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should run the command."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIBhABGAIiQSIGBASH"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01Bash","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"echo hi-from-claude\","}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"description\":\"Say hi\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":50}}

event: message_stop
data: {"type":"message_stop"}

`

// claudeBashAnswer is the fake's second turn, answering %s: the Bash
// call's result, as a JSON string.
const claudeBashAnswer = `event: message_start
data: {"type":"message_start","message":{"id":"msg_b2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"cache_creation_input_tokens":150,"cache_read_input_tokens":2000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The command printed: "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

`

// claudeBashTurns answers the fake Anthropic upstream's requests for
// TestClaudeCode: claudeBashCall, then, to a request that brings a
// tool_result, claudeBashAnswer with its content.
func claudeBashTurns(body []byte) string {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req)
	for i := len(req.Messages) - 1; i >= 0; i-- {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(req.Messages[i].Content, &blocks)
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			var text string
			if json.Unmarshal(b.Content, &text) != nil {
				var parts []struct{ Text string }
				json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					text += p.Text
				}
			}
			q, _ := json.Marshal(strings.TrimSpace(text))
			return fmt.Sprintf(claudeBashAnswer, q)
		}
	}
	return claudeBashCall
}

// TestClaudeCode runs Claude Code (@anthropic-ai/claude-code, pinned)
// against genway serve: claude -p completes a turn with synthetic/echo,
// and turns in which the synthetic model calls Bash and Read (CALL_TOOL)
// and answers with their results; then, with an Anthropic model
// (anthropic/claude-agent) behind a fake Anthropic upstream, a turn in
// which the model thinks (signed) and calls Bash, and answers with its
// output. Each of Claude Code's requests is answered 200 at its first
// try and reaches the upstream once; the turn's usage is the upstream's,
// the account is charged exactly the answers' cost at the model's
// prices, and each request's record says so. Every run is offline
// (proxyTrap).
func TestClaudeCode(t *testing.T) {
	_, dir := npmClients(t, filepath.Join(".bin", "claude"))
	up := newFakeClaudeFunc(t, claudeBashTurns)
	extra := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": up.srv.URL,
		"GENWAY_CATALOG": agentsCatalog(t), "GENWAY_USAGE_FLUSH": "20ms"}
	data := t.TempDir()
	getenv := testEnv(data, extra)
	s := startServer(t, data, extra)
	front := newFrontRecorder(t, s.base)
	trap := newProxyTrap(t)

	t.Run("echo", func(t *testing.T) {
		r := claudeRun(t, dir, front.srv.URL, s.key, trap, "say hi")
		if !strings.HasPrefix(r.Result, "You said: ") || !strings.HasSuffix(r.Result, " say hi") || r.NumTurns != 1 {
			t.Errorf("claude's result = %+v; want synthetic/echo's answer in one turn", r)
		}
		claudeTurn(t, front.take(), 1)
	})

	for _, c := range []struct{ tool, prompt, want string }{
		{"Bash", `CALL_TOOL Bash {"command":"echo hi-from-claude","description":"Say hi"}`, "Tool Bash returned: hi-from-claude"},
		{"Read", `CALL_TOOL Read {"file_path":"PROBE"}`, "a probe file for Read"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			r := claudeRun(t, dir, front.srv.URL, s.key, trap, c.prompt, "--allowedTools", c.tool)
			if !strings.HasPrefix(r.Result, "Tool "+c.tool+" returned:") || !strings.Contains(r.Result, c.want) || r.NumTurns != 2 {
				t.Errorf("claude's result = %+v; want the answer quoting %q after the call", r, c.want)
			}
			claudeTurn(t, front.take(), 2)
		})
	}

	t.Run("anthropic", func(t *testing.T) {
		before := balanceOf(t, s)
		r := claudeRun(t, dir, front.srv.URL, s.key, trap, "Say hi with a command.", "--allowedTools", "Bash", "--model", "anthropic/claude-agent")
		if r.Result != "The command printed: hi-from-claude" || r.NumTurns != 2 {
			t.Errorf("claude's result = %+v; want the upstream's answer quoting the command's output", r)
		}
		claudeTurn(t, front.take(), 2)
		reqs := up.take()
		if len(reqs) != 2 {
			t.Fatalf("the upstream got %d requests; want 2, one per request of the turn", len(reqs))
		}
		// The second brings back the signed thinking block before the call.
		if !bytes.Contains(reqs[1].body, []byte(`"signature":"EqQBCkgIBhABGAIiQSIGBASH"`)) || !bytes.Contains(reqs[1].body, []byte(`"id":"toolu_01Bash"`)) {
			t.Errorf("the upstream's second request lacks the signed thinking block or the call: %s", reqs[1].body)
		}
		// Claude Code's usage is the sum of the upstream's two answers.
		u := r.Usage
		if u.InputTokens != 150 || u.CacheCreationInputTokens != 2150 || u.CacheReadInputTokens != 2000 || u.OutputTokens != 70 {
			t.Errorf("claude's usage = %+v; want the upstream's, summed: 150 input, 2150 cache writes, 2000 cache reads, 70 output", u)
		}
		costs := []credits.Amount{tokenCost(30, 2000, 150, 20, 300, 30, 375, 1500), tokenCost(120, 0, 2000, 50, 300, 30, 375, 1500)}
		waitCharged(t, s, before, costs[0]+costs[1])
		rs := waitRecords(t, getenv, "anthropic/claude-agent", 2) // newest first
		for i, rec := range rs {
			if rec.Kind != credits.KindMessages || rec.Model != "anthropic/claude-agent" || rec.Cost != costs[i] || rec.Status != credits.StatusCompleted || !rec.Stream {
				t.Errorf("record %d = %+v; want a streamed messages record costing %s", i, rec, costs[i])
			}
		}
	})
}

// TestAnthropicSDK runs clients/npm/anthropic.mjs, the Anthropic SDK
// (@anthropic-ai/sdk, pinned) through the client of docs/agents.md,
// against genway serve: messages.create, messages.stream with text and
// with a tool round trip, countTokens, and the errors' classes and types
// (a 404 model, a 402 for an account without credits, a 401 key, a 400
// field), offline (proxyTrap).
func TestAnthropicSDK(t *testing.T) {
	node, dir := npmClients(t, filepath.Join("@anthropic-ai", "sdk"))
	data := t.TempDir()
	extra := map[string]string{"GENWAY_CATALOG": recordsCatalog(t)}
	s := startServer(t, data, extra)
	op, closeOp, err := openOperator(t.Context(), testEnv(data, extra))
	if err != nil {
		t.Fatal(err)
	}
	broke, _, err := op.CreateKey(t.Context(), "broke", 0, auth.Controls{})
	closeOp()
	if err != nil {
		t.Fatal(err)
	}
	trap := newProxyTrap(t)
	env := append([]string{"GENWAY_URL=" + s.base, "GENWAY_API_KEY=" + s.key, "GENWAY_BROKE_KEY=" + string(broke),
		"GENWAY_PRICED_MODEL=synthetic/priced"}, trap.env()...)
	out := string(runNode(t, node, dir, env, "anthropic.mjs"))
	trap.check(t)
	if n := strings.Count(out, "ok "); n != 5 {
		t.Errorf("node anthropic.mjs passed %d checks; want 5", n)
	}
}
