package ctxtime

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"live, no wait", context.Background(), 0, true},
		{"live, negative wait", context.Background(), -time.Second, true},
		{"live, short wait", context.Background(), time.Millisecond, true},
		// An hour that never passes: the ended context returns at once.
		{"ended", ended, time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sleep(tt.ctx, tt.d); got != tt.want {
				t.Errorf("Sleep(%v) = %v; want %v", tt.d, got, tt.want)
			}
		})
	}
}
