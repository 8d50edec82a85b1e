package jobs

import "github.com/genway/genway/shared/route"

// Unwrapper is implemented by a Provider that stands for another one (the
// key-rotating delegates of package upstreams): Unwrap returns the
// provider a call made now reaches. Capabilities looks through it.
type Unwrapper interface {
	Unwrap() Provider
}

// Caps are the optional interfaces of a job provider, as Capabilities
// finds them; a nil field is one the provider does not have.
type Caps struct {
	Poller    Poller    // nil: Start answers the media itself, never a handle to poll
	Canceller Canceller // nil: a job running at the vendor cannot be stopped there
}

// Capabilities returns the optional interfaces of p: for each, p's own
// when it has it, else that of the provider p.Unwrap returns, and so on
// down the chain (as net/http's ResponseController looks through a
// ResponseWriter's Unwrap). It is the one place the worker and the
// service ask what a provider can do beside Start. What it finds through
// a wrapper is the provider a call made now reaches: find it when
// calling, not once to keep (a key-rotating delegate's provider changes
// with its keys). A nil p has none.
func Capabilities(p Provider) Caps {
	var c Caps
	route.Unwrapped(p, func(q Provider) {
		if c.Poller == nil {
			c.Poller, _ = q.(Poller)
		}
		if c.Canceller == nil {
			c.Canceller, _ = q.(Canceller)
		}
	})
	return c
}
