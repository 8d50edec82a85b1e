package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/credits"
)

// RecordStore is what the usage recorders write to: each record with its
// usage and its charge, atomically and at most once per record id (see
// credits.RecordStore.AddRecords, which localstore and dynamostore
// implement).
type RecordStore interface {
	AddRecords(ctx context.Context, rs []credits.Record) []error
}

// permanent reports whether err, a record's write error, is one no retry
// can change: a record the store refuses, or a charge of an account it
// does not know.
func permanent(err error) bool {
	return errors.Is(err, credits.ErrInvalidRecord) || errors.Is(err, credits.ErrAccountNotFound)
}

// StoreRecorder is the UsageRecorder that writes each record to Store
// before it returns (one AddRecords call of one record, tried up to three
// times with the same record: the store writes it once). Nothing stays in
// memory, which suits a process that may be frozen or killed right after
// a request (a Lambda function); every request costs a store write. It is
// safe for concurrent use if Store is.
type StoreRecorder struct {
	Store RecordStore
}

var _ UsageRecorder = StoreRecorder{}

// InMemory implements UsageRecorder: false, Record waits on the store.
func (StoreRecorder) InMemory() bool { return false }

// UnwrittenCredits implements UsageRecorder: 0, Record wrote every record
// it took before it returned.
func (StoreRecorder) UnwrittenCredits(string) credits.Amount { return 0 }

// storeAttempts is how many times StoreRecorder tries a write.
const storeAttempts = 3

// Record implements UsageRecorder.
func (r StoreRecorder) Record(ctx context.Context, rec credits.Record) error {
	var err error
	for attempt := range storeAttempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(25<<attempt) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("record %s of %s: %w (and then %w)", rec.ID, rec.Account, err, ctx.Err())
			case <-t.C:
			}
		}
		if err = r.Store.AddRecords(ctx, []credits.Record{rec})[0]; err == nil || permanent(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", rec.ID, rec.Account, err)
	}
	return nil
}

// DefaultUsageFlush is the flush interval of a BufferedRecorder made with
// an interval <= 0.
const DefaultUsageFlush = time.Second

const (
	// flushBatch is the most records one AddRecords call of a flush
	// carries (the embedded store writes them in one transaction).
	flushBatch = 1000
	// writeTimeout bounds one AddRecords call of a periodic flush, so
	// that a hung store call does not stop flushing for good; its records
	// are then retried.
	writeTimeout = 30 * time.Second
	// maxListed is how many unwritten records Close's error names.
	maxListed = 10
	// maxSpare bounds the array a flush keeps for the records after it.
	maxSpare = 1 << 14
)

// BufferedRecorder is the UsageRecorder for a long-running server: it
// keeps records in memory and writes them to its store every interval,
// from a goroutine that NewBufferedRecorder starts and Close stops, in
// batches of up to flushBatch records per AddRecords call (the embedded
// store writes a batch in one transaction; DynamoDB one transaction per
// record). Record never waits on the store.
//
// A record whose write fails is kept and written again at the next flush:
// the store writes a record once, by its id, so an ambiguous failure (a
// timeout, a lost answer) is never charged twice. Records that no retry
// can write (credits.ErrInvalidRecord, or credits.ErrAccountNotFound for a
// charged one) are logged and dropped.
//
// What a crash costs: if the process is killed (or Close cannot finish),
// the records not yet written are lost, with their usage and charges: at
// most about one interval of requests, more if the store was failing.
// Credits are never charged twice.
//
// A BufferedRecorder is safe for concurrent use.
type BufferedRecorder struct {
	store RecordStore
	log   *slog.Logger

	mu      sync.Mutex
	buf     []credits.Record          // since the last flush
	spare   []credits.Record          // the last flush's array, cleared: the next buf's
	pending map[string]credits.Amount // costs recorded and not yet written, by account
	closed  bool                      // Record writes through

	flushMu sync.Mutex       // one flush at a time
	failed  []credits.Record // records to write again; under flushMu

	stopOnce   sync.Once
	stop       chan struct{} // closed by Close: the loop returns
	done       chan struct{} // closed when the loop has returned
	cancelLoop context.CancelFunc
	stopTicker func()
}

var _ UsageRecorder = (*BufferedRecorder)(nil)

// NewBufferedRecorder returns a BufferedRecorder writing to store every
// interval (DefaultUsageFlush if interval <= 0), and starts its flush
// goroutine; Close stops it. log receives flush failures (nil: discard).
func NewBufferedRecorder(store RecordStore, interval time.Duration, log *slog.Logger) *BufferedRecorder {
	if interval <= 0 {
		interval = DefaultUsageFlush
	}
	r := newBufferedRecorder(store, log)
	t := time.NewTicker(interval)
	r.start(t.C, t.Stop)
	return r
}

// newBufferedRecorder returns a BufferedRecorder whose loop is not started.
func newBufferedRecorder(store RecordStore, log *slog.Logger) *BufferedRecorder {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &BufferedRecorder{
		store: store, log: log, pending: map[string]credits.Amount{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// start runs the flush loop: a flush at each tick until Close.
func (r *BufferedRecorder) start(tick <-chan time.Time, stopTicker func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancelLoop, r.stopTicker = cancel, stopTicker
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-tick:
				r.flush(ctx, writeTimeout)
			}
		}
	}()
}

// Record implements UsageRecorder: it keeps rec in memory and returns; it
// returns an error only for a record no store would accept
// (credits.CheckAddRecord). After Close it writes the record to the store
// itself (as StoreRecorder), so that a request that outlives the server's
// shutdown is still recorded.
func (r *BufferedRecorder) Record(ctx context.Context, rec credits.Record) error {
	if err := credits.CheckAddRecord(rec); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return StoreRecorder{Store: r.store}.Record(ctx, rec)
	}
	r.buf = append(r.buf, rec)
	if c, ok := rec.Charge(); ok {
		r.pending[rec.Account] += c
	}
	r.mu.Unlock()
	return nil
}

// UnwrittenCredits implements UsageRecorder: the costs of
// account's records kept since the last successful write, which the
// store's balance does not show yet.
func (r *BufferedRecorder) UnwrittenCredits(account string) credits.Amount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[account]
}

// flush writes the records that failed before and those kept since the
// last flush, each AddRecords call bounded by timeout.
func (r *BufferedRecorder) flush(ctx context.Context, timeout time.Duration) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	batch := r.buf
	r.buf, r.spare = r.spare, nil
	r.mu.Unlock()
	all := batch
	if len(r.failed) > 0 {
		all = append(r.failed, batch...)
	}
	r.failed = nil
	var failures int
	var first error
	for len(all) > 0 {
		n := min(len(all), flushBatch)
		chunk := all[:n]
		all = all[n:]
		wctx, cancel := context.WithTimeout(ctx, timeout)
		errs := r.store.AddRecords(wctx, chunk)
		cancel()
		r.mu.Lock()
		for i, rec := range chunk {
			if c, ok := rec.Charge(); ok && (errs[i] == nil || permanent(errs[i])) {
				// Written (the store's balance shows it now) or never will be.
				if r.pending[rec.Account] -= c; r.pending[rec.Account] <= 0 {
					delete(r.pending, rec.Account)
				}
			}
		}
		r.mu.Unlock()
		for i, rec := range chunk {
			switch err := errs[i]; {
			case err == nil:
			case permanent(err):
				r.log.ErrorContext(ctx, "usage flush: dropped a record the store refuses", "record", describe(rec), "err", err)
			default:
				r.failed = append(r.failed, rec)
				failures++
				if first == nil {
					first = err
				}
			}
		}
	}
	if failures > 0 {
		r.log.WarnContext(ctx, "usage flush: records not written; written again at the next flush", "failed", failures, "err", first)
	}
	if cap(batch) <= maxSpare {
		// r.failed holds copies: the array is free for the next records.
		clear(batch[:cap(batch)])
		r.mu.Lock()
		r.spare = batch[:0]
		r.mu.Unlock()
	}
}

// Close stops the flush goroutine (after the flush it may be running) and
// writes what is left, retrying failed writes, with growing pauses, until
// all are written or ctx is done. It returns nil when every record was
// written, else an error naming what was not (which is then lost unless
// Close is called again). Record calls after Close write to the store
// directly. Call Close once no more requests are expected, before the
// store is closed.
func (r *BufferedRecorder) Close(ctx context.Context) error {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stop)
		select {
		case <-r.done:
		case <-ctx.Done():
			r.cancelLoop() // a flush in progress stops waiting on the store
			<-r.done
		}
		r.cancelLoop()
		r.stopTicker()
	})
	pause := 10 * time.Millisecond
	for {
		r.flush(ctx, writeTimeout)
		left := r.unwritten()
		if len(left) == 0 {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("close usage recorder: %d records not written (%s): %w", len(left), list(left), ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// unwritten returns the records waiting to be written.
func (r *BufferedRecorder) unwritten() []credits.Record {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(append([]credits.Record(nil), r.failed...), r.buf...)
}

// describe formats one record for a log line or an error.
func describe(rec credits.Record) string {
	return fmt.Sprintf("%s %s of %s, %s: %d prompt and %d completion tokens, %s credits",
		rec.Kind, rec.ID, rec.Account, rec.Model, rec.Tokens.Prompt, rec.Tokens.Completion, rec.Cost)
}

// list describes at most maxListed records.
func list(rs []credits.Record) string {
	var b strings.Builder
	for i, rec := range rs {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(describe(rec))
	}
	return b.String()
}

// InMemory implements UsageRecorder: true, Record adds to memory (a
// BufferedRecorder that is closed writes to its store directly, but only
// requests that outlive shutdown see that).
func (r *BufferedRecorder) InMemory() bool { return true }
