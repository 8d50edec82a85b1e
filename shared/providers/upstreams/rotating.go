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
// behind the delegate wrap makes. Every rebuild shares one client: httpClient, or
// defaultClient's when it is nil.
func rotatingOf[T any](ctx context.Context, cat *catalog.Catalog, rot Rotation, httpClient *http.Client, defaultClient func() *http.Client,
	types []string, newT func(*catalog.Catalog, Settings, *http.Client) (map[string]T, error),
	wrap func(delegate[T]) T) (*Rotating[T], error) {
	if httpClient == nil {
		httpClient = defaultClient()
	}
	return newRotating(ctx, cat, rot, types, func(s Settings) (map[string]T, error) {
		return newT(cat, s, httpClient)
	}, wrap, time.Now)
}

// newRotating reads the keys of the catalog providers with models of one
// of types, builds the first generation with build and stands a delegate
// (made by wrap) for each of its providers; now is the clock.
func newRotating[T any](ctx context.Context, cat *catalog.Catalog, rot Rotation, types []string,
	build func(s Settings) (map[string]T, error),
	wrap func(delegate[T]) T, now func() time.Time) (*Rotating[T], error) {
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
	for name := range providers {
		r.delegates[name] = wrap(delegate[T]{r: r, name: name})
	}
	return r, nil
}

// Providers returns the providers by catalog provider name: delegates to
// the current ones, the same map on every call. A delegate's Unwrap is the
// current provider, whose optional interfaces (chat.FeatureProvider,
// chat.NativeProvider, ...; jobs.Poller, jobs.Canceller;
// images.FeatureProvider) the domain's Capabilities finds through it; and
// each is a route.Keyed whose KeyIDs are those of the current provider's
// key pool (none for a provider without one), so that a rotated pool
// takes effect.
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
// stands for, by name. A delegate has its domain's required methods, each
// a call to the current provider, and Unwrap, through which the domain's
// Capabilities (chat, jobs, images) finds the current provider's optional
// interfaces: a delegate has none of its own.
type delegate[T any] struct {
	r    *Rotating[T]
	name string
}

// current returns the provider the next call goes to (see
// Rotating.current).
func (d delegate[T]) current(ctx context.Context) T { return d.r.current(ctx, d.name) }

// Unwrap returns the current provider (chat.Unwrapper, jobs.Unwrapper,
// images.Unwrapper), reading the keys again first if they are older
// than the TTL, as a call does: what the caller then calls on it is made
// with the current keys.
func (d delegate[T]) Unwrap() T { return d.current(context.Background()) }

// KeyIDs returns the KeyIDs of the current provider's key pool, nil if it
// has none (route.Keyed). It reads the keys again first if they are older
// than the TTL, as a call does: the router picks from the pool the call
// will use.
func (d delegate[T]) KeyIDs() []string { return route.KeysOf(d.current(context.Background())) }

// wrapChat, wrapMedia, wrapImages and wrapSpeech are the delegates of a
// chat, job, image and speech provider.
func wrapChat(d delegate[chat.Provider]) chat.Provider       { return chatDelegate{d} }
func wrapMedia(d delegate[jobs.Provider]) jobs.Provider      { return mediaDelegate{d} }
func wrapImages(d delegate[images.Provider]) images.Provider { return imageDelegate{d} }
func wrapSpeech(d delegate[speech.Provider]) speech.Provider { return speechDelegate{d} }

// chatDelegate is the delegate of a chat provider.
type chatDelegate struct{ delegate[chat.Provider] }

var _ chat.Unwrapper = chatDelegate{}

func (d chatDelegate) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	return d.current(ctx).Complete(ctx, req)
}

func (d chatDelegate) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	return d.current(ctx).Stream(ctx, req, w)
}

// mediaDelegate is the delegate of a job provider.
type mediaDelegate struct{ delegate[jobs.Provider] }

var _ jobs.Unwrapper = mediaDelegate{}

func (d mediaDelegate) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	return d.current(ctx).Start(ctx, m, j)
}

// imageDelegate is the delegate of an image provider.
type imageDelegate struct{ delegate[images.Provider] }

var _ images.Unwrapper = imageDelegate{}

func (d imageDelegate) Generate(ctx context.Context, m *catalog.Model, p *images.Params) (*images.Output, error) {
	return d.current(ctx).Generate(ctx, m, p)
}

// speechDelegate is the delegate of a speech provider (speech providers
// have no optional interface).
type speechDelegate struct{ delegate[speech.Provider] }

func (d speechDelegate) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	return d.current(ctx).Speak(ctx, c)
}
