package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// videoCase is one video the openai SDK makes in clients/npm/videos.mjs,
// and what its MP4 must be.
type videoCase struct {
	Model    string `json:"model"`
	Seconds  string `json:"seconds"`
	Size     string `json:"size"`
	Duration int    `json:"duration"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

// syntheticVideoCases are OpenAI's own lengths and sizes: the synthetic
// model makes exactly what is asked.
var syntheticVideoCases = []videoCase{
	{Model: "synthetic-video", Seconds: "4", Size: "720x1280", Duration: 4, Width: 720, Height: 1280},
	{Model: "synthetic-video", Seconds: "8", Size: "1280x720", Duration: 8, Width: 1280, Height: 720},
	{Model: "synthetic-video", Seconds: "12", Size: "1792x1024", Duration: 12, Width: 1792, Height: 1024},
}

var videoLineRE = regexp.MustCompile(`(?m)^video (\S+) (job_video_\S+) sha256 ([0-9a-f]{64})$`)

// runVideosScript runs clients/npm/videos.mjs against s with cases and
// checks what the script cannot see: each video is a job of the jobs API
// (the same id, served by the model asked for), its bytes are those of
// want (if not nil, by model), and the account was charged each video's
// price once (the deleted one too), with nothing left held.
func runVideosScript(t *testing.T, s *server, cases []videoCase, want map[string][]byte) {
	t.Helper()
	node, dir := npmClients(t, filepath.Join("openai", "resources", "videos.mjs"))
	prices := map[string]modelRecord{}
	for _, m := range listModels(t, s) {
		prices[m.ID] = m
	}
	before := waitSettled(t, s)
	raw, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	out := string(runNode(t, node, dir, []string{"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key, "GENWAY_VIDEO_CASES=" + string(raw)}, "videos.mjs"))
	if n := strings.Count(out, "ok "); n != len(cases)+3 {
		t.Errorf("videos.mjs reported %d checks; want %d", n, len(cases)+3)
	}
	noSecrets(t, "the script's output", out)
	made := videoLineRE.FindAllStringSubmatch(out, -1)
	if len(made) != len(cases) {
		t.Fatalf("videos.mjs made %d videos; want %d", len(made), len(cases))
	}
	var charged credits.Amount
	for i, m := range made {
		model, id, sum := m[1], m[2], m[3]
		c := cases[i]
		if model != c.Model {
			t.Errorf("video %d is of %s; want %s", i, model, c.Model)
		}
		if b, ok := want[model]; ok {
			if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
				t.Errorf("%s: the SDK downloaded other bytes than the vendor's video", model)
			}
		}
		var j struct {
			Type, Status, Model string
			Input               struct {
				Duration int
				Size     string
			}
		}
		code, _ := s.do(t, "GET", "/v1/jobs/"+id, nil, nil, &j)
		switch {
		case i == 0 && code != 404: // the script deleted the first
			t.Errorf("GET /v1/jobs/%s (deleted) = %d; want 404", id, code)
		case i > 0 && (code != 200 || j.Type != "video" || j.Status != "completed" || j.Model != c.Model || strconv.Itoa(j.Input.Duration) != c.Seconds || j.Input.Size != c.Size):
			t.Errorf("GET /v1/jobs/%s = %d %+v; want the completed %s video job of %s s, %s", id, code, j, c.Model, c.Seconds, c.Size)
		}
		d, _ := strconv.Atoi(c.Seconds)
		charged += prices[model].credits(d)
	}
	after := waitSettled(t, s)
	if before.Balance-after.Balance != charged || after.Held != 0 {
		t.Errorf("credits %+v -> %+v; want %s charged (each video once, the deleted one too), nothing held", before, after, charged)
	}
}

// TestNPMVideos runs the official openai npm client's Videos API
// (clients/npm/videos.mjs: create, retrieve, list, downloadContent,
// delete) unmodified against genway serve, with synthetic-video at
// OpenAI's lengths and sizes, and with every video vendor of the catalog
// (Veo on Vertex AI, Kling on fal) through fakes of their wire, as the
// vendor end-to-end tests run them.
func TestNPMVideos(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		s := startServer(t, t.TempDir(), nil)
		runVideosScript(t, s, syntheticVideoCases, nil)
	})
	t.Run("vendors", func(t *testing.T) {
		veo, eleven, fal, rep := fakeVertex(t, 2), fakeElevenLabs(t), fakeFal(t, 2), fakeReplicate(t, 2)
		logs := &syncBuffer{}
		s := startServerLog(t, t.TempDir(), vendorEnv(veo, eleven, fal, rep), logs)
		// Each vendor hands out its 2-second 320x240 clip, whatever was asked.
		cases := []videoCase{
			{Model: "veo-3.1", Seconds: "4", Size: "720x1280", Duration: 2, Width: 320, Height: 240},
			{Model: "veo-3.1-fast", Seconds: "8", Size: "1280x720", Duration: 2, Width: 320, Height: 240},
			{Model: "kling-2.5-turbo", Seconds: "5", Size: "1920x1080", Duration: 2, Width: 320, Height: 240},
		}
		byVendor := map[string]string{}
		for _, m := range listModels(t, s) {
			if m.Type == "video" && m.OwnedBy != "synthetic" {
				byVendor[m.ID] = m.OwnedBy
			}
		}
		for _, c := range cases {
			if byVendor[c.Model] == "" {
				t.Fatalf("GET /v1/models lists no vendor video model %s", c.Model)
			}
			delete(byVendor, c.Model)
		}
		if len(byVendor) != 0 {
			t.Errorf("video models not covered: %v", byVendor)
		}
		want := map[string][]byte{}
		for _, c := range cases {
			want[c.Model] = testVideo()
		}
		runVideosScript(t, s, cases, want)
		if submits, _, badAuth := veo.Counts(); submits != 2 || badAuth != 0 {
			t.Errorf("Vertex AI: %d submits, %d unauthorised; want 2 (one per Veo video)", submits, badAuth)
		}
		if submits, badAuth := fal.counts(); submits != 1 || badAuth != 0 {
			t.Errorf("fal: %d submits, %d unauthorised; want 1 (the Kling video)", submits, badAuth)
		}
		noSecrets(t, "the server log", logs.String())
	})
}

// TestNPMVideosAWS runs the same script on the AWS-backed local mode
// against moto_server: the job in DynamoDB, the MP4 in S3 (the content a
// redirect to its presigned link), the delete a conditional DynamoDB
// write and an S3 DeleteObject, settlement through the emulated stream.
func TestNPMVideosAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	npmClients(t, filepath.Join("openai", "resources", "videos.mjs"))
	_, env, dir := awsServe(t)
	s := startServer(t, dir, env)
	runVideosScript(t, s, syntheticVideoCases[:2], nil)
}
