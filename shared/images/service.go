package images

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/route"
)

// JobType is the job type of an image's credits: its reservation, and
// the charge counted in the account's job usage.
const JobType = catalog.TypeImage

// Service runs image requests. Its fields are set before first use; it is
// then safe for concurrent use.
type Service struct {
	Catalog *catalog.Catalog
	// Providers are the configured image providers by catalog provider
	// name (upstreams.NewImages builds only those); a model of another
	// provider is refused like an unknown model.
	Providers map[string]Provider
	Router    *route.Router
	Credits   credits.Reservations
	// Records writes the record of a request whose price is 0 (no
	// reservation to settle it with); nil: such requests leave none.
	Records credits.RecordWriter
	// Media stores the images of a request that asked for links
	// (response_format url), under images/<account>/.
	Media   jobs.Media
	LinkTTL time.Duration // how long a link works; 0: jobs.DefaultLinkTTL
	Log     *slog.Logger
	Now     func() time.Time // nil: time.Now
}

// Result is a request's answer.
type Result struct {
	ID      string // the request's id: its reservation's, and its stored images' names
	Created int64
	// Model is the model that made the images (a fallback's when one
	// answered); Attempts are the attempts made, the answering one last.
	Model    string
	Attempts []route.Attempt
	Data     []Datum
	Usage    *Usage
	// What was made: the size (the vendor's report, else the size asked
	// for), the quality asked for ("" if none) and the output format.
	Size, Quality, OutputFormat, Background string
	// Charged is the credits the request cost: its record's cost, what
	// the settlement captured.
	Charged credits.Amount

	images []Image // what the vendor made, until answer encodes or stores them
}

// Datum is one image of the answer: its bytes in base64 or our own link.
type Datum struct {
	B64JSON       string `json:"b64_json,omitempty"`
	URL           string `json:"url,omitempty"`
	RevisedPrompt string `json:"revised_prompt,omitempty"`
}

// candidate is a model that may serve a request, with the request
// resolved for it and its price.
type candidate struct {
	m      *catalog.Model
	prov   Provider
	params *Params
	price  credits.Amount // for params.N images
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

// Generate runs req for account: it validates req against its model (an
// *apierr.Error naming the field), reserves the highest price among the
// candidates that can serve it (the model, then its catalog fallbacks
// that take the same request; 402 when the account's available credits
// are short), routes it over them, stores the images for a url answer,
// and settles: the answering model's price for the images it made is
// captured and the rest released; on any failure all of it is released.
// The request's record (credits.Record, its id the answer's, Result.ID)
// is written with the settlement (Reservations.SettleRecord): the images
// made, the price per image, the cost captured; or, when a vendor was
// called and the request failed, status failed and no cost. A request
// refused before any vendor call leaves no record.
// A request that failed at its vendors is a *VendorError inside a
// *route.AttemptsError (the attempts made, as chat's and speech's).
func (s *Service) Generate(ctx context.Context, account string, req *Request) (*Result, error) {
	if err := Refused(req); err != nil {
		return nil, err
	}
	lead, err := s.model(req.Model)
	if err != nil {
		return nil, err
	}
	if err := auth.CheckModel(ctx, "model", lead.ID); err != nil {
		return nil, err
	}
	cands, rf, err := s.candidates(ctx, lead, req)
	if err != nil {
		return nil, err
	}
	var hold credits.Amount
	for _, c := range cands {
		hold = max(hold, c.price)
	}
	now := s.now()
	id := "img_" + strings.ToLower(credits.NewRecordID("", now))
	key := auth.KeyID(ctx)
	if hold > 0 {
		e := credits.Entry{ID: credits.ReservationID(id), Account: account, Kind: credits.Reservation, Amount: hold,
			JobID: id, JobType: JobType, Model: lead.ID, Key: key, At: now.Unix()}
		what := fmt.Sprintf("This request (%d image(s))", cands[0].params.N)
		if err := credits.ReserveFor(ctx, s.Credits, e, what, len(cands) > 1); err != nil {
			return nil, err
		}
	}
	rec := credits.Record{ID: id, Kind: credits.KindImage, Account: account, Key: key, ModelAsked: lead.ID, Status: credits.StatusFailed}
	res, served, called, err := s.run(ctx, cands)
	if err == nil {
		res.ID, res.Created, res.OutputFormat, res.Quality, res.Background = id, now.Unix(), served.params.Format, served.params.Quality, served.params.Background
		err = s.answer(ctx, account, id, rf, res)
	}
	if res != nil {
		rec.Attempts = route.FormatAttempts(res.Attempts)
	}
	if err != nil {
		if ae := (*route.AttemptsError)(nil); errors.As(err, &ae) {
			rec.Attempts = route.FormatAttempts(ae.Attempts)
		}
		end := s.now()
		rec.LatencyMS, rec.At = end.Sub(now).Milliseconds(), end.UnixMilli()
		s.settle(ctx, hold, credits.Entry{ID: credits.SettlementID(id), Account: account, Kind: credits.Release, Amount: hold,
			JobID: id, JobType: JobType, Model: lead.ID, At: end.Unix()}, rec, called)
		return nil, err
	}
	per := served.m.Price.ImageCost(served.params.Quality, 1)
	res.Charged = min(served.m.Price.ImageCost(served.params.Quality, len(res.Data)), hold)
	end := s.now()
	rec.Model, rec.Provider, rec.Units, rec.UnitPrice, rec.Cost, rec.Status = served.m.ID, served.m.Provider, int64(len(res.Data)), per, res.Charged, credits.StatusCompleted
	rec.LatencyMS, rec.At = end.Sub(now).Milliseconds(), end.UnixMilli()
	c := credits.Entry{ID: credits.SettlementID(id), Account: account, Kind: credits.Capture, Amount: res.Charged,
		JobID: id, JobType: JobType, Model: served.m.ID, At: end.Unix()}
	if c.Amount != hold {
		c.Hold = hold
	}
	s.settle(ctx, hold, c, rec, true)
	metrics.Default.Add("genway_images_total", "Images made, by the model that made them.", []string{"model"}, []string{served.m.ID}, float64(len(res.Data)))
	return res, nil
}

// model returns the image model id names, configured here: a 400 or 404
// naming model otherwise.
func (s *Service) model(id string) (*catalog.Model, error) {
	if id == "" {
		return nil, apierr.Invalidf("model", "missing_field", "model is required; see GET /v1/models?type=image.")
	}
	m, ok := s.Catalog.Model(id)
	if !ok || !s.configured(m) {
		return nil, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q does not exist or is not configured here; see GET /v1/models?type=image.", id)}
	}
	if m.Type != catalog.TypeImage {
		return nil, apierr.Invalidf("model", "model_type_mismatch", "The model %q makes %s, not images.", m.ID, m.Type)
	}
	return m, nil
}

func (s *Service) configured(m *catalog.Model) bool {
	_, ok := s.Providers[m.Provider]
	return ok
}

// candidates resolves req for lead (its errors are the request's) and for
// each of lead's catalog fallbacks that can serve it (the others are left
// out), each priced; rf is the response format (the request's, else the
// lead's default).
func (s *Service) candidates(ctx context.Context, lead *catalog.Model, req *Request) ([]candidate, string, error) {
	prov := s.Providers[lead.Provider]
	p, rf, err := Resolve(lead, featuresOf(prov), req)
	if err != nil {
		return nil, "", err
	}
	out := []candidate{{m: lead, prov: prov, params: p, price: lead.Price.ImageCost(p.Quality, p.N)}}
	for _, id := range lead.Fallbacks {
		f, ok := s.Catalog.Model(id)
		if !ok || f.Type != catalog.TypeImage || !s.configured(f) || !auth.Allowed(ctx, f.ID) {
			continue // the caller's key may not use it: skipped, not an error
		}
		fp := s.Providers[f.Provider]
		p, _, err := Resolve(f, featuresOf(fp), req)
		if err != nil {
			continue // a size, n, format or option it does not take
		}
		out = append(out, candidate{m: f, prov: fp, params: p, price: f.Price.ImageCost(p.Quality, p.N)})
	}
	return out, rf, nil
}

// run routes the request over cands and returns what the answering one
// made; called says a vendor was called (the request has a record).
func (s *Service) run(ctx context.Context, cands []candidate) (*Result, *candidate, bool, error) {
	targets := make([]route.Target, len(cands))
	for i, c := range cands {
		targets[i] = route.Target{Model: c.m.ID, Provider: c.m.Provider, Keys: route.PoolKeys(c.prov)}
	}
	var out *Output
	called := false
	rr, err := s.Router.Run(ctx, targets, classify, func(actx context.Context, try route.Try) error {
		c := &cands[try.Target]
		d := c.m.ImageDeadline()
		actx, cancel := context.WithTimeout(actx, d)
		defer cancel()
		called = true
		o, err := c.prov.Generate(actx, c.m, c.params)
		if err == nil {
			err = check(o, c.params)
		}
		if err != nil {
			if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
				err = &jobs.TransientError{Err: fmt.Errorf("no answer within %s: %w", d, context.DeadlineExceeded)}
			}
			return &VendorError{Provider: c.m.Provider, Model: c.m.ID, Err: err}
		}
		out = o
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, called, fmt.Errorf("images: %w", ctx.Err())
		}
		if ve := (*VendorError)(nil); errors.As(err, &ve) {
			return nil, nil, called, &route.AttemptsError{Attempts: rr.Attempts, Err: err}
		}
		return nil, nil, called, err
	}
	c := &cands[rr.Target]
	res := &Result{Model: c.m.ID, Attempts: rr.Attempts, Usage: out.Usage, Size: out.Size}
	if res.Size == "" {
		res.Size = c.params.Size
	}
	res.Data = make([]Datum, len(out.Images))
	for i, img := range out.Images {
		res.Data[i].RevisedPrompt = img.RevisedPrompt
	}
	res.images = out.Images
	return res, c, true, nil
}

// check refuses an output without images, with more than asked, with an
// empty one (the vendor answered garbage), or with one of a type an image
// may not have (jobs.MediaType: an SVG or HTML "image" is never stored or
// answered); it names each image's type as the allowed one.
func check(o *Output, p *Params) error {
	if o == nil || len(o.Images) == 0 || len(o.Images) > p.N {
		n := 0
		if o != nil {
			n = len(o.Images)
		}
		return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("The vendor answered %d images for %d asked.", n, p.N)}
	}
	for i, img := range o.Images {
		if len(img.Data) == 0 {
			return &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor answered an empty image."}
		}
		ct, ok := jobs.MediaType(catalog.TypeImage, img.ContentType)
		if !ok {
			return jobs.MediaTypeError(catalog.TypeImage, img.ContentType)
		}
		o.Images[i].ContentType = ct
	}
	return nil
}

// answer fills res.Data with the images: in base64, or (rf url) stored
// under images/<account>/<id>-<i>.<ext> and linked.
func (s *Service) answer(ctx context.Context, account, id, rf string, res *Result) error {
	ttl := s.LinkTTL
	if ttl == 0 {
		ttl = jobs.DefaultLinkTTL
	}
	for i, img := range res.images {
		if rf != FormatURL {
			res.Data[i].B64JSON = base64.StdEncoding.EncodeToString(img.Data)
			continue
		}
		key := fmt.Sprintf("images/%s/%s-%d.%s", account, id, i, jobs.Ext(img.ContentType))
		if err := s.Media.Put(ctx, key, img.ContentType, bytes.NewReader(img.Data), int64(len(img.Data))); err != nil {
			return fmt.Errorf("store image %s: %w", key, err)
		}
		u, err := s.Media.URL(ctx, key, ttl)
		if err != nil {
			return fmt.Errorf("link image %s: %w", key, err)
		}
		res.Data[i].URL = u
	}
	res.images = nil
	return nil
}

// settle writes the reservation's settlement e with the request's record
// r (credits.SettleRecordDetached), or r alone when nothing was reserved
// (hold 0: a free model); withRecord false (no vendor was called) settles e
// alone. A settlement that cannot be written is logged: the reservation
// stays held until the reconciler releases it (the account is not
// charged). A record the store refuses is logged, and the settlement
// written without it.
func (s *Service) settle(ctx context.Context, hold credits.Amount, e credits.Entry, r credits.Record, withRecord bool) {
	var err error
	switch {
	case hold == 0: // nothing was reserved: the record alone
		if withRecord && s.Records != nil {
			err = credits.AddRecordDetached(ctx, s.Records, r)
		}
	case !withRecord:
		err = credits.SettleDetached(ctx, s.Credits, e)
	default:
		if err = credits.SettleRecordDetached(ctx, s.Credits, e, r); errors.Is(err, credits.ErrInvalidRecord) {
			s.log().ErrorContext(ctx, "images: record refused; settled without it", "record", r.ID, "err", err)
			err = credits.SettleDetached(ctx, s.Credits, e)
		}
	}
	if err != nil {
		s.log().ErrorContext(ctx, "images: settlement not written; the reconciler will release the reservation",
			"reservation", e.ID, "account", e.Account, "kind", e.Kind, "amount", e.Amount, "err", err)
	}
}

// classify is the routing classification of an attempt's error: a client
// error (an *apierr.Error) is Final; a vendor's by jobs.Failure (a
// refused prompt and the vendor's 400s are Final, 429 RateLimited, 401,
// 402 and 403 KeyRefused, 404 Unsupported, 5xx and network faults
// Transient).
func classify(err error) route.Failure {
	if apierr.As(err) != nil {
		return route.Failure{Class: route.Final}
	}
	f, _ := jobs.Failure(err)
	return f
}
