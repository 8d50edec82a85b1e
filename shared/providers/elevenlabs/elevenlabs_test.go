package elevenlabs

// The fake below follows ElevenLabs' API reference (elevenlabs.io/docs):
// POST /v1/sound-generation {"text", "duration_seconds" (0.5-30),
// "model_id"} and POST /v1/music {"prompt" | "composition_plan",
// "music_length_ms", "model_id"}, both with ?output_format= (mp3_44100_128,
// pcm_44100 ...) and the xi-api-key header, answered with the audio bytes;
// errors as {"detail": {"status", "message"}} (music: bad_prompt,
// bad_composition_plan for copyrighted material) or FastAPI's 422
// {"detail": [{"loc", "msg", "type"}]}.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
)

const testKey = "sk_eleven_test_key_0123456789"

type seen struct {
	path, format string
	body         map[string]any
}

// fake answers every request with status, header and body, recording it.
func fake(t *testing.T, status int, header map[string]string, body []byte, chunked bool) (*httptest.Server, *seen) {
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("xi-api-key") != testKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`)
			return
		}
		s.path, s.format = r.URL.Path, r.URL.Query().Get("output_format")
		json.NewDecoder(r.Body).Decode(&s.body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if chunked {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(status)
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush() // no Content-Length: streamed in chunks
			w.Write(body[len(body)/2:])
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

var (
	sfxModel   = &catalog.Model{ID: "elevenlabs-sfx", Upstream: "eleven_text_to_sound_v2"}
	musicModel = &catalog.Model{ID: "elevenlabs-music", Upstream: "music_v1"}
)

func read(t *testing.T, res *jobs.Result) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.Size >= 0 && int64(len(b)) != res.Size {
		t.Errorf("Result.Size = %d; the body has %d bytes", res.Size, len(b))
	}
	return b
}

func TestStartRequests(t *testing.T) {
	tests := []struct {
		name       string
		job        jobs.Job
		wantPath   string
		wantFormat string
		wantBody   map[string]any
	}{
		{"sfx", jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "door slam", Duration: 5, Format: "mp3"}}, "/v1/sound-generation", "mp3_44100_128",
			map[string]any{"text": "door slam", "duration_seconds": 5.0, "model_id": "eleven_text_to_sound_v2"}},
		{"sfx with category", jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "door slam", Duration: 2, Format: "mp3", Category: "impact"}}, "/v1/sound-generation", "mp3_44100_128",
			map[string]any{"text": "impact sound effect: door slam", "duration_seconds": 2.0, "model_id": "eleven_text_to_sound_v2"}},
		{"music", jobs.Job{Type: jobs.TypeMusic, Input: jobs.Input{Prompt: "calm piano", Duration: 30, Format: "mp3", Mode: "DESCRIPTION"}}, "/v1/music", "mp3_44100_128",
			map[string]any{"prompt": "calm piano", "music_length_ms": 30000.0, "model_id": "music_v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, s := fake(t, 200, map[string]string{"Content-Type": "audio/mpeg"}, []byte("ID3mp3"), false)
			m := sfxModel
			if tt.job.Type == jobs.TypeMusic {
				m = musicModel
			}
			step, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Start(context.Background(), m, &tt.job)
			if err != nil {
				t.Fatalf("Start = %v", err)
			}
			if got := read(t, step.Result); string(got) != "ID3mp3" || step.Result.ContentType != "audio/mpeg" || step.Result.Ext != "mp3" {
				t.Errorf("result %q %s %s; want the mp3 bytes", got, step.Result.ContentType, step.Result.Ext)
			}
			if s.path != tt.wantPath || s.format != tt.wantFormat {
				t.Errorf("request %s ?output_format=%s; want %s %s", s.path, s.format, tt.wantPath, tt.wantFormat)
			}
			if len(s.body) != len(tt.wantBody) {
				t.Errorf("body = %v; want %v", s.body, tt.wantBody)
			}
			for k, v := range tt.wantBody {
				if s.body[k] != v {
					t.Errorf("body[%s] = %v; want %v", k, s.body[k], v)
				}
			}
		})
	}
}

func TestLyricsSendAPlan(t *testing.T) {
	srv, s := fake(t, 200, map[string]string{"Content-Type": "audio/mpeg"}, []byte("ID3"), false)
	lyrics := "[Verse]\nfirst line\nsecond line\n\n[Chorus]\nsing it\nsing it loud\n\nlast words"
	j := &jobs.Job{Type: jobs.TypeMusic, Input: jobs.Input{Prompt: "upbeat pop", Duration: 60, Format: "mp3", Mode: "LYRICS", Lyrics: lyrics}}
	if _, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Start(context.Background(), musicModel, j); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.body["prompt"]; ok {
		t.Errorf("body has a prompt next to the composition plan: %v", s.body)
	}
	b, _ := json.Marshal(s.body["composition_plan"])
	var plan CompositionPlan
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	var lines []string
	total := 0
	for _, sec := range plan.Sections {
		lines = append(lines, sec.Lines...)
		total += sec.DurationMS
	}
	if strings.Join(lines, "|") != "first line|second line|sing it|sing it loud|last words" {
		t.Errorf("plan lines = %q; want every lyric line once, in order", lines)
	}
	if total != 60000 || len(plan.Sections) != 3 || plan.Sections[0].SectionName != "Verse" || plan.Sections[1].SectionName != "Chorus" {
		t.Errorf("plan = %+v; want Verse, Chorus, Part 3 lasting 60 s in all", plan.Sections)
	}
	if len(plan.PositiveGlobalStyles) != 1 || plan.PositiveGlobalStyles[0] != "upbeat pop" {
		t.Errorf("global styles = %v; want the prompt", plan.PositiveGlobalStyles)
	}
}

func TestPlanDurations(t *testing.T) {
	many := strings.Repeat("a line\n\n", 12)
	tests := []struct {
		name     string
		lyrics   string
		ms       int
		sections int
		wantErr  bool
	}{
		{"one block", "la la\nla", 10000, 1, false},
		{"uneven blocks", "one\n\n" + strings.Repeat("many\n", 9), 200000, 2, false},
		{"more blocks than the length holds are merged", many, 10000, 3, false},
		{"too long for one section", "la", 300000, 0, true},
		{"no lines", "\n\n[Chorus]\n", 10000, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Plan("p", tt.lyrics, tt.ms)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Plan = %+v; want an error", plan)
				}
				return
			}
			if err != nil || len(plan.Sections) != tt.sections {
				t.Fatalf("Plan = %+v, %v; want %d sections", plan, err, tt.sections)
			}
			total, lines := 0, 0
			for _, s := range plan.Sections {
				if s.DurationMS < minSectionMS || s.DurationMS > maxSectionMS {
					t.Errorf("section %s lasts %d ms; want 3000-120000", s.SectionName, s.DurationMS)
				}
				total += s.DurationMS
				lines += len(s.Lines)
			}
			if total != tt.ms || lines != strings.Count(tt.lyrics, "\n")+1-strings.Count(tt.lyrics, "\n\n")-btoi(strings.HasSuffix(tt.lyrics, "\n")) {
				t.Errorf("sections last %d ms with %d lines", total, lines)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWAV checks that raw PCM comes back as a WAV file: the canonical
// header for mono 16-bit at the vendor's rate, then the samples as sent.
func TestWAV(t *testing.T) {
	pcm := make([]byte, 2*4410)
	for i := 0; i < len(pcm)/2; i++ {
		binary.LittleEndian.PutUint16(pcm[2*i:], uint16(int16(i*7)))
	}
	for _, chunked := range []bool{false, true} {
		t.Run(map[bool]string{false: "with Content-Length", true: "chunked"}[chunked], func(t *testing.T) {
			srv, s := fake(t, 200, nil, pcm, chunked)
			j := &jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "p", Duration: 1, Format: "wav"}}
			step, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Start(context.Background(), sfxModel, j)
			if err != nil {
				t.Fatal(err)
			}
			got := read(t, step.Result)
			if s.format != "pcm_44100" || step.Result.ContentType != "audio/wav" || step.Result.Ext != "wav" {
				t.Errorf("format %s, result %s %s; want pcm_44100 -> audio/wav", s.format, step.Result.ContentType, step.Result.Ext)
			}
			if len(got) != 44+len(pcm) || !bytes.Equal(got[44:], pcm) {
				t.Fatalf("wav has %d bytes; want a 44-byte header and the %d PCM bytes as sent", len(got), len(pcm))
			}
			le := binary.LittleEndian
			if string(got[0:4]) != "RIFF" || le.Uint32(got[4:]) != uint32(36+len(pcm)) || string(got[8:16]) != "WAVEfmt " ||
				le.Uint16(got[20:]) != 1 || le.Uint16(got[22:]) != 1 || le.Uint32(got[24:]) != 44100 || le.Uint32(got[28:]) != 88200 ||
				le.Uint16(got[32:]) != 2 || le.Uint16(got[34:]) != 16 || string(got[36:40]) != "data" || le.Uint32(got[40:]) != uint32(len(pcm)) {
				t.Errorf("header = % x; want PCM mono 16-bit 44100 Hz with the data size", got[:44])
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		key      string
		wantCode string // a job error code, or "transient"
		wantMsg  string
	}{
		{"validation", 422, nil, `{"detail":[{"loc":["body","duration_seconds"],"msg":"Input should be less than or equal to 30","type":"less_than_equal"}]}`, testKey, jobs.CodeUpstream, "less than or equal to 30"},
		{"copyrighted prompt", 400, nil, `{"detail":{"status":"bad_prompt","message":"The prompt names an artist.","data":{"prompt_suggestion":"a pop song"}}}`, testKey, jobs.CodeContentPolicy, "names an artist"},
		{"bad key", 401, nil, "", "wrong", jobs.CodeUpstream, "API key"},
		{"quota used up", 401, nil, `{"detail":{"status":"quota_exceeded","message":"This request exceeds your quota of 10000. You have 0 credits remaining, while 91 credits are required for this request."}}`, testKey, jobs.CodeUpstream, "quota is used up"},
		{"key named", 401, nil, `{"detail":{"status":"invalid_api_key","message":"Incorrect API key provided: el-UPSTREAM-SECRET"}}`, testKey, jobs.CodeUpstream, "el-UPSTREAM-SECRET"},
		{"payment required", 402, nil, `{"detail":{"status":"payment_required","message":"Subscription of SECRET-ORG-42 has lapsed"}}`, testKey, jobs.CodeUpstream, "SECRET-ORG-42"},
		{"forbidden", 403, nil, `{"detail":{"status":"missing_permissions","message":"The key of SECRET-ORG-42 lacks sound_generation"}}`, testKey, jobs.CodeUpstream, "SECRET-ORG-42"},
		{"quota", 429, map[string]string{"Retry-After": "12"}, `{"detail":{"status":"too_many_concurrent_requests","message":"busy"}}`, testKey, "transient", ""},
		{"server error", 500, nil, `oops`, testKey, "transient", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fake(t, tt.status, tt.header, []byte(tt.body), false)
			j := &jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "p", Duration: 1, Format: "mp3"}}
			_, err := New(Config{BaseURL: srv.URL, APIKey: tt.key}).Start(context.Background(), sfxModel, j)
			if err == nil {
				t.Fatal("Start = nil; want an error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q contains the key", err)
			}
			if tt.wantCode == "transient" {
				var te *jobs.TransientError
				if !errors.As(err, &te) {
					t.Fatalf("Start = %v; want a TransientError", err)
				}
				if tt.status == 429 && te.RetryAfter != 12*time.Second {
					t.Errorf("RetryAfter = %v; want 12s", te.RetryAfter)
				}
				return
			}
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || pe.Code != tt.wantCode || !strings.Contains(pe.Message, tt.wantMsg) {
				t.Fatalf("Start = %v; want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
			// A refused key and a used-up quota are the operator's account's
			// (the routing policy moves a job on), the request's errors not.
			account := tt.status == 401 || tt.status == 402 || tt.status == 403
			if pe.Account != account || pe.Status != tt.status {
				t.Errorf("ProviderError = %+v; want status %d, Account %v", pe, tt.status, account)
			}
			// The job it fails: the operator's account's failure tells the
			// client only that the provider failed; ElevenLabs' words
			// (its key, quota, subscription) are the operator's.
			je := jobs.FailureOf("elevenlabs", err)
			switch {
			case account && (je.Message != "The elevenlabs provider failed; no credits were charged." || !strings.Contains(je.Vendor, tt.wantMsg)):
				t.Errorf("the job fails with %+v; want the generic message, ElevenLabs' words in Vendor", je)
			case !account && (je.Message != pe.Message || je.Vendor != ""):
				t.Errorf("the job fails with %+v; want the vendor's words for the request's own failure", je)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	j := &jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "p", Duration: 1, Format: "mp3"}}
	var te *jobs.TransientError
	if _, err := New(Config{BaseURL: base, APIKey: testKey}).Start(context.Background(), sfxModel, j); !errors.As(err, &te) {
		t.Fatalf("Start against a closed port = %v; want a TransientError", err)
	}
}
