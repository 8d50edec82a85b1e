package auth

import (
	"strings"
	"testing"
)

func TestAppendRandom(t *testing.T) {
	for _, n := range []int{0, 1, 24, 40, 64, 100} {
		seen := map[string]bool{}
		for i := 0; i < 50; i++ {
			b, err := AppendRandom([]byte("req_"), n)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			tail, ok := strings.CutPrefix(s, "req_")
			if !ok || len(tail) != n || strings.Trim(tail, base62) != "" || (n >= 24 && seen[s]) {
				t.Fatalf("AppendRandom(%q, %d) = %q; want req_ and %d fresh base62 characters", "req_", n, s, n)
			}
			seen[s] = true
		}
	}
}

func TestValidKey(t *testing.T) {
	ok := Prefix + strings.Repeat("aZ09", 8)
	tests := []struct {
		key  string
		want bool
	}{
		{ok, true},
		{ok + strings.Repeat("x", 168), true},
		{ok + strings.Repeat("x", 169), false},
		{ok[:len(ok)-1], false},
		{"sk_test_" + ok[len(Prefix):], false},
		{ok + "-", false},
		{ok + "_", false},
		{ok + " ", false},
		{ok + "é", false},
		{ok[:len(ok)-1] + "/", false},
		{ok[:len(ok)-1] + ":", false},
		{ok[:len(ok)-1] + "@", false},
		{ok[:len(ok)-1] + "[", false},
		{ok[:len(ok)-1] + "`", false},
		{ok[:len(ok)-1] + "{", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := ValidKey(tt.key); got != tt.want {
				t.Errorf("ValidKey(%q) = %v; want %v", tt.key, got, tt.want)
			}
		})
	}
}
