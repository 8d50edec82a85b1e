package localstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
)

// openResKey is reservation r's key in the index of open reservations:
// its At (big-endian, so that a cursor walks them oldest first), then its
// entry id.
func openResKey(r credits.Entry) []byte {
	return append(u64(uint64(r.At)), r.ID...)
}

// Reserve implements credits.Reserver in one transaction: unless the
// ledger has e.ID (credits.ErrAlreadySettled), the account is unknown
// (credits.ErrAccountNotFound) or its available credits are short of
// e.Amount (an error wrapping credits.ErrInsufficient), it moves e.Amount
// from available to held, writes e to the ledger and adds it to the index
// of open reservations; with e.Key it holds e.Amount on the key too, within
// its credit limit (else an error matching credits.ErrKeyLimit).
// Transactions are serial and check under the gate (with the holds in
// memory and the charges written behind), so parallel reservations never
// overdraw the account or pass the key's limit.
func (s *Store) Reserve(ctx context.Context, e credits.Entry) error {
	if err := credits.CheckReservation(e); err != nil {
		return err
	}
	var pending *pendingHold
	err := s.update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(bucketLedger)).Get([]byte(e.ID)) != nil {
			return refuse(credits.ErrAlreadySettled)
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
		if err := s.gate.hold(tx, &pending, a, e.Key, e.Amount, bucketLedger, e.ID); err != nil {
			return err
		}
		if e.Key != "" {
			if err := holdOnKey(tx, e.Key, e.Amount); err != nil {
				return err
			}
		}
		a.Held += e.Amount
		a.Available = a.Balance - a.Held
		if err := putJSON(ab, []byte(a.ID), a); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketOpenRes)).Put(openResKey(e), nil); err != nil {
			return err
		}
		return putEntry(tx, e)
	})
	s.gate.release(pending)
	if err != nil {
		return fmt.Errorf("reserve %s on %s: %w", e.ID, e.Account, err)
	}
	return nil
}

// OpenReservations implements credits.Reserver: one cursor walk of the
// index of open reservations, oldest first, reading each one's ledger
// entry, with the reservations held in memory (MemoryHolds) among them.
func (s *Store) OpenReservations(ctx context.Context, before int64, limit int) ([]credits.Entry, error) {
	out := s.gate.openHolds(before)
	err := s.db.View(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte(bucketLedger))
		c := tx.Bucket([]byte(bucketOpenRes)).Cursor()
		n := 0 // of the file's
		for k, _ := c.First(); k != nil && n < limit; k, _ = c.Next() {
			n++
			if len(k) <= 8 {
				return fmt.Errorf("malformed open reservation key %q", k)
			}
			if int64(binary.BigEndian.Uint64(k[:8])) >= before {
				break
			}
			var e credits.Entry
			ok, err := getJSON(lb, k[8:], &e)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("open reservation %s has no ledger entry", k[8:])
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open reservations before %d: %w", before, err)
	}
	slices.SortStableFunc(out, func(a, b credits.Entry) int { return cmp.Compare(a.At, b.At) })
	return out[:min(len(out), limit)], nil
}
