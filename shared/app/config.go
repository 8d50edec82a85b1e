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
		MaxTextBody: defaultTextBody, BodyMemory: defaultBodyMemory, RecordRetention: credits.DefaultRecordRetention,
		MediaPoll: jobs.DefaultPollInterval, SweepAfter: jobs.DefaultSweepAfter, Route: route.DefaultPolicy,
		Names: awsenv.Names{JobsTable: awsenv.DefaultJobsTable, AccountsTable: awsenv.DefaultAccountsTable, RecordsTable: awsenv.DefaultRecordsTable,
			JobsQueue: awsenv.DefaultJobsQueue, JobsDLQ: awsenv.DefaultJobsDLQ, MediaBucket: awsenv.DefaultMediaBucket,
			WebhooksQueue: awsenv.DefaultWebhooksQueue, WebhooksDLQ: awsenv.DefaultWebhooksDLQ},
		AuthCacheTTL: 5 * time.Second, SecretsTTL: secretsTTL,
		JobRetention: dynamostore.DefaultJobRetention, ReconcileDays: 7,
		ChatKeepAlive: defaultHeartbeat, ImagesKeepAlive: defaultHeartbeat,
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

// The HTTP edge's bounds and heartbeat: httpapi.DefaultTextBodyBytes,
// DefaultBodyMemory, MaxBodyBytes (maxBodyWords in words, for an error)
// and DefaultChatHeartbeat (a test checks them), written here so that the
// configuration does not link the HTTP edge into the functions that serve
// no routes (credits, jobs-sweeper, worker).
const (
	defaultTextBody   = 2 << 20
	defaultBodyMemory = 256 << 20
	maxBody           = 6 << 20
	maxBodyWords      = "6MiB (6291456 bytes)"
	defaultHeartbeat  = 10 * time.Second
)

// LoadConfig reads the configuration of mode through getenv: each
// variable once, an unset (empty) one keeping DefaultConfig's value. Every
// bad value is an error naming its variable, saying what it must be and
// quoting it; they are returned together (errors.Join). The catalog and
// the vendors' variables it names are read by LoadCatalog, for the
// processes that use them.
func LoadConfig(mode Mode, getenv func(string) string) (Config, error) {
	c := DefaultConfig(mode)
	var errs []error

	// The variables taken as they are.
	for _, s := range [...]struct {
		name string
		dst  *string
	}{
		{"GENWAY_ADDR", &c.Addr}, {"GENWAY_DATA_DIR", &c.DataDir}, {"GENWAY_PUBLIC_URL", &c.PublicURL},
		{"GENWAY_DEV_KEY", &c.DevKey}, {"GENWAY_ADMIN_TOKEN", &c.AdminToken}, {"GENWAY_URL", &c.URL},
		{"GENWAY_API_KEY", &c.APIKey}, {"GENWAY_CATALOG", &c.CatalogPath},
		{"AWS_REGION", &c.AWS.Region}, {"AWS_ENDPOINT_URL", &c.AWS.Endpoint}, {"AWS_ENDPOINT_URL_DYNAMODB", &c.AWS.EndpointDynamoDB},
		{awsenv.EnvJobsTable, &c.Names.JobsTable}, {awsenv.EnvAccountsTable, &c.Names.AccountsTable},
		{awsenv.EnvRecordsTable, &c.Names.RecordsTable}, {awsenv.EnvJobsQueue, &c.Names.JobsQueue},
		{awsenv.EnvJobsQueueURL, &c.Names.JobsQueueURL}, {awsenv.EnvJobsDLQ, &c.Names.JobsDLQ},
		{awsenv.EnvMediaBucket, &c.Names.MediaBucket}, {awsenv.EnvWebhooksQueue, &c.Names.WebhooksQueue},
		{awsenv.EnvWebhooksQueueURL, &c.Names.WebhooksQueueURL}, {awsenv.EnvWebhooksDLQ, &c.Names.WebhooksDLQ},
		{"GENWAY_ADMIN_TOKEN_PARAMETER", &c.AdminTokenParameter}, {"GENWAY_CONSOLE_SECRET_PARAMETER", &c.ConsoleSecretParameter},
		{"GOOGLE_VERTEX_PROJECT", &c.Vertex.Project}, {"GOOGLE_VERTEX_REGION", &c.Vertex.Region},
		{"GOOGLE_VERTEX_STORAGE_URI", &c.Vertex.StorageURI},
	} {
		if v := getenv(s.name); v != "" {
			*s.dst = v
		}
	}
	if c.DevKey != "" && !auth.ValidKey(c.DevKey) {
		// The key is a secret: the error does not quote it.
		errs = append(errs, errors.New("GENWAY_DEV_KEY must be "+auth.Prefix+" followed by at least 32 letters and digits"))
	}

	// The variables parsed into numbers and durations: one row each.
	const most = math.MaxInt64
	settings := [...]setting{
		{"GENWAY_DEV_CREDITS", amount, 0, 0, most, "a non-negative number of credits (to 6 decimal places)", &c.DevCredits},
		{"GENWAY_WORKERS", integer, 0, 1, 64, "1-64", &c.Workers},
		{"GENWAY_MEDIA_RETENTION", positive, 0, 0, 0, "a positive duration such as 720h", &c.MediaRetention},
		{"GENWAY_IDLE_TIMEOUT", positive, 0, 0, 0, "a positive duration such as 30s", &c.IdleTimeout},
		{"GENWAY_MAX_CONNS", integer, 0, 1, most, "a positive integer", &c.MaxConns},
		{"GENWAY_MAX_CONNS_PER_ADDR", integer, 0, 1, most, "a positive integer", &c.MaxConnsPerAddr},
		{"GENWAY_TEST_CLOCK_OFFSET", duration, 0, 0, 0, "a duration such as 744h (tests only)", &c.ClockOffset},
		{"GENWAY_USAGE_FLUSH", positive, 0, 0, 0, "a positive duration such as 1s or 500ms", &c.UsageFlush},
		{"GENWAY_RATE_LIMIT", integer, orNone, 1, most, "requests per minute per key (or -1 for none)", &c.RateLimit},
		{"GENWAY_MAX_IN_FLIGHT_PER_KEY", integer, orNone, 1, most, "a number of requests in progress at once (or -1 for none)", &c.InFlightPerKey},
		{"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT", integer, orNone, 1, most, "a number of requests in progress at once (or -1 for none)", &c.InFlightPerAccount},
		{"GENWAY_MAX_TEXT_BODY", size, 0, 1, maxBody, "a size from 1 byte to " + maxBodyWords + ", such as 2MiB", &c.MaxTextBody},
		{"GENWAY_BODY_MEMORY", size, orNone, 1, most, "a size such as 256MiB (or -1 for no bound)", &c.BodyMemory},
		{"GENWAY_RECORD_DAYS", days, 0, 1, 3650, "a whole number of days from 1 to 3650", &c.RecordRetention},
		{"GENWAY_MEDIA_POLL", positive, 0, 0, 0, "a positive duration such as 10s", &c.MediaPoll},
		{"GENWAY_SWEEP_AFTER", positive, 0, 0, 0, "a positive duration such as 2m", &c.SweepAfter},
		// GENWAY_ROUTE_RETRIES=0 is none: route.Policy's -1.
		{"GENWAY_ROUTE_RETRIES", integer, trim | zeroNone, 0, 10, "a count from 0 to 10", &c.Route.Retries},
		{"GENWAY_ROUTE_BUDGET", positive, 0, 0, 0, "a positive Go duration such as 30s", &c.Route.Budget},
		{"GENWAY_ROUTE_BACKOFF", positive, 0, 0, 0, "a positive Go duration such as 30s", &c.Route.Backoff},
		{"GENWAY_ROUTE_FIRST_TOKEN", positive, 0, 0, 0, "a positive Go duration such as 30s", &c.Route.FirstToken},
		{"GENWAY_ROUTE_MAX_WAIT", positive, 0, 0, 0, "a positive Go duration such as 30s", &c.Route.MaxWait},
		{"GENWAY_ROUTE_BREAKER_OPEN", positive, 0, 0, 0, "a positive Go duration such as 30s", &c.Route.BreakerOpen},
		{"GENWAY_JOB_RETENTION_DAYS", days, 0, 1, most, "a positive number of days", &c.JobRetention},
		{"GENWAY_RECONCILE_DAYS", integer, 0, 1, most, "a positive number of days", &c.ReconcileDays},
		{"GENWAY_CHAT_KEEPALIVE", positive, 0, 0, 0, "a positive duration such as 10s", &c.ChatKeepAlive},
		{"GENWAY_IMAGES_KEEPALIVE", positive, 0, 0, 0, "a positive duration such as 10s", &c.ImagesKeepAlive},
	}
	for i := range settings {
		s := &settings[i]
		if v := getenv(s.name); v != "" && !s.parse(v) {
			errs = append(errs, &badValue{s.name, s.must, v})
		}
	}

	// The variables of a few words.
	switch v := getenv("GENWAY_BACKEND"); v {
	case "":
	case "embedded", "aws":
		c.Backend = v
	default:
		errs = append(errs, &badValue{"GENWAY_BACKEND", "embedded or aws", v})
	}
	switch v := getenv("GENWAY_ROUTE_BREAKERS"); v {
	case "", "on":
	case "off":
		c.Route.NoBreakers = true
	default:
		errs = append(errs, &badValue{"GENWAY_ROUTE_BREAKERS", "on or off", v})
	}
	pricing, err := catalog.ParsePricing(getenv("GENWAY_CREDIT_USD"), getenv("GENWAY_PRICE_MARKUP"))
	if err != nil {
		errs = append(errs, fmt.Errorf("GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: %w", err))
	} else {
		c.Pricing = pricing
	}
	c.WebhookAllowPrivate = getenv("GENWAY_WEBHOOK_ALLOW_PRIVATE") == "1"
	c.MediaAllowPrivate = getenv("GENWAY_MEDIA_ALLOW_PRIVATE") == "1"

	// The providers: the switches, then the variables the catalog names.
	for _, n := range strings.Split(getenv("GENWAY_CONFIGURED"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			c.Providers.Configured = append(c.Providers.Configured, n)
		}
	}
	c.Providers.NoSynthetic = getenv("GENWAY_SYNTHETIC") == "off"
	c.Providers.Bedrock = getenv("GENWAY_BEDROCK") == "on"
	c.Providers.NoNative = getenv("GENWAY_NATIVE") == "off"
	return c, errors.Join(errs...)
}

// badValue is the error of a variable whose value LoadConfig cannot read:
// one format for every variable, written once.
type badValue struct {
	name  string // the variable
	must  string // what its value must be: "a positive duration such as 10s"
	value string
}

func (e *badValue) Error() string {
	return e.name + " must be " + e.must + ", got " + strconv.Quote(e.value)
}

// A setting is a row of LoadConfig's table: a variable, how its text is
// read into the field dst points to, the bounds of its number, and what a
// value must be (the words of its error).
type setting struct {
	name     string
	kind     kind
	opts     opts
	min, max int64  // a number's bounds (integer, days, size)
	must     string // "<name> must be <must>, got <value>"
	dst      any    // *time.Duration, *int, *int64 or *credits.Amount, as kind says
}

// kind is how a setting's text is read.
type kind uint8

const (
	positive kind = iota // a Go duration above 0 (*time.Duration)
	duration             // any Go duration (*time.Duration)
	integer              // a whole number in min..max (*int)
	days                 // a whole number of days in min..max (*time.Duration)
	size                 // bytes, or KiB, MiB or GiB, in min..max (*int64)
	amount               // a non-negative amount of credits (*credits.Amount)
)

// opts are a setting's exceptions to its kind.
type opts uint8

const (
	orNone   opts = 1 << iota // -1 (none) is accepted besides min..max (a size: "-1" as written)
	trim                      // spaces around the number are ignored
	zeroNone                  // 0 is stored as -1 (none)
)

// parse reads v into s.dst; it reports false, storing nothing, if v is
// not a value of s.
func (s *setting) parse(v string) bool {
	switch s.kind {
	case positive, duration:
		d, err := time.ParseDuration(v)
		if err != nil || (d <= 0 && s.kind == positive) {
			return false
		}
		*s.dst.(*time.Duration) = d
	case amount:
		n, err := credits.ParseAmount(v)
		if err != nil || n < 0 {
			return false
		}
		*s.dst.(*credits.Amount) = n
	case size:
		if s.opts&orNone != 0 && v == "-1" {
			*s.dst.(*int64) = -1
			return true
		}
		n, ok := parseBytes(v)
		if !ok || n < s.min || n > s.max {
			return false
		}
		*s.dst.(*int64) = n
	default: // integer, days
		if s.opts&trim != 0 {
			v = strings.TrimSpace(v)
		}
		n, err := strconv.Atoi(v)
		if err != nil || (int64(n) < s.min || int64(n) > s.max) && !(n == -1 && s.opts&orNone != 0) {
			return false
		}
		switch {
		case s.kind == days:
			*s.dst.(*time.Duration) = time.Duration(n) * 24 * time.Hour
		case n == 0 && s.opts&zeroNone != 0:
			*s.dst.(*int) = -1
		default:
			*s.dst.(*int) = n
		}
	}
	return true
}

// LoadCatalog loads the catalog c names (OpenCatalog) into c.Catalog and
// reads, through getenv, the vendors' variables it names (their keys and
// base URLs, and the SSM parameters of the keys). Only the processes that
// serve models call it: the others (the credits functions, the sweeper)
// need no catalog.
func LoadCatalog(c *Config, getenv func(string) string) error {
	cat, err := OpenCatalog(c)
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

// OpenCatalog returns the catalog c names (CatalogPath, else the embedded
// one), its list prices converted into credits with c.Pricing, without
// reading the vendors' variables (LoadCatalog does): for a process that
// calls no vendor and shows none as configured.
func OpenCatalog(c *Config) (*catalog.Catalog, error) {
	return catalog.Load(c.CatalogPath, c.Pricing)
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
