package admin_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/transport/httpapi"
)

// operators returns a Service on a fresh embedded store and a Client
// talking to that Service's Handler over a unix socket.
func operators(t *testing.T) (*localstore.Store, map[string]admin.Operator) {
	t.Helper()
	dir, err := os.MkdirTemp("", "admin") // short: a socket path is at most ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	st, err := localstore.Open(filepath.Join(dir, "genway.db"))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	svc := &admin.Service{Store: st, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}
	sock := filepath.Join(dir, "admin.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen %s: %v", sock, err)
	}
	srv := &http.Server{Handler: httpapi.AdminAPI(httpapi.AdminConfig{Operator: svc, Log: slog.New(slog.DiscardHandler)})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c, err := admin.Dial(context.Background(), sock)
	if err != nil {
		t.Fatalf("Dial(%q) = %v", sock, err)
	}
	return st, map[string]admin.Operator{"service": svc, "client": c}
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	st, ops := operators(t)
	if _, err := st.Grant(ctx, "acct1", 100, 1); err != nil {
		t.Fatalf("Grant = %v", err)
	}
	for _, r := range []struct {
		model, day string
		credits    credits.Amount
	}{{"m1", "2025-03-01", 0}, {"m2", "2025-03-01", 2}, {"m1", "2025-03-02", 0}, {"m1", "2025-03-02", 3}} {
		d, _ := time.Parse(credits.DayLayout, r.day)
		rec := credits.Record{ID: fmt.Sprintf("chatcmpl-%s-%s-%s", r.model, r.day, r.credits), Kind: credits.KindChat, Account: "acct1", ModelAsked: r.model, Model: r.model,
			Tokens: credits.Tokens{Prompt: 10, Completion: 20}, Cost: r.credits, Status: credits.StatusCompleted, At: d.Add(12 * time.Hour).UnixMilli()}
		if err := st.AddRecords(ctx, []credits.Record{rec})[0]; err != nil {
			t.Fatalf("AddRecords = %v", err)
		}
	}
	// Jobs settled as the change feed settles them: two completed (one
	// delivered twice), one failed (not counted).
	for _, c := range []credits.Change{
		{JobID: "job_sfx_1", Account: "acct1", JobType: "sfx", Model: "m3", OldStatus: "processing", NewStatus: "completed", Price: 4, At: time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC).Unix()},
		{JobID: "job_sfx_1", Account: "acct1", JobType: "sfx", Model: "m3", OldStatus: "processing", NewStatus: "completed", Price: 4, At: time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC).Unix()},
		{JobID: "job_video_2", Account: "acct1", JobType: "video", Model: "m4", OldStatus: "processing", NewStatus: "completed", Price: 9, At: time.Date(2025, 3, 1, 23, 0, 0, 0, time.UTC).Unix()},
		{JobID: "job_video_3", Account: "acct1", JobType: "video", Model: "m4", OldStatus: "processing", NewStatus: "failed", Price: 9, At: time.Date(2025, 3, 1, 23, 0, 0, 0, time.UTC).Unix()},
	} {
		if err := credits.Apply(ctx, st, c); err != nil {
			t.Fatalf("Apply(%+v) = %v", c, err)
		}
	}
	if _, err := st.Grant(ctx, "acct2", 5, 1); err != nil {
		t.Fatalf("Grant = %v", err)
	}
	if err := credits.Apply(ctx, st, credits.Change{JobID: "job_sfx_9", Account: "acct2", JobType: "sfx", Model: "m3", OldStatus: "queued", NewStatus: "completed", Price: 1, At: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).Unix()}); err != nil {
		t.Fatalf("Apply = %v", err)
	}
	chat := func(day, model string, n int64, c credits.Amount) admin.DayUsage {
		return admin.DayUsage{Account: "acct1", Day: day, Kind: "chat", Model: model, Requests: n, PromptTokens: 10 * n, CompletionTokens: 20 * n, Credits: c}
	}
	job := func(acct, day, kind, model string, n int64, c credits.Amount) admin.DayUsage {
		return admin.DayUsage{Account: acct, Day: day, Kind: kind, Model: model, Jobs: n, Credits: c}
	}
	tests := []struct {
		name              string
		account, from, to string
		want              []admin.DayUsage
		wantErr           error // nil: no error; errAny: some error
	}{
		{"all", "acct1", "", "", []admin.DayUsage{chat("2025-03-01", "m1", 1, 0), chat("2025-03-01", "m2", 1, 2), job("acct1", "2025-03-01", "video", "m4", 1, 9),
			chat("2025-03-02", "m1", 2, 3), job("acct1", "2025-03-02", "sfx", "m3", 1, 4)}, nil},
		{"one day", "acct1", "2025-03-02", "2025-03-02", []admin.DayUsage{chat("2025-03-02", "m1", 2, 3), job("acct1", "2025-03-02", "sfx", "m3", 1, 4)}, nil},
		{"until", "acct1", "", "2025-03-01", []admin.DayUsage{chat("2025-03-01", "m1", 1, 0), chat("2025-03-01", "m2", 1, 2), job("acct1", "2025-03-01", "video", "m4", 1, 9)}, nil},
		{"every account, one day", "", "2025-03-01", "2025-03-01", []admin.DayUsage{chat("2025-03-01", "m1", 1, 0), chat("2025-03-01", "m2", 1, 2),
			job("acct1", "2025-03-01", "video", "m4", 1, 9), job("acct2", "2025-03-01", "sfx", "m3", 1, 1)}, nil},
		{"none", "acct1", "2025-04-01", "", nil, nil},
		{"bad from", "acct1", "March", "", nil, errAny},
		{"bad to", "acct1", "", "2025-02-30", nil, errAny},
		{"from after to", "acct1", "2025-03-02", "2025-03-01", nil, errAny},
		{"unknown account", "nobody", "", "", nil, credits.ErrAccountNotFound},
	}
	for name, op := range ops {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				got, err := op.Usage(ctx, tt.account, tt.from, tt.to)
				switch {
				case tt.wantErr == nil && err != nil,
					tt.wantErr == errAny && err == nil,
					tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
					t.Fatalf("Usage(%q, %q, %q) = %v; want %v", tt.account, tt.from, tt.to, err, tt.wantErr)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("Usage(%q, %q, %q) = %+v; want %+v", tt.account, tt.from, tt.to, got, tt.want)
				}
			})
		}
	}
}

var errAny = errors.New("any error")
