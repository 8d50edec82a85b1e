package jobs

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/catalog"
)

// capsStart is a Provider with no optional interface.
type capsStart struct{}

func (capsStart) Start(context.Context, *catalog.Model, *Job) (*Step, error) { return nil, nil }

// capsPoller is a Poller that cannot cancel.
type capsPoller struct{ capsStart }

func (capsPoller) Poll(context.Context, *catalog.Model, *Job) (*Result, error) { return nil, nil }

// capsBoth polls and cancels.
type capsBoth struct{ capsPoller }

func (capsBoth) Cancel(context.Context, *catalog.Model, *Job) error { return nil }

// capsWrap stands for inner (Unwrap).
type capsWrap struct {
	capsStart
	inner Provider
}

func (w capsWrap) Unwrap() Provider { return w.inner }

// capsLoop unwraps to itself.
type capsLoop struct{ capsStart }

func (l capsLoop) Unwrap() Provider { return l }

// TestCapabilities: Capabilities finds Poller and Canceller on the
// provider or down its Unwrap chain.
func TestCapabilities(t *testing.T) {
	tests := []struct {
		name         string
		p            Provider
		polls, stops bool
	}{
		{"nil", nil, false, false},
		{"neither", capsStart{}, false, false},
		{"poller", capsPoller{}, true, false},
		{"both", capsBoth{}, true, true},
		{"through Unwrap", capsWrap{inner: capsBoth{}}, true, true},
		{"through two Unwraps", capsWrap{inner: capsWrap{inner: capsPoller{}}}, true, false},
		{"Unwrap to nil", capsWrap{}, false, false},
		{"Unwrap loop", capsLoop{}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Capabilities(tt.p)
			if (c.Poller != nil) != tt.polls || (c.Canceller != nil) != tt.stops {
				t.Errorf("Capabilities(%T) = %+v; want a Poller %v, a Canceller %v", tt.p, c, tt.polls, tt.stops)
			}
		})
	}
}
