package localserver

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/genway/genway/shared/jobs"
)

// sweepStoreFunc is a jobs.SweepStore whose QueuedBefore reports each call.
type sweepStoreFunc struct{ listed chan<- time.Time }

func (f sweepStoreFunc) QueuedBefore(ctx context.Context, t time.Time, limit int) ([]string, error) {
	select {
	case f.listed <- t:
	default:
	}
	return nil, nil
}

func (f sweepStoreFunc) MarkSwept(context.Context, string, time.Time) (int, error) {
	return 0, jobs.ErrNotFound
}

// TestSweepLoop: local AWS mode sweeps at start (not a minute later) with
// the configured threshold, and the loop ends with its context.
func TestSweepLoop(t *testing.T) {
	listed := make(chan time.Time, 1)
	now := time.Unix(10_000, 0)
	svc := &jobs.Service{Sweeps: sweepStoreFunc{listed}, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepLoop(ctx, svc, time.Hour, 90*time.Second, svc.Log)
	}()
	select {
	case before := <-listed:
		if want := now.Add(-90 * time.Second); !before.Equal(want) {
			t.Errorf("first sweep lists jobs queued before %v; want %v", before, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no sweep at start within 30 s")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("sweepLoop did not return within 30 s of its context ending")
	}
}
