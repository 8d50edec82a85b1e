package functions_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Operations in the template: alarms to one SNS topic, the dashboard, the
// API's access log, X-Ray, the optional WAF and custom domain, and the
// reserved concurrency of the functions that must always run.

// alarm is an AWS::CloudWatch::Alarm reduced to what the checks read.
type alarm struct {
	name      string
	props     map[string]any
	metrics   []alarmMetric // one for a plain alarm, the MetricStats of a metric-math alarm
	threshold float64
}

type alarmMetric struct {
	namespace, name string
	dims            map[string]string // name -> resourceKeys form of the value
	period          float64
}

func alarms(tpl map[string]any) []alarm {
	var out []alarm
	for _, name := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
		p := mapAt(tpl, "Resources", name, "Properties")
		a := alarm{name: name, props: p}
		a.threshold, _ = numAt(p, "Threshold")
		if p["MetricName"] != nil {
			period, _ := numAt(p, "Period")
			a.metrics = append(a.metrics, alarmMetric{fmt.Sprint(p["Namespace"]), fmt.Sprint(p["MetricName"]), dims(p["Dimensions"]), period})
		}
		for _, m := range asList(p["Metrics"]) {
			ms := mapAt(m, "MetricStat")
			if ms == nil {
				continue
			}
			period, _ := numAt(ms, "Period")
			mm := mapAt(ms, "Metric")
			a.metrics = append(a.metrics, alarmMetric{fmt.Sprint(mm["Namespace"]), fmt.Sprint(mm["MetricName"]), dims(mm["Dimensions"]), period})
		}
		out = append(out, a)
	}
	return out
}

func dims(v any) map[string]string {
	out := map[string]string{}
	for _, d := range asList(v) {
		if k := resourceKeys(mapAt(d)["Value"]); len(k) == 1 {
			out[fmt.Sprint(mapAt(d)["Name"])] = k[0]
		}
	}
	return out
}

// findAlarm returns the first alarm with a metric that matches.
func findAlarm(as []alarm, match func(alarm, alarmMetric) bool) (alarm, bool) {
	for _, a := range as {
		for _, m := range a.metrics {
			if match(a, m) {
				return a, true
			}
		}
	}
	return alarm{}, false
}

// conditionIs reports whether condition name is defined as want (both in
// the loader's long form), compared as JSON.
func conditionIs(tpl map[string]any, name string, want any) bool {
	a, _ := json.Marshal(mapAt(tpl, "Conditions")[name])
	b, _ := json.Marshal(want)
	return string(a) == string(b)
}

func notEquals(param string, value any) any {
	return map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": param}, value}}}}
}

// checkOps returns every broken operations invariant of tpl.
func checkOps(tpl map[string]any) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	res := mapAt(tpl, "Resources")
	params := mapAt(tpl, "Parameters")
	functions := resourcesOfType(tpl, "AWS::Serverless::Function")

	// The topic every alarm notifies, and its optional email.
	topics := resourcesOfType(tpl, "AWS::SNS::Topic")
	if len(topics) != 1 {
		bad("want exactly one SNS topic for alarms, got %v", topics)
		return problems
	}
	topic := topics[0]
	if p := mapAt(params, "AlarmEmail"); p == nil || p["Default"] != "" {
		bad("Parameters.AlarmEmail: want a parameter with Default \"\" (no email)")
	}
	if !conditionIs(tpl, "HasAlarmEmail", notEquals("AlarmEmail", "")) {
		bad("Conditions.HasAlarmEmail: want !Not [!Equals [!Ref AlarmEmail, \"\"]]")
	}
	var subscribed bool
	for _, s := range resourcesOfType(tpl, "AWS::SNS::Subscription") {
		p := mapAt(res, s, "Properties")
		subscribed = subscribed || (mapAt(res, s)["Condition"] == "HasAlarmEmail" && p["Protocol"] == "email" &&
			refName(p["Endpoint"]) == "AlarmEmail" && refName(p["TopicArn"]) == topic)
	}
	if !subscribed {
		bad("no email subscription of AlarmEmail to %s under HasAlarmEmail", topic)
	}

	as := alarms(tpl)
	for _, a := range as {
		if !refIn(a.props["AlarmActions"], topic) {
			bad("%s: AlarmActions do not notify %s", a.name, topic)
		}
		if a.props["TreatMissingData"] != "notBreaching" {
			bad("%s: TreatMissingData %v; want notBreaching (no data is no problem)", a.name, a.props["TreatMissingData"])
		}
		if a.props["ComparisonOperator"] != "GreaterThanThreshold" {
			bad("%s: ComparisonOperator %v; want GreaterThanThreshold", a.name, a.props["ComparisonOperator"])
		}
		for _, m := range a.metrics {
			if m.period == 0 || m.period > 300 {
				bad("%s: %s period %v; want at most 300 s", a.name, m.name, m.period)
			}
		}
	}
	// Messages in the dead-letter queues.
	for _, q := range []string{"JobsDeadLetterQueue", "CreditsFailureQueue", "WebhooksDeadLetterQueue"} {
		a, ok := findAlarm(as, func(a alarm, m alarmMetric) bool {
			return m.namespace == "AWS/SQS" && m.name == "ApproximateNumberOfMessagesVisible" && m.dims["QueueName"] == "${"+q+".QueueName}"
		})
		if !ok || a.threshold != 0 {
			bad("no alarm on %s's ApproximateNumberOfMessagesVisible > 0", q)
		}
	}
	// The credits function behind the stream.
	creditsFn := ""
	for _, fn := range functions {
		for _, ev := range mapAt(res, fn, "Properties", "Events") {
			if mapAt(ev)["Type"] == "DynamoDB" {
				creditsFn = fn
			}
		}
	}
	if a, ok := findAlarm(as, func(a alarm, m alarmMetric) bool {
		return m.namespace == "AWS/Lambda" && m.name == "IteratorAge" && m.dims["FunctionName"] == "${"+creditsFn+"}"
	}); !ok || a.threshold <= 0 || a.threshold > 300000 {
		bad("no alarm on %s's IteratorAge above at most 5 minutes (300000 ms)", creditsFn)
	}
	// Errors and throttles of every function.
	for _, fn := range functions {
		for _, metric := range []string{"Errors", "Throttles"} {
			if a, ok := findAlarm(as, func(a alarm, m alarmMetric) bool {
				return m.namespace == "AWS/Lambda" && m.name == metric && m.dims["FunctionName"] == "${"+fn+"}"
			}); !ok || a.threshold != 0 {
				bad("%s: no alarm on its %s > 0", fn, metric)
			}
		}
	}
	// The API's 5XX rate: the ApiName dimension is the API's Name.
	apiName := ""
	if k := resourceKeys(mapAt(res, "Api", "Properties")["Name"]); len(k) == 1 {
		apiName = k[0]
	}
	if apiName == "" {
		bad("Api: no Name (the ApiName dimension of its metrics)")
	}
	if a, ok := findAlarm(as, func(a alarm, m alarmMetric) bool {
		return m.namespace == "AWS/ApiGateway" && m.name == "5XXError" && m.dims["ApiName"] == apiName && m.dims["Stage"] == "${Stage}"
	}); !ok {
		bad("no alarm on the API's 5XXError (ApiName %s, Stage ${Stage})", apiName)
	} else if expr := mathExpression(a); expr != "" {
		if a.threshold != 1 || !strings.Contains(expr, "100 *") {
			bad("%s: expression %q threshold %v; want a percentage of requests above 1", a.name, expr, a.threshold)
		}
	} else if a.props["Statistic"] != "Average" || a.threshold != 0.01 {
		bad("%s: want Average of 5XXError above 0.01 (1%%), or metric math", a.name)
	}
	// DynamoDB throttles of every table and index.
	for _, table := range resourcesOfType(tpl, "AWS::DynamoDB::Table") {
		indexes := []string{""}
		for _, g := range asList(mapAt(res, table, "Properties")["GlobalSecondaryIndexes"]) {
			if g != nil {
				indexes = append(indexes, fmt.Sprint(mapAt(g)["IndexName"]))
			}
		}
		for _, idx := range indexes {
			for _, metric := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
				if _, ok := findAlarm(as, func(a alarm, m alarmMetric) bool {
					return m.namespace == "AWS/DynamoDB" && m.name == metric && m.dims["TableName"] == "${"+table+"}" &&
						m.dims["GlobalSecondaryIndexName"] == idx && a.threshold == 0
				}); !ok {
					bad("%s: no alarm on %s%s > 0", table, metric, map[bool]string{true: "", false: " of index " + idx}[idx == ""])
				}
			}
		}
	}

	checkDashboard(tpl, functions, apiName, bad)
	checkAccessLog(tpl, bad)

	// X-Ray, switched by Tracing.
	if p := mapAt(params, "Tracing"); p == nil || p["Default"] != "off" || fmt.Sprint(p["AllowedValues"]) != "[on off]" {
		bad("Parameters.Tracing: want on/off, default off")
	}
	if !conditionIs(tpl, "TracingOn", map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Tracing"}, "on"}}) {
		bad("Conditions.TracingOn: want !Equals [!Ref Tracing, \"on\"]")
	}
	if got, _ := json.Marshal(mapAt(tpl, "Globals", "Function")["Tracing"]); string(got) != `{"Fn::If":["TracingOn","Active","PassThrough"]}` {
		bad("Globals.Function.Tracing = %s; want !If [TracingOn, Active, PassThrough]", got)
	}
	if got, _ := json.Marshal(mapAt(tpl, "Globals", "Api")["TracingEnabled"]); string(got) != `{"Fn::If":["TracingOn",true,false]}` {
		bad("Globals.Api.TracingEnabled = %s; want !If [TracingOn, true, false]", got)
	}

	checkWAF(tpl, bad)
	checkDomain(tpl, bad)
	checkReserved(tpl, bad)
	return problems
}

func refIn(v any, name string) bool {
	for _, e := range asList(v) {
		if refName(e) == name {
			return true
		}
	}
	return false
}

// mathExpression returns the metric-math expression an alarm returns ("" if
// it has none).
func mathExpression(a alarm) string {
	for _, m := range asList(a.props["Metrics"]) {
		if e, ok := mapAt(m)["Expression"].(string); ok && mapAt(m)["ReturnData"] == true {
			return e
		}
	}
	return ""
}

var subVar = regexp.MustCompile(`\$\{([^}]+)\}`)

// checkDashboard wants one dashboard whose body is JSON (once !Sub has
// replaced its variables) and shows requests, latency, 5XX, each
// function's errors and duration, the jobs queue's depth and both
// dead-letter queues.
func checkDashboard(tpl map[string]any, functions []string, apiName string, bad func(string, ...any)) {
	ds := resourcesOfType(tpl, "AWS::CloudWatch::Dashboard")
	if len(ds) != 1 {
		bad("want exactly one CloudWatch dashboard, got %v", ds)
		return
	}
	body, ok := mapAt(tpl, "Resources", ds[0], "Properties", "DashboardBody")["Fn::Sub"].(string)
	if !ok {
		bad("%s: DashboardBody is not a !Sub string", ds[0])
		return
	}
	// Each ${X} stays as the string "${X}" inside a JSON string, so the
	// body parses as is; check each variable names something.
	for _, m := range subVar.FindAllStringSubmatch(body, -1) {
		name, _, _ := strings.Cut(m[1], ".")
		if !strings.HasPrefix(name, "AWS::") && mapAt(tpl, "Resources", name) == nil && mapAt(tpl, "Parameters", name) == nil {
			bad("%s: ${%s} names no resource or parameter", ds[0], m[1])
		}
	}
	var doc struct {
		Widgets []struct {
			Properties struct {
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		bad("%s: DashboardBody is not JSON: %v", ds[0], err)
		return
	}
	shown := map[string]bool{} // "namespace metric dimension-value"
	for _, w := range doc.Widgets {
		for _, row := range w.Properties.Metrics {
			if len(row) < 4 {
				continue
			}
			shown[fmt.Sprint(row[0], " ", row[1], " ", row[3])] = true
		}
	}
	want := []string{
		"AWS/ApiGateway Count " + apiName, "AWS/ApiGateway Latency " + apiName, "AWS/ApiGateway 5XXError " + apiName,
		"AWS/SQS ApproximateNumberOfMessagesVisible ${JobsQueue.QueueName}",
		"AWS/SQS ApproximateNumberOfMessagesVisible ${JobsDeadLetterQueue.QueueName}",
		"AWS/SQS ApproximateNumberOfMessagesVisible ${CreditsFailureQueue.QueueName}",
		"AWS/SQS ApproximateNumberOfMessagesVisible ${WebhooksDeadLetterQueue.QueueName}",
	}
	for _, fn := range functions {
		want = append(want, "AWS/Lambda Errors ${"+fn+"}", "AWS/Lambda Duration ${"+fn+"}")
	}
	for _, w := range want {
		if !shown[w] {
			bad("%s: shows no %s", ds[0], w)
		}
	}
}

// checkAccessLog wants the API's access log: JSON with the request id,
// status, latency, route, method and client address, no request header
// (the Authorization header is the API key), to a log group of the stack
// with a retention, through the account's API Gateway CloudWatch role.
func checkAccessLog(tpl map[string]any, bad func(string, ...any)) {
	api := mapAt(tpl, "Resources", "Api")
	set := mapAt(api, "Properties", "AccessLogSetting")
	lg := refName(set["DestinationArn"])
	if lg == "" || mapAt(tpl, "Resources", lg)["Type"] != "AWS::Logs::LogGroup" {
		bad("Api: AccessLogSetting.DestinationArn is not a log group of the stack")
	} else if _, ok := mapAt(tpl, "Resources", lg, "Properties")["RetentionInDays"]; !ok {
		bad("%s: no RetentionInDays", lg)
	}
	format, _ := set["Format"].(string)
	var fields map[string]string
	if err := json.Unmarshal([]byte(format), &fields); err != nil {
		bad("Api: AccessLogSetting.Format is not a JSON object of strings: %v", err)
	}
	values := map[string]bool{}
	for _, v := range fields {
		values[v] = true
	}
	for _, v := range []string{"$context.requestId", "$context.status", "$context.responseLatency", "$context.resourcePath",
		"$context.httpMethod", "$context.identity.sourceIp"} {
		if !values[v] {
			bad("Api: the access log has no %s", v)
		}
	}
	lower := strings.ToLower(format)
	for _, banned := range []string{"authorization", "header", "$input", "$method.request", "apikey"} {
		if strings.Contains(lower, strings.ToLower(banned)) {
			bad("Api: the access log format mentions %q: it must never log a request header (the API key)", banned)
		}
	}
	// Stage logging needs the region's CloudWatch role set first: the
	// stack sets it (optionally) and the API waits for it.
	accounts := resourcesOfType(tpl, "AWS::ApiGateway::Account")
	if len(accounts) != 1 {
		bad("want one AWS::ApiGateway::Account (the CloudWatch role access logging needs), got %v", accounts)
		return
	}
	dep := fmt.Sprint(api["DependsOn"])
	b, _ := json.Marshal(mapAt(tpl, "Resources", dep))
	if dep != accounts[0] && !strings.Contains(string(b), `"Ref":"`+accounts[0]+`"`) {
		bad("Api: DependsOn %v; want %s, or a handle that references it", api["DependsOn"], accounts[0])
	}
}

// checkWAF wants an optional regional web ACL (WafRateLimit > 0) with a
// per-IP rate rule over 5 minutes, associated with the API's stage.
func checkWAF(tpl map[string]any, bad func(string, ...any)) {
	if p := mapAt(tpl, "Parameters", "WafRateLimit"); p == nil || p["Default"] != 0 {
		bad("Parameters.WafRateLimit: want a Number with Default 0 (no WAF)")
	}
	if !conditionIs(tpl, "HasWaf", notEquals("WafRateLimit", "0")) {
		bad("Conditions.HasWaf: want !Not [!Equals [!Ref WafRateLimit, \"0\"]]")
	}
	acls := resourcesOfType(tpl, "AWS::WAFv2::WebACL")
	if len(acls) != 1 {
		bad("want one AWS::WAFv2::WebACL, got %v", acls)
		return
	}
	acl := mapAt(tpl, "Resources", acls[0])
	p := mapAt(acl, "Properties")
	if acl["Condition"] != "HasWaf" || p["Scope"] != "REGIONAL" {
		bad("%s: Condition %v, Scope %v; want HasWaf, REGIONAL", acls[0], acl["Condition"], p["Scope"])
	}
	var rated bool
	for _, r := range asList(p["Rules"]) {
		rb := mapAt(r, "Statement", "RateBasedStatement")
		window, _ := numAt(rb, "EvaluationWindowSec")
		rated = rated || (refName(rb["Limit"]) == "WafRateLimit" && rb["AggregateKeyType"] == "IP" && window == 300 &&
			mapAt(r, "Action")["Block"] != nil)
	}
	if !rated {
		bad("%s: no rule blocking an IP past WafRateLimit requests in 300 s", acls[0])
	}
	var associated bool
	for _, a := range resourcesOfType(tpl, "AWS::WAFv2::WebACLAssociation") {
		ap := mapAt(tpl, "Resources", a, "Properties")
		arn, _ := mapAt(ap["ResourceArn"])["Fn::Sub"].(string)
		associated = associated || (mapAt(tpl, "Resources", a)["Condition"] == "HasWaf" &&
			strings.HasSuffix(arn, "/restapis/${Api}/stages/${Api.Stage}") && refName(ap["WebACLArn"]) == acls[0])
	}
	if !associated {
		bad("no WebACLAssociation of %s with the API's stage (${Api.Stage}) under HasWaf", acls[0])
	}
}

// checkDomain wants an optional REGIONAL custom domain (DomainName and
// CertificateArn) mapped to the API's stage.
func checkDomain(tpl map[string]any, bad func(string, ...any)) {
	for _, name := range []string{"DomainName", "CertificateArn"} {
		if p := mapAt(tpl, "Parameters", name); p == nil || p["Default"] != "" {
			bad("Parameters.%s: want Default \"\" (no custom domain)", name)
		}
	}
	if !conditionIs(tpl, "HasDomain", map[string]any{"Fn::And": []any{notEquals("DomainName", ""), notEquals("CertificateArn", "")}}) {
		bad("Conditions.HasDomain: want both DomainName and CertificateArn set")
	}
	var domain string
	for _, d := range resourcesOfType(tpl, "AWS::ApiGateway::DomainName") {
		p := mapAt(tpl, "Resources", d, "Properties")
		if mapAt(tpl, "Resources", d)["Condition"] == "HasDomain" && refName(p["DomainName"]) == "DomainName" &&
			refName(p["RegionalCertificateArn"]) == "CertificateArn" && contains(mapAt(p, "EndpointConfiguration")["Types"], "REGIONAL") {
			domain = d
		}
	}
	if domain == "" {
		bad("no REGIONAL AWS::ApiGateway::DomainName of DomainName with CertificateArn under HasDomain")
		return
	}
	var mapped bool
	for _, m := range resourcesOfType(tpl, "AWS::ApiGateway::BasePathMapping") {
		p := mapAt(tpl, "Resources", m, "Properties")
		mapped = mapped || (mapAt(tpl, "Resources", m)["Condition"] == "HasDomain" && refName(p["DomainName"]) == domain &&
			refName(p["RestApiId"]) == "Api" && refName(p["Stage"]) == "Api.Stage")
	}
	if !mapped {
		bad("no BasePathMapping of %s to the API's stage (!Ref Api.Stage) under HasDomain", domain)
	}
}

// reserved are the functions that must run whatever the API's load, with
// their parameter and condition.
var reserved = map[string]struct{ param, cond string }{
	"WorkerFunction":      {"WorkerReservedConcurrency", "HasWorkerReserved"},
	"CreditsFunction":     {"CreditsReservedConcurrency", "HasCreditsReserved"},
	"JobsSweeperFunction": {"SweeperReservedConcurrency", "HasSweeperReserved"},
}

// checkReserved wants reserved concurrency for the worker, the credits
// function and the sweeper, each a parameter (0 = unreserved), the
// worker's at least its SQS MaximumConcurrency.
func checkReserved(tpl map[string]any, bad func(string, ...any)) {
	fns := make([]string, 0, len(reserved))
	for fn := range reserved {
		fns = append(fns, fn)
	}
	sort.Strings(fns)
	for _, fn := range fns {
		r := reserved[fn]
		p := mapAt(tpl, "Parameters", r.param)
		def, ok := numAt(p, "Default")
		if !ok || def < 1 || p["Type"] != "Number" {
			bad("Parameters.%s: want a Number with a Default of at least 1", r.param)
		}
		if !conditionIs(tpl, r.cond, notEquals(r.param, "0")) {
			bad("Conditions.%s: want !Not [!Equals [!Ref %s, \"0\"]]", r.cond, r.param)
		}
		got, _ := json.Marshal(mapAt(tpl, "Resources", fn, "Properties")["ReservedConcurrentExecutions"])
		want := fmt.Sprintf(`{"Fn::If":[%q,{"Ref":%q},{"Ref":"AWS::NoValue"}]}`, r.cond, r.param)
		if string(got) != want {
			bad("%s: ReservedConcurrentExecutions = %s; want !If [%s, !Ref %s, !Ref AWS::NoValue]", fn, got, r.cond, r.param)
		}
		for _, ev := range mapAt(tpl, "Resources", fn, "Properties", "Events") {
			if max, ok := numAt(ev, "Properties", "ScalingConfig", "MaximumConcurrency"); ok && def < max {
				bad("%s: %s default %v < the SQS MaximumConcurrency %v (jobs would be throttled back to the queue)", fn, r.param, def, max)
			}
		}
	}
}

func TestTemplateOps(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, p := range checkOps(tpl) {
		t.Error(p)
	}
}

// TestTranslatedTemplateOps checks what SAM makes of the operations
// settings: access logs and tracing on the one stage, the API waiting for
// the logging role, ${Api.Stage} resolved to the stage for the WAF and the
// custom domain, reserved concurrency on the functions.
func TestTranslatedTemplateOps(t *testing.T) {
	res := translate(t).Resources
	stage := mapAt(res, "ApiStage", "Properties")
	if refName(mapAt(stage, "AccessLogSetting")["DestinationArn"]) != "ApiAccessLogGroup" {
		t.Errorf("ApiStage: AccessLogSetting %v; want the ApiAccessLogGroup", stage["AccessLogSetting"])
	}
	if got, _ := json.Marshal(stage["TracingEnabled"]); string(got) != `{"Fn::If":["TracingOn",true,false]}` {
		t.Errorf("ApiStage: TracingEnabled %s", got)
	}
	if dep := mapAt(res, "Api")["DependsOn"]; fmt.Sprint(dep) != "ApiLoggingReady" {
		t.Errorf("Api (RestApi): DependsOn %v; want ApiLoggingReady", dep)
	}
	if arn, _ := mapAt(res, "WebACLAssociation", "Properties", "ResourceArn")["Fn::Sub"].(string); !strings.HasSuffix(arn, "/stages/${ApiStage}") {
		t.Errorf("WebACLAssociation: ResourceArn %q; want SAM to resolve ${Api.Stage} to ${ApiStage}", arn)
	}
	if s := refName(mapAt(res, "ApiBasePathMapping", "Properties")["Stage"]); s != "ApiStage" {
		t.Errorf("ApiBasePathMapping: Stage %q; want !Ref ApiStage", s)
	}
	for fn := range reserved {
		if _, ok := mapAt(res, fn, "Properties")["ReservedConcurrentExecutions"]; !ok {
			t.Errorf("%s: no ReservedConcurrentExecutions in the translation", fn)
		}
	}
	if got, _ := json.Marshal(mapAt(res, "WorkerFunction", "Properties", "TracingConfig")); string(got) != `{"Mode":{"Fn::If":["TracingOn","Active","PassThrough"]}}` {
		t.Errorf("WorkerFunction: TracingConfig %s", got)
	}
}

// TestTemplateOpsCheckFails breaks each operations invariant in a copy of
// the template and expects checkOps to say so.
func TestTemplateOpsCheckFails(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"no email parameter", func(tpl map[string]any) {
			delete(mapAt(tpl, "Parameters"), "AlarmEmail")
		}, "Parameters.AlarmEmail"},
		{"an alarm that notifies nobody", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "JobsDeadLetterAlarm", "Properties"), "AlarmActions")
		}, "JobsDeadLetterAlarm: AlarmActions do not notify"},
		{"no DLQ alarm", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources"), "JobsDeadLetterAlarm")
		}, "no alarm on JobsDeadLetterQueue's"},
		{"credits failures alarm on the wrong queue", func(tpl map[string]any) {
			d := mapAt(tpl, "Resources", "CreditsFailureAlarm", "Properties")["Dimensions"].([]any)
			mapAt(d[0])["Value"] = map[string]any{"Fn::GetAtt": []any{"JobsQueue", "QueueName"}}
		}, "no alarm on CreditsFailureQueue's"},
		{"iterator age at an hour", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "CreditsIteratorAgeAlarm", "Properties")["Threshold"] = 3600000
		}, "IteratorAge above at most 5 minutes"},
		{"no throttles alarm for the worker", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources"), "WorkerFunctionThrottlesAlarm")
		}, "WorkerFunction: no alarm on its Throttles"},
		{"errors alarm over an hour", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ChatFunctionErrorsAlarm", "Properties")["Period"] = 3600
		}, "ChatFunctionErrorsAlarm: Errors period 3600"},
		{"5XX alarm at 10%", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "Api5xxAlarm", "Properties")["Threshold"] = 10
		}, "want a percentage of requests above 1"},
		{"5XX alarm on another API", func(tpl map[string]any) {
			m := mapAt(tpl, "Resources", "Api5xxAlarm", "Properties")["Metrics"].([]any)
			d := mapAt(m[1], "MetricStat", "Metric")["Dimensions"].([]any)
			mapAt(d[0])["Value"] = "other"
		}, "no alarm on the API's 5XXError"},
		{"no throttle alarm on the queued index", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "JobsTableThrottleAlarm", "Properties")
			p["Metrics"] = asList(p["Metrics"])[:5]
		}, "JobsTable: no alarm on ReadThrottleEvents of index queued"},
		{"no dashboard", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources"), "Dashboard")
		}, "want exactly one CloudWatch dashboard"},
		{"dashboard without the worker's duration", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "Dashboard", "Properties", "DashboardBody")
			p["Fn::Sub"] = strings.Replace(p["Fn::Sub"].(string), `["AWS/Lambda", "Duration", "FunctionName", "${WorkerFunction}"`, `["AWS/Lambda", "Duration", "FunctionName", "${ChatFunction}"`, 1)
		}, "shows no AWS/Lambda Duration ${WorkerFunction}"},
		{"dashboard body not JSON", func(tpl map[string]any) {
			p := mapAt(tpl, "Resources", "Dashboard", "Properties", "DashboardBody")
			p["Fn::Sub"] = p["Fn::Sub"].(string) + "}"
		}, "DashboardBody is not JSON"},
		{"access log with the Authorization header", func(tpl map[string]any) {
			s := mapAt(tpl, "Resources", "Api", "Properties", "AccessLogSetting")
			s["Format"] = strings.Replace(s["Format"].(string), `"ip":`, `"auth":"$context.authorizer.principalId","key":"$method.request.header.Authorization","ip":`, 1)
		}, `mentions "authorization"`},
		{"access log without the status", func(tpl map[string]any) {
			s := mapAt(tpl, "Resources", "Api", "Properties", "AccessLogSetting")
			s["Format"] = strings.Replace(s["Format"].(string), `"$context.status"`, `"-"`, 1)
		}, "the access log has no $context.status"},
		{"no access log", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "Api", "Properties"), "AccessLogSetting")
		}, "AccessLogSetting.DestinationArn"},
		{"API not waiting for the logging role", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "Api"), "DependsOn")
		}, "Api: DependsOn"},
		{"tracing always on", func(tpl map[string]any) {
			mapAt(tpl, "Globals", "Function")["Tracing"] = "Active"
		}, "Globals.Function.Tracing"},
		{"WAF counting per key", func(tpl map[string]any) {
			r := mapAt(tpl, "Resources", "WebACL", "Properties")["Rules"].([]any)
			mapAt(r[0], "Statement", "RateBasedStatement")["AggregateKeyType"] = "FORWARDED_IP"
		}, "no rule blocking an IP"},
		{"WAF on another stage", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "WebACLAssociation", "Properties")["ResourceArn"] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:apigateway:${AWS::Region}::/restapis/${Api}/stages/Stage"}
		}, "no WebACLAssociation"},
		{"WAF always on", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "WebACL"), "Condition")
		}, "WebACL: Condition <nil>"},
		{"edge-optimized domain", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "ApiDomain", "Properties", "EndpointConfiguration")["Types"] = []any{"EDGE"}
		}, "no REGIONAL AWS::ApiGateway::DomainName"},
		{"domain mapped to no stage", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "ApiBasePathMapping", "Properties"), "Stage")
		}, "no BasePathMapping"},
		{"worker not reserved", func(tpl map[string]any) {
			delete(mapAt(tpl, "Resources", "WorkerFunction", "Properties"), "ReservedConcurrentExecutions")
		}, "WorkerFunction: ReservedConcurrentExecutions"},
		{"worker reserved below its SQS concurrency", func(tpl map[string]any) {
			mapAt(tpl, "Parameters", "WorkerReservedConcurrency")["Default"] = 5
		}, "WorkerReservedConcurrency default 5 < the SQS MaximumConcurrency 10"},
		{"sweeper unreserved by default", func(tpl map[string]any) {
			mapAt(tpl, "Parameters", "SweeperReservedConcurrency")["Default"] = 0
		}, "Parameters.SweeperReservedConcurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			tt.mutate(tpl)
			problems := checkOps(tpl)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkOps(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}
