package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
)

func TestUsageCmd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := localstore.Open(filepath.Join(dir, "genway.db"))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if _, err := st.Grant(ctx, "acct1", 100*credits.Credit, 1); err != nil {
		t.Fatalf("Grant = %v", err)
	}
	for i, day := range []string{"2025-03-01", "2025-03-02", "2025-03-02"} {
		d, _ := time.Parse(credits.DayLayout, day)
		r := credits.Record{ID: fmt.Sprint("chatcmpl-", i), Kind: credits.KindChat, Account: "acct1", ModelAsked: "synthetic-chat", Model: "synthetic-chat",
			Tokens: credits.Tokens{Prompt: 10, Completion: 5}, Cost: 15, Status: credits.StatusCompleted, At: d.Add(time.Hour).UnixMilli()} // 0.000015
		if err := st.AddRecords(ctx, []credits.Record{r})[0]; err != nil {
			t.Fatalf("AddRecords = %v", err)
		}
	}
	// Two completed jobs and a failed one, settled as the change feed
	// does (the failed one is not counted).
	for _, j := range []struct {
		id, typ, model, to string
		price              credits.Amount
		at                 time.Time
	}{
		{"job_sfx_a", "sfx", "synthetic-sfx", "completed", 4 * credits.Credit, time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC)},
		{"job_video_b", "video", "synthetic-video", "completed", 6_500_000, time.Date(2025, 3, 2, 23, 59, 59, 0, time.UTC)},
		{"job_sfx_c", "sfx", "synthetic-sfx", "failed", 9 * credits.Credit, time.Date(2025, 3, 2, 9, 0, 0, 0, time.UTC)},
	} {
		c := credits.Change{JobID: j.id, Account: "acct1", JobType: j.typ, Model: j.model, OldStatus: "processing", NewStatus: j.to, Price: j.price, At: j.at.Unix()}
		if err := credits.Apply(ctx, st, c); err != nil {
			t.Fatalf("Apply(%+v) = %v", c, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	getenv := func(k string) string {
		if k == "GENWAY_DATA_DIR" {
			return dir
		}
		return ""
	}
	tests := []struct {
		args      []string
		wantLines []string // each must appear, whitespace-collapsed
		usage     bool     // a usageError
	}{
		{[]string{"--account", "acct1"}, []string{
			"DAY KIND MODEL REQUESTS PROMPT_TOKENS COMPLETION_TOKENS JOBS CREDITS",
			"2025-03-01 chat synthetic-chat 1 10 5 0 0.000015",
			"2025-03-02 chat synthetic-chat 2 20 10 0 0.00003",
			"2025-03-02 sfx synthetic-sfx 0 0 0 1 4",
			"2025-03-02 video synthetic-video 0 0 0 1 6.5",
			"total 3 30 15 2 10.500045",
		}, false},
		{[]string{"--account", "acct1", "--from", "2025-03-02"}, []string{"2025-03-02 chat synthetic-chat 2 20 10 0 0.00003", "total 2 20 10 2 10.50003"}, false},
		{[]string{"--account", "acct1", "--to", "2025-03-01"}, []string{"total 1 10 5 0 0.000015"}, false},
		{[]string{"--account", "acct1", "--to", "2025-02-28"}, []string{"total 0 0 0 0 0"}, false},
		{[]string{}, nil, true},
		{[]string{"--account", "acct1", "--from", "yesterday"}, nil, true},
		{[]string{"--account", "acct1", "extra"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := usageCmd(ctx, tt.args, getenv, &out)
			var ue usageError
			if tt.usage != errors.As(err, &ue) || (!tt.usage && err != nil) {
				t.Fatalf("usageCmd(%q) = %v; want usage error %v", tt.args, err, tt.usage)
			}
			var lines []string
			for _, l := range strings.Split(out.String(), "\n") {
				lines = append(lines, strings.Join(strings.Fields(l), " "))
			}
			got := strings.Join(lines, "\n")
			for _, w := range tt.wantLines {
				if !strings.Contains("\n"+got+"\n", "\n"+w+"\n") {
					t.Errorf("usageCmd(%q) output =\n%s\nwant a line %q", tt.args, out.String(), w)
				}
			}
		})
	}
	if err := usageCmd(ctx, []string{"--account", "nobody"}, getenv, &bytes.Buffer{}); err == nil {
		t.Errorf("usageCmd(--account nobody) = nil; want an error")
	}
}

// TestServeRecordsChatUsage runs chat completions through genway serve and
// reads the dev account's usage with the usage command: with a short
// GENWAY_USAGE_FLUSH it is written while the server runs; with an hour it
// is written when the server shuts down.
func TestServeRecordsChatUsage(t *testing.T) {
	tests := []struct {
		name  string
		flush string
		// whileServing: the usage appears before the server stops.
		whileServing bool
	}{
		{"flushed while serving", "20ms", true},
		{"flushed at shutdown", "1h", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			getenv := testEnv(dir, nil)
			// 3 requests of "hello world": 2 prompt and 4 completion tokens each.
			const want = "total 3 6 12 0 0"
			// The server stops when this subtest ends.
			t.Run("serve", func(t *testing.T) {
				s := startServer(t, dir, map[string]string{"GENWAY_USAGE_FLUSH": tt.flush})
				for _, stream := range []bool{false, true, false} {
					body := map[string]any{"model": "synthetic/echo", "stream": stream,
						"messages": []map[string]string{{"role": "user", "content": "hello world"}}}
					if code, _ := s.do(t, "POST", "/v1/chat/completions", body, nil, nil); code != 200 {
						t.Fatalf("POST /v1/chat/completions (stream %v) = %d; want 200", stream, code)
					}
				}
				if !tt.whileServing {
					return
				}
				deadline := time.Now().Add(10 * time.Second)
				for {
					got := usageTotal(t, getenv)
					if got == want {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("usage total after 10 s = %q; want %q", got, want)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
			if got := usageTotal(t, getenv); got != want {
				t.Errorf("usage total after shutdown = %q; want %q", got, want)
			}
		})
	}
}

// usageTotal returns the whitespace-collapsed total line of the dev
// account's usage.
func usageTotal(t *testing.T, getenv func(string) string) string {
	t.Helper()
	var out bytes.Buffer
	if err := usageCmd(context.Background(), []string{"--account", "dev"}, getenv, &out); err != nil {
		t.Fatalf("usageCmd(--account dev) = %v", err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "total" {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("usageCmd(--account dev) output =\n%s\nwant a total line", out.String())
	return ""
}

func TestServeConfigUsageFlush(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"2m", 2 * time.Minute, false},
		{"0s", 0, true},
		{"-1s", 0, true},
		{"1", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c, err := app.LoadConfig(app.Serve, func(k string) string {
				if k == "GENWAY_USAGE_FLUSH" {
					return tt.value
				}
				return ""
			})
			if (err != nil) != tt.wantErr || (err == nil && c.UsageFlush != tt.want) {
				t.Errorf("LoadConfig(GENWAY_USAGE_FLUSH=%q) = %v, %v; want %v, error %v", tt.value, c.UsageFlush, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "GENWAY_USAGE_FLUSH") {
				t.Errorf("LoadConfig(GENWAY_USAGE_FLUSH=%q) = %v; want an error naming the variable", tt.value, err)
			}
		})
	}
}
