package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
)

// Names of the test's AWS resources, given to the functions as Lambda
// would through the template's environment.
const (
	testJobsTable     = "genway-test-jobs"
	testAccountsTable = "genway-test-accounts"
	testRecordsTable  = "genway-test-records"
	testQueue         = "genway-test-jobs"
	testDLQ           = "genway-test-jobs-dlq"
	testHooksQueue    = "genway-test-webhooks"
	testHooksDLQ      = "genway-test-webhooks-dlq"
	testBucket        = "genway-test-media"
	testAccount       = "acct_lambda"
	testCredits       = 1000 * credits.Credit
)

// readEvent returns events/<name> with each old -> new replacement made.
func readEvent(t testing.TB, name string, replace ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(replace...).Replace(string(b)))
}

// eventKey is the placeholder key in events/*.json.
const eventKey = "Bearer sk_live_REPLACE0WITH0YOUR0KEY000000000000000000000"

// eventAdminToken is the placeholder operator token in events/admin-*.json.
const eventAdminToken = "Bearer gwop_REPLACE0WITH0THE0OPERATOR0TOKEN00000000000000"

// eventGenerationID is the placeholder record id in events/generations.json.
const eventGenerationID = "chatcmpl-REPLACE0WITH0AN0ANSWER0ID"

// eventJobID is the placeholder job id in events/*.json.
const eventJobID = "job_music_00000000000000000000"

// proxyResponse decodes a buffered function's API Gateway proxy response.
func proxyResponse(t *testing.T, res *result) events.APIGatewayProxyResponse {
	t.Helper()
	if res.kind != "response" {
		t.Fatalf("function reported an error: %s", res.body)
	}
	var r events.APIGatewayProxyResponse
	if err := json.Unmarshal(res.body, &r); err != nil {
		t.Fatalf("response %q is not an API Gateway proxy response: %v", res.body, err)
	}
	return r
}

// env is the function environment for the moto endpoint. The webhooks
// queue is found by its name (GENWAY_WEBHOOKS_QUEUE; the template gives
// its URL).
func env(endpoint, queueURL string, extra ...string) map[string]string {
	m := map[string]string{
		"AWS_ENDPOINT_URL":      endpoint,
		"GENWAY_JOBS_TABLE":     testJobsTable,
		"GENWAY_ACCOUNTS_TABLE": testAccountsTable,
		"GENWAY_RECORDS_TABLE":  testRecordsTable,
		"GENWAY_JOBS_QUEUE_URL": queueURL,
		"GENWAY_WEBHOOKS_QUEUE": testHooksQueue,
		"GENWAY_MEDIA_BUCKET":   testBucket,
		"GENWAY_SYNTHETIC":      "on",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// TestFunctions builds every function's bootstrap, runs each against a
// Runtime API server in this test with moto behind it, and drives a job
// from creation to settlement with the events in events/.
func TestFunctions(t *testing.T) {
	bootstraps := buildAll(t)
	endpoint := mototest.Start(t)
	ctx := context.Background()
	cfg := mototest.Config(endpoint)
	ddb := dynamodb.NewFromConfig(cfg)
	if err := dynamostore.CreateTables(ctx, ddb, testJobsTable, testAccountsTable); err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.CreateRecordsTable(ctx, ddb, testRecordsTable); err != nil {
		t.Fatal(err)
	}
	sqsClient := sqs.NewFromConfig(cfg)
	queueURL, err := sqsqueue.CreateQueues(ctx, sqsClient, testQueue, testDLQ, 720)
	if err != nil {
		t.Fatal(err)
	}
	hooksURL, err := sqsqueue.CreateQueues(ctx, sqsClient, testHooksQueue, testHooksDLQ, 360)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3media.CreateBucket(ctx, s3media.NewClient(cfg), testBucket); err != nil {
		t.Fatal(err)
	}
	store := dynamostore.New(ddb, testJobsTable, testAccountsTable)
	store.RecordsTable = testRecordsTable
	if _, err := store.Grant(ctx, testAccount, testCredits, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	key, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutKey(ctx, auth.NewRecord(key, testAccount, time.Now())); err != nil {
		t.Fatal(err)
	}
	withKey := []string{eventKey, "Bearer " + string(key)}

	// run starts the named function and invokes it once with payload.
	run := func(t *testing.T, name string, payload []byte, extra ...string) *result {
		t.Helper()
		api := newRuntimeAPI(t)
		p := start(t, bootstraps[name], api, env(endpoint, queueURL, extra...))
		d, err := p.initTime(api)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: init (process start to first /next) %v", name, d.Round(time.Microsecond))
		res, err := api.invoke(payload)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("models", func(t *testing.T) {
		r := proxyResponse(t, run(t, "models", readEvent(t, "models.json", withKey...)))
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(r.Body), &list); r.StatusCode != 200 || err != nil || list.Object != "list" || len(list.Data) == 0 {
			t.Fatalf("GET /v1/models = %d %s; want 200 and a non-empty list", r.StatusCode, r.Body)
		}
		if id := r.MultiValueHeaders["X-Request-Id"]; len(id) != 1 || id[0] != "8f3a2b1c-0d4e-4f5a-9b6c-7d8e9f0a1b2c" {
			t.Errorf("X-Request-Id = %v; want the API Gateway request id", id)
		}
	})

	t.Run("admin", func(t *testing.T) {
		// The operator token and the console sessions' secret live in SSM
		// SecureString parameters that only the admin function reads.
		const token = "gwop_lambdatestlambdatestlambdatestlambda"
		for name, value := range map[string]string{"/genway/admin-token": token, "/genway/console-secret": "lambda-test-console-secret-0123456789abcdef"} {
			if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name),
				Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
				t.Fatal(err)
			}
		}
		tokenEnv := []string{"GENWAY_ADMIN_TOKEN_PARAMETER", "/genway/admin-token", "GENWAY_CONSOLE_SECRET_PARAMETER", "/genway/console-secret"}
		r := proxyResponse(t, run(t, "admin", readEvent(t, "admin-accounts.json", eventAdminToken, "Bearer "+token), tokenEnv...))
		if r.StatusCode != 200 || !strings.Contains(r.Body, `"id":"`+testAccount+`"`) {
			t.Errorf("GET /admin/v1/accounts = %d %s; want 200 and the accounts", r.StatusCode, r.Body)
		}
		r = proxyResponse(t, run(t, "admin", readEvent(t, "admin-accounts.json", eventAdminToken, "Bearer "+string(key)), tokenEnv...))
		if r.StatusCode != 401 {
			t.Errorf("GET /admin/v1/accounts with an API key = %d %s; want 401", r.StatusCode, r.Body)
		}
		r = proxyResponse(t, run(t, "admin", readEvent(t, "console-signin.json"), tokenEnv...))
		csp := r.MultiValueHeaders["Content-Security-Policy"]
		if r.StatusCode != 200 || !strings.Contains(r.Body, "Operator token") || len(csp) != 1 || !strings.Contains(csp[0], "script-src 'self'") {
			t.Errorf("GET /console/signin = %d, CSP %v; want the sign-in page with its CSP", r.StatusCode, csp)
		}
		// Without either parameter the function refuses to start rather
		// than serve an unguarded console.
		for what, e := range map[string][]string{
			"its token":          {"GENWAY_ADMIN_TOKEN_PARAMETER", "/genway/missing", "GENWAY_CONSOLE_SECRET_PARAMETER", "/genway/console-secret"},
			"its session secret": {"GENWAY_ADMIN_TOKEN_PARAMETER", "/genway/admin-token", "GENWAY_CONSOLE_SECRET_PARAMETER", "/genway/missing"},
		} {
			api := newRuntimeAPI(t)
			p := start(t, bootstraps["admin"], api, env(endpoint, queueURL, e...))
			if _, err := p.initTime(api); err == nil {
				t.Errorf("the admin function started without %s", what)
			}
		}
	})

	t.Run("models without a key", func(t *testing.T) {
		r := proxyResponse(t, run(t, "models", readEvent(t, "models.json")))
		if r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Body, "invalid_api_key") {
			t.Errorf("GET /v1/models with the placeholder key = %d %s; want 401 invalid_api_key", r.StatusCode, r.Body)
		}
	})

	t.Run("vendor keys from SSM", func(t *testing.T) {
		// The chat function reads its vendor key from the SecureString
		// parameter OPENAI_API_KEY_PARAMETER names; the models function
		// lists the vendor from GENWAY_CONFIGURED and never reads the key.
		const vendorKey = "sk-lambda-ssm-0123456789abcdef"
		if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/genway/openai"),
			Value: aws.String(vendorKey), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		auth := make(chan string, 1)
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case auth <- r.Header.Get("Authorization"):
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"KEYFROMSSM"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}))
		defer upstream.Close()
		api := newRuntimeAPI(t)
		p := start(t, bootstraps["chat"], api, env(endpoint, queueURL, "OPENAI_API_KEY_PARAMETER", "/genway/openai", "OPENAI_BASE_URL", upstream.URL+"/v1"))
		res, err := api.invoke(readEvent(t, "chat.json", append(withKey, `synthetic/echo`, `openai/gpt-4o-mini`, `\"stream\":true`, `\"stream\":false`)...))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		select {
		case got = <-auth:
		default:
		}
		if _, body, _ := splitStream(res.body); got != "Bearer "+vendorKey || !strings.Contains(string(body), "KEYFROMSSM") {
			t.Errorf("chat with the key in SSM: upstream saw %q, body %q; want the key from the parameter and the answer", got, body)
		}
		if strings.Contains(p.stderr.String(), vendorKey) {
			t.Errorf("the chat function logged the key: %s", p.stderr.String())
		}
		// A key parameter it cannot read stops the start, naming it.
		api = newRuntimeAPI(t)
		p = start(t, bootstraps["chat"], api, env(endpoint, queueURL, "OPENAI_API_KEY_PARAMETER", "/genway/missing-key"))
		if _, err := p.initTime(api); err == nil || !strings.Contains(err.Error(), "/genway/missing-key") {
			t.Errorf("chat with an unreadable key parameter: %v; want a failed start naming the parameter", err)
		}
		for _, tt := range []struct {
			extra  []string
			listed bool
		}{
			{[]string{"OPENAI_API_KEY_PARAMETER", "/genway/openai"}, false}, // reading it would list openai
			{[]string{"OPENAI_API_KEY_PARAMETER", "/genway/openai", "GENWAY_CONFIGURED", "openai"}, true},
		} {
			r := proxyResponse(t, run(t, "models", readEvent(t, "models.json", withKey...), tt.extra...))
			if listed := strings.Contains(r.Body, `"id":"openai/gpt-4o-mini"`); r.StatusCode != 200 || listed != tt.listed {
				t.Errorf("models with %v = %d, openai listed %v; want 200, %v", tt.extra, r.StatusCode, listed, tt.listed)
			}
		}
	})

	type jobView struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Output *struct {
			URL string `json:"url"`
		} `json:"output"`
	}
	var job jobView
	ok := t.Run("jobs-create", func(t *testing.T) {
		r := proxyResponse(t, run(t, "jobs-create", readEvent(t, "jobs-create.json", withKey...)))
		if err := json.Unmarshal([]byte(r.Body), &job); err != nil || r.StatusCode/100 != 2 || job.Status != "queued" || job.ID == "" {
			t.Fatalf("POST /v1/jobs = %d %s; want 2xx and a queued job", r.StatusCode, r.Body)
		}
	})
	if !ok {
		t.FailNow()
	}

	t.Run("jobs-get queued", func(t *testing.T) {
		r := proxyResponse(t, run(t, "jobs-get", readEvent(t, "jobs-get.json", append(withKey, eventJobID, job.ID)...)))
		var got jobView
		if err := json.Unmarshal([]byte(r.Body), &got); err != nil || r.StatusCode != 200 || got.ID != job.ID || got.Status != "queued" {
			t.Errorf("GET /v1/jobs/%s = %d %s; want 200, queued", job.ID, r.StatusCode, r.Body)
		}
	})

	ok = t.Run("worker", func(t *testing.T) {
		// The message jobs-create sent, as the SQS event source would deliver it.
		out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage = %v, %v; want the job's message", out, err)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(readEvent(t, "worker.json"), &ev); err != nil {
			t.Fatal(err)
		}
		ev.Records[0].MessageId = aws.ToString(out.Messages[0].MessageId)
		ev.Records[0].Body = aws.ToString(out.Messages[0].Body)
		malformed := ev.Records[0]
		malformed.MessageId, malformed.Body = "malformed-1", "{not json"
		ev.Records = append(ev.Records, malformed)
		payload, _ := json.Marshal(ev)
		res := run(t, "worker", payload)
		var resp events.SQSEventResponse
		if err := json.Unmarshal(res.body, &resp); res.kind != "response" || err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("worker = %s %s; want no batch item failures (the malformed message is dropped)", res.kind, res.body)
		}
		r := proxyResponse(t, run(t, "jobs-get", readEvent(t, "jobs-get.json", append(withKey, eventJobID, job.ID)...)))
		var got jobView
		if err := json.Unmarshal([]byte(r.Body), &got); err != nil || got.Status != "completed" || got.Output == nil || !strings.Contains(got.Output.URL, testBucket) {
			t.Fatalf("GET /v1/jobs/%s after the worker = %d %s; want completed with a presigned link", job.ID, r.StatusCode, r.Body)
		}
	})
	if !ok {
		t.FailNow()
	}

	// The account's default webhook URL: the credits function queues the
	// job's delivery once it settled it, the webhooks function sends it.
	hook := newHookServer(t)
	if _, err := store.SetWebhookURL(ctx, testAccount, hook.URL(), time.Now().Unix()); err != nil {
		t.Fatal(err)
	}

	t.Run("credits", func(t *testing.T) {
		j, err := store.Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		before, err := store.Account(ctx, testAccount)
		if err != nil {
			t.Fatal(err)
		}
		if before.Held != j.Price || j.Price <= 0 {
			t.Fatalf("before settlement: held %d, price %d; want the price held", before.Held, j.Price)
		}
		payload := readEvent(t, "credits.json", eventJobID, job.ID, `"account": {
            "S": "dev"
          }`, `"account": {"S": "`+testAccount+`"}`, `"price": {
            "N": "10"
          }`, fmt.Sprintf(`"price": {"N": "%s"}`, j.Price))
		// The same record three times: later deliveries must change nothing.
		// A function that crashes after writing the ledger but before
		// answering is retried by Lambda with the same batch, which is
		// exactly this redelivery.
		for i := 0; i < 3; i++ {
			res := run(t, "credits", payload)
			var resp events.DynamoDBEventResponse
			if err := json.Unmarshal(res.body, &resp); res.kind != "response" || err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("credits (delivery %d) = %s %s; want no batch item failures", i+1, res.kind, res.body)
			}
		}
		r := proxyResponse(t, run(t, "credits-api", readEvent(t, "credits-api.json", withKey...)))
		var c struct {
			Balance, Held, Available credits.Amount
		}
		json.Unmarshal([]byte(r.Body), &c)
		// The balance before settlement already paid for the priced chat
		// completions above (openai/gpt-4o-mini).
		if want := before.Balance - j.Price; r.StatusCode != 200 || c.Balance != want || c.Held != 0 || c.Available != want {
			t.Errorf("GET /v1/credits = %d %s; want balance %s, held 0 (captured once)", r.StatusCode, r.Body, want)
		}
	})

	t.Run("webhooks", func(t *testing.T) {
		testWebhooksFunction(t, run, store, sqsClient, hooksURL, hook, job.ID, withKey)
	})

	t.Run("jobs-list", func(t *testing.T) {
		r := proxyResponse(t, run(t, "jobs-get", readEvent(t, "jobs-list.json", withKey...)))
		var list struct {
			Object     string    `json:"object"`
			Data       []jobView `json:"data"`
			HasMore    bool      `json:"has_more"`
			NextCursor *string   `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(r.Body), &list); err != nil || r.StatusCode != 200 || list.Object != "list" || list.HasMore || list.NextCursor != nil {
			t.Fatalf("GET /v1/jobs = %d %s; want 200 and one page", r.StatusCode, r.Body)
		}
		if len(list.Data) != 1 || list.Data[0].ID != job.ID || list.Data[0].Status != "completed" || list.Data[0].Output == nil || !strings.Contains(list.Data[0].Output.URL, testBucket) {
			t.Errorf("GET /v1/jobs = %s; want the completed job with a presigned link", r.Body)
		}
	})

	t.Run("jobs-cancel", func(t *testing.T) {
		id, err := jobs.NewID(jobs.TypeMusic)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().Unix()
		queued := &jobs.Job{ID: id, Account: testAccount, Type: jobs.TypeMusic, Model: "synthetic-music", Status: jobs.Queued,
			Input: jobs.Input{Prompt: "p", Duration: 1, Format: "mp3"}, Price: 1, Created: now, Updated: now}
		if _, err := store.Create(ctx, queued, nil); err != nil {
			t.Fatal(err)
		}
		r := proxyResponse(t, run(t, "jobs-create", readEvent(t, "jobs-cancel.json", append(withKey, eventJobID, id)...)))
		var got struct {
			ID     string
			Status string
			Error  *struct{ Code string }
		}
		if err := json.Unmarshal([]byte(r.Body), &got); err != nil || r.StatusCode != 200 || got.ID != id || got.Status != "failed" || got.Error == nil || got.Error.Code != "cancelled" {
			t.Errorf("POST /v1/jobs/%s/cancel = %d %s; want 200, failed, cancelled", id, r.StatusCode, r.Body)
		}
		r = proxyResponse(t, run(t, "jobs-create", readEvent(t, "jobs-cancel.json", append(withKey, eventJobID, job.ID)...)))
		if r.StatusCode != 409 || !strings.Contains(r.Body, "job_final") {
			t.Errorf("POST /v1/jobs/%s/cancel (completed) = %d %s; want 409 job_final", job.ID, r.StatusCode, r.Body)
		}
	})

	t.Run("jobs-sweeper reconcile", func(t *testing.T) {
		// A poisoned stream record: a job that completed half an hour ago
		// and whose capture never ran (its hold is still open).
		acct := "reconcile-test"
		if _, err := store.Grant(ctx, acct, 100, time.Now().Unix()); err != nil {
			t.Fatal(err)
		}
		id, err := jobs.NewID(jobs.TypeSFX)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-30 * time.Minute).Unix()
		j := &jobs.Job{ID: id, Account: acct, Type: jobs.TypeSFX, Model: "synthetic-sfx", Status: jobs.Queued,
			Input: jobs.Input{Prompt: "pop", Duration: 1, Format: "mp3"}, Price: 7, Created: at, Updated: at}
		if _, err := store.Create(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{Updated: at}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Transition(ctx, id, jobs.Processing, jobs.Completed, jobs.Patch{Updated: at, Output: &jobs.Output{Key: "k", ContentType: "audio/mpeg", Bytes: 1}}); err != nil {
			t.Fatal(err)
		}
		settled := 0
		for i := range 3 { // the schedule fires again: nothing more is settled
			res := run(t, "jobs-sweeper", []byte(`{"reconcile": true}`))
			var got jobs.ReconcileResult
			if err := json.Unmarshal(res.body, &got); res.kind != "response" || err != nil {
				t.Fatalf("reconcile #%d = %s %s; want a reconcile result", i+1, res.kind, res.body)
			}
			settled += got.Settled
		}
		a, err := store.Account(ctx, acct)
		if err != nil || a.Balance != 93 || a.Held != 0 || settled < 1 {
			t.Errorf("after three reconciles: %+v, %v, settled %d; want balance 93, held 0, the job settled once", a, err, settled)
		}
	})

	t.Run("jobs-sweeper", func(t *testing.T) {
		// A job stored with its hold ten minutes ago whose message was
		// never sent: jobs-create died between the two.
		id, err := jobs.NewID(jobs.TypeSFX)
		if err != nil {
			t.Fatal(err)
		}
		created := time.Now().Add(-10 * time.Minute).Unix()
		lost := &jobs.Job{ID: id, Account: testAccount, Type: jobs.TypeSFX, Model: "synthetic-sfx", Status: jobs.Queued,
			Input: jobs.Input{Prompt: "pop", Duration: 1, Format: "mp3"}, Price: 1, Created: created, Updated: created}
		if _, err := store.Create(ctx, lost, nil); err != nil {
			t.Fatal(err)
		}
		sweep := func() jobs.SweepResult {
			t.Helper()
			res := run(t, "jobs-sweeper", readEvent(t, "jobs-sweeper.json"), "GENWAY_SWEEP_AFTER", "2m")
			var got jobs.SweepResult
			if err := json.Unmarshal(res.body, &got); res.kind != "response" || err != nil {
				t.Fatalf("jobs-sweeper = %s %s; want a sweep result", res.kind, res.body)
			}
			return got
		}
		if got, want := sweep(), (jobs.SweepResult{Found: 1, Requeued: 1}); got != want {
			t.Fatalf("jobs-sweeper (first run) = %+v; want %+v", got, want)
		}
		out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage = %v, %v; want the swept job's message", out, err)
		}
		if got, err := sqsqueue.JobID(aws.ToString(out.Messages[0].Body)); err != nil || got != id {
			t.Errorf("swept message is for %q, %v; want %s", got, err, id)
		}
		// The job's message was just sent: the next run leaves it alone.
		if got, want := sweep(), (jobs.SweepResult{}); got != want {
			t.Errorf("jobs-sweeper (second run) = %+v; want %+v", got, want)
		}
	})

	t.Run("chat synthetic stream", func(t *testing.T) {
		res := run(t, "chat", readEvent(t, "chat.json", withKey...))
		checkStreamEnvelope(t, res)
		prelude, body, _ := splitStream(res.body)
		var p struct {
			StatusCode        int                 `json:"statusCode"`
			MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		}
		if err := json.Unmarshal(prelude, &p); err != nil || p.StatusCode != 200 {
			t.Fatalf("prelude %q: status %d, %v; want 200", prelude, p.StatusCode, err)
		}
		if ct := p.MultiValueHeaders["Content-Type"]; len(ct) != 1 || !strings.HasPrefix(ct[0], "text/event-stream") {
			t.Errorf("prelude Content-Type = %v; want text/event-stream", ct)
		}
		data := sseData(string(body))
		contents := 0
		for _, d := range data {
			if strings.Contains(d, `"content":"`) {
				contents++
			}
		}
		if contents < 2 || len(data) == 0 || data[len(data)-1] != "[DONE]" {
			t.Errorf("stream body = %q; want several content chunks and data: [DONE] last", body)
		}
		// The completion's record, written before the function answered
		// the invocation, is the caller's through credits-api.
		var chunk struct {
			ID string `json:"id"`
		}
		if len(data) == 0 || json.Unmarshal([]byte(data[0]), &chunk) != nil || !strings.HasPrefix(chunk.ID, "chatcmpl-") {
			t.Fatalf("first chunk %q; want a chatcmpl- id", data)
		}
		r := proxyResponse(t, run(t, "credits-api", readEvent(t, "generations.json", append(withKey, eventGenerationID, chunk.ID)...)))
		var g struct {
			Data credits.Record `json:"data"`
		}
		if err := json.Unmarshal([]byte(r.Body), &g); r.StatusCode != 200 || err != nil || g.Data.ID != chunk.ID || g.Data.Account != testAccount ||
			g.Data.Kind != credits.KindChat || !g.Data.Stream || g.Data.Status != credits.StatusCompleted || g.Data.Tokens.Completion == 0 {
			t.Errorf("GET /v1/generations/%s = %d %s; want the streamed completion's record", chunk.ID, r.StatusCode, r.Body)
		}
		// Another account's, or an unknown id: a 404.
		r = proxyResponse(t, run(t, "credits-api", readEvent(t, "generations.json", append(withKey, eventGenerationID, "chatcmpl-unknown")...)))
		if r.StatusCode != 404 || !strings.Contains(r.Body, "generation_not_found") {
			t.Errorf("GET /v1/generations/chatcmpl-unknown = %d %s; want 404 generation_not_found", r.StatusCode, r.Body)
		}
	})

	t.Run("responses synthetic stream with a tool call", func(t *testing.T) {
		res := run(t, "chat", readEvent(t, "responses.json", withKey...))
		checkStreamEnvelope(t, res)
		prelude, body, _ := splitStream(res.body)
		if !strings.Contains(string(prelude), `"statusCode":200`) {
			t.Fatalf("prelude %q; want status 200", prelude)
		}
		var types []string
		for _, line := range strings.Split(string(body), "\n") {
			if ev, ok := strings.CutPrefix(line, "event: "); ok {
				types = append(types, ev)
			}
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if strings.Join(types, " ") != strings.Join(want, " ") {
			t.Errorf("events = %v; want %v", types, want)
		}
		if !strings.Contains(string(body), `"name":"get_weather"`) || !strings.Contains(string(body), `\"city\":\"synthetic\"`) {
			t.Errorf("stream body = %q; want a get_weather call with its arguments", body)
		}
	})

	t.Run("messages synthetic stream with thinking and a tool call", func(t *testing.T) {
		// Claude Code's shape: the key in x-api-key, ?beta=true.
		res := run(t, "chat", readEvent(t, "messages.json", strings.TrimPrefix(eventKey, "Bearer "), string(key)))
		checkStreamEnvelope(t, res)
		prelude, body, _ := splitStream(res.body)
		if !strings.Contains(string(prelude), `"statusCode":200`) {
			t.Fatalf("prelude %q; want status 200", prelude)
		}
		var types []string
		for _, line := range strings.Split(string(body), "\n") {
			if ev, ok := strings.CutPrefix(line, "event: "); ok && (len(types) == 0 || types[len(types)-1] != ev) {
				types = append(types, ev)
			}
		}
		want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
			"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if strings.Join(types, " ") != strings.Join(want, " ") {
			t.Errorf("events = %v; want %v", types, want)
		}
		for _, s := range []string{`"type":"thinking"`, `"type":"tool_use"`, `"name":"get_weather"`, `"stop_reason":"tool_use"`} {
			if !strings.Contains(string(body), s) {
				t.Errorf("stream body = %q; want %s", body, s)
			}
		}
	})

	t.Run("non-stream chat kept alive", func(t *testing.T) {
		// A slow upstream answering a non-streamed request: the function
		// sends keep-alive spaces (GENWAY_CHAT_KEEPALIVE) that reach the
		// Runtime API before the upstream answers, then the JSON.
		api := newRuntimeAPI(t)
		g := newGate(api, func(sofar []byte) bool {
			_, body, ok := splitStream(sofar)
			return ok && strings.HasPrefix(string(body), " ")
		})
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if !g.wait(r) {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"SLOWANSWER"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}))
		defer upstream.Close()
		start(t, bootstraps["chat"], api, env(endpoint, queueURL,
			"OPENAI_API_KEY", "sk-test-upstream", "OPENAI_BASE_URL", upstream.URL+"/v1", "GENWAY_CHAT_KEEPALIVE", "50ms"))
		payload := readEvent(t, "chat.json", append(withKey, `synthetic/echo`, `openai/gpt-4o-mini`, `\"stream\":true`, `\"stream\":false`)...)
		res, err := api.invoke(payload)
		if err != nil {
			t.Fatal(err)
		}
		if !<-g.released {
			t.Fatalf("no keep-alive space reached the Runtime API while the upstream was silent; body %q", res.body)
		}
		_, body, _ := splitStream(res.body)
		var v struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &v); err != nil || len(v.Choices) != 1 || v.Choices[0].Message.Content != "SLOWANSWER" {
			t.Errorf("body %q (%v); want spaces and then the completion", body, err)
		}
	})

	t.Run("chat stream arrives in pieces", func(t *testing.T) {
		// An OpenAI-compatible upstream that sends its first content delta
		// and then waits until that delta has reached the Runtime API
		// before sending the rest: a function that buffered its response
		// could never let it finish.
		api := newRuntimeAPI(t)
		g := newGate(api, func(sofar []byte) bool { return strings.Contains(string(sofar), "FIRSTPIECE") })
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			send := func(s string) { io.WriteString(w, "data: "+s+"\n\n"); w.(http.Flusher).Flush() }
			chunk := func(delta string) string {
				return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
			}
			send(chunk(`{"role":"assistant","content":""}`))
			send(chunk(`{"content":"FIRSTPIECE"}`))
			if !g.wait(r) {
				return
			}
			send(chunk(`{"content":" SECONDPIECE"}`))
			send(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
			send(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
			send("[DONE]")
		}))
		defer upstream.Close()

		start(t, bootstraps["chat"], api, env(endpoint, queueURL,
			"OPENAI_API_KEY", "sk-test-upstream", "OPENAI_BASE_URL", upstream.URL+"/v1"))
		payload := readEvent(t, "chat.json", append(withKey, `synthetic/echo`, `openai/gpt-4o-mini`)...)
		res, err := api.invoke(payload)
		if err != nil {
			t.Fatal(err)
		}
		checkStreamEnvelope(t, res)
		if !<-g.released {
			t.Fatalf("the first content chunk did not reach the Runtime API before the upstream finished; body %q", res.body)
		}
		first, second := -1, -1
		for i, c := range res.chunks {
			if first < 0 && strings.Contains(string(c.data), "FIRSTPIECE") {
				first = i
			}
			if strings.Contains(string(c.data), "SECONDPIECE") {
				second = i
			}
		}
		if first < 0 || second <= first {
			t.Errorf("chunk reads: FIRSTPIECE in read %d, SECONDPIECE in read %d of %d; want it in an earlier read", first, second, len(res.chunks))
		}
		_, body, _ := splitStream(res.body)
		if data := sseData(string(body)); len(data) == 0 || data[len(data)-1] != "[DONE]" {
			t.Errorf("stream body = %q; want it to end with data: [DONE]", body)
		}
	})

	fx := &lambdaFixture{ctx: ctx, cfg: cfg, endpoint: endpoint, queueURL: queueURL, store: store, sqs: sqsClient, run: run, bootstraps: bootstraps}
	t.Run("media", func(t *testing.T) { testMedia(t, fx) })
	t.Run("videos", func(t *testing.T) { testVideos(t, fx) })

	t.Run("veo on vertex, its key from SSM", func(t *testing.T) {
		// The worker reads the service-account key (its JSON) from the
		// SecureString parameter GOOGLE_VERTEX_CREDENTIALS_PARAMETER names,
		// makes an access token from it at Google's token endpoint (the
		// fake's), submits, is re-enqueued with a delay, polls, and copies
		// the video into S3. Each run is a new container: a token each.
		fake := vertextest.NewServer(t)
		if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/genway/vertex"),
			Value: aws.String(fake.Credentials()), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		r := proxyResponse(t, run(t, "jobs-create", readEvent(t, "jobs-create.json", append(withKey,
			`{\"type\":\"music\",\"model\":\"synthetic-music\",\"prompt\":\"a calm piano loop\",\"duration\":5}`,
			`{\"type\":\"video\",\"model\":\"veo-3.1-fast\",\"prompt\":\"a fox\",\"duration\":4}`,
			"3f6c1a52-events-jobs-create", "3f6c1a52-events-veo-on-vertex")...), "GENWAY_CONFIGURED", "vertex"))
		var veo jobView
		if err := json.Unmarshal([]byte(r.Body), &veo); err != nil || r.StatusCode/100 != 2 || veo.ID == "" {
			t.Fatalf("POST /v1/jobs (veo-3.1-fast) = %d %s; want a queued job", r.StatusCode, r.Body)
		}
		workerEnv := env(endpoint, queueURL, "GOOGLE_VERTEX_CREDENTIALS_PARAMETER", "/genway/vertex",
			"GOOGLE_VERTEX_BASE_URL", fake.URL, "GENWAY_MEDIA_POLL", "1s")
		var logs strings.Builder
		for i := 0; i < 4; i++ { // a start, then a poll; a spare run or two for a slow queue
			out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 5})
			if err != nil || len(out.Messages) != 1 {
				t.Fatalf("run %d: ReceiveMessage = %v, %v; want the job's message", i, out, err)
			}
			var ev events.SQSEvent
			if err := json.Unmarshal(readEvent(t, "worker.json"), &ev); err != nil {
				t.Fatal(err)
			}
			ev.Records[0].MessageId = aws.ToString(out.Messages[0].MessageId)
			ev.Records[0].Body = aws.ToString(out.Messages[0].Body)
			payload, _ := json.Marshal(ev)
			api := newRuntimeAPI(t)
			p := start(t, bootstraps["worker"], api, workerEnv)
			res, err := api.invoke(payload)
			if err != nil {
				t.Fatal(err)
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(res.body, &resp); res.kind != "response" || err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("worker run %d = %s %s; want no batch item failures\n%s", i, res.kind, res.body, p.stderr.String())
			}
			sqsClient.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle})
			logs.WriteString(p.stderr.String())
			if j, err := store.Get(ctx, veo.ID); err == nil && j.Status.Final() {
				break
			}
		}
		j, err := store.Get(ctx, veo.ID)
		if err != nil || j.Status != jobs.Completed || j.Output == nil || j.Output.Bytes != int64(len(fake.Video)) || j.Output.ContentType != "video/mp4" {
			t.Fatalf("veo job = %+v, %v; want completed with the fake's %d-byte video", j, err, len(fake.Video))
		}
		if submits, tokens, badAuth := fake.Counts(); submits != 1 || tokens < 2 || badAuth != 0 || len(fake.Refusals()) != 0 {
			t.Errorf("Vertex AI saw %d submits, %d tokens, %d refused calls, refusals %v; want one submit, a token per container, none refused",
				submits, tokens, badAuth, fake.Refusals())
		}
		for _, secret := range []string{"PRIVATE KEY", "ya29."} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the worker logged %q", secret)
			}
		}
	})
}

// checkStreamEnvelope checks the Runtime API side of a streamed response:
// posted in chunks with the API Gateway integration content type, a JSON
// prelude and the 8-NUL separator.
func checkStreamEnvelope(t *testing.T, res *result) {
	t.Helper()
	if res.kind != "response" {
		t.Fatalf("chat reported an error: %s", res.body)
	}
	if res.contentType != "application/vnd.awslambda.http-integration-response" {
		t.Errorf("Content-Type = %q; want application/vnd.awslambda.http-integration-response", res.contentType)
	}
	if !res.chunked {
		t.Errorf("response was not sent with chunked transfer encoding")
	}
	if res.mode != "" && res.mode != "streaming" {
		t.Errorf("Lambda-Runtime-Function-Response-Mode = %q; want streaming or absent", res.mode)
	}
	if _, _, ok := splitStream(res.body); !ok {
		t.Fatalf("no prelude separator (8 NUL bytes) in %q", res.body)
	}
	if e := res.trailer.Get("Lambda-Runtime-Function-Error-Type"); e != "" {
		t.Errorf("stream ended with error trailer %s: %s", e, res.trailer.Get("Lambda-Runtime-Function-Error-Body"))
	}
}
