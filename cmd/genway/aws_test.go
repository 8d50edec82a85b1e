package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// TestAWSBackend runs the quick start of the AWS-backed local mode against
// moto_server: `genway aws init`, then `GENWAY_BACKEND=aws genway serve`
// with the same environment, a job of each type to completion (through the
// emulated SQS event source mapping), settlement through the emulated
// DynamoDB stream mapping, and the operator commands on that backend.
func TestAWSBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	// Not mototest.Serialize: the SQS long poll would hold its single slot.
	endpoint := mototest.Start(t)
	env := map[string]string{
		"GENWAY_BACKEND":        "aws",
		"AWS_ENDPOINT_URL":      endpoint,
		"AWS_REGION":            mototest.Region,
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
		"GENWAY_DEV_CREDITS":    "500",
	}
	// A long-running vendor too: its polls go through SQS DelaySeconds.
	veo := fakeVertex(t, 2)
	for k, v := range vertexEnv(veo) {
		env[k] = v
	}
	env["GENWAY_MEDIA_POLL"] = "1s"
	// And veo-3.1 falls back to a fal model: a job Vertex AI refuses for
	// its Veo quota moves there (the move a conditional DynamoDB write),
	// and the stream settles it at fal's price.
	fal := fakeFal(t, 1)
	env["FAL_KEY"], env["FAL_BASE_URL"], env["GENWAY_CATALOG"] = vendorKeys["FAL_KEY"], fal.srv.URL, fallbackCatalog(t)
	env["GENWAY_MEDIA_ALLOW_PRIVATE"] = "1" // the fake's files are on loopback
	// The SDK reads credentials and profiles from the process environment;
	// make sure the machine's own settings cannot leak in.
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	dir := t.TempDir()
	var out bytes.Buffer
	for i := 0; i < 2; i++ { // idempotent
		out.Reset()
		if err := run(t.Context(), []string{"aws", "init"}, testEnv(dir, env), &out, io.Discard); err != nil {
			t.Fatalf("aws init (run %d): %v\n%s", i+1, err, out.String())
		}
	}
	// The crash between storing a job and sending its message, before the
	// server starts: "lost" was stored with its hold and never sent;
	// "dup" was stored and sent, and its message is still in the queue
	// when the sweep sends another. The server's first sweep re-sends
	// both (GENWAY_SWEEP_AFTER 1m; they are ten minutes old).
	env["GENWAY_SWEEP_AFTER"] = "1m"
	cfg := mototest.Config(endpoint)
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), awsenv.DefaultJobsTable, awsenv.DefaultAccountsTable)
	ctx := t.Context()
	if _, err := store.Grant(ctx, "crash", 100*credits.Credit, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	stuck := map[string]credits.Amount{} // id -> price
	for i, price := range []credits.Amount{2 * credits.Credit, 3_250_000} {
		id, err := jobs.NewID(jobs.TypeSFX)
		if err != nil {
			t.Fatal(err)
		}
		created := time.Now().Add(-10 * time.Minute).Unix()
		j := &jobs.Job{ID: id, Account: "crash", Type: jobs.TypeSFX, Model: "synthetic-sfx", Status: jobs.Queued,
			Input: jobs.Input{Prompt: "pop", Duration: 1, Format: "mp3"}, Price: price, Created: created, Updated: created}
		if _, err := store.Create(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			sqsClient := sqs.NewFromConfig(cfg)
			names := app.DefaultConfig(app.Serve).Names
			url, err := sqsqueue.LookupURL(ctx, sqsClient, names.JobsQueueURL, names.JobsQueue)
			if err != nil {
				t.Fatal(err)
			}
			if err := sqsqueue.New(sqsClient, url).Enqueue(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
		stuck[id] = price
	}
	s := startServer(t, dir, env)

	// Chat routing on the AWS-backed mode: the lead fails before its first
	// token (the synthetic trigger), its fallback answers; the usage
	// (checked at the end, from DynamoDB) is the fallback's.
	var answer struct{ Model string }
	code, hdr := s.do(t, "POST", "/v1/chat/completions", map[string]any{"models": []string{"synthetic/echo", "synthetic/thinker"},
		"messages": []map[string]string{{"role": "user", "content": "fail:503@synthetic/echo hello"}}}, nil, &answer)
	if want := "synthetic/echo=503, synthetic/echo=503, synthetic/echo=503, synthetic/thinker=200"; code != 200 || answer.Model != "synthetic/thinker" || hdr.Get("X-Genway-Attempts") != want {
		t.Errorf("chat with a failing lead = %d, model %q, attempts %q; want 200 from synthetic/thinker after %q", code, answer.Model, hdr.Get("X-Genway-Attempts"), want)
	}

	tests := []struct {
		req         map[string]any
		contentType string
		duration    float64
		price       int64 // charged
		servedBy    string
	}{
		{map[string]any{"type": "music", "model": "synthetic-music", "prompt": "tune", "duration": 2}, "audio/mpeg", 2, 2, ""},
		{map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "pop", "duration": 1, "format": "wav"}, "audio/wav", 1, 1, ""},
		{map[string]any{"type": "video", "model": "synthetic-video", "prompt": "ball", "duration": 1, "size": "160x120"}, "video/mp4", 1, 1, ""},
		{map[string]any{"type": "video", "model": "veo-3.1-fast", "prompt": "a fox", "duration": 4}, "video/mp4", 2, 48, ""},
		{map[string]any{"type": "video", "model": "veo-3.1", "prompt": "quota: a fox"}, "video/mp4", 2, falPrice8s, "fal-video-8s"},
	}
	var spent int64
	for _, tt := range tests {
		var j jobResp
		if code, _ := s.do(t, "POST", "/v1/jobs", tt.req, nil, &j); code != 200 || j.Status != "queued" {
			t.Fatalf("create %v = %d %+v", tt.req, code, j)
		}
		got, seen := s.waitJob(t, j.ID, 60*time.Second)
		if got.Status != "completed" || got.Output == nil || got.Output.ContentType != tt.contentType {
			t.Fatalf("job %s = %+v (statuses %v)", j.ID, got, seen)
		}
		if !strings.HasPrefix(got.Output.URL, endpoint) || !strings.Contains(got.Output.URL, "X-Amz-Signature=") {
			t.Errorf("output url %q is not a presigned S3 link on the endpoint", got.Output.URL)
		}
		checkMedia(t, downloadAny(t, got.Output.URL), tt.contentType, tt.duration)
		if want := cmp.Or(tt.servedBy, tt.req["model"].(string)); got.ServedBy != want {
			t.Errorf("job %s served_by %q; want %q", j.ID, got.ServedBy, want)
		}
		spent += tt.price
	}
	if falTaken, _ := fal.counts(); veo.Quota() != 1 || falTaken != 1 {
		t.Errorf("Veo refused %d submits, fal took %d; want one each", veo.Quota(), falTaken)
	}
	var failed jobResp
	s.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "fail: please", "duration": 3}, nil, &failed)
	if j, _ := s.waitJob(t, failed.ID, 60*time.Second); j.Status != "failed" {
		t.Fatalf("fail: job = %s", j.Status)
	}
	var cr struct{ Balance, Held, Available int64 }
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if (cr.Held == 0 && cr.Balance == 500-spent) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cr.Balance != 500-spent || cr.Held != 0 || cr.Available != 500-spent {
		t.Errorf("credits = %+v; want balance %d, nothing held (settled through the stream)", cr, 500-spent)
	}

	// The swept jobs ran once each and were charged once each.
	for id := range stuck {
		var j *jobs.Job
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var err error
			if j, err = store.Get(ctx, id); err != nil {
				t.Fatal(err)
			}
			if j.Status.Final() {
				break
			}
		}
		if j.Status != jobs.Completed || j.Attempts != 1 {
			t.Errorf("swept job %s = %s after %d attempts; want completed after 1", id, j.Status, j.Attempts)
		}
	}
	var a credits.Account
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if a, _ = store.Account(ctx, "crash"); a.Held == 0 {
			break
		}
	}
	l, err := store.Ledger(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	captured := map[string]credits.Amount{}
	for _, e := range l {
		if e.Kind == credits.Capture {
			captured[e.JobID] += e.Amount
		}
	}
	if a.Balance != 94_750_000 || a.Held != 0 || len(captured) != 2 || captured[firstKey(stuck, 2*credits.Credit)] != 2*credits.Credit || captured[firstKey(stuck, 3_250_000)] != 3_250_000 {
		t.Errorf("crash account %+v, captures %v; want balance 94.75, nothing held, one capture per swept job", a, captured)
	}

	// Operator commands on the AWS backend, while serving.
	out.Reset()
	if err := run(t.Context(), []string{"keys", "create", "--account", "acme", "--credits", "7"}, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	acme := &server{base: s.base, key: lines[len(lines)-1]}
	acme.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if cr.Balance != 7 {
		t.Errorf("new account's credits = %+v; want 7", cr)
	}
	// A job refused with 402 is a failed TransactWriteItems, which moto
	// rolls back by swapping the table: the stream reader must still see
	// (and settle) the next job.
	if code, _ := acme.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "big", "duration": 10}, nil, nil); code != 402 {
		t.Fatalf("a 10-credit job with 7 credits = %d; want 402", code)
	}
	var after jobResp
	if code, _ := acme.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "pop", "duration": 2}, nil, &after); code != 200 {
		t.Fatalf("create after the 402 = %d", code)
	}
	if j, seen := acme.waitJob(t, after.ID, 60*time.Second); j.Status != "completed" {
		t.Fatalf("job after the 402 = %+v (statuses %v)", j, seen)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if acme.do(t, "GET", "/v1/credits", nil, nil, &cr); cr.Held == 0 {
			break
		}
	}
	if cr.Balance != 5 || cr.Held != 0 {
		t.Errorf("credits after a 402 and a 2-credit job = %+v; want balance 5, nothing held (settled)", cr)
	}
	out.Reset()
	if err := run(t.Context(), []string{"credits", "ledger", "--account", "dev"}, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), " capture "); n != len(tests) {
		t.Errorf("dev ledger has %d captures; want %d, one per job:\n%s", n, len(tests), out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf(" capture  %d ", falPrice8s)) {
		t.Errorf("dev ledger has no capture of %d (the fallback's price):\n%s", falPrice8s, out.String())
	}
	if submits, _, _ := veo.Counts(); submits != 1 {
		t.Errorf("the Veo job was submitted %d times; want once", submits)
	}
	// The job usage, counted in the settlements' transactions: the job
	// Veo refused counts under fal-video-8s, which made it, at its price.
	out.Reset()
	if err := run(t.Context(), []string{"credits", "usage", "--account", "dev"}, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	usage := collapse(out.String()) + "\n"
	if want := fmt.Sprintf(" video fal-video-8s 0 0 0 1 %d\n", falPrice8s); !strings.Contains(usage, want) || strings.Contains(usage, " video veo-3.1 ") {
		t.Errorf("credits usage:\n%s\nwant a line ending %q and none for veo-3.1", out.String(), want)
	}
	// The routed chat counts once, under the model that answered.
	if !strings.Contains(usage, " chat synthetic/thinker 1 ") || strings.Contains(usage, " chat synthetic/echo ") {
		t.Errorf("credits usage:\n%s\nwant one synthetic/thinker chat request and no synthetic/echo one", out.String())
	}
}

// downloadAny fetches a link from any loopback host.
func downloadAny(t *testing.T, url string) []byte {
	t.Helper()
	return downloadFrom(t, url, "http://127.0.0.1:")
}

// firstKey returns the key of m whose value is v ("" if none).
func firstKey(m map[string]credits.Amount, v credits.Amount) string {
	for k, x := range m {
		if x == v {
			return k
		}
	}
	return ""
}

// awsServe starts moto_server, readies its tables, queue and bucket for
// genway serve with GENWAY_BACKEND=aws (genway aws init), and returns its
// endpoint, the server's environment (more may be added before
// startServer) and its data directory. The process's own AWS settings
// are cleared so that the machine's cannot leak in.
func awsServe(t *testing.T) (endpoint string, env map[string]string, dir string) {
	t.Helper()
	endpoint = mototest.Start(t)
	env = map[string]string{
		"GENWAY_BACKEND":        "aws",
		"AWS_ENDPOINT_URL":      endpoint,
		"AWS_REGION":            mototest.Region,
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
	}
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	dir = t.TempDir()
	if err := run(t.Context(), []string{"aws", "init"}, testEnv(dir, env), io.Discard, io.Discard); err != nil {
		t.Fatalf("aws init: %v", err)
	}
	return endpoint, env, dir
}
