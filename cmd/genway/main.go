// Command genway runs the Genway service locally and administers it.
//
//	genway serve                                  run the API on GENWAY_ADDR (default 127.0.0.1:8080)
//	genway keys create --account NAME [--credits N]
//	genway keys list [--account NAME]
//	genway keys revoke KEY_PREFIX_OR_ID
//	genway credits grant --account NAME --amount N
//	genway credits show --account NAME
//	genway credits ledger --account NAME
//	genway credits usage --account NAME [--from YYYY-MM-DD] [--to YYYY-MM-DD]
//	genway credits limit --account NAME --rpm N
//	genway credits reservations [--account NAME]
//	genway requests list [--account NAME] [--key ID] [--model M] [--status S] [--kind K]
//	genway requests show ID
//	genway jobs create --type T --model M --prompt P [--wait] [--output FILE]
//	genway images generate --model M --prompt P --output FILE [--n N] ...
//	genway speech --model M [--voice V] [--input TEXT] --output FILE|-
//
// With GENWAY_BACKEND=embedded (the default) everything lives in
// GENWAY_DATA_DIR (default ./.genway); the operator commands work while
// `genway serve` runs on the same directory. See docs/operations.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genway:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// pipedStdin is the process's stdin when text can come from it: nil for
// a terminal (a command would wait for typing no one announced).
func pipedStdin() io.Reader {
	if fi, err := os.Stdin.Stat(); err != nil || fi.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return os.Stdin
}

// usageError is a command-line mistake; main exits 2 for it.
type usageError string

func (e usageError) Error() string { return string(e) + " (see genway help)" }

const usage = `genway: the Genway generation gateway

Usage:
  genway serve                                    run the API (GENWAY_ADDR, default 127.0.0.1:8080)
  genway keys create --account NAME [--credits N] make a key; the key alone is the last line of output
  genway keys list [--account NAME]               list keys (prefixes and ids, never secrets)
  genway keys revoke KEY_PREFIX_OR_ID             revoke a key
  genway credits grant --account NAME --amount N [--create] [--note TEXT]  add credits (--create: a new account)
  genway credits show --account NAME             balance, held, available
  genway credits ledger --account NAME           the account's ledger
  genway credits usage --account NAME [--from DAY] [--to DAY]  chat tokens; job, image, speech credits per day
  genway credits limit --account NAME --rpm N    per-key requests per minute (0 default, -1 unlimited)
  genway credits reconcile [--days N]            settle final jobs whose hold the stream never settled,
                                                 release reservations never settled
  genway credits reservations [--account NAME]   open reservations: credits held by images and speech being made
  genway accounts list|create                     accounts: list, or make one (--account, --credits, --note)
  genway requests list [--account NAME] [--key ID] [--model M] [--status S] [--kind K] [--after CURSOR]
                                                  the records of requests, newest first: what each cost
  genway requests show ID                         one request's record, its charge line by line
  genway jobs create --type T --model M --prompt P [--wait] [--output FILE]  a job through the public API
  genway images generate --model M --prompt P --output FILE [--n N] [--size WxH] [--quality Q] [--format F]
                                                  images through the public API; with --n above 1 the
                                                  files are FILE with -1, -2, ... before the extension
  genway speech --model M [--voice V] [--format F] [--speed S] [--instructions T]
                [--input TEXT | --input-file F | stdin] --output FILE|-
                                                  speech through the public API, written as it streams
  genway webhooks show|url|rotate --account NAME  an account's webhook URL and signing secret
  genway webhooks deliveries|resend JOB_ID        a job's webhook deliveries; send it again
  genway aws init                                 create the AWS tables, queues and bucket (GENWAY_BACKEND=aws)
  genway version                                  the build's version

Every command and subcommand prints its usage with --help.

Remote mode: with GENWAY_URL (a deployment's base URL) and GENWAY_ADMIN_TOKEN set, keys, credits,
accounts, requests and webhooks go to that deployment's admin API; jobs create, images generate and speech
use GENWAY_URL and GENWAY_API_KEY.

Environment: GENWAY_DATA_DIR (./.genway), GENWAY_BACKEND (embedded|aws), GENWAY_DEV_KEY,
GENWAY_DEV_CREDITS (1000), GENWAY_CATALOG (a catalog JSON file), provider keys such as
OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY and their *_BASE_URL overrides.
`

const serveUsage = `Usage: genway serve

Runs the whole API on one address, with the embedded store (or AWS with GENWAY_BACKEND=aws),
the jobs worker and credits settlement in the same process. Configured by environment:
  GENWAY_ADDR         listen address (127.0.0.1:8080)
  GENWAY_DATA_DIR     embedded store, media files and admin socket (./.genway)
  GENWAY_DEV_KEY      the dev account's key (made and printed on first start if unset)
  GENWAY_WORKERS      concurrent job workers (2)
  GENWAY_MEDIA_POLL   delay between polls of a long-running media vendor (10s)
  GENWAY_WEBHOOK_ALLOW_PRIVATE  1: accept loopback/private webhook URLs (local development only)
  GENWAY_MEDIA_ALLOW_PRIVATE    1: fetch vendors' output files from loopback/private addresses (tests only)
  GENWAY_CATALOG      a catalog file of your own
and the providers' keys (OPENAI_API_KEY, GEMINI_API_KEY, ELEVENLABS_API_KEY, FAL_KEY, ...).
See docs/operations.md ("Configuration") for the whole list.
`

// version is the module version and VCS revision the binary was built
// from, as far as the build recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}

// run is the whole program: args without the program name, getenv for the
// environment, and the two output streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError("no command")
	}
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch args[0] {
	case "serve":
		if len(args) > 1 && isHelp(args[1]) {
			fmt.Fprint(stdout, serveUsage)
			return nil
		}
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "keys":
		return keysCmd(ctx, args[1:], getenv, stdout)
	case "credits":
		return creditsCmd(ctx, args[1:], getenv, stdout)
	case "accounts":
		return accountsCmd(ctx, args[1:], getenv, stdout)
	case "jobs":
		return jobsCmd(ctx, args[1:], getenv, stdout)
	case "images":
		return imagesCmd(ctx, args[1:], getenv, stdout)
	case "speech":
		return speechCmd(ctx, args[1:], getenv, pipedStdin(), stdout, stderr)
	case "webhooks":
		return webhooksCmd(ctx, args[1:], getenv, stdout)
	case "requests":
		return requestsCmd(ctx, args[1:], getenv, stdout)
	case "aws":
		return awsCmd(ctx, args[1:], getenv, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "genway", version())
		return nil
	}
	return usageError(fmt.Sprintf("unknown command %q", args[0]))
}
