package localstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// benchStore opens a store with an account rich enough for b.N jobs.
func benchStore(b *testing.B) *Store {
	b.Helper()
	s := openTemp(b)
	if _, err := s.Grant(context.Background(), "acct", 1<<60, 1); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchJob(i int64) *jobs.Job {
	return &jobs.Job{
		ID: fmt.Sprintf("job_sfx_%020d", i), Account: "acct", Type: jobs.TypeSFX, Model: "synthetic-sfx", Status: jobs.Queued,
		Input: jobs.Input{Prompt: "rain on a tin roof", Duration: 5, Format: "mp3"}, Price: 5, Created: 1, Updated: 1,
	}
}

// BenchmarkCreate measures Store.Create (job + hold + idempotency key +
// queue message, one durable transaction), from one goroutine and from 16;
// with key=limited the job is made with an API key that has a credit
// limit, so the same transaction also holds on the key.
func BenchmarkCreate(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		for _, par := range []int{1, 16} {
			name := fmt.Sprintf("key=none/goroutines=%d", par)
			if keyed {
				name = fmt.Sprintf("key=limited/goroutines=%d", par)
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				s := benchStore(b)
				keyID := ""
				if keyed {
					k, err := auth.NewKey()
					if err != nil {
						b.Fatal(err)
					}
					r := auth.NewRecord(k, "acct", time.Unix(1, 0))
					lim := credits.MaxAmount
					r.CreditLimit = &lim
					if err := s.PutKey(ctx, r); err != nil {
						b.Fatal(err)
					}
					keyID = r.ID
				}
				var n atomic.Int64
				b.SetParallelism(par) // par * GOMAXPROCS goroutines; GOMAXPROCS is set to 1 below
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						j := benchJob(n.Add(1))
						j.Key = keyID
						idem := &jobs.Idempotency{Key: "acct/" + j.ID, BodyHash: "h", Expires: 1 << 40}
						if _, err := s.Create(ctx, j, idem); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkTransition measures Store.Transition queued -> processing (with
// its change-feed record), from one goroutine.
func BenchmarkTransition(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	for i := range b.N {
		if _, err := s.Create(ctx, benchJob(int64(i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Transition(ctx, benchJob(int64(i)).ID, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: 2}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
}

// BenchmarkPipeline measures jobs completed per second through the whole
// embedded pipeline: b.N jobs created, leased by Consume (8 workers) and
// moved queued -> processing -> completed (no generation), their messages
// acked and their credits captured by the Feed.
func BenchmarkPipeline(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := benchStore(b)
	for i := range b.N {
		if _, err := s.Create(ctx, benchJob(int64(i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	settled := make(chan struct{}, b.N)
	b.ResetTimer()
	done := make(chan error, 2)
	go func() {
		done <- s.Consume(ctx, 8, time.Minute, func(ctx context.Context, id string) error {
			if _, err := s.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true}); err != nil {
				return err
			}
			_, err := s.Transition(ctx, id, jobs.Processing, jobs.Completed, jobs.Patch{Output: &jobs.Output{Key: id}})
			return err
		})
	}()
	go func() {
		done <- s.Feed(ctx, func(ctx context.Context, c credits.Change) error {
			if err := credits.Apply(ctx, s, c); err != nil {
				return err
			}
			if c.NewStatus == string(jobs.Completed) {
				settled <- struct{}{}
			}
			return nil
		})
	}()
	for range b.N {
		<-settled
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
	if a, err := s.Account(context.Background(), "acct"); err != nil || a.Held != 0 {
		b.Errorf("Account after pipeline = %+v, %v; want nothing held", a, err)
	}
}

// BenchmarkQueue measures the queues' own work, apart from the disk (the
// file is not fsynced): b.N messages, enqueued before the timer, leased 8
// at a time and settled (acked, or delivered with nothing more to do) one
// transaction each.
func BenchmarkQueue(b *testing.B) {
	tests := []struct {
		name    string
		enqueue func(s *Store, id string) error
		drain   func(s *Store, now time.Time) (int, error) // one lease of up to 8, settled
	}{
		{"jobs", func(s *Store, id string) error { return s.Enqueue(context.Background(), id, 0) },
			func(s *Store, now time.Time) (int, error) {
				ls, _, err := s.lease(now, 8, time.Minute, nil)
				for _, l := range ls {
					if err == nil {
						err = s.ack(l)
					}
				}
				return len(ls), err
			}},
		{"webhooks", func(s *Store, id string) error { return s.SendWebhook(context.Background(), id, 0) },
			func(s *Store, now time.Time) (int, error) {
				ls, _, err := s.leaseHooks(now, 8, time.Minute)
				for _, l := range ls {
					if err == nil {
						err = s.settleHook(l, 0)
					}
				}
				return len(ls), err
			}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			s := openTemp(b)
			s.db.NoSync = true
			for i := range b.N {
				if err := tt.enqueue(s, benchJob(int64(i)).ID); err != nil {
					b.Fatal(err)
				}
			}
			now := time.Now().Add(time.Second)
			b.ResetTimer()
			for left := b.N; left > 0; {
				n, err := tt.drain(s, now)
				if err != nil || n == 0 {
					b.Fatalf("drain with %d left = %d, %v", left, n, err)
				}
				left -= n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
		})
	}
}
