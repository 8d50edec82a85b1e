package chat

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header, value string
		want          time.Duration
	}{
		{"Retry-After", "", 0},
		{"Retry-After", "0", 0},
		{"Retry-After", "30", 30 * time.Second},
		{"Retry-After", "1.5", 1500 * time.Millisecond},
		{"Retry-After", "soon", 0},
		{"Retry-After", "-5", 0},
		{"Retry-After", "Wed, 01 Jan 2025 12:01:00 GMT", time.Minute},
		{"Retry-After", "Wed, 01 Jan 2025 11:00:00 GMT", 0},
		{"Retry-After-Ms", "250", 250 * time.Millisecond},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		if got := RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(%s: %q) = %v; want %v", tt.header, tt.value, got, tt.want)
		}
	}
}
