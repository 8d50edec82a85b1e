package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// recordsCatalog writes the shipped catalog with synthetic/priced, a copy
// of synthetic/echo at 1,000 credits per million input tokens and 3,000
// per million output tokens, and returns its path.
func recordsCatalog(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../shared/catalog/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Providers []json.RawMessage `json:"providers"`
		Models    []map[string]any  `json:"models"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	var echo map[string]any
	for _, m := range c.Models {
		if m["id"] == "synthetic/echo" {
			echo = m
		}
	}
	if echo == nil {
		t.Fatal("the shipped catalog has no synthetic/echo")
	}
	priced := map[string]any{}
	for k, v := range echo {
		priced[k] = v
	}
	priced["id"], priced["upstream"] = "synthetic/priced", "echo"
	priced["price"] = map[string]any{"credits_per_million_input_tokens": 1000, "credits_per_million_output_tokens": 3000}
	c.Models = append(c.Models, priced)
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// generation is GET /v1/generations/{id}'s answer.
type generation struct {
	Data credits.Record `json:"data"`
}

// waitGeneration reads the record id until it is there (genway serve
// writes records every GENWAY_USAGE_FLUSH), at most 20 s.
func (s *server) waitGeneration(t *testing.T, id string) credits.Record {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var g generation
		code, _, err := doRequest(s, "GET", "/v1/generations/"+id, nil, nil, &g)
		if err == nil && code == 200 {
			return g.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/generations/%s = %d, %v; want the record within 20 s", id, code, err)
		}
	}
}

// streamID streams a chat completion of body and returns its id and the
// usage of its final chunk.
func (s *server) streamID(t *testing.T, body map[string]any) (string, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var id string
	var usage map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			ID    string         `json:"id"`
			Usage map[string]any `json:"usage"`
		}
		if json.Unmarshal([]byte(data), &c) == nil {
			id = c.ID
			if c.Usage != nil {
				usage = c.Usage
			}
		}
	}
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("stream = %d, id %q; want 200 and an id", resp.StatusCode, id)
	}
	return id, usage
}

// recordsScenario runs, through the server s (dev account, whose
// operator commands run with getenv), one request of each kind, and
// checks: each answer's id reads back its own record, with the cost the
// answer says (chat: the tokens at the price; an image: usage.cost; a
// speech: X-Genway-Cost); another account's key reads none of them; a
// failed request leaves a failed record; the CLI lists and explains
// them; and the records' costs equal the ledger's chat, image and speech
// charges of the account.
func recordsScenario(t *testing.T, s *server, getenv func(string) string) {
	ctx := t.Context()
	msg := func(text string) []map[string]string { return []map[string]string{{"role": "user", "content": text}} }
	var ids []string

	// A priced completion, whole: 1,000 and 3,000 credits per million.
	var whole struct {
		ID    string `json:"id"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if code, _ := s.do(t, "POST", "/v1/chat/completions", map[string]any{"model": "synthetic/priced", "messages": msg("hello there records")}, nil, &whole); code != 200 {
		t.Fatalf("priced chat = %d", code)
	}
	r := s.waitGeneration(t, whole.ID)
	wantCost := credits.Amount(whole.Usage.PromptTokens*1000 + whole.Usage.CompletionTokens*3000)
	if r.ID != whole.ID || r.Kind != credits.KindChat || r.Account != "dev" || r.Model != "synthetic/priced" || r.Cost != wantCost ||
		r.Tokens.Prompt != whole.Usage.PromptTokens || r.Tokens.Completion != whole.Usage.CompletionTokens || r.Status != credits.StatusCompleted || r.Stream {
		t.Errorf("record of %s = %+v; want its tokens, costing %s", whole.ID, r, wantCost)
	}
	ids = append(ids, whole.ID)

	// Streamed: the record has the stream's id and a first token.
	sid, _ := s.streamID(t, map[string]any{"model": "synthetic/priced", "stream": true, "messages": msg("stream this one")})
	if r := s.waitGeneration(t, sid); !r.Stream || r.Cost <= 0 || r.FirstTokenMS > r.LatencyMS || r.Key == "" {
		t.Errorf("record of the stream %s = %+v; want a streamed, priced record of the key", sid, r)
	}
	ids = append(ids, sid)

	// A Responses request of a free model.
	var resp struct {
		ID string `json:"id"`
	}
	if code, _ := s.do(t, "POST", "/v1/responses", map[string]any{"model": "synthetic/echo", "input": "free words"}, nil, &resp); code != 200 {
		t.Fatalf("responses = %d", code)
	}
	if r := s.waitGeneration(t, resp.ID); r.Kind != credits.KindResponses || r.Cost != 0 || !strings.HasPrefix(r.ID, "resp_") {
		t.Errorf("record of %s = %+v; want a free responses record", resp.ID, r)
	}
	ids = append(ids, resp.ID)

	// A failed request: no answer id, a failed record.
	if code, _ := s.do(t, "POST", "/v1/chat/completions", map[string]any{"model": "synthetic/priced", "messages": msg("fail: nothing")}, nil, nil); code != 502 {
		t.Fatalf("a failing chat = %d; want 502", code)
	}

	// An image: usage.cost and the record's cost are the capture.
	var img struct {
		ID    string `json:"id"`
		Usage struct {
			Cost credits.Amount `json:"cost"`
		} `json:"usage"`
	}
	if code, _ := s.do(t, "POST", "/v1/images/generations", map[string]any{"model": "synthetic-image", "prompt": "a fox", "size": "256x256", "n": 2}, nil, &img); code != 200 {
		t.Fatalf("images = %d", code)
	}
	if r := s.waitGeneration(t, img.ID); r.Kind != credits.KindImage || r.Cost != img.Usage.Cost || r.Cost != 2*credits.Credit || r.Units != 2 {
		t.Errorf("record of %s = %+v; want 2 images costing usage.cost %s", img.ID, r, img.Usage.Cost)
	}
	ids = append(ids, img.ID)

	// A speech: X-Genway-Cost and X-Genway-Generation-Id.
	sp, _, _, err := s.speak(t, map[string]any{"model": "synthetic-speech", "input": "Records for every request.", "voice": "alloy"})
	if err != nil || sp.StatusCode != 200 {
		t.Fatalf("speech = %v, %v", sp, err)
	}
	cost, err := credits.ParseAmount(sp.Header.Get("X-Genway-Cost"))
	spID := sp.Header.Get("X-Genway-Generation-Id")
	if r := s.waitGeneration(t, spID); err != nil || r.Kind != credits.KindSpeech || r.Cost != cost || cost <= 0 || r.Units != 26 {
		t.Errorf("record of %s = %+v; want 26 characters costing X-Genway-Cost %q", spID, r, sp.Header.Get("X-Genway-Cost"))
	}
	ids = append(ids, spID)

	// Another account reads none of them: the same 404 as an unknown id.
	op, closeOp, err := openOperator(ctx, getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOp()
	key, _, err := op.CreateKey(ctx, "other", 0, auth.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	other := &server{base: s.base, key: string(key)}
	for _, id := range append(ids, "chatcmpl-nothing") {
		var env struct {
			Error struct{ Code string } `json:"error"`
		}
		if code, _ := other.do(t, "GET", "/v1/generations/"+id, nil, nil, &env); code != 404 || env.Error.Code != "generation_not_found" {
			t.Errorf("GET /v1/generations/%s by another account = %d %q; want 404 generation_not_found", id, code, env.Error.Code)
		}
	}

	// The operator's listing has them all, the failed one included, and
	// the records' costs are the ledger's charges.
	var rs []credits.Record
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if rs, _, err = op.Requests(ctx, credits.RecordQuery{Account: "dev", Limit: credits.MaxRecordLimit}); err != nil {
			t.Fatal(err)
		}
		if len(rs) == 6 || time.Now().After(deadline) {
			break
		}
	}
	var sum credits.Amount
	failed := 0
	for _, r := range rs {
		sum += r.Cost
		if r.Status == credits.StatusFailed {
			failed++
		}
	}
	if len(rs) != 6 || failed != 1 {
		t.Fatalf("Requests(dev) = %d records (%d failed); want 6, one failed", len(rs), failed)
	}
	var ledger credits.Amount
	var l []credits.Entry
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, err = op.Ledger(ctx, "dev"); err != nil {
			t.Fatal(err)
		}
		ledger = 0
		for _, e := range l {
			if e.Kind == credits.Chat || (e.Kind == credits.Capture && (e.JobType == credits.KindImage || e.JobType == credits.KindSpeech)) {
				ledger += e.Amount
			}
		}
		if ledger == sum || time.Now().After(deadline) {
			break
		}
	}
	if ledger != sum || sum <= 2*credits.Credit {
		t.Errorf("the records cost %s; the ledger's chat, image and speech charges %s; want equal", sum, ledger)
	}

	// The CLI: the list, a filter, a record's charge line by line.
	var out bytes.Buffer
	if err := run(ctx, []string{"requests", "list", "--account", "dev"}, getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !strings.Contains(out.String(), id) {
			t.Errorf("requests list lacks %s:\n%s", id, out.String())
		}
	}
	out.Reset()
	if err := run(ctx, []string{"requests", "list", "--status", "failed", "--account", "dev"}, getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[1], " failed ") {
		t.Errorf("requests list --status failed:\n%s\nwant the header and the failed request", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"requests", "show", whole.ID}, getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"answered by", "synthetic/priced", "input", "output", "sum, exact", "rounded up once", "ledger entry chat:" + whole.ID} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("requests show:\n%s\nlacks %q", out.String(), want)
		}
	}
	if err := run(ctx, []string{"requests", "show", "chatcmpl-nothing"}, getenv, io.Discard, io.Discard); err == nil {
		t.Error("requests show of an unknown id = nil; want an error")
	}
	if err := run(ctx, []string{"requests", "list", "--status", "done"}, getenv, io.Discard, io.Discard); err == nil {
		t.Error("requests list --status done = nil; want a usage error")
	}
}

// TestRecordsEndToEnd: records through genway serve on the embedded
// store (recordsScenario), with the operator commands on its admin
// socket.
func TestRecordsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GENWAY_CATALOG": recordsCatalog(t)}
	s := startServer(t, dir, env)
	recordsScenario(t, s, testEnv(dir, env))
}

// TestRecordsAWS: the same through genway serve on DynamoDB (moto): the
// records table, written one transaction per record.
func TestRecordsAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	_, env, dir := awsServe(t)
	env["GENWAY_CATALOG"] = recordsCatalog(t)
	s := startServer(t, dir, env)
	recordsScenario(t, s, testEnv(dir, env))
}
