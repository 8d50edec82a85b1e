package localstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// The gate: exact credit checks without a commit on the request path.
//
// A completion of an API key with a credit limit is held before it runs
// and charged when it ends. Through Reserve, Settle and AddRecords that is
// three commits, each waiting for its fsync (about 2 ms here), which held
// a limited key to a fifth of an unlimited one's rate. Only this process
// opens the file, so MemoryHolds keeps those holds in memory and writes the
// completions' records (with their charges) behind, in the next commit of
// one writer goroutine (writeLoop), which a request does not wait for.
//
// The gate is what the file does not show yet, per account and per key:
//   - held: the holds in memory (MemoryHolds.Reserve);
//   - queued: charges written behind, waiting for their write;
//   - writing: charges in the write in flight (gate.seq), which is in a
//     snapshot of the file once the snapshot's chargesWrittenKey is seq;
//   - pending: the holds of transactions that checked the gate and may not
//     have committed yet (Reserve, Create), each in a snapshot once the
//     snapshot has its witness (the reservation's ledger entry, the job).
//
// Every check of what an account or a key has left (Reserve, Create,
// MemoryHolds.Reserve) runs under the gate's lock against one snapshot of
// the file (the check's own transaction, or a read transaction begun under
// the lock) and adds what the gate has that the snapshot does not show
// (unseen). What the gate has is removed only after it is in the file, so a
// check counts every credit exactly once: in the snapshot or in the gate.
// Reads of positions (Account, Accounts and the keys) add the same, and
// reads of what was written (records, usage, the ledger) first wait for
// the writes behind them (awaitWrites).
//
// What a crash costs: the holds in memory go with the process (there is
// nothing to release), and the records written behind and not yet
// committed are lost with their charges: those of the last pace
// (Options.WriteBehind: DefaultWriteBehind, or GENWAY_USAGE_FLUSH under
// genway serve, the interval at which the usage recorder writes the other
// keys' records) and its commit. Nothing is charged twice.
type gate struct {
	mu       sync.Mutex
	accounts map[string]*owed
	keys     map[string]*owed
	holds    map[string]credits.Entry // MemoryHolds' reservations, by ledger id

	// Decoded rows, each as of a snapshot (its tx.ID()): the checks of
	// one snapshot (between two commits) decode an account or a key once.
	accountRows map[string]accountRow
	keyRows     map[string]keyRow
	// marker is chargesWritten of the snapshot txid.
	marker struct {
		txid int
		seq  uint64
	}

	queue   []credits.Record // records written behind, waiting
	spare   []credits.Record // the last write's array, cleared: the next queue's
	seq     uint64           // the write in flight's, 0 when none
	lastSeq uint64           // the last write's (the file's chargesWrittenKey at open)
	in, out uint64           // records queued; records queued before the last complete write
	round   chan struct{}    // closed after each write
	closed  bool             // records are written through
	every   time.Duration    // the pace: the least time from one write to the next
	hurry   chan struct{}    // signalled by a read that waits for the writes (awaitWrites)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// owed is what the gate has of one account or key.
type owed struct {
	held, queued, writing credits.Amount
	pending               []*pendingHold
}

// accountRow and keyRow are rows read in the snapshot txid (ok: found).
type accountRow struct {
	txid int
	a    credits.Account
	ok   bool
}

type keyRow struct {
	txid int
	r    auth.Record
	ok   bool
}

// maxSpare bounds the array a write keeps for the next queue.
const maxSpare = 4096

// maxRows bounds each map of decoded rows: past it, it starts afresh.
const maxRows = 4096

// account reads account id in tx, decoded once per snapshot for read
// transactions. Call with g.mu held.
func (g *gate) account(tx *bolt.Tx, id string) (credits.Account, bool, error) {
	if row, hit := g.accountRows[id]; hit && !tx.Writable() && row.txid == tx.ID() {
		return row.a, row.ok, nil
	}
	var a credits.Account
	ok, err := getJSON(tx.Bucket([]byte(bucketAccounts)), []byte(id), &a)
	if err == nil && !tx.Writable() {
		if len(g.accountRows) >= maxRows {
			clear(g.accountRows)
		}
		g.accountRows[id] = accountRow{tx.ID(), a, ok}
	}
	return a, ok, err
}

// key reads key id in tx as keyByID does, decoded once per snapshot for
// read transactions. Call with g.mu held.
func (g *gate) key(tx *bolt.Tx, id string) (auth.Record, bool, error) {
	if row, hit := g.keyRows[id]; hit && !tx.Writable() && row.txid == tx.ID() {
		return row.r, row.ok, nil
	}
	_, r, ok, err := keyByID(tx, id)
	if err == nil && !tx.Writable() {
		if len(g.keyRows) >= maxRows {
			clear(g.keyRows)
		}
		g.keyRows[id] = keyRow{tx.ID(), r, ok}
	}
	return r, ok, err
}

// pendingHold is a transaction's hold, in the file once the file has its
// witness: id in bucket.
type pendingHold struct {
	account, key string
	amount       credits.Amount
	bucket, id   string
}

// chargesWrittenKey (in bucketMeta) is the seq of the last write behind
// that committed (8 bytes, big-endian).
const chargesWrittenKey = "charges_written"

func chargesWritten(tx *bolt.Tx) uint64 {
	v := tx.Bucket([]byte(bucketMeta)).Get([]byte(chargesWrittenKey))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func newGate(lastSeq uint64, every time.Duration) *gate {
	return &gate{every: every, hurry: make(chan struct{}, 1),
		accounts: map[string]*owed{}, keys: map[string]*owed{}, holds: map[string]credits.Entry{},
		accountRows: map[string]accountRow{}, keyRows: map[string]keyRow{},
		lastSeq: lastSeq, round: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// of returns m's owed of id, made if need be.
func of(m map[string]*owed, id string) *owed {
	o := m[id]
	if o == nil {
		o = &owed{}
		m[id] = o
	}
	return o
}

// tidy removes m's owed of id once it has nothing.
func tidy(m map[string]*owed, id string) {
	if o := m[id]; o != nil && o.held == 0 && o.queued == 0 && o.writing == 0 && len(o.pending) == 0 {
		delete(m, id)
	}
}

// unseen returns what the gate has of o that tx's snapshot does not show:
// held credits, and charged ones. Call with g.mu held.
func (g *gate) unseen(tx *bolt.Tx, o *owed) (held, charged credits.Amount) {
	if o == nil {
		return 0, 0
	}
	held, charged = o.held, o.queued
	if o.writing != 0 && g.written(tx) < g.seq {
		charged += o.writing
	}
	for _, p := range o.pending {
		if tx.Bucket([]byte(p.bucket)).Get([]byte(p.id)) == nil {
			held += p.amount
		}
	}
	return held, charged
}

// written is chargesWritten(tx), read once per snapshot for read
// transactions. Call with g.mu held.
func (g *gate) written(tx *bolt.Tx) uint64 {
	if tx.Writable() {
		return chargesWritten(tx)
	}
	if g.marker.txid != tx.ID() {
		g.marker.txid, g.marker.seq = tx.ID(), chargesWritten(tx)
	}
	return g.marker.seq
}

// showAccount adds to a what the gate has of it that tx does not show.
// Call with g.mu held.
func (g *gate) showAccount(tx *bolt.Tx, a *credits.Account) {
	held, charged := g.unseen(tx, g.accounts[a.ID])
	a.Held += held
	a.Balance -= charged
	a.Available = a.Balance - a.Held
}

// showKey adds to r what the gate has of it that tx does not show. Call
// with g.mu held.
func (g *gate) showKey(tx *bolt.Tx, r *auth.Record) {
	held, charged := g.unseen(tx, g.keys[r.ID])
	r.Held += held
	r.Spent += charged
}

// check refuses amount on account a (read in tx) and on key id ("" for
// none) when, with what the gate has that tx does not show, the account's
// available credits or the key's room under its limit fall short: an
// error wrapping credits.ErrInsufficient, or credits.KeyLimit's; an
// unknown key is refused too (see holdOnKey). Those outcomes are
// refusals (refuse). Call with g.mu held.
func (g *gate) check(tx *bolt.Tx, a credits.Account, key string, amount credits.Amount) error {
	g.showAccount(tx, &a)
	if a.Available < amount {
		return refuse(fmt.Errorf("%s credits, %s available: %w", amount, a.Available, credits.ErrInsufficient))
	}
	if key == "" {
		return nil
	}
	r, ok, err := g.key(tx, key)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(fmt.Errorf("hold on key %s: %w", key, auth.ErrKeyNotFound))
	}
	seen := r
	g.showKey(tx, &seen)
	if r.CreditLimit != nil && seen.Spent+seen.Held+amount > *r.CreditLimit {
		return refuse(credits.KeyLimit(key, amount, *r.CreditLimit, seen.Spent+seen.Held))
	}
	return nil
}

// addPending records p (nil: nothing). Call with g.mu held.
func (g *gate) addPending(p *pendingHold) {
	if p == nil {
		return
	}
	a := of(g.accounts, p.account)
	a.pending = append(a.pending, p)
	if p.key != "" {
		k := of(g.keys, p.key)
		k.pending = append(k.pending, p)
	}
}

// dropPending removes p (nil: nothing), wherever it was added. Call with
// g.mu held.
func (g *gate) dropPending(p *pendingHold) {
	if p == nil {
		return
	}
	drop := func(m map[string]*owed, id string) {
		if o := m[id]; o != nil {
			for i, q := range o.pending {
				if q == p {
					o.pending = append(o.pending[:i], o.pending[i+1:]...)
					break
				}
			}
			tidy(m, id)
		}
	}
	drop(g.accounts, p.account)
	if p.key != "" {
		drop(g.keys, p.key)
	}
}

// hold runs a transaction's check of amount on account a and key under
// the gate (check), and on success records the transaction's hold as
// pending, witnessed by id in bucket; *p is the hold this call recorded
// before (bbolt may run a transaction's function again), replaced. Call
// it in the transaction, before it writes the hold; after the
// transaction, release *p (gate.release).
func (g *gate) hold(tx *bolt.Tx, p **pendingHold, a credits.Account, key string, amount credits.Amount, bucket, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropPending(*p)
	*p = nil
	if err := g.check(tx, a, key, amount); err != nil {
		return err
	}
	*p = &pendingHold{account: a.ID, key: key, amount: amount, bucket: bucket, id: id}
	g.addPending(*p)
	return nil
}

// release removes a transaction's pending hold once the transaction has
// ended: it is in the file, or it never will be.
func (g *gate) release(p *pendingHold) {
	if p == nil {
		return
	}
	g.mu.Lock()
	g.dropPending(p)
	g.mu.Unlock()
}

// charge adds c (negative: removes it) to the owed field that at selects
// of r's account and of its key. Call with g.mu held.
func (g *gate) charge(r credits.Record, c credits.Amount, at func(*owed) *credits.Amount) {
	*at(of(g.accounts, r.Account)) += c
	tidy(g.accounts, r.Account)
	if r.Key != "" {
		*at(of(g.keys, r.Key)) += c
		tidy(g.keys, r.Key)
	}
}

func queuedOf(o *owed) *credits.Amount  { return &o.queued }
func writingOf(o *owed) *credits.Amount { return &o.writing }

// viewGated runs fn in a read transaction begun under the gate's lock
// (see gate: a check or a read of positions counts each credit once).
func (s *Store) viewGated(fn func(tx *bolt.Tx, g *gate) error) error {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return s.db.View(func(tx *bolt.Tx) error { return fn(tx, g) })
}

// awaitWrites waits until the records queued before it are written (or
// refused), so that a read of records, usage or the ledger sees them;
// it gives up after awaitLimit or at ctx's end (the read then shows what
// is in the file).
func (s *Store) awaitWrites(ctx context.Context) {
	g := s.gate
	g.mu.Lock()
	target := g.in
	if g.out >= target {
		g.mu.Unlock()
		return
	}
	signal(g.hurry) // the writer gathering for its pace writes now
	t := time.NewTimer(awaitLimit)
	defer t.Stop()
	for g.out < target {
		round := g.round
		g.mu.Unlock()
		select {
		case <-round:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// awaitLimit bounds awaitWrites (a store failing its writes).
const awaitLimit = 5 * time.Second

// writeBehind queues r, checked (credits.CheckAddRecord), to be written by
// writeLoop, its charge in the gate meanwhile; it reports false, queuing
// nothing, once the store is closing (the caller writes r itself).
func (s *Store) writeBehind(r credits.Record) bool {
	g := s.gate
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	if c, ok := r.Charge(); ok {
		g.charge(r, c, queuedOf)
	}
	g.queue = append(g.queue, r)
	g.in++
	g.mu.Unlock()
	signal(g.wake)
	return true
}

// DefaultWriteBehind is the pace of the writes behind when
// Options.WriteBehind is 0: the least time from one write to the next.
// Under load a write carries what came in that time (each commit's fsync
// costs CPU too), and a crash loses at most about that much more.
const DefaultWriteBehind = 25 * time.Millisecond

// The retries of the writes behind.
const (
	// writeRetry is the first pause after a write behind failed; it
	// doubles up to writeRetryMax.
	writeRetry    = 100 * time.Millisecond
	writeRetryMax = 5 * time.Second
	// closeWrites is how many times Close tries to write what is left
	// behind before it gives up on it (and logs what is lost).
	closeWrites = 5
)

// writeLoop writes the records written behind: all that are queued, in
// one AddRecords transaction with the write's seq, at most once a pace
// (so a write gathers what came since the one before: group commit),
// sooner when a read waits for it (awaitWrites). A write that fails is
// tried again after a pause; Close stops the loop after the writes of
// what is left.
func (s *Store) writeLoop() {
	g := s.gate
	defer close(g.done)
	pause := time.Duration(0)
	for {
		var retry <-chan time.Time
		var t *time.Timer
		if pause > 0 {
			t = time.NewTimer(pause)
			retry = t.C
		}
		select {
		case <-g.wake:
		case <-retry:
		case <-g.stop:
			if t != nil {
				t.Stop()
			}
			s.writeAtClose()
			return
		}
		if t != nil {
			t.Stop()
		}
		start := time.Now()
		switch s.writeRound() {
		case roundFailed:
			pause = min(max(2*pause, writeRetry), writeRetryMax)
		case roundWritten:
			pause = 0
			// Gather for the pace: fewer, larger commits.
			t := time.NewTimer(g.every - time.Since(start))
			select {
			case <-t.C:
			case <-g.hurry:
				t.Stop()
			case <-g.stop:
				t.Stop()
			}
		default:
			pause = 0
		}
	}
}

// writeAtClose writes what is left behind, trying closeWrites times, and
// logs what it could not write (dropUnwritten).
func (s *Store) writeAtClose() {
	for try := range closeWrites {
		switch s.writeRound() {
		case roundEmpty:
			return
		case roundFailed:
			time.Sleep(writeRetry << try)
		}
	}
	s.dropUnwritten()
}

// A writeRound's outcome.
const (
	roundEmpty = iota // nothing was queued
	roundWritten
	roundFailed // the transaction failed: its records are queued again
)

// writeRound writes what is queued, once.
func (s *Store) writeRound() int {
	g := s.gate
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.mu.Unlock()
		return roundEmpty
	}
	batch := g.queue
	g.queue, g.spare = g.spare, nil
	for _, r := range batch {
		if c, ok := r.Charge(); ok {
			g.charge(r, -c, queuedOf)
			g.charge(r, c, writingOf)
		}
	}
	g.lastSeq++
	seq := g.lastSeq
	g.seq = seq
	target := g.in
	g.mu.Unlock()

	errs := s.addRecords(batch, seq)

	g.mu.Lock()
	var failed []credits.Record
	var refused []int
	var failure error
	for i, r := range batch {
		ok := errs[i] == nil || errors.Is(errs[i], credits.ErrInvalidRecord) || errors.Is(errs[i], credits.ErrAccountNotFound)
		if !ok {
			failed = append(failed, r)
			failure = errs[i]
		} else if errs[i] != nil {
			refused = append(refused, i)
		}
		if c, charged := r.Charge(); charged {
			g.charge(r, -c, writingOf)
			if !ok {
				g.charge(r, c, queuedOf)
			}
		}
	}
	g.seq = 0
	if len(failed) > 0 {
		g.queue = append(failed, g.queue...)
	} else if g.spare == nil && cap(batch) <= maxSpare {
		clear(batch)
		g.spare = batch[:0]
	}
	if len(failed) == 0 {
		g.out = target
	}
	close(g.round)
	g.round = make(chan struct{})
	g.mu.Unlock()

	for _, i := range refused {
		s.log.Error("records written behind: dropped a record the store refuses", "record", batch[i].ID, "account", batch[i].Account, "err", errs[i])
	}
	if len(failed) > 0 {
		s.log.Warn("records written behind: the write failed; tried again", "records", len(failed), "err", failure)
		return roundFailed
	}
	return roundWritten
}

// dropUnwritten logs the records Close could not write, which are lost
// with their charges, and forgets them.
func (s *Store) dropUnwritten() {
	g := s.gate
	g.mu.Lock()
	lost := g.queue
	g.queue = nil
	for _, r := range lost {
		if c, ok := r.Charge(); ok {
			g.charge(r, -c, queuedOf)
		}
	}
	g.mu.Unlock()
	for _, r := range lost {
		s.log.Error("records written behind: lost at close, the store failing its writes", "record", r.ID, "account", r.Account, "cost", r.Cost)
	}
}

// MemoryHolds is the store's holds for chat completions (chat.Holds): a
// reservation held in memory, within the account's available credits and
// the key's limit as the gate counts them, settled (released) in memory,
// and records written behind (see gate). Nothing it does waits for a
// commit. Its reservations are not in the ledger (nor their releases);
// Store.OpenReservations lists them with the file's, and Store.Settle
// releases them (the reconciler's release of one its request left): they
// last as long as their request, or the process.
// Make one with Store.MemoryHolds; it is safe for concurrent use.
type MemoryHolds struct{ s *Store }

var _ credits.InMemorySettler = (*MemoryHolds)(nil)

// MemoryHolds returns the store's MemoryHolds.
func (s *Store) MemoryHolds() *MemoryHolds { return &MemoryHolds{s: s} }

// Reserve holds e.Amount (e is checked as Store.Reserve checks it) on
// e.Account and on e.Key, in memory, under the same refusals as
// Store.Reserve: credits.ErrAccountNotFound, an error wrapping
// credits.ErrInsufficient, credits.KeyLimit's, and credits.ErrAlreadySettled
// for an id held now (an id is not remembered once settled: use random
// ones).
func (h *MemoryHolds) Reserve(ctx context.Context, e credits.Entry) error {
	if err := credits.CheckReservation(e); err != nil {
		return err
	}
	err := h.s.viewGated(func(tx *bolt.Tx, g *gate) error {
		if _, ok := g.holds[e.ID]; ok {
			return credits.ErrAlreadySettled
		}
		a, ok, err := g.account(tx, e.Account)
		if err != nil {
			return err
		}
		if !ok {
			return credits.ErrAccountNotFound
		}
		if err := g.check(tx, a, e.Key, e.Amount); err != nil {
			return err
		}
		g.holds[e.ID] = e
		of(g.accounts, e.Account).held += e.Amount
		if e.Key != "" {
			of(g.keys, e.Key).held += e.Amount
		}
		return nil
	})
	if r, ok := err.(refusal); ok {
		err = r.err
	}
	if err != nil {
		return fmt.Errorf("reserve %s on %s: %w", e.ID, e.Account, err)
	}
	return nil
}

// Settle releases the reservation that e, a Release with its
// SettlementID, settles, if it is held here and e clears what it holds;
// else an error matching credits.ErrNoReservation. A hold's charge is
// its request's record (AddRecords), so MemoryHolds settles no Capture.
func (h *MemoryHolds) Settle(ctx context.Context, e credits.Entry) error {
	if held, err := h.s.gate.settle(e); held {
		return err
	}
	return fmt.Errorf("%w: %s of %s holding %s is not held in memory", credits.ErrNoReservation, e.ID, e.Account, e.HeldAmount())
}

// SettlesInMemory reports that Settle only changes memory
// (credits.InMemorySettler): SettleDetached calls it once, without a
// detached context and its timer.
func (h *MemoryHolds) SettlesInMemory() bool { return true }

// settle settles e if it settles a reservation held in memory (held):
// its release, else an error; Store.Settle comes here first, so that the
// reconciler releases a hold in memory as it does one in the file.
func (g *gate) settle(e credits.Entry) (held bool, err error) {
	rid, ok := credits.ReservationOf(e.ID)
	if !ok {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.holds[rid]
	switch {
	case !ok:
		return false, nil
	case e.Kind != credits.Release:
		return true, fmt.Errorf("settle %s: a hold in memory is settled only by its release (its charge is its request's record)", e.ID)
	case r.Account != e.Account || r.Amount != e.HeldAmount():
		return true, fmt.Errorf("%w: %s of %s holding %s", credits.ErrNoReservation, rid, e.Account, e.HeldAmount())
	}
	delete(g.holds, rid)
	of(g.accounts, r.Account).held -= r.Amount
	tidy(g.accounts, r.Account)
	if r.Key != "" {
		of(g.keys, r.Key).held -= r.Amount
		tidy(g.keys, r.Key)
	}
	return true, nil
}

// openHolds returns the holds in memory reserved before at (Unix
// seconds).
func (g *gate) openHolds(before int64) []credits.Entry {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []credits.Entry
	for _, e := range g.holds {
		if e.At < before {
			out = append(out, e)
		}
	}
	return out
}

// Account implements credits.AccountReader: Store.Account, which counts
// the holds in memory and the charges written behind.
func (h *MemoryHolds) Account(ctx context.Context, id string) (credits.Account, error) {
	return h.s.Account(ctx, id)
}

// AddRecords takes each record (credits.CheckAddRecord refuses one no
// store would accept) to be written behind, in the next commit, and
// returns without waiting for it; its charge counts in the account's
// position and the key's spend at once. A record the store then refuses
// (an unknown account) is logged and dropped. Once the store is closing,
// records are written at once (Store.AddRecords).
func (h *MemoryHolds) AddRecords(ctx context.Context, rs []credits.Record) []error {
	errs := make([]error, len(rs))
	var through []int
	for i, r := range rs {
		if errs[i] = credits.CheckAddRecord(r); errs[i] == nil && !h.s.writeBehind(r) {
			through = append(through, i)
		}
	}
	if len(through) > 0 {
		direct := make([]credits.Record, len(through))
		for j, i := range through {
			direct[j] = rs[i]
		}
		for j, err := range h.s.AddRecords(ctx, direct) {
			errs[through[j]] = err
		}
	}
	return errs
}
