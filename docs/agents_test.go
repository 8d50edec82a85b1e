package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agentSnippets is the directory of the clients' configurations that
// docs/agents.md shows and cmd/genway's agent tests run.
const agentSnippets = "clients/npm/agents"

// TestAgentSnippets wants every file of clients/npm/agents in
// docs/agents.md twice: named by its path, and whole, byte for byte, as
// the content of one of its code blocks. The tests run the clients with
// those files, so the page shows what is tested.
func TestAgentSnippets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs/agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	blocks := codeBlocks(page)
	files, err := os.ReadDir(filepath.Join(root, agentSnippets))
	if err != nil || len(files) == 0 {
		t.Fatalf("ReadDir(%s) = %d files, %v; want the agents' configurations", agentSnippets, len(files), err)
	}
	for _, f := range files {
		path := agentSnippets + "/" + f.Name()
		want, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page, "`"+path+"`") {
			t.Errorf("docs/agents.md does not name %s", path)
		}
		found := false
		for _, c := range blocks {
			found = found || c == string(want)
		}
		if !found {
			t.Errorf("docs/agents.md has no code block equal to %s:\n%s", path, want)
		}
	}
}

func TestCodeBlocks(t *testing.T) {
	page := "text\n```toml\na = 1\n\nb = 2\n```\nmore\n```\nx\n```\n"
	got := codeBlocks(page)
	if len(got) != 2 || got[0] != "a = 1\n\nb = 2\n" || got[1] != "x\n" {
		t.Errorf("codeBlocks(%q) = %q; want the two blocks' contents", page, got)
	}
}

// codeBlocks returns the contents of the fenced code blocks of a markdown
// page, each line ending in a newline.
func codeBlocks(page string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &strings.Builder{}
			} else {
				blocks = append(blocks, cur.String())
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}
