package images_test

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
)

// capsPlain is a Provider with no Features.
type capsPlain struct{}

func (capsPlain) Generate(context.Context, *catalog.Model, *images.Params) (*images.Output, error) {
	return nil, nil
}

// capsFeatures honours f.
type capsFeatures struct {
	capsPlain
	f images.Features
}

func (p capsFeatures) Features() images.Features { return p.f }

// capsWrap stands for inner (Unwrap).
type capsWrap struct {
	capsPlain
	inner images.Provider
}

func (w capsWrap) Unwrap() images.Provider { return w.inner }

// TestCapabilities: Capabilities finds a FeatureProvider on the provider
// or down its Unwrap chain, the outermost first.
func TestCapabilities(t *testing.T) {
	bg := images.Features{Background: true}
	tests := []struct {
		name string
		p    images.Provider
		want *images.Features // nil: no FeatureProvider
	}{
		{"nil", nil, nil},
		{"plain", capsPlain{}, nil},
		{"features", capsFeatures{f: bg}, &bg},
		{"through Unwrap", capsWrap{inner: capsFeatures{f: bg}}, &bg},
		{"Unwrap to a plain one", capsWrap{inner: capsPlain{}}, nil},
		{"Unwrap to nil", capsWrap{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := images.Capabilities(tt.p).Features
			switch {
			case (f == nil) != (tt.want == nil):
				t.Errorf("Capabilities(%T).Features = %v; want one %v", tt.p, f, tt.want != nil)
			case f != nil && f.Features() != *tt.want:
				t.Errorf("Features() = %+v; want %+v", f.Features(), *tt.want)
			}
		})
	}
}
