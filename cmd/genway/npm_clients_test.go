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
// responses.create whole and streamed with a function call round trip) and
// the Vercel AI SDK (ai with @ai-sdk/openai's default provider, which
// speaks the Responses API, and @ai-sdk/openai-compatible: generateText
// and streamText with a tool, generateObject and streamObject). The
// scripts are in clients/npm; scripts/test.sh installs their packages
// (npm ci). Without node or the packages the test skips, in CI it fails.
func TestNPMClients(t *testing.T) {
	dir, err := filepath.Abs("../../clients/npm")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@ai-sdk", "openai-compatible"))
	}
	if err != nil {
		msg := "node and the npm client packages are needed (scripts/test.sh runs npm ci in clients/npm): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := startServer(t, t.TempDir(), nil)
	for _, script := range []string{"openai.mjs", "ai-sdk.mjs"} {
		t.Run(script, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, script)
			cmd.Dir = dir
			// Only loopback: no proxy, and the key of this server.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_PROXY=*",
				"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key}
			out, err := cmd.CombinedOutput()
			t.Logf("%s:\n%s", script, out)
			if err != nil {
				t.Fatalf("node %s: %v", script, err)
			}
			if strings.Count(string(out), "ok ") < 5 {
				t.Errorf("node %s reported too few checks", script)
			}
		})
	}
}
