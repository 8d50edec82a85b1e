// Package functions_test checks the deployment: template.yaml's invariants,
// cfn-lint, and each function's bootstrap run against a Lambda Runtime API
// server (lambda_test.go). The functions themselves are package main, one
// directory each.
package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/credits"
)

// repoRoot is where template.yaml is, relative to this package.
const repoRoot = ".."

// loadTemplate parses a CloudFormation YAML template into plain maps and
// slices. Short-form intrinsics become their long form: !Ref X is
// {"Ref": "X"}, !GetAtt A.B is {"Fn::GetAtt": ["A", "B"]}, !Sub s is
// {"Fn::Sub": s}, and so on.
func loadTemplate(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	v, err := cfnValue(&doc)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a mapping", path)
	}
	return m
}

func cfnValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return cfnValue(n.Content[0])
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		if strings.HasPrefix(n.Tag, "!!") || n.Tag == "" {
			var x any
			if err := n.Decode(&x); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			return x, nil
		}
		v = n.Value
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

// Small accessors over the parsed tree.
func mapAt(v any, path ...string) map[string]any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	m, _ := v.(map[string]any)
	return m
}

func numAt(v any, path ...string) (float64, bool) {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func resourcesOfType(tpl map[string]any, typ string) []string {
	var names []string
	for name, r := range mapAt(tpl, "Resources") {
		if mapAt(r)["Type"] == typ {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// refName returns X for {"Ref": X} or {"Fn::GetAtt": [X, ...]}.
func refName(v any) string {
	m, _ := v.(map[string]any)
	if s, ok := m["Ref"].(string); ok {
		return s
	}
	if l, ok := m["Fn::GetAtt"].([]any); ok && len(l) > 0 {
		s, _ := l[0].(string)
		return s
	}
	return ""
}

// functionProp returns a function's property, falling back to Globals.
func functionProp(tpl map[string]any, fn, prop string) any {
	if v, ok := mapAt(tpl, "Resources", fn, "Properties")[prop]; ok {
		return v
	}
	return mapAt(tpl, "Globals", "Function")[prop]
}

// dataWildcard reports whether an IAM action grants a wildcard on a data
// service.
func dataWildcard(action string) bool {
	if action == "*" {
		return true
	}
	svc, op, ok := strings.Cut(action, ":")
	if !ok {
		return false
	}
	switch strings.ToLower(svc) {
	case "dynamodb", "sqs", "s3":
		return strings.ContainsAny(op, "*?")
	}
	return false
}

// policyTemplate reports whether a Policies entry key is a SAM policy
// template (DynamoDBCrudPolicy, SQSSendMessagePolicy, ...). None is
// allowed: each expands to more than a function uses (DynamoDBCrudPolicy
// grants Scan, DeleteItem and BatchWriteItem on the table and every index;
// SQSSendMessagePolicy grants sqs:SendMessage*), so every function has
// inline statements, checked against the allow-list in
// template_iam_test.go.
func policyTemplate(key string) bool {
	return strings.HasSuffix(key, "Policy")
}

// statements walks v for IAM statements (maps with Effect and Action),
// descending into Fn::If branches.
func statements(v any, visit func(st map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["Effect"]; ok {
			if _, ok := x["Action"]; ok {
				visit(x)
				return
			}
		}
		for _, c := range x {
			statements(c, visit)
		}
	case []any:
		for _, c := range x {
			statements(c, visit)
		}
	}
}

func actions(st map[string]any) []string {
	switch a := st["Action"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// checkTemplate returns every broken invariant of tpl; root is where
// CodeUri paths are relative to.
func checkTemplate(tpl map[string]any, root string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	g := mapAt(tpl, "Globals", "Function")
	if g["Runtime"] != "provided.al2023" || g["Handler"] != "bootstrap" {
		bad("Globals: Runtime %v, Handler %v; want provided.al2023, bootstrap", g["Runtime"], g["Handler"])
	}
	if a, _ := g["Architectures"].([]any); len(a) != 1 || a[0] != "arm64" {
		bad("Globals: Architectures %v; want [arm64]", g["Architectures"])
	}

	apis := resourcesOfType(tpl, "AWS::Serverless::Api")
	if len(apis) != 1 {
		bad("want exactly one AWS::Serverless::Api, got %v", apis)
	}
	for _, api := range apis {
		if got := mapAt(tpl, "Resources", api, "Properties", "EndpointConfiguration")["Type"]; got != "REGIONAL" {
			bad("%s: EndpointConfiguration.Type = %v; want REGIONAL (edge cuts silent streams after 30 s)", api, got)
		}
	}

	functions := resourcesOfType(tpl, "AWS::Serverless::Function")
	routes := map[string]string{} // "POST /v1/chat/completions" -> function
	var streamed []string
	var worker, creditsFn, queue, jobsTable, sweeper string
	sqsFns := map[string]string{} // every function on an SQS queue -> its queue
	for _, fn := range functions {
		props := mapAt(tpl, "Resources", fn, "Properties")
		if b := mapAt(tpl, "Resources", fn, "Metadata")["BuildMethod"]; b != "go1.x" {
			bad("%s: Metadata.BuildMethod = %v; want go1.x", fn, b)
		}
		uri, _ := props["CodeUri"].(string)
		if uri == "" {
			bad("%s: no CodeUri", fn)
		} else if _, err := os.Stat(filepath.Join(root, uri, "main.go")); err != nil {
			bad("%s: CodeUri %s has no main.go: %v", fn, uri, err)
		}
		for name, ev := range mapAt(props, "Events") {
			evp := mapAt(ev, "Properties")
			switch mapAt(ev)["Type"] {
			case "Api":
				route := fmt.Sprint(strings.ToUpper(fmt.Sprint(evp["Method"])), " ", evp["Path"])
				routes[route] = fn
				if len(apis) == 1 && refName(evp["RestApiId"]) != apis[0] {
					bad("%s.%s: RestApiId %v; want %s (else SAM makes an implicit edge-optimized API)", fn, name, evp["RestApiId"], apis[0])
				}
				if mode, ok := evp["ResponseTransferMode"]; ok {
					if mode != "RESPONSE_STREAM" {
						bad("%s.%s: ResponseTransferMode = %v; want RESPONSE_STREAM (SAM ignores other values)", fn, name, mode)
					} else {
						streamed = append(streamed, route)
					}
				}
			case "SQS":
				sqsFns[fn] = refName(evp["Queue"])
				if uri == "functions/worker/" {
					worker, queue = fn, refName(evp["Queue"])
				}
				if !contains(evp["FunctionResponseTypes"], "ReportBatchItemFailures") {
					bad("%s.%s: no ReportBatchItemFailures", fn, name)
				}
				if _, ok := numAt(evp, "ScalingConfig", "MaximumConcurrency"); !ok {
					bad("%s.%s: no ScalingConfig.MaximumConcurrency", fn, name)
				}
			case "Schedule":
				sweeper = fn
				switch name {
				case "Reconcile": // the hourly reconciler, {"reconcile": true}
					if evp["Schedule"] != "rate(1 hour)" || evp["Input"] != `{"reconcile": true}` {
						bad("%s.%s: Schedule %v, Input %v; want rate(1 hour) with {\"reconcile\": true}", fn, name, evp["Schedule"], evp["Input"])
					}
				default:
					if evp["Schedule"] != "rate(1 minute)" {
						bad("%s.%s: Schedule %v; want rate(1 minute)", fn, name, evp["Schedule"])
					}
				}
			case "DynamoDB":
				creditsFn = fn
				jobsTable = refName(evp["Stream"])
				if !contains(evp["FunctionResponseTypes"], "ReportBatchItemFailures") {
					bad("%s.%s: no ReportBatchItemFailures", fn, name)
				}
				if evp["BisectBatchOnFunctionError"] != true {
					bad("%s.%s: BisectBatchOnFunctionError is not true", fn, name)
				}
				if _, ok := numAt(evp, "MaximumRetryAttempts"); !ok {
					bad("%s.%s: no MaximumRetryAttempts (default retries until the record expires)", fn, name)
				}
				if refName(mapAt(evp, "DestinationConfig", "OnFailure")["Destination"]) == "" {
					bad("%s.%s: no DestinationConfig.OnFailure.Destination", fn, name)
				}
				checkFilter(evp, func(msg string) { bad("%s.%s: %s", fn, name, msg) })
			}
		}
		statements(props["Policies"], func(st map[string]any) {
			for _, a := range actions(st) {
				if dataWildcard(a) {
					bad("%s: IAM action %q is a wildcard on data", fn, a)
				}
			}
		})
		if ps, ok := props["Policies"].([]any); ok {
			for _, p := range ps {
				for k := range mapAt(p) {
					if policyTemplate(k) {
						bad("%s: SAM policy template %s grants more than the function uses; use an inline statement", fn, k)
					}
				}
			}
		}
	}
	for _, typ := range []string{"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for _, r := range resourcesOfType(tpl, typ) {
			statements(mapAt(tpl, "Resources", r, "Properties"), func(st map[string]any) {
				for _, a := range actions(st) {
					if dataWildcard(a) {
						bad("%s: IAM action %q is a wildcard on data", r, a)
					}
				}
			})
		}
	}

	for _, route := range []string{"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models", "POST /v1/jobs", "GET /v1/jobs/{id}", "GET /v1/jobs", "POST /v1/jobs/{id}/cancel", "GET /v1/credits",
		"POST /v1/images/generations", "POST /v1/audio/speech",
		"POST /v1/videos", "GET /v1/videos", "GET /v1/videos/{id}", "GET /v1/videos/{id}/content", "DELETE /v1/videos/{id}",
		"GET /v1/webhooks/secret"} {
		if routes[route] == "" {
			bad("no function serves %s", route)
		}
	}
	sort.Strings(streamed)
	// Chat streams its events; speech its audio; images keep a slow
	// answer alive with spaces before the JSON.
	if want := "POST /v1/audio/speech,POST /v1/chat/completions,POST /v1/images/generations,POST /v1/messages,POST /v1/responses"; strings.Join(streamed, ",") != want {
		bad("streamed routes = %v; want exactly %v", streamed, strings.Split(want, ","))
	}
	// A synchronous generation's function must end (its timeout) well
	// before the reconciler releases the reservation of a request that
	// died: a release while the request still runs would let it deliver
	// what it no longer holds credits for.
	for _, route := range []string{"POST /v1/images/generations", "POST /v1/audio/speech"} {
		fn := routes[route]
		if fn == "" {
			continue
		}
		if timeout, _ := numAt(functionProp(tpl, fn, "Timeout")); timeout <= 0 || timeout >= credits.ReservationTTL {
			bad("%s (%s): Timeout %v; want under credits.ReservationTTL (%d s)", fn, route, timeout, credits.ReservationTTL)
		}
	}

	if worker == "" || queue == "" {
		bad("no worker function (functions/worker/) on an SQS queue")
	} else if timeout, _ := numAt(functionProp(tpl, worker, "Timeout")); timeout != 300 {
		// functions/worker.WorkerTimeout (the lease) is 300 s: the longest
		// synchronous vendor call, a 5-minute ElevenLabs song, fits in it.
		bad("%s: Timeout %v; want 300 (functions/worker.WorkerTimeout)", worker, timeout)
	}
	var webhooksFn bool
	for fn, q := range sqsFns {
		uri, _ := mapAt(tpl, "Resources", fn, "Properties")["CodeUri"].(string)
		webhooksFn = webhooksFn || uri == "functions/webhooks/"
		// Every SQS consumer (the worker, the webhooks function): a
		// message is not redelivered while an invocation may still hold
		// it, and one that keeps failing goes to a dead-letter queue.
		timeout, _ := numAt(functionProp(tpl, fn, "Timeout"))
		vis, ok := numAt(tpl, "Resources", q, "Properties", "VisibilityTimeout")
		if !ok || timeout == 0 || vis < 6*timeout {
			bad("%s: VisibilityTimeout %v < 6 x %s Timeout %v", q, vis, fn, timeout)
		}
		redrive := mapAt(tpl, "Resources", q, "Properties", "RedrivePolicy")
		if n, _ := numAt(redrive, "maxReceiveCount"); n != 5 {
			bad("%s: RedrivePolicy.maxReceiveCount = %v; want 5", q, redrive["maxReceiveCount"])
		}
		if dlq := refName(redrive["deadLetterTargetArn"]); mapAt(tpl, "Resources", dlq)["Type"] != "AWS::SQS::Queue" {
			bad("%s: dead-letter queue %q is not a queue of this template", q, dlq)
		}
	}
	if !webhooksFn {
		bad("no webhooks function (functions/webhooks/) on an SQS queue")
	}
	if creditsFn == "" {
		bad("no credits function on the jobs table stream")
	}
	checkQueuedIndex(tpl, jobsTable, bad)
	if sweeper == "" {
		bad("no scheduled sweeper function (jobs left queued without a message would wait forever)")
	} else {
		checkSweeper(tpl, sweeper, jobsTable, queue, bad)
	}

	for _, table := range resourcesOfType(tpl, "AWS::DynamoDB::Table") {
		p := mapAt(tpl, "Resources", table, "Properties")
		if p["BillingMode"] != "PAY_PER_REQUEST" {
			bad("%s: BillingMode %v; want PAY_PER_REQUEST", table, p["BillingMode"])
		}
		if mapAt(p, "PointInTimeRecoverySpecification")["PointInTimeRecoveryEnabled"] != true {
			bad("%s: point-in-time recovery is off", table)
		}
		if ttl := mapAt(p, "TimeToLiveSpecification"); ttl["AttributeName"] != "expires" || ttl["Enabled"] != true {
			bad("%s: TTL on %v enabled=%v; want expires, true", table, ttl["AttributeName"], ttl["Enabled"])
		}
		if p["DeletionProtectionEnabled"] != true {
			bad("%s: DeletionProtectionEnabled is not true (a stack delete must not drop balances and jobs)", table)
		}
	}
	// Each function logs to a group of the stack's (with its retention),
	// named in LoggingConfig, so no function makes its own group first.
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		lg := refName(mapAt(tpl, "Resources", fn, "Properties", "LoggingConfig")["LogGroup"])
		if lg == "" || mapAt(tpl, "Resources", lg)["Type"] != "AWS::Logs::LogGroup" {
			bad("%s: LoggingConfig.LogGroup does not name a log group of the stack", fn)
		}
	}
	// Without OpenApiVersion, SAM adds a second stage named "Stage",
	// reachable without the real stage's throttling.
	if v, _ := mapAt(tpl, "Globals", "Api")["OpenApiVersion"].(string); v == "" {
		bad("Globals.Api.OpenApiVersion is not set: SAM would add a second stage named Stage")
	}
	for _, pol := range resourcesOfType(tpl, "AWS::S3::BucketPolicy") {
		tlsAll, tlsObjects, tlsBucket := false, false, false
		statements(mapAt(tpl, "Resources", pol, "Properties"), func(st map[string]any) {
			cond := mapAt(st, "Condition", "Bool")
			if st["Effect"] != "Deny" || cond["aws:SecureTransport"] != "false" {
				return
			}
			tlsAll = contains(asList(st["Action"]), "s3:*")
			for _, r := range asList(st["Resource"]) {
				sub := fmt.Sprint(r)
				tlsObjects = tlsObjects || strings.Contains(sub, "/*")
				tlsBucket = tlsBucket || (strings.Contains(sub, "Arn") && !strings.Contains(sub, "/*"))
			}
		})
		if !tlsAll || !tlsObjects || !tlsBucket {
			bad("%s: want a Deny of s3:* without TLS (aws:SecureTransport false) on the bucket and its objects", pol)
		}
	}
	for _, b := range resourcesOfType(tpl, "AWS::S3::Bucket") {
		p := mapAt(tpl, "Resources", b, "Properties")
		pab := mapAt(p, "PublicAccessBlockConfiguration")
		for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
			if pab[k] != true {
				bad("%s: PublicAccessBlockConfiguration.%s is not true", b, k)
			}
		}
		if len(mapAt(p, "BucketEncryption")) == 0 || len(mapAt(p, "LifecycleConfiguration")) == 0 {
			bad("%s: needs BucketEncryption and a LifecycleConfiguration", b)
		}
	}
	base, _ := mapAt(tpl, "Outputs", "BaseURL", "Value")["Fn::Sub"].(string)
	if !strings.HasPrefix(base, "https://${Api}.execute-api.${AWS::Region}.amazonaws.com/") || !strings.HasSuffix(base, "/v1") {
		bad("Outputs.BaseURL = %q; want https://${Api}.execute-api.${AWS::Region}.amazonaws.com/<stage>/v1", base)
	}
	return problems
}

// checkQueuedIndex wants the jobs table's sparse index of queued jobs as
// dynamostore defines it.
func checkQueuedIndex(tpl map[string]any, table string, bad func(string, ...any)) {
	p := mapAt(tpl, "Resources", table, "Properties")
	types := map[string]any{}
	defs, _ := p["AttributeDefinitions"].([]any)
	for _, d := range defs {
		types[fmt.Sprint(mapAt(d)["AttributeName"])] = mapAt(d)["AttributeType"]
	}
	gsis, _ := p["GlobalSecondaryIndexes"].([]any)
	for _, g := range gsis {
		if mapAt(g)["IndexName"] != dynamostore.QueuedIndex {
			continue
		}
		keys, _ := mapAt(g)["KeySchema"].([]any)
		var got []string
		for _, k := range keys {
			got = append(got, fmt.Sprint(mapAt(k)["AttributeName"], " ", mapAt(k)["KeyType"]))
		}
		want := []string{dynamostore.QueuedShardAttribute + " HASH", dynamostore.QueuedAtAttribute + " RANGE"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			bad("%s: queued index keys %v; want %v", table, got, want)
		}
		if types[dynamostore.QueuedShardAttribute] != "S" || types[dynamostore.QueuedAtAttribute] != "N" {
			bad("%s: queued index attribute types %v, %v; want S, N", table, types[dynamostore.QueuedShardAttribute], types[dynamostore.QueuedAtAttribute])
		}
		if pt := mapAt(g, "Projection")["ProjectionType"]; pt != "KEYS_ONLY" {
			bad("%s: queued index projection %v; want KEYS_ONLY", table, pt)
		}
		return
	}
	bad("%s (the jobs table): no %q queued index (GlobalSecondaryIndexes)", table, dynamostore.QueuedIndex)
}

// checkSweeper wants the sweeper's threshold set, inline statements only,
// and the sweep's own grants: Query on the queued index (not the table),
// UpdateItem on the jobs table, SendMessage on the jobs queue. That it has
// nothing more than the sweep and the hourly reconcile use is
// template_iam_test.go's allow-list.
func checkSweeper(tpl map[string]any, fn, table, queue string, bad func(string, ...any)) {
	props := mapAt(tpl, "Resources", fn, "Properties")
	vars := mapAt(props, "Environment", "Variables")
	if v, ok := vars["GENWAY_SWEEP_AFTER"].(string); !ok {
		bad("%s: GENWAY_SWEEP_AFTER is not set", fn)
	} else if _, err := app.LoadConfig(app.Lambda, func(k string) string {
		if k == "GENWAY_SWEEP_AFTER" {
			return v
		}
		return ""
	}); err != nil {
		bad("%s: %v", fn, err)
	}
	ps, _ := props["Policies"].([]any)
	for _, p := range ps {
		for k := range mapAt(p) {
			if k != "Statement" {
				bad("%s: policy %s; want inline statements only (least privilege)", fn, k)
			}
		}
	}
	index := "${" + table + ".Arn}/index/" + dynamostore.QueuedIndex
	granted := map[string]bool{}
	statements(props["Policies"], func(st map[string]any) {
		res, _ := st["Resource"].(map[string]any)
		for _, a := range actions(st) {
			switch {
			case a == "dynamodb:Query" && res["Fn::Sub"] == index,
				a == "dynamodb:UpdateItem" && refName(res) == table,
				a == "sqs:SendMessage" && refName(res) == queue:
				granted[a] = true
			}
		}
	})
	for _, a := range []string{"dynamodb:Query", "dynamodb:UpdateItem", "sqs:SendMessage"} {
		if !granted[a] {
			bad("%s: no %s for the sweep (Query on %s, UpdateItem on %s, SendMessage on %s)", fn, a, index, table, queue)
		}
	}
}

// checkFilter wants a filter that passes only transitions into completed or
// failed.
func checkFilter(evp map[string]any, bad func(string)) {
	filters, _ := mapAt(evp, "FilterCriteria")["Filters"].([]any)
	if len(filters) == 0 {
		bad("no FilterCriteria")
		return
	}
	for _, f := range filters {
		pattern, _ := mapAt(f)["Pattern"].(string)
		var p struct {
			Dynamodb struct {
				NewImage struct {
					Status struct {
						S []any `json:"S"`
					} `json:"status"`
				} `json:"NewImage"`
			} `json:"dynamodb"`
		}
		if err := json.Unmarshal([]byte(pattern), &p); err != nil {
			bad(fmt.Sprintf("FilterCriteria pattern %q: %v", pattern, err))
			continue
		}
		got := fmt.Sprint(p.Dynamodb.NewImage.Status.S)
		if got != "[completed failed]" {
			bad(fmt.Sprintf("FilterCriteria passes NewImage.status %s; want [completed failed]", got))
		}
	}
}

// asList returns v as a list (a single value is a list of one).
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func contains(v any, s string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestTemplateInvariants(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, p := range checkTemplate(tpl, repoRoot) {
		t.Error(p)
	}
}

// TestTemplateCheckFails breaks each invariant in a copy of the template and
// expects checkTemplate to say so: the check above can fail.
func TestTemplateCheckFails(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"STREAM instead of RESPONSE_STREAM", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ChatFunction", "Properties", "Events", "Completions", "Properties")["ResponseTransferMode"] = "STREAM"
		}, "want RESPONSE_STREAM"},
		{"speech buffered", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "MediaFunction", "Properties", "Events", "Speech", "Properties"), "ResponseTransferMode")
		}, "streamed routes ="},
		{"no videos list", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "JobsGetFunction", "Properties", "Events"), "VideoList")
		}, "no function serves GET /v1/videos"},
		{"media outlives its reservations", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "MediaFunction", "Properties")["Timeout"] = 1800
		}, "want under credits.ReservationTTL"},
		{"edge-optimized API", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "Api", "Properties", "EndpointConfiguration")["Type"] = "EDGE"
		}, "want REGIONAL"},
		{"missing CodeUri directory", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ModelsFunction", "Properties")["CodeUri"] = "functions/nope/"
		}, "has no main.go"},
		{"short visibility timeout", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsQueue", "Properties")["VisibilityTimeout"] = 300
		}, "< 6 x WorkerFunction Timeout"},
		{"short webhooks visibility timeout", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "WebhooksQueue", "Properties")["VisibilityTimeout"] = 60
		}, "< 6 x WebhooksFunction Timeout"},
		{"webhooks queue without a dead-letter queue", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "WebhooksQueue", "Properties"), "RedrivePolicy")
		}, "WebhooksQueue: RedrivePolicy.maxReceiveCount"},
		{"no webhooks function", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources"), "WebhooksFunction")
		}, "no webhooks function"},
		{"maxReceiveCount", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsQueue", "Properties", "RedrivePolicy")["maxReceiveCount"] = 3
		}, "want 5"},
		{"wildcard s3 action", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "WorkerFunction", "Properties")
			p["Policies"] = append(p["Policies"].([]any), map[string]any{"Statement": []any{map[string]any{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}}})
		}, `"s3:*" is a wildcard`},
		{"SQSSendMessagePolicy", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "JobsCreateFunction", "Properties")
			p["Policies"] = append(p["Policies"].([]any), map[string]any{"SQSSendMessagePolicy": map[string]any{"QueueName": "q"}})
		}, "SQSSendMessagePolicy"},
		{"no stream filter", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "CreditsFunction", "Properties", "Events", "JobsStream", "Properties"), "FilterCriteria")
		}, "no FilterCriteria"},
		{"filter passes processing", func(tpl map[string]any) {
			f := mapAt(tpl, "Resources", "CreditsFunction", "Properties", "Events", "JobsStream", "Properties", "FilterCriteria")["Filters"].([]any)
			f[0] = map[string]any{"Pattern": `{"dynamodb":{"NewImage":{"status":{"S":["processing"]}}}}`}
		}, "want [completed failed]"},
		{"provisioned table", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsTable", "Properties")["BillingMode"] = "PROVISIONED"
		}, "want PAY_PER_REQUEST"},
		{"no queued index", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "JobsTable", "Properties"), "GlobalSecondaryIndexes")
		}, `no "queued" queued index`},
		{"queued index keyed on a constant attribute only", func(tpl map[string]any) {
			g := mapAt(tpl, "Resources", "JobsTable", "Properties")["GlobalSecondaryIndexes"].([]any)
			mapAt(g[0])["KeySchema"] = []any{map[string]any{"AttributeName": "status", "KeyType": "HASH"}}
		}, "queued index keys"},
		{"function without its log group", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "WorkerFunction", "Properties"), "LoggingConfig")
		}, "LoggingConfig.LogGroup"},
		{"no deletion protection", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "AccountsTable", "Properties"), "DeletionProtectionEnabled")
		}, "DeletionProtectionEnabled"},
		{"second stage", func(tpl map[string]any) {
			delete(mapAt(tpl, "Globals", "Api"), "OpenApiVersion")
		}, "second stage"},
		{"TLS only for GetObject", func(tpl map[string]any) {
			st := mapAt(tpl, "Resources", "MediaBucketPolicy", "Properties", "PolicyDocument")["Statement"].([]any)
			mapAt(st[0])["Action"] = "s3:GetObject"
		}, "Deny of s3:* without TLS"},
		{"no sweeper", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties"), "Events")
		}, "no scheduled sweeper"},
		{"sweeper every hour", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties", "Events", "Sweep", "Properties")["Schedule"] = "rate(1 hour)"
		}, "want rate(1 minute)"},
		{"sweeper queries the table", func(tpl map[string]any) {
			st := mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties")["Policies"].([]any)[0]
			mapAt(st)["Statement"].([]any)[0].(map[string]any)["Resource"] = map[string]any{"Fn::GetAtt": []any{"JobsTable", "Arn"}}
		}, "no dynamodb:Query for the sweep"},
		{"reconcile every minute", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties", "Events", "Reconcile", "Properties")["Schedule"] = "rate(1 minute)"
		}, "want rate(1 hour)"},
		{"sweeper with a CRUD policy", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties")
			p["Policies"] = append(p["Policies"].([]any), map[string]any{"DynamoDBCrudPolicy": map[string]any{"TableName": map[string]any{"Ref": "JobsTable"}}})
		}, "inline statements only"},
		{"sweeper threshold not a duration", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "JobsSweeperFunction", "Properties", "Environment", "Variables")["GENWAY_SWEEP_AFTER"] = "2"
		}, "GENWAY_SWEEP_AFTER"},
		{"public bucket", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "MediaBucket", "Properties", "PublicAccessBlockConfiguration")["BlockPublicPolicy"] = false
		}, "BlockPublicPolicy is not true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			tt.mutate(tpl)
			problems := checkTemplate(tpl, repoRoot)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkTemplate(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}

func TestCFNLint(t *testing.T) {
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cfn-lint is not installed (pip install cfn-lint); CI must lint template.yaml: %v", err)
		}
		t.Skipf("cfn-lint not installed; skipping (pip install cfn-lint): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "template.yaml")
	cmd.Dir = repoRoot
	// Nothing of this machine's AWS configuration reaches cfn-lint (it
	// loads boto3 for the SAM transform).
	cmd.Env = append(withoutAWS(os.Environ()), "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("cfn-lint template.yaml = %v\n%s", err, out)
	}
}

// withoutAWS returns env without AWS_* variables (AWS_PROFILE, AWS_CA_BUNDLE,
// credentials, endpoints).
func withoutAWS(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}

// translation is template.yaml as the SAM translator turns it into
// CloudFormation (testdata/translate.py).
type translation struct {
	// Stages are the AWS::ApiGateway::Stage resources.
	Stages []string `json:"stages"`
	// DeploymentStageNames are the StageName of each
	// AWS::ApiGateway::Deployment (SAM's implicit "Stage" stage).
	DeploymentStageNames []string `json:"deployment_stage_names"`
	// Resources are every resource of the translated template.
	Resources map[string]any `json:"resources"`
}

var (
	translateOnce sync.Once
	translated    translation
	translateErr  error
	translateSkip string
)

// translate translates template.yaml once per test binary (it takes a few
// seconds) and returns the result; it skips the test where the SAM
// translator is not installed (outside CI).
func translate(t testing.TB) translation {
	t.Helper()
	translateOnce.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			translateSkip = "python3 not found; the SAM translator comes with cfn-lint (pip install cfn-lint)"
			return
		}
		if exec.Command(py, "-c", "import samtranslator, cfnlint").Run() != nil {
			translateSkip = "the SAM translator is missing (pip install cfn-lint)"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "testdata/translate.py", filepath.Join(repoRoot, "template.yaml"))
		// None of the machine's AWS settings: only a region, which the
		// translator needs for ARNs (it makes no call).
		cmd.Env = append(withoutAWS(os.Environ()), "AWS_DEFAULT_REGION=us-east-1", "AWS_REGION=us-east-1",
			"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			translateErr = fmt.Errorf("translate: %v\n%s", err, stderr.String())
			return
		}
		if err := json.Unmarshal(out, &translated); err != nil {
			translateErr = fmt.Errorf("translate output: %v", err)
		}
	})
	if translateSkip != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(translateSkip)
		}
		t.Skip(translateSkip)
	}
	if translateErr != nil {
		t.Fatal(translateErr)
	}
	return translated
}

// TestTranslatedTemplateHasOneStage translates template.yaml with the SAM
// translator (it comes with cfn-lint, which the test script installs) and
// checks that the stack has exactly one API stage: without OpenApiVersion,
// SAM's Deployment also carries StageName "Stage", a second stage reachable
// at /Stage/v1/... without the real stage's throttling.
func TestTranslatedTemplateHasOneStage(t *testing.T) {
	got := translate(t)
	if len(got.Stages) != 1 || len(got.DeploymentStageNames) != 0 {
		t.Errorf("translated stack: stages %v, deployment stage names %v; want exactly one stage", got.Stages, got.DeploymentStageNames)
	}
}
