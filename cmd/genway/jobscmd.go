package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
)

const accountsUsage = `Usage:
  genway accounts list                                    every account: credits, rate limit, live keys
  genway accounts create --account NAME [--credits N] [--note TEXT]  make an account
`

const jobsUsage = `Usage:
  genway jobs create --type music|sfx|video --model ID --prompt TEXT [--duration S] [--size WxH]
                     [--format mp3|wav] [--category C] [--lyrics TEXT] [--wait] [--output FILE]
      create a job through the public API (GENWAY_URL, default the local server; GENWAY_API_KEY);
      --wait shows the job's progress until it is final; --output downloads the result (implies --wait)
`

func accountsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("accounts needs a subcommand: list or create")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, accountsUsage)
		return nil
	}
	fs := newFlags("accounts " + args[0])
	account := fs.String("account", "", "the account")
	amount := amountVar(fs, "credits", "starting credits (a decimal: 0.25)")
	note := fs.String("note", "", "why (kept in the audit log)")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	switch args[0] {
	case "list":
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			accts, err := op.Accounts(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCOUNT\tBALANCE\tHELD\tAVAILABLE\tRATE LIMIT\tLIVE KEYS")
			for _, a := range accts {
				limit := "default"
				switch {
				case a.RateLimit < 0:
					limit = "unlimited"
				case a.RateLimit > 0:
					limit = fmt.Sprintf("%d/min", a.RateLimit)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", a.ID, a.Balance, a.Held, a.Available, limit, a.Keys)
			}
			return tw.Flush()
		})
	case "create":
		if *account == "" {
			return usageError("accounts create needs --account NAME")
		}
		return withOperator(ctx, getenv, func(op admin.Operator) error {
			a, err := op.CreateAccount(ctx, *account, *amount, *note)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "account %s: balance %s\n", a.ID, a.Balance)
			return nil
		})
	}
	return usageError(fmt.Sprintf("unknown accounts subcommand %q", args[0]))
}

// apiJob is the part of a job the CLI reads.
type apiJob struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Model    string `json:"model"`
	ServedBy string `json:"served_by"`
	Output   *struct {
		URL         string  `json:"url"`
		ContentType string  `json:"content_type"`
		Duration    float64 `json:"duration"`
	} `json:"output"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// publicAPI is the base URL and key for the public API: GENWAY_URL (or
// the local server at GENWAY_ADDR) and GENWAY_API_KEY (or GENWAY_DEV_KEY).
func publicAPI(getenv func(string) string) (base, key string, err error) {
	cfg, err := app.LoadConfig(app.Serve, getenv)
	if err != nil {
		return "", "", err
	}
	base = strings.TrimSuffix(strings.TrimRight(cfg.URL, "/"), "/v1")
	if base == "" {
		base = "http://" + cfg.Addr
	}
	key = cfg.APIKey
	if key == "" {
		key = cfg.DevKey
	}
	if key == "" {
		return "", "", usageError("the public API needs an API key in GENWAY_API_KEY")
	}
	return base, key, nil
}

func jobsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("jobs needs a subcommand: create")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, jobsUsage)
		return nil
	}
	if args[0] != "create" {
		return usageError(fmt.Sprintf("unknown jobs subcommand %q", args[0]))
	}
	fs := newFlags("jobs create")
	typ := fs.String("type", "", "music, sfx or video")
	model := fs.String("model", "", "the model id")
	prompt := fs.String("prompt", "", "what to make")
	duration := fs.Int("duration", 0, "seconds (0: the model's default)")
	size := fs.String("size", "", "video size, WxH")
	format := fs.String("format", "", "audio format, mp3 or wav")
	category := fs.String("category", "", "sfx category")
	lyrics := fs.String("lyrics", "", "lyrics, for music models that sing")
	wait := fs.Bool("wait", false, "show the job's progress until it is final")
	output := fs.String("output", "", "download the result to this file (implies --wait)")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	if *typ == "" || *model == "" || *prompt == "" {
		return usageError("jobs create needs --type, --model and --prompt")
	}
	base, key, err := publicAPI(getenv)
	if err != nil {
		return err
	}
	body := map[string]any{"type": *typ, "model": *model, "prompt": *prompt}
	for k, v := range map[string]string{"size": *size, "format": *format, "category": *category, "lyrics": *lyrics} {
		if v != "" {
			body[k] = v
		}
	}
	if *duration > 0 {
		body["duration"] = *duration
	}
	c := &http.Client{Timeout: 60 * time.Second}
	var j apiJob
	if err := callAPI(ctx, c, http.MethodPost, base+"/v1/jobs", key, body, &j); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "job %s: %s\n", j.ID, j.Status)
	if !*wait && *output == "" {
		return nil
	}
	j, err = waitJob(ctx, c, base, key, j, stdout)
	if err != nil {
		return err
	}
	if j.Status != "completed" {
		if j.Error != nil {
			return fmt.Errorf("job %s failed: %s (%s)", j.ID, j.Error.Message, j.Error.Code)
		}
		return fmt.Errorf("job %s ended %s", j.ID, j.Status)
	}
	if j.ServedBy != "" && j.ServedBy != j.Model {
		fmt.Fprintf(stdout, "served by: %s (a fallback of %s)\n", j.ServedBy, j.Model)
	}
	fmt.Fprintf(stdout, "output: %s\n", j.Output.URL)
	if *output == "" {
		return nil
	}
	n, err := downloadTo(ctx, j.Output.URL, *output)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved %s (%d bytes)\n", *output, n)
	return nil
}

// waitJob polls the job until it is final, printing each status it
// reaches with the time since it was created, and a dot every few
// seconds while nothing changes. It gives up after an hour.
func waitJob(ctx context.Context, c *http.Client, base, key string, j apiJob, stdout io.Writer) (apiJob, error) {
	start, last := time.Now(), j.Status
	dots := 0
	for i := 0; i < 3600; i++ {
		if j.Status == "completed" || j.Status == "failed" {
			if dots > 0 {
				fmt.Fprintln(stdout)
			}
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(time.Second):
		}
		if err := callAPI(ctx, c, http.MethodGet, base+"/v1/jobs/"+j.ID, key, nil, &j); err != nil {
			return j, err
		}
		switch {
		case j.Status != last:
			if dots > 0 {
				fmt.Fprintln(stdout)
				dots = 0
			}
			fmt.Fprintf(stdout, "  %s after %.1fs\n", j.Status, time.Since(start).Seconds())
			last = j.Status
		case i%3 == 2:
			fmt.Fprint(stdout, ".")
			dots++
		}
	}
	return j, fmt.Errorf("job %s is still %s after an hour; check it later with GET /v1/jobs/%s", j.ID, j.Status, j.ID)
}

// callAPI sends a request to the public API and decodes the answer; an
// error answer becomes an error with the API's message.
func callAPI(ctx context.Context, c *http.Client, method, url, key string, body, out any) error {
	resp, err := sendAPI(ctx, c, method, url, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// sendAPI sends a request to the public API and returns a 2xx response
// for the caller to read and close; any other status becomes an error
// with the API's message (the OpenAI error envelope's).
func sendAPI(ctx context.Context, c *http.Client, method, url, key string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: HTTP %d: %w", method, url, resp.StatusCode, err)
	}
	msg := strings.TrimSpace(string(b))
	var env apiErrorEnvelope
	if json.Unmarshal(b, &env) == nil && env.Error != nil {
		msg = env.Error.Message
	}
	return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, msg)
}

// apiErrorEnvelope is the OpenAI error envelope the API answers errors
// with.
type apiErrorEnvelope struct {
	Error *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// downloadTo saves url to path (see writeAtomic) and returns its size.
func downloadTo(ctx context.Context, url, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("download: HTTP %d", resp.StatusCode)
	}
	return writeAtomic(path, resp.Body)
}

// writeAtomic copies r to path through a temporary file beside it,
// renamed to path only once all of r is written: a failure (r's, the
// disk's) leaves no file at path, and an existing one as it was.
func writeAtomic(path string, r io.Reader) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Chmod(0o644) // as os.Create would make it, not CreateTemp's 0600
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return n, fmt.Errorf("save %s: %w", path, err)
	}
	return n, nil
}
