package localstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
)

// add returns the stored amount what (balance, spent, ...) plus delta, or
// the refusal (nothing written) of a result beyond ±credits.MaxAmount: an
// error matching credits.ErrAmountRange.
func add(what string, a, delta credits.Amount) (credits.Amount, error) {
	sum, err := a.Add(delta)
	if err != nil {
		return 0, refuse(fmt.Errorf("%s: %w", what, err))
	}
	return sum, nil
}

func ledgerPrefix(account string) []byte { return appendLedgerPrefix(nil, account) }

// appendLedgerPrefix appends ledgerPrefix(account) to b.
func appendLedgerPrefix(b []byte, account string) []byte { return append(append(b, account...), 0) }

func putEntry(tx *bolt.Tx, e credits.Entry) error { return putEntryIn(tx, e, nil) }

// putEntryIn is putEntry with its keys and values from a.
func putEntryIn(tx *bolt.Tx, e credits.Entry, a *arena) error {
	sb := tx.Bucket([]byte(bucketLedgerSeq))
	seq, err := sb.NextSequence()
	if err != nil {
		return err
	}
	k := a.keep(binary.BigEndian.AppendUint64(appendLedgerPrefix(a.buf(len(e.Account)+1+8), e.Account), seq))
	id := a.bytes(e.ID)
	if err := sb.Put(k, id); err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketLedger)).Put(id, a.keep(e.AppendJSON(a.buf(256))))
}

func validAccount(id string) error {
	if id == "" || strings.ContainsRune(id, 0) {
		return fmt.Errorf("invalid account id %q", id)
	}
	return nil
}

// Settle writes e and applies it to its account in one transaction, only if
// no entry with e.ID exists; otherwise it returns credits.ErrAlreadySettled
// and changes nothing. A Capture takes e.Amount from the balance and
// e.HeldAmount() from the held credits (the rest of the hold is
// released), and adds its job usage (credits.JobUsageOf) in the same
// transaction; a Release returns e.Amount from held to available. The
// settlement of a reservation also removes it from the open reservations;
// it returns credits.ErrNoReservation unless the reservation is e.Account's
// and holds e.HeldAmount(). It returns credits.ErrAccountNotFound for an
// unknown account.
// A reservation held in memory (MemoryHolds) is released in memory.
func (s *Store) Settle(ctx context.Context, e credits.Entry) error {
	if held, err := s.gate.settle(e); held {
		return err
	}
	return s.settle(e, nil)
}

// SettleRecord implements credits.Reservations: Settle's transaction, in
// which r is written too (with its Expires set from the retention if
// 0). A record r.ID written before (not by this settlement, which is not)
// is refused, wrapping credits.ErrInvalidRecord, and nothing is written.
func (s *Store) SettleRecord(ctx context.Context, e credits.Entry, r credits.Record) error {
	if err := credits.CheckSettledRecord(e, r); err != nil {
		return err
	}
	return s.settle(e, &r)
}

// settle is Settle, with r (nil: none) written in its transaction.
func (s *Store) settle(e credits.Entry, r *credits.Record) error {
	if err := credits.CheckSettlement(e); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(bucketLedger))
		var open []byte // the reservation's key in the open index
		if rid, ok := credits.ReservationOf(e.ID); ok {
			var r credits.Entry
			found, err := getJSON(lb, []byte(rid), &r)
			if err != nil {
				return err
			}
			if !found || r.Kind != credits.Reservation || r.Account != e.Account || r.Amount != e.HeldAmount() {
				return refuse(fmt.Errorf("%w: %s of %s holding %s", credits.ErrNoReservation, rid, e.Account, e.HeldAmount()))
			}
			open = openResKey(r)
			e.Key = r.Key // the reservation's key: what it held
		}
		if lb.Get([]byte(e.ID)) != nil {
			return refuse(credits.ErrAlreadySettled)
		}
		if r != nil && tx.Bucket([]byte(bucketRecords)).Get([]byte(r.ID)) != nil {
			return refuse(fmt.Errorf("%w: record %s exists, without this settlement", credits.ErrInvalidRecord, r.ID))
		}
		ab := tx.Bucket([]byte(bucketAccounts))
		var a credits.Account
		ok, err := getJSON(ab, []byte(e.Account), &a)
		if err != nil {
			return err
		}
		if !ok {
			return refuse(credits.ErrAccountNotFound)
		}
		a.Held -= e.HeldAmount()
		if e.Kind == credits.Capture {
			if a.Balance, err = add("balance", a.Balance, -e.Amount); err != nil {
				return err
			}
		}
		if a.Available, err = add("available", a.Balance, -a.Held); err != nil {
			return err
		}
		if err := putJSON(ab, []byte(a.ID), a); err != nil {
			return err
		}
		if err := addJobUsage(tx, e); err != nil {
			return err
		}
		spent := credits.Amount(0)
		if e.Kind == credits.Capture {
			spent = e.Amount
		}
		if err := settleOnKey(tx, e.Key, spent, e.HeldAmount()); err != nil {
			return err
		}
		if open != nil {
			if err := tx.Bucket([]byte(bucketOpenRes)).Delete(open); err != nil {
				return err
			}
		}
		if r != nil {
			if err := putRecord(tx, *r, s.records); err != nil {
				return err
			}
		}
		return putEntry(tx, e)
	})
	if err != nil {
		return fmt.Errorf("settle %s on %s: %w", e.ID, e.Account, err)
	}
	return nil
}

// Account returns the account id, or credits.ErrAccountNotFound. Its
// position counts the holds in memory and the charges written behind (see
// gate).
func (s *Store) Account(ctx context.Context, id string) (credits.Account, error) {
	var a credits.Account
	var ok bool
	err := s.viewGated(func(tx *bolt.Tx, g *gate) error {
		var err error
		if ok, err = getJSON(tx.Bucket([]byte(bucketAccounts)), []byte(id), &a); ok {
			g.showAccount(tx, &a)
		}
		return err
	})
	if err != nil {
		return credits.Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	if !ok {
		return credits.Account{}, credits.ErrAccountNotFound
	}
	return a, nil
}

// Grant adds amount (which may be negative, or 0 to just create the
// account) to account id's balance, creating the account if needed, and
// records a Grant ledger entry when amount is not 0. It returns the new
// position. A grant that would take the balance or the available credits
// beyond ±credits.MaxAmount is an error matching credits.ErrAmountRange,
// and nothing is written.
func (s *Store) Grant(ctx context.Context, id string, amount credits.Amount, at int64) (credits.Account, error) {
	if err := validAccount(id); err != nil {
		return credits.Account{}, fmt.Errorf("grant: %w", err)
	}
	var a credits.Account
	err := s.db.Update(func(tx *bolt.Tx) error {
		ab := tx.Bucket([]byte(bucketAccounts))
		a = credits.Account{}
		ok, err := getJSON(ab, []byte(id), &a)
		if err != nil {
			return err
		}
		if !ok {
			a = credits.Account{ID: id, Created: at}
		}
		if a.Balance, err = add("balance", a.Balance, amount); err != nil {
			return err
		}
		if a.Available, err = add("available", a.Balance, -a.Held); err != nil {
			return err
		}
		if err := putJSON(ab, []byte(id), a); err != nil {
			return err
		}
		if amount == 0 {
			return nil
		}
		var r [12]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		return putEntry(tx, credits.Entry{ID: "grant:" + hex.EncodeToString(r[:]), Account: id, Kind: credits.Grant, Amount: amount, At: at})
	})
	if err != nil {
		return credits.Account{}, fmt.Errorf("grant %s to %s: %w", amount, id, err)
	}
	return a, nil
}

// Ledger returns account's entries, oldest first (none for an unknown
// account).
func (s *Store) Ledger(ctx context.Context, account string) ([]credits.Entry, error) {
	s.awaitWrites(ctx)
	var out []credits.Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(bucketLedger))
		p := ledgerPrefix(account)
		c := tx.Bucket([]byte(bucketLedgerSeq)).Cursor()
		for k, id := c.Seek(p); k != nil && len(k) == len(p)+8 && string(k[:len(p)]) == string(p); k, id = c.Next() {
			var e credits.Entry
			ok, err := getJSON(lb, id, &e)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("ledger index points at missing entry %s", id)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger of %s: %w", account, err)
	}
	return out, nil
}

// SetRateLimit sets account's requests per minute per key (0: the service
// default; negative: unlimited). It returns credits.ErrAccountNotFound for
// an unknown account.
func (s *Store) SetRateLimit(ctx context.Context, account string, rpm int) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		ab := tx.Bucket([]byte(bucketAccounts))
		var a credits.Account
		ok, err := getJSON(ab, []byte(account), &a)
		if err != nil {
			return err
		}
		if !ok {
			return credits.ErrAccountNotFound
		}
		a.RateLimit = rpm
		return putJSON(ab, []byte(account), a)
	})
	if err != nil {
		return fmt.Errorf("set rate limit of %s: %w", account, err)
	}
	return nil
}

// Accounts returns every account, by id, each position as Account has it.
func (s *Store) Accounts(ctx context.Context) ([]credits.Account, error) {
	var out []credits.Account
	err := s.viewGated(func(tx *bolt.Tx, g *gate) error {
		ab := tx.Bucket([]byte(bucketAccounts))
		return ab.ForEach(func(k, _ []byte) error {
			var a credits.Account
			if _, err := getJSON(ab, k, &a); err != nil {
				return err
			}
			g.showAccount(tx, &a)
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// LedgerEntry reports whether the ledger has the entry id (of account:
// entry ids are unique across accounts here).
func (s *Store) LedgerEntry(ctx context.Context, account, id string) (bool, error) {
	s.awaitWrites(ctx)
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var e credits.Entry
		ok, err := getJSON(tx.Bucket([]byte(bucketLedger)), []byte(id), &e)
		found = ok && e.Account == account
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ledger entry %s: %w", id, err)
	}
	return found, nil
}
