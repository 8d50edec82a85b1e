package chat

import (
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/route"
)

// Unwrapper is implemented by a Provider that stands for another one (the
// key-rotating delegates of package upstreams): Unwrap returns the
// provider a call made now reaches. Capabilities looks through it, so a
// wrapper forwards its provider's optional interfaces without having
// them itself.
type Unwrapper interface {
	Unwrap() Provider
}

// Caps are the optional interfaces of a chat provider, as Capabilities
// finds them; a nil field is one the provider does not have.
type Caps struct {
	Features   FeatureProvider  // nil: it honours AllFeatures
	ImageBytes ImageBytesNeeder // nil: image URLs are passed as they are
	Cache      CacheProvider    // nil: no prompt-cache breakpoint is forwarded
	Counter    TokenCounter     // nil: the gateway estimates a token count
	Native     NativeProvider   // nil: it speaks no client API natively
}

// Capabilities returns the optional interfaces of p: for each, p's own
// when it has it, else that of the provider p.Unwrap returns, and so on
// down the chain (as net/http's ResponseController looks through a
// ResponseWriter's Unwrap). It is the one place the gateway asks what a
// provider can do beside Complete and Stream. What it finds through a wrapper is the
// provider a call made now reaches: find it when calling, not once to
// keep (a key-rotating delegate's provider changes with its keys). A nil
// p has none.
func Capabilities(p Provider) Caps {
	var c Caps
	route.Unwrapped(p, func(q Provider) {
		if c.Features == nil {
			c.Features, _ = q.(FeatureProvider)
		}
		if c.ImageBytes == nil {
			c.ImageBytes, _ = q.(ImageBytesNeeder)
		}
		if c.Cache == nil {
			c.Cache, _ = q.(CacheProvider)
		}
		if c.Counter == nil {
			c.Counter, _ = q.(TokenCounter)
		}
		if c.Native == nil {
			c.Native, _ = q.(NativeProvider)
		}
	})
	return c
}

// features returns the Features the provider honours: AllFeatures
// without a FeatureProvider.
func (c Caps) features() Features {
	if c.Features == nil {
		return AllFeatures
	}
	return c.Features.Features()
}

// needsImageBytes reports whether the provider needs image bytes
// rather than URLs.
func (c Caps) needsImageBytes() bool {
	return c.ImageBytes != nil && c.ImageBytes.NeedsImageBytes()
}

// cacheRules returns how the provider forwards the breakpoints of a
// request to m: none without a CacheProvider.
func (c Caps) cacheRules(m *catalog.Model) CacheRules {
	if c.Cache == nil {
		return CacheRules{}
	}
	return c.Cache.CacheRules(m)
}

// speaks reports whether the provider speaks api natively.
func (c Caps) speaks(api string) bool {
	return c.Native != nil && c.Native.Speaks(api)
}
