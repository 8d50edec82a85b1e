package localstore

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Create stores j as queued (its History the one queued entry) and, in the
// same transaction, holds j.Price on j.Account, records idem (if not nil),
// indexes the job for List and puts the job's queue message (visible at
// once), so no queued job is ever without a message. A later
// Enqueue of the same id is a no-op. It returns jobs.ErrInsufficientCredits
// if the account does not exist or its available credits are short, and for
// a live idem key the job that key created (same body hash) or
// jobs.ErrIdempotencyConflict. On any error nothing is written.
func (s *Store) Create(ctx context.Context, j *jobs.Job, idem *jobs.Idempotency) (*jobs.Job, error) {
	if j == nil || j.ID == "" || j.Account == "" {
		return nil, fmt.Errorf("create job: missing id or account")
	}
	if j.Price < 0 {
		return nil, fmt.Errorf("create job %s: negative price %s", j.ID, j.Price)
	}
	nj := *j
	nj.Status = jobs.Queued
	now := s.now()
	queuedAt := nj.Created
	if queuedAt == 0 {
		queuedAt = now.Unix()
	}
	nj.History = []jobs.StatusChange{{Status: jobs.Queued, At: queuedAt}}
	var got *jobs.Job
	var pending *pendingHold
	err := s.update(func(tx *bolt.Tx) error {
		got = nil
		jb := tx.Bucket([]byte(bucketJobs))
		ib := tx.Bucket([]byte(bucketIdem))
		if idem != nil {
			var rec jobs.Idempotency
			ok, err := getJSON(ib, []byte(idem.Key), &rec)
			if err != nil {
				return err
			}
			if ok && rec.Expires > now.Unix() {
				if rec.BodyHash != idem.BodyHash {
					return refuse(jobs.ErrIdempotencyConflict)
				}
				var prev jobs.Job
				ok, err := getJSON(jb, []byte(rec.JobID), &prev)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("idempotency key points at missing job %s", rec.JobID)
				}
				got = &prev
				return nil
			}
		}
		if jb.Get([]byte(nj.ID)) != nil {
			return fmt.Errorf("job id %s already exists", nj.ID)
		}
		ab := tx.Bucket([]byte(bucketAccounts))
		var a credits.Account
		ok, err := getJSON(ab, []byte(nj.Account), &a)
		if err != nil {
			return err
		}
		if !ok {
			return refuse(jobs.ErrInsufficientCredits)
		}
		if err := s.gate.hold(tx, &pending, a, nj.Key, nj.Price, bucketJobs, nj.ID); errors.Is(err, credits.ErrInsufficient) {
			return refuse(jobs.ErrInsufficientCredits)
		} else if err != nil {
			return err
		}
		if nj.Key != "" {
			if err := holdOnKey(tx, nj.Key, nj.Price); err != nil {
				return err
			}
		}
		a.Held += nj.Price
		a.Available -= nj.Price
		if err := putJSON(ab, []byte(a.ID), a); err != nil {
			return err
		}
		if err := putJSON(jb, []byte(nj.ID), nj); err != nil {
			return err
		}
		if err := ensureJobIndex(tx); err != nil {
			return err
		}
		if err := indexJob(tx, &nj); err != nil {
			return err
		}
		if idem != nil {
			rec := *idem
			rec.JobID = nj.ID
			if err := putJSON(ib, []byte(rec.Key), rec); err != nil {
				return err
			}
		}
		if err := enqueueTx(tx, nj.ID, now); err != nil {
			return err
		}
		got = &nj
		return nil
	})
	s.gate.release(pending)
	if err != nil {
		return nil, fmt.Errorf("create job %s: %w", j.ID, err)
	}
	if got.ID == nj.ID {
		signal(s.queueWake)
	}
	return got, nil
}

// Get returns the job with id, or jobs.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*jobs.Job, error) {
	var j jobs.Job
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket([]byte(bucketJobs)), []byte(id), &j)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	if !ok {
		return nil, jobs.ErrNotFound
	}
	return &j, nil
}

// Transition moves job id from status from to status to and applies p, in
// one transaction and only if the job is in from (and has p.IfRuns runs,
// if set) and jobs.CanTransition allows it; otherwise it returns an error wrapping jobs.ErrConflict
// (jobs.ErrNotFound if there is no such job). When the status changes, the
// job's History gets the new status, its index entries (see List) are
// updated and a change record is appended to the feed, all in the same
// transaction.
func (s *Store) Transition(ctx context.Context, id string, from, to jobs.Status, p jobs.Patch) (*jobs.Job, error) {
	if !jobs.CanTransition(from, to) {
		return nil, fmt.Errorf("transition job %s %s->%s: not allowed: %w", id, from, to, jobs.ErrConflict)
	}
	var j jobs.Job
	err := s.update(func(tx *bolt.Tx) error {
		jb := tx.Bucket([]byte(bucketJobs))
		j = jobs.Job{}
		ok, err := getJSON(jb, []byte(id), &j)
		if err != nil {
			return err
		}
		if !ok {
			return refuse(jobs.ErrNotFound)
		}
		if j.Status != from {
			return refuse(fmt.Errorf("status is %s: %w", j.Status, jobs.ErrConflict))
		}
		if p.IfRuns != nil {
			if j.Runs != *p.IfRuns {
				return refuse(fmt.Errorf("runs is %d, not %d: %w", j.Runs, *p.IfRuns, jobs.ErrConflict))
			}
			j.Runs++
		}
		if p.Started != 0 {
			j.Started = p.Started
		}
		if p.Handle != nil {
			j.Handle = p.Handle
		}
		if p.NextRun != 0 {
			j.NextRun = p.NextRun
		}
		if p.Candidate != nil {
			j.Candidate, j.AttemptsBefore = *p.Candidate, p.AttemptsBefore
		}
		if p.Price != nil {
			j.Price = *p.Price
		}
		j.Status = to
		if p.Output != nil {
			j.Output = p.Output
		}
		if p.Error != nil {
			j.Error = p.Error
		}
		if p.IncAttempts {
			j.Attempts++
		}
		if p.Updated != 0 {
			j.Updated = p.Updated
		}
		var at int64
		if from != to {
			h := jobs.HistoryEntry(to, p, s.now().Unix())
			j.History = append(j.History, h)
			at = h.At
		}
		if err := putJSON(jb, []byte(id), j); err != nil {
			return err
		}
		if from == to {
			return nil
		}
		if err := ensureJobIndex(tx); err != nil {
			return err
		}
		if err := indexJob(tx, &j); err != nil {
			return err
		}
		return appendChange(tx, j.Change(from, at))
	})
	if err != nil {
		return nil, fmt.Errorf("transition job %s %s->%s: %w", id, from, to, err)
	}
	if from != to {
		signal(s.feedWake)
	}
	return &j, nil
}

// Delete implements jobs.DeleteStore: in one transaction it sets the
// final job's Deleted and removes its listing index entries. It appends
// no change record: the job's status, and so its settlement, stay.
func (s *Store) Delete(ctx context.Context, id string, at int64) (*jobs.Job, error) {
	var j jobs.Job
	err := s.update(func(tx *bolt.Tx) error {
		jb := tx.Bucket([]byte(bucketJobs))
		j = jobs.Job{}
		ok, err := getJSON(jb, []byte(id), &j)
		if err != nil {
			return err
		}
		if !ok || j.Deleted != 0 {
			return refuse(jobs.ErrNotFound)
		}
		if !j.Status.Final() {
			return refuse(fmt.Errorf("status is %s: %w", j.Status, jobs.ErrConflict))
		}
		j.Deleted = at
		if err := putJSON(jb, []byte(id), j); err != nil {
			return err
		}
		if err := ensureJobIndex(tx); err != nil {
			return err
		}
		a, c := indexEntries(&j)
		if err := tx.Bucket([]byte(bucketJobsByAccount)).Delete(a.k); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketJobsByCreated)).Delete(c.k)
	})
	if errors.Is(err, jobs.ErrNotFound) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("delete job %s: %w", id, err)
	}
	return &j, nil
}
