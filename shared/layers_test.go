// Package shared_test holds the test of the layout of shared/: the
// domain packages at shared/<noun>, the vendors' adapters under
// providers/, the AWS adapters under aws/, the local ones under local/ and
// the HTTP edge under transport/. The rules it checks are the style
// guide's, read from the import graph that `go list` gives:
//
//   - the domain imports nothing under providers/, aws/, local/ or
//     transport/, directly or not, and no AWS or vendor SDK;
//   - aws-lambda-go is imported only by the mains (functions/*, and
//     cmd/genway, which plays Lambda's event source mappings for the
//     AWS-backed local mode) and the Lambda adapters (aws/lambdahttp,
//     aws/lambdaevents);
//   - adapters do not import each other: a package under providers/, aws/
//     or local/ imports no package of another adapter, except the helpers
//     of its own folder (providers/sse, providers/mediafetch) and the one
//     assembler, providers/upstreams, which builds every vendor's provider
//     (and reads Bedrock's AWS configuration through aws/awsenv);
//   - the edge (transport/) imports no adapter;
//   - app (and app/vendors, its builder of the vendors' settings), the
//     composition root, is the one part of shared/ that may import the
//     domain and every adapter together; only the mains (cmd/,
//     functions/) import it.
package shared_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/genway/genway/"

// role is where a package of the module sits in the plan.
type role int

const (
	other      role = iota // cmd/, functions/, docs/: the mains and their tests
	domain                 // shared/<noun>
	provider               // shared/providers/...
	awsAdapter             // shared/aws/...
	local                  // shared/local/...
	transport              // shared/transport/...
	root                   // shared/app: the composition root
)

// roleOf says where a module path (without the module prefix) sits.
func roleOf(p string) role {
	rest, ok := strings.CutPrefix(p, "shared/")
	if !ok {
		return other
	}
	switch strings.SplitN(rest, "/", 2)[0] {
	case "app":
		return root
	case "providers":
		return provider
	case "aws":
		return awsAdapter
	case "local":
		return local
	case "transport":
		return transport
	}
	return domain
}

// adapter is the adapter a package of providers/, aws/ or local/ belongs
// to (its folder there: "providers/openai"), or "" for any other.
func adapter(p string) string {
	parts := strings.Split(strings.TrimPrefix(p, "shared/"), "/")
	if len(parts) < 2 || roleOf(p) == domain || roleOf(p) == transport || roleOf(p) == root || roleOf(p) == other {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// helpers are the adapters' shared helpers, and what may import them.
var helpers = map[string]string{
	"providers/sse":        "providers/",
	"providers/mediafetch": "providers/",
}

// assemblers may import the adapters they assemble.
var assemblers = map[string][]string{
	"providers/upstreams": {"providers/", "aws/awsenv"},
}

// lambdaOK are the packages that may import aws-lambda-go.
func lambdaOK(p string) bool {
	return strings.HasPrefix(p, "functions/") || p == "cmd/genway" ||
		p == "shared/aws/lambdahttp" || p == "shared/aws/lambdaevents"
}

// sdkPrefixes are the SDKs the domain must not reach.
var sdkPrefixes = []string{"github.com/aws/", "github.com/openai/", "github.com/hajimehoshi/"}

// violations checks the import graph (module paths without the module
// prefix for the module's own packages, full paths for others; direct
// imports only) and returns one line per broken rule, sorted.
func violations(graph map[string][]string) []string {
	var out []string
	for p, imps := range graph {
		if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
			continue // a package outside the module
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "github.com/aws/aws-lambda-go") && !lambdaOK(p) {
				out = append(out, fmt.Sprintf("%s imports %s: aws-lambda-go belongs to the mains and the Lambda adapters", p, imp))
			}
			if !strings.HasPrefix(imp, "shared/") {
				continue
			}
			r := roleOf(imp)
			if r == root && roleOf(p) != other && roleOf(p) != root {
				out = append(out, fmt.Sprintf("%s imports %s: only the mains import the composition root", p, imp))
			}
			switch roleOf(p) {
			case transport:
				if r == provider || r == awsAdapter || r == local {
					out = append(out, fmt.Sprintf("%s imports %s: the edge imports no adapter", p, imp))
				}
			case provider, awsAdapter, local:
				from, to := adapter(p), adapter(imp)
				if to == "" || to == from {
					continue
				}
				if pre, ok := helpers[to]; ok && strings.HasPrefix(from, pre) {
					continue
				}
				if slices.ContainsFunc(assemblers[from], func(pre string) bool { return strings.HasPrefix(to, pre) }) {
					continue
				}
				out = append(out, fmt.Sprintf("%s imports %s: adapters do not import each other", p, imp))
			}
		}
	}
	// The domain, with everything it imports, directly or not.
	for p := range graph {
		if roleOf(p) != domain {
			continue
		}
		seen := map[string]bool{}
		var walk func(q string, path []string)
		walk = func(q string, path []string) {
			for _, imp := range graph[q] {
				if seen[imp] {
					continue
				}
				seen[imp] = true
				via := append(slices.Clip(path), imp)
				bad := ""
				switch {
				case strings.HasPrefix(imp, "shared/") && roleOf(imp) != domain:
					bad = "the domain imports no adapter and not the edge"
				case slices.ContainsFunc(sdkPrefixes, func(pre string) bool { return strings.HasPrefix(imp, pre) }):
					bad = "the domain imports no SDK"
				}
				if bad != "" {
					out = append(out, fmt.Sprintf("%s imports %s (via %s): %s", p, imp, strings.Join(via, " -> "), bad))
					continue
				}
				walk(imp, via)
			}
		}
		walk(p, nil)
	}
	sort.Strings(out)
	return out
}

// importGraph reads the module's import graph (non-test imports, with
// the packages outside the module they import, and theirs).
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		p := strings.TrimPrefix(f[0], module)
		imps := make([]string, 0, len(f)-1)
		for _, imp := range f[1:] {
			imps = append(imps, strings.TrimPrefix(imp, module))
		}
		graph[p] = imps
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return graph
}

func TestLayers(t *testing.T) {
	graph := importGraph(t)
	for _, want := range []string{"shared/chat", "shared/providers/openai", "shared/aws/dynamostore", "shared/local/localstore", "shared/transport/httpapi", "cmd/genway"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("go list did not list %s; the test reads the wrong tree", want)
		}
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestViolations shows the rules catch what they are for, on small graphs.
func TestViolations(t *testing.T) {
	tests := []struct {
		name  string
		graph map[string][]string
		want  []string
	}{
		{"clean", map[string][]string{
			"shared/chat":                  {"shared/credits", "net/http"},
			"shared/credits":               nil,
			"shared/providers/openai":      {"shared/chat", "shared/providers/sse", "github.com/openai/openai-go/v3"},
			"shared/providers/upstreams":   {"shared/providers/openai", "shared/aws/awsenv"},
			"shared/aws/lambdahttp":        {"shared/transport/httpapi", "github.com/aws/aws-lambda-go/events"},
			"shared/transport/httpapi":     {"shared/chat"},
			"functions/chat":               {"shared/app", "shared/providers/upstreams", "github.com/aws/aws-lambda-go/lambda"},
			"shared/providers/openai/fake": {"shared/providers/openai"},
			"shared/app":                   {"shared/chat", "shared/providers/upstreams", "shared/aws/dynamostore", "shared/local/localstore", "shared/transport/httpapi"},
			"shared/app/vendors":           {"shared/app", "shared/providers/upstreams"},
			"cmd/genway":                   {"shared/app"},
		}, nil},
		{"a package below the mains imports the composition root", map[string][]string{
			"shared/chat":              {"shared/app"},
			"shared/aws/dynamostore":   {"shared/app"},
			"shared/transport/httpapi": {"shared/app"},
			"shared/app":               nil,
		}, []string{
			"shared/aws/dynamostore imports shared/app: only the mains import the composition root",
			"shared/chat imports shared/app (via shared/app): the domain imports no adapter and not the edge",
			"shared/chat imports shared/app: only the mains import the composition root",
			"shared/transport/httpapi imports shared/app: only the mains import the composition root",
		}},
		{"domain imports an adapter", map[string][]string{
			"shared/chat":             {"shared/providers/openai"},
			"shared/providers/openai": nil,
		}, []string{"shared/chat imports shared/providers/openai (via shared/providers/openai): the domain imports no adapter and not the edge"}},
		{"domain reaches an SDK through another domain package", map[string][]string{
			"shared/chat":    {"shared/credits"},
			"shared/credits": {"github.com/aws/aws-sdk-go-v2/aws"},
		}, []string{
			"shared/chat imports github.com/aws/aws-sdk-go-v2/aws (via shared/credits -> github.com/aws/aws-sdk-go-v2/aws): the domain imports no SDK",
			"shared/credits imports github.com/aws/aws-sdk-go-v2/aws (via github.com/aws/aws-sdk-go-v2/aws): the domain imports no SDK",
		}},
		{"domain imports the edge", map[string][]string{
			"shared/jobs":              {"shared/transport/httpapi"},
			"shared/transport/httpapi": nil,
		}, []string{"shared/jobs imports shared/transport/httpapi (via shared/transport/httpapi): the domain imports no adapter and not the edge"}},
		{"adapters import each other", map[string][]string{
			"shared/providers/fal":     {"shared/providers/replicate"},
			"shared/aws/dynamostore":   {"shared/aws/sqsqueue"},
			"shared/local/localstore":  {"shared/aws/dynamostore"},
			"shared/aws/sqsqueue":      {"shared/providers/sse"},
			"shared/providers/sse":     nil,
			"shared/providers/replica": nil,
		}, []string{
			"shared/aws/dynamostore imports shared/aws/sqsqueue: adapters do not import each other",
			"shared/aws/sqsqueue imports shared/providers/sse: adapters do not import each other",
			"shared/local/localstore imports shared/aws/dynamostore: adapters do not import each other",
			"shared/providers/fal imports shared/providers/replicate: adapters do not import each other",
		}},
		{"the edge imports an adapter", map[string][]string{
			"shared/transport/console": {"shared/local/localstore"},
		}, []string{"shared/transport/console imports shared/local/localstore: the edge imports no adapter"}},
		{"aws-lambda-go outside the mains and the Lambda adapters", map[string][]string{
			"shared/aws/s3media":       {"github.com/aws/aws-lambda-go/events"},
			"shared/transport/httpapi": {"github.com/aws/aws-lambda-go/lambdaurl"},
		}, []string{
			"shared/aws/s3media imports github.com/aws/aws-lambda-go/events: aws-lambda-go belongs to the mains and the Lambda adapters",
			"shared/transport/httpapi imports github.com/aws/aws-lambda-go/lambdaurl: aws-lambda-go belongs to the mains and the Lambda adapters",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.graph)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
