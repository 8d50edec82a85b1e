package app

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/secrets"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/transport/httpapi"
)

// load reads the configuration of mode from env, and the catalog with it.
func load(t *testing.T, mode Mode, env map[string]string) (Config, error) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	c, err := LoadConfig(mode, getenv)
	if err != nil {
		return c, err
	}
	return c, LoadCatalog(&c, getenv)
}

// TestLoadConfigValues: each variable, set, gives its typed value; unset,
// the default.
func TestLoadConfigValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		got  func(Config) any
		want any
	}{
		{"in flight default", nil, func(c Config) any { return [2]int{c.InFlightPerKey, c.InFlightPerAccount} }, [2]int{ratelimit.DefaultInFlightPerKey, ratelimit.DefaultInFlightPerAccount}},
		{"in flight", map[string]string{"GENWAY_MAX_IN_FLIGHT_PER_KEY": "8", "GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT": "-1"}, func(c Config) any { return [2]int{c.InFlightPerKey, c.InFlightPerAccount} }, [2]int{8, -1}},
		{"bodies default", nil, func(c Config) any { return [2]int64{c.MaxTextBody, c.BodyMemory} }, [2]int64{httpapi.DefaultTextBodyBytes, httpapi.DefaultBodyMemory}},
		{"bodies", map[string]string{"GENWAY_MAX_TEXT_BODY": "1048576", "GENWAY_BODY_MEMORY": "512MiB"}, func(c Config) any { return [2]int64{c.MaxTextBody, c.BodyMemory} }, [2]int64{1 << 20, 512 << 20}},
		{"bodies units", map[string]string{"GENWAY_MAX_TEXT_BODY": "512KiB", "GENWAY_BODY_MEMORY": "1GiB"}, func(c Config) any { return [2]int64{c.MaxTextBody, c.BodyMemory} }, [2]int64{512 << 10, 1 << 30}},
		{"body memory none", map[string]string{"GENWAY_BODY_MEMORY": "-1"}, func(c Config) any { return [2]int64{c.MaxTextBody, c.BodyMemory} }, [2]int64{httpapi.DefaultTextBodyBytes, -1}},
		{"record days default", nil, func(c Config) any { return c.RecordRetention }, credits.DefaultRecordRetention},
		{"record days", map[string]string{"GENWAY_RECORD_DAYS": "7"}, func(c Config) any { return c.RecordRetention }, 7 * 24 * time.Hour},
		{"record days most", map[string]string{"GENWAY_RECORD_DAYS": "3650"}, func(c Config) any { return c.RecordRetention }, 3650 * 24 * time.Hour},
		{"rate limit", map[string]string{"GENWAY_RATE_LIMIT": "-1"}, func(c Config) any { return c.RateLimit }, -1},
		{"route", map[string]string{"GENWAY_ROUTE_RETRIES": "0", "GENWAY_ROUTE_BUDGET": "5s", "GENWAY_ROUTE_FIRST_TOKEN": "200ms"}, func(c Config) any {
			return [4]any{c.Route.Retries, c.Route.Budget, c.Route.FirstToken, c.Route.MaxWait}
		}, [4]any{-1, 5 * time.Second, 200 * time.Millisecond, route.DefaultPolicy.MaxWait}},
		{"breakers off", map[string]string{"GENWAY_ROUTE_BREAKERS": "off"}, func(c Config) any { return c.Route.NoBreakers }, true},
		{"names default", nil, func(c Config) any { return c.Names }, awsenv.Names{JobsTable: "genway-jobs", AccountsTable: "genway-accounts", RecordsTable: "genway-records", JobsQueue: "genway-jobs", JobsDLQ: "genway-jobs-dlq", MediaBucket: "genway-media",
			WebhooksQueue: "genway-webhooks", WebhooksDLQ: "genway-webhooks-dlq"}},
		{"names", map[string]string{
			awsenv.EnvJobsTable: "j", awsenv.EnvAccountsTable: "a", awsenv.EnvRecordsTable: "r", awsenv.EnvJobsQueue: "q", awsenv.EnvJobsQueueURL: "http://x/q", awsenv.EnvJobsDLQ: "d", awsenv.EnvMediaBucket: "b",
			awsenv.EnvWebhooksQueue: "w", awsenv.EnvWebhooksQueueURL: "http://x/w", awsenv.EnvWebhooksDLQ: "wd",
		}, func(c Config) any { return c.Names }, awsenv.Names{JobsTable: "j", AccountsTable: "a", RecordsTable: "r", JobsQueue: "q", JobsQueueURL: "http://x/q", JobsDLQ: "d", MediaBucket: "b",
			WebhooksQueue: "w", WebhooksQueueURL: "http://x/w", WebhooksDLQ: "wd"}},
		{"aws", map[string]string{"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"}, func(c Config) any { return c.AWS },
			awsenv.Settings{Region: "eu-west-1", Endpoint: "http://127.0.0.1:5000", EndpointDynamoDB: "http://127.0.0.1:8000"}},
		{"configured", map[string]string{"GENWAY_CONFIGURED": "gemini, fal,,"}, func(c Config) any { return strings.Join(c.Providers.Configured, "|") }, "gemini|fal"},
		{"switches", map[string]string{"GENWAY_SYNTHETIC": "off", "GENWAY_BEDROCK": "on", "GENWAY_NATIVE": "off", "GENWAY_WEBHOOK_ALLOW_PRIVATE": "1", "GENWAY_MEDIA_ALLOW_PRIVATE": "1"}, func(c Config) any {
			return [5]bool{c.Providers.NoSynthetic, c.Providers.Bedrock, c.Providers.NoNative, c.WebhookAllowPrivate, c.MediaAllowPrivate}
		}, [5]bool{true, true, true, true, true}},
		{"vendor variables", map[string]string{"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "FAL_KEY_PARAMETER": "/genway/fal", "NOT_A_VENDOR": "x"}, func(c Config) any {
			return [4]string{c.Providers.Vars["OPENAI_API_KEY"], c.Providers.Vars["OPENAI_BASE_URL"], c.Parameters["FAL_KEY"], c.Providers.Vars["NOT_A_VENDOR"]}
		}, [4]string{"sk", "http://127.0.0.1:1/v1", "/genway/fal", ""}},
		{"lambda keepalive", map[string]string{"GENWAY_CHAT_KEEPALIVE": "3s"}, func(c Config) any { return [2]time.Duration{c.ChatKeepAlive, c.ImagesKeepAlive} }, [2]time.Duration{3 * time.Second, httpapi.DefaultChatHeartbeat}},
		{"job retention", map[string]string{"GENWAY_JOB_RETENTION_DAYS": "2"}, func(c Config) any { return c.JobRetention }, 48 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, Serve, tt.env)
			if err != nil {
				t.Fatalf("LoadConfig(%v) = %v", tt.env, err)
			}
			if got := tt.got(c); got != tt.want {
				t.Errorf("LoadConfig(%v): %v; want %v", tt.env, got, tt.want)
			}
		})
	}
}

// TestLoadConfigErrors: a bad value is an error naming its variable, and
// every bad value has its error.
func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr []string
	}{
		{map[string]string{"GENWAY_MAX_IN_FLIGHT_PER_KEY": "0"}, []string{"GENWAY_MAX_IN_FLIGHT_PER_KEY"}},
		{map[string]string{"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT": "many"}, []string{"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT"}},
		{map[string]string{"GENWAY_MAX_IN_FLIGHT_PER_KEY": "-2"}, []string{"GENWAY_MAX_IN_FLIGHT_PER_KEY"}},
		{map[string]string{"GENWAY_MAX_TEXT_BODY": "7MiB"}, []string{"GENWAY_MAX_TEXT_BODY"}},
		{map[string]string{"GENWAY_MAX_TEXT_BODY": "0"}, []string{"GENWAY_MAX_TEXT_BODY"}},
		{map[string]string{"GENWAY_BODY_MEMORY": "0"}, []string{"GENWAY_BODY_MEMORY"}},
		{map[string]string{"GENWAY_BODY_MEMORY": "lots"}, []string{"GENWAY_BODY_MEMORY"}},
		{map[string]string{"GENWAY_BODY_MEMORY": "-1KiB"}, []string{"GENWAY_BODY_MEMORY"}},
		{map[string]string{"GENWAY_BODY_MEMORY": "99999999999GiB"}, []string{"GENWAY_BODY_MEMORY"}},
		{map[string]string{"GENWAY_RECORD_DAYS": "0"}, []string{"GENWAY_RECORD_DAYS"}},
		{map[string]string{"GENWAY_RECORD_DAYS": "3651"}, []string{"GENWAY_RECORD_DAYS"}},
		{map[string]string{"GENWAY_RECORD_DAYS": "30d"}, []string{"GENWAY_RECORD_DAYS"}},
		{map[string]string{"GENWAY_RECORD_DAYS": "-1"}, []string{"GENWAY_RECORD_DAYS"}},
		{map[string]string{"GENWAY_ROUTE_BREAKERS": "maybe"}, []string{"GENWAY_ROUTE_BREAKERS"}},
		{map[string]string{"GENWAY_ROUTE_BUDGET": "soon"}, []string{"GENWAY_ROUTE_BUDGET"}},
		{map[string]string{"GENWAY_ROUTE_RETRIES": "-1"}, []string{"GENWAY_ROUTE_RETRIES"}},
		{map[string]string{"GENWAY_ROUTE_RETRIES": "2.5"}, []string{"GENWAY_ROUTE_RETRIES"}},
		{map[string]string{"GENWAY_ROUTE_RETRIES": "3 retries"}, []string{"GENWAY_ROUTE_RETRIES"}},
		{map[string]string{"GENWAY_ROUTE_FIRST_TOKEN": "0s"}, []string{"GENWAY_ROUTE_FIRST_TOKEN"}},
		{map[string]string{"GENWAY_RATE_LIMIT": "0"}, []string{"GENWAY_RATE_LIMIT must be requests per minute per key"}},
		{map[string]string{"GENWAY_SWEEP_AFTER": "soon"}, []string{"GENWAY_SWEEP_AFTER"}},
		{map[string]string{"GENWAY_BACKEND": "cloud"}, []string{`GENWAY_BACKEND must be embedded or aws, got "cloud"`}},
		{map[string]string{"GENWAY_CREDIT_USD": "0"}, []string{"GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the credit value"}},
		{map[string]string{"GENWAY_RECONCILE_DAYS": "0"}, []string{"GENWAY_RECONCILE_DAYS must be a positive number of days"}},
		{map[string]string{"GENWAY_IMAGES_KEEPALIVE": "0s"}, []string{"GENWAY_IMAGES_KEEPALIVE must be a positive duration such as 10s"}},
		{map[string]string{"GENWAY_WORKERS": "0", "GENWAY_MAX_CONNS": "x", "GENWAY_ROUTE_BUDGET": "soon", "GENWAY_DEV_KEY": "nope"},
			[]string{"GENWAY_WORKERS must be 1-64", "GENWAY_MAX_CONNS must be a positive integer", "GENWAY_ROUTE_BUDGET", "GENWAY_DEV_KEY must be " + auth.Prefix}},
	}
	for _, tt := range tests {
		_, err := load(t, Serve, tt.env)
		for _, want := range tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("LoadConfig(%v) = %v; want an error containing %q", tt.env, err, want)
			}
		}
		if err != nil {
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.wantErr) {
				t.Errorf("LoadConfig(%v) = %d errors (%v); want %d", tt.env, n, err, len(tt.wantErr))
			}
		}
	}
}

// TestLoadConfigBadValues: every variable LoadConfig parses, set to a
// bad value, is an error of its own that names it, says what it must be
// and quotes the value; all of them set at once are all reported.
func TestLoadConfigBadValues(t *testing.T) {
	tests := []struct{ name, value, must string }{
		{"GENWAY_DEV_CREDITS", "-1", "a non-negative number of credits (to 6 decimal places)"},
		{"GENWAY_WORKERS", "65", "1-64"},
		{"GENWAY_MEDIA_RETENTION", "30d", "a positive duration such as 720h"},
		{"GENWAY_IDLE_TIMEOUT", "0s", "a positive duration such as 30s"},
		{"GENWAY_MAX_CONNS", "0", "a positive integer"},
		{"GENWAY_MAX_CONNS_PER_ADDR", "-1", "a positive integer"},
		{"GENWAY_TEST_CLOCK_OFFSET", "31d", "a duration such as 744h (tests only)"},
		{"GENWAY_USAGE_FLUSH", "-1s", "a positive duration such as 1s or 500ms"},
		{"GENWAY_RATE_LIMIT", "-2", "requests per minute per key (or -1 for none)"},
		{"GENWAY_MAX_IN_FLIGHT_PER_KEY", "0", "a number of requests in progress at once (or -1 for none)"},
		{"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT", "1.5", "a number of requests in progress at once (or -1 for none)"},
		{"GENWAY_MAX_TEXT_BODY", "6291457", "a size from 1 byte to 6MiB (" + strconv.Itoa(httpapi.MaxBodyBytes) + " bytes), such as 2MiB"},
		{"GENWAY_BODY_MEMORY", "-01", "a size such as 256MiB (or -1 for no bound)"},
		{"GENWAY_RECORD_DAYS", "3651", "a whole number of days from 1 to 3650"},
		{"GENWAY_MEDIA_POLL", "10", "a positive duration such as 10s"},
		{"GENWAY_SWEEP_AFTER", "0s", "a positive duration such as 2m"},
		{"GENWAY_ROUTE_RETRIES", "11", "a count from 0 to 10"},
		{"GENWAY_ROUTE_BUDGET", "-5s", "a positive Go duration such as 30s"},
		{"GENWAY_ROUTE_BACKOFF", "soon", "a positive Go duration such as 30s"},
		{"GENWAY_ROUTE_FIRST_TOKEN", "0", "a positive Go duration such as 30s"},
		{"GENWAY_ROUTE_MAX_WAIT", "1 minute", "a positive Go duration such as 30s"},
		{"GENWAY_ROUTE_BREAKER_OPEN", "0ms", "a positive Go duration such as 30s"},
		{"GENWAY_ROUTE_BREAKERS", "no", "on or off"},
		{"GENWAY_JOB_RETENTION_DAYS", "0", "a positive number of days"},
		{"GENWAY_RECONCILE_DAYS", "7d", "a positive number of days"},
		{"GENWAY_CHAT_KEEPALIVE", "0s", "a positive duration such as 10s"},
		{"GENWAY_IMAGES_KEEPALIVE", "10", "a positive duration such as 10s"},
		{"GENWAY_BACKEND", "cloud", "embedded or aws"},
	}
	all := map[string]string{}
	for _, tt := range tests {
		all[tt.name] = tt.value
		want := tt.name + " must be " + tt.must + ", got " + strconv.Quote(tt.value)
		_, err := LoadConfig(Serve, func(k string) string { return map[string]string{tt.name: tt.value}[k] })
		if err == nil || err.Error() != want {
			t.Errorf("LoadConfig(%s=%q) = %v; want %q", tt.name, tt.value, err, want)
		}
	}
	_, err := LoadConfig(Lambda, func(k string) string { return all[k] })
	if err == nil {
		t.Fatalf("LoadConfig(every variable bad) = nil; want %d errors", len(tests))
	}
	if got := strings.Split(err.Error(), "\n"); len(got) != len(tests) {
		t.Errorf("LoadConfig(every variable bad) = %d errors (%v); want %d", len(got), err, len(tests))
	}
}

// TestLoadConfigEdges: the values at the edges of what a variable takes.
func TestLoadConfigEdges(t *testing.T) {
	tests := []struct {
		env  map[string]string
		got  func(Config) any
		want any
	}{
		{map[string]string{"GENWAY_ROUTE_RETRIES": " 3 "}, func(c Config) any { return c.Route.Retries }, 3},
		{map[string]string{"GENWAY_ROUTE_RETRIES": "10"}, func(c Config) any { return c.Route.Retries }, 10},
		{map[string]string{"GENWAY_RATE_LIMIT": "-01"}, func(c Config) any { return c.RateLimit }, -1},
		{map[string]string{"GENWAY_WORKERS": "64"}, func(c Config) any { return c.Workers }, 64},
		{map[string]string{"GENWAY_MAX_TEXT_BODY": "6MiB"}, func(c Config) any { return c.MaxTextBody }, int64(httpapi.MaxBodyBytes)},
		{map[string]string{"GENWAY_TEST_CLOCK_OFFSET": "-744h"}, func(c Config) any { return c.ClockOffset }, -744 * time.Hour},
		{map[string]string{"GENWAY_DEV_CREDITS": "0"}, func(c Config) any { return c.DevCredits }, credits.Amount(0)},
		{map[string]string{"GENWAY_DEV_CREDITS": "2.5"}, func(c Config) any { return c.DevCredits }, 5 * credits.Credit / 2},
		{map[string]string{"GENWAY_SWEEP_AFTER": "90s"}, func(c Config) any { return c.SweepAfter }, 90 * time.Second},
		{map[string]string{"GENWAY_MEDIA_POLL": "500ms"}, func(c Config) any { return c.MediaPoll }, 500 * time.Millisecond},
		{map[string]string{"GENWAY_RECONCILE_DAYS": "30"}, func(c Config) any { return c.ReconcileDays }, 30},
		{map[string]string{"GENWAY_BACKEND": "aws"}, func(c Config) any { return c.Backend }, "aws"},
		{map[string]string{"GENWAY_ROUTE_BREAKERS": "on"}, func(c Config) any { return c.Route.NoBreakers }, false},
	}
	for _, tt := range tests {
		c, err := LoadConfig(Serve, func(k string) string { return tt.env[k] })
		if err != nil {
			t.Errorf("LoadConfig(%v) = %v", tt.env, err)
			continue
		}
		if got := tt.got(c); got != tt.want {
			t.Errorf("LoadConfig(%v): %v; want %v", tt.env, got, tt.want)
		}
	}
}

// TestModeDefaults: what differs on purpose between genway serve and the
// Lambda functions is a Config field with each mode's default.
func TestModeDefaults(t *testing.T) {
	for _, tt := range []struct {
		mode Mode
		ttl  time.Duration
	}{{Serve, 5 * time.Second}, {Lambda, auth.DefaultCacheTTL}} {
		if got := DefaultConfig(tt.mode).AuthCacheTTL; got != tt.ttl {
			t.Errorf("DefaultConfig(%d).AuthCacheTTL = %v; want %v", tt.mode, got, tt.ttl)
		}
	}
}

// TestSecretsConstants: the configuration's copies of package secrets'
// constants agree with them.
func TestSecretsConstants(t *testing.T) {
	if parameterSuffix != secrets.ParameterSuffix || secretsTTL != secrets.DefaultTTL {
		t.Errorf("parameterSuffix, secretsTTL = %q, %v; want secrets' %q, %v", parameterSuffix, secretsTTL, secrets.ParameterSuffix, secrets.DefaultTTL)
	}
}

// TestHTTPConstants: the configuration's copies of package httpapi's
// constants agree with them.
func TestHTTPConstants(t *testing.T) {
	if defaultTextBody != httpapi.DefaultTextBodyBytes || defaultBodyMemory != httpapi.DefaultBodyMemory || maxBody != httpapi.MaxBodyBytes ||
		defaultHeartbeat != httpapi.DefaultChatHeartbeat {
		t.Errorf("defaultTextBody, defaultBodyMemory, maxBody, defaultHeartbeat = %d, %d, %d, %v; want httpapi's %d, %d, %d, %v",
			defaultTextBody, defaultBodyMemory, maxBody, defaultHeartbeat,
			httpapi.DefaultTextBodyBytes, httpapi.DefaultBodyMemory, httpapi.MaxBodyBytes, httpapi.DefaultChatHeartbeat)
	}
	if want := "6MiB (" + strconv.Itoa(httpapi.MaxBodyBytes) + " bytes)"; maxBodyWords != want || maxBody != 6<<20 {
		t.Errorf("maxBodyWords = %q; want %q", maxBodyWords, want)
	}
}

// TestCatalogPricing: the catalog is loaded with the stack's credit value
// and markup; a bad value is an error naming the variables.
func TestCatalogPricing(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    credits.Amount // gpt-4o-mini's input price per million tokens ($0.15)
		wantErr string
	}{
		{nil, 15 * credits.Credit, ""},
		{map[string]string{"GENWAY_CREDIT_USD": "0.003", "GENWAY_PRICE_MARKUP": "12.5"}, 56_250_000, ""},
		{map[string]string{"GENWAY_PRICE_MARKUP": "100"}, 30 * credits.Credit, ""},
		{map[string]string{"GENWAY_CREDIT_USD": "0"}, 0, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the credit value"},
		{map[string]string{"GENWAY_PRICE_MARKUP": "-1"}, 0, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the markup"},
	}
	for _, tt := range tests {
		c, err := load(t, Lambda, tt.env)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadConfig(%v) = %v; want an error containing %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("LoadConfig(%v) = %v", tt.env, err)
		}
		m, _ := c.Catalog.Model("openai/gpt-4o-mini")
		if got := m.Price.CreditsPerMillionInput; got != tt.want {
			t.Errorf("LoadConfig(%v): gpt-4o-mini input = %s credits per million; want %s", tt.env, got, tt.want)
		}
	}
}

// TestOpenCatalog: the catalog alone is LoadCatalog's, priced alike.
func TestOpenCatalog(t *testing.T) {
	env := map[string]string{"GENWAY_CREDIT_USD": "0.003", "GENWAY_PRICE_MARKUP": "12.5"}
	c, err := load(t, Lambda, env)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := OpenCatalog(&c)
	if err != nil {
		t.Fatalf("OpenCatalog = %v", err)
	}
	for _, id := range []string{"openai/gpt-4o-mini", "synthetic-video"} {
		got, ok1 := cat.Model(id)
		want, ok2 := c.Catalog.Model(id)
		if !ok1 || !ok2 || got.Price.CreditsPerMillionInput != want.Price.CreditsPerMillionInput || got.Price.CreditsPerSecond != want.Price.CreditsPerSecond {
			t.Errorf("OpenCatalog: %s found %v, priced %s, %s; want LoadCatalog's (found %v) %s, %s", id, ok1,
				got.Price.CreditsPerMillionInput, got.Price.CreditsPerSecond, ok2, want.Price.CreditsPerMillionInput, want.Price.CreditsPerSecond)
		}
	}
}
