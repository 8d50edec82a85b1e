package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

type weighted struct {
	id     string
	weight int
}

func weightOf(w weighted) int { return w.weight }

// TestWeightedOrder checks the draws step by step with a scripted source:
// each draw picks the item whose span of the remaining weight holds it,
// and the remaining items are the others, the first taking the picked
// one's place.
func TestWeightedOrder(t *testing.T) {
	items := []weighted{{"a", 3}, {"b", 1}, {"c", 2}}
	for _, tt := range []struct {
		draws []int
		want  string
	}{
		{[]int{0, 0}, "a b c"}, // a (0 < 3); rest [b 1, c 2]: b (0 < 1)
		{[]int{2, 1}, "a c b"}, // a (2 < 3); rest [b 1, c 2]: c (1 - 1 = 0 < 2)
		{[]int{3, 0}, "b a c"}, // b (3 - 3 = 0 < 1); rest [a 3, c 2]: a (0 < 3)
		{[]int{3, 4}, "b c a"}, // b; rest [a 3, c 2]: c (4 - 3 = 1 < 2)
		{[]int{5, 0}, "c b a"}, // c (5 - 3 - 1 = 1 < 2); rest [b 1, a 3]: b (0 < 1)
		{[]int{4, 1}, "c a b"}, // c (4 - 3 - 1 = 0 < 2); rest [b 1, a 3]: a (1 - 1 = 0 < 3)
	} {
		got := slices.Clone(items)
		var ns []int
		i := 0
		WeightedOrder(got, weightOf, func(n int) int { ns = append(ns, n); d := tt.draws[i]; i++; return d })
		if s := ids(got); s != tt.want {
			t.Errorf("draws %v: order %s; want %s", tt.draws, s, tt.want)
		}
		if len(ns) != 2 || ns[0] != 6 || ns[1] != 6-weightOf(items[indexOf(items, got[0].id)]) {
			t.Errorf("draws %v: intn asked with %v; want the total weight, then what remains", tt.draws, ns)
		}
	}
	for _, n := range []int{0, 1} {
		got := slices.Clone(items[:n])
		WeightedOrder(got, weightOf, func(int) int { t.Fatalf("%d items: a draw", n); return 0 })
	}
}

// TestWeightedShares draws the order of two targets weighing 3 and 1 many
// times from a seeded source: the heavier is first about 3 times in 4,
// and every order holds both, once.
func TestWeightedShares(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const n = 4000
	first := map[string]int{}
	for range n {
		got := []weighted{{"a", 3}, {"b", 1}}
		WeightedOrder(got, weightOf, r.IntN)
		if s := ids(got); s != "a b" && s != "b a" {
			t.Fatalf("order %s", s)
		}
		first[got[0].id]++
	}
	// 3000 expected; a binomial's standard deviation here is about 27:
	// the bounds are wide, for any seed.
	if a := first["a"]; a < 2700 || a > 3300 {
		t.Errorf("a first %d of %d times; want about %d", a, n, n*3/4)
	}
	// Three targets 3:2:1: each is first by its weight's share, and last
	// seldom for the heavy one.
	first, last := map[string]int{}, map[string]int{}
	for range n {
		got := []weighted{{"a", 3}, {"b", 2}, {"c", 1}}
		WeightedOrder(got, weightOf, r.IntN)
		first[got[0].id]++
		last[got[2].id]++
	}
	for id, want := range map[string]int{"a": n / 2, "b": n / 3, "c": n / 6} {
		if got := first[id]; got < want-n/20 || got > want+n/20 {
			t.Errorf("%s first %d of %d times; want about %d", id, got, n, want)
		}
	}
	if last["a"] >= last["c"] {
		t.Errorf("last: a %d times, c %d; want the heavy one last less often", last["a"], last["c"])
	}
}

func ids(ws []weighted) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.id
	}
	return fmt.Sprint(s)[1 : len(fmt.Sprint(s))-1]
}

func indexOf(ws []weighted, id string) int {
	return slices.IndexFunc(ws, func(w weighted) bool { return w.id == id })
}
