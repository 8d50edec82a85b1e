package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/genway/genway/shared/route"
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

func TestUpstreamErrorFailure(t *testing.T) {
	tests := []struct {
		name string
		e    UpstreamError
		want route.Failure
	}{
		{"status", UpstreamError{Kind: UpstreamUnavailable, Status: 529}, route.Failure{Class: route.Transient, Status: 529}},
		{"429 keeps its wait", UpstreamError{Kind: UpstreamRateLimited, Status: 429, RetryAfter: time.Second},
			route.Failure{Class: route.RateLimited, Status: 429, RetryAfter: time.Second}},
		{"401", UpstreamError{Kind: UpstreamFailed, Status: 401}, route.Failure{Class: route.KeyRefused, Status: 401}},
		{"a 200 that failed is no status: an error inside the answer", UpstreamError{Kind: UpstreamFailed, Status: 200}, route.Failure{Class: route.Transient, Reason: "in_band"}},
		{"dropped", UpstreamError{Kind: UpstreamFailed, Reason: ReasonDropped}, route.Failure{Class: route.Transient, Reason: "dropped"}},
		{"timeout", UpstreamError{Kind: UpstreamTimeout}, route.Failure{Class: route.Transient, Reason: "timeout"}},
		{"not configured", UpstreamError{Kind: UpstreamUnavailable}, route.Failure{Class: route.Skip, Reason: "unavailable"}},
		{"bad request without status", UpstreamError{Kind: UpstreamBadRequest}, route.Failure{Class: route.Final, Reason: "bad_request"}},
	}
	for _, tt := range tests {
		if got := tt.e.Failure(); got != tt.want {
			t.Errorf("%s: Failure() = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}

func TestStatusError(t *testing.T) {
	h := http.Header{"Retry-After": {"3"}}
	e := StatusError("p", 503, h, "busy", errors.New("cause"))
	if e.Kind != UpstreamUnavailable || e.Status != 503 || e.RetryAfter != 3*time.Second || e.Message != "busy" || e.Provider != "p" {
		t.Errorf("StatusError(503) = %+v", e)
	}
	if e := StatusError("p", 400, nil, "", nil); e.Kind != UpstreamBadRequest || e.Message == "" || e.RetryAfter != 0 {
		t.Errorf("StatusError(400, no message) = %+v; want a message naming the provider", e)
	}
}

func TestTransportErrorDropped(t *testing.T) {
	err := TransportError(context.Background(), "p", "read stream", fmt.Errorf("read: %w", io.ErrUnexpectedEOF))
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Reason != ReasonDropped || ue.Failure().Reason != "dropped" {
		t.Errorf("TransportError(unexpected EOF) = %+v; want reason dropped", err)
	}
}
