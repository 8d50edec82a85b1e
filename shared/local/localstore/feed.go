package localstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/genway/genway/shared/credits"
)

// The change feed: Transition appends a record (key: a monotonic sequence
// number) for every status change in the transaction that makes it. Feed
// delivers records after a persisted cursor and, once apply succeeded,
// advances the cursor and deletes the delivered records in one transaction.

// feedBatch bounds the records read per round.
const feedBatch = 100

// feedMaxBackoff bounds the wait before retrying a failed apply.
const feedMaxBackoff = 10 * time.Second

const cursorKey = "feed_cursor"

type changeRecord struct {
	Seq    uint64         `json:"seq"`
	Change credits.Change `json:"change"`
}

func appendChange(tx *bolt.Tx, c credits.Change) error {
	b := tx.Bucket([]byte(bucketChanges))
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return putJSON(b, u64(seq), changeRecord{Seq: seq, Change: c})
}

func readCursor(tx *bolt.Tx) uint64 {
	v := tx.Bucket([]byte(bucketMeta)).Get([]byte(cursorKey))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// pendingChanges returns up to n records after the cursor, oldest first.
func (s *Store) pendingChanges(n int) ([]changeRecord, error) {
	var out []changeRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketChanges)).Cursor()
		for k, v := c.Seek(u64(readCursor(tx) + 1)); k != nil && len(out) < n; k, v = c.Next() {
			var r changeRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode change %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read change feed: %w", err)
	}
	return out, nil
}

// advance persists the cursor at seq and drops the records up to it.
func (s *Store) advance(seq uint64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if seq <= readCursor(tx) {
			return nil
		}
		b := tx.Bucket([]byte(bucketChanges))
		var dead [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq; k, _ = c.Next() {
			dead = append(dead, append([]byte(nil), k...))
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(cursorKey), u64(seq))
	})
	if err != nil {
		return fmt.Errorf("advance change feed to %d: %w", seq, err)
	}
	return nil
}

// Feed delivers the job change records to apply in order, at least once,
// until ctx is done (then it returns nil). The cursor is persisted only
// after apply returned nil for a record, so a record is redelivered after a
// crash or an apply error (retried with backoff from 100 ms up to 10 s;
// later records wait). Feed sleeps until a Transition signals a new record
// (at most one second). Every status change is delivered, final or not;
// credits.Apply ignores the others. It returns an error only if the store
// is closed. Run one Feed per Store.
func (s *Store) Feed(ctx context.Context, apply func(ctx context.Context, c credits.Change) error) error {
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		recs, err := s.pendingChanges(feedBatch)
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return fmt.Errorf("feed: %w", err)
		}
		if err != nil {
			s.log.Error("change feed", "err", err)
			failures++
		}
		var last uint64
		var applyErr error
		var failed credits.Change
		for _, r := range recs {
			if applyErr = apply(ctx, r.Change); applyErr != nil {
				failed = r.Change
				break
			}
			last = r.Seq
		}
		if last > 0 {
			if err := s.advance(last); err != nil {
				if errors.Is(err, berrors.ErrDatabaseNotOpen) {
					return fmt.Errorf("feed: %w", err)
				}
				s.log.Error("change feed", "err", err)
			}
		}
		wait := maxIdle
		switch {
		case applyErr != nil:
			if ctx.Err() != nil {
				return nil
			}
			s.log.Error("change feed apply failed; will retry", "job_id", failed.JobID, "status", failed.NewStatus, "err", applyErr)
			failures++
			wait = feedBackoff(failures)
		case err == nil:
			failures = 0
			if len(recs) == feedBatch {
				continue
			}
		default:
			wait = feedBackoff(failures)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.feedWake:
			if applyErr != nil || err != nil {
				// A new record does not cure a failing one: keep the backoff.
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

func feedBackoff(failures int) time.Duration {
	if failures > 7 {
		return feedMaxBackoff
	}
	return min(100*time.Millisecond<<max(failures-1, 0), feedMaxBackoff)
}
