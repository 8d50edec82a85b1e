package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// TestVendorsEndToEnd runs a job on every real vendor model of the default
// catalog through genway serve, against fake vendors on loopback: each is
// submitted once, polled (long-running ones) until done, copied into our
// storage and served by our link, charged once; what a vendor cannot do
// is a 400 before any hold; no vendor key shows anywhere.
func TestVendorsEndToEnd(t *testing.T) {
	veo, eleven, fal, rep := fakeVertex(t, 2), fakeElevenLabs(t), fakeFal(t, 2), fakeReplicate(t, 2)
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), vendorEnv(veo, eleven, fal, rep), logs)

	byVendor := map[string]interface{ counts() (submits, badAuth int) }{"vertex": vertexVendor{veo}, "elevenlabs": eleven, "fal": fal, "replicate": rep}
	wantTypes := map[string]string{"vertex": "video", "elevenlabs": "sfx music", "fal": "video", "replicate": "music"}
	var models []modelRecord
	seen := map[string]string{}
	for _, m := range listModels(t, s) {
		if (m.Type != "music" && m.Type != "sfx" && m.Type != "video") || byVendor[m.OwnedBy] == nil {
			continue // not a job model (chat; image and speech models are tested apart), or not a media vendor's
		}
		models = append(models, m)
		seen[m.OwnedBy] += " " + m.Type
		if m.Price == nil || (m.Price.PerSecond <= 0 && m.Price.PerJob <= 0) || m.DefaultDuration <= 0 {
			t.Errorf("model %s: price %+v, default_duration %d; want a price and a default duration", m.ID, m.Price, m.DefaultDuration)
		}
	}
	for v, types := range wantTypes {
		for _, typ := range strings.Fields(types) {
			if !strings.Contains(seen[v], typ) {
				t.Errorf("GET /v1/models has no %s model owned by %s (has%s)", typ, v, seen[v])
			}
		}
	}

	type run struct {
		model modelRecord
		req   map[string]any
		wav   bool
	}
	var runs []run
	for _, m := range models {
		req := map[string]any{"type": m.Type, "model": m.ID, "prompt": "a " + m.Type + " for the test"}
		runs = append(runs, run{m, req, false})
		if m.OwnedBy == "elevenlabs" {
			wav := map[string]any{"type": m.Type, "model": m.ID, "prompt": "as wav", "format": "wav"}
			if m.Type == "music" {
				wav["mode"], wav["lyrics"] = "LYRICS", "first line\nsecond line\n\nthird line"
			}
			runs = append(runs, run{m, wav, true})
		}
	}
	before := waitSettled(t, s)
	var charged credits.Amount
	ids := make([]string, len(runs))
	for i, r := range runs {
		var j jobResp
		if code, _ := s.do(t, "POST", "/v1/jobs", r.req, nil, &j); code != 200 {
			t.Fatalf("create %v = %d", r.req, code)
		}
		ids[i] = j.ID
	}
	for i, r := range runs {
		got, statuses := s.waitJob(t, ids[i], 60*time.Second)
		if got.Status != "completed" || got.Output == nil {
			t.Errorf("%s %v: job %+v (statuses %v); want completed", r.model.ID, r.req, got, statuses)
			continue
		}
		if !strings.HasPrefix(got.Output.URL, s.base+"/files/") {
			t.Errorf("%s: output url %q is not our link", r.model.ID, got.Output.URL)
		}
		data := download(t, got.Output.URL)
		switch {
		case r.wav:
			if got.Output.ContentType != "audio/wav" || !bytes.HasPrefix(data, []byte("RIFF")) || string(data[8:12]) != "WAVE" {
				t.Errorf("%s wav: %s, %q...; want a RIFF/WAVE file", r.model.ID, got.Output.ContentType, data[:min(12, len(data))])
			}
		case r.model.Type == "video":
			if got.Output.ContentType != "video/mp4" || !bytes.Equal(data, testVideo()) {
				t.Errorf("%s: %s, %d bytes; want the vendor's %d-byte MP4 as it was", r.model.ID, got.Output.ContentType, len(data), len(testVideo()))
			}
		default:
			if got.Output.ContentType != "audio/mpeg" || !bytes.Equal(data, testMP3()) {
				t.Errorf("%s: %s, %d bytes; want the vendor's %d-byte MP3 as it was", r.model.ID, got.Output.ContentType, len(data), len(testMP3()))
			}
		}
		if got.Output.Bytes != int64(len(data)) {
			t.Errorf("%s: output.bytes %d; the file has %d", r.model.ID, got.Output.Bytes, len(data))
		}
		raw, _ := json.Marshal(got)
		noSecrets(t, "job "+got.ID, string(raw))
		charged += r.model.credits(got.Input.Duration)
	}
	want := map[string]int{}
	for _, r := range runs {
		want[r.model.OwnedBy]++
	}
	for name, v := range byVendor {
		submits, badAuth := v.counts()
		if submits != want[name] || badAuth != 0 {
			t.Errorf("%s: %d submits, %d unauthorised calls; want %d submits (one per job), none unauthorised", name, submits, badAuth, want[name])
		}
	}
	after := waitSettled(t, s)
	if before.Balance-after.Balance != charged || after.Held != 0 {
		t.Errorf("credits %+v -> %+v; want %s charged, once per job, nothing held", before, after, charged)
	}

	// What Veo cannot do is refused at create: nothing held, no vendor call.
	for _, m := range models {
		if m.OwnedBy != "vertex" {
			continue
		}
		submits, _, _ := veo.Counts()
		var e struct {
			Error struct{ Param, Code string } `json:"error"`
		}
		code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": m.ID, "prompt": "p", "duration": 5}, nil, &e)
		if code != 400 || e.Error.Param != "duration" {
			t.Errorf("%s with duration 5 = %d %+v; want 400 naming duration", m.ID, code, e)
		}
		code, _ = s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": m.ID, "prompt": "p", "size": "640x480"}, nil, &e)
		if code != 400 || e.Error.Param != "size" {
			t.Errorf("%s with size 640x480 = %d %+v; want 400 naming size", m.ID, code, e)
		}
		if now, _, _ := veo.Counts(); now != submits {
			t.Errorf("a refused request reached the vendor")
		}
	}
	// A prompt the vendor refuses fails the job (content_policy, the
	// vendor's words) and costs nothing: the hold is released.
	var refused jobResp
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "video", "model": "kling-2.5-turbo", "prompt": "forbidden scene"}, nil, &refused); code != 200 {
		t.Fatalf("create = %d", code)
	}
	if got, _ := s.waitJob(t, refused.ID, 30*time.Second); got.Status != "failed" || got.Error == nil || got.Error.Code != "content_policy" || !strings.Contains(got.Error.Message, "flagged") {
		t.Errorf("refused job = %+v; want failed with content_policy and the vendor's message", got)
	}
	if cr := waitSettled(t, s); cr != after {
		t.Errorf("credits after a refused job = %+v; want unchanged %+v", cr, after)
	}
	// A model that cannot sing lyrics refuses LYRICS mode, naming it.
	var e struct {
		Error struct{ Param string } `json:"error"`
	}
	if code, _ := s.do(t, "POST", "/v1/jobs", map[string]any{"type": "music", "model": "musicgen", "prompt": "p", "mode": "LYRICS", "lyrics": "la"}, nil, &e); code != 400 || e.Error.Param != "mode" {
		t.Errorf("musicgen with lyrics = %d %+v; want 400 naming mode", code, e)
	}
	if cr := waitSettled(t, s); cr != after {
		t.Errorf("credits after refused requests = %+v; want unchanged %+v", cr, after)
	}
	noSecrets(t, "the server log", logs.String())
}
