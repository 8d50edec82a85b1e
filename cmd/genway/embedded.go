package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/app/localserver"
	"github.com/genway/genway/shared/local/localstore"
)

// embeddedPaths are the files of the embedded backend in a data directory.
func embeddedPaths(dir string) (db, mediaDir, secret, socket string) {
	return localserver.EmbeddedPaths(dir)
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
		p, err := localserver.OpenAWS(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return &admin.Service{Store: p.Store, Jobs: p.Jobs}, func() error { return nil }, nil
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
