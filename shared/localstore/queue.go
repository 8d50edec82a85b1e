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

// The queue holds at most one message per job id. A message is visible from
// VisibleAt on; leasing it hides it for the visibility timeout and counts a
// receive. The secondary bucket queue_vis indexes messages by visible-at so
// that leasing and finding the next wake-up read only the front of the
// queue.

// maxIdle bounds how long the consumer and the feed sleep without a signal.
const maxIdle = time.Second

// maxBackoff bounds the retry delay of a failed message.
const maxBackoff = 60 * time.Second

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

func visKey(at int64, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(at, 0)))
	return append(k, id...)
}

func getMessage(tx *bolt.Tx, id string) (message, bool, error) {
	var m message
	ok, err := getJSON(tx.Bucket([]byte(bucketQueue)), []byte(id), &m)
	return m, ok, err
}

// putMessage writes m for id, moving its index entry from old (if it had one).
func putMessage(tx *bolt.Tx, id string, m message, old *message) error {
	vb := tx.Bucket([]byte(bucketQueueVis))
	if old != nil {
		if err := vb.Delete(visKey(old.VisibleAt, id)); err != nil {
			return err
		}
	}
	if err := vb.Put(visKey(m.VisibleAt, id), nil); err != nil {
		return err
	}
	return putJSON(tx.Bucket([]byte(bucketQueue)), []byte(id), m)
}

func deleteMessage(tx *bolt.Tx, id string, old message) error {
	if err := tx.Bucket([]byte(bucketQueueVis)).Delete(visKey(old.VisibleAt, id)); err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketQueue)).Delete([]byte(id))
}

// enqueueTx schedules id at, keeping an earlier visibility if a message
// exists; for a leased message it records a requeue instead.
func enqueueTx(tx *bolt.Tx, id string, at time.Time) error {
	m, ok, err := getMessage(tx, id)
	if err != nil {
		return err
	}
	t := at.UnixNano()
	switch {
	case !ok:
		return putMessage(tx, id, message{VisibleAt: t}, nil)
	case m.Leased:
		if m.Requeue && m.RequeueAt <= t {
			return nil
		}
		m.Requeue, m.RequeueAt = true, t
		return putJSON(tx.Bucket([]byte(bucketQueue)), []byte(id), m)
	case t < m.VisibleAt:
		old := m
		m.VisibleAt = t
		return putMessage(tx, id, m, &old)
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

// expireLeases makes every leased message visible at now (run on Open).
func expireLeases(tx *bolt.Tx, now time.Time) error {
	type fix struct {
		id  string
		old message
	}
	var fixes []fix
	err := tx.Bucket([]byte(bucketQueue)).ForEach(func(k, v []byte) error {
		var m message
		if _, err := getJSON(tx.Bucket([]byte(bucketQueue)), k, &m); err != nil {
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
		if err := putMessage(tx, f.id, m, &f.old); err != nil {
			return err
		}
	}
	return nil
}

// lease is one leased message: its id, the receive count that is the
// lease's token, and its job's account (for fair scheduling).
type lease struct {
	id       string
	receives int
	account  string
}

// fairScan bounds how many visible messages lease looks at to choose the
// fairest ones.
const fairScan = 512

// lease takes up to n messages visible at now, hiding them until now +
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
		c := tx.Bucket([]byte(bucketQueueVis)).Cursor()
		for k, _ := c.First(); k != nil && len(cands) < max(n, fairScan); k, _ = c.Next() {
			if int64(binary.BigEndian.Uint64(k[:8])) > now.UnixNano() {
				break
			}
			id := string(k[8:])
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
			m, ok, err := getMessage(tx, cd.id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("queue index points at missing message %s", cd.id)
			}
			old := m
			m.Leased = true
			m.Receives++
			m.VisibleAt = now.Add(visibility).UnixNano()
			if err := putMessage(tx, cd.id, m, &old); err != nil {
				return err
			}
			out = append(out, lease{id: cd.id, receives: m.Receives, account: cd.account})
		}
		if k, _ := tx.Bucket([]byte(bucketQueueVis)).Cursor().First(); k != nil {
			next = time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))
		}
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
		m, ok, err := getMessage(tx, l.id)
		if err != nil || !ok || !m.Leased || m.Receives != l.receives {
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
				return putMessage(tx, l.id, m, &old)
			}
		}
		return deleteMessage(tx, l.id, m)
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
		m, ok, err := getMessage(tx, l.id)
		if err != nil || !ok || !m.Leased || m.Receives != l.receives {
			return err
		}
		old := m
		m.VisibleAt = now.Add(backoff(m.Receives)).UnixNano()
		if m.Requeue && m.RequeueAt < m.VisibleAt {
			m.VisibleAt = m.RequeueAt
		}
		m.Leased, m.Requeue, m.RequeueAt = false, false, 0
		return putMessage(tx, l.id, m, &old)
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
	workers = max(workers, 1)
	if visibility <= 0 {
		visibility = 5 * time.Minute
	}
	work := make(chan lease)
	done := make(chan string, workers) // a finished lease's account
	busy := map[string]int{}           // jobs in flight per account
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range work {
				s.run(ctx, l, process)
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
			now := s.now()
			ls, next, err := s.lease(now, free, visibility, busy)
			if errors.Is(err, berrors.ErrDatabaseNotOpen) {
				return fmt.Errorf("consume: %w", err)
			}
			if err != nil {
				s.log.Error("queue consumer", "err", err)
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
		case <-s.queueWake:
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

// release counts one job of account as no longer in flight.
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
		n = tx.Bucket([]byte(bucketQueue)).Stats().KeyN
		return nil
	})
	return n, err
}
