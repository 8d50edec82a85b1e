package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genway/genway/shared/local/localstore"
)

// TestHelpEverywhere: every command and subcommand answers --help (and -h)
// with its usage on stdout and success, not a usage error.
func TestHelpEverywhere(t *testing.T) {
	env := testEnv(t.TempDir(), nil)
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"},
		{"serve", "--help"},
		{"keys", "--help"}, {"keys", "create", "--help"}, {"keys", "list", "-h"}, {"keys", "revoke", "--help"},
		{"credits", "--help"}, {"credits", "grant", "--help"}, {"credits", "show", "--help"}, {"credits", "ledger", "--help"},
		{"credits", "usage", "--help"}, {"credits", "limit", "--help"}, {"credits", "reconcile", "--help"}, {"credits", "reservations", "--help"},
		{"aws", "--help"}, {"aws", "init", "--help"},
		{"accounts", "--help"}, {"accounts", "list", "--help"}, {"accounts", "create", "--help"},
		{"jobs", "--help"}, {"jobs", "create", "--help"},
		{"images", "--help"}, {"images", "generate", "--help"}, {"speech", "--help"}, {"speech", "-h"},
		{"webhooks", "--help"}, {"webhooks", "url", "--help"}, {"webhooks", "resend", "-h"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), args, env, &out, io.Discard); err != nil {
			t.Errorf("genway %s = %v; want success", strings.Join(args, " "), err)
			continue
		}
		if !strings.Contains(out.String(), "Usage") {
			t.Errorf("genway %s printed %q; want its usage", strings.Join(args, " "), out.String())
		}
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"credits", "grant", "--help"}, env, &out, io.Discard); err != nil || !strings.Contains(out.String(), "-create") {
		t.Errorf("credits grant --help = %v, %q; want the flags, --create among them", err, out.String())
	}
	// A real mistake is still a usage error.
	var ue usageError
	if err := run(t.Context(), []string{"keys", "create", "--nope"}, env, io.Discard, io.Discard); !errors.As(err, &ue) {
		t.Errorf("keys create --nope = %v; want a usage error", err)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{arg}, testEnv(t.TempDir(), nil), &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "genway ") || !strings.Contains(out.String(), "go1.") {
			t.Errorf("genway %s = %v, %q; want the version", arg, err, out.String())
		}
	}
}

// TestGrantNeedsCreate: a grant to an account that does not exist (a typo)
// makes nothing unless --create says so.
func TestGrantNeedsCreate(t *testing.T) {
	dir := t.TempDir()
	initDataDir(t, dir)
	env := testEnv(dir, nil)
	var out bytes.Buffer
	err := run(t.Context(), []string{"credits", "grant", "--account", "acmee", "--amount", "5"}, env, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--create") {
		t.Fatalf("grant to a new account = %v; want an error pointing at --create", err)
	}
	if err := run(t.Context(), []string{"credits", "show", "--account", "acmee"}, env, io.Discard, io.Discard); err == nil {
		t.Fatal("the refused grant made the account")
	}
	out.Reset()
	if err := run(t.Context(), []string{"credits", "grant", "--account", "acmee", "--amount", "5", "--create"}, env, &out, io.Discard); err != nil || !strings.Contains(out.String(), "balance 5") {
		t.Fatalf("grant --create = %v, %q; want balance 5", err, out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"credits", "grant", "--account", "acmee", "--amount", "2"}, env, &out, io.Discard); err != nil || !strings.Contains(out.String(), "balance 7") {
		t.Fatalf("grant to an existing account = %v, %q; want balance 7", err, out.String())
	}
}

// TestCLIDecimalCredits: --credits, --amount and --credit-limit take
// decimal credits to 6 places, and the CLI shows them so; more places, or
// more than the maximum, are refused and change nothing.
func TestCLIDecimalCredits(t *testing.T) {
	dir := t.TempDir()
	initDataDir(t, dir)
	env := testEnv(dir, nil)
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, env, &out, io.Discard)
		return out.String(), err
	}
	if out, err := cli("keys", "create", "--account", "frac", "--credits", "0.25", "--credit-limit", "0.5"); err != nil ||
		!strings.Contains(out, "credits added: 0.25") || !strings.Contains(out, "credit_limit=0.5") {
		t.Fatalf("keys create --credits 0.25 --credit-limit 0.5 = %v, %q", err, out)
	}
	if out, err := cli("credits", "grant", "--account", "frac", "--amount", "0.000001"); err != nil || !strings.Contains(out, "balance 0.250001, held 0, available 0.250001") {
		t.Fatalf("credits grant --amount 0.000001 = %v, %q; want balance 0.250001", err, out)
	}
	if out, err := cli("keys", "list", "--account", "frac"); err != nil || !strings.Contains(out, "0/0.5") {
		t.Errorf("keys list = %v, %q; want spent 0 of 0.5", err, out)
	}
	for _, args := range [][]string{
		{"credits", "grant", "--account", "frac", "--amount", "0.0000001"},
		{"credits", "grant", "--account", "frac", "--amount", "1e13"},
		{"credits", "grant", "--account", "frac", "--amount", "1000000000000"},
		{"keys", "create", "--account", "frac", "--credit-limit", "0.1234567"},
		{"credits", "limit", "--account", "frac", "--rpm", "-1000"},
	} {
		if out, err := cli(args...); err == nil {
			t.Errorf("genway %s = %q, nil; want an error", strings.Join(args, " "), out)
		}
	}
	if out, err := cli("credits", "show", "--account", "frac"); err != nil || !strings.Contains(out, "balance 0.250001,") || !strings.Contains(out, "rate limit default") {
		t.Errorf("credits show after the refusals = %v, %q; want it unchanged", err, out)
	}
}

// TestRevokeLongPrefix: a prefix longer than the 12 characters Genway keeps
// is not "not found" without a word: the error says what a prefix is.
func TestRevokeLongPrefix(t *testing.T) {
	dir := t.TempDir()
	initDataDir(t, dir)
	env := testEnv(dir, nil)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "create", "--account", "a"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	key := lines[len(lines)-1]
	err := run(t.Context(), []string{"keys", "revoke", key[:20]}, env, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), key[:12]) {
		t.Fatalf("revoke with a 20-character prefix = %v; want an error showing the 12-character prefix %s", err, key[:12])
	}
	out.Reset()
	if err := run(t.Context(), []string{"keys", "revoke", key[:12]}, env, &out, io.Discard); err != nil || !strings.Contains(out.String(), "revoked") {
		t.Fatalf("revoke with the prefix = %v, %q", err, out.String())
	}
}

// TestBusyPort: a port in use says how to pick another.
func TestBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(t.Context(), []string{"serve"}, testEnv(t.TempDir(), map[string]string{"GENWAY_ADDR": ln.Addr().String()}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "GENWAY_ADDR") {
		t.Fatalf("serve on a busy port = %v; want a hint about GENWAY_ADDR", err)
	}
}

// initDataDir makes an embedded store in dir, as genway serve's first
// start does.
func initDataDir(t *testing.T, dir string) {
	t.Helper()
	db, _, _, _ := embeddedPaths(dir)
	st, err := localstore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestOperatorNeedsDataDir: an operator command where no genway serve ever
// ran refuses, says where it looked, and creates nothing.
func TestOperatorNeedsDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "elsewhere", ".genway")
	err := run(t.Context(), []string{"keys", "create", "--account", "a"}, testEnv(dir, nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "GENWAY_DATA_DIR") {
		t.Fatalf("keys create without a data dir = %v; want a refusal naming %s and GENWAY_DATA_DIR", err, dir)
	}
	if _, serr := os.Stat(dir); serr == nil {
		t.Errorf("the refused command created %s", dir)
	}
}
