package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// amountFlag is a flag of credits: a decimal number, exact to 6 places
// (--credits 0.25), read with credits.ParseAmount.
type amountFlag credits.Amount

func (a *amountFlag) String() string { return credits.Amount(*a).String() }

func (a *amountFlag) Set(s string) error {
	n, err := credits.ParseAmount(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*a = amountFlag(n)
	return nil
}

// amountVar defines a flag of credits on fs.
func amountVar(fs *flag.FlagSet, name, usage string) *credits.Amount {
	var a credits.Amount
	fs.Var((*amountFlag)(&a), name, usage)
	return &a
}

// withOperator opens the operator backend, runs fn and closes it.
func withOperator(ctx context.Context, getenv func(string) string, fn func(admin.Operator) error) error {
	op, closeFn, err := openOperator(ctx, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	return fn(op)
}

// newFlags returns a flag set that reports mistakes as usage errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// errHelp is returned once a --help has been answered; run turns it into
// success (exit status 0).
var errHelp = errors.New("help shown")

// parse parses args into fs; -h or --help prints the command's flags to
// stdout and returns errHelp.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: genway %s [flags]\n\nFlags:\n", fs.Name())
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return errHelp
		}
		return usageError(fmt.Sprintf("%s: %v", fs.Name(), err))
	}
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

const keysUsage = `Usage:
  genway keys create --account NAME [--credits N] [--name LABEL] [--models PATTERNS]
                     [--expires 30d|RFC3339] [--credit-limit N [--reset daily|weekly|monthly]]
                     [--jobs account|own]
                                                   make a key (and the account); the key alone is the last line
  genway keys update KEY_PREFIX_OR_ID [--name LABEL] [--models PATTERNS] [--expires 30d|RFC3339|never]
                     [--credit-limit N|none] [--reset none|daily|weekly|monthly] [--jobs account|own]
                                                   change a key's controls without re-issuing it
  genway keys list [--account NAME]                list keys: ids and prefixes (never secrets), name,
                                                   models, jobs, spent/limit (reset, period), expiry
  genway keys revoke KEY_PREFIX_OR_ID              revoke a key: its id, its 12-character prefix
                                                   (sk_live_XXXX, as keys list shows it), or the whole key

  --models takes comma-separated patterns over model ids, * matching anything
  ("synthetic/*,openai/gpt-4o-mini,elevenlabs-*"; "*" or "" for every model).
  --expires takes a duration from now (30d, 12h, 90m) or a time (2026-12-31T23:59:59Z, 2026-12-31).
  --credit-limit is the most credits the key may spend in total (jobs, images, speech, priced chat);
  with --reset, in each UTC day, ISO week (from Monday) or calendar month instead: what it spent
  counts from 0 again when a new one starts. A reset needs a credit limit; --credit-limit none
  removes the reset too.
  --jobs own limits the key to the jobs it creates: get, list, cancel, delete and /v1/videos
  answer 404 for the account's other jobs; account (the default) shows it every job of the account.
`

const creditsUsage = `Usage:
  genway credits grant --account NAME --amount N [--create]  add credits (--create makes a new account)
  genway credits show --account NAME                        balance, held, available
  genway credits ledger --account NAME                      the account's ledger
  genway credits usage --account NAME [--from DAY] [--to DAY]  chat tokens; job, image, speech credits per day
  genway credits limit --account NAME --rpm N               per-key requests per minute (0 default, -1 unlimited)
  genway credits reconcile [--days N]                       settle final jobs whose hold was never settled (last N days, 7);
                                                            release reservations (images, speech) never settled
  genway credits reservations [--account NAME]              open reservations: credits held by images and speech being made
`

func keysCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("keys needs a subcommand: create, update, list or revoke")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, keysUsage)
		return nil
	}
	switch args[0] {
	case "create":
		fs := newFlags("keys create")
		account := fs.String("account", "", "account that owns the key")
		amount := amountVar(fs, "credits", "credits to add to the account (a decimal: 0.25)")
		name := fs.String("name", "", "a label for lists")
		models := fs.String("models", "", "comma-separated model patterns the key may use (* matches anything); empty: every model")
		expires := fs.String("expires", "", "when the key stops working: a duration from now (30d, 12h) or a time (RFC 3339); empty: never")
		limit := fs.String("credit-limit", "", "the most credits the key may spend in total (a decimal: 0.25); empty: no limit")
		reset := fs.String("reset", "", "start the credit limit over each UTC day, week or month: daily, weekly, monthly; empty: never")
		jobsCtl := fs.String("jobs", "account", "the jobs the key sees and manages: account (every job of the account) or own (only those it created)")
		if err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		if *account == "" {
			return usageError("keys create needs --account NAME")
		}
		ctl := auth.Controls{Name: *name, Models: auth.ParseModels(*models)}
		var err error
		if ctl.ExpiresAt, err = auth.ParseExpiry(*expires, time.Now()); err != nil {
			return usageError(err.Error())
		}
		if *limit != "" {
			n, err := credits.ParseAmount(strings.TrimSpace(*limit))
			if err != nil || n < 0 {
				return usageError("keys create: --credit-limit must be a number of credits, 0 or more, to 6 decimal places")
			}
			ctl.CreditLimit = &n
		}
		if ctl.CreditLimitReset, err = auth.ParseReset(*reset); err != nil {
			return usageError("keys create: --reset must be daily, weekly, monthly or none")
		}
		if ctl.CreditLimitReset != auth.ResetNever && ctl.CreditLimit == nil {
			return usageError("keys create: --reset needs --credit-limit N")
		}
		if ctl.Jobs, err = auth.ParseJobs(*jobsCtl); err != nil {
			return usageError("keys create: --jobs must be account or own")
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			key, rec, err := op.CreateKey(ctx, *account, *amount, ctl)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "created %s (%s...) for account %s; credits added: %s; %s. The key is shown once:\n%s\n", rec.ID, rec.Prefix, rec.Account, *amount, rec.Controls.Describe(), key)
			return nil
		})
	case "update":
		fs := newFlags("keys update")
		name := fs.String("name", "", "a label for lists")
		models := fs.String("models", "", `comma-separated model patterns ("*": every model)`)
		expires := fs.String("expires", "", "a duration from now (30d), a time (RFC 3339), or never")
		limit := fs.String("credit-limit", "", "the most credits the key may spend in total (a decimal: 0.25), or none")
		reset := fs.String("reset", "", "start the credit limit over each UTC day, week or month: daily, weekly, monthly, or none")
		jobsCtl := fs.String("jobs", "", "the jobs the key sees and manages: account or own")
		// The key may come before the flags or after them.
		if err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return usageError("keys update needs KEY_PREFIX_OR_ID and the controls to change")
		}
		id := rest[0]
		if err := parse(fs, rest[1:], stdout); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return usageError(fmt.Sprintf("keys update takes one KEY_PREFIX_OR_ID, not also %q", fs.Args()))
		}
		var ch auth.Change
		var bad error
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "name":
				ch.Name = name
			case "models":
				m := auth.ParseModels(*models)
				ch.Models = &m
			case "expires":
				at, err := auth.ParseExpiry(*expires, time.Now())
				bad = errors.Join(bad, err)
				ch.ExpiresAt = &at
			case "credit-limit":
				n := -credits.Credit // negative: none
				if *limit != "none" {
					var err error
					if n, err = credits.ParseAmount(strings.TrimSpace(*limit)); err != nil || n < 0 {
						bad = errors.Join(bad, errors.New("--credit-limit must be a number of credits, 0 or more, to 6 decimal places, or none"))
					}
				}
				ch.CreditLimit = &n
			case "reset":
				r, err := auth.ParseReset(*reset)
				if err != nil {
					bad = errors.Join(bad, errors.New("--reset must be daily, weekly, monthly or none"))
				}
				ch.CreditLimitReset = &r
			case "jobs":
				j, err := auth.ParseJobs(*jobsCtl)
				if err != nil {
					bad = errors.Join(bad, errors.New("--jobs must be account or own"))
				}
				ch.Jobs = &j
			}
		})
		if bad != nil {
			return usageError("keys update: " + bad.Error())
		}
		if ch.Empty() {
			return usageError("keys update needs at least one of --name, --models, --expires, --credit-limit, --reset, --jobs")
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			rec, err := op.UpdateKey(ctx, id, ch)
			if err != nil {
				return fmt.Errorf("update %s: %w", id, err)
			}
			fmt.Fprintf(stdout, "updated %s (%s...) of account %s: %s\n", rec.ID, rec.Prefix, rec.Account, rec.Controls.Describe())
			return nil
		})
	case "list":
		fs := newFlags("keys list")
		account := fs.String("account", "", "only this account's keys")
		if err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			recs, err := op.Keys(ctx, *account)
			if err != nil {
				return err
			}
			now := time.Now()
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPREFIX\tACCOUNT\tNAME\tMODELS\tJOBS\tSPENT/LIMIT\tEXPIRES\tCREATED\tLAST USED\tSTATUS")
			for _, r := range recs {
				status := "live"
				switch {
				case r.Revoked != 0:
					status = "revoked " + time.Unix(r.Revoked, 0).UTC().Format(time.RFC3339)
				case r.Expired(now):
					status = "expired"
				}
				used := "never"
				if r.LastUsed != 0 {
					used = time.Unix(r.LastUsed, 0).UTC().Format(time.RFC3339)
				}
				models := "*"
				if len(r.Models) > 0 {
					models = strings.Join(r.Models, ",")
				}
				spend := r.InPeriod(now).DescribeSpend()
				expires := "never"
				if r.ExpiresAt != 0 {
					expires = time.Unix(r.ExpiresAt, 0).UTC().Format(time.RFC3339)
				}
				name := r.Name
				if name == "" {
					name = "-"
				}
				jobsSeen := "account"
				if r.Jobs == auth.JobsOwn {
					jobsSeen = "own"
				}
				fmt.Fprintf(tw, "%s\t%s...\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Prefix, r.Account, name, models, jobsSeen, spend, expires,
					time.Unix(r.Created, 0).UTC().Format(time.RFC3339), used, status)
			}
			return tw.Flush()
		})
	case "revoke":
		if len(args) == 2 && isHelp(args[1]) {
			fmt.Fprint(stdout, keysUsage)
			return nil
		}
		if len(args) != 2 {
			return usageError("keys revoke needs one KEY_PREFIX_OR_ID")
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			rec, err := op.RevokeKey(ctx, args[1])
			if err != nil {
				return fmt.Errorf("revoke %s: %w", args[1], err)
			}
			fmt.Fprintf(stdout, "revoked %s (%s...) of account %s\n", rec.ID, rec.Prefix, rec.Account)
			return nil
		})
	}
	return usageError(fmt.Sprintf("unknown keys subcommand %q", args[0]))
}

func creditsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("credits needs a subcommand: grant, show, ledger, usage, limit, reconcile or reservations")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, creditsUsage)
		return nil
	}
	if args[0] == "usage" {
		return usageCmd(ctx, args[1:], getenv, stdout)
	}
	if args[0] == "reconcile" {
		fs := newFlags("credits reconcile")
		days := fs.Int("days", 7, "look at jobs created in the last N days")
		if err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			res, err := op.Reconcile(ctx, *days)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "checked %d final priced jobs of the last %d days; settled %d whose settlement was missing\n", res.Checked, *days, res.Settled)
			fmt.Fprintf(stdout, "found %d open reservations older than %d s; released %d\n", res.Reservations, credits.ReservationTTL, res.Released)
			return nil
		})
	}
	if args[0] == "reservations" {
		return reservationsCmd(ctx, args[1:], getenv, stdout)
	}
	fs := newFlags("credits " + args[0])
	account := fs.String("account", "", "the account")
	amount := amountVar(fs, "amount", "credits to grant (a decimal: 0.25)")
	rpm := fs.Int("rpm", 0, "requests per minute per key (0 default, -1 unlimited)")
	create := fs.Bool("create", false, "grant: make the account if it does not exist")
	note := fs.String("note", "", "grant: why (kept in the audit log)")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	if *account == "" {
		return usageError("credits " + args[0] + " needs --account NAME")
	}
	show := func(op admin.Operator) error {
		a, err := op.Account(ctx, *account)
		if err != nil {
			return fmt.Errorf("account %s: %w", *account, err)
		}
		limit := "default"
		switch {
		case a.RateLimit < 0:
			limit = "unlimited"
		case a.RateLimit > 0:
			limit = fmt.Sprintf("%d/min per key", a.RateLimit)
		}
		fmt.Fprintf(stdout, "account %s: balance %s, held %s, available %s, rate limit %s\n", a.ID, a.Balance, a.Held, a.Available, limit)
		return nil
	}
	switch args[0] {
	case "grant":
		if *amount <= 0 {
			return usageError("credits grant needs --amount N (a positive number of credits, to 6 decimal places)")
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			// A mistyped name must not make a new account silently.
			_, err := op.Account(ctx, *account)
			switch {
			case errors.Is(err, credits.ErrAccountNotFound) && !*create:
				return fmt.Errorf("account %q does not exist: check the name, or add --create to make it", *account)
			case errors.Is(err, credits.ErrAccountNotFound):
				if _, err := op.CreateAccount(ctx, *account, *amount, *note); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				if _, err := op.Grant(ctx, *account, *amount, *note); err != nil {
					return err
				}
			}
			return show(op)
		})
	case "show":
		return withOperator(ctx, getenv, show)
	case "limit":
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			if _, err := op.SetRateLimit(ctx, *account, *rpm); err != nil {
				return err
			}
			return show(op)
		})
	case "ledger":
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			entries, err := op.Ledger(ctx, *account)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tKIND\tAMOUNT\tJOB\tID")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", time.Unix(e.At, 0).UTC().Format(time.RFC3339), e.Kind, e.Amount, e.JobID, e.ID)
			}
			return tw.Flush()
		})
	}
	return usageError(fmt.Sprintf("unknown credits subcommand %q", args[0]))
}

// reservationsCmd is `genway credits reservations [--account NAME]`: the
// open reservations (of one account, or of all), oldest first, with
// their age; the reconciler releases those older than
// credits.ReservationTTL.
func reservationsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("credits reservations")
	account := fs.String("account", "", "only this account's (default: every account's)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("credits reservations takes only [--account NAME]")
	}
	return withOperator(ctx, getenv, func(op admin.Operator) error {
		res, err := op.Reservations(ctx, *account)
		if err != nil {
			return fmt.Errorf("reservations: %w", err)
		}
		now := time.Now()
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tAGE\tACCOUNT\tTYPE\tMODEL\tHELD\tID")
		var held credits.Amount
		for _, e := range res {
			at := time.Unix(e.At, 0)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", at.UTC().Format(time.RFC3339), now.Sub(at).Round(time.Second), e.Account, e.JobType, e.Model, e.Amount, e.ID)
			held += e.Amount // at most admin.MaxReservations holds, each within credits.MaxAmount
		}
		fmt.Fprintf(tw, "total\t\t\t\t\t%s\t%d open\n", held, len(res))
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(res) == admin.MaxReservations {
			fmt.Fprintf(stdout, "(the %d oldest only; run genway credits reconcile)\n", admin.MaxReservations)
		}
		return nil
	})
}
