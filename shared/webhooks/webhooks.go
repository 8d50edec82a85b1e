// Package webhooks delivers a signed POST to a client's URL when one of its
// jobs ends: the event {"id": "evt_…", "type": "job.completed" |
// "job.failed", "created": <unix>, "data": <the job object>}, signed as the
// Standard Webhooks specification says (headers webhook-id,
// webhook-timestamp and webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", keyed with the bytes of the account's secret
// "whsec_<base64>").
//
// Delivery is at least once. A job's end schedules its delivery on a Queue
// (the embedded store's webhook queue under `genway serve`, an SQS queue on
// AWS), from the same durable change feed that settles its credits; the
// queue's consumer calls Service.Deliver, which records every attempt on
// the job's Delivery (status, attempts, last response code, a short
// sanitized excerpt of the answer) and says when to try again: a non-2xx
// answer, a redirect or no answer within Timeout is retried with a growing
// delay (Backoff, spread at random by up to JitterFraction) for MaxAge
// under the same webhook-id; a 2xx answer ends it. Deliveries run on their
// own consumer, never on a job worker, so a receiver that hangs holds
// nothing but its own attempt, for Timeout.
//
// Secrets are made on first use (Service.Secret) and kept by the Store;
// Rotate signs with both the new and the previous secret for RotationGrace.
package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
)

// SecretPrefix starts every secret.
const SecretPrefix = "whsec_"

// secretBytes is the size of a new secret's key (Svix uses 24 to 64).
const secretBytes = 32

// RotationGrace is how long the previous secret still signs after Rotate.
const RotationGrace = 24 * time.Hour

// Timeout bounds one attempt: connect, send, and the answer's headers and
// excerpt.
const Timeout = 10 * time.Second

// MaxAge is how long a delivery is retried from its first attempt.
const MaxAge = 24 * time.Hour

// Event types.
const (
	TypeCompleted = "job.completed"
	TypeFailed    = "job.failed"
)

// Delivery statuses.
const (
	Pending   = "pending"   // not delivered yet; will be tried (again) at NextAt
	Delivered = "delivered" // the receiver answered 2xx
	Failed    = "failed"    // no 2xx within MaxAge; Resend tries again
)

// Headers of a delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Config is an account's webhook settings: its default URL (for jobs
// created without webhook_url; "" for none), its signing secret, and,
// for RotationGrace after a rotation, the previous secret.
type Config struct {
	Account       string `json:"account"`
	URL           string `json:"url,omitempty"`
	Secret        string `json:"secret,omitempty"`
	Previous      string `json:"previous,omitempty"`
	PreviousUntil int64  `json:"previous_until,omitempty"` // Unix seconds
	Updated       int64  `json:"updated,omitempty"`
}

// Delivery is the webhook of one job's end and what became of it.
type Delivery struct {
	ID      string `json:"id"` // the event id, "evt_…": the webhook-id of every attempt
	JobID   string `json:"job_id"`
	Account string `json:"account"`
	URL     string `json:"url"`
	Type    string `json:"type"`    // TypeCompleted or TypeFailed
	Created int64  `json:"created"` // the event's created: Unix seconds the delivery was made
	Status  string `json:"status"`  // Pending, Delivered or Failed
	// Attempts counts the POSTs started, resends included. Every write
	// of a Delivery after its creation is conditional on it (Store.Save).
	Attempts int `json:"attempts"`
	// LastCode is the HTTP status of the last answer, 0 when the last
	// attempt got none (LastError says why).
	LastCode  int    `json:"last_code,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Excerpt is the start of the last answer's body, sanitized (printable
	// characters, at most ExcerptChars): nothing more of it is kept.
	Excerpt string `json:"excerpt,omitempty"`
	// NextAt is the Unix second of the next attempt while Pending (and,
	// during an attempt, the end of its lease); Deadline the second after
	// which a failed attempt is not retried.
	NextAt   int64 `json:"next_at,omitempty"`
	Deadline int64 `json:"deadline"`
	Updated  int64 `json:"updated"`
	// Delivered is the Unix second of the 2xx answer.
	DeliveredAt int64 `json:"delivered_at,omitempty"`
}

// Errors of the webhooks domain.
var (
	// ErrNotFound is a delivery or job that does not exist.
	ErrNotFound = &apierr.Error{Kind: apierr.NotFound, Code: "delivery_not_found", Message: "This job has no webhook delivery."}
	// ErrNoURL is a resend for a job with no webhook URL (its own or its
	// account's default).
	ErrNoURL = &apierr.Error{Kind: apierr.Conflict, Code: "no_webhook_url", Message: "The job has no webhook_url and its account has no default webhook URL."}
	// ErrNotFinal is a resend of a job that has not ended.
	ErrNotFinal = &apierr.Error{Kind: apierr.Conflict, Code: "job_not_final", Message: "Only a completed or failed job has a webhook to send."}
	// ErrConflict means a conditional write lost to another writer.
	ErrConflict = errors.New("webhook delivery changed concurrently")
)

// Store keeps account configs and deliveries. Implementations are safe
// for concurrent use.
type Store interface {
	// WebhookConfig returns account's config; a zero Config (Account set)
	// when it has none.
	WebhookConfig(ctx context.Context, account string) (Config, error)
	// EnsureWebhookSecret sets account's secret to secret unless it has one
	// already, and returns the config as stored.
	EnsureWebhookSecret(ctx context.Context, account, secret string, at int64) (Config, error)
	// RotateWebhookSecret makes the current secret the previous one
	// (signing until until) and secret the current one, in one atomic
	// step; the account must have a secret (else ErrNotFound).
	RotateWebhookSecret(ctx context.Context, account, secret string, until, at int64) (Config, error)
	// SetWebhookURL sets account's default URL ("" removes it).
	SetWebhookURL(ctx context.Context, account, url string, at int64) (Config, error)
	// Delivery returns the delivery of job jobID, or ErrNotFound.
	Delivery(ctx context.Context, jobID string) (*Delivery, error)
	// AddDelivery stores d unless the job has one; it returns the stored
	// one either way.
	AddDelivery(ctx context.Context, d *Delivery) (*Delivery, error)
	// SaveDelivery replaces the job's delivery with d if the stored one
	// still has attempts attempts; else it returns an error wrapping
	// ErrConflict and writes nothing.
	SaveDelivery(ctx context.Context, d *Delivery, attempts int) error
}

// PendingStore is a Store that can list its pending deliveries: one whose
// queue can lose a message for good (SQS, when a receive's answer goes to
// a process that died), so that Requeue can send them again.
type PendingStore interface {
	// PendingDeliveries returns the job ids of up to limit deliveries
	// that are pending with their next attempt due before t.
	PendingDeliveries(ctx context.Context, before time.Time, limit int) ([]string, error)
}

// Queue schedules a delivery attempt for the job with id after delay, at
// least once.
type Queue interface {
	SendWebhook(ctx context.Context, jobID string, delay time.Duration) error
}

// NewSecret returns a fresh secret: SecretPrefix and the standard base64
// of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Key returns the signing key of secret: the bytes its base64 after
// SecretPrefix encodes.
func Key(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("webhook secret lacks the whsec_ prefix")
	}
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook secret is not base64")
	}
	return k, nil
}

// Sign returns the v1 signature of a message: "v1," and the standard
// base64 of HMAC-SHA256 over "<id>.<timestamp>.<body>" keyed with key.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(timestamp, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Signature returns the webhook-signature header of a message at now: its
// signature with the current secret, and, while the previous one is still
// in its grace period, a second with that one (space-separated, as the
// specification has it for rotations).
func (c Config) Signature(id string, timestamp int64, body []byte, now time.Time) (string, error) {
	k, err := Key(c.Secret)
	if err != nil {
		return "", fmt.Errorf("account %s: %w", c.Account, err)
	}
	sig := Sign(k, id, timestamp, body)
	if c.Previous != "" && now.Unix() < c.PreviousUntil {
		pk, err := Key(c.Previous)
		if err != nil {
			return "", fmt.Errorf("account %s previous secret: %w", c.Account, err)
		}
		sig += " " + Sign(pk, id, timestamp, body)
	}
	return sig, nil
}

// EventID returns the event id (the webhook-id) of job jobID's end.
func EventID(jobID string) string { return "evt_" + strings.TrimPrefix(jobID, "job_") }

// JobID returns the job of event id, "" if id is no event id.
func JobID(eventID string) string {
	rest, ok := strings.CutPrefix(eventID, "evt_")
	if !ok || rest == "" {
		return ""
	}
	return "job_" + rest
}

// backoffs are the steps of the retry schedule: the delays after the
// first, second, ... failed attempt; the last repeats. The first retry
// comes within 10 seconds.
var backoffs = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour}

// JitterFraction is how far a retry is spread around its step of the
// schedule: up to 20% sooner or later, so that the deliveries that failed
// at the same moment (their receiver was down) do not all come back at
// the same instants.
const JitterFraction = 0.2

// Backoff returns the delay after the n-th failed attempt (n >= 1): the
// n-th step of the schedule (5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h,
// 4 h, then 8 h), spread by jitter, a number in [0, 1] (the service draws
// it at random): from (1-JitterFraction) times the step at 0 to
// (1+JitterFraction) times it at 1, the step itself at 0.5. The first
// retry comes within 10 seconds whatever the jitter, and each step's
// spread stays below the next one's.
func Backoff(n int, jitter float64) time.Duration {
	n = min(max(n, 1), len(backoffs))
	jitter = min(max(jitter, 0), 1)
	d := backoffs[n-1]
	return d + time.Duration((2*jitter-1)*JitterFraction*float64(d))
}

// ExcerptChars bounds the kept excerpt of a receiver's answer.
const ExcerptChars = 200

// Excerpt returns the start of body made safe to keep and show: invalid
// UTF-8 and control characters become spaces, runs of spaces one space,
// and at most ExcerptChars characters remain.
func Excerpt(body []byte) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range strings.ToValidUTF8(string(body), " ") {
		if n >= ExcerptChars {
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == ' ' || r == '\u2028' || r == '\u2029' {
			if space || n == 0 {
				continue
			}
			space = true
			b.WriteByte(' ')
			n++
			continue
		}
		space = false
		b.WriteRune(r)
		n++
	}
	return strings.TrimRight(b.String(), " ")
}
