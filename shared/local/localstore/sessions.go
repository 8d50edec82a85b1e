package localstore

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/admin"
)

// bucketSessions holds the console's live sessions: id -> expiry (Unix
// seconds, 8 bytes big-endian). It is made by the first session; ended
// sessions are deleted, expired ones when the next session is added
// (sign-ins are rare, the bucket small).
const bucketSessions = "console_sessions"

var _ admin.SessionStore = (*Store)(nil)

// AddSession records session id, live until expires.
func (s *Store) AddSession(ctx context.Context, id string, expires int64) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketSessions))
		if err != nil {
			return err
		}
		now := s.now().Unix()
		var gone [][]byte
		b.ForEach(func(k, v []byte) error {
			if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) <= now {
				gone = append(gone, k)
			}
			return nil
		})
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return b.Put([]byte(id), binary.BigEndian.AppendUint64(nil, uint64(expires)))
	})
	if err != nil {
		return fmt.Errorf("add console session: %w", err)
	}
	return nil
}

// SessionLive reports whether id is a session that has neither ended nor
// expired at now.
func (s *Store) SessionLive(ctx context.Context, id string, now int64) (bool, error) {
	live := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketSessions)); b != nil {
			v := b.Get([]byte(id))
			live = len(v) == 8 && int64(binary.BigEndian.Uint64(v)) > now
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read console session: %w", err)
	}
	return live, nil
}

// EndSession deletes session id.
func (s *Store) EndSession(ctx context.Context, id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucketSessions)); b != nil {
			return b.Delete([]byte(id))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	return nil
}
