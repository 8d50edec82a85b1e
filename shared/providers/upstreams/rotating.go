package upstreams

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// Rotation says where a Rotating reads its vendor keys, and how often.
type Rotation struct {
	// Settings is the configuration other than the keys (base URLs, the
	// switches, ...); the keys read through Key replace their variables
	// in Settings.Setup.Vars.
	Settings Settings
	// Key reads a vendor key by its variable's name (secrets.Lookup: the
	// SSM parameter named by OPENAI_API_KEY_PARAMETER, say). Its errors
	// must name what failed, never a value.
	Key func(ctx context.Context, name string) (string, error)
	// TTL is how often the keys are read again (on use, at most once per
	// TTL); <= 0: never, the keys read at start stay.
	TTL time.Duration
	// Log gets a failed re-read (the last key stays in use) and each
	// rebuild, naming variables, never values. nil: slog.Default().
	Log *slog.Logger
}

// refreshTimeout bounds one re-read of the keys, made on the request
// path of the call that found them stale.
const refreshTimeout = 5 * time.Second

// Rotating holds the providers built from the current vendor keys (as New,
// NewMedia, NewImages or NewSpeech builds them) and rebuilds them when a key changes, so that a
// rotated key reaches a warm Lambda container without a deploy. Its
// Providers are stable delegates that each call reaches the current
// provider through; a call that finds the keys older than the TTL first
// reads them again (one call at a time: the others go on with the current
// providers) and, if any changed, swaps in providers built with the new
// ones. It is safe for concurrent use.
//
// Which providers exist is settled at start: a vendor whose key appears or
// disappears later needs a new container (a deploy or a cold start).
type Rotating[T any] struct {
	rot       Rotation
	names     []string // the key variables read
	build     func(s Settings) (map[string]T, error)
	delegates map[string]T
	now       func() time.Time

	cur  atomic.Pointer[generation[T]]
	next atomic.Int64 // UnixNano of the next read of the keys
	mu   sync.Mutex   // held by the one refresh running
}

// generation is one set of keys and the providers built with them.
type generation[T any] struct {
	keys      map[string]string // key variable -> value
	providers map[string]T
}

// NewRotating returns New's chat providers behind a Rotating. It reads the
// key of every catalog provider with chat models through rot.Key, now: an
// error fails it, naming the variable (and by rot.Key's error, the
// parameter). httpClient may be nil (NewHTTPClient); every rebuild shares
// it, and its connections.
func NewRotating(ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client) (*Rotating[chat.Provider], error) {
	return rotatingOf(ctx, cat, rot, httpClient, NewHTTPClient, chatTypes, New, wrapChat)
}

// NewRotatingMedia is NewRotating for NewMedia's job providers
// (httpClient nil: NewMediaHTTPClient).
func NewRotatingMedia(ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client) (*Rotating[jobs.Provider], error) {
	return rotatingOf(ctx, cat, rot, httpClient, NewMediaHTTPClient, jobTypes, NewMedia, wrapMedia)
}

// NewRotatingImages is NewRotating for NewImages's image providers
// (httpClient nil: NewMediaHTTPClient).
func NewRotatingImages(ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client) (*Rotating[images.Provider], error) {
	return rotatingOf(ctx, cat, rot, httpClient, NewMediaHTTPClient, imageTypes, NewImages, wrapImages)
}

// NewRotatingSpeech is NewRotating for NewSpeech's speech providers
// (httpClient nil: NewHTTPClient, which hands audio on as it comes).
func NewRotatingSpeech(ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client) (*Rotating[speech.Provider], error) {
	return rotatingOf(ctx, cat, rot, httpClient, NewHTTPClient, speechTypes, NewSpeech, wrapSpeech)
}

// rotatingOf is a Rotating over the providers that newT (New, NewMedia,
// NewImages or NewSpeech) builds for the catalog's models of types, each
// wrapped by wrap. Every rebuild shares one client: httpClient, or
// defaultClient's when it is nil.
func rotatingOf[T any](ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client, defaultClient func() *http.Client,
	types []string, newT func(*catalog.Catalog, Settings, *http.Client) (map[string]T, error),
	wrap func(r *Rotating[T], name string, first T) T) (*Rotating[T], error) {
	if httpClient == nil {
		httpClient = defaultClient()
	}
	return newRotating(ctx, cat, rot, types, func(s Settings) (map[string]T, error) {
		return newT(cat, s, httpClient)
	}, wrap, time.Now)
}

// newRotating reads the keys of the catalog providers with models of one
// of types, builds the first generation with build and wraps each of its
// providers in a delegate with wrap; now is the clock.
func newRotating[T any](ctx context.Context, cat *catalog.Catalog, rot Rotation, types []string,
	build func(s Settings) (map[string]T, error),
	wrap func(r *Rotating[T], name string, first T) T, now func() time.Time) (*Rotating[T], error) {
	if rot.Log == nil {
		rot.Log = slog.Default()
	}
	r := &Rotating[T]{rot: rot, build: build, now: now}
	for i := range cat.Providers {
		if p := &cat.Providers[i]; p.KeyEnv != "" && serves(cat, p.Name, types) && !slices.Contains(r.names, p.KeyEnv) {
			r.names = append(r.names, p.KeyEnv)
		}
	}
	keys, errs := r.readKeys(ctx)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	providers, err := build(r.overlay(keys))
	if err != nil {
		return nil, err
	}
	r.cur.Store(&generation[T]{keys: keys, providers: providers})
	r.next.Store(r.now().Add(rot.TTL).UnixNano())
	r.delegates = make(map[string]T, len(providers))
	for name, p := range providers {
		r.delegates[name] = wrap(r, name, p)
	}
	return r, nil
}

// Providers returns the providers by catalog provider name: delegates to
// the current ones, the same map on every call. Each forwards exactly the
// optional interfaces its provider has (chat.FeatureProvider,
// chat.ImageBytesNeeder; jobs.Poller, jobs.Canceller;
// images.FeatureProvider), and each is a
// route.Keyed whose KeyIDs are those of the current provider's key pool
// (none for a provider without one), so that a rotated pool takes effect.
func (r *Rotating[T]) Providers() map[string]T { return r.delegates }

// readKeys reads every key variable through rot.Key, in parallel (a cold
// start waits for the slowest read, not their sum). errs[i] is the error
// of names[i], wrapped to name the variable.
func (r *Rotating[T]) readKeys(ctx context.Context) (map[string]string, []error) {
	vals := make([]string, len(r.names))
	errs := make([]error, len(r.names))
	var wg sync.WaitGroup
	for i, name := range r.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.rot.Key(ctx, name)
			if err != nil {
				err = fmt.Errorf("vendor key %s: %w", name, err)
			}
			vals[i], errs[i] = v, err
		}()
	}
	wg.Wait()
	keys := make(map[string]string, len(r.names))
	for i, name := range r.names {
		keys[name] = vals[i]
	}
	return keys, errs
}

// overlay is rot.Settings with keys in place of their variables.
func (r *Rotating[T]) overlay(keys map[string]string) Settings {
	s := r.rot.Settings
	s.Setup.Vars = maps.Clone(s.Setup.Vars)
	if s.Setup.Vars == nil {
		s.Setup.Vars = make(map[string]string, len(keys))
	}
	maps.Copy(s.Setup.Vars, keys)
	return s
}

// current returns the current generation's provider named name, reading
// the keys again first if they are older than the TTL and no other call
// is reading them.
func (r *Rotating[T]) current(ctx context.Context, name string) T {
	if r.rot.TTL > 0 && r.now().UnixNano() >= r.next.Load() && r.mu.TryLock() {
		if r.now().UnixNano() >= r.next.Load() { // no refresh ended since the first check
			r.refresh(ctx)
		}
		r.mu.Unlock()
	}
	return r.cur.Load().providers[name]
}

// peek returns the current generation's provider named name, as it is.
func (r *Rotating[T]) peek(name string) T { return r.cur.Load().providers[name] }

// refresh reads the keys again and, if any changed, builds and swaps in
// new providers. A key that cannot be read keeps its last value (logged);
// a rebuild that fails, or that would change which providers exist, keeps
// the current generation (logged). Either way the next read is a TTL
// after this one ended: a cache with the same TTL in front of the keys
// (secrets.Cache) has let go of them by then. r.mu is held.
func (r *Rotating[T]) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	old := r.cur.Load()
	keys, errs := r.readKeys(ctx)
	r.next.Store(r.now().Add(r.rot.TTL).UnixNano())
	var changed []string
	for i, name := range r.names {
		if errs[i] != nil {
			r.rot.Log.Error("vendor key re-read failed; keeping the last one", "err", errs[i])
			keys[name] = old.keys[name]
		} else if keys[name] != old.keys[name] {
			changed = append(changed, name)
		}
	}
	if len(changed) == 0 {
		return
	}
	providers, err := r.build(r.overlay(keys))
	if err != nil {
		r.rot.Log.Error("providers not rebuilt after a key change; keeping the current ones", "changed", changed, "err", err)
		return
	}
	if !slices.Equal(slices.Sorted(maps.Keys(providers)), slices.Sorted(maps.Keys(old.providers))) {
		r.rot.Log.Error("a key change would change which vendors are configured; that takes a new container, keeping the current providers", "changed", changed)
		return
	}
	r.cur.Store(&generation[T]{keys: keys, providers: providers})
	r.rot.Log.Info("vendor keys changed; providers rebuilt", "changed", changed)
}

// delegate is what every delegate of a Rotating is: the provider it
// stands for, by name.
type delegate[T any] struct {
	r    *Rotating[T]
	name string
}

// current returns the provider the next call goes to (see
// Rotating.current).
func (d delegate[T]) current(ctx context.Context) T { return d.r.current(ctx, d.name) }

// KeyIDs returns the KeyIDs of the current provider's key pool, nil if it
// has none (route.Keyed). It reads the keys again first if they are older
// than the TTL, as a call does: the router picks from the pool the call
// will use.
func (d delegate[T]) KeyIDs() []string { return keyIDs(d.current(context.Background())) }

// wrapChat returns the delegate of chat provider name. The gateway
// type-asserts the optional interfaces of a chat provider; the delegate
// has them all, each answered by the current provider, or, when it lacks
// one, as the gateway takes a provider without it: AllFeatures, no image
// bytes, no cache breakpoints, no token count (chat.ErrNoTokenCount).
func wrapChat(r *Rotating[chat.Provider], name string, _ chat.Provider) chat.Provider {
	return chatDelegate{delegate[chat.Provider]{r: r, name: name}}
}

type chatDelegate struct{ delegate[chat.Provider] }

var (
	_ chat.FeatureProvider  = chatDelegate{}
	_ chat.ImageBytesNeeder = chatDelegate{}
	_ chat.CacheProvider    = chatDelegate{}
	_ chat.TokenCounter     = chatDelegate{}
	_ chat.NativeProvider   = chatDelegate{}
)

func (d chatDelegate) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	return d.current(ctx).Complete(ctx, req)
}

func (d chatDelegate) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	return d.current(ctx).Stream(ctx, req, w)
}

// Features returns the current provider's features.
func (d chatDelegate) Features() chat.Features {
	if f, ok := d.r.peek(d.name).(chat.FeatureProvider); ok {
		return f.Features()
	}
	return chat.AllFeatures
}

// NeedsImageBytes reports whether the current provider needs image bytes.
func (d chatDelegate) NeedsImageBytes() bool {
	nb, ok := d.r.peek(d.name).(chat.ImageBytesNeeder)
	return ok && nb.NeedsImageBytes()
}

// CacheRules returns the current provider's prompt-cache rules for m.
func (d chatDelegate) CacheRules(m *catalog.Model) chat.CacheRules {
	if cp, ok := d.r.peek(d.name).(chat.CacheProvider); ok {
		return cp.CacheRules(m)
	}
	return chat.CacheRules{}
}

// CountTokens asks the current provider to count req's input tokens.
func (d chatDelegate) CountTokens(ctx context.Context, req *chat.Request) (int, error) {
	if tc, ok := d.current(ctx).(chat.TokenCounter); ok {
		return tc.CountTokens(ctx, req)
	}
	return 0, chat.ErrNoTokenCount
}

// Speaks reports whether the current provider speaks api natively
// (chat.NativeProvider); a provider that is not one speaks none.
func (d chatDelegate) Speaks(api string) bool {
	np, ok := d.r.peek(d.name).(chat.NativeProvider)
	return ok && np.Speaks(api)
}

// NativeStream relays a native answer from the current provider, which
// speaks the request's API (the gateway asked Speaks).
func (d chatDelegate) NativeStream(ctx context.Context, req *chat.Request, w chat.NativeWriter) (*chat.Response, error) {
	np, ok := d.current(ctx).(chat.NativeProvider)
	if !ok {
		return nil, errNotNative
	}
	return np.NativeStream(ctx, req, w)
}

// NativeComplete returns a whole native answer from the current provider.
func (d chatDelegate) NativeComplete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	np, ok := d.current(ctx).(chat.NativeProvider)
	if !ok {
		return nil, errNotNative
	}
	return np.NativeComplete(ctx, req)
}

// errNotNative is a delegate's native call to a provider that speaks no
// API natively (a rebuild cannot change that: the catalog says it).
var errNotNative = errors.New("upstreams: the provider speaks no API natively")

// wrapMedia returns the delegate of job provider name, with the optional
// interfaces first has (the worker and jobs.Service type-assert them).
func wrapMedia(r *Rotating[jobs.Provider], name string, first jobs.Provider) jobs.Provider {
	d := mediaDelegate{delegate[jobs.Provider]{r: r, name: name}}
	_, poller := first.(jobs.Poller)
	_, canceller := first.(jobs.Canceller)
	switch {
	case poller && canceller:
		return mediaPollerCanceller{d}
	case poller:
		return mediaPoller{d}
	case canceller:
		return mediaCanceller{d}
	}
	return d
}

type mediaDelegate struct{ delegate[jobs.Provider] }

func (d mediaDelegate) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	return d.current(ctx).Start(ctx, m, j)
}

// keyIDs returns p's KeyIDs if it is a route.Keyed, else nil.
func keyIDs(p any) []string {
	if k, ok := p.(route.Keyed); ok {
		return k.KeyIDs()
	}
	return nil
}

func (d mediaDelegate) poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	return d.current(ctx).(jobs.Poller).Poll(ctx, m, j)
}

func (d mediaDelegate) cancel(ctx context.Context, m *catalog.Model, j *jobs.Job) error {
	return d.current(ctx).(jobs.Canceller).Cancel(ctx, m, j)
}

type mediaPoller struct{ mediaDelegate }

func (d mediaPoller) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	return d.poll(ctx, m, j)
}

type mediaCanceller struct{ mediaDelegate }

func (d mediaCanceller) Cancel(ctx context.Context, m *catalog.Model, j *jobs.Job) error {
	return d.cancel(ctx, m, j)
}

type mediaPollerCanceller struct{ mediaDelegate }

func (d mediaPollerCanceller) Poll(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Result, error) {
	return d.poll(ctx, m, j)
}

func (d mediaPollerCanceller) Cancel(ctx context.Context, m *catalog.Model, j *jobs.Job) error {
	return d.cancel(ctx, m, j)
}

// wrapImages returns the delegate of image provider name, an
// images.FeatureProvider when first is one (images.Service type-asserts
// it).
func wrapImages(r *Rotating[images.Provider], name string, first images.Provider) images.Provider {
	d := imageDelegate{delegate[images.Provider]{r: r, name: name}}
	if _, ok := first.(images.FeatureProvider); ok {
		return imageFeatures{d}
	}
	return d
}

type imageDelegate struct{ delegate[images.Provider] }

func (d imageDelegate) Generate(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
	return d.current(ctx).Generate(ctx, m, p)
}

type imageFeatures struct{ imageDelegate }

func (d imageFeatures) Features() images.Features {
	return d.r.peek(d.name).(images.FeatureProvider).Features()
}

// wrapSpeech returns the delegate of speech provider name (speech
// providers have no optional interface).
func wrapSpeech(r *Rotating[speech.Provider], name string, _ speech.Provider) speech.Provider {
	return speechDelegate{delegate[speech.Provider]{r: r, name: name}}
}

type speechDelegate struct{ delegate[speech.Provider] }

func (d speechDelegate) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	return d.current(ctx).Speak(ctx, c)
}
