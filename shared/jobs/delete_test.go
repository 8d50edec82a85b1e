package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// delStore is a memStore with Delete.
type delStore struct {
	*memStore
	err error // Delete's answer, if set
}

func (s delStore) Delete(ctx context.Context, id string, at int64) (*Job, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	j.Deleted = at
	s.jobs[id] = j
	return &j, nil
}

// delMedia records deleted keys.
type delMedia struct {
	memMedia
	deleted []string
	err     error
}

func (m *delMedia) Delete(ctx context.Context, key string) error {
	if m.err != nil {
		return m.err
	}
	m.deleted = append(m.deleted, key)
	return nil
}

// ledger is a credits.Store that records settlements.
type ledger struct {
	credits.Store // the methods Delete does not call
	settled       []credits.Entry
	err           error
}

func (l *ledger) Settle(ctx context.Context, e credits.Entry) error {
	if l.err != nil {
		return l.err
	}
	l.settled = append(l.settled, e)
	return nil
}

func TestServiceDelete(t *testing.T) {
	const id = "job_video_dddddddddddddddddddd"
	job := func(st Status) Job {
		j := Job{ID: id, Account: "a", Type: TypeVideo, Model: "synthetic-video", Status: st, Price: 4, Hold: 4, Updated: 10}
		if st == Completed {
			j.Output = &Output{Key: "videos/a/" + id + ".mp4", ContentType: "video/mp4"}
		}
		return j
	}
	boom := errors.New("boom")
	tests := []struct {
		name         string
		status       Status
		account      string
		storeErr     error
		mediaErr     error
		settleErr    error
		noDeletes    bool
		wantCode     string // an *apierr.Error's code
		wantErr      bool   // another error
		settled      string // the settlement's kind, "" for none
		mediaDeleted bool
		deleted      bool
	}{
		{name: "completed", status: Completed, settled: credits.Capture, mediaDeleted: true, deleted: true},
		{name: "failed: nothing stored to delete", status: Failed, settled: credits.Release, deleted: true},
		{name: "queued", status: Queued, wantCode: "job_not_final"},
		{name: "processing", status: Processing, wantCode: "job_not_final"},
		{name: "another account's", status: Completed, account: "b", wantCode: "job_not_found"},
		{name: "deleted concurrently", status: Completed, storeErr: ErrNotFound, wantCode: "job_not_found", settled: credits.Capture, mediaDeleted: true},
		{name: "settlement fails: nothing deleted", status: Completed, settleErr: boom, wantErr: true},
		{name: "media store fails: the job stays", status: Completed, mediaErr: boom, wantErr: true, settled: credits.Capture},
		{name: "no DeleteStore", status: Completed, noDeletes: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore(job(tt.status))
			m := &delMedia{err: tt.mediaErr}
			l := &ledger{err: tt.settleErr}
			svc := &Service{Store: st, Media: m, Credits: l, Deletes: delStore{st, tt.storeErr}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tt.noDeletes {
				svc.Deletes = nil
			}
			acct := tt.account
			if acct == "" {
				acct = "a"
			}
			got, err := svc.Delete(context.Background(), acct, id)
			e := apierr.As(err)
			switch {
			case tt.wantCode != "" && (e == nil || e.Code != tt.wantCode):
				t.Errorf("Delete = %v; want code %s", err, tt.wantCode)
			case tt.wantErr && (err == nil || e != nil):
				t.Errorf("Delete = %v; want an internal error", err)
			case tt.wantCode == "" && !tt.wantErr && (err != nil || got.Deleted == 0):
				t.Errorf("Delete = %+v, %v; want the deleted job", got, err)
			}
			var kinds []string
			for _, s := range l.settled {
				kinds = append(kinds, s.Kind)
				if s.ID != "job:"+id || s.Amount != 4 {
					t.Errorf("settled %+v; want job:%s for its 4 credits", s, id)
				}
			}
			if want := slices.DeleteFunc([]string{tt.settled}, func(s string) bool { return s == "" }); !slices.Equal(kinds, want) {
				t.Errorf("settled %v; want %v", kinds, want)
			}
			if (len(m.deleted) == 1) != tt.mediaDeleted {
				t.Errorf("media deleted %v; want deleted %v", m.deleted, tt.mediaDeleted)
			}
			if j, _ := st.Get(context.Background(), id); (j.Deleted != 0) != tt.deleted {
				t.Errorf("stored job deleted %v; want %v", j.Deleted != 0, tt.deleted)
			}
		})
	}
}
