package app

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOperationsTable checks docs/operations.md's table of variables
// (section "Configuration") against LoadConfig: every variable it reads is
// in the table and every variable in the table is read (a vendor's
// <KEY>_PARAMETER is the table's `<KEY>_PARAMETER` row), and where the
// table states a default, it is DefaultConfig's.
func TestOperationsTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Configuration\n")
	if !ok {
		t.Fatal("docs/operations.md has no section Configuration")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]+)(=[a-z]+)?`")
	documented := map[string]string{} // variable -> the default column
	for _, line := range strings.Split(section, "\n") {
		cols := strings.Split(line, "|") // "", variables, default, meaning, ""
		if !strings.HasPrefix(line, "| `") || len(cols) < 4 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			documented[m[1]] = strings.TrimSpace(cols[2])
		}
	}
	read := map[string]bool{}
	getenv := func(k string) string { read[k] = true; return "" }
	cfg, err := LoadConfig(Serve, getenv)
	if err == nil {
		err = LoadCatalog(&cfg, getenv)
	}
	if err != nil {
		t.Fatal(err)
	}
	vendor := map[string]bool{}
	for _, n := range cfg.Catalog.EnvNames() {
		vendor[n] = true
	}
	for v := range read {
		if base, ok := strings.CutSuffix(v, parameterSuffix); ok && vendor[base] {
			continue // the `<KEY>_PARAMETER` row
		}
		if _, ok := documented[v]; !ok {
			t.Errorf("LoadConfig reads %s; docs/operations.md's table does not name it", v)
		}
	}
	for v := range documented {
		if !read[v] && !strings.HasSuffix(v, parameterSuffix) {
			t.Errorf("docs/operations.md's table names %s; LoadConfig does not read it", v)
		}
	}
	if !read["GENWAY_ADMIN_TOKEN_PARAMETER"] {
		t.Error("LoadConfig does not read GENWAY_ADMIN_TOKEN_PARAMETER")
	}

	// The defaults the table states, as DefaultConfig has them.
	d := DefaultConfig(Serve)
	days := func(x time.Duration) string { return itoa(int(x / (24 * time.Hour))) }
	defaults := map[string]string{
		"GENWAY_ADDR": d.Addr, "GENWAY_DATA_DIR": "./" + d.DataDir, "GENWAY_DEV_CREDITS": d.DevCredits.String(),
		"GENWAY_RATE_LIMIT": itoa(d.RateLimit), "GENWAY_WORKERS": itoa(d.Workers), "GENWAY_MEDIA_RETENTION": dur(d.MediaRetention),
		"GENWAY_MAX_CONNS": itoa(d.MaxConns), "GENWAY_MAX_CONNS_PER_ADDR": itoa(d.MaxConnsPerAddr),
		"GENWAY_MAX_IN_FLIGHT_PER_KEY": itoa(d.InFlightPerKey), "GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT": itoa(d.InFlightPerAccount),
		"GENWAY_MAX_TEXT_BODY": mib(d.MaxTextBody), "GENWAY_BODY_MEMORY": mib(d.BodyMemory),
		"GENWAY_IDLE_TIMEOUT": dur(d.IdleTimeout), "GENWAY_USAGE_FLUSH": dur(d.UsageFlush), "GENWAY_BACKEND": d.Backend,
		"GENWAY_CREDIT_USD": "0.01", "GENWAY_PRICE_MARKUP": "0", "GENWAY_MEDIA_POLL": dur(d.MediaPoll),
		"GENWAY_SWEEP_AFTER": strings.TrimSuffix(dur(d.SweepAfter), "0s"), "GENWAY_RECONCILE_DAYS": itoa(d.ReconcileDays),
		"GENWAY_RECORD_DAYS": days(d.RecordRetention), "GENWAY_CHAT_KEEPALIVE": dur(d.ChatKeepAlive), "GENWAY_IMAGES_KEEPALIVE": dur(d.ImagesKeepAlive),
		"GENWAY_JOBS_TABLE": d.Names.JobsTable, "GENWAY_ACCOUNTS_TABLE": d.Names.AccountsTable, "GENWAY_RECORDS_TABLE": d.Names.RecordsTable,
		"GENWAY_JOBS_QUEUE": d.Names.JobsQueue, "GENWAY_JOBS_DLQ": d.Names.JobsDLQ, "GENWAY_MEDIA_BUCKET": d.Names.MediaBucket,
		"GENWAY_WEBHOOKS_QUEUE": d.Names.WebhooksQueue, "GENWAY_WEBHOOKS_DLQ": d.Names.WebhooksDLQ,
	}
	for v, want := range defaults {
		col, ok := documented[v]
		if !ok {
			continue // reported above
		}
		// A row of several variables lists their defaults in order.
		var stated []string
		for _, m := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(col, -1) {
			stated = append(stated, m[1])
		}
		if !slices.Contains(stated, want) {
			t.Errorf("docs/operations.md: %s defaults to %q; DefaultConfig has %q", v, col, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// dur writes d as the table does: "720h", "2m", "1s".
func dur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mib writes n bytes as the table does: "256MiB".
func mib(n int64) string { return itoa(int(n>>20)) + "MiB" }
