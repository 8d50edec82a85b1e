package main

import (
	"bytes"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// cliKey runs `genway keys create` with args against the server's data
// directory (through its admin socket) and returns the new key.
func cliKey(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return cliKeyEnv(t, dir, nil, args...)
}

// cliKeyEnv is cliKey with more environment (GENWAY_BACKEND=aws's).
func cliKeyEnv(t testing.TB, dir string, env map[string]string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), append([]string{"keys", "create"}, args...), testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatalf("genway keys create %s = %v", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// cli runs a genway command against dir and returns its stdout.
func cli(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return cliEnv(t, dir, nil, args...)
}

// cliEnv is cli with more environment.
func cliEnv(t *testing.T, dir string, env map[string]string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), args, testEnv(dir, env), &out, io.Discard); err != nil {
		t.Fatalf("genway %s = %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestServeKeyControls runs genway serve and a key made with `genway keys
// create --models 'synthetic/*,synthetic-sfx' --credit-limit 10` (through the server's
// admin socket): GET /v1/models lists only those models; another
// model (chat, a job) is a 403 model_not_allowed; 50 parallel 1-credit jobs get
// exactly 10 accepted and 40 refused with the key's 402, and once done
// the key has spent exactly 10; `genway keys list` shows it; a key whose
// expiry `genway keys update` moves into the past gets the generic 401
// within the key cache's time.
func TestServeKeyControls(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, nil)
	key := cliKey(t, dir, "--account", "dev", "--name", "intern", "--models", "synthetic/*,synthetic-sfx", "--credit-limit", "10")
	ks := &server{base: s.base, key: key}

	var models struct{ Data []struct{ ID string } }
	if code, _ := ks.do(t, "GET", "/v1/models", nil, nil, &models); code != 200 || len(models.Data) == 0 {
		t.Fatalf("GET /v1/models = %d, %d models; want 200 and some", code, len(models.Data))
	}
	for _, m := range models.Data {
		if !strings.HasPrefix(m.ID, "synthetic/") && m.ID != "synthetic-sfx" {
			t.Errorf("GET /v1/models with a synthetic/*,synthetic-sfx key lists %q", m.ID)
		}
	}
	var all struct{ Data []struct{ ID string } }
	s.do(t, "GET", "/v1/models", nil, nil, &all)
	if len(all.Data) <= len(models.Data) {
		t.Errorf("GET /v1/models: %d models with the dev key, %d with the scoped one; want fewer with the scoped one", len(all.Data), len(models.Data))
	}

	var e chatErr
	chat := map[string]any{"model": "openai/gpt-4o-mini", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	if code, _ := ks.do(t, "POST", "/v1/chat/completions", chat, nil, &e); code != 403 || e.Error.Type != "permission_error" || e.Error.Code != "model_not_allowed" {
		t.Errorf("chat with a model the key may not use = %d %+v; want 403 permission_error model_not_allowed", code, e.Error)
	}
	e = chatErr{}
	if code, _ := ks.do(t, "POST", "/v1/jobs", map[string]any{"type": "music", "model": "synthetic-music", "prompt": "p"}, nil, &e); code != 403 || e.Error.Code != "model_not_allowed" {
		t.Errorf("a job of a model the key may not use = %d %+v; want 403 model_not_allowed", code, e.Error)
	}
	e = chatErr{}
	chat["model"], chat["models"] = "synthetic/echo", []string{"openai/gpt-4o-mini"}
	if code, _ := ks.do(t, "POST", "/v1/chat/completions", chat, nil, &e); code != 403 || e.Error.Code != "model_not_allowed" {
		t.Errorf("chat naming a model the key may not use in models = %d %+v; want 403 model_not_allowed", code, e.Error)
	}

	const n = 50
	codes := make([]int, n)
	errs := make([]chatErr, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out struct {
				ID string
				chatErr
			}
			code, _, err := doRequest(ks, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "rain", "duration": 1}, nil, &out)
			if err != nil {
				t.Errorf("POST /v1/jobs #%d: %v", i, err)
			}
			codes[i], errs[i], ids[i] = code, out.chatErr, out.ID
		}()
	}
	wg.Wait()
	accepted := 0
	for i, code := range codes {
		switch {
		case code == 200:
			accepted++
		case code == 402 && errs[i].Error.Type == "insufficient_quota" && errs[i].Error.Code == "key_credit_limit" &&
			strings.Contains(errs[i].Error.Message, "0 left of 10"):
		default:
			t.Errorf("POST /v1/jobs #%d = %d %+v; want 200, or 402 key_credit_limit saying 0 left of 10", i, code, errs[i].Error)
		}
	}
	if accepted != 10 {
		t.Errorf("%d parallel 1-credit jobs on a key limited to 10 credits: %d accepted; want 10", n, accepted)
	}
	// Bounded wait for the accepted jobs to end and be settled.
	var list string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list = cli(t, dir, "keys", "list", "--account", "dev")
		if strings.Contains(list, "10/10 ") || strings.Contains(list, "10/10\t") {
			break
		}
	}
	var row string
	for _, l := range strings.Split(list, "\n") {
		if strings.Contains(l, "intern") {
			row = l
		}
	}
	if !strings.Contains(row, "synthetic/*,synthetic-sfx") || !strings.Contains(row, "10/10") || strings.Contains(row, "held") {
		t.Errorf("keys list row of the key = %q; want name intern, models synthetic*, 10/10 spent, nothing held", row)
	}

	// Expire it: the same 401 as an unknown key, within the cache's TTL.
	cli(t, dir, "keys", "update", key[:12], "--expires", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	var code int
	for i := 0; i < 100; i++ {
		e = chatErr{}
		code, _ = ks.do(t, "GET", "/v1/models", nil, nil, &e)
		if code == 401 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 401 || e.Error.Code != "invalid_api_key" {
		t.Errorf("an expired key = %d %+v; want 401 invalid_api_key", code, e.Error)
	}
	unknown := &server{base: s.base, key: "sk_live_" + strings.Repeat("A", 40)}
	var ue chatErr
	unknown.do(t, "GET", "/v1/models", nil, nil, &ue)
	if ue != e {
		t.Errorf("expired key's error %+v differs from an unknown key's %+v", e, ue)
	}
}

// pricedChat sends a chat completion of "hello world" with ks's key
// (max_tokens if > 0) and returns its status, its error envelope, and,
// for a 200, its exact price on the priced test catalog: 0.001 credits a
// token, prompt and completion.
func pricedChat(t *testing.T, ks *server, model string, maxTokens int) (int, chatErr, credits.Amount) {
	t.Helper()
	var out struct {
		chatErr
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	body := map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "hello world"}}}
	if maxTokens > 0 {
		body["max_tokens"] = maxTokens
	}
	code, _ := ks.do(t, "POST", "/v1/chat/completions", body, nil, &out)
	if code != 200 || model != "synthetic/priced" {
		return code, out.chatErr, 0
	}
	return code, out.chatErr, credits.Amount(out.Usage.PromptTokens+out.Usage.CompletionTokens) * 1000
}

// TestServeKeyLimitPricedChat: a key with a credit limit of 0.5 credits
// holds each priced completion's most possible cost (its input and
// max_tokens, or the held bound of 4,096 output tokens, at 1,000 credits
// per million tokens) before the call, and is charged its exact price
// (to the micro-credit). A completion whose bound does not fit is the
// key's 402 naming max_tokens, with nothing charged; 30 parallel
// completions never take the key past its limit; sequential ones then go
// on until what is left cannot hold one; nothing stays held, the key
// spent and the account was charged exactly the answers' prices, and the
// unpriced model still answers.
func TestServeKeyLimitPricedChat(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"GENWAY_CATALOG": "testdata/priced_catalog.json"})
	const limit = 500_000 // 0.5 credits
	ks := &server{base: s.base, key: cliKey(t, dir, "--account", "dev", "--credit-limit", "0.5")}
	type keyCredits struct {
		Balance credits.Amount
		Key     *struct{ CreditLimit, Spent, Held, Left credits.Amount } `json:"key"`
	}
	keyState := func() keyCredits {
		var cr keyCredits
		ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Key == nil {
			t.Fatalf("GET /v1/credits with a limited key: no key member")
		}
		return cr
	}
	start := keyState().Balance
	var mu sync.Mutex
	var spent credits.Amount // the answers' prices
	code, e, cost := pricedChat(t, ks, "synthetic/priced", 100)
	if code != 200 || cost <= 0 {
		t.Fatalf("priced chat at max_tokens 100 (holds about 0.13 of 0.5) = %d %+v; want 200", code, e.Error)
	}
	spent += cost
	for _, n := range []int{0, 20000} { // 4,096 or 20,000 output tokens: 4.1 or 20 credits
		if code, e, _ := pricedChat(t, ks, "synthetic/priced", n); code != 402 || e.Error.Code != "key_credit_limit" || !strings.Contains(e.Error.Message, "max_tokens") {
			t.Errorf("priced chat whose max_tokens (%d) does not fit the key = %d %+v; want 402 key_credit_limit naming max_tokens", n, code, e.Error)
		}
	}
	var wg sync.WaitGroup
	ok := 0
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, e, cost := pricedChat(t, ks, "synthetic/priced", 10)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 200:
				ok++
				spent += cost
			case code == 402 && e.Error.Code == "key_credit_limit":
			default:
				t.Errorf("parallel priced chat = %d %+v; want 200 or 402 key_credit_limit", code, e.Error)
			}
		}()
	}
	wg.Wait()
	if cr := keyState(); cr.Key.Spent != spent || cr.Key.Spent > limit || cr.Key.Held != 0 {
		t.Fatalf("after 30 parallel completions (%d answered): key %+v; want %s spent (their prices), at most 0.5, nothing held", ok, *cr.Key, spent)
	}
	for range 200 {
		if code, e, cost = pricedChat(t, ks, "synthetic/priced", 10); code != 200 {
			break
		}
		spent += cost
	}
	if code != 402 || e.Error.Code != "key_credit_limit" || !strings.Contains(e.Error.Message, "left of 0.5 ") {
		t.Errorf("priced chat once the key cannot hold one more = %d %+v; want 402 key_credit_limit", code, e.Error)
	}
	// What is left cannot hold 10 output tokens and the input's bound
	// (0.01 credits and more), and was not touched by the refusal.
	cr := keyState()
	if cr.Key.Spent != spent || cr.Key.Held != 0 || cr.Key.Left != limit-spent || cr.Key.Left >= 50_000 || start-cr.Balance != spent {
		t.Errorf("key %+v, account charged %s; want %s spent (the answers' exact prices), nothing held, less than a hold left, the account charged the same", *cr.Key, start-cr.Balance, spent)
	}
	if code, e, _ := pricedChat(t, ks, "synthetic/echo", 0); code != 200 {
		t.Errorf("unpriced chat on a key past its limit = %d %+v; want 200", code, e.Error)
	}
	if list := cli(t, dir, "keys", "list"); !strings.Contains(list, "/0.5") {
		t.Errorf("keys list = %q; want the key's spend against its limit of 0.5", list)
	}
}

// TestServeKeyLimitImagesSpeech: reservations hold within a key's limit.
// A key limited to 2 credits makes 2 images (1 credit each), then gets
// the key's 402 for a third (and GET /v1/credits shows the key's spend);
// a key limited to 0.005 credits speaks 5 characters once (at 1 credit
// per 1,000), then gets the key's 402.
func TestServeKeyLimitImagesSpeech(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, nil)
	img := &server{base: s.base, key: cliKey(t, dir, "--account", "dev", "--credit-limit", "2")}
	var e chatErr
	req := map[string]any{"model": "synthetic-image", "prompt": "a red square", "size": "256x256", "n": 2}
	if code, _ := img.do(t, "POST", "/v1/images/generations", req, nil, nil); code != 200 {
		t.Fatalf("2 images on a key limited to 2 credits = %d; want 200", code)
	}
	req["n"] = 1
	if code, _ := img.do(t, "POST", "/v1/images/generations", req, nil, &e); code != 402 || e.Error.Code != "key_credit_limit" || !strings.Contains(e.Error.Message, "0 left of 2") {
		t.Errorf("an image past the key's limit = %d %+v; want 402 key_credit_limit, 0 left of 2", code, e.Error)
	}

	// 5 characters at 1 credit per 1,000: 0.005 credits, exactly.
	sp := &server{base: s.base, key: cliKey(t, dir, "--account", "dev", "--credit-limit", "0.005")}
	body := map[string]any{"model": "synthetic-speech", "input": "hello", "voice": "alloy", "response_format": "wav"}
	if resp, _, _, err := sp.speak(t, body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("speech on a key limited to 0.005 credits = %v; want 200", err)
	}
	resp, b, _, _ := sp.speak(t, body)
	if _, code, msg := speechError(t, b); resp.StatusCode != 402 || code != "key_credit_limit" || !strings.Contains(msg, "0 left of 0.005") {
		t.Errorf("speech past the key's limit = %d %s %q; want 402 key_credit_limit, 0 left of 0.005", resp.StatusCode, code, msg)
	}
	var cr struct {
		Key *struct{ CreditLimit, Spent, Held, Left credits.Amount } `json:"key"`
	}
	if img.do(t, "GET", "/v1/credits", nil, nil, &cr); cr.Key == nil || cr.Key.Spent != 2*credits.Credit || cr.Key.Left != 0 || cr.Key.Held != 0 {
		t.Errorf("GET /v1/credits with the image key: key = %+v; want spent 2, nothing held, 0 left", cr.Key)
	}
	var plain struct{ Key *struct{} }
	if s.do(t, "GET", "/v1/credits", nil, nil, &plain); plain.Key != nil {
		t.Errorf("GET /v1/credits with a key without a limit has a key member")
	}
	list := cli(t, dir, "keys", "list")
	if !strings.Contains(list, "2/2") || !strings.Contains(list, "0.005/0.005") {
		t.Errorf("keys list = %q; want the image key at 2/2 and the speech key at 0.005/0.005", list)
	}
}

// TestServeKeyLimitAWS: the key controls on the AWS-backed local mode
// (moto): jobs-create holds on the key's DynamoDB item, the credits
// handler fed by the jobs stream settles it. A key limited to 3 credits
// and to synthetic-sfx gets 3 of 5 one-credit jobs (sequential: moto
// does not isolate concurrent transactions; the parallel case runs in
// dynamostore's contract through mototest.Serialize), a 403 for another
// model, and once the jobs are done it has spent exactly 3.
func TestServeKeyLimitAWS(t *testing.T) {
	_, env, dir := awsServe(t)
	s := startServer(t, dir, env)
	ks := &server{base: s.base, key: cliKeyEnv(t, dir, env, "--account", "dev", "--models", "synthetic-sfx", "--credit-limit", "3", "--name", "aws")}
	var e chatErr
	if code, _ := ks.do(t, "POST", "/v1/jobs", map[string]any{"type": "music", "model": "synthetic-music", "prompt": "p"}, nil, &e); code != 403 || e.Error.Code != "model_not_allowed" {
		t.Errorf("a job of another model = %d %+v; want 403 model_not_allowed", code, e.Error)
	}
	accepted := 0
	for i := range 5 {
		e = chatErr{}
		code, _ := ks.do(t, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "rain", "duration": 1}, nil, &e)
		switch {
		case code == 200:
			accepted++
		case code == 402 && e.Error.Code == "key_credit_limit" && strings.Contains(e.Error.Message, "0 left of 3"):
		default:
			t.Errorf("job #%d = %d %+v; want 200 or 402 key_credit_limit", i, code, e.Error)
		}
	}
	if accepted != 3 {
		t.Errorf("5 one-credit jobs on a key limited to 3: %d accepted; want 3", accepted)
	}
	var list string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if list = cliEnv(t, dir, env, "keys", "list"); strings.Contains(list, "3/3 ") && !strings.Contains(list, "held") {
			break
		}
	}
	if !strings.Contains(list, "3/3 ") || strings.Contains(list, "held") {
		t.Errorf("keys list = %q; want the key at 3/3, nothing held", list)
	}
}

// TestServeKeyLimitPricedChatAWS: the same holds on the AWS-backed local
// mode (moto): a priced completion's hold is a reservation in DynamoDB,
// conditioned on the key's item, so it holds across Lambda containers,
// and its exact, fractional charge adds up in DynamoDB's decimals.
// Sequential (moto does not isolate concurrent transactions; the parallel
// case runs in dynamostore's reservation contract).
func TestServeKeyLimitPricedChatAWS(t *testing.T) {
	_, env, dir := awsServe(t)
	env = maps.Clone(env)
	env["GENWAY_CATALOG"] = "testdata/priced_catalog.json"
	s := startServer(t, dir, env)
	const limit = 300_000 // 0.3 credits
	ks := &server{base: s.base, key: cliKeyEnv(t, dir, env, "--account", "dev", "--credit-limit", "0.3")}
	if code, e, _ := pricedChat(t, ks, "synthetic/priced", 20000); code != 402 || e.Error.Code != "key_credit_limit" || !strings.Contains(e.Error.Message, "max_tokens") {
		t.Errorf("priced chat whose max_tokens does not fit the key = %d %+v; want 402 key_credit_limit naming max_tokens", code, e.Error)
	}
	answered := 0
	var spent credits.Amount
	for range 200 {
		code, e, cost := pricedChat(t, ks, "synthetic/priced", 10)
		if code != 200 {
			if code != 402 || e.Error.Code != "key_credit_limit" {
				t.Errorf("priced chat = %d %+v; want 200 or 402 key_credit_limit", code, e.Error)
			}
			break
		}
		answered++
		spent += cost
	}
	var cr struct {
		Key *struct{ Spent, Held, Left credits.Amount } `json:"key"`
	}
	ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if answered < 2 || cr.Key == nil || cr.Key.Spent != spent || cr.Key.Held != 0 || cr.Key.Left != limit-spent || cr.Key.Left >= 50_000 {
		t.Errorf("%d answered, key %+v; want several answered until what is left cannot hold one, %s spent (their exact prices), nothing held", answered, cr.Key, spent)
	}
}

// TestServeKeyOwnJobs: a key made with --jobs own sees, lists, cancels and
// deletes only the jobs and videos it created; its account's other key
// sees every job; keys list shows the control, and keys update lifts it.
// On both stores.
func TestServeKeyOwnJobs(t *testing.T) {
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			var env map[string]string
			dir := t.TempDir()
			if backend == "aws" {
				if testing.Short() {
					t.Skip("starts moto_server")
				}
				_, env, dir = awsServe(t)
			}
			s := startServer(t, dir, env)
			own := &server{base: s.base, key: cliKeyEnv(t, dir, env, "--account", "acme", "--credits", "100", "--jobs", "own")}
			other := &server{base: s.base, key: cliKeyEnv(t, dir, env, "--account", "acme")}
			sfx := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "pop", "duration": 1}
			newJob := func(k *server, req map[string]any, path string) string {
				t.Helper()
				var j jobResp
				if code, _ := k.do(t, "POST", path, req, nil, &j); code != 200 {
					t.Fatalf("POST %s = %d", path, code)
				}
				return j.ID
			}
			mine, theirs := newJob(own, sfx, "/v1/jobs"), newJob(other, sfx, "/v1/jobs")
			video := map[string]any{"model": "synthetic-video", "prompt": "a ball", "seconds": "4", "size": "320x240"}
			myVideo, theirVideo := newJob(own, video, "/v1/videos"), newJob(other, video, "/v1/videos")
			for _, id := range []string{mine, theirs, myVideo, theirVideo} {
				if j, _ := other.waitJob(t, id, 60*time.Second); j.Status != "completed" {
					t.Fatalf("job %s = %s; want completed", id, j.Status)
				}
			}
			for _, tt := range []struct {
				method, path string
				want         int
			}{
				{"GET", "/v1/jobs/" + mine, 200},
				{"GET", "/v1/jobs/" + theirs, 404},
				{"POST", "/v1/jobs/" + theirs + "/cancel", 404},
				{"GET", "/v1/videos/" + myVideo, 200},
				{"GET", "/v1/videos/" + theirVideo, 404},
				{"GET", "/v1/videos/" + theirVideo + "/content", 404},
				{"DELETE", "/v1/videos/" + theirVideo, 404},
				{"GET", "/v1/videos?after=" + theirVideo, 400},
			} {
				if code, _, err := doRequest(own, tt.method, tt.path, nil, nil, nil); err != nil || code != tt.want {
					t.Errorf("own key: %s %s = %d, %v; want %d", tt.method, tt.path, code, err, tt.want)
				}
			}
			listed := func(k *server, path string) []string {
				t.Helper()
				var l struct {
					Data []struct{ ID string } `json:"data"`
				}
				if code, _ := k.do(t, "GET", path, nil, nil, &l); code != 200 {
					t.Fatalf("GET %s = %d", path, code)
				}
				var ids []string
				for _, d := range l.Data {
					ids = append(ids, d.ID)
				}
				slices.Sort(ids)
				return ids
			}
			if got, want := listed(own, "/v1/jobs"), sorted(mine, myVideo); !slices.Equal(got, want) {
				t.Errorf("own key: GET /v1/jobs = %v; want its own %v", got, want)
			}
			if got := listed(own, "/v1/videos"); !slices.Equal(got, []string{myVideo}) {
				t.Errorf("own key: GET /v1/videos = %v; want [%s]", got, myVideo)
			}
			if got, want := listed(other, "/v1/jobs"), sorted(mine, theirs, myVideo, theirVideo); !slices.Equal(got, want) {
				t.Errorf("account key: GET /v1/jobs = %v; want every job %v", got, want)
			}
			if code, _, _ := doRequest(other, "GET", "/v1/jobs/"+mine, nil, nil, nil); code != 200 {
				t.Errorf("account key: GET the own key's job = %d; want 200", code)
			}
			// Its own video it may delete; the other key's stays.
			if code, _, _ := doRequest(own, "DELETE", "/v1/videos/"+myVideo, nil, nil, nil); code != 200 {
				t.Errorf("own key: DELETE its video = %d; want 200", code)
			}
			if code, _, _ := doRequest(other, "GET", "/v1/videos/"+theirVideo, nil, nil, nil); code != 200 {
				t.Errorf("the other key's video after the own key's refused delete = %d; want 200", code)
			}
			if list := cliEnv(t, dir, env, "keys", "list", "--account", "acme"); !strings.Contains(list, " own ") || !strings.Contains(list, " account ") {
				t.Errorf("keys list = %q; want a JOBS column with own and account", list)
			}
			// Lifted: within the key cache's time it sees every job.
			prefix := own.key[:12]
			if out := cliEnv(t, dir, env, "keys", "update", prefix, "--jobs", "account"); !strings.Contains(out, "updated") {
				t.Fatalf("keys update --jobs account = %q", out)
			}
			code := 0
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && code != 200; time.Sleep(200 * time.Millisecond) {
				code, _, _ = doRequest(own, "GET", "/v1/jobs/"+theirs, nil, nil, nil)
			}
			if code != 200 {
				t.Errorf("after keys update --jobs account: GET the other key's job = %d; want 200", code)
			}
		})
	}
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
