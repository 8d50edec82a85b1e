package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/credits"
)

const requestsUsage = `Usage:
  genway requests list [--account NAME] [--key KEY_ID] [--model M] [--status S] [--kind K]
                       [--limit N] [--after CURSOR]
                                                   the records of requests, newest first: chat,
                                                   Responses, images and speech, what each used
                                                   and cost; --after is the cursor the last page
                                                   printed
  genway requests show ID                          one request's record, its charge line by line

Statuses: completed, client_closed, upstream_error, failed. Kinds: chat, responses, messages,
image, speech. Records are kept GENWAY_RECORD_DAYS days (30).
`

// requestsCmd is `genway requests list|show`: the records of requests
// (credits.Record) through the operator commands, locally or against a
// deployment (GENWAY_URL). args are the arguments after "requests".
func requestsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stdout, requestsUsage)
		if len(args) == 0 {
			return usageError("requests needs list or show")
		}
		return nil
	}
	switch args[0] {
	case "list":
		return requestsList(ctx, args[1:], getenv, stdout)
	case "show":
		return requestsShow(ctx, args[1:], getenv, stdout)
	}
	return usageError(fmt.Sprintf("unknown requests command %q", args[0]))
}

func requestsList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("requests list")
	var q credits.RecordQuery
	fs.StringVar(&q.Account, "account", "", "only this account's")
	fs.StringVar(&q.Key, "key", "", "only those of this API key (its id)")
	fs.StringVar(&q.Model, "model", "", "only those that asked for or were answered by this model")
	fs.StringVar(&q.Status, "status", "", "only those of this status (completed, client_closed, upstream_error, failed)")
	fs.StringVar(&q.Kind, "kind", "", "only those of this kind (chat, responses, messages, image, speech)")
	fs.IntVar(&q.Limit, "limit", credits.DefaultRecordLimit, fmt.Sprintf("at most this many (1-%d)", credits.MaxRecordLimit))
	fs.StringVar(&q.Cursor, "after", "", "the cursor a previous page printed: the page after it")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("requests list takes flags only")
	}
	if err := q.Normalize(); err != nil {
		return usageError(fmt.Sprintf("requests list: %v", err))
	}
	return withOperator(ctx, getenv, func(op admin.Operator) error {
		rs, next, err := op.Requests(ctx, q)
		if err != nil {
			return fmt.Errorf("requests: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME (UTC)\tID\tACCOUNT\tKIND\tMODEL\tSTATUS\tPROMPT\tCOMPLETION\tCOST\tLATENCY_MS")
		for _, r := range rs {
			model := r.Model
			if model == "" {
				model = r.ModelAsked
			}
			status := r.Status
			if r.Partial {
				status += " (partial)"
			}
			prompt, completion := fmt.Sprint(r.Tokens.Prompt), fmt.Sprint(r.Tokens.Completion)
			if !r.Chat() {
				prompt, completion = fmt.Sprint(r.Units), "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", time.UnixMilli(r.At).UTC().Format("2006-01-02 15:04:05.000"),
				r.ID, r.Account, r.Kind, model, status, prompt, completion, r.Cost, r.LatencyMS)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if next != "" {
			fmt.Fprintf(stdout, "more: genway requests list --after %s (with the same filters)\n", next)
		}
		return nil
	})
}

func requestsShow(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("requests show")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("requests show needs one record id")
	}
	id := fs.Arg(0)
	return withOperator(ctx, getenv, func(op admin.Operator) error {
		r, err := op.Request(ctx, id)
		if errors.Is(err, credits.ErrRecordNotFound) {
			return fmt.Errorf("request %s: no record (unknown, or expired)", id)
		}
		if err != nil {
			return fmt.Errorf("request %s: %w", id, err)
		}
		writeRecord(stdout, r)
		return nil
	})
}

// writeRecord prints r and its charge, line by line.
func writeRecord(w io.Writer, r credits.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("id", r.ID)
	row("kind", r.Kind)
	row("account", r.Account)
	row("key", r.Key)
	row("model asked", r.ModelAsked)
	row("answered by", strings.TrimSpace(r.Model+" "+paren(r.Provider)))
	row("attempts", r.Attempts)
	row("service tier", r.ServiceTier)
	status := r.Status
	if r.Partial {
		status += " (partial)"
	}
	if r.Estimated {
		status += " (counts estimated)"
	}
	row("status", status)
	row("finish reason", r.FinishReason)
	row("time (UTC)", time.UnixMilli(r.At).UTC().Format("2006-01-02 15:04:05.000"))
	row("latency", fmt.Sprintf("%d ms", r.LatencyMS))
	if r.FirstTokenMS > 0 {
		row("first token", fmt.Sprintf("%d ms", r.FirstTokenMS))
	}
	if r.Expires > 0 {
		row("kept until (UTC)", time.Unix(r.Expires, 0).UTC().Format("2006-01-02 15:04:05"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	if r.Status == credits.StatusFailed {
		fmt.Fprintln(w, "No candidate answered: nothing was charged.")
		return
	}
	c := r.Explain()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CLASS\tQUANTITY\tRATE\tPER\tPART\t")
	for _, l := range c.Lines {
		class := l.Class
		if l.Note != "" {
			class += " (" + l.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t\n", class, l.Quantity, l.Rate, l.Per, l.Part)
	}
	fmt.Fprintf(tw, "sum, exact\t\t\t\t%s\t\n", c.Sum)
	fmt.Fprintf(tw, "rounded up once\t\t\t\t%s\t\n", c.Rounded)
	fmt.Fprintf(tw, "charged\t\t\t\t%s\t\n", c.Cost)
	tw.Flush()
	if c.Entry != "" {
		fmt.Fprintf(w, "ledger entry %s moved %s credits\n", c.Entry, c.Cost)
	} else {
		fmt.Fprintln(w, "nothing was charged: no ledger entry")
	}
}

// paren is "(s)", or "" for no s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}
