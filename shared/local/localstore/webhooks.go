package localstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/webhooks"
)

// Webhooks: the accounts' configs, the jobs' deliveries, and the webhook
// queue, in buckets of their own. The webhook queue is hookQueue, the job
// queue's mechanism (see queue.go): one message per job id. The change
// feed's apply schedules a delivery (SendWebhook) before the feed's cursor
// moves past the job's end, so a delivery is never lost to a crash; a
// message leased by a process that died is visible again at the next Open.

var _ webhooks.Store = (*Store)(nil)
var _ webhooks.Queue = (*Store)(nil)

// Webhook bucket names.
const (
	bucketHookConfigs = "webhook_configs"    // account -> webhooks.Config
	bucketHookDeliv   = "webhook_deliveries" // job id -> webhooks.Delivery
	bucketHookQueue   = "webhook_queue"      // job id -> message (see queue)
	bucketHookVis     = "webhook_queue_vis"  // visible-at (ns) ++ job id -> nil
)

var hookBuckets = []string{bucketHookConfigs, bucketHookDeliv, bucketHookQueue, bucketHookVis}

// initWebhooks creates the buckets and makes every leased message visible
// at now (its lease was a dead process's).
func initWebhooks(tx *bolt.Tx, now time.Time) error {
	for _, name := range hookBuckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return hookQueue.expireLeases(tx, now)
}

// WebhookConfig implements webhooks.Store.
func (s *Store) WebhookConfig(ctx context.Context, account string) (webhooks.Config, error) {
	c := webhooks.Config{Account: account}
	err := s.db.View(func(tx *bolt.Tx) error {
		_, err := getJSON(tx.Bucket([]byte(bucketHookConfigs)), []byte(account), &c)
		return err
	})
	if err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: %w", account, err)
	}
	return c, nil
}

// changeConfig applies fn to account's config in one transaction.
func (s *Store) changeConfig(account string, fn func(c *webhooks.Config) error) (webhooks.Config, error) {
	var out webhooks.Config
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketHookConfigs))
		c := webhooks.Config{Account: account}
		if _, err := getJSON(b, []byte(account), &c); err != nil {
			return err
		}
		if err := fn(&c); err != nil {
			return err
		}
		out = c
		return putJSON(b, []byte(account), c)
	})
	if err != nil {
		return webhooks.Config{}, fmt.Errorf("webhook config %s: %w", account, err)
	}
	return out, nil
}

// EnsureWebhookSecret implements webhooks.Store.
func (s *Store) EnsureWebhookSecret(ctx context.Context, account, secret string, at int64) (webhooks.Config, error) {
	return s.changeConfig(account, func(c *webhooks.Config) error {
		if c.Secret == "" {
			c.Secret, c.Updated = secret, at
		}
		return nil
	})
}

// RotateWebhookSecret implements webhooks.Store.
func (s *Store) RotateWebhookSecret(ctx context.Context, account, secret string, until, at int64) (webhooks.Config, error) {
	return s.changeConfig(account, func(c *webhooks.Config) error {
		if c.Secret == "" {
			return refuse(webhooks.ErrNotFound)
		}
		c.Previous, c.PreviousUntil, c.Secret, c.Updated = c.Secret, until, secret, at
		return nil
	})
}

// SetWebhookURL implements webhooks.Store.
func (s *Store) SetWebhookURL(ctx context.Context, account, url string, at int64) (webhooks.Config, error) {
	return s.changeConfig(account, func(c *webhooks.Config) error {
		c.URL, c.Updated = url, at
		return nil
	})
}

// Delivery implements webhooks.Store.
func (s *Store) Delivery(ctx context.Context, jobID string) (*webhooks.Delivery, error) {
	var d webhooks.Delivery
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket([]byte(bucketHookDeliv)), []byte(jobID), &d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delivery %s: %w", jobID, err)
	}
	if !ok {
		return nil, webhooks.ErrNotFound
	}
	return &d, nil
}

// AddDelivery implements webhooks.Store.
func (s *Store) AddDelivery(ctx context.Context, d *webhooks.Delivery) (*webhooks.Delivery, error) {
	var out webhooks.Delivery
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketHookDeliv))
		ok, err := getJSON(b, []byte(d.JobID), &out)
		if err != nil || ok {
			return err
		}
		out = *d
		return putJSON(b, []byte(d.JobID), d)
	})
	if err != nil {
		return nil, fmt.Errorf("add delivery %s: %w", d.JobID, err)
	}
	return &out, nil
}

// SaveDelivery implements webhooks.Store.
func (s *Store) SaveDelivery(ctx context.Context, d *webhooks.Delivery, attempts int) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketHookDeliv))
		var cur webhooks.Delivery
		ok, err := getJSON(b, []byte(d.JobID), &cur)
		if err != nil {
			return err
		}
		if !ok || cur.Attempts != attempts {
			return refuse(webhooks.ErrConflict)
		}
		return putJSON(b, []byte(d.JobID), d)
	})
	if err != nil {
		return fmt.Errorf("save delivery %s: %w", d.JobID, err)
	}
	return nil
}

// SendWebhook implements webhooks.Queue: job jobID's delivery is attempted
// after delay. The queue holds one message per job; one that waits keeps
// the earlier time, one being processed is left to its consumer (which
// reschedules it from the delivery's state).
func (s *Store) SendWebhook(ctx context.Context, jobID string, delay time.Duration) error {
	if jobID == "" {
		return errors.New("send webhook: empty job id")
	}
	at := s.now().Add(max(delay, 0)).UnixNano()
	err := s.update(func(tx *bolt.Tx) error {
		m, ok, err := hookQueue.get(tx, jobID)
		switch {
		case err != nil:
			return err
		case !ok:
			return hookQueue.put(tx, jobID, message{VisibleAt: at}, nil)
		case at < m.VisibleAt:
			// A waiting message comes earlier; a leased one's consumer
			// reschedules it at at (settleHook).
			old := m
			m.VisibleAt = at
			return hookQueue.put(tx, jobID, m, &old)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("send webhook %s: %w", jobID, err)
	}
	signal(s.hookWake)
	return nil
}

// leaseHooks takes up to n messages visible at now for visibility, and
// says when the next one is visible.
func (s *Store) leaseHooks(now time.Time, n int, visibility time.Duration) ([]lease, time.Time, error) {
	var out []lease
	var next time.Time
	err := s.db.Update(func(tx *bolt.Tx) error {
		out = nil
		for _, id := range hookQueue.visible(tx, now, n) {
			l, err := hookQueue.take(tx, id, now, visibility)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		next = hookQueue.next(tx)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lease webhook messages: %w", err)
	}
	return out, next, nil
}

// settleHook ends a lease: the message is deleted (retry 0) or visible
// again after retry. A lease that is no longer current changes nothing.
// A SendWebhook during the lease that asked for an earlier time wins.
func (s *Store) settleHook(l lease, retry time.Duration) error {
	err := s.update(func(tx *bolt.Tx) error {
		m, ok, err := hookQueue.held(tx, l)
		if !ok {
			return err
		}
		old := m
		sent := m.VisibleAt < l.until // a SendWebhook came during the lease
		if retry <= 0 && !sent {
			return hookQueue.delete(tx, l.id, m)
		}
		at := s.now().Add(retry).UnixNano()
		if sent {
			at = min(at, m.VisibleAt)
			if retry <= 0 {
				at = m.VisibleAt
			}
		}
		m.Leased, m.VisibleAt = false, at
		return hookQueue.put(tx, l.id, m, &old)
	})
	if err != nil {
		return fmt.Errorf("settle webhook message %s: %w", l.id, err)
	}
	return nil
}

// hookErrorRetry is when a delivery whose handler failed (a store error,
// not the receiver's answer) is tried again.
const hookErrorRetry = 5 * time.Second

// ConsumeWebhooks runs deliver for each due webhook message, with up to
// senders calls at a time, until ctx is done (then it waits for running
// calls and returns nil). deliver returns when to call again for the job
// (0: the message is deleted); an error retries it after 5 seconds. A
// message is leased for visibility (longer than one attempt, see
// webhooks.Timeout); a process that dies with leases loses nothing: Open
// makes them visible again. It returns an error only if the store is
// closed. These calls are apart from the job workers (Consume): a
// receiver that hangs holds one sender for its attempt's timeout, never a
// job worker. Run one ConsumeWebhooks per Store.
func (s *Store) ConsumeWebhooks(ctx context.Context, senders int, visibility time.Duration, deliver func(ctx context.Context, jobID string) (time.Duration, error)) error {
	err := s.consume(ctx, "webhook queue", senders, s.hookWake,
		func(now time.Time, n int, _ map[string]int) ([]lease, time.Time, error) {
			return s.leaseHooks(now, n, visibility)
		},
		func(ctx context.Context, l lease) {
			retry, err := deliver(ctx, l.id)
			if err != nil && ctx.Err() == nil {
				s.log.Error("webhook delivery failed; will retry", "job_id", l.id, "err", err)
				retry = hookErrorRetry
			}
			if ctx.Err() == nil {
				if serr := s.settleHook(l, retry); serr != nil {
					s.log.Error("webhook queue", "job_id", l.id, "err", serr)
				}
			}
		})
	if err != nil {
		return fmt.Errorf("consume webhooks: %w", err)
	}
	return nil
}
