package chat

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/catalog"
)

// TestCandidatesAllocs: a model that is not an alias costs candidates
// what it did before aliases: one allocation (its one-id slice), whether
// its fallbacks come from the catalog or not.
func TestCandidatesAllocs(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	g := NewGateway(Config{Catalog: cat})
	ctx := context.Background()
	for _, p := range []*Params{{Model: "synthetic/echo"}, {Model: "synthetic/echo", Models: []string{}}} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := g.candidates(ctx, p); err != nil {
				t.Fatal(err)
			}
		}); n != 1 {
			t.Errorf("candidates(%s, models %v) allocates %v times; want 1", p.Model, p.Models, n)
		}
	}
}
