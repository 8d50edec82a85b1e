package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The API's edge: the public methods' throttle and the console's and the
// admin API's own, the optional source-address allow-list of those two
// (a resource policy, and a WAF rule when the WAF is on), and the
// synthetic models off by default.

// adminFunction serves the console and the admin API.
const adminFunction = "AdminFunction"

// methodSettingPath is an API path as a stage's MethodSettings write it:
// "/admin/v1/{proxy+}" is "/~1admin~1v1~1{proxy+}".
func methodSettingPath(path string) string {
	return "/" + strings.ReplaceAll(path, "/", "~1")
}

// adminRoutes returns the path and method of each Api event of the admin
// function.
func adminRoutes(tpl map[string]any) map[string]string {
	routes := map[string]string{}
	for _, ev := range mapAt(tpl, "Resources", adminFunction, "Properties", "Events") {
		if mapAt(ev)["Type"] == "Api" {
			p := mapAt(ev, "Properties")
			routes[fmt.Sprint(p["Path"])] = strings.ToUpper(fmt.Sprint(p["Method"]))
		}
	}
	return routes
}

// checkEdge returns every broken edge invariant of tpl.
func checkEdge(tpl map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	params := mapAt(tpl, "Parameters")
	for name, def := range map[string]float64{"ApiThrottleRate": 100, "ApiThrottleBurst": 200, "AdminThrottleRate": 20, "AdminThrottleBurst": 40} {
		p := mapAt(params, name)
		if got, ok := numAt(p, "Default"); p["Type"] != "Number" || !ok || got != def {
			bad("Parameters.%s: want a Number with Default %v", name, def)
		}
	}
	api := mapAt(tpl, "Resources", "Api", "Properties")
	settings := map[string]map[string]any{} // "path method" -> setting
	for _, s := range asList(api["MethodSettings"]) {
		m := mapAt(s)
		settings[fmt.Sprint(m["ResourcePath"], " ", m["HttpMethod"])] = m
	}
	throttled := func(key, rate, burst string) {
		s := settings[key]
		if refName(s["ThrottlingRateLimit"]) != rate || refName(s["ThrottlingBurstLimit"]) != burst {
			bad("Api.MethodSettings %s: throttle %v / %v; want !Ref %s / !Ref %s", key, s["ThrottlingRateLimit"], s["ThrottlingBurstLimit"], rate, burst)
		}
	}
	throttled("/* *", "ApiThrottleRate", "ApiThrottleBurst")
	routes := adminRoutes(tpl)
	if len(routes) == 0 {
		bad("%s has no Api events", adminFunction)
	}
	paths := make([]string, 0, len(routes))
	for path := range routes {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		// The console's and the admin API's own throttle, whatever the
		// public methods' load.
		throttled(methodSettingPath(path)+" "+routes[path], "AdminThrottleRate", "AdminThrottleBurst")
	}

	// The allow-list: a resource policy that lets everything in, but the
	// admin function's paths from other addresses than AdminSourceCidrs.
	p := mapAt(params, "AdminSourceCidrs")
	if p["Type"] != "CommaDelimitedList" || p["Default"] != "" {
		bad("Parameters.AdminSourceCidrs: want a CommaDelimitedList with Default \"\" (any address)")
	}
	if !conditionIs(tpl, "HasAdminCidrs", map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{
		map[string]any{"Fn::Join": []any{"", map[string]any{"Ref": "AdminSourceCidrs"}}}, ""}}}}) {
		bad("Conditions.HasAdminCidrs: want !Not [!Equals [!Join [\"\", !Ref AdminSourceCidrs], \"\"]]")
	}
	if api["AlwaysDeploy"] != true {
		bad("Api: AlwaysDeploy is not true (a changed resource policy takes effect only in a new deployment)")
	}
	var allowAll bool
	var deny map[string]any
	for _, st := range asList(mapAt(api, "Auth", "ResourcePolicy")["CustomStatements"]) {
		m := mapAt(st)
		if l, ok := m["Fn::If"].([]any); ok && len(l) == 3 && l[0] == "HasAdminCidrs" && refName(l[2]) == "AWS::NoValue" {
			deny = mapAt(l[1])
			continue
		}
		allowAll = allowAll || (m["Effect"] == "Allow" && m["Principal"] == "*" && m["Action"] == "execute-api:Invoke" &&
			m["Resource"] == "execute-api:/*" && m["Condition"] == nil)
	}
	if !allowAll {
		bad("Api.Auth.ResourcePolicy: no unconditional Allow of execute-api:Invoke on execute-api:/* (every other route must stay open)")
	}
	checkAdminDeny(deny, paths, map[string]any{"Ref": "AdminSourceCidrs"}, func(msg string) { bad("Api.Auth.ResourcePolicy: %s", msg) })

	// With the WAF on, the allow-list is also a WAF rule, which runs before
	// API Gateway and its throttle.
	set := mapAt(tpl, "Resources", "AdminIPSet")
	sp := mapAt(set, "Properties")
	if set["Condition"] != "HasWafAdminCidrs" || sp["IPAddressVersion"] != "IPV4" || refName(sp["Addresses"]) != "AdminSourceCidrs" || sp["Scope"] != "REGIONAL" {
		bad("AdminIPSet: want a REGIONAL IPV4 AWS::WAFv2::IPSet of !Ref AdminSourceCidrs under HasWafAdminCidrs")
	}
	if !conditionIs(tpl, "HasWafAdminCidrs", map[string]any{"Fn::And": []any{map[string]any{"Condition": "HasWaf"}, map[string]any{"Condition": "HasAdminCidrs"}}}) {
		bad("Conditions.HasWafAdminCidrs: want !And [HasWaf, HasAdminCidrs]")
	}
	var ruled bool
	for _, r := range asList(mapAt(tpl, "Resources", "WebACL", "Properties")["Rules"]) {
		l, ok := mapAt(r)["Fn::If"].([]any)
		if !ok || len(l) != 3 || l[0] != "HasAdminCidrs" {
			continue
		}
		rule := mapAt(l[1])
		var pathMatch, notListed bool
		for _, s := range asList(mapAt(rule, "Statement", "AndStatement")["Statements"]) {
			if rx := mapAt(s, "RegexMatchStatement"); rx != nil {
				re, _ := mapAt(rx["RegexString"])["Fn::Sub"].(string)
				pathMatch = mapAt(rx, "FieldToMatch")["UriPath"] != nil && re == "^(/${Stage})?/(console|admin)/"
			}
			notListed = notListed || refName(mapAt(s, "NotStatement", "Statement", "IPSetReferenceStatement")["Arn"]) == "AdminIPSet"
		}
		ruled = mapAt(rule, "Action")["Block"] != nil && pathMatch && notListed
	}
	if !ruled {
		bad("WebACL: no rule (under HasAdminCidrs) blocking /console/ and /admin/ paths from addresses outside AdminIPSet")
	}

	// Synthetic models: off unless the stack asks for them.
	if s := mapAt(params, "Synthetic"); s["Default"] != "off" {
		bad("Parameters.Synthetic: Default %v; want \"off\" (free test models only where asked for)", s["Default"])
	}
	if refName(mapAt(tpl, "Globals", "Function", "Environment", "Variables")["GENWAY_SYNTHETIC"]) != "Synthetic" {
		bad("Globals.Function.Environment: GENWAY_SYNTHETIC is not !Ref Synthetic")
	}
	return problems
}

// checkAdminDeny wants st to be a Deny of execute-api:Invoke, to every
// principal, of each of the admin paths and of no public one, from
// addresses outside cidrs (the value its aws:SourceIp condition must
// have: !Ref AdminSourceCidrs, or the list once translated).
func checkAdminDeny(st map[string]any, adminPaths []string, cidrs any, bad func(string)) {
	if st == nil {
		bad("no Deny under !If [HasAdminCidrs, ..., !Ref AWS::NoValue]")
		return
	}
	if st["Effect"] != "Deny" || st["Principal"] != "*" || st["Action"] != "execute-api:Invoke" {
		bad(fmt.Sprintf("the allow-list statement is %v %v %v; want a Deny of execute-api:Invoke to *", st["Effect"], st["Principal"], st["Action"]))
	}
	got, _ := json.Marshal(mapAt(st, "Condition", "NotIpAddress")["aws:SourceIp"])
	want, _ := json.Marshal(cidrs)
	if string(got) != string(want) || len(mapAt(st, "Condition")) != 1 {
		bad(fmt.Sprintf("the Deny's condition is %v; want only NotIpAddress aws:SourceIp %s", st["Condition"], want))
	}
	var resources []string
	for _, r := range asList(st["Resource"]) {
		resources = append(resources, fmt.Sprint(r))
	}
	denied := func(path string) bool {
		for _, r := range resources {
			if pattern, ok := strings.CutPrefix(r, "execute-api:/*/*"); ok && globMatch(pattern, path) {
				return true
			}
		}
		return false
	}
	for _, path := range adminPaths {
		if !denied(strings.ReplaceAll(path, "{proxy+}", "signin")) {
			bad(fmt.Sprintf("the Deny's resources %v do not cover %s", resources, path))
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/jobs/job_x", "/v1/models", "/v1/webhooks/secret"} {
		if denied(path) {
			bad(fmt.Sprintf("the Deny's resources %v cover the public %s", resources, path))
		}
	}
}

// globMatch reports whether path matches pattern, '*' standing for any
// run of characters ('/' included), as in execute-api resource ARNs.
func globMatch(pattern, path string) bool {
	before, after, found := strings.Cut(pattern, "*")
	if !found {
		return pattern == path
	}
	if !strings.HasPrefix(path, before) {
		return false
	}
	rest := path[len(before):]
	for i := 0; i <= len(rest); i++ {
		if globMatch(after, rest[i:]) {
			return true
		}
	}
	return false
}

func TestTemplateEdge(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, p := range checkEdge(tpl) {
		t.Error(p)
	}
}

// TestTemplateEdgeCheckFails breaks each edge invariant in a copy of the
// template and expects checkEdge to say so.
func TestTemplateEdgeCheckFails(t *testing.T) {
	policy := func(tpl map[string]any) []any {
		return asList(mapAt(tpl, "Resources", "Api", "Properties", "Auth", "ResourcePolicy")["CustomStatements"])
	}
	deny := func(tpl map[string]any) map[string]any {
		return mapAt(policy(tpl)[1].(map[string]any)["Fn::If"].([]any)[1])
	}
	tests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"one throttle for everything", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "Api", "Properties")
			p["MethodSettings"] = asList(p["MethodSettings"])[:1]
		}, "Api.MethodSettings /~1admin~1v1~1{proxy+} ANY"},
		{"the console on the public throttle", func(tpl map[string]any) {
			s := mapAt(asList(mapAt(tpl, "Resources", "Api", "Properties")["MethodSettings"])[2])
			s["ThrottlingRateLimit"] = map[string]any{"Ref": "ApiThrottleRate"}
		}, "Api.MethodSettings /~1console~1{proxy+} ANY"},
		{"a fixed public throttle", func(tpl map[string]any) {
			mapAt(asList(mapAt(tpl, "Resources", "Api", "Properties")["MethodSettings"])[0])["ThrottlingRateLimit"] = 100
		}, "Api.MethodSettings /* *"},
		{"the allow-list always on", func(tpl map[string]any) {
			cs := mapAt(tpl, "Resources", "Api", "Properties", "Auth", "ResourcePolicy")
			cs["CustomStatements"] = []any{policy(tpl)[0], deny(tpl)}
		}, "no Deny under !If [HasAdminCidrs"},
		{"the allow-list denying /v1 too", func(tpl map[string]any) {
			deny(tpl)["Resource"] = []any{"execute-api:/*/*/*"}
		}, "cover the public /v1/chat/completions"},
		{"the allow-list missing the admin API", func(tpl map[string]any) {
			deny(tpl)["Resource"] = []any{"execute-api:/*/*/console/*"}
		}, "do not cover /admin/v1/{proxy+}"},
		{"the allow-list on another parameter", func(tpl map[string]any) {
			mapAt(deny(tpl), "Condition", "NotIpAddress")["aws:SourceIp"] = []any{"0.0.0.0/0"}
		}, "want only NotIpAddress aws:SourceIp"},
		{"no Allow for the rest", func(tpl map[string]any) {
			cs := mapAt(tpl, "Resources", "Api", "Properties", "Auth", "ResourcePolicy")
			cs["CustomStatements"] = policy(tpl)[1:]
		}, "no unconditional Allow"},
		{"policy changes not deployed", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "Api", "Properties"), "AlwaysDeploy")
		}, "Api: AlwaysDeploy"},
		{"the WAF rule matching the stage only", func(tpl map[string]any) {
			for _, r := range asList(mapAt(tpl, "Resources", "WebACL", "Properties")["Rules"]) {
				if l, ok := mapAt(r)["Fn::If"].([]any); ok {
					for _, s := range asList(mapAt(l[1], "Statement", "AndStatement")["Statements"]) {
						if rx := mapAt(s, "RegexMatchStatement"); rx != nil {
							rx["RegexString"] = map[string]any{"Fn::Sub": "^/${Stage}/(console|admin)/"}
						}
					}
				}
			}
		}, "WebACL: no rule (under HasAdminCidrs)"},
		{"an IPv6 IP set", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "AdminIPSet", "Properties")["IPAddressVersion"] = "IPV6"
		}, "AdminIPSet: want a REGIONAL IPV4"},
		{"synthetic on by default", func(tpl map[string]any) {
			mapAt(tpl, "Parameters", "Synthetic")["Default"] = "on"
		}, "Parameters.Synthetic: Default on"},
		{"synthetic forced on", func(tpl map[string]any) {
			mapAt(tpl, "Globals", "Function", "Environment", "Variables")["GENWAY_SYNTHETIC"] = "on"
		}, "GENWAY_SYNTHETIC is not !Ref Synthetic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			tt.mutate(tpl)
			problems := checkEdge(tpl)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkEdge(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}

// TestTranslatedAdminAllowList translates the template as CloudFormation
// hands an allow-list to the SAM transform (a CommaDelimitedList arrives
// as a list) and checks that the deployed resource policy denies the
// console and the admin API to other addresses, and that the stage
// carries the three throttles.
func TestTranslatedAdminAllowList(t *testing.T) {
	translate(t) // skips where the SAM translator is missing
	cidrs := []any{"203.0.113.0/24", "198.51.100.7/32"}
	params, _ := json.Marshal(map[string]any{"AdminSourceCidrs": cidrs})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "testdata/translate.py", filepath.Join(repoRoot, "template.yaml"), string(params))
	cmd.Env = append(withoutAWS(os.Environ()), "AWS_DEFAULT_REGION=us-east-1", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("translate with %s: %v\n%s", params, err, stderr.String())
	}
	var tr translation
	if err := json.Unmarshal(out, &tr); err != nil {
		t.Fatal(err)
	}
	body := mapAt(tr.Resources, "Api", "Properties", "Body")
	var deny map[string]any
	for _, st := range asList(mapAt(body, "x-amazon-apigateway-policy")["Statement"]) {
		if l, ok := mapAt(st)["Fn::If"].([]any); ok && len(l) == 3 && l[0] == "HasAdminCidrs" {
			deny = mapAt(l[1])
		}
	}
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	var paths []string
	for path := range adminRoutes(tpl) {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	checkAdminDeny(deny, paths, cidrs, func(msg string) { t.Errorf("translated RestApi policy: %s", msg) })
	var deployments int
	for _, r := range tr.Resources {
		if mapAt(r)["Type"] == "AWS::ApiGateway::Deployment" {
			deployments++
		}
	}
	if deployments != 1 || len(tr.Stages) != 1 {
		t.Errorf("translated: %d deployments, stages %v; want one of each", deployments, tr.Stages)
	}
	var settings []string
	for _, s := range asList(mapAt(tr.Resources, tr.Stages[0], "Properties")["MethodSettings"]) {
		m := mapAt(s)
		settings = append(settings, fmt.Sprint(m["ResourcePath"], " ", m["HttpMethod"], " ", refName(m["ThrottlingRateLimit"])))
	}
	slices.Sort(settings)
	if want := []string{"/* * ApiThrottleRate", "/~1admin~1v1~1{proxy+} ANY AdminThrottleRate", "/~1console~1{proxy+} ANY AdminThrottleRate"}; !slices.Equal(settings, want) {
		t.Errorf("translated stage MethodSettings = %q; want %q", settings, want)
	}
}
