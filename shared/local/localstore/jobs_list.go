package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/jobs"
)

// The job listing indexes, kept by Create and Transition in the
// transaction that writes the job:
//
//	jobs_by_account  account \x00 ^created (8 bytes) inv(id) \xff -> status \x00 type \x00 model
//	jobs_by_created  ^created (8 bytes) inv(id) \xff               -> account \x00 status \x00 type \x00 model
//
// ^created is the bitwise complement of the Unix second, big endian, and
// inv(id) the id with every byte complemented and \xff appended (job ids
// hold no \x00), so that bbolt's ascending key order is the listing's order:
// newest first, then id descending. The values carry what the filters
// test, so that a filtered listing decodes only the jobs it returns.
//
// The indexes are made on first use, from the jobs already stored, in the
// transaction that first needs them (a file written before they existed
// gets them then). A deleted job (Delete) has no entries.
const (
	bucketJobsByAccount = "jobs_by_account"
	bucketJobsByCreated = "jobs_by_created"
)

// listScanLimit bounds the index entries one List examines: a page whose
// filters match few jobs stops there with a cursor (has_more), rather
// than read the whole index. A variable for tests.
var listScanLimit = 10000

// ensureJobIndex makes the listing indexes if they do not exist yet,
// indexing every stored job. The entries are put in key order: bbolt
// splits a bucket's pages only at commit, and within one transaction an
// insert into the middle of a large page moves all after it (100,000
// jobs in id order took 25 s; sorted, 0.7 s).
func ensureJobIndex(tx *bolt.Tx) error {
	if tx.Bucket([]byte(bucketJobsByAccount)) != nil && tx.Bucket([]byte(bucketJobsByCreated)) != nil {
		return nil
	}
	var byAccount, byCreated []entry
	jb := tx.Bucket([]byte(bucketJobs))
	err := jb.ForEach(func(k, _ []byte) error {
		var j jobs.Job
		if _, err := getJSON(jb, k, &j); err != nil {
			return err
		}
		if j.Deleted != 0 { // deleted jobs are listed nowhere
			return nil
		}
		a, c := indexEntries(&j)
		byAccount, byCreated = append(byAccount, a), append(byCreated, c)
		return nil
	})
	if err != nil {
		return err
	}
	for name, es := range map[string][]entry{bucketJobsByAccount: byAccount, bucketJobsByCreated: byCreated} {
		b, err := tx.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
		slices.SortFunc(es, func(x, y entry) int { return bytes.Compare(x.k, y.k) })
		for _, e := range es {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry is one index key and value.
type entry struct{ k, v []byte }

// indexEntries returns j's entries in jobs_by_account and jobs_by_created.
func indexEntries(j *jobs.Job) (byAccount, byCreated entry) {
	pos := position(j.Created, j.ID)
	fields := []byte(string(j.Status) + "\x00" + j.Type + "\x00" + j.Model)
	return entry{append([]byte(j.Account+"\x00"), pos...), fields},
		entry{pos, append([]byte(j.Account+"\x00"), fields...)}
}

// indexJob writes (or rewrites, after a status change) j's index entries.
func indexJob(tx *bolt.Tx, j *jobs.Job) error {
	a, c := indexEntries(j)
	if err := tx.Bucket([]byte(bucketJobsByAccount)).Put(a.k, a.v); err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketJobsByCreated)).Put(c.k, c.v)
}

// position is the index key suffix of the job (created, id).
func position(created int64, id string) []byte {
	b := make([]byte, 8, 8+len(id)+1)
	binary.BigEndian.PutUint64(b, ^uint64(created))
	for i := 0; i < len(id); i++ {
		b = append(b, ^id[i])
	}
	return append(b, 0xff)
}

// parsePosition is position's inverse.
func parsePosition(p []byte) (int64, string, bool) {
	if len(p) < 10 || p[len(p)-1] != 0xff {
		return 0, "", false
	}
	id := make([]byte, len(p)-9)
	for i := range id {
		id[i] = ^p[8+i]
	}
	return int64(^binary.BigEndian.Uint64(p[:8])), string(id), true
}

// List implements jobs.Store with the index for q.Account (the global one
// for ""): it seeks to the later of the cursor and q.Until (q.Since
// when ascending), walks the index in q's order until q.Since (q.Until),
// tests the filters on the entries' values and decodes only the jobs it
// returns (with q.Key, every job that passes the other filters, to see
// its key). It examines at most listScanLimit entries; a page cut there
// returns the cursor of the last entry examined.
func (s *Store) List(ctx context.Context, q jobs.ListQuery) ([]*jobs.Job, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	cur, _ := jobs.DecodeCursor(q.Cursor) // checked by Normalize
	if err := s.ensureIndex(); err != nil {
		return nil, "", err
	}
	var out []*jobs.Job
	var next string
	err := s.db.View(func(tx *bolt.Tx) error {
		name, prefix := bucketJobsByCreated, []byte(nil)
		if q.Account != "" {
			name, prefix = bucketJobsByAccount, []byte(q.Account+"\x00")
		}
		c := tx.Bucket([]byte(name)).Cursor()
		jb := tx.Bucket([]byte(bucketJobs))
		k, v, step, skip := walk(c, prefix, &q, cur)
		examined := 0
		var last jobs.Cursor // the last entry examined
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = step() {
			if bytes.Equal(k, skip) {
				continue
			}
			created, id, ok := parsePosition(k[len(prefix):])
			if !ok {
				return fmt.Errorf("list jobs: malformed index key %q", k)
			}
			if (!q.Ascending && q.Since != 0 && created < q.Since) || (q.Ascending && q.Until != 0 && created > q.Until) {
				break
			}
			if examined == listScanLimit {
				next = last.Encode()
				return nil
			}
			examined++
			last = jobs.Cursor{Created: created, ID: id}
			if !matchEntry(&q, v, created) {
				continue
			}
			// The job is decoded once it is on the page, or to see whose
			// it is (q.Key: the index has no key).
			var j jobs.Job
			decode := func() error {
				ok, err := getJSON(jb, []byte(id), &j)
				if err == nil && !ok {
					err = fmt.Errorf("list jobs: index points at missing job %s", id)
				}
				return err
			}
			if q.Key != "" {
				if err := decode(); err != nil {
					return err
				}
				if j.Key != q.Key {
					continue
				}
			}
			if len(out) == q.Limit {
				next = jobs.CursorOf(out[len(out)-1]).Encode()
				return nil
			}
			if q.Key == "" {
				if err := decode(); err != nil {
					return err
				}
			}
			out = append(out, &j)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	return out, next, nil
}

// walk positions c on the first entry of q's listing under prefix after
// cur and returns it, the function that steps to the next one (Next
// newest first, Prev ascending: the index is in newest-first order), and
// the key to skip (the cursor's own entry).
func walk(c *bolt.Cursor, prefix []byte, q *jobs.ListQuery, cur jobs.Cursor) (k, v []byte, step func() ([]byte, []byte), skip []byte) {
	var at []byte // the cursor's key
	if !cur.IsZero() {
		at = append(bytes.Clone(prefix), position(cur.Created, cur.ID)...)
	}
	if !q.Ascending {
		start := prefix
		if q.Until != 0 {
			start = append(bytes.Clone(prefix), position(q.Until, "")[:8]...)
		}
		if at != nil && bytes.Compare(at, start) > 0 {
			start, skip = at, at
		}
		k, v = c.Seek(start)
		return k, v, c.Next, skip
	}
	// Ascending: back from the end of the range, the first key past it
	// being the bound: the oldest second q.Since allows (position(since,
	// "") sorts after every id of that second), or the prefix's end.
	var end []byte
	switch {
	case q.Since != 0:
		end = append(bytes.Clone(prefix), position(q.Since, "")...)
	case len(prefix) > 0:
		end = bytes.Clone(prefix)
		end[len(end)-1]++ // the account's "\x00" becomes "\x01"
	}
	if at != nil && (end == nil || bytes.Compare(at, end) < 0) {
		end = at // keys before it: newer than the cursor
	}
	if end == nil {
		k, v = c.Last()
	} else if k, _ = c.Seek(end); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	return k, v, c.Prev, nil
}

// matchEntry tests q's filters on an index entry's value.
func matchEntry(q *jobs.ListQuery, v []byte, created int64) bool {
	parts := bytes.Split(v, []byte{0})
	if q.Account == "" {
		if len(parts) != 4 {
			return false
		}
		parts = parts[1:]
	}
	if len(parts) != 3 {
		return false
	}
	return q.MatchFields(jobs.Status(parts[0]), string(parts[1]), string(parts[2]), created)
}

// ensureIndex makes the listing indexes if this file has none yet.
func (s *Store) ensureIndex() error {
	var ok bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket([]byte(bucketJobsByAccount)) != nil && tx.Bucket([]byte(bucketJobsByCreated)) != nil
		return nil
	}); err != nil || ok {
		return err
	}
	if err := s.update(ensureJobIndex); err != nil {
		return fmt.Errorf("index jobs: %w", err)
	}
	return nil
}
