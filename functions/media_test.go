package functions_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/aws/dynamostore"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/providers/synthetic"
)

// lambdaFixture is what TestFunctions set up: moto with the stack's
// tables, queue and bucket, the built bootstraps, and run, which starts a
// function and invokes it once.
type lambdaFixture struct {
	ctx      context.Context
	cfg      aws.Config
	endpoint string
	queueURL string
	store    *dynamostore.Store
	sqs      *sqs.Client
	run      func(t *testing.T, name string, payload []byte, extra ...string) *result
	// bootstraps are the built functions, by directory name.
	bootstraps map[string]string
}

// account makes account name with whole credits and a key, and returns
// the replacements that put the key in events/*.json.
func (fx *lambdaFixture) account(t *testing.T, name string, whole int64) []string {
	t.Helper()
	if _, err := fx.store.Grant(fx.ctx, name, credits.Amount(whole)*credits.Credit, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	key, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.store.PutKey(fx.ctx, auth.NewRecord(key, name, time.Now())); err != nil {
		t.Fatal(err)
	}
	return []string{eventKey, "Bearer " + string(key)}
}

// settled checks account's credits after its synchronous generations:
// nothing held, nothing left open, the balance the grant (whole credits)
// less want, and exactly one settlement per reservation, a capture of
// want in all (each generation charged once).
func (fx *lambdaFixture) settled(t *testing.T, account string, granted int64, want credits.Amount) {
	t.Helper()
	a, err := fx.store.Account(fx.ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	left := credits.Amount(granted)*credits.Credit - want
	if a.Balance != left || a.Held != 0 || a.Available != left {
		t.Errorf("%s: balance %s, held %s, available %s; want %s, 0, %s", account, a.Balance, a.Held, a.Available, left, left)
	}
	ledger, err := fx.store.Ledger(fx.ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	reserved, settlements := map[string]bool{}, map[string]int{}
	var captured credits.Amount
	for _, e := range ledger {
		if id, ok := strings.CutPrefix(e.ID, credits.ReservationID("")); ok {
			reserved[id] = true
		}
		if id, ok := strings.CutPrefix(e.ID, credits.SettlementID("")); ok {
			settlements[id]++
			if e.Kind == credits.Capture {
				captured += e.Amount
			}
		}
	}
	for id := range reserved {
		if settlements[id] != 1 {
			t.Errorf("%s: reservation %s settled %d times; want once", account, id, settlements[id])
		}
	}
	if captured != want {
		t.Errorf("%s: captured %s credits in all; want %s (ledger %+v)", account, captured, want, ledger)
	}
	open, err := fx.store.OpenReservations(fx.ctx, time.Now().Add(time.Hour).Unix(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range open {
		if r.Account == account {
			t.Errorf("%s: reservation %s still open", account, r.ID)
		}
	}
}

// streamed splits a streamed function response into its prelude's status
// and headers and its body.
func streamed(t *testing.T, res *result) (int, http.Header, []byte) {
	t.Helper()
	checkStreamEnvelope(t, res)
	prelude, body, _ := splitStream(res.body)
	var p struct {
		StatusCode        int                 `json:"statusCode"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	}
	if err := json.Unmarshal(prelude, &p); err != nil {
		t.Fatalf("prelude %q: %v", prelude, err)
	}
	return p.StatusCode, http.Header(p.MultiValueHeaders), body
}

// imagesAnswer is the part of POST /v1/images/generations' answer the
// tests read.
type imagesAnswer struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Data    []struct {
		B64JSON string `json:"b64_json"`
		URL     string `json:"url"`
	} `json:"data"`
	Usage struct {
		Cost        credits.Amount `json:"cost"`
		InputTokens int            `json:"input_tokens"`
	} `json:"usage"`
}

// wantRecord checks the record of request id: of account, its cost.
func (fx *lambdaFixture) wantRecord(t *testing.T, id, account string, cost credits.Amount) {
	t.Helper()
	r, err := fx.store.Record(fx.ctx, id)
	if err != nil || r.Account != account || r.Cost != cost || r.Status != credits.StatusCompleted {
		t.Errorf("Record(%q) = %+v, %v; want %s's, costing %s", id, r, err, account, cost)
	}
}

// testMedia runs the media function: images (b64_json and url) and speech
// (synthetic, and OpenAI's streamed through a fake with its key in SSM),
// each reserved and settled once in DynamoDB, and a 402 that holds
// nothing.
func testMedia(t *testing.T, fx *lambdaFixture) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "a lighthouse at dusk"
	model, _ := cat.Model("synthetic-image")
	want, err := synthetic.Images{}.Generate(fx.ctx, model, &images.Params{Prompt: prompt, N: 1, Size: "256x256", Format: "png"})
	if err != nil {
		t.Fatal(err)
	}
	wantPNG := want.Images[0].Data

	t.Run("images", func(t *testing.T) {
		const granted = 20
		withKey := fx.account(t, "acct_images", granted)
		for _, tt := range []struct {
			name    string
			replace []string
		}{
			{"b64_json", nil},
			{"url", []string{`\"response_format\":\"b64_json\"`, `\"response_format\":\"url\"`}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				status, h, body := streamed(t, fx.run(t, "media", readEvent(t, "images.json", append(withKey, tt.replace...)...)))
				var a imagesAnswer
				// Keep-alive spaces may come before the JSON.
				if err := json.Unmarshal(bytes.TrimLeft(body, " "), &a); status != 200 || err != nil || len(a.Data) != 1 || a.Created == 0 {
					t.Fatalf("POST /v1/images/generations = %d %s (%v); want 200 and one image", status, body, err)
				}
				if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("Content-Type = %q; want application/json", ct)
				}
				var got []byte
				if tt.name == "b64_json" {
					if got, err = base64.StdEncoding.DecodeString(a.Data[0].B64JSON); err != nil || a.Data[0].URL != "" {
						t.Fatalf("data[0] = b64_json %.40q..., url %q (%v); want base64 and no url", a.Data[0].B64JSON, a.Data[0].URL, err)
					}
				} else {
					got = fetchImage(t, fx, a.Data[0].URL, "acct_images")
				}
				if !bytes.Equal(got, wantPNG) {
					t.Errorf("image: %d bytes; want synthetic-image's %d-byte PNG of %q", len(got), len(wantPNG), prompt)
				}
				if c, err := png.DecodeConfig(bytes.NewReader(got)); err != nil || c.Width != 256 || c.Height != 256 {
					t.Errorf("image is %dx%d (%v); want a 256x256 PNG", c.Width, c.Height, err)
				}
				// Its id is its record's, written with the capture of its
				// cost, which usage.cost says.
				if a.Usage.Cost != credits.Credit || !strings.HasPrefix(a.ID, "img_") {
					t.Errorf("answer id %q, usage.cost %s; want img_..., 1", a.ID, a.Usage.Cost)
				}
				fx.wantRecord(t, a.ID, "acct_images", credits.Credit)
			})
		}
		// A prompt the vendor refuses: a 400 content_policy with its
		// words, its reservation released.
		status, _, body := streamed(t, fx.run(t, "media", readEvent(t, "images.json", append(withKey, prompt, "fail:policy "+prompt)...)))
		if status != 400 || !strings.Contains(string(body), `"code":"content_policy"`) {
			t.Errorf("a refused prompt = %d %s; want 400 content_policy", status, body)
		}
		// Two images of 1 credit each, each captured once; the refused one
		// released, charged nothing.
		fx.settled(t, "acct_images", granted, 2*credits.Credit)
	})

	t.Run("image kept alive", func(t *testing.T) {
		// A slow image vendor (OpenAI's Images API, faked): the function
		// sends keep-alive spaces (GENWAY_IMAGES_KEEPALIVE) that reach the
		// Runtime API before the vendor answers, then the JSON.
		api := newRuntimeAPI(t)
		g := newGate(api, func(sofar []byte) bool {
			_, body, ok := splitStream(sofar)
			return ok && bytes.HasPrefix(body, []byte(" "))
		})
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path != "/v1/images/generations" {
				http.NotFound(w, r)
				return
			}
			if !g.wait(r) {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"created":1,"data":[{"b64_json":%q}],"usage":{"input_tokens":5,"output_tokens":272,"total_tokens":277}}`,
				base64.StdEncoding.EncodeToString(wantPNG))
		}))
		defer upstream.Close()
		const granted = 1000
		withKey := fx.account(t, "acct_slow_images", granted)
		start(t, fx.bootstraps["media"], api, env(fx.endpoint, fx.queueURL,
			"OPENAI_API_KEY", "sk-test-upstream", "OPENAI_BASE_URL", upstream.URL+"/v1", "GENWAY_IMAGES_KEEPALIVE", "50ms"))
		res, err := api.invoke(readEvent(t, "images.json", append(withKey, "synthetic-image", "gpt-image-1.5",
			`\"size\":\"256x256\"`, `\"size\":\"1024x1024\"`)...))
		if err != nil {
			t.Fatal(err)
		}
		if !<-g.released {
			t.Fatalf("no keep-alive space reached the Runtime API while the vendor was silent; body %q", res.body)
		}
		status, _, body := streamed(t, res)
		var a imagesAnswer
		if err := json.Unmarshal(body, &a); status != 200 || err != nil || len(a.Data) != 1 {
			t.Fatalf("POST /v1/images/generations (gpt-image-1.5) = %d %q (%v); want spaces, then the JSON", status, body, err)
		}
		if got, _ := base64.StdEncoding.DecodeString(a.Data[0].B64JSON); !bytes.Equal(got, wantPNG) {
			t.Errorf("image: %d bytes; want the vendor's %d", len(got), len(wantPNG))
		}
		m, _ := cat.Model("gpt-image-1.5")
		fx.settled(t, "acct_slow_images", granted, m.Price.ImageCost("", 1))
		// The vendor's token counts and the cost, in usage.
		if a.Usage.Cost != m.Price.ImageCost("", 1) || a.Usage.InputTokens != 5 {
			t.Errorf("usage = %+v; want the vendor's tokens and the cost %s", a.Usage, m.Price.ImageCost("", 1))
		}
	})

	t.Run("speech synthetic", func(t *testing.T) {
		const granted = 20
		withKey := fx.account(t, "acct_speech", granted)
		status, h, body := streamed(t, fx.run(t, "media", readEvent(t, "speech.json", withKey...)))
		if status != 200 || h.Get("Content-Type") != "audio/mpeg" {
			t.Fatalf("POST /v1/audio/speech = %d %v %.200q; want 200 audio/mpeg", status, h, body)
		}
		// An MP3 stream: MPEG audio frames (sync word 0xFFE), or an ID3 tag first.
		if len(body) < 1000 || !(bytes.HasPrefix(body, []byte("ID3")) || (body[0] == 0xFF && body[1]&0xE0 == 0xE0)) {
			t.Fatalf("speech body: %d bytes starting %x; want an MP3 stream", len(body), body[:min(len(body), 4)])
		}
		m, _ := cat.Model("synthetic-speech")
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(readEvent(t, "speech.json"), &ev); err != nil {
			t.Fatal(err)
		}
		var req struct{ Input string }
		json.Unmarshal([]byte(ev.Body), &req)
		cost := m.Price.SpeechCost(len([]rune(req.Input)))
		fx.settled(t, "acct_speech", granted, cost)
		// Its cost and id in headers, before the audio; its record.
		if h.Get("X-Genway-Cost") != cost.String() || !strings.HasPrefix(h.Get("X-Genway-Generation-Id"), "speech_") {
			t.Errorf("X-Genway-Cost %q, X-Genway-Generation-Id %q; want %s and speech_...", h.Get("X-Genway-Cost"), h.Get("X-Genway-Generation-Id"), cost)
		}
		fx.wantRecord(t, h.Get("X-Genway-Generation-Id"), "acct_speech", cost)
	})

	t.Run("speech streamed, its key from SSM", func(t *testing.T) {
		// OpenAI's TTS through a fake that sends its first audio and
		// then waits until that audio has reached the Runtime API: a
		// function that buffered the speech could never finish it. The
		// key is read from the SecureString parameter
		// OPENAI_API_KEY_PARAMETER names.
		const vendorKey = "sk-media-ssm-0123456789abcdef"
		if _, err := ssm.NewFromConfig(fx.cfg).PutParameter(fx.ctx, &ssm.PutParameterInput{Name: aws.String("/genway/media-openai"),
			Value: aws.String(vendorKey), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		first := append([]byte{0xFF, 0xFB, 0x90, 0x64}, []byte("FIRSTAUDIO")...)
		second := append([]byte{0xFF, 0xFB, 0x90, 0x64}, []byte("SECONDAUDIO")...)
		api := newRuntimeAPI(t)
		g := newGate(api, func(sofar []byte) bool { return bytes.Contains(sofar, []byte("FIRSTAUDIO")) })
		var authMu sync.Mutex
		var seenAuth string
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			authMu.Lock()
			seenAuth = r.Header.Get("Authorization")
			authMu.Unlock()
			if r.URL.Path != "/v1/audio/speech" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "audio/mpeg")
			w.Write(first)
			w.(http.Flusher).Flush()
			if !g.wait(r) {
				return
			}
			w.Write(second)
		}))
		defer upstream.Close()
		const granted = 1000
		withKey := fx.account(t, "acct_tts", granted)
		p := start(t, fx.bootstraps["media"], api, env(fx.endpoint, fx.queueURL,
			"OPENAI_API_KEY_PARAMETER", "/genway/media-openai", "OPENAI_BASE_URL", upstream.URL+"/v1"))
		res, err := api.invoke(readEvent(t, "speech.json", append(withKey, `synthetic-speech`, `tts-1`)...))
		if err != nil {
			t.Fatal(err)
		}
		status, h, body := streamed(t, res)
		if !<-g.released {
			t.Fatalf("the first audio did not reach the Runtime API before the vendor finished; body %q", body)
		}
		if status != 200 || h.Get("Content-Type") != "audio/mpeg" || !bytes.Equal(body, append(append([]byte{}, first...), second...)) {
			t.Fatalf("POST /v1/audio/speech (tts-1) = %d %v %q; want 200 audio/mpeg and the vendor's bytes as sent", status, h, body)
		}
		firstRead, secondRead := -1, -1
		for i, c := range res.chunks {
			if firstRead < 0 && bytes.Contains(c.data, []byte("FIRSTAUDIO")) {
				firstRead = i
			}
			if bytes.Contains(c.data, []byte("SECONDAUDIO")) {
				secondRead = i
			}
		}
		if firstRead < 0 || secondRead <= firstRead {
			t.Errorf("chunk reads: FIRSTAUDIO in read %d, SECONDAUDIO in read %d of %d; want it in an earlier read", firstRead, secondRead, len(res.chunks))
		}
		authMu.Lock()
		if seenAuth != "Bearer "+vendorKey {
			t.Errorf("the vendor saw Authorization %q; want the key from SSM", seenAuth)
		}
		authMu.Unlock()
		if strings.Contains(p.stderr.String(), vendorKey) {
			t.Errorf("the media function logged the key: %s", p.stderr.String())
		}
		var ev events.APIGatewayProxyRequest
		json.Unmarshal(readEvent(t, "speech.json"), &ev)
		var req struct{ Input string }
		json.Unmarshal([]byte(ev.Body), &req)
		m, _ := cat.Model("tts-1")
		fx.settled(t, "acct_tts", granted, m.Price.SpeechCost(len([]rune(req.Input))))
	})

	t.Run("402 holds nothing", func(t *testing.T) {
		withKey := fx.account(t, "acct_broke", 0)
		for _, tt := range []struct{ event, what string }{{"images.json", "image"}, {"speech.json", "speech"}} {
			status, _, body := streamed(t, fx.run(t, "media", readEvent(t, tt.event, withKey...)))
			if status != http.StatusPaymentRequired || !strings.Contains(string(body), "insufficient_credits") {
				t.Errorf("%s with no credits = %d %s; want 402 insufficient_credits", tt.what, status, body)
			}
		}
		fx.settled(t, "acct_broke", 0, 0)
		ledger, err := fx.store.Ledger(fx.ctx, "acct_broke")
		if err != nil {
			t.Fatal(err)
		}
		if len(ledger) != 0 {
			t.Errorf("after two 402s the ledger has %+v; want nothing", ledger)
		}
	})
}

// fetchImage downloads an image link of the url answer: our presigned
// link to the media bucket's images/<account>/ (moto does not check the
// signature; the object must be there).
func fetchImage(t *testing.T, fx *lambdaFixture, link, account string) []byte {
	t.Helper()
	if !strings.HasPrefix(link, fx.endpoint) || !strings.Contains(link, testBucket) || !strings.Contains(link, "/images/"+account+"/") ||
		!strings.Contains(link, "X-Amz-Signature=") {
		t.Fatalf("url = %q; want a presigned link to %s/images/%s/ on the S3 endpoint", link, testBucket, account)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET %s = %d %s, %d bytes (%v); want 200 image/png", link, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), err)
	}
	return b
}

// videoView is the part of OpenAI's video object the tests read.
type videoView struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Status      string `json:"status"`
	Progress    int    `json:"progress"`
	Seconds     string `json:"seconds"`
	CompletedAt *int64 `json:"completed_at"`
	ExpiresAt   *int64 `json:"expires_at"`
}

// testVideos drives a video through OpenAI's Videos API routes on
// jobs-create (create, delete) and jobs-get (retrieve, list, content),
// with the worker making it in between and the credits function's
// record of it delivered after the delete: charged once.
func testVideos(t *testing.T, fx *lambdaFixture) {
	const account, granted = "acct_videos", 100
	withKey := fx.account(t, account, granted)
	var v videoView
	r := proxyResponse(t, fx.run(t, "jobs-create", readEvent(t, "videos-create.json", withKey...)))
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil || r.StatusCode != 200 || v.Object != "video" || v.Status != "queued" ||
		!strings.HasPrefix(v.ID, "job_video_") || v.Seconds != "4" {
		t.Fatalf("POST /v1/videos = %d %s; want 200, a queued video of 4 seconds", r.StatusCode, r.Body)
	}
	withID := append(withKey, "job_video_00000000000000000000", v.ID)
	get := func(t *testing.T) videoView {
		t.Helper()
		r := proxyResponse(t, fx.run(t, "jobs-get", readEvent(t, "videos-get.json", withID...)))
		var got videoView
		if err := json.Unmarshal([]byte(r.Body), &got); err != nil || r.StatusCode != 200 || got.ID != v.ID || got.Object != "video" {
			t.Fatalf("GET /v1/videos/%s = %d %s; want 200 and the video", v.ID, r.StatusCode, r.Body)
		}
		return got
	}
	if got := get(t); got.Status != "queued" || got.Progress != 0 {
		t.Errorf("GET /v1/videos/%s before the worker: %+v; want queued, progress 0", v.ID, got)
	}
	r = proxyResponse(t, fx.run(t, "jobs-get", readEvent(t, "videos-content.json", withID...)))
	if r.StatusCode != 404 || !strings.Contains(r.Body, "video_not_ready") {
		t.Errorf("GET /v1/videos/%s/content while queued = %d %s; want 404 video_not_ready", v.ID, r.StatusCode, r.Body)
	}

	// The worker makes it, from the message jobs-create sent.
	out, err := fx.sqs.ReceiveMessage(fx.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(fx.queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 5})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("ReceiveMessage = %v, %v; want the video's message", out, err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(readEvent(t, "worker.json"), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Records[0].MessageId = aws.ToString(out.Messages[0].MessageId)
	ev.Records[0].Body = aws.ToString(out.Messages[0].Body)
	payload, _ := json.Marshal(ev)
	res := fx.run(t, "worker", payload)
	var resp events.SQSEventResponse
	if err := json.Unmarshal(res.body, &resp); res.kind != "response" || err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("worker = %s %s; want no batch item failures", res.kind, res.body)
	}
	fx.sqs.DeleteMessage(fx.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(fx.queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle})
	done := get(t)
	if done.Status != "completed" || done.Progress != 100 || done.CompletedAt == nil || done.ExpiresAt == nil ||
		*done.ExpiresAt != *done.CompletedAt+int64(dynamostore.DefaultJobRetention/time.Second) {
		t.Fatalf("GET /v1/videos/%s after the worker: %+v; want completed, expiring the job retention (GENWAY_JOB_RETENTION_DAYS, default %v) after", v.ID, done, dynamostore.DefaultJobRetention)
	}

	r = proxyResponse(t, fx.run(t, "jobs-get", readEvent(t, "videos-list.json", withKey...)))
	var list struct {
		Object  string      `json:"object"`
		Data    []videoView `json:"data"`
		FirstID *string     `json:"first_id"`
		LastID  *string     `json:"last_id"`
		HasMore bool        `json:"has_more"`
	}
	if err := json.Unmarshal([]byte(r.Body), &list); err != nil || r.StatusCode != 200 || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != v.ID || list.Data[0].Status != "completed" || list.HasMore || list.FirstID == nil || *list.FirstID != v.ID {
		t.Fatalf("GET /v1/videos = %d %s; want the one completed video", r.StatusCode, r.Body)
	}

	// The content: a redirect to our presigned link, whose object is the MP4.
	r = proxyResponse(t, fx.run(t, "jobs-get", readEvent(t, "videos-content.json", withID...)))
	loc := r.MultiValueHeaders["Location"]
	if r.StatusCode != http.StatusFound || len(loc) != 1 || !strings.HasPrefix(loc[0], fx.endpoint) || !strings.Contains(loc[0], testBucket) ||
		!strings.Contains(loc[0], "X-Amz-Signature=") {
		t.Fatalf("GET /v1/videos/%s/content = %d %v; want 302 to a presigned link in %s", v.ID, r.StatusCode, r.MultiValueHeaders, testBucket)
	}
	dl, err := http.Get(loc[0])
	if err != nil {
		t.Fatal(err)
	}
	mp4, _ := io.ReadAll(dl.Body)
	dl.Body.Close()
	if dl.StatusCode != 200 || len(mp4) < 12 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("GET the content link = %d, %d bytes; want an MP4", dl.StatusCode, len(mp4))
	}
	j, err := fx.store.Get(fx.ctx, v.ID)
	if err != nil || j.Output == nil {
		t.Fatalf("the video's job = %+v, %v", j, err)
	}
	outputKey := j.Output.Key

	// Delete: it settles (the stream has not delivered the capture yet),
	// removes the MP4 and hides the video.
	r = proxyResponse(t, fx.run(t, "jobs-create", readEvent(t, "videos-delete.json", withID...)))
	var del struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(r.Body), &del); err != nil || r.StatusCode != 200 || del.ID != v.ID || del.Object != "video.deleted" || !del.Deleted {
		t.Fatalf("DELETE /v1/videos/%s = %d %s; want 200 video.deleted", v.ID, r.StatusCode, r.Body)
	}
	if _, err := s3media.NewClient(fx.cfg).HeadObject(fx.ctx,
		&s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(outputKey)}); err == nil {
		t.Errorf("the video's output %s is still in the bucket after the delete", outputKey)
	}
	for _, tt := range []struct{ event, route string }{
		{"videos-get.json", "GET /v1/videos/{id}"}, {"videos-content.json", "GET /v1/videos/{id}/content"},
	} {
		r := proxyResponse(t, fx.run(t, "jobs-get", readEvent(t, tt.event, withID...)))
		if r.StatusCode != 404 || !strings.Contains(r.Body, "video_not_found") {
			t.Errorf("%s after the delete = %d %s; want 404 video_not_found", tt.route, r.StatusCode, r.Body)
		}
	}
	r = proxyResponse(t, fx.run(t, "jobs-create", readEvent(t, "videos-delete.json", withID...)))
	if r.StatusCode != 404 || !strings.Contains(r.Body, "video_not_found") {
		t.Errorf("DELETE /v1/videos/%s again = %d %s; want 404 video_not_found", v.ID, r.StatusCode, r.Body)
	}

	// The credits stream's record of the completion comes late: the
	// settlement the delete made stands, nothing is charged twice.
	rec := readEvent(t, "credits.json", eventJobID, v.ID, `"account": {
            "S": "dev"
          }`, `"account": {"S": "`+account+`"}`, `"price": {
            "N": "10"
          }`, fmt.Sprintf(`"price": {"N": "%s"}`, j.Price))
	res = fx.run(t, "credits", rec)
	var cresp events.DynamoDBEventResponse
	if err := json.Unmarshal(res.body, &cresp); res.kind != "response" || err != nil || len(cresp.BatchItemFailures) != 0 {
		t.Fatalf("credits = %s %s; want no batch item failures", res.kind, res.body)
	}
	a, err := fx.store.Account(fx.ctx, account)
	if err != nil || j.Price != 4*credits.Credit || a.Balance != granted*credits.Credit-j.Price || a.Held != 0 {
		t.Errorf("after the delete and the stream's record: %+v (%v), price %s; want the 4-second video charged once, nothing held", a, err, j.Price)
	}

	// OpenAI's clients send the create as multipart/form-data, which API
	// Gateway hands on as text (base64 where the API has binary media
	// types): both reach CreateVideo.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	for _, f := range [][2]string{{"model", "synthetic-video"}, {"prompt", "a kite over dunes"}, {"seconds", "2"}, {"size", "640x360"}} {
		mw.WriteField(f[0], f[1])
	}
	mw.Close()
	for _, b64 := range []bool{false, true} {
		var req events.APIGatewayProxyRequest
		if err := json.Unmarshal(readEvent(t, "videos-create.json", withKey...), &req); err != nil {
			t.Fatal(err)
		}
		req.Headers["Content-Type"] = mw.FormDataContentType()
		req.MultiValueHeaders["Content-Type"] = []string{mw.FormDataContentType()}
		req.Body, req.IsBase64Encoded = form.String(), b64
		if b64 {
			req.Body = base64.StdEncoding.EncodeToString(form.Bytes())
		}
		payload, _ := json.Marshal(req)
		r := proxyResponse(t, fx.run(t, "jobs-create", payload))
		var mv videoView
		if err := json.Unmarshal([]byte(r.Body), &mv); err != nil || r.StatusCode != 200 || mv.Status != "queued" || mv.Seconds != "2" {
			t.Fatalf("POST /v1/videos as multipart/form-data (base64 %v) = %d %s; want 200, a queued 2-second video", b64, r.StatusCode, r.Body)
		}
		// Its message is not for this test's worker: take it off the queue.
		out, err := fx.sqs.ReceiveMessage(fx.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(fx.queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), mv.ID) {
			t.Fatalf("ReceiveMessage = %v, %v; want the message of %s", out, err, mv.ID)
		}
		fx.sqs.DeleteMessage(fx.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(fx.queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle})
	}
}
