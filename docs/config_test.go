package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// genwayVar finds a GENWAY_ variable's name in a page; quotedVar, one
// quoted in Go source.
var (
	genwayVar = regexp.MustCompile(`GENWAY_[A-Z0-9_]*[A-Z0-9]`)
	quotedVar = regexp.MustCompile(`"(GENWAY_[A-Z0-9_]*[A-Z0-9])"`)
)

// TestConfigurationTable wants every GENWAY_ variable that the Go code
// reads (a quoted "GENWAY_..." outside tests) in the configuration table
// of docs/operations.md, or in docs/routing.md's for the routing policy's, and
// every variable of that table read by the code: an operator finds each
// setting there, and none that does nothing.
func TestConfigurationTable(t *testing.T) {
	documented := map[string]bool{}
	for _, page := range []struct{ file, section string }{{"docs/operations.md", "## Configuration"}, {"docs/routing.md", ""}} {
		b, err := os.ReadFile(filepath.Join(root, page.file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if page.section != "" {
			_, after, ok := strings.Cut(text, "\n"+page.section+"\n")
			if !ok {
				t.Fatalf("%s has no %q section", page.file, page.section)
			}
			text, _, _ = strings.Cut(after, "\n## ")
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "| `GENWAY_") || strings.HasPrefix(line, "| `<KEY>") {
				for _, v := range genwayVar.FindAllString(line, -1) {
					documented[v] = true
				}
			}
		}
	}
	read := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".aws-sam", ".genway", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(path) != ".go" || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range quotedVar.FindAllStringSubmatch(string(b), -1) {
			read[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale []string
	for v := range read {
		if !documented[v] {
			missing = append(missing, v)
		}
	}
	for v := range documented {
		if !read[v] {
			stale = append(stale, v)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	if len(missing) > 0 {
		t.Errorf("read by the code, not in docs/operations.md's Configuration table (or docs/routing.md's): %s", strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("in a configuration table, read by no code: %s", strings.Join(stale, ", "))
	}
	if len(read) < 10 {
		t.Errorf("found %d GENWAY_ variables in the code; the walk is broken", len(read))
	}
}
