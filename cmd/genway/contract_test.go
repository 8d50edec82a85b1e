package main

// The harness of the vendor contract tests (vendors_contract_test.go):
// each media vendor's official JavaScript SDK, pinned in
// clients/npm/package.json, makes the calls our adapter makes, against
// the fake vendors of vendors_test.go on loopback, which record every
// request. The two halves:
//   - requests: the SDK and our adapter each run the same job against a
//     fresh fake; their requests, step by step, are compared (method,
//     path, query, the header carrying the key and its scheme, the JSON
//     body field by field); every difference is either fixed or listed,
//     with its reason, in the vendor's table of known differences, and a
//     listed difference that is no longer seen fails too.
//   - responses: the SDK reads the fake's answers (status sequences,
//     results, errors) and reports what it understood, which the test
//     checks, with our adapter's reading of the same answers.
// The scripts are in clients/npm/vendors; contract.mjs there says how they
// take their calls and report.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
)

// wireRequest is one request as a fake vendor received it.
type wireRequest struct {
	Method, Path string
	Query        url.Values
	Header       http.Header
	Body         []byte
}

// pinnedSDK returns node and the clients/npm directory after checking
// that the vendor SDK pkg installed in node_modules is version, the one
// clients/npm/package.json pins (an alias such as genai2 pins
// "npm:@google/genai@2.32.0"), so that a silent upgrade fails loudly.
func pinnedSDK(t *testing.T, pkg, version string) (node, dir string) {
	t.Helper()
	node, dir = npmClients(t, filepath.Join(pkg, "package.json"))
	var installed struct {
		Version string `json:"version"`
	}
	readJSONFile(t, filepath.Join(dir, "node_modules", pkg, "package.json"), &installed)
	if installed.Version != version {
		t.Fatalf("node_modules/%s is version %s; the contract test pins %s", pkg, installed.Version, version)
	}
	var manifest struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSONFile(t, filepath.Join(dir, "package.json"), &manifest)
	if spec := manifest.Dependencies[pkg]; spec != version && !strings.HasSuffix(spec, "@"+version) {
		t.Fatalf("clients/npm/package.json pins %s at %q; the contract test pins exactly %s", pkg, spec, version)
	}
	t.Logf("%s %s (pinned)", pkg, installed.Version)
	return node, dir
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sdkCall is one call a vendor script makes, against its own fake vendor
// at Base with Key; Args are in the SDK's own terms (see the script).
type sdkCall struct {
	Name string         `json:"name"`
	Base string         `json:"base"`
	Key  string         `json:"key"`
	Args map[string]any `json:"args"`
}

// sdkReport is what the SDK read for one call: a value, or the error it
// threw; and the requests the SDK made (recorded by its fake).
type sdkReport struct {
	Name     string         `json:"name"`
	Value    map[string]any `json:"value"`
	Error    *sdkError      `json:"error"`
	Requests []wireRequest  `json:"-"`
}

// sdkError is an error an SDK threw: its class, the HTTP status it
// carries, its message and the error body it parsed.
type sdkError struct {
	Class   string `json:"class"`
	Status  int    `json:"status"`
	Message string `json:"message"`
	Body    any    `json:"body"`
}

// runSDK runs clients/npm/vendors/script with calls and returns what the
// SDK reported, by call name; every call must report.
func runSDK(t *testing.T, node, dir, script string, calls []sdkCall) map[string]sdkReport {
	t.Helper()
	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	out := runNode(t, node, dir, []string{"CONTRACT_CALLS=" + string(b)}, filepath.Join("vendors", script))
	reports := map[string]sdkReport{}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var r sdkReport
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s printed %q: %v", script, line, err)
		}
		reports[r.Name] = r
	}
	for _, c := range calls {
		if _, ok := reports[c.Name]; !ok {
			t.Fatalf("%s did not report call %q; it printed:\n%s", script, c.Name, out)
		}
	}
	return reports
}

// wireDiff lists how our request differs from the SDK's, one line per
// difference: method, path, each query parameter, the header carrying
// key (and its scheme), the body's media type and each JSON field by
// dotted path ("input.prompt", "sections[0].lines[1]").
func wireDiff(sdk, ours wireRequest, key string) []string {
	var d []string
	differ := func(what, s, o string) {
		if s != o {
			d = append(d, fmt.Sprintf("%s: sdk %s, ours %s", what, s, o))
		}
	}
	differ("method", sdk.Method, ours.Method)
	differ("path", sdk.Path, ours.Path)
	for _, k := range unionKeys(sdk.Query, ours.Query) {
		differ(fmt.Sprintf("query %q", k), quoted(sdk.Query[k]), quoted(ours.Query[k]))
	}
	differ("auth", keyCarrier(sdk, key), keyCarrier(ours, key))
	if p, q := sdk.Header.Get("Prefer"), ours.Header.Get("Prefer"); p != "" || q != "" { // Replicate's wait
		differ("prefer", quoted(sdk.Header.Values("Prefer")), quoted(ours.Header.Values("Prefer")))
	}
	if len(sdk.Body) > 0 || len(ours.Body) > 0 {
		differ("content-type", mediaType(sdk.Header), mediaType(ours.Header))
		sf, of := flatJSON(sdk.Body), flatJSON(ours.Body)
		for _, k := range unionKeys(sf, of) {
			differ(fmt.Sprintf("body %q", k), orAbsent(sf, k), orAbsent(of, k))
		}
	}
	return d
}

// onlyIn lists the header names in a and not in b, for the log: the
// comparison leaves other headers than the key's and Content-Type alone
// (user agents, SDK telemetry, defaults), and the log says which.
func onlyIn(a, b http.Header) []string {
	var names []string
	for k := range a {
		if _, ok := b[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

func unionKeys[V any](a, b map[string]V) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func quoted(vs []string) string {
	if vs == nil {
		return "absent"
	}
	return fmt.Sprintf("%q", strings.Join(vs, ","))
}

func orAbsent(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return "absent"
}

// keyCarrier says where a request carries key: "<Header>: <value with the
// key as KEY>" for each header holding it, and "query <name>" for a query
// parameter holding it (which no vendor call should need).
func keyCarrier(r wireRequest, key string) string {
	var where []string
	for name, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, key) {
				where = append(where, name+": "+strings.ReplaceAll(v, key, "KEY"))
			}
		}
	}
	for name, vs := range r.Query {
		if slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, key) }) {
			where = append(where, "query "+name)
		}
	}
	if len(where) == 0 {
		return "none"
	}
	sort.Strings(where)
	return strings.Join(where, "; ")
}

func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return "none"
	}
	return mt
}

// flatJSON flattens a JSON document to its leaves by dotted path, each
// leaf as JSON; an empty object or list is a leaf ({} or []). A body that
// is not JSON is one leaf, "", holding it quoted.
func flatJSON(b []byte) map[string]string {
	out := map[string]string{}
	if len(bytes.TrimSpace(b)) == 0 {
		return out
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		out[""] = fmt.Sprintf("%q", b)
		return out
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[path] = "{}"
			}
			for k, e := range x {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			if len(x) == 0 {
				out[path] = "[]"
			}
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			leaf, _ := json.Marshal(x)
			out[path] = string(leaf)
		}
	}
	walk("", doc)
	return out
}

// wireCase is one request comparison: the SDK's requests and ours for the
// same job, each against a fresh fake.
type wireCase struct {
	name      string
	sdk, ours []wireRequest
}

// compareWire compares the SDK's requests with ours, step by step (step
// names a request: "submit", "status", ...; the first request of each
// step is compared). Each difference must be in known (difference ->
// why it is right), which is checked for stale entries too: every known
// difference must be seen in some case.
func compareWire(t *testing.T, key string, step func(wireRequest) string, known map[string]string, cases []wireCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range cases {
		sdk, order := firstByStep(c.sdk, step)
		ours, ourOrder := firstByStep(c.ours, step)
		for _, s := range ourOrder {
			if !slices.Contains(order, s) {
				order = append(order, s)
			}
		}
		for _, s := range order {
			sr, inSDK := sdk[s]
			or, inOurs := ours[s]
			var diffs []string
			switch {
			case !inSDK:
				diffs = []string{"only ours makes this request"}
			case !inOurs:
				diffs = []string{"only the SDK makes this request"}
			default:
				diffs = wireDiff(sr, or, key)
			}
			if len(diffs) == 0 {
				t.Logf("%s %s: %s %s matches the SDK's (query, auth, %d body fields); headers only the SDK sends: %v",
					c.name, s, or.Method, or.Path, len(flatJSON(or.Body)), onlyIn(sr.Header, or.Header))
			}
			for _, d := range diffs {
				d = s + ": " + d
				if why, ok := known[d]; ok {
					seen[d] = true
					t.Logf("%s: known difference %s (%s)", c.name, d, why)
					continue
				}
				t.Errorf("%s: unexplained difference from the SDK: %s", c.name, d)
			}
		}
	}
	for d := range known {
		if !seen[d] {
			t.Errorf("known difference no longer seen (drop it from the table): %s", d)
		}
	}
}

// firstByStep returns the first request of each step, and the steps in
// the order they were first seen.
func firstByStep(rs []wireRequest, step func(wireRequest) string) (map[string]wireRequest, []string) {
	m := map[string]wireRequest{}
	var order []string
	for _, r := range rs {
		s := step(r)
		if _, ok := m[s]; !ok {
			m[s] = r
			order = append(order, s)
		}
	}
	return m, order
}

// adapterRun is how our adapter ended a job or an image request: "ok"
// with the media (the first image, and all of them in Images), or
// "transient" or a ProviderError's code with the error; Pending counts
// the polls answered "not yet" (jobs); Requests are those it made
// (recorded by its fake).
type adapterRun struct {
	Outcome     string
	Err         error
	Pending     int
	ContentType string
	Media       []byte
	Images      []images.Image
	Usage       *images.Usage
	Requests    []wireRequest
}

// runAdapter runs j through p as the worker does: Start, then Poll (at
// most 20 times) until the job ends, and reads the media.
func runAdapter(t *testing.T, p jobs.Provider, m *catalog.Model, j jobs.Job) adapterRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	step, err := p.Start(ctx, m, &j)
	var res *jobs.Result
	var run adapterRun
	switch {
	case err != nil:
	case step.Result != nil:
		res = step.Result
	default:
		j.Handle = step.Handle
		for i := 0; i < 20 && res == nil && err == nil; i++ {
			if res, err = p.(jobs.Poller).Poll(ctx, m, &j); res == nil && err == nil {
				run.Pending++
			}
		}
	}
	if outcome(t, &run, j.Model, err) {
		return run
	}
	switch {
	case res == nil:
		run.Outcome = "pending"
	default:
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%s: read result: %v", j.Model, err)
		}
		run.Outcome, run.ContentType, run.Media = "ok", res.ContentType, b
	}
	return run
}

// outcome sets run's outcome for a call of model that failed with err
// ("transient" or a ProviderError's code) and reports whether it failed.
func outcome(t *testing.T, run *adapterRun, model string, err error) bool {
	t.Helper()
	var pe *jobs.ProviderError
	var te *jobs.TransientError
	switch {
	case errors.As(err, &te):
		run.Outcome, run.Err = "transient", err
	case errors.As(err, &pe):
		run.Outcome, run.Err = pe.Code, err
	case err != nil:
		t.Fatalf("%s: unclassified error %v", model, err)
	}
	return err != nil
}

// runImageAdapter runs an image request through p as the images service
// does (one Generate, polls within it).
func runImageAdapter(t *testing.T, p images.Provider, m *catalog.Model, params images.Params) adapterRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := p.Generate(ctx, m, &params)
	var run adapterRun
	if outcome(t, &run, m.ID, err) {
		return run
	}
	if len(out.Images) == 0 {
		t.Fatalf("%s: Generate answered no image and no error", m.ID)
	}
	run.Outcome, run.Images, run.Usage = "ok", out.Images, out.Usage
	run.ContentType, run.Media = out.Images[0].ContentType, out.Images[0].Data
	return run
}

// recordingFake returns a fake vendor that records its requests.
func recordingFake(v *fakeVendor) *fakeVendor {
	v.mu.Lock()
	v.record = true
	v.mu.Unlock()
	return v
}

// contractCase is one job that the SDK and our adapter each run, against
// a fresh fake of their own.
type contractCase struct {
	name  string
	model string // the catalog model our adapter runs
	// upstream, if set, replaces the model's upstream id (a form the
	// catalog has no model of).
	upstream string
	input    jobs.Input     // the job, for our adapter
	image    images.Params  // or the image request, for an image adapter
	sdk      map[string]any // the same call in the SDK's own terms (see the script)
	badKey   bool           // both use a wrong key
	// wire: compare the two sides' requests (the requests half).
	wire bool
	// check checks what the SDK read and how our adapter ended (the
	// responses half).
	check func(t *testing.T, sdk sdkReport, ours adapterRun)
}

// vendorContract is one vendor's contract test.
type vendorContract struct {
	pkg, version string // the SDK, as pinned
	script       string // in clients/npm/vendors
	key          string
	fake         func(testing.TB) *fakeVendor
	adapter      func(base, key string) jobs.Provider
	// images, instead of adapter, makes our image adapter: the cases are
	// image requests.
	images func(base, key string) images.Provider
	// step names a request ("submit", "status", ...) for compareWire.
	step func(wireRequest) string
	// known are the justified differences from the SDK's requests, as
	// compareWire prints them, with their reasons.
	known map[string]string
	cases []contractCase
}

// run runs every case through the SDK (one node process) and through our
// adapter, then checks both halves.
func (vc vendorContract) run(t *testing.T) {
	node, dir := pinnedSDK(t, vc.pkg, vc.version)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	sdkFakes := make([]*fakeVendor, len(vc.cases))
	ourFakes := make([]*fakeVendor, len(vc.cases))
	var calls []sdkCall
	for i, c := range vc.cases {
		sdkFakes[i], ourFakes[i] = recordingFake(vc.fake(t)), recordingFake(vc.fake(t))
		calls = append(calls, sdkCall{Name: c.name, Base: sdkFakes[i].srv.URL, Key: vc.caseKey(c), Args: c.sdk})
	}
	reports := runSDK(t, node, dir, vc.script, calls)
	ours := make([]adapterRun, len(vc.cases))
	var wire []wireCase
	for i, c := range vc.cases {
		m, ok := cat.Model(c.model)
		if !ok {
			t.Fatalf("%s: no model %q in the catalog", c.name, c.model)
		}
		if c.upstream != "" {
			copied := *m
			copied.Upstream = c.upstream
			m = &copied
		}
		if vc.images != nil {
			ours[i] = runImageAdapter(t, vc.images(ourFakes[i].srv.URL, vc.caseKey(c)), m, c.image)
		} else {
			j := jobs.Job{ID: "job_contract_" + strings.ReplaceAll(c.name, " ", "_"), Type: m.Type, Model: m.ID, Input: c.input}
			ours[i] = runAdapter(t, vc.adapter(ourFakes[i].srv.URL, vc.caseKey(c)), m, j)
		}
		ours[i].Requests = ourFakes[i].requests()
		r := reports[c.name]
		r.Requests = sdkFakes[i].requests()
		reports[c.name] = r
		if c.wire {
			wire = append(wire, wireCase{name: c.name, sdk: sdkFakes[i].requests(), ours: ourFakes[i].requests()})
		}
	}
	t.Run("requests", func(t *testing.T) {
		compareWire(t, vc.key, vc.step, vc.known, wire)
	})
	t.Run("responses", func(t *testing.T) {
		for i, c := range vc.cases {
			t.Run(c.name, func(t *testing.T) {
				r := reports[c.name]
				t.Logf("the SDK read: value %v, error %+v; our adapter: %s %v (%d pending polls)", r.Value, r.Error, ours[i].Outcome, ours[i].Err, ours[i].Pending)
				c.check(t, r, ours[i])
			})
		}
	})
}

func (vc vendorContract) caseKey(c contractCase) string {
	if c.badKey {
		return "not-the-configured-key"
	}
	return vc.key
}

// sdkValue returns what the SDK read, failing if it threw.
func sdkValue(t *testing.T, r sdkReport) map[string]any {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("the SDK threw %+v; want it to read the fake's answer", *r.Error)
	}
	return r.Value
}

// sdkThrew checks that the SDK threw an error of class carrying status
// (0: any) and returns it.
func sdkThrew(t *testing.T, r sdkReport, class string, status int) *sdkError {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("the SDK read %v; want it to throw %s %d", r.Value, class, status)
	}
	if r.Error.Class != class || (status != 0 && r.Error.Status != status) {
		t.Errorf("the SDK threw %s %d (%s); want %s %d", r.Error.Class, r.Error.Status, r.Error.Message, class, status)
	}
	return r.Error
}

// oursEnded checks how our adapter ended: outcome ("ok", "transient" or
// a job error code), with an error mentioning msg.
func oursEnded(t *testing.T, ours adapterRun, outcome, msg string) {
	t.Helper()
	if ours.Outcome != outcome || (msg != "" && (ours.Err == nil || !strings.Contains(ours.Err.Error(), msg))) {
		t.Errorf("our adapter ended %s (%v); want %s mentioning %q", ours.Outcome, ours.Err, outcome, msg)
	}
}

// field returns the value at a dotted path in a JSON document read into
// any, a number indexing a list ("detail.0.type"); nil if there is none.
func field(doc any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := doc.(type) {
		case map[string]any:
			doc = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			doc = x[i]
		default:
			return nil
		}
	}
	return doc
}

// count returns how many of rs are method requests to a path ending in
// suffix.
func count(rs []wireRequest, method, suffix string) int {
	n := 0
	for _, r := range rs {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

// TestContractWireDiff checks the comparison itself: each kind of
// difference the contract tests look for is found, and named.
func TestContractWireDiff(t *testing.T) {
	const key = "k-123"
	sdk := wireRequest{Method: "POST", Path: "/fal-ai/kling", Query: url.Values{"logs": {"0"}},
		Header: http.Header{"Authorization": {"Key " + key}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"input":{"prompt":"p","duration":"5","styles":[]}}`)}
	tests := []struct {
		name   string
		change func(r *wireRequest)
		want   []string
	}{
		{"same", func(r *wireRequest) {}, nil},
		{"method", func(r *wireRequest) { r.Method = "PUT" }, []string{"method: sdk POST, ours PUT"}},
		{"path", func(r *wireRequest) { r.Path = "/fal-ai/kling/requests" }, []string{"path: sdk /fal-ai/kling, ours /fal-ai/kling/requests"}},
		{"query", func(r *wireRequest) { r.Query = url.Values{"logs": {"1"}, "x": {"y"}} },
			[]string{`query "logs": sdk "0", ours "1"`, `query "x": sdk absent, ours "y"`}},
		{"auth header", func(r *wireRequest) { r.Header = http.Header{"X-Key": {key}, "Content-Type": {"application/json"}} },
			[]string{"auth: sdk Authorization: Key KEY, ours X-Key: KEY"}},
		{"auth scheme", func(r *wireRequest) {
			r.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
		},
			[]string{"auth: sdk Authorization: Key KEY, ours Authorization: Bearer KEY"}},
		{"key in the query", func(r *wireRequest) { r.Query = url.Values{"logs": {"0"}, "key": {key}} },
			[]string{`query "key": sdk absent, ours "k-123"`, `auth: sdk Authorization: Key KEY, ours Authorization: Key KEY; query key`}},
		{"content type", func(r *wireRequest) { r.Header = http.Header{"Authorization": {"Key " + key}} },
			[]string{"content-type: sdk application/json, ours none"}},
		{"field name", func(r *wireRequest) { r.Body = []byte(`{"input":{"text":"p","duration":"5","styles":[]}}`) },
			[]string{`body "input.prompt": sdk "p", ours absent`, `body "input.text": sdk absent, ours "p"`}},
		{"field type", func(r *wireRequest) { r.Body = []byte(`{"input":{"prompt":"p","duration":5,"styles":[]}}`) },
			[]string{`body "input.duration": sdk "5", ours 5`}},
		{"empty list left out", func(r *wireRequest) { r.Body = []byte(`{"input":{"prompt":"p","duration":"5"}}`) },
			[]string{`body "input.styles": sdk [], ours absent`}},
	}
	for _, tt := range tests {
		ours := sdk
		ours.Query, ours.Header = url.Values(http.Header(sdk.Query).Clone()), sdk.Header.Clone()
		tt.change(&ours)
		if got := wireDiff(sdk, ours, key); !slices.Equal(got, tt.want) {
			t.Errorf("%s: wireDiff = %q; want %q", tt.name, got, tt.want)
		}
	}
}
