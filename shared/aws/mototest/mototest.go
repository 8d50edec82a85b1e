// Package mototest starts moto_server (Python moto 5, the AWS API emulator)
// for tests of the AWS adapters, and builds an aws.Config that talks only to
// it.
//
// Each call to Start runs its own moto_server on a free loopback port and
// stops it when the test ends (t.Cleanup). Start costs about a second, so a
// test file starts one server in its top-level test and shares the endpoint
// with its subtests, calling Reset between them to keep moto's tables small
// (moto's TransactWriteItems gets slower with every item in the tables).
// There is no package-level state: no server outlives the test that
// started it. Serialize puts a one-request-at-a-time proxy in front of moto
// for tests of concurrent conditional writes, which moto does not isolate.
//
// The child process gets the parent's environment minus every AWS_*
// variable (the build machines export AWS_CA_BUNDLE), and Config never reads
// shared config files or the environment, so tests cannot pick up the
// machine's AWS profile, credentials, CA bundle or endpoint.
package mototest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region Config uses.
const Region = "us-east-1"

// Binary is the moto server executable looked up on PATH.
const Binary = "moto_server"

// startTimeout bounds how long Start waits for moto_server to answer.
const startTimeout = 30 * time.Second

// Start runs moto_server on a free 127.0.0.1 port and returns its endpoint
// ("http://127.0.0.1:PORT"). The server is stopped when t ends. If
// moto_server is not on PATH, Start fails the test when the environment
// variable CI is set and skips it otherwise.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		msg := fmt.Sprintf("mototest: %s not found on PATH (pip install 'moto[server]'): %v", Binary, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a freed port can be taken before moto binds it
		endpoint, err := start(t, bin)
		if err == nil {
			return endpoint
		}
		lastErr = err
	}
	t.Fatalf("mototest: start %s: %v", Binary, lastErr)
	return ""
}

func start(t testing.TB, bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = childEnv(os.Environ())
	var out lockedBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := waitReady(ctx, endpoint, exited); err != nil {
		stop()
		return "", fmt.Errorf("%w; output:\n%s", err, out.String())
	}
	t.Cleanup(stop)
	return endpoint, nil
}

// childEnv returns env without AWS_* variables (AWS_CA_BUNDLE, AWS_PROFILE,
// credentials, endpoints): moto must not depend on the machine's AWS setup.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "AWS_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the moto API until it answers, the process exits, or ctx
// ends.
func waitReady(ctx context.Context, endpoint string, exited <-chan error) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("moto_server exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("moto_server at %s not ready: %w", endpoint, ctx.Err())
		case <-tick.C:
		}
	}
}

// Serialize returns the endpoint of a reverse proxy (on 127.0.0.1, closed
// when t ends) that forwards to endpoint one request at a time.
//
// moto_server serves requests on many threads and its DynamoDB backend
// takes no locks: a conditional write or TransactWriteItems checks its
// conditions and applies its writes without excluding concurrent requests,
// so two racing transactions can both pass "available >= :price", and
// concurrent updates of one item can be lost. DynamoDB itself is
// serializable. Tests that run writes concurrently and check their
// atomicity go through Serialize, which restores that guarantee (coarsely:
// nothing runs in parallel, and DynamoDB's TransactionConflict
// cancellations never happen). Do not use it for SQS long polls: one
// ReceiveMessage with WaitTimeSeconds would block every other request.
func Serialize(t testing.TB, endpoint string) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("mototest: serialize %q: %v", endpoint, err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Reset drops every resource in the moto server at endpoint
// (POST /moto-api/reset).
func Reset(endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reset moto: status %s", resp.Status)
	}
	return nil
}

// Config returns an aws.Config for the moto server at endpoint: region
// us-east-1, static dummy credentials, BaseEndpoint endpoint. It is built by
// hand, so nothing is read from shared config files or the environment
// (AWS_PROFILE, AWS_CA_BUNDLE, AWS_ENDPOINT_URL, ...).
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &http.Client{Timeout: 60 * time.Second},
		// Bounded, quick retries: moto answers or it does not.
		RetryMaxAttempts: 3,
	}
}

// lockedBuffer collects the child's output for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 { // keep the start, which has the useful errors
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
