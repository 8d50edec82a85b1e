package app

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/transport/httpapi"
)

// Mode is how the process runs: it chooses the defaults of the settings
// that differ on purpose between `genway serve` and the Lambda functions.
type Mode int

// Modes.
const (
	// Serve is `genway serve` (and the operator CLI): one long-lived
	// process.
	Serve Mode = iota
	// Lambda is a deployed function: a container per concurrent request.
	Lambda
)

// Config is the whole configuration of a Genway process: every GENWAY_*
// variable, the AWS names and endpoints, and the vendors' variables the
// catalog names, parsed once (LoadConfig) into typed fields. Nothing else
// reads the environment; the packages below take these values.
type Config struct {
	// genway serve.
	Addr            string         // GENWAY_ADDR: the listen address
	DataDir         string         // GENWAY_DATA_DIR: the embedded store, media, secrets, admin socket
	PublicURL       string         // GENWAY_PUBLIC_URL: base of media links ("": http://<Addr>)
	DevKey          string         // GENWAY_DEV_KEY: the dev account's key ("": made on first start)
	DevCredits      credits.Amount // GENWAY_DEV_CREDITS: the dev account's first credits
	Workers         int            // GENWAY_WORKERS: concurrent job workers
	UsageFlush      time.Duration  // GENWAY_USAGE_FLUSH: how often buffered chat usage is written
	MediaRetention  time.Duration  // GENWAY_MEDIA_RETENTION: local outputs deleted after
	IdleTimeout     time.Duration  // GENWAY_IDLE_TIMEOUT: idle keep-alive connections closed after
	MaxConns        int            // GENWAY_MAX_CONNS: open connections at once
	MaxConnsPerAddr int            // GENWAY_MAX_CONNS_PER_ADDR: open connections from one client address
	// ClockOffset (GENWAY_TEST_CLOCK_OFFSET, tests only) is added to the
	// clock that authenticates keys.
	ClockOffset time.Duration
	Backend     string // GENWAY_BACKEND: "embedded" or "aws"
	AdminToken  string // GENWAY_ADMIN_TOKEN: the operator token ("": made at first start); the CLI's for URL

	// The operator CLI.
	URL    string // GENWAY_URL: a deployment's base URL (remote mode)
	APIKey string // GENWAY_API_KEY: the key the CLI's API commands use

	// Both modes.
	CatalogPath string          // GENWAY_CATALOG: a catalog file ("": the embedded one)
	Pricing     catalog.Pricing // GENWAY_CREDIT_USD, GENWAY_PRICE_MARKUP
	// Catalog is the catalog CatalogPath names, priced with Pricing, once
	// LoadCatalog has loaded it (with the vendors' variables it names:
	// Providers.Vars, Parameters); nil before.
	Catalog *catalog.Catalog
	// Providers is how the catalog's providers are configured:
	// GENWAY_CONFIGURED, GENWAY_SYNTHETIC, GENWAY_BEDROCK, GENWAY_NATIVE,
	// and the variables the catalog names (keys, base URLs).
	Providers catalog.Setup
	// Parameters holds, by the name of a vendor variable, the SSM
	// parameter its <NAME>_PARAMETER variable names (Lambda: the vendor
	// keys are read from SSM; see secrets.Lookup).
	Parameters map[string]string
	// Vertex configures Veo on Vertex AI (GOOGLE_VERTEX_PROJECT,
	// GOOGLE_VERTEX_REGION, GOOGLE_VERTEX_STORAGE_URI).
	Vertex              Vertex
	RateLimit           int             // GENWAY_RATE_LIMIT: requests per minute per key (-1 none)
	InFlightPerKey      int             // GENWAY_MAX_IN_FLIGHT_PER_KEY (-1 none)
	InFlightPerAccount  int             // GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT (-1 none)
	MaxTextBody         int64           // GENWAY_MAX_TEXT_BODY: bytes
	BodyMemory          int64           // GENWAY_BODY_MEMORY: bytes (-1 none)
	RecordRetention     time.Duration   // GENWAY_RECORD_DAYS
	MediaPoll           time.Duration   // GENWAY_MEDIA_POLL: between polls of a long-running vendor
	SweepAfter          time.Duration   // GENWAY_SWEEP_AFTER: AWS, a queued job's message sent again after
	Route               route.Policy    // GENWAY_ROUTE_*
	WebhookAllowPrivate bool            // GENWAY_WEBHOOK_ALLOW_PRIVATE=1
	MediaAllowPrivate   bool            // GENWAY_MEDIA_ALLOW_PRIVATE=1
	AWS                 awsenv.Settings // AWS_REGION, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB
	Names               awsenv.Names    // GENWAY_JOBS_TABLE, ...: the AWS resources
	// AuthCacheTTL is how long a resolved key is cached (not a
	// variable): 5 s in `genway serve`, whose revocations should show at
	// once; auth.DefaultCacheTTL (30 s) on Lambda, where each container
	// has its own cache and every miss is a DynamoDB read.
	AuthCacheTTL time.Duration
	// SecretsTTL is how often a Lambda function reads its SSM
	// parameters again (vendor keys, the operator token): not a
	// variable, secrets.DefaultTTL.
	SecretsTTL time.Duration

	// The Lambda functions.
	JobRetention           time.Duration // GENWAY_JOB_RETENTION_DAYS: a final job's TTL
	ReconcileDays          int           // GENWAY_RECONCILE_DAYS: how far back the reconciler looks
	ChatKeepAlive          time.Duration // GENWAY_CHAT_KEEPALIVE
	ImagesKeepAlive        time.Duration // GENWAY_IMAGES_KEEPALIVE
	AdminTokenParameter    string        // GENWAY_ADMIN_TOKEN_PARAMETER
	ConsoleSecretParameter string        // GENWAY_CONSOLE_SECRET_PARAMETER
}

// Vertex is the configuration of Veo on Vertex AI besides its key.
type Vertex struct {
	Project    string // GOOGLE_VERTEX_PROJECT ("": the key's project_id)
	Region     string // GOOGLE_VERTEX_REGION ("": us-central1)
	StorageURI string // GOOGLE_VERTEX_STORAGE_URI ("": videos answered inline)
}

// DefaultConfig returns the configuration of mode with no variable set
// (Catalog is not loaded: LoadConfig loads it).
func DefaultConfig(mode Mode) Config {
	c := Config{
		Addr: "127.0.0.1:8080", DataDir: ".genway", DevCredits: 1000 * credits.Credit, Workers: 2,
		UsageFlush: chat.DefaultUsageFlush, MediaRetention: DefaultMediaRetention, IdleTimeout: DefaultIdleTimeout,
		MaxConns: DefaultMaxConns, MaxConnsPerAddr: DefaultMaxConnsPerAddr, Backend: "embedded",
		RateLimit: ratelimit.DefaultPerMinute, InFlightPerKey: ratelimit.DefaultInFlightPerKey, InFlightPerAccount: ratelimit.DefaultInFlightPerAccount,
		MaxTextBody: httpapi.DefaultTextBodyBytes, BodyMemory: httpapi.DefaultBodyMemory, RecordRetention: credits.DefaultRecordRetention,
		MediaPoll: jobs.DefaultPollInterval, SweepAfter: jobs.DefaultSweepAfter, Route: route.DefaultPolicy,
		Names: awsenv.Names{JobsTable: awsenv.DefaultJobsTable, AccountsTable: awsenv.DefaultAccountsTable, RecordsTable: awsenv.DefaultRecordsTable,
			JobsQueue: awsenv.DefaultJobsQueue, JobsDLQ: awsenv.DefaultJobsDLQ, MediaBucket: awsenv.DefaultMediaBucket,
			WebhooksQueue: awsenv.DefaultWebhooksQueue, WebhooksDLQ: awsenv.DefaultWebhooksDLQ},
		AuthCacheTTL: 5 * time.Second, SecretsTTL: secretsTTL,
		JobRetention: dynamostore.DefaultJobRetention, ReconcileDays: 7,
		ChatKeepAlive: httpapi.DefaultChatHeartbeat, ImagesKeepAlive: httpapi.DefaultChatHeartbeat,
	}
	if mode == Lambda {
		c.AuthCacheTTL = auth.DefaultCacheTTL
	}
	return c
}

// The connection bounds of `genway serve` (GENWAY_MAX_CONNS,
// GENWAY_MAX_CONNS_PER_ADDR, GENWAY_IDLE_TIMEOUT) when unset.
const (
	DefaultMaxConns        = 4096
	DefaultMaxConnsPerAddr = 512
	DefaultIdleTimeout     = 30 * time.Second
)

// DefaultMediaRetention is how long `genway serve` keeps its local outputs
// (GENWAY_MEDIA_RETENTION unset): as long as the S3 bucket's lifecycle
// rule keeps them on AWS (30 days).
const DefaultMediaRetention = 30 * 24 * time.Hour

// parameterSuffix and secretsTTL are secrets.ParameterSuffix and
// secrets.DefaultTTL (a test checks it), written here so that the
// configuration does not link the SSM client into every function.
const (
	parameterSuffix = "_PARAMETER"
	secretsTTL      = 5 * time.Minute
)

// vertexVars are the variables of Vertex.
var vertexVars = []string{"GOOGLE_VERTEX_PROJECT", "GOOGLE_VERTEX_REGION", "GOOGLE_VERTEX_STORAGE_URI"}

// LoadConfig reads the configuration of mode through getenv: each
// variable once, an unset (empty) one keeping DefaultConfig's value. Every
// bad value is an error naming its variable; they are returned together
// (errors.Join). The catalog and the vendors' variables it names are read
// by LoadCatalog, for the processes that use them.
func LoadConfig(mode Mode, getenv func(string) string) (Config, error) {
	c := DefaultConfig(mode)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	// positive reads a positive Go duration; hint is the message's example.
	positive := func(name, hint string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				bad("%s must be a positive duration such as %s, got %q", name, hint, v)
				return
			}
			*dst = d
		}
	}

	str("GENWAY_ADDR", &c.Addr)
	str("GENWAY_DATA_DIR", &c.DataDir)
	str("GENWAY_PUBLIC_URL", &c.PublicURL)
	str("GENWAY_DEV_KEY", &c.DevKey)
	if c.DevKey != "" && !auth.ValidKey(c.DevKey) {
		bad("GENWAY_DEV_KEY must be %s followed by at least 32 letters and digits", auth.Prefix)
	}
	if v := getenv("GENWAY_DEV_CREDITS"); v != "" {
		n, err := credits.ParseAmount(v)
		if err != nil || n < 0 {
			bad("GENWAY_DEV_CREDITS must be a non-negative number of credits (to 6 decimal places), got %q", v)
		} else {
			c.DevCredits = n
		}
	}
	if v := getenv("GENWAY_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			bad("GENWAY_WORKERS must be 1-64, got %q", v)
		} else {
			c.Workers = n
		}
	}
	positive("GENWAY_MEDIA_RETENTION", "720h", &c.MediaRetention)
	positive("GENWAY_IDLE_TIMEOUT", "30s", &c.IdleTimeout)
	for _, v := range []struct {
		name string
		dst  *int
	}{{"GENWAY_MAX_CONNS", &c.MaxConns}, {"GENWAY_MAX_CONNS_PER_ADDR", &c.MaxConnsPerAddr}} {
		if s := getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				bad("%s must be a positive integer, got %q", v.name, s)
			} else {
				*v.dst = n
			}
		}
	}
	if v := getenv("GENWAY_TEST_CLOCK_OFFSET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			bad("GENWAY_TEST_CLOCK_OFFSET (tests only) must be a duration such as 744h, got %q", v)
		} else {
			c.ClockOffset = d
		}
	}
	positive("GENWAY_USAGE_FLUSH", "1s or 500ms", &c.UsageFlush)
	switch v := getenv("GENWAY_BACKEND"); v {
	case "", "embedded", "aws":
		str("GENWAY_BACKEND", &c.Backend)
	default:
		bad("GENWAY_BACKEND must be embedded or aws, got %q", v)
	}
	str("GENWAY_ADMIN_TOKEN", &c.AdminToken)
	str("GENWAY_URL", &c.URL)
	str("GENWAY_API_KEY", &c.APIKey)

	str("GENWAY_CATALOG", &c.CatalogPath)
	pricing, err := catalog.ParsePricing(getenv("GENWAY_CREDIT_USD"), getenv("GENWAY_PRICE_MARKUP"))
	if err != nil {
		bad("GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: %w", err)
	} else {
		c.Pricing = pricing
	}
	if v := getenv("GENWAY_RATE_LIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || n < -1 {
			bad("GENWAY_RATE_LIMIT must be requests per minute per key (or -1 for none), got %q", v)
		} else {
			c.RateLimit = n
		}
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{"GENWAY_MAX_IN_FLIGHT_PER_KEY", &c.InFlightPerKey}, {"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT", &c.InFlightPerAccount}} {
		if s := getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n == 0 || n < -1 {
				bad("%s must be a number of requests in progress at once (or -1 for none), got %q", v.name, s)
			} else {
				*v.n = n
			}
		}
	}
	if v := getenv("GENWAY_MAX_TEXT_BODY"); v != "" {
		n, ok := parseBytes(v)
		if !ok || n < 1 || n > httpapi.MaxBodyBytes {
			bad("GENWAY_MAX_TEXT_BODY must be a size from 1 byte to 6MiB (%d bytes), such as 2MiB, got %q", httpapi.MaxBodyBytes, v)
		} else {
			c.MaxTextBody = n
		}
	}
	if v := getenv("GENWAY_BODY_MEMORY"); v != "" {
		n, ok := parseBytes(v)
		switch {
		case v == "-1":
			c.BodyMemory = -1
		case !ok || n < 1:
			bad("GENWAY_BODY_MEMORY must be a size such as 256MiB (or -1 for no bound), got %q", v)
		default:
			c.BodyMemory = n
		}
	}
	if v := getenv("GENWAY_RECORD_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3650 {
			bad("GENWAY_RECORD_DAYS must be a whole number of days from 1 to 3650, got %q", v)
		} else {
			c.RecordRetention = time.Duration(n) * 24 * time.Hour
		}
	}
	if d, err := jobs.ParsePollInterval(getenv("GENWAY_MEDIA_POLL")); err != nil {
		bad("GENWAY_MEDIA_POLL: %w", err)
	} else {
		c.MediaPoll = d
	}
	if d, err := jobs.ParseSweepAfter(getenv("GENWAY_SWEEP_AFTER")); err != nil {
		bad("GENWAY_SWEEP_AFTER: %w", err)
	} else {
		c.SweepAfter = d
	}
	errs = append(errs, loadPolicy(getenv, &c.Route)...)
	c.WebhookAllowPrivate = getenv("GENWAY_WEBHOOK_ALLOW_PRIVATE") == "1"
	c.MediaAllowPrivate = getenv("GENWAY_MEDIA_ALLOW_PRIVATE") == "1"

	c.AWS = awsenv.Settings{Region: getenv("AWS_REGION"), Endpoint: getenv("AWS_ENDPOINT_URL"), EndpointDynamoDB: getenv("AWS_ENDPOINT_URL_DYNAMODB")}
	str(awsenv.EnvJobsTable, &c.Names.JobsTable)
	str(awsenv.EnvAccountsTable, &c.Names.AccountsTable)
	str(awsenv.EnvRecordsTable, &c.Names.RecordsTable)
	str(awsenv.EnvJobsQueue, &c.Names.JobsQueue)
	str(awsenv.EnvJobsQueueURL, &c.Names.JobsQueueURL)
	str(awsenv.EnvJobsDLQ, &c.Names.JobsDLQ)
	str(awsenv.EnvMediaBucket, &c.Names.MediaBucket)
	str(awsenv.EnvWebhooksQueue, &c.Names.WebhooksQueue)
	str(awsenv.EnvWebhooksQueueURL, &c.Names.WebhooksQueueURL)
	str(awsenv.EnvWebhooksDLQ, &c.Names.WebhooksDLQ)

	if v := getenv("GENWAY_JOB_RETENTION_DAYS"); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days <= 0 {
			bad("GENWAY_JOB_RETENTION_DAYS must be a positive number of days, got %q", v)
		} else {
			c.JobRetention = time.Duration(days) * 24 * time.Hour
		}
	}
	if v := getenv("GENWAY_RECONCILE_DAYS"); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 1 {
			bad("GENWAY_RECONCILE_DAYS must be a positive number of days, got %q", v)
		} else {
			c.ReconcileDays = days
		}
	}
	positive("GENWAY_CHAT_KEEPALIVE", "10s", &c.ChatKeepAlive)
	positive("GENWAY_IMAGES_KEEPALIVE", "10s", &c.ImagesKeepAlive)
	str("GENWAY_ADMIN_TOKEN_PARAMETER", &c.AdminTokenParameter)
	str("GENWAY_CONSOLE_SECRET_PARAMETER", &c.ConsoleSecretParameter)

	// The providers: the switches, then the variables the catalog names.
	for _, n := range strings.Split(getenv("GENWAY_CONFIGURED"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			c.Providers.Configured = append(c.Providers.Configured, n)
		}
	}
	c.Providers.NoSynthetic = getenv("GENWAY_SYNTHETIC") == "off"
	c.Providers.Bedrock = getenv("GENWAY_BEDROCK") == "on"
	c.Providers.NoNative = getenv("GENWAY_NATIVE") == "off"
	c.Vertex = Vertex{Project: getenv(vertexVars[0]), Region: getenv(vertexVars[1]), StorageURI: getenv(vertexVars[2])}
	return c, errors.Join(errs...)
}

// LoadCatalog loads the catalog c names (CatalogPath, priced with
// Pricing) into c.Catalog and reads, through getenv, the vendors'
// variables it names (their keys and base URLs, and the SSM parameters
// of the keys). Only the processes that serve models call it: the
// others (the credits functions, the sweeper) need no catalog.
func LoadCatalog(c *Config, getenv func(string) string) error {
	cat, err := catalog.Load(c.CatalogPath, c.Pricing)
	if err != nil {
		return err
	}
	c.Catalog = cat
	c.Providers.Vars = map[string]string{}
	c.Parameters = map[string]string{}
	for _, n := range cat.EnvNames() {
		if v := getenv(n); v != "" {
			c.Providers.Vars[n] = v
		}
		if v := getenv(n + parameterSuffix); v != "" {
			c.Parameters[n] = v
		}
	}
	return nil
}

// loadPolicy applies the GENWAY_ROUTE_* variables of getenv to p:
// GENWAY_ROUTE_RETRIES (a count; 0 for none), GENWAY_ROUTE_BUDGET,
// GENWAY_ROUTE_FIRST_TOKEN, GENWAY_ROUTE_BACKOFF, GENWAY_ROUTE_MAX_WAIT and
// GENWAY_ROUTE_BREAKER_OPEN (Go durations), and GENWAY_ROUTE_BREAKERS (on,
// the default, or off). It returns an error per malformed value.
func loadPolicy(getenv func(string) string, p *route.Policy) []error {
	var errs []error
	switch v := getenv("GENWAY_ROUTE_BREAKERS"); v {
	case "", "on":
	case "off":
		p.NoBreakers = true
	default:
		errs = append(errs, fmt.Errorf("GENWAY_ROUTE_BREAKERS=%q: want on or off", v))
	}
	if v := getenv("GENWAY_ROUTE_RETRIES"); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 || n > 10 {
			errs = append(errs, fmt.Errorf("GENWAY_ROUTE_RETRIES=%q: want a count from 0 to 10", v))
		} else {
			p.Retries = n
			if n == 0 {
				p.Retries = -1
			}
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"GENWAY_ROUTE_BUDGET", &p.Budget},
		{"GENWAY_ROUTE_BACKOFF", &p.Backoff},
		{"GENWAY_ROUTE_FIRST_TOKEN", &p.FirstToken},
		{"GENWAY_ROUTE_MAX_WAIT", &p.MaxWait},
		{"GENWAY_ROUTE_BREAKER_OPEN", &p.BreakerOpen},
	} {
		if v := getenv(d.name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", d.name, v))
				continue
			}
			*d.dst = x
		}
	}
	return errs
}

// parseBytes parses a count of bytes, optionally ending in KiB, MiB or
// GiB.
func parseBytes(s string) (int64, bool) {
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, unit = n, u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/unit || n < -1 {
		return 0, false
	}
	return n * unit, true
}
