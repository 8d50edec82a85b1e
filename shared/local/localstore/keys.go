package localstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// PutKey stores a new key record. It fails if a key with the same hash or
// id exists.
func (s *Store) PutKey(ctx context.Context, r auth.Record) error {
	if r.ID == "" || r.Hash == "" || r.Account == "" {
		return fmt.Errorf("put key: missing id, hash or account")
	}
	if err := r.Controls.Check(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		kb, ib := tx.Bucket([]byte(bucketKeys)), tx.Bucket([]byte(bucketKeyIDs))
		if kb.Get([]byte(r.Hash)) != nil || ib.Get([]byte(r.ID)) != nil {
			return errors.New("key exists")
		}
		if err := ib.Put([]byte(r.ID), []byte(r.Hash)); err != nil {
			return err
		}
		return putJSON(kb, []byte(r.Hash), r)
	})
	if err != nil {
		return fmt.Errorf("put key %s: %w", r.ID, err)
	}
	return nil
}

// KeyByHash returns the record with hash, or auth.ErrKeyNotFound. Its
// Spent and Held, like those of KeyByID and Keys, count the holds in
// memory and the charges written behind (see gate).
func (s *Store) KeyByHash(ctx context.Context, hash string) (auth.Record, error) {
	var r auth.Record
	var ok bool
	err := s.viewGated(func(tx *bolt.Tx, g *gate) error {
		var err error
		if ok, err = getJSON(tx.Bucket([]byte(bucketKeys)), []byte(hash), &r); ok {
			g.showKey(tx, &r)
		}
		return err
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("get key by hash: %w", err)
	}
	if !ok {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	return r, nil
}

// Keys returns the key records of account ("" for all), oldest first.
func (s *Store) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	var out []auth.Record
	err := s.viewGated(func(tx *bolt.Tx, g *gate) error {
		kb := tx.Bucket([]byte(bucketKeys))
		return kb.ForEach(func(k, _ []byte) error {
			var r auth.Record
			if _, err := getJSON(kb, k, &r); err != nil {
				return err
			}
			if account == "" || r.Account == account {
				g.showKey(tx, &r)
				out = append(out, r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	auth.SortRecords(out)
	return out, nil
}

// RevokeKey marks the key with id revoked at at (a key already revoked
// keeps its first revocation time) and returns it; auth.ErrKeyNotFound if
// there is no such key.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (auth.Record, error) {
	var r auth.Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		hash, cur, ok, err := keyByID(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return auth.ErrKeyNotFound
		}
		r = cur
		if r.Revoked != 0 {
			return nil
		}
		r.Revoked = at.Unix()
		return putJSON(tx.Bucket([]byte(bucketKeys)), hash, r)
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return r, nil
}

// TouchKey implements auth.Toucher.
func (s *Store) TouchKey(ctx context.Context, hash string, at time.Time) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		kb := tx.Bucket([]byte(bucketKeys))
		var r auth.Record
		ok, err := getJSON(kb, []byte(hash), &r)
		if err != nil || !ok {
			return err
		}
		r.LastUsed = at.Unix()
		return putJSON(kb, []byte(hash), r)
	})
	if err != nil {
		return fmt.Errorf("touch key: %w", err)
	}
	return nil
}

// keyByID reads the key with id in tx: its hash and record, ok false if
// there is none.
func keyByID(tx *bolt.Tx, id string) ([]byte, auth.Record, bool, error) {
	var r auth.Record
	hash := tx.Bucket([]byte(bucketKeyIDs)).Get([]byte(id))
	if hash == nil {
		return nil, r, false, nil
	}
	ok, err := getJSON(tx.Bucket([]byte(bucketKeys)), hash, &r)
	if err != nil {
		return nil, r, false, err
	}
	if !ok {
		return nil, r, false, fmt.Errorf("key id index points at missing key %s", id)
	}
	return append([]byte(nil), hash...), r, true, nil
}

// holdOnKey adds amount to the held credits of key id in tx, refusing
// (credits.ErrKeyLimit, nothing written) if that takes its spent and held
// past its credit limit. An unknown key is refused too: every key a
// request names was read when it authenticated, and keys are never
// deleted.
func holdOnKey(tx *bolt.Tx, id string, amount credits.Amount) error {
	hash, r, ok, err := keyByID(tx, id)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(fmt.Errorf("hold on key %s: %w", id, auth.ErrKeyNotFound))
	}
	if r.CreditLimit != nil && r.Spent+r.Held+amount > *r.CreditLimit {
		return refuse(credits.KeyLimit(id, amount, *r.CreditLimit, r.Spent+r.Held))
	}
	r.Held += amount
	return putJSON(tx.Bucket([]byte(bucketKeys)), hash, r)
}

// settleOnKey moves the credits of key id in tx: held -= held, spent +=
// spent. A key that is not there is left alone: a settlement never waits
// on a label. Spent beyond credits.MaxAmount is refused (an error
// matching credits.ErrAmountRange).
func settleOnKey(tx *bolt.Tx, id string, spent, held credits.Amount) error {
	if id == "" {
		return nil
	}
	hash, r, ok, err := keyByID(tx, id)
	if err != nil || !ok {
		return err
	}
	r.Held -= held
	if r.Spent, err = add("spent of key "+id, r.Spent, spent); err != nil {
		return err
	}
	return putJSON(tx.Bucket([]byte(bucketKeys)), hash, r)
}

// KeyByID implements auth.Store.
func (s *Store) KeyByID(ctx context.Context, id string) (auth.Record, error) {
	var r auth.Record
	var ok bool
	err := s.viewGated(func(tx *bolt.Tx, g *gate) error {
		var err error
		if _, r, ok, err = keyByID(tx, id); ok {
			g.showKey(tx, &r)
		}
		return err
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("get key %s: %w", id, err)
	}
	if !ok {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	return r, nil
}

// SetControls implements auth.Store in one transaction.
func (s *Store) SetControls(ctx context.Context, id string, c auth.Controls) (auth.Record, error) {
	if err := c.Check(); err != nil {
		return auth.Record{}, err
	}
	var r auth.Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		hash, cur, ok, err := keyByID(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return auth.ErrKeyNotFound
		}
		cur.Controls = c
		r = cur
		return putJSON(tx.Bucket([]byte(bucketKeys)), hash, cur)
	})
	if err != nil {
		return auth.Record{}, fmt.Errorf("set controls of key %s: %w", id, err)
	}
	return r, nil
}

// RollKeyPeriod implements auth.Store in one transaction: transactions
// are serial, so of two rolls to the same period one rolls.
func (s *Store) RollKeyPeriod(ctx context.Context, id, period string) (bool, error) {
	if _, ok := auth.PeriodStart(period); !ok {
		return false, auth.ErrBadPeriod
	}
	s.awaitWrites(ctx) // what was charged before the roll counts in the old period
	rolled := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		hash, r, ok, err := keyByID(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return auth.ErrKeyNotFound
		}
		if !auth.NewerPeriod(r.Period, period) {
			return nil
		}
		r.Spent, r.Period, rolled = 0, period, true
		return putJSON(tx.Bucket([]byte(bucketKeys)), hash, r)
	})
	if err != nil {
		return false, fmt.Errorf("roll key %s to %s: %w", id, period, err)
	}
	return rolled, nil
}
