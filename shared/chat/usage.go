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

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// UsageStore is what the usage recorders write to: it adds u (u.Requests
// completions) to the (account, day, model) usage and charges u.Credits
// when > 0, at most once per id (see credits.UsageStore.AddUsage, which
// localstore and dynamostore implement).
type UsageStore interface {
	AddUsage(ctx context.Context, id string, u credits.Usage) error
}

// StoreRecorder is the UsageRecorder that writes each completion to Store
// before it returns, under the UTC day (YYYY-MM-DD) it finished on and a
// fresh id. Nothing stays in memory, which suits a process that may be
// frozen or killed right after a request (a Lambda function); every
// completion costs a store write. It is safe for concurrent use if Store
// is.
type StoreRecorder struct {
	Store UsageStore
	Now   func() time.Time // nil: time.Now
}

var _ UsageRecorder = StoreRecorder{}

// RecordChatUsage implements UsageRecorder.
func (r StoreRecorder) RecordChatUsage(ctx context.Context, account, model string, u Usage, amount credits.Amount) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	inc := increment(account, auth.KeyID(ctx), model, now(), u, amount)
	id, err := credits.NewUsageID()
	if err != nil {
		return fmt.Errorf("record usage of %s for %s: %w", model, account, err)
	}
	if err := r.Store.AddUsage(ctx, id, inc); err != nil {
		return fmt.Errorf("record usage of %s for %s: %w", model, account, err)
	}
	return nil
}

// increment is one completion as a usage increment, charged to account
// and to the spend of key (the caller's API key, "" for none).
func increment(account, key, model string, at time.Time, u Usage, amount credits.Amount) credits.Usage {
	return credits.Usage{
		Account: account, Day: credits.Day(at), Model: model, Requests: 1,
		PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens), Credits: amount, Key: key,
	}
}

// DefaultUsageFlush is the flush interval of a BufferedRecorder made with
// an interval <= 0.
const DefaultUsageFlush = time.Second

const (
	// flushWorkers is how many AddUsage calls one flush makes at once:
	// the embedded store shares a commit among concurrent writes, and
	// DynamoDB's latency is per call.
	flushWorkers = 8
	// writeTimeout bounds one AddUsage call of a periodic flush, so that
	// a hung store call does not stop flushing for good; the entry is then
	// retried with its id.
	writeTimeout = 30 * time.Second
	// maxListed is how many unwritten entries Close's error names.
	maxListed = 10
)

// usageKey is what a BufferedRecorder sums by: the usage row, and the
// API key whose spend the sum is charged to.
type usageKey struct{ account, day, model, key string }

// pendingUsage is usage swapped out of the buffer to be written, with the
// AddUsage id it keeps until a write succeeds.
type pendingUsage struct {
	id string
	u  credits.Usage
}

// BufferedRecorder is the UsageRecorder for a long-running server: it sums
// completions in memory per (account, UTC day, model) and writes the sums
// to its store every interval, from a goroutine that NewBufferedRecorder
// starts and Close stops. RecordChatUsage never waits on the store, and a
// busy server makes one store write per account and model per interval
// instead of one per completion.
//
// A flush swaps the sums out, gives each an id (credits.NewUsageID) and
// calls AddUsage once per sum. A sum whose write fails keeps its id and is
// retried at the next flush: if the failed write had in fact been applied
// (an ambiguous failure: a timeout, a lost answer), the store recognises the
// id and does not charge it again. While such a sum waits, new completions
// of its key keep adding up in a fresh sum, which is written once the
// failed one is. Sums that no retry can write (credits.ErrInvalidUsage,
// or credits.ErrAccountNotFound for a priced sum) are logged and dropped.
//
// What a crash costs: if the process is killed (or Close cannot finish),
// the usage not yet written is lost: at most about one interval of
// completions, more if the store was failing. Credits are never charged
// twice for it. (An unpriced sum retried after an ambiguous failure may be
// counted twice: without credits the store keeps no marker of its id; see
// credits.UsageStore.)
//
// A BufferedRecorder is safe for concurrent use.
type BufferedRecorder struct {
	store UsageStore
	log   *slog.Logger
	now   func() time.Time
	newID func() (string, error)

	mu      sync.Mutex
	sums    map[usageKey]credits.Usage // since the last flush
	pending map[string]credits.Amount  // credits recorded and not yet written, by account
	closed  bool                       // RecordChatUsage writes through

	flushMu sync.Mutex                // one flush at a time
	failed  map[usageKey]pendingUsage // sums to retry with their ids; under flushMu

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
func NewBufferedRecorder(store UsageStore, interval time.Duration, log *slog.Logger) *BufferedRecorder {
	if interval <= 0 {
		interval = DefaultUsageFlush
	}
	r := newBufferedRecorder(store, log)
	t := time.NewTicker(interval)
	r.start(t.C, t.Stop)
	return r
}

// newBufferedRecorder returns a BufferedRecorder whose loop is not started.
func newBufferedRecorder(store UsageStore, log *slog.Logger) *BufferedRecorder {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &BufferedRecorder{
		store: store, log: log, now: time.Now, newID: credits.NewUsageID,
		sums: map[usageKey]credits.Usage{}, pending: map[string]credits.Amount{}, failed: map[usageKey]pendingUsage{},
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

// RecordChatUsage implements UsageRecorder: it adds the completion to the
// in-memory sum of (account, today's UTC day, model) and returns; it
// returns an error only for values no store would accept. After Close it
// writes the completion to the store itself (as StoreRecorder), so that a
// request that outlives the server's shutdown is still recorded.
func (r *BufferedRecorder) RecordChatUsage(ctx context.Context, account, model string, u Usage, amount credits.Amount) error {
	inc := increment(account, auth.KeyID(ctx), model, r.now(), u, amount)
	// The id is chosen at flush time; this one only passes the check.
	if err := credits.CheckUsage("pending", inc); err != nil {
		return fmt.Errorf("record usage of %s for %s: %w", model, account, err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return StoreRecorder{Store: r.store, Now: r.now}.RecordChatUsage(ctx, account, model, u, amount)
	}
	r.addLocked(inc)
	if amount > 0 {
		r.pending[account] += amount
	}
	r.mu.Unlock()
	return nil
}

// UnwrittenCredits implements UnwrittenCreditsRecorder: the credits of
// account's completions recorded since the last successful write, which
// the store's balance does not show yet.
func (r *BufferedRecorder) UnwrittenCredits(account string) credits.Amount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[account]
}

// addLocked adds inc to its key's sum; r.mu is held.
func (r *BufferedRecorder) addLocked(inc credits.Usage) {
	k := usageKey{inc.Account, inc.Day, inc.Model, inc.Key}
	s, ok := r.sums[k]
	if !ok {
		r.sums[k] = inc
		return
	}
	s.Requests += inc.Requests
	s.PromptTokens += inc.PromptTokens
	s.CompletionTokens += inc.CompletionTokens
	s.Credits += inc.Credits
	r.sums[k] = s
}

// flush retries the sums that failed before, then writes the sums recorded
// since the last flush, each AddUsage call bounded by timeout. Sums whose
// key still has a failed sum go back into the buffer.
func (r *BufferedRecorder) flush(ctx context.Context, timeout time.Duration) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()

	retries := make([]pendingUsage, 0, len(r.failed))
	for _, p := range r.failed {
		retries = append(retries, p)
	}
	r.writeAll(ctx, timeout, retries)

	r.mu.Lock()
	batch := r.sums
	r.sums = make(map[usageKey]credits.Usage, len(batch))
	r.mu.Unlock()
	fresh := make([]pendingUsage, 0, len(batch))
	var back []credits.Usage
	for k, u := range batch {
		if _, waiting := r.failed[k]; waiting {
			back = append(back, u)
			continue
		}
		id, err := r.newID()
		if err != nil {
			r.log.ErrorContext(ctx, "usage flush: no id; kept for the next flush", "err", err)
			back = append(back, u)
			continue
		}
		fresh = append(fresh, pendingUsage{id: id, u: u})
	}
	if len(back) > 0 {
		r.mu.Lock()
		for _, u := range back {
			r.addLocked(u)
		}
		r.mu.Unlock()
	}
	r.writeAll(ctx, timeout, fresh)
}

// writeAll writes ps, flushWorkers at a time, and updates r.failed: a
// written sum leaves it, a sum that failed is (still) in it, with its id,
// unless the failure is permanent. r.flushMu is held.
func (r *BufferedRecorder) writeAll(ctx context.Context, timeout time.Duration, ps []pendingUsage) {
	if len(ps) == 0 {
		return
	}
	errs := make([]error, len(ps))
	sem := make(chan struct{}, flushWorkers)
	var wg sync.WaitGroup
	for i, p := range ps {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = r.store.AddUsage(wctx, p.id, p.u)
		}()
	}
	wg.Wait()
	var failures int
	var first error
	r.mu.Lock()
	for i, p := range ps {
		if errs[i] == nil || errors.Is(errs[i], credits.ErrInvalidUsage) || errors.Is(errs[i], credits.ErrAccountNotFound) {
			// Written (the store's balance shows it now) or never will be.
			if r.pending[p.u.Account] -= p.u.Credits; r.pending[p.u.Account] <= 0 {
				delete(r.pending, p.u.Account)
			}
		}
	}
	r.mu.Unlock()
	for i, p := range ps {
		k := usageKey{p.u.Account, p.u.Day, p.u.Model, p.u.Key}
		err := errs[i]
		switch {
		case err == nil:
			delete(r.failed, k)
		case errors.Is(err, credits.ErrInvalidUsage), errors.Is(err, credits.ErrAccountNotFound):
			delete(r.failed, k)
			r.log.ErrorContext(ctx, "usage flush: dropped usage the store refuses", "usage", describe(p), "err", err)
		default:
			r.failed[k] = p
			failures++
			if first == nil {
				first = err
			}
		}
	}
	if failures > 0 {
		r.log.WarnContext(ctx, "usage flush: writes failed; retrying at the next flush with the same ids", "failed", failures, "of", len(ps), "err", first)
	}
}

// Close stops the flush goroutine (after the flush it may be running) and
// writes what is left, retrying failed writes, with growing pauses, until
// all are written or ctx is done. It returns nil when everything recorded
// was written, else an error naming what was not (which is then lost unless
// Close is called again). RecordChatUsage calls after Close write to the
// store directly. Call Close once no more completions are expected, before
// the store is closed.
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
			return fmt.Errorf("close usage recorder: %d usage sums not written (%s): %w", len(left), list(left), ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// unwritten returns the sums waiting to be written: the failed ones with
// their ids, then the buffered ones (without).
func (r *BufferedRecorder) unwritten() []pendingUsage {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]pendingUsage, 0, len(r.failed)+len(r.sums))
	for _, p := range r.failed {
		out = append(out, p)
	}
	for _, u := range r.sums {
		out = append(out, pendingUsage{u: u})
	}
	return out
}

// describe formats one sum for a log line or an error.
func describe(p pendingUsage) string {
	s := fmt.Sprintf("%s %s %s: %d requests, %d prompt and %d completion tokens, %s credits",
		p.u.Account, p.u.Day, p.u.Model, p.u.Requests, p.u.PromptTokens, p.u.CompletionTokens, p.u.Credits)
	if p.id != "" {
		s += " (id " + p.id + ")"
	}
	return s
}

// list describes at most maxListed sums.
func list(ps []pendingUsage) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(describe(p))
	}
	return b.String()
}

// InMemory implements InMemoryRecorder: RecordChatUsage adds to memory (a
// BufferedRecorder that is closed writes to its store directly, but only
// requests that outlive shutdown see that).
func (r *BufferedRecorder) InMemory() bool { return true }
