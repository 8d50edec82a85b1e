// Package awsenv names the AWS resources Genway uses (their variables and
// defaults) and builds the AWS configuration from the region and endpoint
// set, for the Lambda functions and for `genway serve` / `genway aws init`
// with GENWAY_BACKEND=aws. Package app reads the variables, for the
// functions and the local server alike, so one env file configures both.
package awsenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The variables and their defaults.
const (
	EnvJobsTable     = "GENWAY_JOBS_TABLE"
	EnvAccountsTable = "GENWAY_ACCOUNTS_TABLE"
	EnvRecordsTable  = "GENWAY_RECORDS_TABLE" // the records of requests (dynamostore.Store.RecordsTable)
	EnvJobsQueueURL  = "GENWAY_JOBS_QUEUE_URL"
	EnvJobsQueue     = "GENWAY_JOBS_QUEUE"
	EnvJobsDLQ       = "GENWAY_JOBS_DLQ"
	EnvMediaBucket   = "GENWAY_MEDIA_BUCKET"
	// The webhook deliveries' queue (package webhooks) and its
	// dead-letter queue.
	EnvWebhooksQueueURL = "GENWAY_WEBHOOKS_QUEUE_URL"
	EnvWebhooksQueue    = "GENWAY_WEBHOOKS_QUEUE"
	EnvWebhooksDLQ      = "GENWAY_WEBHOOKS_DLQ"

	DefaultJobsTable     = "genway-jobs"
	DefaultAccountsTable = "genway-accounts"
	DefaultRecordsTable  = "genway-records"
	DefaultJobsQueue     = "genway-jobs"
	DefaultJobsDLQ       = "genway-jobs-dlq"
	DefaultMediaBucket   = "genway-media"
	DefaultWebhooksQueue = "genway-webhooks"
	DefaultWebhooksDLQ   = "genway-webhooks-dlq"
)

// Names are the AWS resources Genway uses.
type Names struct {
	JobsTable     string
	AccountsTable string
	RecordsTable  string
	JobsQueue     string // queue name
	JobsQueueURL  string // if set, used as is (no GetQueueUrl: sqsqueue.LookupURL)
	JobsDLQ       string // dead-letter queue name
	MediaBucket   string
	// WebhooksQueue (its URL WebhooksQueueURL if set) carries webhook
	// deliveries; WebhooksDLQ is its dead-letter queue.
	WebhooksQueue    string
	WebhooksQueueURL string
	WebhooksDLQ      string
}

// Settings are where the AWS clients go: the region and endpoints a
// caller's environment sets (AWS_REGION, AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_DYNAMODB). Empty fields leave the SDK's defaults.
type Settings struct {
	Region           string
	Endpoint         string // every client's (moto, LocalStack)
	EndpointDynamoDB string // DynamoDB's, over Endpoint
}

// LoadConfig returns the SDK's default configuration (environment, shared
// files, then the Lambda role), with s's region and endpoint when set, so
// that a caller's own environment (tests, `genway serve` flags) wins over
// the process's. With s.Endpoint (moto, LocalStack) every client talks to
// that endpoint;
// build S3 clients with s3media.NewClient, which then addresses buckets by
// path.
func LoadConfig(ctx context.Context, s Settings) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if r := s.Region; r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if e := s.Endpoint; e != "" {
		opts = append(opts, config.WithBaseEndpoint(e))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("load AWS config: no region (set AWS_REGION)")
	}
	return cfg, nil
}

// LocalDynamoDB returns the DynamoDB client option for an endpoint on
// this machine: with s.EndpointDynamoDB, else s.Endpoint, at
// a loopback address (moto_server, as `genway aws init` and
// GENWAY_BACKEND=aws genway serve are documented with), the client sends
// one request at a time. moto takes no locks: concurrent conditional
// writes can both pass, concurrent updates of one item can be lost, and
// its rollback of a failed TransactWriteItems (it restores a copy of the
// table) drops whatever another request wrote meanwhile, such as a job's
// settlement. DynamoDB itself isolates them. Elsewhere (AWS) the option
// changes nothing.
//
// A request whose context was made by Background waits, besides, while
// any other request waits: background work (a stream reader catching up)
// never stands in front of the requests of new work.
func LocalDynamoDB(s Settings) func(*dynamodb.Options) {
	e := s.EndpointDynamoDB
	if e == "" {
		e = s.Endpoint
	}
	return func(o *dynamodb.Options) {
		if !loopback(e) {
			return
		}
		c := o.HTTPClient
		if c == nil {
			c = awshttp.NewBuildableClient()
		}
		o.HTTPClient = newOneAtATime(c)
	}
}

type backgroundKey struct{}

// Background returns ctx marked as background work: through
// LocalDynamoDB's client, its requests go after every other request that
// is waiting. Elsewhere the mark changes nothing.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

func background(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

// loopback reports whether endpoint is a URL whose host is a loopback
// address or localhost.
func loopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// oneAtATime is an HTTP client that sends one request at a time: the next
// waits until the answer's headers are in (the server has applied the
// request by then). A background request (Background) is sent only when
// no other request waits.
type oneAtATime struct {
	c dynamodb.HTTPClient

	mu      sync.Mutex
	free    *sync.Cond // signalled when busy ends or a foreground request stops waiting
	busy    bool
	waiting int // foreground requests waiting
	behind  int // background requests waiting
}

func newOneAtATime(c dynamodb.HTTPClient) *oneAtATime {
	s := &oneAtATime{c: c}
	s.free = sync.NewCond(&s.mu)
	return s
}

func (s *oneAtATime) Do(r *http.Request) (*http.Response, error) {
	bg := background(r.Context())
	s.mu.Lock()
	if bg {
		s.behind++
	} else {
		s.waiting++
	}
	for s.busy || (bg && s.waiting > 0) {
		s.free.Wait()
	}
	if bg {
		s.behind--
	} else {
		s.waiting--
	}
	s.busy = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
		s.free.Broadcast()
	}()
	return s.c.Do(r)
}
