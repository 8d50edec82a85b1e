package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/app/localserver"
	"github.com/genway/genway/shared/logjson"
)

// The data directory's files and the AWS mode's restart timing, as
// server defines them (the tests of genway serve name them).
const (
	consoleSessionFile   = localserver.ConsoleSessionFile
	streamCheckpointFile = localserver.StreamCheckpointFile
	localPollWait        = localserver.LocalPollWait
	restartQuiet         = localserver.RestartQuiet
)

// serve runs the API until ctx is done: the configuration, then
// localserver.Main (every part built from it), and what the command line
// shows (the dev key and the operator token on first start, the
// addresses); the log goes to stderr as JSON.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
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
	m, err := localserver.New(ctx, cfg, localserver.WithLogger(slog.New(logjson.New(stderr))), localserver.WithEvents(lambdaEvents()))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	printDev(stdout, cfg, m.Dev)
	baseURL := m.BaseURL
	fmt.Fprintf(stdout, "genway: serving on %s/v1 (backend %s, data %s)\n", baseURL, cfg.Backend, cfg.DataDir)
	if t := m.MadeToken; t != "" {
		fmt.Fprintf(stdout, "genway: operator token made (shown once; only its hash is kept): %s\n", t)
		fmt.Fprintf(stdout, "genway: operator console, signed in: %s/console/signin?token=%s\n", baseURL, t)
	} else {
		fmt.Fprintf(stdout, "genway: operator console: %s/console/ (sign in with the operator token)\n", baseURL)
	}
	return m.Run(ctx)
}

// printDev tells what the start did to the dev account: made with its
// credits and a key shown once (or GENWAY_DEV_KEY), or found.
func printDev(stdout io.Writer, cfg app.Config, dev localserver.DevAccount) {
	switch {
	case !dev.Created && cfg.DevKey == "":
		fmt.Fprintln(stdout, "genway: dev account exists; its key was printed on first start (set GENWAY_DEV_KEY, or make one with: genway keys create --account dev)")
	case !dev.Created:
		fmt.Fprintln(stdout, "genway: dev key from GENWAY_DEV_KEY")
	case cfg.DevKey != "":
		fmt.Fprintf(stdout, "genway: dev account created with %s credits; key from GENWAY_DEV_KEY\n", cfg.DevCredits)
	default:
		fmt.Fprintf(stdout, "genway: dev account created with %s credits. Its API key (shown once):\n%s\n", cfg.DevCredits, dev.Key)
	}
}
