package images

import "github.com/genway/genway/shared/route"

// Unwrapper is implemented by a Provider that stands for another one (the
// key-rotating delegates of package upstreams): Unwrap returns the
// provider a call made now reaches. Capabilities looks through it.
type Unwrapper interface {
	Unwrap() Provider
}

// Caps are the optional interfaces of an image provider, as Capabilities
// finds them; a nil field is one the provider does not have.
type Caps struct {
	Features FeatureProvider // nil: it honours no Features
}

// Capabilities returns the optional interfaces of p: for each, p's own
// when it has it, else that of the provider p.Unwrap returns, and so on
// down the chain (as net/http's ResponseController looks through a
// ResponseWriter's Unwrap). It is the one place the service asks what a
// provider can do beside Generate. What it finds through a wrapper is the
// provider a call made now reaches: find it when calling, not once to
// keep (a key-rotating delegate's provider changes with its keys). A nil
// p has none.
func Capabilities(p Provider) Caps {
	var c Caps
	route.Unwrapped(p, func(q Provider) {
		if c.Features == nil {
			c.Features, _ = q.(FeatureProvider)
		}
	})
	return c
}
