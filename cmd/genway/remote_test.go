package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testAdminToken = "gwop_remotetestremotetestremotetestremote"

// TestRemoteCLI: with GENWAY_URL and GENWAY_ADMIN_TOKEN the operator
// commands go to a running server's admin API (no data directory
// needed), a wrong token is refused, and jobs create --wait --output
// runs a job through the public API to a file.
func TestRemoteCLI(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]string{"GENWAY_ADMIN_TOKEN": testAdminToken})
	remote := func(token string, extra map[string]string) func(string) string {
		env := map[string]string{"GENWAY_URL": s.base + "/v1", "GENWAY_ADMIN_TOKEN": token,
			"GENWAY_DATA_DIR": filepath.Join(t.TempDir(), "nowhere")}
		for k, v := range extra {
			env[k] = v
		}
		return func(k string) string { return env[k] }
	}
	cli := func(env func(string) string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, env, &out, io.Discard)
		return out.String(), err
	}
	env := remote(testAdminToken, nil)
	if out, err := cli(env, "accounts", "create", "--account", "acme", "--credits", "40", "--note", "trial"); err != nil || !strings.Contains(out, "balance 40") {
		t.Fatalf("accounts create = %q, %v", out, err)
	}
	out, err := cli(env, "keys", "create", "--account", "acme")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	if err != nil || !strings.HasPrefix(key, "sk_live_") {
		t.Fatalf("keys create = %q, %v", out, err)
	}
	if out, err := cli(env, "credits", "grant", "--account", "acme", "--amount", "10", "--note", "bonus"); err != nil || !strings.Contains(out, "balance 50") {
		t.Errorf("credits grant = %q, %v", out, err)
	}
	if out, err := cli(env, "accounts", "list"); err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "dev") {
		t.Errorf("accounts list = %q, %v", out, err)
	}
	if _, err := cli(remote("gwop_wrong", nil), "accounts", "list"); err == nil || !strings.Contains(err.Error(), "operator token") {
		t.Errorf("a wrong token: %v; want the admin API's refusal", err)
	}
	if _, err := cli(remote(key, nil), "accounts", "list"); err == nil {
		t.Error("an API key was accepted as the operator token")
	}
	// A job through the public API with the new key, waited for and saved.
	file := filepath.Join(t.TempDir(), "door.mp3")
	jobEnv := remote(testAdminToken, map[string]string{"GENWAY_API_KEY": key})
	out, err = cli(jobEnv, "jobs", "create", "--type", "sfx", "--model", "synthetic-sfx", "--prompt", "door slam", "--duration", "2", "--output", file)
	if err != nil || !strings.Contains(out, "completed after") || !strings.Contains(out, "saved "+file) {
		t.Fatalf("jobs create --output = %q, %v", out, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() < 1000 {
		t.Errorf("downloaded file: %v, %v", fi, err)
	}
	if out, err := cli(env, "credits", "show", "--account", "acme"); err != nil || strings.Contains(out, "balance 50,") {
		t.Errorf("after the job: %q, %v; want it charged", out, err)
	}
	// The job's credits show in the usage, read through the admin API,
	// once the feed has settled it.
	const wantLine = " sfx synthetic-sfx 0 0 0 1 2\n" // after the day
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := cli(env, "credits", "usage", "--account", "acme")
		if err == nil && strings.Contains(collapse(out)+"\n", wantLine) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("credits usage = %q, %v; want a line %q", out, err, wantLine)
		}
	}
	// An image (as a link, downloaded) and a speech with the same key; both
	// in the usage at once (settled with their requests), no reservation
	// left open.
	img := filepath.Join(t.TempDir(), "fox.png")
	if out, err := cli(jobEnv, "images", "generate", "--model", "synthetic-image", "--prompt", "a fox", "--size", "256x256", "--response-format", "url", "--output", img); err != nil || !strings.Contains(out, "wrote "+img+": ") || !strings.Contains(out, "256x256 png") {
		t.Errorf("images generate = %q, %v", out, err)
	}
	wav := filepath.Join(t.TempDir(), "hi.wav")
	if out, err := cli(jobEnv, "speech", "--model", "synthetic-speech", "--format", "wav", "--input", "hello there", "--output", wav); err != nil || !strings.Contains(out, "wrote "+wav+": ") {
		t.Errorf("speech = %q, %v", out, err)
	}
	out, err = cli(env, "credits", "usage", "--account", "acme")
	for _, want := range []string{" image synthetic-image 0 0 0 1 1\n", " speech synthetic-speech 0 0 0 1 0.011\n"} { // 11 characters at 1 credit per 1,000
		if err != nil || !strings.Contains(collapse(out)+"\n", want) {
			t.Errorf("credits usage = %q, %v; want a line ending %q", out, err, want)
		}
	}
	if out, err := cli(env, "credits", "reservations", "--account", "acme"); err != nil || !strings.Contains(collapse(out), "\ntotal 0 0 open") {
		t.Errorf("credits reservations = %q, %v; want none open", out, err)
	}
	// The feed settled the job: the reconciler finds nothing to do (the
	// job is within its grace anyway), and says so.
	if out, err := cli(env, "credits", "reconcile", "--days", "1"); err != nil || !strings.Contains(out, "settled 0") {
		t.Errorf("credits reconcile = %q, %v", out, err)
	}
	if _, err := cli(env, "credits", "reconcile", "--days", "0"); err == nil {
		t.Error("credits reconcile --days 0 was accepted")
	}
}

// collapse joins each line's fields with one space.
func collapse(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}
