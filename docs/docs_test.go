// Package docs holds Genway's documentation: README.md at the repository's
// root and the pages beside this file. It has no code; its test keeps the
// documents honest without a network: every relative link and every
// repository path they name exists, every #anchor a link names is a heading
// of its page, README.md stays a five-minute read that names the test
// command and links every page, and no source file cites a markdown file
// the repository does not have.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// maxReadmeLines bounds README.md: what a newcomer needs, the rest in docs/.
const maxReadmeLines = 250

// documents returns README.md and docs/*.md, relative to root.
func documents(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md = %v, %v; want the documentation pages", pages, err)
	}
	docs := []string{"README.md"}
	for _, p := range pages {
		docs = append(docs, "docs/"+p)
	}
	return docs
}

func TestReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n >= maxReadmeLines {
		t.Errorf("README.md has %d lines; keep it under %d and move the detail to docs/", n, maxReadmeLines)
	}
	// .ci/run runs scripts/test.sh: the README must name the same command.
	for _, want := range []string{"scripts/test.sh", "go run ./cmd/genway serve"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not name %q", want)
		}
	}
	for _, page := range documents(t)[1:] {
		if !strings.Contains(readme, "]("+page+")") {
			t.Errorf("README.md does not link %s (its \"Read on\" list should)", page)
		}
	}
}

func TestDocumentReferences(t *testing.T) {
	entries, err := rootEntries()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range documents(t) {
		t.Run(doc, func(t *testing.T) {
			for _, p := range checkDocument(doc, entries) {
				t.Error(p)
			}
		})
	}
}

// TestCheckDocument runs the checker on a page with one of each mistake,
// so that a checker that finds nothing fails here.
func TestCheckDocument(t *testing.T) {
	entries, err := rootEntries()
	if err != nil {
		t.Fatal(err)
	}
	got := checkDocument("docs/testdata/broken.md", entries)
	want := []string{
		`docs/testdata/broken.md:3: link "../nowhere.md": no such file`,
		`docs/testdata/broken.md:4: link "../../docs/api.md#no-such-heading": no heading "no-such-heading" in docs/api.md`,
		`docs/testdata/broken.md:5: link "#missing": no heading "missing" in docs/testdata/broken.md`,
		`docs/testdata/broken.md:6: path "shared/nothing/here.go": no such file`,
		`docs/testdata/broken.md:7: path "functions/*/nothing.go": no such file`,
		`docs/testdata/broken.md:10: path "events/missing.json": no such file`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkDocument(broken.md) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Settling credits: the reconciler", "settling-credits-the-reconciler"},
		{"Veo through the Gemini API", "veo-through-the-gemini-api"},
		{"`GET /v1/jobs` and paging", "get-v1jobs-and-paging"},
		{"Tools and Responses: what they cost", "tools-and-responses-what-they-cost"},
		{"[A link](x.md) in a heading", "a-link-in-a-heading"},
		{"snake_case stays", "snake_case-stays"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q; want %q", tt.heading, got, tt.want)
		}
	}
}

// mdMention finds a markdown file's name in source text.
var mdMention = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// TestSourcesCiteRepositoryDocs wants every markdown file that a Go file,
// the template, a script or the SAM config names (a comment citing the rules
// it follows, a help text) to exist: documents outside the repository are
// not there for someone who clones it.
func TestSourcesCiteRepositoryDocs(t *testing.T) {
	self, err := filepath.Abs("docs_test.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		switch filepath.Ext(path) {
		case ".go", ".yaml", ".yml", ".toml", ".sh":
		default:
			if filepath.Base(filepath.Dir(path)) != ".ci" {
				return nil
			}
		}
		if abs, _ := filepath.Abs(path); abs == self {
			return nil // its fixtures name files that do not exist
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdMention.FindAllString(line, -1) {
				if _, err := os.Stat(filepath.Join(root, strings.TrimPrefix(m, "./"))); err != nil {
					t.Errorf("%s:%d names %s, which is not in the repository (cite README.md or a docs/ page by its path)", rel, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	// link is a markdown link or image: [text](target) or [text](target "title").
	link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is an inline code span.
	codeSpan = regexp.MustCompile("`[^`]+`")
	// pathToken is what a repository path looks like (globs allowed).
	pathToken = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*/?$`)
)

// rootEntries returns the names at the repository's root: a path is taken
// for a repository path when its first element is one of them.
func rootEntries() (map[string]bool, error) {
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read the repository root: %w", err)
	}
	m := make(map[string]bool, len(des))
	for _, de := range des {
		m[de.Name()] = true
	}
	return m, nil
}

// checkDocument returns what is wrong with the markdown file doc (a path
// relative to root): links to files or headings that do not exist, and
// repository paths (in code spans and code blocks) that do not exist.
func checkDocument(doc string, entries map[string]bool) []string {
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		at := fmt.Sprintf("%s:%d", doc, i+1)
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced { // commands and examples: their repository paths
			for _, tok := range strings.Fields(line) {
				if p := checkPath(tok, entries); p != "" {
					problems = append(problems, at+": "+p)
				}
			}
			continue
		}
		for _, span := range codeSpan.FindAllString(line, -1) {
			for _, tok := range strings.Fields(strings.Trim(span, "`")) {
				if p := checkPath(tok, entries); p != "" {
					problems = append(problems, at+": "+p)
				}
			}
		}
		// Links, outside code spans (a bracket in code is not a link).
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if p := checkLink(doc, m[1]); p != "" {
				problems = append(problems, at+": "+p)
			}
		}
	}
	return problems
}

// checkLink checks target, a link of doc: a relative path must exist, and
// a #fragment must be a heading of the markdown page it points to. Links
// with a scheme (https:, mailto:) are not checked (no network).
func checkLink(doc, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	file := doc
	if path != "" {
		file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
		if strings.HasPrefix(file, "../") {
			return fmt.Sprintf("link %q: outside the repository", target)
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			return fmt.Sprintf("link %q: no such file", target)
		}
	}
	if frag == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	anchors, err := headings(file)
	if err != nil {
		return fmt.Sprintf("link %q: %v", target, err)
	}
	if !anchors[frag] {
		return fmt.Sprintf("link %q: no heading %q in %s", target, frag, file)
	}
	return ""
}

// checkPath checks tok, a word of a code span or a code block: when it
// looks like a repository path (its first element is at the root), it
// must exist; a glob must match something. Route paths (/v1/...), URLs,
// placeholders (<name>) and Go package patterns' "/..." are left alone.
func checkPath(tok string, entries map[string]bool) string {
	tok = strings.Trim(tok, `"'(),;:[]`)
	tok = strings.TrimPrefix(tok, "./")
	tok = strings.TrimSuffix(tok, "/...")
	tok = strings.TrimRight(tok, ".") // the end of a sentence
	if !strings.Contains(tok, "/") || !pathToken.MatchString(tok) {
		return ""
	}
	first, _, _ := strings.Cut(tok, "/")
	if !entries[first] {
		return ""
	}
	if strings.Contains(tok, "*") {
		if m, _ := filepath.Glob(filepath.Join(root, tok)); len(m) == 0 {
			return fmt.Sprintf("path %q: no such file", tok)
		}
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, tok)); err != nil {
		return fmt.Sprintf("path %q: no such file", tok)
	}
	return ""
}

// headings returns the anchors of the headings of the markdown file (a
// path relative to root), as GitHub makes them.
func headings(file string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		s := slug(strings.TrimLeft(line, "#"))
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors, nil
}

// mdLinkText keeps a link's text: [text](target) is "text" in an anchor.
var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped
// (but - and _), spaces as hyphens.
func slug(heading string) string {
	heading = mdLinkText.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
