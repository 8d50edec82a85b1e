package chat

import (
	"context"
	"errors"
	"os"
	"testing"
)

func TestStatusKind(t *testing.T) {
	tests := []struct {
		status int
		want   UpstreamKind
	}{
		{400, UpstreamBadRequest}, {404, UpstreamBadRequest}, {413, UpstreamBadRequest}, {422, UpstreamBadRequest},
		{429, UpstreamRateLimited},
		{408, UpstreamTimeout}, {504, UpstreamTimeout},
		{503, UpstreamUnavailable}, {529, UpstreamUnavailable},
		{401, UpstreamFailed}, {403, UpstreamFailed}, {409, UpstreamFailed}, {500, UpstreamFailed}, {502, UpstreamFailed},
	}
	for _, tt := range tests {
		if got := StatusKind(tt.status); got != tt.want {
			t.Errorf("StatusKind(%d) = %v; want %v", tt.status, got, tt.want)
		}
	}
}

func TestTransportError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -1)
	defer cancel2()
	boom := errors.New("connection refused")
	tests := []struct {
		name     string
		ctx      context.Context
		err      error
		wantKind UpstreamKind
		wantCtx  error // the error is ctx's, not an UpstreamError
	}{
		{"client went away", cancelled, boom, 0, context.Canceled},
		{"deadline", expired, boom, UpstreamTimeout, nil},
		{"network timeout", context.Background(), os.ErrDeadlineExceeded, UpstreamTimeout, nil},
		{"wrapped deadline", context.Background(), context.DeadlineExceeded, UpstreamTimeout, nil},
		{"failure", context.Background(), boom, UpstreamFailed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := TransportError(tt.ctx, "p", "send request", tt.err)
			var ue *UpstreamError
			switch {
			case tt.wantCtx != nil:
				if !errors.Is(err, tt.wantCtx) || errors.As(err, &ue) {
					t.Errorf("TransportError = %v; want %v, not an UpstreamError", err, tt.wantCtx)
				}
			case !errors.As(err, &ue) || ue.Kind != tt.wantKind || ue.Provider != "p" || !errors.Is(err, tt.err):
				t.Errorf("TransportError = %#v; want an UpstreamError of kind %v from p wrapping %v", err, tt.wantKind, tt.err)
			}
		})
	}
}
