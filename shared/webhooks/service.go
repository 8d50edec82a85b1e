package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/metrics"
)

// Jobs reads the job a delivery is about; jobs.Store implements it.
type Jobs interface {
	Get(ctx context.Context, id string) (*jobs.Job, error)
}

// Service manages secrets, default URLs and deliveries. Safe for
// concurrent use.
type Service struct {
	Store Store
	Jobs  Jobs
	Queue Queue
	// Render returns the job as GET /v1/jobs/{id} answers it: the event's
	// data (httpapi.JobObject). It is called at every attempt, so that an
	// output link in it is fresh.
	Render func(ctx context.Context, j *jobs.Job) (any, error)
	// Client sends deliveries; nil: NewClient(AllowPrivate).
	Client *http.Client
	// AllowPrivate accepts loopback and private URLs
	// (GENWAY_WEBHOOK_ALLOW_PRIVATE=1, local development only).
	AllowPrivate bool
	Timeout      time.Duration    // one attempt; 0: Timeout
	Now          func() time.Time // nil: time.Now
	// Jitter returns the spread of a retry (Backoff's jitter), a number
	// in [0, 1); nil: math/rand/v2's Float64.
	Jitter func() float64
	Log    *slog.Logger // nil: discarded

	clientOnce sync.Once
	client     *http.Client // Client, or the one NewClient made
}

// httpClient returns Client, or one NewClient made once (so that
// connections are reused).
func (s *Service) httpClient() *http.Client {
	s.clientOnce.Do(func() {
		s.client = s.Client
		if s.client == nil {
			s.client = NewClient(s.AllowPrivate)
		}
	})
	return s.client
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// jitter draws the spread of a retry (Backoff).
func (s *Service) jitter() float64 {
	if s.Jitter != nil {
		return s.Jitter()
	}
	return rand.Float64()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Service) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return Timeout
}

// CheckURL validates a webhook URL given as param under the service's
// AllowPrivate (see the package's CheckURL).
func (s *Service) CheckURL(param, raw string) error { return CheckURL(param, raw, s.AllowPrivate) }

// Secret returns account's signing secret, making and storing one on
// first use (concurrent first uses agree on one).
func (s *Service) Secret(ctx context.Context, account string) (string, error) {
	c, err := s.ensure(ctx, account)
	if err != nil {
		return "", err
	}
	return c.Secret, nil
}

func (s *Service) ensure(ctx context.Context, account string) (Config, error) {
	c, err := s.Store.WebhookConfig(ctx, account)
	if err != nil {
		return Config{}, fmt.Errorf("webhook config of %s: %w", account, err)
	}
	if c.Secret != "" {
		return c, nil
	}
	secret, err := NewSecret()
	if err != nil {
		return Config{}, err
	}
	c, err = s.Store.EnsureWebhookSecret(ctx, account, secret, s.now().Unix())
	if err != nil {
		return Config{}, fmt.Errorf("store webhook secret of %s: %w", account, err)
	}
	return c, nil
}

// Config returns account's webhook config (its secret made if it had
// none).
func (s *Service) Config(ctx context.Context, account string) (Config, error) {
	return s.ensure(ctx, account)
}

// Rotate gives account a new secret; the old one keeps signing (a second
// signature) for RotationGrace. It returns the new config.
func (s *Service) Rotate(ctx context.Context, account string) (Config, error) {
	if _, err := s.ensure(ctx, account); err != nil {
		return Config{}, err
	}
	secret, err := NewSecret()
	if err != nil {
		return Config{}, err
	}
	now := s.now()
	c, err := s.Store.RotateWebhookSecret(ctx, account, secret, now.Add(RotationGrace).Unix(), now.Unix())
	if err != nil {
		return Config{}, fmt.Errorf("rotate webhook secret of %s: %w", account, err)
	}
	return c, nil
}

// SetURL sets account's default webhook URL ("" removes it) after
// checking it like a job's webhook_url.
func (s *Service) SetURL(ctx context.Context, account, url string) (Config, error) {
	if url != "" {
		if err := s.CheckURL("url", url); err != nil {
			return Config{}, err
		}
	}
	c, err := s.Store.SetWebhookURL(ctx, account, url, s.now().Unix())
	if err != nil {
		return Config{}, fmt.Errorf("set webhook URL of %s: %w", account, err)
	}
	return c, nil
}

// Schedule is called once the job jobID ended (at least once: the change
// feed and stream redeliver): when the job has a webhook_url or its
// account a default URL, it queues the delivery. A job that does not
// exist or has not ended schedules nothing. Deliver makes the Delivery,
// so that scheduling twice delivers once unless the first is done.
func (s *Service) Schedule(ctx context.Context, jobID string) error {
	j, err := s.Jobs.Get(ctx, jobID)
	if errors.Is(err, jobs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("schedule webhook of %s: %w", jobID, err)
	}
	if !j.Status.Final() {
		return nil
	}
	u, err := s.url(ctx, j)
	if err != nil {
		return fmt.Errorf("schedule webhook of %s: %w", jobID, err)
	}
	if u == "" {
		return nil
	}
	if err := s.Queue.SendWebhook(ctx, jobID, 0); err != nil {
		return fmt.Errorf("schedule webhook of %s: %w", jobID, err)
	}
	return nil
}

// url returns where job j's webhook goes: its own webhook_url, else its
// account's default ("" for none).
func (s *Service) url(ctx context.Context, j *jobs.Job) (string, error) {
	if j.WebhookURL != "" {
		return j.WebhookURL, nil
	}
	c, err := s.Store.WebhookConfig(ctx, j.Account)
	if err != nil {
		return "", err
	}
	return c.URL, nil
}

// Deliver is the queue's handler for job jobID: it makes the job's
// Delivery on first call, and, if it is pending and due, makes one
// attempt and records it. It returns when to call again (0: never: the
// delivery is done, or there is none to make). An error means nothing was
// recorded; the queue retries. Duplicate calls are harmless: an attempt
// is claimed with a conditional write (Store.SaveDelivery), and a call
// before NextAt only says how long to wait.
func (s *Service) Deliver(ctx context.Context, jobID string) (time.Duration, error) {
	var j *jobs.Job // read once: to make the Delivery, or for the attempt
	d, err := s.Store.Delivery(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		j, err = s.Jobs.Get(ctx, jobID)
		if errors.Is(err, jobs.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("delivery of %s: job: %w", jobID, err)
		}
		if !j.Status.Final() {
			return 0, nil
		}
		d, err = s.create(ctx, j)
		if d == nil || err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, fmt.Errorf("delivery of %s: %w", jobID, err)
	}
	if d.Status != Pending {
		return 0, nil
	}
	now := s.now()
	if wait := time.Unix(d.NextAt, 0).Sub(now); wait > 0 {
		return wait, nil
	}
	if j == nil {
		if j, err = s.Jobs.Get(ctx, jobID); err != nil {
			return 0, fmt.Errorf("delivery of %s: job: %w", jobID, err)
		}
	}
	cfg, err := s.ensure(ctx, d.Account)
	if err != nil {
		return 0, err
	}
	// Claim the attempt: its lease (NextAt) keeps a duplicate message
	// from sending it twice at once; a crash during it is retried once
	// the lease is over.
	prev := d.Attempts
	d.Attempts++
	d.NextAt = now.Add(s.timeout() + 5*time.Second).Unix()
	d.Updated = now.Unix()
	if err := s.Store.SaveDelivery(ctx, d, prev); err != nil {
		if errors.Is(err, ErrConflict) {
			return s.timeout(), nil // another call holds it; look again later
		}
		return 0, fmt.Errorf("claim delivery of %s: %w", jobID, err)
	}
	code, excerpt, sendErr := s.send(ctx, d, j, cfg)
	now = s.now()
	claimed := d.Attempts
	d.LastCode, d.Excerpt, d.LastError, d.Updated = code, excerpt, "", now.Unix()
	var retry time.Duration
	switch {
	case sendErr == nil && code >= 200 && code < 300:
		d.Status, d.NextAt, d.DeliveredAt = Delivered, 0, now.Unix()
	default:
		if sendErr != nil {
			d.LastError = sendErr.Error()
		}
		next := now.Add(Backoff(d.Attempts, s.jitter()))
		if dl := time.Unix(d.Deadline, 0); next.After(dl) {
			next = dl // one last attempt at the deadline
		}
		if !next.After(now) {
			d.Status, d.NextAt = Failed, 0
		} else {
			d.NextAt, retry = next.Unix(), next.Sub(now)
		}
	}
	if err := s.Store.SaveDelivery(ctx, d, claimed); err != nil {
		return 0, fmt.Errorf("record delivery of %s: %w", jobID, err)
	}
	metrics.Default.Add("genway_webhook_attempts_total", "Webhook delivery attempts, by outcome.", []string{"outcome"}, []string{outcome(d)}, 1)
	s.log().Info("webhook attempt", "job_id", jobID, "event_id", d.ID, "attempt", d.Attempts, "code", code, "status", d.Status, "err", d.LastError)
	return retry, nil
}

func outcome(d *Delivery) string {
	switch {
	case d.Status == Delivered:
		return "delivered"
	case d.LastCode != 0:
		return "non_2xx"
	}
	return "no_answer"
}

// create makes the Delivery of j, a job that has ended (nil when it has
// no URL).
func (s *Service) create(ctx context.Context, j *jobs.Job) (*Delivery, error) {
	jobID := j.ID
	u, err := s.url(ctx, j)
	if err != nil || u == "" {
		return nil, err
	}
	now := s.now().Unix()
	typ := TypeCompleted
	if j.Status == jobs.Failed {
		typ = TypeFailed
	}
	d := &Delivery{ID: EventID(jobID), JobID: jobID, Account: j.Account, URL: u, Type: typ, Created: now,
		Status: Pending, NextAt: now, Deadline: now + int64(MaxAge/time.Second), Updated: now}
	got, err := s.Store.AddDelivery(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("add delivery of %s: %w", jobID, err)
	}
	return got, nil
}

// event is the body of a delivery.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    any    `json:"data"`
}

// Body returns the JSON body of d for job j (its data rendered now).
func (s *Service) Body(ctx context.Context, d *Delivery, j *jobs.Job) ([]byte, error) {
	data, err := s.Render(ctx, j)
	if err != nil {
		return nil, fmt.Errorf("render job %s: %w", j.ID, err)
	}
	b, err := json.Marshal(event{ID: d.ID, Type: d.Type, Created: d.Created, Data: data})
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", d.ID, err)
	}
	return b, nil
}

// maxRead bounds what is read of an answer: enough for the excerpt.
const maxRead = 4 << 10

// send makes one attempt: the answer's status (0 if none) and excerpt, or
// why there was no answer (a message that names no internal detail).
func (s *Service) send(ctx context.Context, d *Delivery, j *jobs.Job, cfg Config) (int, string, error) {
	body, err := s.Body(ctx, d, j)
	if err != nil {
		return 0, "", err
	}
	now := s.now()
	ts := now.Unix()
	sig, err := cfg.Signature(d.ID, ts, body, now)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", errors.New("the URL is malformed")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Genway-Webhooks/1")
	req.Header.Set(HeaderID, d.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := s.httpClient().Do(req)
	if err != nil {
		switch {
		case errors.Is(err, chat.ErrRefusedAddr):
			return 0, "", errors.New("the URL resolves to an address that is not allowed")
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
			return 0, "", fmt.Errorf("no answer within %s", s.timeout())
		}
		return 0, "", errors.New("the connection failed")
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxRead))
	return resp.StatusCode, Excerpt(b), nil
}

// Resend sends job jobID's webhook again, now, under the same event id:
// a delivered or failed delivery becomes pending with a new MaxAge of
// retries; a job whose delivery was never made (it had no URL then, its
// account has one now) gets one. It returns the delivery as it is queued.
func (s *Service) Resend(ctx context.Context, jobID string) (*Delivery, error) {
	for range 5 {
		d, err := s.Store.Delivery(ctx, jobID)
		if errors.Is(err, ErrNotFound) {
			j, gerr := s.Jobs.Get(ctx, jobID)
			if gerr != nil {
				return nil, fmt.Errorf("resend webhook of %s: %w", jobID, gerr)
			}
			if !j.Status.Final() {
				return nil, ErrNotFinal
			}
			if d, err = s.create(ctx, j); err == nil && d == nil {
				return nil, ErrNoURL
			}
			if err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, fmt.Errorf("resend webhook of %s: %w", jobID, err)
		}
		now := s.now().Unix()
		if d.Status != Pending || d.NextAt > now {
			d.Status, d.NextAt, d.Deadline, d.Updated = Pending, now, now+int64(MaxAge/time.Second), now
			if err := s.Store.SaveDelivery(ctx, d, d.Attempts); errors.Is(err, ErrConflict) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("resend webhook of %s: %w", jobID, err)
			}
		}
		if err := s.Queue.SendWebhook(ctx, jobID, 0); err != nil {
			return nil, fmt.Errorf("resend webhook of %s: %w", jobID, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("resend webhook of %s: %w", jobID, ErrConflict)
}

// Deliveries returns the deliveries of job jobID (none or one).
func (s *Service) Deliveries(ctx context.Context, jobID string) ([]*Delivery, error) {
	d, err := s.Store.Delivery(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return []*Delivery{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("deliveries of %s: %w", jobID, err)
	}
	return []*Delivery{d}, nil
}

// Process is Deliver for a queue that cannot reschedule the message it
// delivers (SQS): it makes the attempt that is due and, when the delivery
// is to be tried again, sends a new message with the delay (the queue
// cuts it to its longest: a message come early only waits again). An
// error leaves the message to the queue's own retry, and, after its
// receive limit, its dead-letter queue.
func (s *Service) Process(ctx context.Context, jobID string) error {
	retry, err := s.Deliver(ctx, jobID)
	if err != nil {
		return err
	}
	if retry > 0 {
		if err := s.Queue.SendWebhook(ctx, jobID, retry); err != nil {
			return fmt.Errorf("requeue webhook of %s: %w", jobID, err)
		}
	}
	return nil
}

// RequeueLimit bounds the deliveries one Requeue sends again.
const RequeueLimit = 1000

// Requeue sends a message for every delivery ps lists as pending and due
// before t (at most RequeueLimit), so that a delivery whose message was
// lost (taken by a receive whose process died) is attempted again now,
// not when the queue's visibility timeout ends. A delivery whose message
// was not lost gets a duplicate: Deliver's claims make it harmless (the
// one attempt that is due is made once). It returns how many it sent; an
// error stops it.
func (s *Service) Requeue(ctx context.Context, ps PendingStore, before time.Time) (int, error) {
	ids, err := ps.PendingDeliveries(ctx, before, RequeueLimit)
	if err != nil {
		return 0, fmt.Errorf("requeue webhooks: %w", err)
	}
	for i, id := range ids {
		if err := s.Queue.SendWebhook(ctx, id, 0); err != nil {
			return i, fmt.Errorf("requeue webhook of %s: %w", id, err)
		}
	}
	return len(ids), nil
}

// Changed is called with each job change of the change feed or stream,
// after its credits settled: a transition into a final status schedules
// the job's webhook (Schedule).
func (s *Service) Changed(ctx context.Context, c credits.Change) error {
	if !jobs.Status(c.NewStatus).Final() || c.OldStatus == c.NewStatus {
		return nil
	}
	return s.Schedule(ctx, c.JobID)
}
