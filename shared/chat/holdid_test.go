package chat

import (
	"regexp"
	"testing"
)

// TestNewHoldID pins a hold's id to the shape strings.ToLower(rand.Text())
// gave it: "chat_" and 26 characters of lower-case base32, a new one each
// time.
func TestNewHoldID(t *testing.T) {
	shape := regexp.MustCompile(`^chat_[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 100 {
		id := newHoldID()
		if !shape.MatchString(id) || seen[id] {
			t.Fatalf("newHoldID() = %q: want a new id matching %s", id, shape)
		}
		seen[id] = true
	}
}
