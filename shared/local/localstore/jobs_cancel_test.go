package localstore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// cancelVendor is a long-running provider that can cancel.
type cancelVendor struct{ cancels int }

func (v *cancelVendor) Start(context.Context, *catalog.Model, *jobs.Job) (*jobs.Step, error) {
	return &jobs.Step{Handle: &jobs.Handle{ID: "op"}}, nil
}

func (v *cancelVendor) Cancel(context.Context, *catalog.Model, *jobs.Job) error {
	v.cancels++
	return nil
}

// TestCancelReleasesHold cancels a queued and a processing job and runs
// the change feed: the holds go back (held 0), nothing is captured.
func TestCancelReleasesHold(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, processing := range []bool{false, true} {
		name := map[bool]string{false: "queued", true: "processing"}[processing]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			if _, err := s.Grant(ctx, "acct", 100*credits.Credit, 1); err != nil {
				t.Fatal(err)
			}
			v := &cancelVendor{}
			svc := &jobs.Service{Store: s, Queue: s, Catalog: cat, Providers: map[string]jobs.Provider{"synthetic": v},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			d := 7
			j, err := svc.Create(ctx, "acct", &jobs.CreateRequest{Type: jobs.TypeVideo, Model: "synthetic-video", Prompt: "p", Duration: &d}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := s.Account(ctx, "acct"); a.Held != j.Price || j.Price <= 0 {
				t.Fatalf("after create: held %s; want the price %s", a.Held, j.Price)
			}
			changes := 1
			if processing {
				zero := 0
				if _, err := s.Transition(ctx, j.ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, IfRuns: &zero,
					Handle: &jobs.Handle{ID: "op"}, Started: time.Now().Unix(), Updated: time.Now().Unix()}); err != nil {
					t.Fatal(err)
				}
				changes = 2
			}
			got, err := svc.Cancel(ctx, "acct", j.ID)
			if err != nil || got.Status != jobs.Failed || got.Error.Code != jobs.CodeCancelled {
				t.Fatalf("Cancel = %+v, %v; want failed, cancelled", got, err)
			}
			feedRun(t, s, changes, func(c credits.Change) error { return credits.Apply(ctx, s, c) })
			a, err := s.Account(ctx, "acct")
			if err != nil || a.Held != 0 || a.Balance != 100*credits.Credit || a.Available != 100*credits.Credit {
				t.Errorf("after the feed: %+v, %v; want balance 100, held 0 (released, not captured)", a, err)
			}
			if processing != (v.cancels == 1) {
				t.Errorf("vendor cancels = %d; want %d", v.cancels, map[bool]int{true: 1}[processing])
			}
			l, _ := s.Ledger(ctx, "acct")
			if len(l) != 2 || l[1].Kind != credits.Release || l[1].Amount != j.Price {
				t.Errorf("ledger = %+v; want the grant and one release of %d", l, j.Price)
			}
		})
	}
}
