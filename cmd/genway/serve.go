package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/local/localmedia"
	"github.com/genway/genway/shared/metrics"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
	"github.com/genway/genway/shared/transport/console"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// backend is one way of keeping state: the embedded store or AWS.
type backend struct {
	store admin.Store // jobs are separate: see jobs
	// reserver holds the credits of synchronous generations (images,
	// speech, the chat completions of keys with a credit limit) before
	// their vendor is called: the store itself, so that both stores must
	// implement chat.Holds (credits.Reservations and records).
	reserver chat.Holds
	jobs     jobStore
	queue    jobs.Queue
	media    jobs.Media
	// files serves local media links; nil when media has its own URLs.
	files http.Handler
	// consume runs the worker loop until ctx ends; settle runs the job
	// change feed into credits settlement until ctx ends.
	consume func(ctx context.Context, process func(ctx context.Context, id string) error) error
	settle  func(ctx context.Context, apply func(context.Context, credits.Change) error) error
	// hooks keeps webhook configs and deliveries; hookQueue schedules
	// deliveries; deliver runs the webhook queue's consumer (apart from
	// the job workers) until ctx ends.
	hooks     webhooks.Store
	hookQueue webhooks.Queue
	deliver   func(ctx context.Context, hooks *webhooks.Service) error
	// lease is the worker's jobs.Worker.Lease: 0 where one worker holds a
	// message at a time, the worker timeout where deliveries can overlap.
	lease time.Duration
	// counter counts requests for the rate limiter.
	counter ratelimit.Counter
	// adminSocket is where the embedded backend serves operator commands.
	adminSocket string
	// expire deletes outputs older than retention until ctx ends; nil
	// where the store expires them itself (S3's lifecycle rule).
	expire func(ctx context.Context, retention time.Duration, log *slog.Logger) error
	// retention is how long the media store keeps an output (its S3
	// lifecycle rule); 0 where expire applies GENWAY_MEDIA_RETENTION.
	retention time.Duration
	// sweepRecords deletes expired records until ctx ends; nil where the
	// store expires them itself (DynamoDB's TTL).
	sweepRecords func(ctx context.Context) error
	close        func() error
}

// jobStore is a backend's jobs store: it also marks a deleted video
// (both stores are a jobs.DeleteStore).
type jobStore interface {
	jobs.Store
	jobs.DeleteStore
}

// consoleSessionFile is the console session secret's file in the data
// directory.
const consoleSessionFile = "console-session.key"

// consoleSessionKeys returns the console's session keys for the token v
// checks: from the secret in dir's consoleSessionFile (made, mode 0600,
// if there is none; made anew when renew, as for a new token).
func consoleSessionKeys(dir string, v *admin.Verifier, renew bool) (*admin.SessionKeys, error) {
	path := filepath.Join(dir, consoleSessionFile)
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

// serve runs the API until ctx is done.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usageError("serve takes no arguments; configure it with GENWAY_* variables")
	}
	cfg, err := app.LoadConfig(app.Serve, getenv)
	if err == nil {
		err = app.LoadCatalog(&cfg, getenv)
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	cat := cfg.Catalog
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: the address is in use (another genway serve?); set GENWAY_ADDR to another one, e.g. GENWAY_ADDR=127.0.0.1:8081: %w", cfg.Addr, err)
		}
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer ln.Close()
	baseURL := cfg.PublicURL
	if baseURL == "" {
		baseURL = "http://" + ln.Addr().String()
	}

	var be *backend
	if cfg.Backend == "aws" {
		be, err = openAWS(ctx, cfg, log, true)
	} else {
		be, err = openEmbedded(cfg.DataDir, baseURL, cfg.Workers, cfg.RecordRetention)
	}
	if err != nil {
		return err
	}
	defer be.close()

	op := &admin.Service{Store: be.store, Jobs: be.jobs, Log: log}
	if err := ensureDevAccount(ctx, op, cfg, stdout); err != nil {
		return err
	}
	// The operator token: GENWAY_ADMIN_TOKEN, or one made at first start
	// whose hash is kept in the data directory.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	verifier, madeToken, err := admin.LocalToken(cfg.AdminToken, filepath.Join(cfg.DataDir, "admin-token.sha256"))
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	// The console's sessions are signed with a random secret of their own
	// (mode 0600 in the data directory; never derived from the token's
	// hash), bound to the token, and made anew with a new token.
	sessionKeys, err := consoleSessionKeys(cfg.DataDir, verifier, madeToken != "")
	if err != nil {
		return err
	}

	vendors := vendors.Settings(cfg)
	providers, err := upstreams.New(cat, vendors, nil) // nil: a transport pooled for many concurrent upstream requests
	if err != nil {
		return fmt.Errorf("chat providers: %w", err)
	}
	// The records of chat requests are kept in memory and written (with
	// their usage and charges) every cfg.UsageFlush, off the request path;
	// the recorder is closed (its last records written) after the HTTP
	// server has shut down, before the store closes.
	usage := chat.NewBufferedRecorder(be.store, cfg.UsageFlush, log)
	defer func() {
		// On an early return, stop its goroutine: with a done context,
		// Close makes one flush attempt at most. After the Close below,
		// this one has nothing left to do.
		done, stop := context.WithCancel(context.Background())
		stop()
		usage.Close(done)
	}()
	// One router for chat, jobs and speech: its breakers and key rests are this
	// process's (GENWAY_ROUTE_* tune its policy).
	router := route.New(cfg.Route, log)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Log: log, Usage: usage, Balances: be.store, Holds: be.reserver, Router: router})
	svc := &jobs.Service{Store: be.jobs, Queue: be.queue, Media: be.media, Catalog: cat, Log: log, Configured: cat.ConfiguredFunc(cfg.Providers), Balances: be.store}
	media, err := upstreams.NewMedia(cat, vendors, nil)
	if err != nil {
		return fmt.Errorf("media providers: %w", err)
	}
	svc.Providers = media // a processing job is cancelled at its vendor
	// DELETE /v1/videos/{id}: the store marks the job deleted, after the
	// credits store settled it (see jobs.Service.Delete).
	svc.Credits = be.store
	svc.Deletes = be.jobs
	svc.Retention = cfg.MediaRetention // expires_at of a video
	if be.retention != 0 {
		svc.Retention = be.retention
	}
	// Webhooks: a job's end, seen by the change feed after its credits
	// settled, queues its delivery; the delivery consumer runs apart from
	// the job workers.
	hooks := &webhooks.Service{Store: be.hooks, Jobs: be.jobs, Queue: be.hookQueue, Render: httpapi.JobObject(svc),
		AllowPrivate: cfg.WebhookAllowPrivate, Log: log}
	svc.CheckWebhookURL = app.WebhookURLCheck(cfg)
	worker := &jobs.Worker{Store: be.jobs, Queue: be.queue, Media: be.media, Catalog: cat, Log: log, Lease: be.lease,
		Providers: media, PollInterval: cfg.MediaPoll, Router: router}
	imgs, err := imageService(be, cat, vendors, router, log)
	if err != nil {
		return err
	}
	voices, err := upstreams.NewSpeech(cat, vendors, nil)
	if err != nil {
		return fmt.Errorf("speech providers: %w", err)
	}
	speaker := &speech.Service{Catalog: cat, Providers: voices, Router: router, Credits: be.reserver, Records: be.store, Log: log}
	authn := auth.NewAuthenticator(be.store, cfg.AuthCacheTTL)
	if off := cfg.ClockOffset; off != 0 {
		log.Warn("GENWAY_TEST_CLOCK_OFFSET is set: keys are authenticated on a shifted clock (tests only)", "offset", off)
		authn.SetClock(func() time.Time { return time.Now().Add(off) })
	}

	limiter := ratelimit.New(be.counter, be.store, cfg.RateLimit)
	limiter.SetInFlight(ratelimit.NewInFlight(cfg.InFlightPerKey, cfg.InFlightPerAccount))
	bodies := httpapi.NewBodies(cfg.MaxTextBody, cfg.BodyMemory)
	adminCfg := httpapi.AdminConfig{Operator: op, Catalog: cat, Configured: cat.ConfiguredFunc(cfg.Providers), Verifier: verifier, Jobs: svc, Router: router, Webhooks: hooks, Log: log}
	cons, err := console.New(console.Config{Operator: op, Verifier: verifier, SessionKeys: sessionKeys, Sessions: be.store,
		Catalog: cat, Configured: cat.ConfiguredFunc(cfg.Providers), Log: log, JobService: svc, Chat: gw, Images: imgs, Speech: speaker, Router: router, Webhooks: hooks})
	if err != nil {
		return err
	}
	handler := apiHandler(apiDeps{hooks: hooks, cat: cat, configured: cat.ConfiguredFunc(cfg.Providers), log: log, auth: authn, limiter: limiter, bodies: bodies, jobs: svc, gw: gw, images: imgs, speech: speaker, credits: be.store, records: be.store, files: be.files,
		admin: adminCfg, console: cons, metrics: httpapi.Metrics(metrics.Default, verifier, log)})
	// Headers within 10 s, bodies within 30 s (httpapi.BodyTimeout), idle
	// keep-alive connections closed after cfg.IdleTimeout (30 s), at most
	// cfg.MaxConns connections at once and cfg.MaxConnsPerAddr from one client
	// address, idle ones closed first when a bound is near (connGate).
	// Nothing bounds how long an answer is written: streams last minutes.
	maxConns := fitConns(cfg.MaxConns, fdLimit(), log)
	gate := newConnGate(ln, maxConns, cfg.MaxConnsPerAddr)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: cfg.IdleTimeout, ConnState: gate.state}
	registerGauges(be, gate, bodies)

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
	var asrv *http.Server
	if be.adminSocket != "" {
		sock, err := listenAdmin(be.adminSocket)
		if err != nil {
			return err
		}
		defer os.Remove(be.adminSocket)
		socketCfg := adminCfg
		socketCfg.Verifier = nil // the socket's owner is the data directory's
		asrv = &http.Server{Handler: httpapi.AdminAPI(socketCfg), ReadHeaderTimeout: 10 * time.Second}
		goRun("admin socket", func() error { return ignoreClosed(asrv.Serve(sock)) })
	}
	goRun("worker", func() error { return be.consume(ctx, worker.Process) })
	goRun("reconciler", func() error { return reconcileLoop(ctx, op, log) })
	goRun("credits feed", func() error {
		return be.settle(ctx, func(ctx context.Context, c credits.Change) error {
			if err := credits.Apply(ctx, be.store, c); err != nil {
				return err
			}
			return hooks.Changed(ctx, c)
		})
	})
	goRun("webhooks", func() error { return be.deliver(ctx, hooks) })
	if be.expire != nil {
		goRun("media expiry", func() error { return be.expire(ctx, cfg.MediaRetention, log) })
	}
	if be.sweepRecords != nil {
		goRun("record sweep", func() error { return be.sweepRecords(ctx) })
	}
	goRun("http", func() error { return ignoreClosed(srv.Serve(gate)) })
	fmt.Fprintf(stdout, "genway: serving on %s/v1 (backend %s, data %s)\n", baseURL, cfg.Backend, cfg.DataDir)
	if madeToken != "" {
		fmt.Fprintf(stdout, "genway: operator token made (shown once; only its hash is kept): %s\n", madeToken)
		fmt.Fprintf(stdout, "genway: operator console, signed in: %s/console/signin?token=%s\n", baseURL, madeToken)
	} else {
		fmt.Fprintf(stdout, "genway: operator console: %s/console/ (sign in with the operator token)\n", baseURL)
	}
	log.Info("serving", "addr", ln.Addr().String(), "backend", cfg.Backend)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// Stop taking requests, let in-flight ones finish, then stop the
	// background loops; the store is closed (deferred) after all of them.
	shutdownCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	srv.Shutdown(shutdownCtx)
	if asrv != nil {
		asrv.Shutdown(shutdownCtx)
	}
	// Its own deadline: a slow shutdown of the server must not cost the
	// last usage sums their chance to be written.
	usageCtx, usageDone := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer usageDone()
	if uerr := usage.Close(usageCtx); uerr != nil {
		log.Error("chat usage not written at shutdown", "err", uerr)
		err = errors.Join(err, uerr)
	}
	cancel()
	wg.Wait()
	return err
}

// imageService returns the images service of POST /v1/images/generations:
// the configured image providers, the router, the store's credit
// reservations and the media store for url answers.
func imageService(be *backend, cat *catalog.Catalog, vendors upstreams.Settings, router *route.Router, log *slog.Logger) (*images.Service, error) {
	providers, err := upstreams.NewImages(cat, vendors, nil)
	if err != nil {
		return nil, fmt.Errorf("image providers: %w", err)
	}
	return &images.Service{Catalog: cat, Providers: providers, Router: router,
		Credits: be.reserver, Records: be.store, Media: be.media, Log: log}, nil
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
// if set, else a new key printed once.
func ensureDevAccount(ctx context.Context, op *admin.Service, cfg app.Config, stdout io.Writer) error {
	const dev = "dev"
	_, err := op.Account(ctx, dev)
	first := errors.Is(err, credits.ErrAccountNotFound)
	if err != nil && !first {
		return fmt.Errorf("dev account: %w", err)
	}
	if cfg.DevKey != "" {
		if _, err := op.ImportKey(ctx, dev, auth.Key(cfg.DevKey)); err != nil {
			return fmt.Errorf("GENWAY_DEV_KEY: %w", err)
		}
	}
	if !first {
		if cfg.DevKey == "" {
			fmt.Fprintln(stdout, "genway: dev account exists; its key was printed on first start (set GENWAY_DEV_KEY, or make one with: genway keys create --account dev)")
		} else {
			fmt.Fprintln(stdout, "genway: dev key from GENWAY_DEV_KEY")
		}
		return nil
	}
	if _, err := op.Store.Grant(ctx, dev, cfg.DevCredits, time.Now().Unix()); err != nil {
		return fmt.Errorf("dev account: %w", err)
	}
	if err := op.Store.SetRateLimit(ctx, dev, -1); err != nil {
		return fmt.Errorf("dev account: %w", err)
	}
	if cfg.DevKey != "" {
		fmt.Fprintf(stdout, "genway: dev account created with %s credits; key from GENWAY_DEV_KEY\n", cfg.DevCredits)
		return nil
	}
	key, _, err := op.CreateKey(ctx, dev, 0, auth.Controls{})
	if err != nil {
		return fmt.Errorf("dev key: %w", err)
	}
	fmt.Fprintf(stdout, "genway: dev account created with %s credits. Its API key (shown once):\n%s\n", cfg.DevCredits, key)
	return nil
}

// embeddedPaths are the files of the embedded backend in a data directory.
func embeddedPaths(dir string) (db, mediaDir, secret, socket string) {
	return filepath.Join(dir, "genway.db"), filepath.Join(dir, "media"), filepath.Join(dir, "signing.key"), filepath.Join(dir, "admin.sock")
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
func registerGauges(be *backend, gate *connGate, bodies *httpapi.Bodies) {
	metrics.Default.Gauge("genway_connections_open", "Client connections open.", nil, func() []metrics.Sample {
		return []metrics.Sample{{Value: float64(gate.openConns())}}
	})
	metrics.Default.Gauge("genway_body_memory_bytes", "Memory counted for the bodies of the requests in progress, and its bound (GENWAY_BODY_MEMORY).", []string{"kind"}, func() []metrics.Sample {
		held, bound := bodies.Held()
		return []metrics.Sample{{Labels: []string{"held"}, Value: float64(held)}, {Labels: []string{"bound"}, Value: float64(bound)}}
	})
	metrics.Default.Gauge("genway_credits", "Credits over every account: held by running jobs, and available.", []string{"kind"}, func() []metrics.Sample {
		accts, err := be.store.Accounts(context.Background())
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
	if d, ok := be.queue.(interface{ QueueDepth() (int, error) }); ok {
		metrics.Default.Gauge("genway_queue_depth", "Job messages waiting or being worked on (embedded queue).", nil, func() []metrics.Sample {
			n, err := d.QueueDepth()
			if err != nil {
				return nil
			}
			return []metrics.Sample{{Value: float64(n)}}
		})
	}
}
