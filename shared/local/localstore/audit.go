package localstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/admin"
)

// bucketAudit holds the operator audit log: entry id (time-ordered) ->
// admin.AuditEntry. It is made by the first entry.
const bucketAudit = "audit"

var _ admin.AuditStore = (*Store)(nil)

// AddAudit appends e to the audit log.
func (s *Store) AddAudit(ctx context.Context, e admin.AuditEntry) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketAudit))
		if err != nil {
			return err
		}
		return putJSON(b, []byte(e.ID), e)
	})
	if err != nil {
		return fmt.Errorf("add audit entry: %w", err)
	}
	return nil
}

// Audit returns up to limit entries older than before ("" for the newest),
// newest first.
func (s *Store) Audit(ctx context.Context, before string, limit int) ([]admin.AuditEntry, error) {
	var out []admin.AuditEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketAudit))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k []byte
		if before == "" {
			k, _ = c.Last()
		} else {
			k, _ = c.Seek([]byte(before))
			if k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
		}
		for ; k != nil && len(out) < limit; k, _ = c.Prev() {
			var e admin.AuditEntry
			if _, err := getJSON(b, k, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}
