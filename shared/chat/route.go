package chat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// MaxModels is the most model ids a request's models list may hold.
const MaxModels = 8

// Answer says who answers a completion: Sink.Begin gets it when the
// answer is committed to the client.
type Answer struct {
	// Model is the catalog id of the model that answers: the model of the
	// answer and of every chunk, the model usage and credits are counted
	// for.
	Model string
	// Attempts are the attempts made, the answering one last
	// (route.FormatAttempts: the x-genway-attempts header).
	Attempts []route.Attempt
	// Native: the model's provider answers in the client's own API
	// (see NativeProvider): the sink relays its events (NativeSink), and
	// what the translation left out (hosted tools) was not left out.
	Native bool
}

// AttemptsError is the error of a completion that no target answered, with
// the attempts made (none if the request was refused before any call).
type AttemptsError = route.AttemptsError

// Failure classifies e by the routing policy: by its upstream status
// (route.StatusClass) when it is an error status (>= 400), else by its
// kind: a timeout or a failure to talk to the upstream (connection
// refused, a dropped stream, a malformed answer, an error inside a 200
// stream) is Transient, a provider
// that is not configured is skipped, a bad request is Final. The Reason of
// a failure without a status is e's Reason, else its kind's name.
func (e *UpstreamError) Failure() route.Failure {
	f := route.Failure{RetryAfter: e.RetryAfter}
	if e.Status >= 400 {
		f.Class, f.Status = route.StatusClass(e.Status), e.Status
		return f
	}
	switch e.Kind {
	case UpstreamTimeout:
		f.Class, f.Reason = route.Transient, "timeout"
	case UpstreamRateLimited:
		f.Class, f.Reason = route.RateLimited, "rate_limited"
	case UpstreamUnavailable:
		f.Class, f.Reason = route.Skip, "unavailable"
	case UpstreamBadRequest:
		f.Class, f.Reason = route.Final, "bad_request"
	default:
		f.Class, f.Reason = route.Transient, "connection"
		if e.Status == http.StatusOK {
			f.Reason = "in_band" // an error inside a 200 stream
		}
	}
	if e.Reason != "" {
		f.Reason = e.Reason
	}
	return f
}

// Fault is what the client is told of e: its Kind, provider, status and
// Retry-After, and the upstream's words only for UpstreamBadRequest (the
// client's own request; the words of any other failure are for the logs).
func (e *UpstreamError) Fault() route.Fault {
	f := route.Fault{Kind: e.Kind, Provider: e.Provider, Status: e.Status, RetryAfter: e.RetryAfter}
	if e.Kind == UpstreamBadRequest {
		f.Message = e.Message
	}
	return f
}

var _ route.VendorFailure = (*UpstreamError)(nil)

// errStall cancels an attempt that produced no token before its
// route.Try.FirstToken.
var errStall = errors.New("no first token in time")

// skipped is a target that cannot serve the request: Prepare or Admit
// refused it.
type skipped struct{ error }

func (e skipped) Unwrap() error { return e.error }

// committed is a failure after the answer was committed to the client.
type committed struct{ error }

func (e committed) Unwrap() error { return e.error }

// classify is the routing classification of an attempt's error: a
// failure after content Final, a skipped target Skip, a stall Transient,
// a vendor's failure its own (route.VendorFailure), anything else Final.
func classify(err error) route.Failure {
	var (
		s  skipped
		c  committed
		vf route.VendorFailure
	)
	switch {
	case errors.As(err, &c):
		return route.Failure{Class: route.Final, Reason: "after_content"}
	case errors.As(err, &s):
		return route.Failure{Class: route.Skip, Reason: "skipped"}
	case errors.Is(err, errStall):
		return route.Failure{Class: route.Transient, Reason: "stall"}
	case errors.As(err, &vf):
		return vf.Failure()
	}
	return route.Failure{Class: route.Final}
}

// candidates returns the ids of the models that may serve p, in order: the
// lead (model, or models[0] without it), then p's models, or else the
// lead's catalog fallbacks. An alias among them (a catalog model with
// targets) stands for its targets, in a weighted random order drawn for
// this request (route.WeightedOrder over g.rand), in its place. An id of
// models that is unknown or not a chat model is a 404 or 400 naming it; an
// id listed twice is tried once, where it comes first. The lead itself is
// checked by Prepare.
//
// The caller's API key (auth.CheckModel) must be allowed the lead and
// every id of models, which the client named: else a 403
// model_not_allowed naming it. A catalog fallback the key may not use is
// skipped, not an error: the client did not ask for it. A key allowed an
// alias may use its targets: they are the alias's deployments.
func (g *Gateway) candidates(ctx context.Context, p *Params) ([]string, error) {
	lead, rest, offset := p.Model, p.Models, 0
	if len(p.Models) > MaxModels {
		return nil, apierr.Invalidf("models", "invalid_value", "models may list at most %d model ids", MaxModels)
	}
	param := "model"
	if lead == "" && len(rest) > 0 {
		lead, rest, offset, param = rest[0], rest[1:], 1, "models[0]"
	}
	if err := auth.CheckModel(ctx, param, lead); err != nil {
		return nil, err
	}
	lm, _ := g.cat.Model(lead) // nil if unknown: Prepare answers it
	if p.Models == nil && lm != nil {
		rest = lm.Fallbacks
	}
	if len(rest) == 0 && (lm == nil || !lm.Alias()) {
		return []string{lead}, nil
	}
	ids := g.appendCandidate(make([]string, 0, 1+len(rest)), lead, lm)
	for i, id := range rest {
		m, ok := g.cat.Model(id)
		if p.Models != nil {
			param := fmt.Sprintf("models[%d]", i+offset)
			if !ok {
				return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: param,
					Message: fmt.Sprintf("The model %q does not exist. GET /v1/models lists the models.", id)}
			}
			if m.Type != catalog.TypeChat {
				return nil, apierr.Invalidf(param, "model_type_mismatch", "model %q is a %s model, not a chat model", id, m.Type)
			}
			if err := auth.CheckModel(ctx, param, id); err != nil {
				return nil, err
			}
		} else if !auth.Allowed(ctx, id) {
			continue // a catalog fallback this key may not use
		}
		ids = g.appendCandidate(ids, id, m)
	}
	return ids, nil
}

// appendCandidate appends id, the id of catalog model m (nil: not one), to
// ids unless it is there already; for an alias, its targets instead, in a
// weighted random order, each unless it is there already.
func (g *Gateway) appendCandidate(ids []string, id string, m *catalog.Model) []string {
	if m == nil || !m.Alias() {
		if slices.Contains(ids, id) {
			return ids
		}
		return append(ids, id)
	}
	ts := slices.Clone(m.Targets)
	route.WeightedOrder(ts, func(t catalog.Target) int { return t.Weight }, g.rand)
	for _, t := range ts {
		if !slices.Contains(ids, t.Model) {
			ids = append(ids, t.Model)
		}
	}
	return ids
}

// routed is one request's candidates as Run tries them: each prepared
// (Prepare, Admit, FetchImages) on its first attempt.
type routed struct {
	g       *Gateway
	account string
	p       *Params
	ids     []string
	calls   []*Call
	errs    []error // a candidate that cannot serve the request: why
	sink    Sink
	started bool // sink.Start was called
	served  *Call
	resp    *Response  // the answer: whole, or cut short (Partial)
	out     outputSize // the answer's output handed to the sink, streamed
	hold    *hold      // the completion's hold, nil if it has none
	// client is the request's context, without the gateway's timeout:
	// done when the client went away.
	client context.Context
	// start is when Run began; called says a provider was called (the
	// request has a record); first is when the answer's first token
	// reached the sink (zero: not streamed, or no token).
	start  time.Time
	called bool
	first  time.Time
}

// record returns the record of the request rt ran: answered by resp
// (rt.served's, charged at rates), or, with resp nil, failed (no cost).
// attempts are the router's.
func (rt *routed) record(ctx context.Context, resp *Response, rates credits.TokenRates, attempts []route.Attempt) credits.Record {
	p := rt.p
	now := time.Now()
	r := credits.Record{ID: p.ID, Kind: p.Kind, Account: rt.account, Key: auth.KeyID(ctx), ModelAsked: p.Model,
		Attempts: route.FormatAttempts(attempts), Stream: p.Stream, Status: credits.StatusFailed,
		LatencyMS: now.Sub(rt.start).Milliseconds(), At: now.UnixMilli()}
	if r.ID == "" {
		r.ID = credits.NewRecordID("chatcmpl-", rt.start)
	}
	if r.Kind == "" {
		r.Kind = credits.KindChat
	}
	if r.ModelAsked == "" && len(p.Models) > 0 {
		r.ModelAsked = p.Models[0]
	}
	if resp == nil {
		return r
	}
	c := rt.served
	r.Model, r.Provider = c.Request.Model.ID, c.Request.Model.Provider
	r.ServiceTier = resp.ServiceTier
	if r.ServiceTier == "" {
		r.ServiceTier = c.Request.ServiceTier
	}
	r.Tokens, r.Rates, r.Cost = resp.Usage.Tokens(), rates, resp.Usage.Cost
	r.Status, r.FinishReason, r.Estimated = resp.Status, resp.FinishReason, resp.Estimated
	if r.Status == "" {
		r.Status = credits.StatusCompleted
	}
	r.Partial = resp.Partial
	if !rt.first.IsZero() {
		r.FirstTokenMS = max(rt.first.Sub(rt.start).Milliseconds(), 0)
	}
	return r
}

// call returns candidate i prepared for an attempt, or its error
// (skipped, for one that cannot serve the request).
func (rt *routed) call(ctx context.Context, i int) (*Call, error) {
	if rt.calls[i] != nil || rt.errs[i] != nil {
		return rt.calls[i], rt.errs[i]
	}
	p := rt.p
	if p.Model != rt.ids[i] {
		cp := *p
		cp.Model = rt.ids[i]
		p = &cp
	}
	c, err := rt.g.Prepare(ctx, p)
	switch {
	case err != nil:
	case rt.hold != nil:
		rt.hold.limit(c) // held: what it may cost is reserved already
	default:
		err = rt.g.Admit(ctx, rt.account, c)
	}
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) { // the request, or this model's fit for it
			err = skipped{err}
		}
		rt.errs[i] = err
		return nil, err
	}
	// A URL that cannot be fetched is the client's: Final.
	if err := rt.g.FetchImages(ctx, c); err != nil {
		rt.errs[i] = err
		return nil, err
	}
	rt.calls[i] = c
	return c, nil
}

// attempt states, of firstToken.state.
const (
	waiting int32 = iota // no token yet
	began                // the answer is committed: the sink has it
	stalled              // abandoned: no token before the deadline
)

// firstToken is an attempt's Writer: nothing reaches the client before
// the attempt's first content, reasoning or tool-call delta, when it
// commits the answer (Sink.Begin), so that every earlier failure can be
// routed elsewhere; the stall timer and the first delta race for the
// state. A Thought that comes before (a redacted_thinking block first)
// is not a token: it is held, and handed to the sink at the commit,
// before the delta that commits. It counts the output it hands to the
// sink, and notes a sink that failed (the client went away), for an
// answer cut short.
//
// For a native answer (see NativeProvider) it is the attempt's
// NativeWriter: its events are held until the first content event, which
// commits the answer, and go through to the sink's Event after it.
type firstToken struct {
	sink   Sink
	native NativeSink // the sink, for a native attempt; nil otherwise
	answer Answer
	state  atomic.Int32
	held   []Thought // Thoughts before the commit; written by the provider's goroutine only
	// heldEvents are a native answer's events before the commit (their
	// Data copied); likewise.
	heldEvents []NativeEvent
	out        outputSize // likewise
	failed     bool       // the sink failed; likewise
	at         time.Time  // when the first token reached the sink; set once, by Delta or Event, before its state is began
}

func (f *firstToken) Delta(d Delta) error {
	if f.state.Load() != began {
		if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil {
			if d.Thought != nil {
				f.held = append(f.held, *d.Thought)
			}
			return nil
		}
		if !f.state.CompareAndSwap(waiting, began) {
			return errStall
		}
		if err := f.commit(); err != nil {
			return err
		}
	}
	f.out.add(d)
	if err := f.sink.Delta(d); err != nil {
		f.failed = true
		return err
	}
	return nil
}

// commit begins the answer at its first token (the state is began) and
// hands the sink what was held.
func (f *firstToken) commit() error {
	f.at = time.Now()
	if err := f.sink.Begin(f.answer); err != nil {
		f.failed = true
		return err
	}
	return f.release()
}

// release hands the held Thoughts, or a native answer's held events, to
// the sink, once the answer is begun.
func (f *firstToken) release() error {
	for i := range f.held {
		if err := f.sink.Delta(Delta{Thought: &f.held[i]}); err != nil {
			f.failed = true
			return err
		}
	}
	f.held = nil
	for _, e := range f.heldEvents {
		if err := f.native.Event(e); err != nil {
			f.failed = true
			return err
		}
	}
	f.heldEvents = nil
	return nil
}

func (f *firstToken) Flush() error {
	if f.state.Load() != began {
		return nil
	}
	if err := f.sink.Flush(); err != nil {
		f.failed = true
		return err
	}
	return nil
}

// attempt runs one attempt of Run: candidate try.Target on its provider,
// streamed through a firstToken writer or whole, abandoned as a stall if
// it has no token by try.FirstToken.
func (rt *routed) attempt(ctx context.Context, try route.Try) error {
	c, err := rt.call(ctx, try.Target)
	if err != nil {
		return err
	}
	if !rt.started {
		rt.started = true
		if err := rt.sink.Start(); err != nil {
			return err
		}
	}
	m := c.Request.Model
	// The attempts so far and this one, in a slice of its own (the
	// router appends to try.Attempts' array).
	attempts := append(try.Attempts[:len(try.Attempts):len(try.Attempts)], route.Attempt{Model: m.ID, Outcome: "200"})
	f := &firstToken{sink: rt.sink, answer: Answer{Model: m.ID, Attempts: attempts, Native: c.native}}
	if c.native {
		f.native = rt.sink.(NativeSink) // Run checked it
	}
	base, own := ctx, false // own: base is the attempt's, ended with it
	if !c.Stream {
		// A whole answer runs on when its client goes away, within the
		// gateway's timeout, so that the tokens it makes are charged
		// exactly; the router makes no new attempt for a client gone.
		base = context.WithoutCancel(ctx)
		if dl, ok := ctx.Deadline(); ok {
			var stop context.CancelFunc
			base, stop = context.WithDeadline(base, dl)
			defer stop()
			own = true
		}
	}
	// A context of the attempt's own needs no other, unless a first-token
	// deadline is to cancel it with its cause.
	actx, cancel := base, context.CancelCauseFunc(func(error) {})
	if !own || !try.FirstToken.IsZero() {
		actx, cancel = context.WithCancelCause(base)
	}
	defer cancel(nil)
	if !try.FirstToken.IsZero() {
		t := time.AfterFunc(time.Until(try.FirstToken), func() {
			if f.state.CompareAndSwap(waiting, stalled) {
				cancel(errStall)
			}
		})
		defer t.Stop()
	}
	var resp *Response
	start := time.Now()
	rt.called = true
	switch np := Capabilities(c.provider).Native; {
	case c.native && np == nil: // Prepare found it speaks the request's API: a wrapper that lost it
		err = errNotNative
	case c.native && c.Stream:
		resp, err = np.NativeStream(actx, c.Request, f)
	case c.native:
		resp, err = np.NativeComplete(actx, c.Request)
	case c.Stream:
		resp, err = c.provider.Stream(actx, c.Request, f)
	default:
		resp, err = c.provider.Complete(actx, c.Request)
	}
	observeUpstream(m.Provider, time.Since(start), err)
	if err != nil {
		switch {
		case f.state.Load() == began:
			rt.cut(c, resp, f)
			err = committed{err}
		case c.Stream && rt.client.Err() != nil:
			// The client went away while the upstream worked on the
			// answer, before its first token (a model thinking, or a
			// slow prompt): the upstream has taken the input, and
			// charges it. Charged as an answer cut short: the input, and
			// any output the provider reported.
			rt.cut(c, resp, f)
			err = committed{err}
		case ctx.Err() == nil && errors.Is(context.Cause(actx), errStall):
			err = fmt.Errorf("%w: %w", errStall, err)
		}
		return fmt.Errorf("%s: %w", m.ID, err)
	}
	normalize(resp)
	rt.served, rt.resp, rt.out, rt.first = c, resp, f.out, f.at
	// A whole answer, or a stream that sent no delta: committed now (an
	// answer that beat the stall timer by a hair is kept). A client gone
	// by then does not make it free: Run charges it all the same.
	if f.state.Swap(began) != began {
		if err := rt.sink.Begin(f.answer); err != nil {
			resp.Status = credits.StatusClientClosed
			return committed{err}
		}
		// A stream of Thoughts alone (reasoning redacted whole, and no
		// answer): they go out now, before the end.
		if err := f.release(); err != nil {
			resp.Status = credits.StatusClientClosed
			return committed{err}
		}
	}
	return nil
}

// cut keeps the answer of c that failed after its first token (or
// before it, when the client went away while the upstream worked), for Run
// to charge: resp is what the provider returned with its error (nil, or
// the usage the upstream reported before the end: see Provider), f the
// attempt's writer. The answer is Partial, with no finish reason; its
// Status says whose end it was: the client's (it went away, or the sink
// failed) or the upstream's.
func (rt *routed) cut(c *Call, resp *Response, f *firstToken) {
	if resp == nil {
		resp = &Response{}
	}
	resp.Partial, resp.FinishReason = true, ""
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	resp.Status = credits.StatusUpstreamError
	if f.failed || rt.client.Err() != nil {
		resp.Status = credits.StatusClientClosed
	}
	rt.served, rt.resp, rt.out, rt.first = c, resp, f.out, f.at
}
