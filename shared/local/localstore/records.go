package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// Records: the record of each request (credits.Record), in three
// buckets: bucketRecords by id (the record's JSON), and two indexes
// whose keys sort by time: bucketRecordsTime (at ++ id: every record,
// oldest first, which the listing of every account walks backwards and
// SweepRecords forwards) and bucketRecordsAcct (account \x00 at ++ id:
// an account's records). at is the record's Unix milliseconds, 8 bytes
// big-endian.

var _ credits.RecordStore = (*Store)(nil)

// recordTimeKey is r's key in bucketRecordsTime.
func recordTimeKey(at int64, id string) []byte {
	return appendRecordTimeKey(make([]byte, 0, 8+len(id)), at, id)
}

// appendRecordTimeKey appends recordTimeKey(at, id) to b.
func appendRecordTimeKey(b []byte, at int64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(at)), id...)
}

// recordAcctKey is r's key in bucketRecordsAcct.
func recordAcctKey(account string, at int64, id string) []byte {
	return appendRecordAcctKey(make([]byte, 0, len(account)+1+8+len(id)), account, at, id)
}

// appendRecordAcctKey appends recordAcctKey(account, at, id) to b.
func appendRecordAcctKey(b []byte, account string, at int64, id string) []byte {
	return appendRecordTimeKey(append(append(b, account...), 0), at, id)
}

// recordsFill is the fill percent of the record buckets' pages: their
// keys come mostly in order (ids begin with their time:
// credits.NewRecordID; the indexes' keys with it), so pages split full
// instead of half full, and the sweep deletes from their start.
const recordsFill = 0.9

// putRecord writes r (its Expires set from retention if 0) and its index
// entries in tx.
func putRecord(tx *bolt.Tx, r credits.Record, retention time.Duration) error {
	return putRecordIn(tx, r, retention, nil)
}

// putRecordIn is putRecord with its keys and values from a.
func putRecordIn(tx *bolt.Tx, r credits.Record, retention time.Duration, a *arena) error {
	r.Expires = r.ExpiresAfter(retention)
	rb, tb, ab := tx.Bucket([]byte(bucketRecords)), tx.Bucket([]byte(bucketRecordsTime)), tx.Bucket([]byte(bucketRecordsAcct))
	rb.FillPercent, tb.FillPercent, ab.FillPercent = recordsFill, recordsFill, recordsFill
	if err := rb.Put(a.bytes(r.ID), a.keep(r.AppendJSON(a.buf(640)))); err != nil {
		return err
	}
	if err := tb.Put(a.keep(appendRecordTimeKey(a.buf(8+len(r.ID)), r.At, r.ID)), nil); err != nil {
		return err
	}
	return ab.Put(a.keep(appendRecordAcctKey(a.buf(len(r.Account)+1+8+len(r.ID)), r.Account, r.At, r.ID)), nil)
}

// recordTx is what one AddRecords transaction has read and changed, so
// that the records of one account, usage row or key in a batch decode
// and encode it once.
type recordTx struct {
	tx       *bolt.Tx
	arena    arena                       // the puts' keys and values
	accounts map[string]*credits.Account // nil: no such account
	usage    map[string]*credits.Usage   // by usageKey
	keys     map[string]*txKey           // by key id; nil: no such key
}

// txKey is a key record read in a transaction, with its hash.
type txKey struct {
	hash []byte
	rec  auth.Record
}

func (t *recordTx) account(id string) (*credits.Account, error) {
	if a, ok := t.accounts[id]; ok {
		return a, nil
	}
	var a credits.Account
	ok, err := getJSON(t.tx.Bucket([]byte(bucketAccounts)), []byte(id), &a)
	if err != nil {
		return nil, err
	}
	var p *credits.Account
	if ok {
		p = &a
	}
	t.accounts[id] = p
	return p, nil
}

func (t *recordTx) usageRow(u credits.Usage) (*credits.Usage, error) {
	var buf [128]byte
	kb := appendUsageKey(buf[:0], u.Account, u.Day, u.Model)
	if p, ok := t.usage[string(kb)]; ok { // the lookup makes no string
		return p, nil
	}
	k := string(kb)
	var sum credits.Usage
	if _, err := getJSON(t.tx.Bucket([]byte(bucketUsage)), []byte(k), &sum); err != nil {
		return nil, err
	}
	sum.Account, sum.Day, sum.Model = u.Account, u.Day, u.Model
	t.usage[k] = &sum
	return &sum, nil
}

func (t *recordTx) key(id string) (*txKey, error) {
	if k, ok := t.keys[id]; ok {
		return k, nil
	}
	hash, r, ok, err := keyByID(t.tx, id)
	if err != nil {
		return nil, err
	}
	var k *txKey
	if ok {
		k = &txKey{hash: hash, rec: r}
	}
	t.keys[id] = k
	return k, nil
}

// add applies record r in the transaction: every check first, so that a
// refused record changes nothing; the record itself is written at once,
// the rows it changes when the transaction ends (flush).
func (t *recordTx) add(r credits.Record, retention time.Duration) error {
	if t.tx.Bucket([]byte(bucketRecords)).Get([]byte(r.ID)) != nil {
		return nil // written before: nothing again
	}
	inc, counted := credits.UsageOf(r)
	charge, charged := credits.ChargeOf(r)
	var (
		row     *credits.Usage
		newRow  credits.Usage
		a       *credits.Account
		balance credits.Amount
		k       *txKey
		spent   credits.Amount
		err     error
	)
	if counted {
		if row, err = t.usageRow(inc); err != nil {
			return err
		}
		if newRow, err = row.Add(inc); err != nil {
			return fmt.Errorf("usage credits: %w: %w", credits.ErrInvalidRecord, err)
		}
	}
	if charged {
		if a, err = t.account(r.Account); err != nil {
			return err
		}
		if a == nil {
			return credits.ErrAccountNotFound
		}
		if balance, err = a.Balance.Add(-charge.Amount); err != nil {
			return fmt.Errorf("balance: %w: %w", credits.ErrInvalidRecord, err)
		}
		if _, err = balance.Add(-a.Held); err != nil {
			return fmt.Errorf("available: %w: %w", credits.ErrInvalidRecord, err)
		}
		if r.Key != "" {
			if k, err = t.key(r.Key); err != nil {
				return err
			}
			if k != nil {
				if spent, err = k.rec.Spent.Add(charge.Amount); err != nil {
					return fmt.Errorf("spent of key %s: %w: %w", r.Key, credits.ErrInvalidRecord, err)
				}
			}
		}
	}
	if charged {
		if err := putEntryIn(t.tx, charge, &t.arena); err != nil {
			return err
		}
		a.Balance, a.Available = balance, balance-a.Held
		if k != nil {
			k.rec.Spent = spent
		}
	}
	if counted {
		*row = newRow
	}
	return putRecordIn(t.tx, r, retention, &t.arena)
}

// flush writes the rows the transaction changed.
func (t *recordTx) flush() error {
	ab := t.tx.Bucket([]byte(bucketAccounts))
	for id, a := range t.accounts {
		if a != nil {
			if err := putJSON(ab, []byte(id), a); err != nil {
				return err
			}
		}
	}
	ub := t.tx.Bucket([]byte(bucketUsage))
	for k, u := range t.usage {
		if u.Requests > 0 {
			if err := putJSON(ub, []byte(k), u); err != nil {
				return err
			}
		}
	}
	kb := t.tx.Bucket([]byte(bucketKeys))
	for _, k := range t.keys {
		if k != nil {
			if err := putJSON(kb, k.hash, k.rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddRecords implements credits.RecordStore in one transaction for all of
// rs (a batch shares one commit, fsync included): each record is looked
// up first, and one written before is left as it is. A record that is
// refused (credits.ErrInvalidRecord, credits.ErrAccountNotFound) changes
// nothing and the others are written; a failed commit fails them all.
func (s *Store) AddRecords(ctx context.Context, rs []credits.Record) []error {
	return s.addRecords(rs, 0)
}

// addRecords is AddRecords; a seq above 0 is also written, in the same
// transaction, as the last write behind to commit (chargesWrittenKey).
func (s *Store) addRecords(rs []credits.Record, seq uint64) []error {
	errs := make([]error, len(rs))
	ok := make([]bool, len(rs))
	any := false
	for i, r := range rs {
		if errs[i] = credits.CheckAddRecord(r); errs[i] == nil {
			ok[i], any = true, true
		}
	}
	if !any && seq == 0 {
		return errs
	}
	retention := s.records
	err := s.update(func(tx *bolt.Tx) error {
		t := &recordTx{tx: tx, accounts: map[string]*credits.Account{}, usage: map[string]*credits.Usage{}, keys: map[string]*txKey{}}
		for i, r := range rs {
			if !ok[i] {
				continue
			}
			errs[i] = t.add(r, retention)
			if errs[i] != nil && !errors.Is(errs[i], credits.ErrInvalidRecord) && !errors.Is(errs[i], credits.ErrAccountNotFound) {
				return errs[i] // a store failure: the transaction fails, every record with it
			}
		}
		if seq > 0 {
			if err := tx.Bucket([]byte(bucketMeta)).Put([]byte(chargesWrittenKey), u64(seq)); err != nil {
				return err
			}
		}
		return t.flush()
	})
	for i := range rs {
		switch {
		case !ok[i]:
		case err != nil:
			errs[i] = fmt.Errorf("add record %s: %w", rs[i].ID, err)
		case errs[i] != nil:
			errs[i] = fmt.Errorf("add record %s of %s: %w", rs[i].ID, rs[i].Account, errs[i])
		}
	}
	return errs
}

// Record implements credits.RecordReader.
func (s *Store) Record(ctx context.Context, id string) (credits.Record, error) {
	s.awaitWrites(ctx)
	var r credits.Record
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket([]byte(bucketRecords)), []byte(id), &r)
		return err
	})
	if err != nil {
		return credits.Record{}, fmt.Errorf("get record %s: %w", id, err)
	}
	if !ok || r.Expired(s.now().Unix()) {
		return credits.Record{}, credits.ErrRecordNotFound
	}
	return r, nil
}

// recordsScanned bounds the index entries one Records page examines: a
// page whose filters match few records ends there, with a cursor.
const recordsScanned = 20000

// Records implements credits.RecordReader: a backwards walk of the index
// of q.Account's records (of every record without one) from q's cursor,
// each record read and matched, until the page is full plus one (the
// next page exists), the index ends, or recordsScanned entries were
// examined (the page then ends there with a cursor).
func (s *Store) Records(ctx context.Context, q credits.RecordQuery) ([]credits.Record, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	cur, _ := credits.DecodeRecordCursor(q.Cursor) // checked by Normalize
	s.awaitWrites(ctx)
	var out []credits.Record
	var next string
	now := s.now().Unix()
	err := s.db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket([]byte(bucketRecords))
		var c *bolt.Cursor
		var prefix []byte
		if q.Account != "" {
			c, prefix = tx.Bucket([]byte(bucketRecordsAcct)).Cursor(), append([]byte(q.Account), 0)
		} else {
			c = tx.Bucket([]byte(bucketRecordsTime)).Cursor()
		}
		// The first entry before the cursor (or the last of the prefix).
		var k []byte
		if cur.IsZero() {
			if q.Account == "" {
				k, _ = c.Last()
			} else if k, _ = c.Seek(append(bytes.Clone(prefix), 0xff)); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
		} else {
			start := append(bytes.Clone(prefix), recordTimeKey(cur.At, cur.ID)...)
			if k, _ = c.Seek(start); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev() // the cursor's own entry, or the first after it: not on this page
			}
		}
		for scanned := 0; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			rest := k[len(prefix):]
			if len(rest) <= 8 {
				return fmt.Errorf("malformed record index key %q", k)
			}
			at, id := int64(binary.BigEndian.Uint64(rest[:8])), string(rest[8:])
			if scanned++; scanned > recordsScanned {
				next = credits.RecordCursor{At: at, ID: id}.Encode()
				break
			}
			var r credits.Record
			found, err := getJSON(rb, []byte(id), &r)
			if err != nil {
				return err
			}
			if !found || r.Expired(now) || !q.Match(r) {
				continue
			}
			if len(out) == q.Limit {
				next = credits.CursorOf(out[len(out)-1]).Encode()
				break
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list records: %w", err)
	}
	return out, next, nil
}

// SweepRecords deletes up to limit records that expired by now (Unix
// seconds), oldest first, in one transaction, and returns how many it
// deleted. It walks the records in time order and stops at the first one
// not expired: records expire in the order they were made as long as the
// retention does not change (after a shorter one is set, the newer
// records wait for the older ones; Record and Records read neither once
// expired).
func (s *Store) SweepRecords(ctx context.Context, now int64, limit int) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		n = 0
		rb, tb, ab := tx.Bucket([]byte(bucketRecords)), tx.Bucket([]byte(bucketRecordsTime)), tx.Bucket([]byte(bucketRecordsAcct))
		c := tb.Cursor()
		var dead [][]byte
		for k, _ := c.First(); k != nil && len(dead) < limit; k, _ = c.Next() {
			if len(k) <= 8 {
				return fmt.Errorf("malformed record index key %q", k)
			}
			id := k[8:]
			raw := rb.Get(id)
			if raw != nil {
				var r struct {
					Account string `json:"account"`
					At      int64  `json:"at"`
					Expires int64  `json:"expires"`
				}
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("decode record %s: %w", id, err)
				}
				if r.Expires == 0 || r.Expires > now {
					break
				}
				if err := rb.Delete(id); err != nil {
					return err
				}
				if err := ab.Delete(recordAcctKey(r.Account, r.At, string(id))); err != nil {
					return err
				}
			}
			dead = append(dead, bytes.Clone(k))
		}
		for _, k := range dead {
			if err := tb.Delete(k); err != nil {
				return err
			}
		}
		n = len(dead)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep records: %w", err)
	}
	return n, nil
}

// RecordSweepLimit is how many records one SweepRecords call of
// SweepRecordsLoop deletes at most (one transaction).
const RecordSweepLimit = 5000

// SweepRecordsLoop deletes expired records until ctx ends: every
// interval, and again at once (after a second) while a sweep finds a full
// batch, so that the sweep keeps up with any rate of requests in bounded
// transactions. Failures are logged and retried at the next tick.
func (s *Store) SweepRecordsLoop(ctx context.Context, interval time.Duration) error {
	for {
		n, err := s.SweepRecords(ctx, s.now().Unix(), RecordSweepLimit)
		if err != nil {
			s.log.ErrorContext(ctx, "record sweep failed; retried later", "err", err)
		}
		wait := interval
		if n == RecordSweepLimit {
			wait = time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
