// Package localstore is the embedded, persistent store behind `genway
// serve`: jobs, idempotency keys, API keys, accounts, the credit ledger, the
// records of requests (records.go), chat and job usage, a durable job queue
// and the job change feed, and the webhooks (account configs, job
// deliveries and their own durable queue, see webhooks.go), all in one bbolt
// file.
//
// Crash safety: every operation is one bbolt read-write transaction, and
// bbolt commits are atomic and durable (the meta page is written and fsynced
// last). A SIGKILL or power loss at any point therefore loses nothing that
// was committed and never exposes half of an operation: a job is stored
// together with its credit hold, its idempotency record and its queue
// message; a status change together with its change-feed record; a
// settlement together with its ledger entry and its job usage count; a
// reservation together with its hold, its ledger entry and its place in
// the index of open reservations, which its settlement removes; a
// request's record together with its usage and its charge (or with its
// reservation's settlement). MemoryHolds is the exception, for the chat
// completions of keys with a credit limit: their holds live in memory and
// their records are written behind, within about 25 ms (gate.go says what
// a crash then loses: never a double charge).
//
// The file is opened by one process at a time (bbolt takes an exclusive
// lock); a second Open fails with ErrLocked after its timeout.
package localstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Interfaces the Store implements.
var (
	_ jobs.Store         = (*Store)(nil)
	_ jobs.DeleteStore   = (*Store)(nil)
	_ jobs.Queue         = (*Store)(nil)
	_ auth.Store         = (*Store)(nil)
	_ credits.Store      = (*Store)(nil)
	_ credits.UsageStore = (*Store)(nil)
	_ credits.Reserver   = (*Store)(nil)
)

// ErrLocked is returned by Open when another process (or another Store in
// this process) holds the file.
var ErrLocked = errors.New("store file is locked by another process")

// DefaultLockTimeout is how long Open waits for the file lock.
const DefaultLockTimeout = time.Second

// Bucket names.
const (
	bucketJobs      = "jobs"              // job id -> jobs.Job
	bucketIdem      = "idempotency"       // account/key -> jobs.Idempotency
	bucketAccounts  = "accounts"          // account id -> credits.Account
	bucketLedger    = "ledger"            // entry id -> credits.Entry
	bucketLedgerSeq = "ledger_seq"        // account \x00 seq -> entry id
	bucketKeys      = "keys"              // key hash -> auth.Record
	bucketKeyIDs    = "key_ids"           // key id -> key hash
	bucketQueue     = "queue"             // job id -> message (see queue)
	bucketQueueVis  = "queue_vis"         // visible-at (ns) ++ job id -> nil
	bucketChanges   = "changes"           // seq -> change
	bucketMeta      = "meta"              // feed cursor
	bucketUsage     = "usage"             // account \x00 day \x00 model -> credits.Usage
	bucketJobUsage  = "job_usage"         // account \x00 day \x00 type \x00 model -> credits.JobUsage
	bucketOpenRes   = "reservations_open" // at (8 bytes) ++ reservation entry id -> nil, until settled
	// Records (records.go).
	bucketRecords     = "records"         // record id -> credits.Record
	bucketRecordsTime = "records_time"    // at (Unix ms, 8 bytes) ++ record id -> nil
	bucketRecordsAcct = "records_account" // account \x00 at (8 bytes) ++ record id -> nil
)

// Options tune OpenWith.
type Options struct {
	// LockTimeout is how long to wait for the file lock before ErrLocked
	// (0: DefaultLockTimeout; negative: do not wait at all beyond one try).
	LockTimeout time.Duration
	// Log receives errors of the background loops (Consume, Feed) that
	// are retried rather than returned. nil: discarded.
	Log *slog.Logger
	// Now is the clock for queue visibility, idempotency and record
	// expiry (nil: time.Now).
	Now func() time.Time
	// RecordRetention is how long a record is kept (its Expires, unless
	// it has one); 0: credits.DefaultRecordRetention.
	RecordRetention time.Duration
	// WriteBehind is the pace of the records MemoryHolds writes behind:
	// under load they are committed at most once in it, and a crash loses
	// at most about that much of them (see gate); 0: DefaultWriteBehind.
	WriteBehind time.Duration
}

// Store is the embedded store. It is safe for concurrent use. Consume and
// Feed are its background loops; stop them before Close.
type Store struct {
	db      *bolt.DB
	log     *slog.Logger
	now     func() time.Time
	records time.Duration // record retention

	writers atomic.Int32 // update calls in flight
	gate    *gate        // what the file does not show yet (gate.go)
	closing sync.Once

	queueWake chan struct{} // signalled after a commit that may make a message visible
	feedWake  chan struct{} // signalled after a commit that appends a change
	hookWake  chan struct{} // signalled after a SendWebhook
}

// Open opens (creating if needed) the store file at path, waiting up to
// DefaultLockTimeout for the file lock.
func Open(path string) (*Store, error) {
	return OpenWith(path, Options{})
}

// OpenTimeout is Open with a lock timeout of d; it returns an error
// matching ErrLocked if the lock is not obtained within d.
func OpenTimeout(path string, d time.Duration) (*Store, error) {
	return OpenWith(path, Options{LockTimeout: d})
}

// OpenWith opens the store at path with o. On open, every queue lease is
// expired at once: only one process owns the file, so a lease that is
// still held was taken by a process that died, and its job is redone now.
func OpenWith(path string, o Options) (*Store, error) {
	timeout := o.LockTimeout
	switch {
	case timeout == 0:
		timeout = DefaultLockTimeout
	case timeout < 0:
		timeout = time.Millisecond
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	records := o.RecordRetention
	if records <= 0 {
		records = credits.DefaultRecordRetention
	}
	every := o.WriteBehind
	if every <= 0 {
		every = DefaultWriteBehind
	}
	s := &Store{
		db: db, log: log, now: now, records: records,
		queueWake: make(chan struct{}, 1),
		feedWake:  make(chan struct{}, 1),
		hookWake:  make(chan struct{}, 1),
	}
	db.MaxBatchDelay = batchDelay
	if err := s.init(every); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	go s.writeLoop()
	return s, nil
}

// init makes the buckets, the webhooks' state and the gate (whose writes
// behind keep the pace every), and expires the queue's leases.
func (s *Store) init(every time.Duration) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{
			bucketJobs, bucketIdem, bucketAccounts, bucketLedger, bucketLedgerSeq,
			bucketKeys, bucketKeyIDs, bucketQueue, bucketQueueVis, bucketChanges, bucketMeta,
			bucketUsage, bucketJobUsage, bucketOpenRes, bucketRecords, bucketRecordsTime, bucketRecordsAcct,
		} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if err := initWebhooks(tx, s.now()); err != nil {
			return err
		}
		s.gate = newGate(chargesWritten(tx), every)
		return jobQueue.expireLeases(tx, s.now())
	})
}

// Close writes the records written behind (MemoryHolds) and closes the
// file. It waits for running transactions; Consume and Feed must have
// returned.
func (s *Store) Close() error {
	s.closing.Do(func() {
		s.gate.mu.Lock()
		s.gate.closed = true
		s.gate.mu.Unlock()
		close(s.gate.stop)
		<-s.gate.done
	})
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

// batchDelay is how long a write waits for others to share its commit.
// Commits are fsync-bound (about 2 ms here); sharing one among concurrent
// creates and transitions multiplies throughput for a small latency cost.
const batchDelay = time.Millisecond

// refusal carries an expected outcome (a domain error such as
// jobs.ErrConflict) out of a batched transaction function without failing
// the batch it shares a commit with. Only return one before writing.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }

// Unwrap lets errors.Is see the outcome where a refusal is returned as it
// is (a transaction run by db.Update, not update).
func (r refusal) Unwrap() error { return r.err }

func refuse(err error) error { return refusal{err} }

// update runs fn in a read-write transaction. A caller alone commits at
// once; callers that arrive while another write is in flight share one
// commit (bbolt's Batch): group commit, without a delay for the lone
// caller. fn may run more than once, so it must reset what it captures; it
// reports expected outcomes with refuse.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	run := s.db.Batch
	if s.writers.Add(1) == 1 {
		run = s.db.Update
	}
	defer s.writers.Add(-1)
	var refused error
	err := run(func(tx *bolt.Tx) error {
		refused = nil
		err := fn(tx)
		if r, ok := err.(refusal); ok {
			refused = r.err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return refused
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// arena hands out the keys and values of one transaction's puts from a
// few large blocks instead of an allocation each: bbolt keeps a put's
// value until the commit (a key it copies, so for a key the arena saves
// only the key's own allocation), and a batch of records makes five puts
// a record (the record, its two index keys, its ledger entry and that
// entry's ledger_seq key). A nil arena allocates each one on its own. A buffer from buf is given to keep
// before the next buf (which would hand out the same space): buf panics
// otherwise.
type arena struct {
	b    []byte
	open bool // a buffer from buf is not kept yet
}

// arenaBlock is the size of an arena's blocks.
const arenaBlock = 64 << 10

// buf returns an empty buffer with room for at least room bytes, to
// append a key or a value to and then give to keep: the arena's free
// space, a new block when that is short.
func (a *arena) buf(room int) []byte {
	if a == nil {
		return make([]byte, 0, room)
	}
	if a.open {
		panic("localstore: arena.buf before the last buffer was kept")
	}
	a.open = true
	if cap(a.b)-len(a.b) < room {
		a.b = make([]byte, 0, max(arenaBlock, room))
	}
	return a.b[len(a.b):len(a.b)]
}

// keep returns b, a buffer from buf with what was appended to it, its
// capacity clipped, and takes its bytes from the arena's free space (an
// append that outgrew it made b an allocation of its own, and leaves the
// arena as it was).
func (a *arena) keep(b []byte) []byte {
	b = b[:len(b):len(b)]
	if a == nil {
		return b
	}
	a.open = false
	if free := a.b[len(a.b):cap(a.b)]; len(b) > 0 && len(free) > 0 && &free[0] == &b[0] {
		a.b = a.b[:len(a.b)+len(b)]
	}
	return b
}

// bytes returns s's bytes, kept in the arena.
func (a *arena) bytes(s string) []byte { return a.keep(append(a.buf(len(s)), s...)) }

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return b.Put(key, raw)
}
