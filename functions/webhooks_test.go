package functions_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/webhooks"
)

// hookServer records the webhooks it receives (on 127.0.0.1).
type hookServer struct {
	*httptest.Server
	mu  sync.Mutex
	got []hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookRequest{r.Header.Clone(), b})
		h.mu.Unlock()
		io.WriteString(w, "thanks")
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) URL() string { return h.Server.URL + "/genway" }

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// testWebhooksFunction: the credits function queued the ended job's
// webhook (its account has a default URL); the webhooks function, fed
// that message in events/webhooks.json's shape, sends it signed with the
// secret GET /v1/webhooks/secret (credits-api) answers, which the
// Standard Webhooks authors' library verifies, and records it delivered.
func testWebhooksFunction(t *testing.T, run func(*testing.T, string, []byte, ...string) *result, store *dynamostore.Store,
	sqsClient *sqs.Client, queueURL string, hook *hookServer, jobID string, withKey []string) {
	ctx := context.Background()
	r := proxyResponse(t, run(t, "credits-api", readEvent(t, "webhooks-secret.json", withKey...)))
	var sec struct{ Object, Secret string }
	if err := json.Unmarshal([]byte(r.Body), &sec); err != nil || r.StatusCode != 200 || sec.Object != "webhook_secret" {
		t.Fatalf("GET /v1/webhooks/secret = %d %s", r.StatusCode, r.Body)
	}
	out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) == 0 {
		t.Fatalf("ReceiveMessage(webhooks) = %v, %v; want the credits function's message", out, err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(readEvent(t, "webhooks.json"), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Records[0].MessageId = aws.ToString(out.Messages[0].MessageId)
	ev.Records[0].Body = aws.ToString(out.Messages[0].Body)
	payload, _ := json.Marshal(ev)
	res := run(t, "webhooks", payload, "GENWAY_WEBHOOK_ALLOW_PRIVATE", "1")
	var resp events.SQSEventResponse
	if err := json.Unmarshal(res.body, &resp); res.kind != "response" || err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("webhooks = %s %s; want no batch item failures", res.kind, res.body)
	}
	got := hook.requests()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d requests; want 1", len(got))
	}
	wh, err := standardwebhooks.NewWebhook(sec.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(got[0].body, got[0].header); err != nil {
		t.Errorf("delivery does not verify: %v", err)
	}
	var e struct {
		ID, Type string
		Data     struct{ ID, Status string }
	}
	json.Unmarshal(got[0].body, &e)
	if e.ID != webhooks.EventID(jobID) || e.Type != "job.completed" || e.Data.ID != jobID || e.Data.Status != "completed" {
		t.Errorf("event %s; want job.completed of %s", got[0].body, jobID)
	}
	d, err := store.Delivery(ctx, jobID)
	if err != nil || d.Status != webhooks.Delivered || d.Attempts != 1 || d.LastCode != 200 || d.Excerpt != "thanks" {
		t.Errorf("delivery = %+v, %v; want delivered once, 200, excerpt", d, err)
	}
	// The function again with the same message (SQS at least once):
	// nothing is sent twice.
	if res := run(t, "webhooks", payload, "GENWAY_WEBHOOK_ALLOW_PRIVATE", "1"); res.kind != "response" || len(hook.requests()) != 1 {
		t.Errorf("a redelivered message sent the webhook again (%d requests)", len(hook.requests()))
	}
}
