package localstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/auth"
)

// PutKey stores a new key record. It fails if a key with the same hash or
// id exists.
func (s *Store) PutKey(ctx context.Context, r auth.Record) error {
	if r.ID == "" || r.Hash == "" || r.Account == "" {
		return fmt.Errorf("put key: missing id, hash or account")
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

// KeyByHash returns the record with hash, or auth.ErrKeyNotFound.
func (s *Store) KeyByHash(ctx context.Context, hash string) (auth.Record, error) {
	var r auth.Record
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket([]byte(bucketKeys)), []byte(hash), &r)
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
	err := s.db.View(func(tx *bolt.Tx) error {
		kb := tx.Bucket([]byte(bucketKeys))
		return kb.ForEach(func(k, _ []byte) error {
			var r auth.Record
			if _, err := getJSON(kb, k, &r); err != nil {
				return err
			}
			if account == "" || r.Account == account {
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
		kb := tx.Bucket([]byte(bucketKeys))
		hash := tx.Bucket([]byte(bucketKeyIDs)).Get([]byte(id))
		if hash == nil {
			return auth.ErrKeyNotFound
		}
		ok, err := getJSON(kb, hash, &r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("key id index points at missing key")
		}
		if r.Revoked != 0 {
			return nil
		}
		r.Revoked = at.Unix()
		return putJSON(kb, hash, r)
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
