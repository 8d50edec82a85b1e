package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genway/genway/shared/localstore"
)

func TestUsageCmd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := localstore.Open(filepath.Join(dir, "genway.db"))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if _, err := st.Grant(ctx, "acct1", 100, 1); err != nil {
		t.Fatalf("Grant = %v", err)
	}
	for _, day := range []string{"2025-03-01", "2025-03-02", "2025-03-02"} {
		if err := st.AddUsage(ctx, "acct1", "synthetic-chat", day, 10, 5, 1); err != nil {
			t.Fatalf("AddUsage = %v", err)
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
			"DAY MODEL REQUESTS PROMPT_TOKENS COMPLETION_TOKENS CREDITS",
			"2025-03-01 synthetic-chat 1 10 5 1",
			"2025-03-02 synthetic-chat 2 20 10 2",
			"total 3 30 15 3",
		}, false},
		{[]string{"--account", "acct1", "--from", "2025-03-02"}, []string{"2025-03-02 synthetic-chat 2 20 10 2", "total 2 20 10 2"}, false},
		{[]string{"--account", "acct1", "--to", "2025-02-28"}, []string{"total 0 0 0 0"}, false},
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
