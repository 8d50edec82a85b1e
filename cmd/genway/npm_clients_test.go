package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNPMClients runs the official clients, unmodified, against genway
// serve: the openai npm SDK (chat tool calling, structured output,
// responses.create whole and streamed with a function call round trip,
// usage details and cost) and
// the Vercel AI SDK (ai with @ai-sdk/openai's default provider, which
// speaks the Responses API, and @ai-sdk/openai-compatible: generateText
// and streamText with a tool, generateObject and streamObject; the
// reasoning and cached input tokens it reads from chat usage). The
// scripts are in clients/npm; scripts/test.sh installs their packages
// (npm ci). Without node or the packages the test skips, in CI it fails.
func TestNPMClients(t *testing.T) {
	node, dir := npmClients(t, filepath.Join("@ai-sdk", "openai-compatible"))
	s := startServer(t, t.TempDir(), nil)
	for _, script := range []string{"openai.mjs", "ai-sdk.mjs"} {
		t.Run(script, func(t *testing.T) {
			out := runNode(t, node, dir, []string{"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key, "GENWAY_API_KEY=" + s.key}, script)
			if strings.Count(string(out), "ok ") < 5 {
				t.Errorf("node %s reported too few checks", script)
			}
		})
	}
}

// npmClients returns node and the clients/npm directory, whose
// node_modules must hold need (a package directory or file). Without node
// or the packages the test skips; in CI (CI set) it fails.
func npmClients(t *testing.T, need string) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../../clients/npm")
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", need))
	}
	if err != nil {
		msg := "node and the npm client packages are needed (scripts/test.sh runs npm ci in clients/npm): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, dir
}

// runNode runs node on script (relative to dir) with only loopback in
// reach: no proxy, no inherited secrets, just PATH, a fresh HOME and env.
// It returns stdout (stderr is logged) and fails the test if node fails.
func runNode(t *testing.T, node, dir string, env []string, script string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_PROXY=*"}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("node %s:\n%s%s", script, out, stderr.String())
	if err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
	return out
}
