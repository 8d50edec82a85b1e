package localserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

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

// EmbeddedPaths returns the files of the embedded backend in the data
// directory dir: the store, the media folder, the media links' signing
// secret and the admin socket.
func EmbeddedPaths(dir string) (db, mediaDir, secret, socket string) {
	return filepath.Join(dir, "genway.db"), filepath.Join(dir, "media"), filepath.Join(dir, "signing.key"), filepath.Join(dir, "admin.sock")
}

// embedded is the embedded backend: one bbolt store (accounts, jobs, the
// job queue, webhooks, records) and outputs on local disk.
type embedded struct {
	st      *localstore.Store
	media   *localmedia.Media
	counter *ratelimit.Memory
	socket  string
	workers int
}

// openEmbedded opens the embedded backend in dir, creating it, for workers
// concurrent job workers; its records are kept for records
// (GENWAY_RECORD_DAYS), the limited keys' ones written behind at the pace
// of the other keys' usage, flush (GENWAY_USAGE_FLUSH), and its media
// links start with baseURL.
func openEmbedded(dir, baseURL string, workers int, records, flush time.Duration) (*embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	dbPath, mediaDir, secretPath, sock := EmbeddedPaths(dir)
	st, err := localstore.OpenWith(dbPath, localstore.Options{LockTimeout: 500 * time.Millisecond, RecordRetention: records, WriteBehind: flush})
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
	return &embedded{st: st, media: localmedia.New(mediaDir, baseURL, secret), counter: ratelimit.NewMemory(), socket: sock, workers: workers}, nil
}

func (e *embedded) parts() Parts {
	return Parts{Store: e.st, Holds: e.st.MemoryHolds(), Jobs: e.st, Queue: e.st, Media: e.media, Files: e.media.Handler(),
		Hooks: e.st, HookQueue: e.st, Counter: e.counter, AdminSocket: e.socket}
}

func (e *embedded) consume(ctx context.Context, process func(context.Context, string) error) error {
	return e.st.Consume(ctx, e.workers, workerVisibility, process)
}

func (e *embedded) settle(ctx context.Context, apply func(context.Context, credits.Change) error) error {
	return e.st.Feed(ctx, apply)
}

func (e *embedded) deliver(ctx context.Context, hooks *webhooks.Service) error {
	return e.st.ConsumeWebhooks(ctx, webhookSenders, webhookVisibility, hooks.Deliver)
}

func (e *embedded) sweepRecords(ctx context.Context) error {
	return e.st.SweepRecordsLoop(ctx, recordSweepEvery)
}

// expireMedia deletes the outputs older than retention at once, then
// hourly, until ctx ends: outputs live as long as on S3.
func (e *embedded) expireMedia(ctx context.Context, retention time.Duration, log *slog.Logger) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		files, n, err := e.media.Expire(retention)
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
}

func (e *embedded) Close() error { return e.st.Close() }
