package functions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The events in events/ are what `sam local invoke -e` feeds each function
// and what this package's tests run each bootstrap with: every function of
// the template has one, docs/aws.md says which to use, and a test here
// reads each.

// awsDoc is the page that lists a `sam local invoke` line per event.
const awsDoc = "docs/aws.md"

// samInvokeRE is a `sam local invoke` line of docs/aws.md.
var samInvokeRE = regexp.MustCompile(`sam local invoke (\w+) -e events/([\w.-]+\.json)`)

// readEventRE is a test's use of an event file (readEvent(t, "x.json" ...)).
var readEventRE = regexp.MustCompile(`readEvent\(t, "([\w.-]+\.json)"`)

// nonAPIEvents are the events of the event-source functions, which name no
// route: the function each is for.
var nonAPIEvents = map[string]string{
	"worker.json":       "WorkerFunction",
	"credits.json":      "CreditsFunction",
	"jobs-sweeper.json": "JobsSweeperFunction",
	"webhooks.json":     "WebhooksFunction",
}

// checkEvents returns what is missing: a function of tpl with no event in
// docs (the text of docs/aws.md), a documented event that is not a file of
// events (file name -> content) or that goes to another function than its
// route's, an event no test reads (tests: the test sources' text).
func checkEvents(tpl map[string]any, docs string, events map[string][]byte, tests string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	routes := map[string]string{} // "POST /v1/jobs" -> function
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		for _, ev := range mapAt(tpl, "Resources", fn, "Properties", "Events") {
			if mapAt(ev)["Type"] == "Api" {
				p := mapAt(ev, "Properties")
				routes[strings.ToUpper(fmt.Sprint(p["Method"]))+" "+fmt.Sprint(p["Path"])] = fn
			}
		}
	}
	// forFunction returns the function an event file is for.
	forFunction := func(name string) string {
		if fn, ok := nonAPIEvents[name]; ok {
			return fn
		}
		var ev struct {
			Resource   string `json:"resource"`
			HTTPMethod string `json:"httpMethod"`
		}
		if err := json.Unmarshal(events[name], &ev); err != nil {
			return ""
		}
		if fn := routes[ev.HTTPMethod+" "+ev.Resource]; fn != "" {
			return fn
		}
		return routes["ANY "+ev.Resource]
	}
	documented := map[string][]string{} // function -> its events in the docs
	for _, m := range samInvokeRE.FindAllStringSubmatch(docs, -1) {
		fn, name := m[1], m[2]
		if _, ok := events[name]; !ok {
			bad("docs/aws.md: sam local invoke %s -e events/%s: no such file", fn, name)
			continue
		}
		if want := forFunction(name); want != fn {
			bad("docs/aws.md: events/%s goes to %s, not %q", name, fn, want)
		}
		documented[fn] = append(documented[fn], name)
	}
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		if len(documented[fn]) == 0 {
			bad("%s: no `sam local invoke %s -e events/...` in docs/aws.md (add an event for it to events/)", fn, fn)
		}
	}
	read := map[string]bool{}
	for _, m := range readEventRE.FindAllStringSubmatch(tests, -1) {
		read[m[1]] = true
	}
	names := make([]string, 0, len(events))
	for name := range events {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "env.json" {
			continue
		}
		if forFunction(name) == "" {
			bad("events/%s: no function serves it", name)
		}
		if !read[name] {
			bad("events/%s: no test in functions/ runs a function with it", name)
		}
	}
	return problems
}

// loadEvents returns the files of events/ by name.
func loadEvents(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// testSources returns the text of this package's test files.
func testSources(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}

func TestEvents(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	docs, err := os.ReadFile(filepath.Join(repoRoot, awsDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkEvents(tpl, string(docs), loadEvents(t), testSources(t)) {
		t.Error(p)
	}
}

// TestEventsCheckFails removes an event, a doc line and a test's use of a
// file, and expects checkEvents to say so.
func TestEventsCheckFails(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	docsB, err := os.ReadFile(filepath.Join(repoRoot, awsDoc))
	if err != nil {
		t.Fatal(err)
	}
	docs, events, tests := string(docsB), loadEvents(t), testSources(t)
	without := func(m map[string][]byte, name string) map[string][]byte {
		out := map[string][]byte{}
		for k, v := range m {
			if k != name {
				out[k] = v
			}
		}
		return out
	}
	cases := []struct {
		name        string
		docs, tests string
		events      map[string][]byte
		want        string
	}{
		{"the media function without events", regexp.MustCompile(`sam local invoke MediaFunction[^\n]*\n`).ReplaceAllString(docs, ""), tests,
			without(without(events, "images.json"), "speech.json"), "MediaFunction: no `sam local invoke MediaFunction"},
		{"a documented event that is gone", docs, tests, without(events, "videos-get.json"), "events/videos-get.json: no such file"},
		{"an event for the wrong function", strings.Replace(docs, "invoke MediaFunction -e events/images.json", "invoke ChatFunction -e events/images.json", 1),
			tests, events, "events/images.json goes to ChatFunction"},
		{"an event no test runs", docs, strings.ReplaceAll(tests, "\"speech.json\"", "\"x.json\""), events,
			"events/speech.json: no test in functions/ runs"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			problems := checkEvents(tpl, tt.docs, tt.events, tt.tests)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkEvents(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}
