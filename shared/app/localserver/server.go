// Package localserver is the composition root of `genway serve`: Main builds
// every part of the local server from an app.Config (the store backend,
// the media, the queues, the catalog's providers, the router, the chat
// gateway, the jobs service and worker, images, speech, webhooks,
// authentication, limits, the HTTP handler with every route, the
// operator console and the background loops), Run serves until its
// context ends, and Close releases what New opened. The parts that the
// Lambda functions build too come from the same builders (package app and
// app/vendors), so that the two cannot drift.
//
// It is apart from package app, which every function imports for its
// configuration, so that only `genway serve` links the embedded store,
// the console and every vendor's adapter at once.
package localserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/app/vendors"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localmedia"
	"github.com/genway/genway/shared/logjson"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/transport/console"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// Store is a backend's store of accounts, keys, credits, records and
// reservations: both stores hold the credits of synchronous generations
// (images, speech) before their vendor is called
// (credits.Reservations).
type Store interface {
	admin.Store
	credits.Reservations
	chat.RecordStore
}

// JobStore is a backend's jobs store; it also marks a deleted video.
type JobStore interface {
	jobs.Store
	jobs.DeleteStore
}

// Parts are the state a backend keeps and the queues it runs.
type Parts struct {
	Store Store
	// Holds holds the chat completions of keys with a credit limit: the
	// embedded store's MemoryHolds (no commit on the request path), the
	// AWS store itself.
	Holds     chat.Holds
	Jobs      JobStore
	Queue     jobs.Queue
	Media     jobs.Media
	Hooks     webhooks.Store // webhook configs and deliveries
	HookQueue webhooks.Queue // schedules webhook deliveries
	Counter   ratelimit.Counter
	// Files serves local media links; nil when Media has its own URLs.
	Files http.Handler
	// Lease is the worker's jobs.Worker.Lease: 0 where one worker holds a
	// message at a time, the worker timeout where deliveries can overlap.
	Lease time.Duration
	// Retention is how long the media store keeps an output (its S3
	// lifecycle rule); 0 where the server expires outputs itself after
	// GENWAY_MEDIA_RETENTION.
	Retention time.Duration
	// AdminSocket is where the embedded backend serves operator commands
	// ("": nowhere).
	AdminSocket string
}

// backend is one way of keeping state: the embedded store or AWS. Its
// methods other than parts and Close run until ctx ends.
type backend interface {
	parts() Parts
	// consume runs the job workers, each job handled by process.
	consume(ctx context.Context, process func(ctx context.Context, id string) error) error
	// settle runs the jobs' change feed into apply.
	settle(ctx context.Context, apply func(context.Context, credits.Change) error) error
	// deliver runs the webhook queue's consumer (apart from the job
	// workers) into hooks.
	deliver(ctx context.Context, hooks *webhooks.Service) error
	// expireMedia deletes outputs older than retention; sweepRecords
	// deletes expired records (each returns at once where the store
	// expires them itself: S3's lifecycle rule, DynamoDB's TTL).
	expireMedia(ctx context.Context, retention time.Duration, log *slog.Logger) error
	sweepRecords(ctx context.Context) error
	Close() error
}

// Option configures New.
type Option func(*options)

type options struct {
	log    *slog.Logger
	events Events
}

// WithLogger sets the logger of every part (default: JSON on os.Stderr).
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// WithEvents sets how the AWS backend plays Lambda's event source
// mappings; GENWAY_BACKEND=aws needs it.
func WithEvents(ev Events) Option { return func(o *options) { o.events = ev } }

// DevAccount is what New did to the dev account.
type DevAccount struct {
	// Created is true if the account was made by this start (with
	// GENWAY_DEV_CREDITS credits and no rate limit).
	Created bool
	// Key is the key made for it on its first start without
	// GENWAY_DEV_KEY, to be shown once; "" otherwise.
	Key auth.Key
}

// Main is `genway serve`: every part, built by New from one app.Config.
type Main struct {
	// BaseURL is the server's base URL (GENWAY_PUBLIC_URL, else
	// http://<the listener's address>).
	BaseURL string
	// Dev is what New did to the dev account.
	Dev DevAccount
	// MadeToken is the operator token New made (shown once; only its
	// hash is kept), or "" if there was one.
	MadeToken string

	cfg     app.Config
	log     *slog.Logger
	ln      net.Listener
	be      backend
	parts   Parts
	op      *admin.Service
	usage   *chat.BufferedRecorder
	hooks   *webhooks.Service
	worker  *jobs.Worker
	srv     *http.Server
	gate    *connGate
	sock    net.Listener // the admin socket; nil if none
	asrv    *http.Server
	closed  bool
	usageUp bool // usage not yet closed
}

// New builds every part of `genway serve` from cfg, whose catalog must be
// loaded (app.LoadCatalog): it listens on cfg.Addr, opens the backend,
// makes the operator token on first start, builds the services and the
// HTTP handler, and last makes the dev account on first start. It serves nothing until Run.
// On error, what it opened is closed.
func New(ctx context.Context, cfg app.Config, opts ...Option) (_ *Main, err error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(logjson.New(os.Stderr))
	}
	if cfg.Catalog == nil {
		return nil, errors.New("server: the catalog is not loaded (app.LoadCatalog)")
	}
	m := &Main{cfg: cfg, log: o.log}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	log, cat := m.log, cfg.Catalog
	m.ln, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the address is in use (another genway serve?); set GENWAY_ADDR to another one, e.g. GENWAY_ADDR=127.0.0.1:8081: %w", cfg.Addr, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	m.BaseURL = cfg.PublicURL
	if m.BaseURL == "" {
		m.BaseURL = "http://" + m.ln.Addr().String()
	}

	if cfg.Backend == "aws" {
		m.be, err = openAWS(ctx, cfg, log, o.events, true)
	} else {
		m.be, err = openEmbedded(cfg.DataDir, m.BaseURL, cfg.Workers, cfg.RecordRetention, cfg.UsageFlush)
	}
	if err != nil {
		return nil, err
	}
	p := m.be.parts()
	m.parts = p

	m.op = &admin.Service{Store: p.Store, Jobs: p.Jobs, Log: log}
	// The operator token: GENWAY_ADMIN_TOKEN, or one made at first start
	// whose hash is kept in the data directory.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	verifier, madeToken, err := admin.LocalToken(cfg.AdminToken, filepath.Join(cfg.DataDir, "admin-token.sha256"))
	if err != nil {
		return nil, fmt.Errorf("operator token: %w", err)
	}
	m.MadeToken = madeToken
	// The console's sessions are signed with a random secret of their own
	// (mode 0600 in the data directory; never derived from the token's
	// hash), bound to the token, and made anew with a new token.
	sessionKeys, err := consoleSessionKeys(cfg.DataDir, verifier, madeToken != "")
	if err != nil {
		return nil, err
	}

	settings := vendors.Settings(cfg)
	providers, err := upstreams.New(cat, settings, nil) // nil: a transport pooled for many concurrent upstream requests
	if err != nil {
		return nil, fmt.Errorf("chat providers: %w", err)
	}
	media, err := upstreams.NewMedia(cat, settings, nil)
	if err != nil {
		return nil, fmt.Errorf("media providers: %w", err)
	}
	imageProviders, err := upstreams.NewImages(cat, settings, nil)
	if err != nil {
		return nil, fmt.Errorf("image providers: %w", err)
	}
	speechProviders, err := upstreams.NewSpeech(cat, settings, nil)
	if err != nil {
		return nil, fmt.Errorf("speech providers: %w", err)
	}
	// The records of chat requests are kept in memory and written (with
	// their usage and charges) every cfg.UsageFlush, off the request path;
	// the recorder is closed (its last records written) after the HTTP
	// server has shut down, before the store closes.
	m.usage, m.usageUp = chat.NewBufferedRecorder(p.Store, cfg.UsageFlush, log), true
	// One router for chat, jobs, images and speech: its breakers and key
	// rests are this process's (GENWAY_ROUTE_* tune its policy).
	router := app.Router(cfg, log)
	configured := cat.ConfiguredFunc(cfg.Providers)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Log: log, Usage: m.usage, Balances: p.Store, Holds: p.Holds, Router: router})
	retention := cfg.MediaRetention // expires_at of a video
	if p.Retention != 0 {
		retention = p.Retention
	}
	// DELETE /v1/videos/{id}: the store marks the job deleted (Deletes),
	// after the credits store settled it (Credits; see
	// jobs.Service.Delete). A processing job is cancelled at its vendor
	// (Providers).
	svc := &jobs.Service{Store: p.Jobs, Queue: p.Queue, Media: p.Media, Catalog: cat, Log: log, Configured: configured, Balances: p.Store,
		Providers: media, Credits: p.Store, Deletes: p.Jobs, Retention: retention, CheckWebhookURL: app.WebhookURLCheck(cfg)}
	// Webhooks: a job's end, seen by the change feed after its credits
	// settled (app.Settle), queues its delivery, whose event's data is
	// the job as GET /v1/jobs/{id} shows it; the delivery consumer runs
	// apart from the job workers.
	m.hooks = app.Webhooks(cfg, p.Hooks, p.Jobs, p.HookQueue, httpapi.JobObject(svc), log)
	m.worker = app.Worker(cfg, p.Jobs, p.Queue, p.Media, media, router, p.Lease, log)
	imgs := vendors.Images(cfg, imageProviders, router, p.Store, p.Media, log)
	speaker := vendors.Speech(cfg, speechProviders, router, p.Store, log)
	authn := app.Authenticator(cfg, p.Store)
	if off := cfg.ClockOffset; off != 0 {
		log.Warn("GENWAY_TEST_CLOCK_OFFSET is set: keys are authenticated on a shifted clock (tests only)", "offset", off)
		authn.SetClock(func() time.Time { return time.Now().Add(off) })
	}
	limiter := app.Limiter(cfg, p.Counter, p.Store)
	limiter.SetInFlight(app.InFlight(cfg))
	bodies := httpapi.NewBodies(cfg.MaxTextBody, cfg.BodyMemory)
	adminCfg := httpapi.AdminConfig{Operator: m.op, Catalog: cat, Configured: configured, Verifier: verifier, Jobs: svc, Router: router, Webhooks: m.hooks, Log: log}
	cons, err := console.New(console.Config{Operator: m.op, Verifier: verifier, SessionKeys: sessionKeys, Sessions: p.Store,
		Catalog: cat, Configured: configured, Log: log, JobService: svc, Chat: gw, Images: imgs, Speech: speaker, Router: router, Webhooks: m.hooks})
	if err != nil {
		return nil, err
	}
	handler := apiHandler(apiDeps{hooks: m.hooks, cat: cat, configured: configured, log: log, auth: authn, limiter: limiter, bodies: bodies, jobs: svc, gw: gw, images: imgs, speech: speaker, credits: p.Store, records: p.Store, files: p.Files,
		admin: adminCfg, console: cons, metrics: httpapi.Metrics(metrics.Default, verifier, log)})
	// Headers within 10 s, bodies within 30 s (httpapi.BodyTimeout), idle
	// keep-alive connections closed after cfg.IdleTimeout (30 s), at most
	// cfg.MaxConns connections at once and cfg.MaxConnsPerAddr from one client
	// address, idle ones closed first when a bound is near (connGate).
	// Nothing bounds how long an answer is written: streams last minutes.
	m.gate = newConnGate(m.ln, fitConns(cfg.MaxConns, fdLimit(), log), cfg.MaxConnsPerAddr)
	m.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: cfg.IdleTimeout, ConnState: m.gate.state}
	registerGauges(p, m.gate, bodies)
	if p.AdminSocket != "" {
		if m.sock, err = listenAdmin(p.AdminSocket); err != nil {
			return nil, err
		}
		socketCfg := adminCfg
		socketCfg.Verifier = nil // the socket's owner is the data directory's
		m.asrv = &http.Server{Handler: httpapi.AdminAPI(socketCfg), ReadHeaderTimeout: 10 * time.Second}
	}
	// Last, so that a key made here is returned to be shown: nothing
	// after it fails.
	if m.Dev, err = ensureDevAccount(ctx, m.op, cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// Run serves until ctx ends or a part fails: the HTTP server, the admin
// socket, the job workers, the change feed into credits settlement and
// webhooks, the webhook deliveries, the reconciler and the backend's
// upkeep. Then it stops taking requests, lets those in progress finish
// (10 s at most), writes the last chat records and stops the loops. It
// returns the first part's failure, if any, with a failure to write the
// last records. Run is called once.
func (m *Main) Run(ctx context.Context) (err error) {
	log, cfg := m.log, m.cfg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8) // one per background loop at most
	goRun := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if m.asrv != nil {
		goRun("admin socket", func() error { return ignoreClosed(m.asrv.Serve(m.sock)) })
	}
	goRun("worker", func() error { return m.be.consume(ctx, m.worker.Process) })
	goRun("reconciler", func() error { return reconcileLoop(ctx, m.op, log) })
	settle := app.Settle(m.parts.Store, m.hooks)
	goRun("credits feed", func() error { return m.be.settle(ctx, settle) })
	goRun("webhooks", func() error { return m.be.deliver(ctx, m.hooks) })
	goRun("media expiry", func() error { return m.be.expireMedia(ctx, cfg.MediaRetention, log) })
	goRun("record sweep", func() error { return m.be.sweepRecords(ctx) })
	goRun("http", func() error { return ignoreClosed(m.srv.Serve(m.gate)) })
	log.Info("serving", "addr", m.ln.Addr().String(), "backend", cfg.Backend)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// Stop taking requests, let in-flight ones finish, then stop the
	// background loops; the store is closed (Close) after all of them.
	shutdownCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	m.srv.Shutdown(shutdownCtx)
	if m.asrv != nil {
		m.asrv.Shutdown(shutdownCtx)
	}
	// Its own deadline: a slow shutdown of the server must not cost the
	// last usage sums their chance to be written.
	usageCtx, usageDone := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer usageDone()
	m.usageUp = false
	if uerr := m.usage.Close(usageCtx); uerr != nil {
		log.Error("chat usage not written at shutdown", "err", uerr)
		err = errors.Join(err, uerr)
	}
	cancel()
	wg.Wait()
	return err
}

// Close releases what New opened: the listeners, the admin socket's
// file, the chat recorder (if Run did not close it: with one write
// attempt at most) and the backend's store. Call it once Run has
// returned, or instead of Run.
func (m *Main) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.sock != nil {
		m.sock.Close()
		os.Remove(m.parts.AdminSocket)
	}
	if m.usage != nil && m.usageUp {
		// Stop its goroutine: with a done context, Close makes one flush
		// attempt at most.
		done, stop := context.WithCancel(context.Background())
		stop()
		m.usage.Close(done)
	}
	var err error
	if m.be != nil {
		err = m.be.Close()
	}
	if m.gate != nil {
		m.gate.Close()
	} else if m.ln != nil {
		m.ln.Close()
	}
	return err
}

// ConsoleSessionFile is the console session secret's file in the data
// directory.
const ConsoleSessionFile = "console-session.key"

// consoleSessionKeys returns the console's session keys for the token v
// checks: from the secret in dir's ConsoleSessionFile (made, mode 0600,
// if there is none; made anew when renew, as for a new token).
func consoleSessionKeys(dir string, v *admin.Verifier, renew bool) (*admin.SessionKeys, error) {
	path := filepath.Join(dir, ConsoleSessionFile)
	if renew {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("console session secret: %w", err)
		}
	}
	secret, err := localmedia.LoadOrCreateSecret(path)
	if err != nil {
		return nil, fmt.Errorf("console session secret: %w", err)
	}
	return admin.NewSessionKeys(v, secret)
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// listenAdmin listens on the unix socket at path, replacing a stale socket
// left by a killed server (the embedded store's file lock guarantees no
// other server is live on this data directory).
func listenAdmin(path string) (net.Listener, error) {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// ensureDevAccount makes the dev account on first start (with
// GENWAY_DEV_CREDITS credits and no rate limit) and its key: GENWAY_DEV_KEY
// if set, else a new key, returned to be shown once.
func ensureDevAccount(ctx context.Context, op *admin.Service, cfg app.Config) (DevAccount, error) {
	const dev = "dev"
	_, err := op.Account(ctx, dev)
	first := errors.Is(err, credits.ErrAccountNotFound)
	if err != nil && !first {
		return DevAccount{}, fmt.Errorf("dev account: %w", err)
	}
	if cfg.DevKey != "" {
		if _, err := op.ImportKey(ctx, dev, auth.Key(cfg.DevKey)); err != nil {
			return DevAccount{}, fmt.Errorf("GENWAY_DEV_KEY: %w", err)
		}
	}
	if !first {
		return DevAccount{}, nil
	}
	if _, err := op.Store.Grant(ctx, dev, cfg.DevCredits, time.Now().Unix()); err != nil {
		return DevAccount{}, fmt.Errorf("dev account: %w", err)
	}
	if err := op.Store.SetRateLimit(ctx, dev, -1); err != nil {
		return DevAccount{}, fmt.Errorf("dev account: %w", err)
	}
	if cfg.DevKey != "" {
		return DevAccount{Created: true}, nil
	}
	key, _, err := op.CreateKey(ctx, dev, 0, auth.Controls{})
	if err != nil {
		return DevAccount{}, fmt.Errorf("dev key: %w", err)
	}
	return DevAccount{Created: true, Key: key}, nil
}

// reconcileEvery is how often genway serve settles final jobs whose
// settlement the feed missed, and releases stale reservations (see
// jobs.Reconcile).
const reconcileEvery = time.Hour

// reconcileLoop runs the reconciler over the last week's jobs every
// reconcileEvery until ctx is done; a failed run is logged and retried at
// the next tick.
func reconcileLoop(ctx context.Context, op *admin.Service, log *slog.Logger) error {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		res, err := op.Reconcile(admin.WithActor(ctx, "reconciler"), 7)
		switch {
		case err != nil:
			log.Error("reconcile failed", "err", err)
		case res.Settled > 0 || res.Released > 0:
			log.Warn("reconciler settled jobs the feed had missed, or released stale reservations", "checked", res.Checked, "settled", res.Settled,
				"reservations", res.Reservations, "released", res.Released)
		}
	}
}

// registerGauges adds the gauges read at each scrape of /metrics: credits
// held and available over every account, the connections open, the
// memory held by request bodies and its bound, and, on the embedded
// backend, the jobs queue's depth.
func registerGauges(p Parts, gate *connGate, bodies *httpapi.Bodies) {
	metrics.Default.Gauge("genway_connections_open", "Client connections open.", nil, func() []metrics.Sample {
		return []metrics.Sample{{Value: float64(gate.openConns())}}
	})
	metrics.Default.Gauge("genway_body_memory_bytes", "Memory counted for the bodies of the requests in progress, and its bound (GENWAY_BODY_MEMORY).", []string{"kind"}, func() []metrics.Sample {
		held, bound := bodies.Held()
		return []metrics.Sample{{Labels: []string{"held"}, Value: float64(held)}, {Labels: []string{"bound"}, Value: float64(bound)}}
	})
	metrics.Default.Gauge("genway_credits", "Credits over every account: held by running jobs, and available.", []string{"kind"}, func() []metrics.Sample {
		accts, err := p.Store.Accounts(context.Background())
		if err != nil {
			return nil
		}
		// Summed exactly (in micro-credits, past int64 if need be), then
		// made the float of the exposition format once.
		var held, avail big.Int
		for _, a := range accts {
			held.Add(&held, big.NewInt(int64(a.Held)))
			avail.Add(&avail, big.NewInt(int64(a.Available)))
		}
		inCredits := func(micro *big.Int) float64 {
			f, _ := new(big.Rat).SetFrac(micro, big.NewInt(int64(credits.Credit))).Float64()
			return f
		}
		return []metrics.Sample{{Labels: []string{"held"}, Value: inCredits(&held)}, {Labels: []string{"available"}, Value: inCredits(&avail)}}
	})
	if d, ok := p.Queue.(interface{ QueueDepth() (int, error) }); ok {
		metrics.Default.Gauge("genway_queue_depth", "Job messages waiting or being worked on (embedded queue).", nil, func() []metrics.Sample {
			n, err := d.QueueDepth()
			if err != nil {
				return nil
			}
			return []metrics.Sample{{Value: float64(n)}}
		})
	}
}
