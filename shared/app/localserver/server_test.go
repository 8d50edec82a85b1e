package localserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/genway/genway/shared/app"
)

// testConfig is the embedded backend's configuration in a new data
// directory, on a free loopback port.
func testConfig(t *testing.T) app.Config {
	t.Helper()
	env := map[string]string{"GENWAY_ADDR": "127.0.0.1:0", "GENWAY_DATA_DIR": t.TempDir(), "GENWAY_USAGE_FLUSH": "100ms"}
	getenv := func(k string) string { return env[k] }
	cfg, err := app.LoadConfig(app.Serve, getenv)
	if err == nil {
		err = app.LoadCatalog(&cfg, getenv)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMainLifecycle: New builds a server that Run serves until its
// context ends, and Close releases the store (the next New opens it
// again) whether or not Run ran; the dev account is made once.
func TestMainLifecycle(t *testing.T) {
	for _, run := range []bool{true, false} {
		name := map[bool]string{true: "run then close", false: "close without run"}[run]
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			for i, wantCreated := range []bool{true, false} {
				m, err := New(t.Context(), cfg, WithLogger(log))
				if err != nil {
					t.Fatalf("New (start %d): %v", i+1, err)
				}
				if m.Dev.Created != wantCreated || (m.Dev.Key != "") != wantCreated {
					t.Errorf("start %d: Dev = {Created: %v, key made: %v}; want %v", i+1, m.Dev.Created, m.Dev.Key != "", wantCreated)
				}
				if run {
					ctx, cancel := context.WithCancel(t.Context())
					done := make(chan error, 1)
					go func() { done <- m.Run(ctx) }()
					resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(m.BaseURL + "/healthz")
					if err != nil {
						t.Fatalf("GET /healthz: %v", err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("GET /healthz = %d; want 200", resp.StatusCode)
					}
					cancel()
					select {
					case err := <-done:
						if err != nil {
							t.Errorf("Run = %v; want nil", err)
						}
					case <-time.After(30 * time.Second):
						t.Fatal("Run did not return within 30 s of its context ending")
					}
				}
				if err := m.Close(); err != nil {
					t.Errorf("Close = %v; want nil", err)
				}
			}
		})
	}
}

// TestNewWithoutCatalog: New refuses a configuration whose catalog is not
// loaded.
func TestNewWithoutCatalog(t *testing.T) {
	cfg := testConfig(t)
	cfg.Catalog = nil
	if _, err := New(t.Context(), cfg); err == nil {
		t.Error("New without a catalog = nil error; want one")
	}
}
