package speech

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/route"
)

// Service speaks requests. Catalog, Providers and Router are required.
// It is safe for concurrent use.
//
// Credits: a request's price is its characters at its model's
// credits_per_1k_chars; with fallbacks, the highest of the candidates'
// prices is reserved (Credits.Reserve: one conditional write, so parallel
// requests never overdraw; 402 when the account's available credits are
// short), before any vendor is called. The reservation is settled once,
// when the request ends:
//
//   - the audio was streamed to its end: the price of the model that
//     answered is captured (the rest of the reservation released), counted
//     in the job usage as "speech" under that model;
//   - the client went away after audio reached it (its first write
//     succeeded): captured all the same. The vendor has taken (and bills)
//     the whole text by then, and a client that could stop reading just
//     before the end and pay nothing would get every speech free;
//   - anything else (a refusal, every candidate failing, the client gone
//     before any audio reached it, the vendor failing mid-stream):
//     released, nothing charged.
//
// A request that reached a vendor leaves a record (credits.Record, kind
// speech, its id the speech's: Answer.ID), written with the settlement
// (Reservations.SettleRecord; alone, Records, when nothing was held): the
// characters, the price per 1,000, the cost captured (the reservation's
// charge, known before the audio starts: Answer.Cost), and its status
// (completed; client_closed when the client left the audio; upstream_error
// when the vendor failed mid-stream, or failed when no vendor answered:
// both cost nothing).
//
// A reservation whose settlement fails (the store is down) is left to the
// reconciler, which releases it after credits.ReservationTTL.
type Service struct {
	Catalog *catalog.Catalog
	// Providers are the configured vendors by catalog provider name; a
	// model whose provider is not here is not configured.
	Providers map[string]Provider
	Router    *route.Router
	// Credits holds and settles a request's price (both stores, as
	// admin.Store); nil: speech is not charged (tests, a free catalog).
	Credits credits.Reservations
	// Records writes the record of a request that held nothing (a free
	// model, or no Credits); nil: such requests leave none.
	Records credits.RecordWriter
	Log     *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// candidate is one model that may serve a request.
type candidate struct {
	call     *Call
	provider Provider
	price    credits.Amount
}

// Lead returns r's model and the call it would make, validated: 404
// model_not_found for an unknown model or one not configured here, 400
// model_type_mismatch for a model of another type, and Prepare's 400s.
func (s *Service) Lead(r *Request) (*Call, error) {
	if r.Model == "" {
		return nil, apierr.Invalidf("model", "missing_field", "model is required: a speech model (GET /v1/models?type=speech).")
	}
	m, ok := s.Catalog.Model(r.Model)
	if !ok {
		return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q does not exist. GET /v1/models?type=speech lists the speech models.", r.Model)}
	}
	if m.Type != catalog.TypeSpeech {
		return nil, apierr.Invalidf("model", "model_type_mismatch", "model %q is a %s model, not a speech model.", m.ID, m.Type)
	}
	if s.Providers[m.Provider] == nil {
		return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q is not configured on this deployment; see GET /v1/models?type=speech.", m.ID)}
	}
	return Prepare(m, r)
}

// candidates returns the models that may serve r, whose lead makes
// lead: the lead, then each catalog fallback of it that is configured and
// takes r as it is (its own default voice where r names none), each
// priced by its own catalog price. A fallback the caller's API key may
// not use is skipped, not an error.
func (s *Service) candidates(ctx context.Context, lead *Call, r *Request) []candidate {
	out := []candidate{{call: lead, provider: s.Providers[lead.Model.Provider], price: lead.Price()}}
	for _, id := range lead.Model.Fallbacks {
		m, ok := s.Catalog.Model(id)
		if !ok || s.Providers[m.Provider] == nil || !auth.Allowed(ctx, m.ID) {
			continue
		}
		c, err := Prepare(m, r)
		if err != nil {
			continue
		}
		out = append(out, candidate{call: c, provider: s.Providers[m.Provider], price: c.Price()})
	}
	return out
}

// Speak speaks r for account into w: the one call a handler makes. It
// validates r (Lead), reserves its price, and routes it by the Router's
// policy over its candidates; the first audio byte of an attempt commits
// the answer (w.Begin names the model that answers) and from then on the
// audio is copied to w as it arrives, each read written and flushed. A
// failure before the first byte is classified by the adapter and may move
// on to another attempt or candidate, unseen by the client; one after it
// ends the speech. Credits are settled as the Service doc says.
//
// Errors: *apierr.Error for a request refused before any vendor call (a
// 400, 402 or 404); *route.AttemptsError when no candidate answered, or
// the answer failed after it began (Committed reports which), around the
// last attempt's error.
func (s *Service) Speak(ctx context.Context, account string, r *Request, w Writer) error {
	lead, err := s.Lead(r)
	if err != nil {
		return err
	}
	if err := auth.CheckModel(ctx, "model", lead.Model.ID); err != nil {
		return err
	}
	cands := s.candidates(ctx, lead, r)
	var hold credits.Amount
	for _, c := range cands {
		hold = max(hold, c.price)
	}
	if s.Credits == nil {
		hold = 0 // nothing is charged
	}
	start := s.now()
	id := credits.NewRecordID("speech_", start)
	if err := s.reserve(ctx, account, id, hold, lead.Model.ID, len(cands) > 1); err != nil {
		return err
	}
	targets := make([]route.Target, len(cands))
	for i, c := range cands {
		targets[i] = route.Target{Model: c.call.Model.ID, Provider: c.call.Model.Provider, Keys: route.PoolKeys(c.provider)}
	}
	rt := &routed{cands: cands, w: w, delivered: -1, buf: make([]byte, readSize), id: id, hold: hold}
	res, err := s.Router.Run(ctx, targets, classify, rt.attempt)
	served := -1
	rec := credits.Record{ID: id, Kind: credits.KindSpeech, Account: account, Key: auth.KeyID(ctx), ModelAsked: lead.Model.ID,
		Attempts: route.FormatAttempts(res.Attempts), Stream: true, Status: credits.StatusFailed, Units: int64(lead.Chars())}
	switch {
	case err == nil:
		served, rec.Status = res.Target, credits.StatusCompleted
	case rt.delivered >= 0 && (ctx.Err() != nil || errors.As(err, new(clientGone))):
		served, rec.Status = rt.delivered, credits.StatusClientClosed // the client left the audio: see the Service doc
	case rt.delivered >= 0:
		rec.Status, rec.Model = credits.StatusUpstreamError, cands[rt.delivered].call.Model.ID // the vendor failed mid-stream
	}
	if i := max(served, rt.delivered); i >= 0 {
		c := cands[i].call
		rec.Model, rec.Provider, rec.Units, rec.UnitPrice = c.Model.ID, c.Model.Provider, int64(c.Chars()), c.Model.Price.CreditsPer1KChars
	}
	if served >= 0 {
		rec.Cost = rt.cost(served)
	}
	rec.Partial = rec.Status == credits.StatusClientClosed || rec.Status == credits.StatusUpstreamError
	end := s.now()
	rec.LatencyMS, rec.At = end.Sub(start).Milliseconds(), end.UnixMilli()
	if !rt.first.IsZero() {
		rec.FirstTokenMS = rt.first.Sub(start).Milliseconds()
	}
	s.settle(ctx, account, id, hold, lead.Model.ID, cands, served, rec, rt.called)
	if served >= 0 {
		m := cands[served].call.Model
		metrics.Default.Add("genway_speech_chars_total", "Speech: characters spoken (charged), by model.", []string{"model"}, []string{m.ID}, float64(cands[served].call.Chars()))
	}
	if err != nil {
		return &route.AttemptsError{Attempts: res.Attempts, Err: err}
	}
	return nil
}

// Committed reports whether err, Speak's, came after the audio began: the
// client has had part of it, and the response can only be cut short.
func Committed(err error) bool {
	var c committed
	return errors.As(err, &c)
}

// reserve reserves hold credits for speech id of model on account (none
// for a free speech): a 402 insufficient_credits saying the price and
// what the account has when it is short.
func (s *Service) reserve(ctx context.Context, account, id string, hold credits.Amount, model string, fallbacks bool) error {
	if s.Credits == nil || hold <= 0 {
		return nil
	}
	return credits.ReserveFor(ctx, s.Credits, credits.Entry{ID: credits.ReservationID(id), Account: account, Kind: credits.Reservation,
		Amount: hold, JobType: JobType, Model: model, Key: auth.KeyID(ctx), At: s.now().Unix()}, "This speech", fallbacks)
}

// settle settles reservation id once: a capture of candidate served's
// price (the rest of hold released), or, with served -1, a release of
// hold (credits.SettleDetached: even when the client has gone); with the
// request's record r when a vendor was called (withRecord), or r alone
// when nothing was held.
func (s *Service) settle(ctx context.Context, account, id string, hold credits.Amount, lead string, cands []candidate, served int, r credits.Record, withRecord bool) {
	if s.Credits == nil || hold <= 0 {
		if withRecord && s.Records != nil {
			if err := credits.AddRecordDetached(ctx, s.Records, r); err != nil {
				s.log().ErrorContext(ctx, "speech: record not written", "record", id, "account", account, "err", err)
			}
		}
		return
	}
	e := credits.Entry{ID: credits.SettlementID(id), Account: account, Kind: credits.Release, Amount: hold,
		JobType: JobType, Model: lead, At: r.At / 1000}
	if served >= 0 {
		e.Kind, e.Amount, e.Hold, e.Model = credits.Capture, min(cands[served].price, hold), hold, cands[served].call.Model.ID
	}
	var err error
	switch {
	case !withRecord:
		err = credits.SettleDetached(ctx, s.Credits, e)
	default:
		if err = credits.SettleRecordDetached(ctx, s.Credits, e, r); errors.Is(err, credits.ErrInvalidRecord) {
			s.log().ErrorContext(ctx, "speech: record refused; settled without it", "record", id, "err", err)
			err = credits.SettleDetached(ctx, s.Credits, e)
		}
	}
	if err != nil {
		// The reconciler releases it after credits.ReservationTTL.
		s.log().ErrorContext(ctx, "speech: settlement failed; the reservation stays held until the reconciler releases it",
			"reservation", id, "account", account, "kind", e.Kind, "amount", e.Amount, "err", err)
	}
}

// Errors of attempts, for classify.
var (
	// errStall: no first audio byte before the attempt's deadline.
	errStall = errors.New("no audio in time")
	// errEmpty: the vendor answered 200 with no audio at all.
	errEmpty = errors.New("the vendor answered no audio")
)

// committed is a failure after the first audio byte reached the client.
type committed struct{ error }

func (e committed) Unwrap() error { return e.error }

// clientGone is a failed write to the client (after the answer began).
type clientGone struct{ error }

func (e clientGone) Unwrap() error { return e.error }

// dropped is a read of the audio that failed before its first byte
// with an error that carries no classification of its own.
type dropped struct{ error }

func (e dropped) Unwrap() error { return e.error }

// classify is the routing classification of an attempt's error: the
// adapter's (a route.VendorFailure, such as *chat.UpstreamError),
// a stall, an empty or dropped answer (Transient), a refusal of the
// request (*apierr.Error, content_policy) or a failure after the audio
// began (Final).
func classify(err error) route.Failure {
	var (
		c  committed
		vf route.VendorFailure
		ae *apierr.Error
	)
	switch {
	case errors.As(err, &c):
		return route.Failure{Class: route.Final, Reason: "after_content"}
	case errors.Is(err, errStall):
		return route.Failure{Class: route.Transient, Reason: "stall"}
	case errors.Is(err, errEmpty):
		return route.Failure{Class: route.Transient, Reason: "empty"}
	case errors.As(err, &ae):
		return route.Failure{Class: route.Final, Reason: ae.Code}
	case errors.As(err, &vf):
		return vf.Failure()
	case errors.As(err, new(dropped)):
		return route.Failure{Class: route.Transient, Reason: "dropped"}
	}
	return route.Failure{Class: route.Final}
}

// attempt states.
const (
	waiting int32 = iota // no audio yet
	began                // the first byte is here: the answer is committed
	stalled              // abandoned: no audio before the deadline
)

// readSize is how much audio one read takes (and one write sends).
const readSize = 32 << 10

// routed is one request's candidates as Run tries them.
type routed struct {
	cands []candidate
	w     Writer
	// delivered is the candidate whose audio reached the client (its
	// first write succeeded); -1 before.
	delivered int
	buf       []byte
	id        string         // the speech's id (its record's)
	hold      credits.Amount // reserved for it
	called    bool           // a vendor was called
	first     time.Time      // when the first audio byte reached the client
}

// cost is what candidate i's answer costs: its price, never more than was
// held (none held: nothing charged).
func (rt *routed) cost(i int) credits.Amount {
	return min(rt.cands[i].price, rt.hold)
}

// attempt is one attempt of Run on candidate try.Target: the vendor's
// audio, abandoned as a stall if no byte of it comes by try.FirstToken;
// from its first byte, the answer, copied to the client as it arrives.
func (rt *routed) attempt(ctx context.Context, try route.Try) error {
	c := rt.cands[try.Target]
	m := c.call.Model
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var state atomic.Int32
	if !try.FirstToken.IsZero() {
		t := time.AfterFunc(time.Until(try.FirstToken), func() {
			if state.CompareAndSwap(waiting, stalled) {
				cancel(errStall)
			}
		})
		defer t.Stop()
	}
	stall := func(err error) error {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), errStall) {
			err = fmt.Errorf("%w: %w", errStall, err)
		}
		return fmt.Errorf("%s: %w", m.ID, err)
	}
	rt.called = true
	body, err := c.provider.Speak(actx, c.call)
	if err != nil {
		return stall(err)
	}
	defer body.Close()
	n, rerr := read(body, rt.buf)
	if n == 0 {
		switch {
		case rerr == io.EOF:
			rerr = errEmpty
		case !errors.As(rerr, new(route.VendorFailure)):
			rerr = dropped{rerr}
		}
		return stall(rerr)
	}
	if !state.CompareAndSwap(waiting, began) {
		return stall(errStall)
	}
	attempts := append(try.Attempts[:len(try.Attempts):len(try.Attempts)], route.Attempt{Model: m.ID, Outcome: "200"})
	if err := rt.w.Begin(Answer{ID: rt.id, Model: m.ID, Format: c.call.Format, ContentType: ContentType(c.call.Format), Attempts: attempts,
		Cost: rt.cost(try.Target)}); err != nil {
		return committed{clientGone{err}}
	}
	rt.first = time.Now()
	for {
		if n > 0 {
			if _, err := rt.w.Write(rt.buf[:n]); err != nil {
				return committed{clientGone{err}}
			}
			rt.delivered = try.Target
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return committed{fmt.Errorf("%s: read audio: %w", m.ID, rerr)}
		}
		n, rerr = read(body, rt.buf)
	}
}

// read reads from r into buf until it has at least one byte or an
// error, as io.Reader allows reads of nothing: a reader that keeps
// reading nothing fails with io.ErrNoProgress.
func read(r io.Reader, buf []byte) (int, error) {
	for range 100 {
		n, err := r.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}
