package jobs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localstore"
)

// pendingVendor is a long-running provider that is never done: every poll
// is a round trip of the worker's own bookkeeping.
type pendingVendor struct{}

func (pendingVendor) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	return &jobs.Step{Handle: &jobs.Handle{ID: "op"}}, nil
}

func (pendingVendor) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	return nil, nil
}

// BenchmarkPollRun measures the worker's own cost of one poll round on the
// embedded store (read the job, claim the round, re-enqueue it; the vendor
// answers "not yet" at once): what a poll costs besides the vendor's
// status call.
//
//	go test ./shared/jobs -run '^$' -bench PollRun
func BenchmarkPollRun(b *testing.B) {
	st, err := localstore.Open(filepath.Join(b.TempDir(), "genway.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cat, err := catalog.Default()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.Grant(ctx, "a", 1_000_000, 1); err != nil {
		b.Fatal(err)
	}
	const n = 64
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job_video_%020d", i)
		j := &jobs.Job{ID: ids[i], Account: "a", Type: jobs.TypeVideo, Model: "synthetic-video", Input: jobs.Input{Prompt: "p", Duration: 1, Size: "64x64"}, Price: 1, Created: time.Now().Unix()}
		if _, err := st.Create(ctx, j, nil); err != nil {
			b.Fatal(err)
		}
	}
	clock := time.Now()
	w := &jobs.Worker{Store: st, Queue: st, Media: nil, Catalog: cat, Providers: map[string]jobs.Provider{"synthetic": pendingVendor{}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), PollInterval: time.Second, Now: func() time.Time { return clock }}
	for _, id := range ids { // submit each once
		if err := w.Process(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if i%n == 0 {
			clock = clock.Add(2 * time.Second) // every job's next poll is due
		}
		if err := w.Process(ctx, ids[i%n]); err != nil {
			b.Fatal(err)
		}
	}
}
