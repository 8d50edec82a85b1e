package localstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/genway/genway/shared/jobs"
)

// The store has two durable queues, the job queue (here) and the webhook
// queue (webhooks.go), and one mechanism behind both (queue, consume). A
// queue holds at most one message per id. A message is visible from
// VisibleAt on; leasing it hides it for the visibility timeout and counts a
// receive, which is the lease's token. A second bucket indexes messages by
// visible-at so that leasing and finding the next wake-up read only the
// front of the queue. What differs is their owners': the job queue records
// an Enqueue during a lease as a requeue and leases fairly across
// accounts; the webhook queue's consumer says when to call again.

// maxIdle bounds how long the consumers and the feed sleep without a signal.
const maxIdle = time.Second

// maxBackoff bounds the retry delay of a failed message.
const maxBackoff = 60 * time.Second

// message is one queued id's state, stored as JSON. The webhook queue
// never sets the requeue fields, so its messages are {visible_at,
// receives, leased}.
type message struct {
	VisibleAt int64 `json:"visible_at"` // Unix nanoseconds
	Receives  int   `json:"receives"`
	Leased    bool  `json:"leased,omitempty"`
	// Requeue records an Enqueue that arrived while the message was
	// leased: after the lease ends the message stays, visible at
	// RequeueAt (unless its job is final by then).
	Requeue   bool  `json:"requeue,omitempty"`
	RequeueAt int64 `json:"requeue_at,omitempty"`
}

// queue names the two buckets of one durable queue; its methods keep the
// index in step with the messages.
type queue struct {
	msgs string // id -> message
	vis  string // visible-at (ns) ++ id -> nil
}

// The store's queues.
var (
	jobQueue  = queue{msgs: bucketQueue, vis: bucketQueueVis}
	hookQueue = queue{msgs: bucketHookQueue, vis: bucketHookVis}
)

// lease is one leased message.
type lease struct {
	id       string
	receives int    // the lease's token
	until    int64  // the lease's end, Unix nanoseconds
	account  string // the job's account (job queue only, for fair scheduling)
}

func visKey(at int64, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(at, 0)))
	return append(k, id...)
}

// visAt is the visible-at time of index key k, in Unix nanoseconds.
func visAt(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[:8])) }

func (q queue) get(tx *bolt.Tx, id string) (message, bool, error) {
	var m message
	ok, err := getJSON(tx.Bucket([]byte(q.msgs)), []byte(id), &m)
	return m, ok, err
}

// put writes m for id, moving its index entry from old (if it had one).
func (q queue) put(tx *bolt.Tx, id string, m message, old *message) error {
	vb := tx.Bucket([]byte(q.vis))
	if old != nil {
		if err := vb.Delete(visKey(old.VisibleAt, id)); err != nil {
			return err
		}
	}
	if err := vb.Put(visKey(m.VisibleAt, id), nil); err != nil {
		return err
	}
	return putJSON(tx.Bucket([]byte(q.msgs)), []byte(id), m)
}

func (q queue) delete(tx *bolt.Tx, id string, old message) error {
	if err := tx.Bucket([]byte(q.vis)).Delete(visKey(old.VisibleAt, id)); err != nil {
		return err
	}
	return tx.Bucket([]byte(q.msgs)).Delete([]byte(id))
}

// held returns l's message if l is still its current lease (false if the
// lease expired and the message was leased again, or it is gone).
func (q queue) held(tx *bolt.Tx, l lease) (message, bool, error) {
	m, ok, err := q.get(tx, l.id)
	if err != nil || !ok || !m.Leased || m.Receives != l.receives {
		return message{}, false, err
	}
	return m, true, nil
}

// expireLeases makes every leased message visible at now, dropping any
// requeue (run on Open: a lease still held was a dead process's).
func (q queue) expireLeases(tx *bolt.Tx, now time.Time) error {
	type fix struct {
		id  string
		old message
	}
	var fixes []fix
	b := tx.Bucket([]byte(q.msgs))
	err := b.ForEach(func(k, _ []byte) error {
		var m message
		if _, err := getJSON(b, k, &m); err != nil {
			return err
		}
		if m.Leased {
			fixes = append(fixes, fix{string(k), m})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range fixes {
		m := f.old
		m.Leased, m.Requeue, m.RequeueAt = false, false, 0
		m.VisibleAt = now.UnixNano()
		if err := q.put(tx, f.id, m, &f.old); err != nil {
			return err
		}
	}
	return nil
}

// visible returns the ids of up to n messages visible at now, the earliest
// visible first.
func (q queue) visible(tx *bolt.Tx, now time.Time, n int) []string {
	var ids []string
	c := tx.Bucket([]byte(q.vis)).Cursor()
	for k, _ := c.First(); k != nil && len(ids) < n; k, _ = c.Next() {
		if visAt(k) > now.UnixNano() {
			break
		}
		ids = append(ids, string(k[8:]))
	}
	return ids
}

// take leases id's message at now: it is hidden until now + visibility and
// counts one more receive.
func (q queue) take(tx *bolt.Tx, id string, now time.Time, visibility time.Duration) (lease, error) {
	m, ok, err := q.get(tx, id)
	if err != nil {
		return lease{}, err
	}
	if !ok {
		return lease{}, fmt.Errorf("%s index points at missing message %s", q.msgs, id)
	}
	old := m
	m.Leased = true
	m.Receives++
	m.VisibleAt = now.Add(visibility).UnixNano()
	if err := q.put(tx, id, m, &old); err != nil {
		return lease{}, err
	}
	return lease{id: id, receives: m.Receives, until: m.VisibleAt}, nil
}

// next returns when the first message becomes visible (zero if the queue
// is empty).
func (q queue) next(tx *bolt.Tx) time.Time {
	if k, _ := tx.Bucket([]byte(q.vis)).Cursor().First(); k != nil {
		return time.Unix(0, visAt(k))
	}
	return time.Time{}
}

// enqueueTx schedules id at, keeping an earlier visibility if a message
// exists; for a leased message it records a requeue instead.
func enqueueTx(tx *bolt.Tx, id string, at time.Time) error {
	m, ok, err := jobQueue.get(tx, id)
	if err != nil {
		return err
	}
	t := at.UnixNano()
	switch {
	case !ok:
		return jobQueue.put(tx, id, message{VisibleAt: t}, nil)
	case m.Leased:
		if m.Requeue && m.RequeueAt <= t {
			return nil
		}
		m.Requeue, m.RequeueAt = true, t
		return putJSON(tx.Bucket([]byte(jobQueue.msgs)), []byte(id), m)
	case t < m.VisibleAt:
		old := m
		m.VisibleAt = t
		return jobQueue.put(tx, id, m, &old)
	}
	return nil
}

// Enqueue schedules job id for delivery after delay. The queue holds one
// message per id: if one exists it keeps the earlier of the two visibility
// times (so Enqueue after Create is a no-op); if it is being processed, the
// message is delivered again after the lease ends unless the job is final
// by then.
func (s *Store) Enqueue(ctx context.Context, id string, delay time.Duration) error {
	if id == "" {
		return errors.New("enqueue: empty id")
	}
	at := s.now().Add(max(delay, 0))
	if err := s.update(func(tx *bolt.Tx) error { return enqueueTx(tx, id, at) }); err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	signal(s.queueWake)
	return nil
}

// EnqueueGroup implements jobs.GroupQueue: Enqueue, whatever the group.
// The queue is fair across accounts by its own lease (see fairScan), not
// by groups.
func (s *Store) EnqueueGroup(ctx context.Context, id, _ string, delay time.Duration) error {
	return s.Enqueue(ctx, id, delay)
}

// fairScan bounds how many visible messages lease looks at to choose the
// fairest ones.
const fairScan = 512

// lease takes up to n job messages visible at now, hiding them until now +
// visibility, and fairly across accounts: among the first fairScan
// visible messages, each pick is the oldest message of an account with
// the fewest jobs in flight (busy, counted by the caller, plus those
// picked in this call), so one account's backlog cannot hold every worker
// while another account waits; with one account it is oldest first. It
// also returns when the next message becomes visible (zero if the queue is
// empty). busy may be nil.
func (s *Store) lease(now time.Time, n int, visibility time.Duration, busy map[string]int) ([]lease, time.Time, error) {
	var out []lease
	var next time.Time
	err := s.db.Update(func(tx *bolt.Tx) error {
		out, next = nil, time.Time{}
		type cand struct{ id, account string }
		var cands []cand
		for _, id := range jobQueue.visible(tx, now, max(n, fairScan)) {
			var j struct {
				Account string `json:"account"`
			}
			if _, err := getJSON(tx.Bucket([]byte(bucketJobs)), []byte(id), &j); err != nil {
				return err
			}
			cands = append(cands, cand{id, j.Account})
		}
		picked := map[string]int{}
		taken := make([]bool, len(cands))
		var ids []cand
		for len(ids) < n {
			best := -1
			for i, cd := range cands {
				if taken[i] {
					continue
				}
				if best < 0 || busy[cd.account]+picked[cd.account] < busy[cands[best].account]+picked[cands[best].account] {
					best = i
				}
			}
			if best < 0 {
				break
			}
			taken[best] = true
			picked[cands[best].account]++
			ids = append(ids, cands[best])
		}
		for _, cd := range ids {
			l, err := jobQueue.take(tx, cd.id, now, visibility)
			if err != nil {
				return err
			}
			l.account = cd.account
			out = append(out, l)
		}
		next = jobQueue.next(tx)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lease messages: %w", err)
	}
	return out, next, nil
}

// ack ends a successful lease: the message is deleted, unless an Enqueue
// came in meanwhile for a job that is not final. A lease that is no longer
// current (it expired and the message was leased again) changes nothing.
func (s *Store) ack(l lease) error {
	var requeued bool
	err := s.update(func(tx *bolt.Tx) error {
		requeued = false
		m, ok, err := jobQueue.held(tx, l)
		if !ok {
			return err
		}
		if m.Requeue {
			var j jobs.Job
			found, err := getJSON(tx.Bucket([]byte(bucketJobs)), []byte(l.id), &j)
			if err != nil {
				return err
			}
			if !found || !j.Status.Final() {
				old := m
				m.Leased, m.Requeue, m.VisibleAt, m.RequeueAt = false, false, m.RequeueAt, 0
				requeued = true
				return jobQueue.put(tx, l.id, m, &old)
			}
		}
		return jobQueue.delete(tx, l.id, m)
	})
	if err != nil {
		return fmt.Errorf("ack %s: %w", l.id, err)
	}
	if requeued {
		signal(s.queueWake)
	}
	return nil
}

// backoff is the retry delay after the n-th failed receive: 2^n seconds,
// at most maxBackoff.
func backoff(n int) time.Duration {
	if n >= 6 {
		return maxBackoff
	}
	return min(time.Duration(1<<max(n, 0))*time.Second, maxBackoff)
}

// nack ends a failed lease: the message becomes visible again after a
// backoff (or at a requeue time that is earlier).
func (s *Store) nack(l lease, now time.Time) error {
	err := s.update(func(tx *bolt.Tx) error {
		m, ok, err := jobQueue.held(tx, l)
		if !ok {
			return err
		}
		old := m
		m.VisibleAt = now.Add(backoff(m.Receives)).UnixNano()
		if m.Requeue && m.RequeueAt < m.VisibleAt {
			m.VisibleAt = m.RequeueAt
		}
		m.Leased, m.Requeue, m.RequeueAt = false, false, 0
		return jobQueue.put(tx, l.id, m, &old)
	})
	if err != nil {
		return fmt.Errorf("nack %s: %w", l.id, err)
	}
	return nil
}

// Consume delivers queued job ids to process with up to workers calls at a
// time, until ctx is done; then it waits for running calls and returns nil.
// A message is leased for visibility: if process has not returned by then,
// the message is delivered again (process must be idempotent, as
// jobs.Worker.Process is). When process returns nil the message is deleted;
// on an error it is delivered again after 2^n seconds (n = receives, at
// most 60 s). Consume sleeps until an Enqueue or Create signals it or the
// next message becomes visible (at most one second), and leases at most as
// many messages as it has free workers. It returns an error only if the
// store is closed. Run one Consume per Store.
func (s *Store) Consume(ctx context.Context, workers int, visibility time.Duration, process func(ctx context.Context, id string) error) error {
	if visibility <= 0 {
		visibility = 5 * time.Minute
	}
	err := s.consume(ctx, "queue", workers, s.queueWake,
		func(now time.Time, n int, busy map[string]int) ([]lease, time.Time, error) {
			return s.lease(now, n, visibility, busy)
		},
		func(ctx context.Context, l lease) { s.run(ctx, l, process) })
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return nil
}

// consume is the loop of Consume and ConsumeWebhooks. It runs up to
// workers calls of run at a time, one per lease, until ctx is done; then
// it waits for running calls and returns nil. When it has free workers it
// calls take for at most that many leases, passing the leases in flight
// per account (busy, for the job queue's fairness), and sleeps until wake
// is signalled, a call returns or the next message becomes visible (at
// most maxIdle); with no free worker it waits for a call to return. It
// returns an error only if the store is closed. name labels its logs.
func (s *Store) consume(ctx context.Context, name string, workers int, wake <-chan struct{},
	take func(now time.Time, n int, busy map[string]int) ([]lease, time.Time, error),
	run func(ctx context.Context, l lease)) error {
	workers = max(workers, 1)
	work := make(chan lease)
	done := make(chan string, workers) // a finished lease's account
	busy := map[string]int{}           // leases in flight per account
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range work {
				run(ctx, l)
				done <- l.account
			}
		}()
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	free := workers
	for {
		if ctx.Err() != nil {
			return nil
		}
		wait := maxIdle
		if free > 0 {
			ls, next, err := take(s.now(), free, busy)
			if errors.Is(err, berrors.ErrDatabaseNotOpen) {
				return err
			}
			if err != nil {
				s.log.Error(name+" consumer", "err", err)
			}
			for _, l := range ls {
				busy[l.account]++
				work <- l
				free--
			}
			if !next.IsZero() {
				wait = min(wait, max(next.Sub(s.now()), time.Millisecond))
			}
		}
		var timer <-chan time.Time
		t := time.NewTimer(wait)
		if free > 0 { // with no free worker only a finished call matters
			timer = t.C
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
		case a := <-done:
			free++
			release(busy, a)
		case <-timer:
		}
		t.Stop()
		for drained := false; !drained; {
			select {
			case a := <-done:
				free++
				release(busy, a)
			default:
				drained = true
			}
		}
	}
}

// release counts one lease of account as no longer in flight.
func release(busy map[string]int, account string) {
	if busy[account]--; busy[account] <= 0 {
		delete(busy, account)
	}
}

// run processes one lease and settles it. If ctx ended during a failed
// call the lease is left as it is: the next Open expires it at once.
func (s *Store) run(ctx context.Context, l lease, process func(ctx context.Context, id string) error) {
	err := process(ctx, l.id)
	switch {
	case err == nil:
		if aerr := s.ack(l); aerr != nil {
			s.log.Error("queue ack", "job_id", l.id, "err", aerr)
		}
	case ctx.Err() != nil:
	default:
		if nerr := s.nack(l, s.now()); nerr != nil {
			s.log.Error("queue nack", "job_id", l.id, "err", nerr)
		}
	}
}

// QueueDepth returns how many job messages are waiting or leased.
func (s *Store) QueueDepth() (int, error) {
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte(jobQueue.msgs)).Stats().KeyN
		return nil
	})
	return n, err
}
