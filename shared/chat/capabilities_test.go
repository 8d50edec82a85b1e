package chat

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/catalog"
)

// capsBase is a Provider with no optional interface.
type capsBase struct{}

func (capsBase) Complete(context.Context, *Request) (*Response, error) { return &Response{}, nil }
func (capsBase) Stream(context.Context, *Request, Writer) (*Response, error) {
	return &Response{}, nil
}

// capsAll is a Provider with every optional interface.
type capsAll struct {
	capsBase
	f Features
}

func (p capsAll) Features() Features                               { return p.f }
func (capsAll) NeedsImageBytes() bool                              { return true }
func (capsAll) CacheRules(*catalog.Model) CacheRules               { return CacheRules{Breakpoints: 4} }
func (capsAll) CountTokens(context.Context, *Request) (int, error) { return 7, nil }
func (capsAll) Speaks(api string) bool                             { return api == APIMessages }
func (capsAll) NativeStream(context.Context, *Request, NativeWriter) (*Response, error) {
	return &Response{}, nil
}
func (capsAll) NativeComplete(context.Context, *Request) (*Response, error) { return &Response{}, nil }

// capsWrap stands for inner (Unwrap).
type capsWrap struct {
	capsBase
	inner Provider
}

func (w capsWrap) Unwrap() Provider { return w.inner }

// capsWrapFeatures is a wrapper with Features of its own.
type capsWrapFeatures struct {
	capsWrap
	f Features
}

func (w capsWrapFeatures) Features() Features { return w.f }

// capsLoop unwraps to itself.
type capsLoop struct{ capsBase }

func (l capsLoop) Unwrap() Provider { return l }

// TestCapabilities: Capabilities finds each optional interface on the
// provider or down its Unwrap chain, the outermost first, and the
// defaults hold where none has it.
func TestCapabilities(t *testing.T) {
	m := &catalog.Model{ID: "m"}
	inner := capsAll{f: Features{Tools: true}}
	tests := []struct {
		name      string
		p         Provider
		features  Features
		bytes     bool
		rules     CacheRules
		counts    bool
		messages  bool // speaks APIMessages
		responses bool // speaks APIResponses
	}{
		{"nil", nil, AllFeatures, false, CacheRules{}, false, false, false},
		{"none", capsBase{}, AllFeatures, false, CacheRules{}, false, false, false},
		{"all", inner, Features{Tools: true}, true, CacheRules{Breakpoints: 4}, true, true, false},
		{"through Unwrap", capsWrap{inner: inner}, Features{Tools: true}, true, CacheRules{Breakpoints: 4}, true, true, false},
		{"two Unwraps", capsWrap{inner: capsWrap{inner: inner}}, Features{Tools: true}, true, CacheRules{Breakpoints: 4}, true, true, false},
		{"the wrapper's own first", capsWrapFeatures{capsWrap{inner: inner}, Features{Seed: true}}, Features{Seed: true}, true, CacheRules{Breakpoints: 4}, true, true, false},
		{"Unwrap to nil", capsWrap{}, AllFeatures, false, CacheRules{}, false, false, false},
		{"Unwrap to a plain provider", capsWrap{inner: capsBase{}}, AllFeatures, false, CacheRules{}, false, false, false},
		{"Unwrap loop", capsLoop{}, AllFeatures, false, CacheRules{}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Capabilities(tt.p)
			if got := c.features(); got != tt.features {
				t.Errorf("features() = %+v; want %+v", got, tt.features)
			}
			if got := c.needsImageBytes(); got != tt.bytes {
				t.Errorf("needsImageBytes() = %v; want %v", got, tt.bytes)
			}
			if got := c.cacheRules(m); got != tt.rules {
				t.Errorf("cacheRules() = %+v; want %+v", got, tt.rules)
			}
			if got := c.Counter != nil; got != tt.counts {
				t.Errorf("Counter = %v; want one %v", c.Counter, tt.counts)
			}
			if got := c.speaks(APIMessages); got != tt.messages {
				t.Errorf("speaks(messages) = %v; want %v", got, tt.messages)
			}
			if got := c.speaks(APIResponses); got != tt.responses {
				t.Errorf("speaks(responses) = %v; want %v", got, tt.responses)
			}
		})
	}
}
