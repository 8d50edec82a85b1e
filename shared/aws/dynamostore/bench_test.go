package dynamostore

import (
	"context"
	"fmt"
	"testing"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// BenchmarkRoundTrip is one job's store traffic against moto: Create (with
// an idempotency key), queued -> processing -> completed, and the capture
// that the change stream triggers. Five DynamoDB calls per op.
func BenchmarkRoundTrip(b *testing.B) {
	endpoint := mototest.Start(b)
	s, _ := newStore(b, endpoint)
	ctx := context.Background()
	if _, err := s.Grant(ctx, "acct1", 1<<40, 1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("job_sfx_bench%d", i)
		j := newJob(id, "acct1", 10)
		if _, err := s.Create(ctx, j, &jobs.Idempotency{Key: "acct1/" + id, BodyHash: "h", Expires: 5000}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, Updated: 1001}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Transition(ctx, id, jobs.Processing, jobs.Completed, jobs.Patch{Output: &jobs.Output{Key: id + ".mp3"}, Updated: 1002}); err != nil {
			b.Fatal(err)
		}
		if err := credits.Apply(ctx, s, credits.Change{JobID: id, Account: "acct1", OldStatus: "processing", NewStatus: "completed", Price: 10, At: 1002}); err != nil {
			b.Fatal(err)
		}
	}
}
