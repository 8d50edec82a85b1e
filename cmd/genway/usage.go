package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/credits"
)

// usageCmd is `genway credits usage --account NAME [--from DAY] [--to
// DAY]`: the account's usage per UTC day, kind and model (chat: requests
// and tokens; music, sfx, video: completed jobs; image, speech: the
// generations that succeeded), each with its credits, and totals. args
// are the arguments after "usage".
func usageCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("credits usage")
	account := fs.String("account", "", "the account")
	from := fs.String("from", "", "first day, YYYY-MM-DD (UTC)")
	to := fs.String("to", "", "last day, YYYY-MM-DD (UTC)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *account == "" || fs.NArg() != 0 {
		return usageError("credits usage needs --account NAME [--from YYYY-MM-DD] [--to YYYY-MM-DD]")
	}
	for _, d := range []string{*from, *to} {
		if d != "" && credits.CheckDay(d) != nil {
			return usageError(fmt.Sprintf("credits usage: %q is not a day (YYYY-MM-DD)", d))
		}
	}
	return withOperator(ctx, getenv, func(op admin.Operator) error {
		us, err := op.Usage(ctx, *account, *from, *to)
		if err != nil {
			return fmt.Errorf("usage of %s: %w", *account, err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DAY\tKIND\tMODEL\tREQUESTS\tPROMPT_TOKENS\tCOMPLETION_TOKENS\tJOBS\tCREDITS")
		var total admin.DayUsage
		for _, u := range us {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", u.Day, u.Kind, u.Model, u.Requests, u.PromptTokens, u.CompletionTokens, u.Jobs, u.Credits)
			total.Requests += u.Requests
			total.PromptTokens += u.PromptTokens
			total.CompletionTokens += u.CompletionTokens
			total.Jobs += u.Jobs
			total.Credits += u.Credits
		}
		fmt.Fprintf(tw, "total\t\t\t%d\t%d\t%d\t%d\t%s\n", total.Requests, total.PromptTokens, total.CompletionTokens, total.Jobs, total.Credits)
		return tw.Flush()
	})
}
