package webhooks_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/genway/genway/shared/jobs"
)

// BenchmarkDeliver measures one delivery end to end on the embedded
// store: make the delivery, claim the attempt, render, sign and POST to a
// loopback receiver that answers 204 at once, record the answer (three
// bbolt commits, each fsynced).
func BenchmarkDeliver(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = f.endJob(b, "acme", srv.URL, jobs.Completed).ID
	}
	b.ResetTimer()
	for _, id := range ids {
		if retry, err := f.svc.Deliver(ctx, id); err != nil || retry != 0 {
			b.Fatalf("Deliver = %v, %v", retry, err)
		}
	}
}
