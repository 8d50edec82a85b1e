package route

// WeightedOrder puts items in a weighted random order, in place: weighted
// sampling without replacement. The first is drawn with probability its
// weight over the sum of all the weights, the second likewise among the
// rest, and so on. weight returns an item's weight (below 1 counts as 1);
// intn(n) returns a uniformly random int in [0, n), as math/rand/v2's
// IntN does (a seeded source makes the order deterministic).
//
// It is how an alias's targets (catalog.Target) are ordered for one
// request: traffic spreads by weight, and the targets not drawn first
// remain the request's next candidates.
func WeightedOrder[T any](items []T, weight func(T) int, intn func(n int) int) {
	w := func(i int) int { return max(weight(items[i]), 1) }
	total := 0
	for i := range items {
		total += w(i)
	}
	for i := 0; i < len(items)-1; i++ {
		r := intn(total)
		j := i
		for ; j < len(items)-1; j++ {
			if r -= w(j); r < 0 {
				break
			}
		}
		total -= w(j)
		items[i], items[j] = items[j], items[i]
	}
}
