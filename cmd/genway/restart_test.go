package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/mototest"
)

// buildGenway builds this command once per test binary.
var buildGenway = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "genway-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "genway")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{string(out), err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// startProcess runs the genway binary's serve on dir and waits until it
// serves; extra adds environment variables.
func startProcess(t *testing.T, dir string, extra ...map[string]string) (*server, *exec.Cmd) {
	t.Helper()
	bin, err := buildGenway()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	cmd := exec.Command(bin, "serve")
	env := testEnv(dir, map[string]string{"GENWAY_DEV_CREDITS": "100000"})
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range []string{"GENWAY_ADDR", "GENWAY_DATA_DIR", "GENWAY_DEV_KEY", "GENWAY_DEV_CREDITS"} {
		cmd.Env = append(cmd.Env, k+"="+env(k))
	}
	for _, m := range extra {
		for k, v := range m {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go scanLines(stdout, lines)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("genway serve exited before serving")
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				go func() {
					for range lines {
					}
				}()
				return &server{base: m[1], key: testKey}, cmd
			}
		case <-deadline:
			t.Fatal("genway serve did not start within 30 s")
		}
	}
}

// TestKillAndRestart SIGKILLs the server while jobs are being created and
// processed, restarts it on the same data directory, and checks that every
// job the client was told about finishes, exactly once, and is charged once.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real server")
	}
	dir := t.TempDir()
	s, cmd := startProcess(t, dir)

	var created []string
	var mu sync.Mutex
	stopCreating := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keep creating jobs until the kill
		defer wg.Done()
		for i := 0; i < 400; i++ {
			select {
			case <-stopCreating:
				return
			default:
			}
			req := map[string]any{"type": "video", "model": "synthetic-video", "prompt": "ball " + strings.Repeat("x", i%7), "duration": 2, "size": "320x240"}
			if i%3 == 1 {
				req = map[string]any{"type": "music", "model": "synthetic-music", "prompt": "tune", "duration": 3}
			}
			var j jobResp
			code, _, err := doRequest(s, "POST", "/v1/jobs", req, nil, &j)
			if err != nil {
				return // the server is gone
			}
			if code == 200 {
				mu.Lock()
				created = append(created, j.ID)
				mu.Unlock()
			}
		}
	}()
	// Kill once some jobs are processing and more are queued.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(created)
		mu.Unlock()
		if n >= 12 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	close(stopCreating)
	wg.Wait()
	if len(created) < 3 {
		t.Fatalf("only %d jobs created before the kill", len(created))
	}

	s2, _ := startProcess(t, dir)
	var prices int64
	for _, id := range created {
		j, _ := s2.waitJob(t, id, 120*time.Second)
		if j.Status != "completed" {
			t.Errorf("job %s ended %s (%+v)", id, j.Status, j.Error)
		}
		if strings.HasPrefix(id, "job_video_") {
			prices += 2
		} else {
			prices += 3
		}
	}
	// Every job created is captured once; jobs created but not acknowledged
	// before the kill (the client saw an error) may exist too and are also
	// captured once, so compare the ledger with the server's own view.
	var cr struct{ Balance, Held, Available int64 }
	deadline = time.Now().Add(30 * time.Second)
	for {
		s2.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Held == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cr.Held != 0 {
		t.Fatalf("credits still held: %+v", cr)
	}
	charged := 100000 - cr.Balance
	if charged < prices || charged > prices+3 {
		t.Errorf("charged %d credits for %d acknowledged jobs costing %d; want each charged exactly once", charged, len(created), prices)
	}
	t.Logf("%d jobs created before SIGKILL; all completed after restart; charged %d credits (acknowledged jobs cost %d)", len(created), charged, prices)
}

// hookCounter is a webhook receiver that counts the deliveries of each job
// (by the event's data.id) and answers 200.
type hookCounter struct {
	mu  sync.Mutex
	got map[string]int
}

func (h *hookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.NewDecoder(r.Body).Decode(&ev)
	h.mu.Lock()
	h.got[ev.Data.ID]++
	h.mu.Unlock()
}

func (h *hookCounter) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[id]
}

// finished reports whether job id is completed, its hold settled (nothing
// held: no other job runs) and its webhook delivered.
func finished(t *testing.T, s *server, hooks *hookCounter, id string) bool {
	t.Helper()
	var j jobResp
	if code, _, err := doRequest(s, "GET", "/v1/jobs/"+id, nil, nil, &j); err != nil || code != 200 || j.Status != "completed" {
		return false
	}
	var cr struct{ Held int64 }
	if code, _, err := doRequest(s, "GET", "/v1/credits", nil, nil, &cr); err != nil || code != 200 || cr.Held != 0 {
		return false
	}
	return hooks.count(id) > 0
}

// abandonReceives leaves, on the jobs and the webhooks queues, receives
// waiting wait at moto whose client has gone: what a `genway serve`
// killed while polling leaves (moto, like SQS, hands such a receive the
// next message and hides it for the visibility timeout).
func abandonReceives(t *testing.T, endpoint string, wait time.Duration) {
	t.Helper()
	client := sqs.NewFromConfig(mototest.Config(endpoint))
	names := app.DefaultConfig(app.Serve).Names
	ctx := context.Background()
	var urls []string
	for _, name := range []string{names.JobsQueue, names.WebhooksQueue} {
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, aws.ToString(out.QueueUrl))
	}
	var wg sync.WaitGroup
	for _, url := range urls {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
					WaitTimeSeconds: int32(wait / time.Second)})
			}()
		}
	}
	wg.Wait()
}

// TestAWSRestartResumes is the restart of the AWS-backed local mode:
// after many finished jobs, a SIGKILL and a start again, the next job is
// completed, settled and its webhook delivered about as fast as the same
// job before the kill, whether the stream reader resumes from its
// checkpoint or (its checkpoint lost) catches up on every record beside
// the new ones; nothing the new process sends is taken by a receive the
// killed one left waiting on a queue.
func TestAWSRestartResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server and kills a real server")
	}
	endpoint, env, dir := awsServe(t)
	hooks := &hookCounter{got: map[string]int{}}
	rcv := httptest.NewServer(hooks)
	defer rcv.Close()
	env["GENWAY_WEBHOOK_ALLOW_PRIVATE"] = "1"
	s, cmd := startProcess(t, dir, env)
	sfx := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "pop", "duration": 1, "webhook_url": rcv.URL + "/hook"}

	// Many finished jobs: the stream holds all their records.
	const many = 150
	var ids []string
	for range many {
		var j jobResp
		if code, _, err := doRequest(s, "POST", "/v1/jobs", sfx, nil, &j); err != nil || code != 200 {
			t.Fatalf("create = %d, %v", code, err)
		}
		ids = append(ids, j.ID)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for !finished(t, s, hooks, id) {
			if time.Now().After(deadline) {
				t.Fatalf("job %s not completed, settled and announced within 5 minutes", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// timeJob makes one more job and returns how long it takes to be
	// completed, settled and announced.
	timeJob := func(s *server) time.Duration {
		t.Helper()
		began := time.Now()
		var j jobResp
		if code, _, err := doRequest(s, "POST", "/v1/jobs", sfx, nil, &j); err != nil || code != 200 {
			t.Fatalf("create = %d, %v", code, err)
		}
		ids = append(ids, j.ID)
		for !finished(t, s, hooks, j.ID) {
			if time.Since(began) > 3*time.Minute {
				t.Fatalf("job %s not completed, settled and announced within 3 minutes", j.ID)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(began)
	}
	before := timeJob(s)
	// Generous: the restart's guard delays what is sent in its first
	// seconds (restartQuiet), and the machine is shared.
	limit := 3*before + restartQuiet + 10*time.Second

	for _, lost := range []bool{false, true} {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		checkpoint := filepath.Join(dir, streamCheckpointFile)
		if _, err := os.Stat(checkpoint); err != nil {
			t.Errorf("no stream checkpoint in the data directory after %d jobs: %v", len(ids), err)
		}
		if lost {
			os.Remove(checkpoint) // the whole stream is read again
		}
		abandonReceives(t, endpoint, localPollWait)
		s, cmd = startProcess(t, dir, env)
		after := timeJob(s)
		t.Logf("checkpoint lost %v: a job before the kill took %v; the first after the restart %v", lost, before, after)
		if after > limit {
			t.Errorf("checkpoint lost %v: the first job after the restart took %v; want at most %v (the same job before the kill: %v)", lost, after, limit, before)
		}
	}

	// Each job once: one webhook, one capture.
	for _, id := range ids {
		if n := hooks.count(id); n != 1 {
			t.Errorf("job %s announced %d times; want once", id, n)
		}
	}
	var cr struct{ Balance, Held int64 }
	s.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if want := int64(100000 - len(ids)); cr.Balance != want || cr.Held != 0 {
		t.Errorf("credits = %+v; want balance %d (each of %d jobs charged once), nothing held", cr, want, len(ids))
	}
}
