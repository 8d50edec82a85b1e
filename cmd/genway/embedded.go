package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localmedia"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/webhooks"
)

// workerVisibility is how long a local worker owns a job before another may
// take it over; generations here take seconds.
const workerVisibility = 10 * time.Minute

// webhookSenders is how many webhook deliveries run at once; a receiver
// that hangs holds one of them for webhooks.Timeout, never a job worker.
const webhookSenders = 8

// webhookVisibility is how long a webhook message is leased: longer than
// an attempt (webhooks.Timeout and its store writes).
const webhookVisibility = time.Minute

// recordSweepEvery is how often genway serve deletes expired records from
// the embedded store (sooner while a sweep finds a full batch).
const recordSweepEvery = time.Minute

// openEmbedded opens the embedded backend in dir, creating it; its records
// are kept for records (GENWAY_RECORD_DAYS).
func openEmbedded(dir, baseURL string, workers int, records time.Duration) (*backend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	dbPath, mediaDir, secretPath, sock := embeddedPaths(dir)
	st, err := localstore.OpenWith(dbPath, localstore.Options{LockTimeout: 500 * time.Millisecond, RecordRetention: records})
	if errors.Is(err, localstore.ErrLocked) {
		return nil, fmt.Errorf("%s is in use by another genway serve; stop it or use another GENWAY_DATA_DIR", dbPath)
	}
	if err != nil {
		return nil, err
	}
	secret, err := localmedia.LoadOrCreateSecret(secretPath)
	if err != nil {
		st.Close()
		return nil, err
	}
	m := localmedia.New(mediaDir, baseURL, secret)
	return &backend{
		store: st, reserver: st, jobs: st, queue: st, media: m, files: m.Handler(), counter: ratelimit.NewMemory(),
		consume: func(ctx context.Context, process func(context.Context, string) error) error {
			return st.Consume(ctx, workers, workerVisibility, process)
		},
		settle: func(ctx context.Context, apply func(context.Context, credits.Change) error) error {
			return st.Feed(ctx, apply)
		},
		hooks: st, hookQueue: st,
		deliver: func(ctx context.Context, hooks *webhooks.Service) error {
			return st.ConsumeWebhooks(ctx, webhookSenders, webhookVisibility, hooks.Deliver)
		},
		adminSocket: sock,
		close:       st.Close,
		sweepRecords: func(ctx context.Context) error {
			return st.SweepRecordsLoop(ctx, recordSweepEvery)
		},
		expire: func(ctx context.Context, retention time.Duration, log *slog.Logger) error {
			// At start, then hourly: outputs live as long as on S3.
			t := time.NewTicker(time.Hour)
			defer t.Stop()
			for {
				files, n, err := m.Expire(retention)
				if err != nil {
					log.Error("media expiry", "err", err)
				} else if files > 0 {
					log.Info("media expired", "files", files, "bytes", n, "retention", retention.String())
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		},
	}, nil
}

// openOperator returns the operator commands for the configured backend.
// With GENWAY_URL (and GENWAY_ADMIN_TOKEN) they go to that deployment's
// admin API. Else, for the embedded backend it opens the store directly,
// or, if `genway serve` holds it, talks to the server over its admin
// socket; for GENWAY_BACKEND=aws it opens the tables.
func openOperator(ctx context.Context, getenv func(string) string) (admin.Operator, func() error, error) {
	cfg, err := app.LoadConfig(app.Serve, getenv)
	if err != nil {
		return nil, nil, err
	}
	if u := cfg.URL; u != "" {
		c, err := admin.Remote(u, cfg.AdminToken)
		if err != nil {
			return nil, nil, err
		}
		return c, func() error { return nil }, nil
	}
	if cfg.Backend == "aws" {
		be, err := openAWS(ctx, cfg, nil, false)
		if err != nil {
			return nil, nil, err
		}
		return &admin.Service{Store: be.store, Jobs: be.jobs}, be.close, nil
	}
	dir := cfg.DataDir
	dbPath, _, _, sock := embeddedPaths(dir)
	// Only genway serve makes a data directory: an operator command run
	// from another folder must not open a new, empty one whose keys the
	// running server never sees.
	if _, err := os.Stat(dbPath); errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(dir)
		return nil, nil, fmt.Errorf("no Genway data in %s (GENWAY_DATA_DIR, default ./.genway): run the command where genway serve runs, or set GENWAY_DATA_DIR to its data directory; genway serve makes it on first start", abs)
	}
	st, err := localstore.OpenTimeout(dbPath, 300*time.Millisecond)
	if err == nil {
		return &admin.Service{Store: st, Jobs: st}, st.Close, nil
	}
	if !errors.Is(err, localstore.ErrLocked) {
		return nil, nil, err
	}
	c, derr := admin.Dial(ctx, sock)
	if derr != nil {
		return nil, nil, fmt.Errorf("%s is locked by a running genway serve, and its admin socket does not answer: %w", dbPath, derr)
	}
	return c, func() error { return nil }, nil
}
