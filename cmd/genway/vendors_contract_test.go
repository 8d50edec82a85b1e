package main

// The vendor contract tests: each media vendor's official JavaScript SDK
// against our adapter and our fake vendor (see contract_test.go for the
// harness and clients/npm/vendors for the scripts). Run them with
//
//	CGO_ENABLED=0 go test -count=1 -p 1 -run Contract -v ./cmd/genway/

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/elevenlabs"
	"github.com/genway/genway/shared/providers/fal"
	"github.com/genway/genway/shared/providers/gemini"
	"github.com/genway/genway/shared/providers/replicate"
)

// TestVendorContractElevenLabs: @elevenlabs/elevenlabs-js 2.73.0 makes
// sound effects (textToSoundEffects.convert) and music (music.compose,
// from a prompt and from a composition plan) as our adapter does, and
// reads our fake's audio and errors.
func TestVendorContractElevenLabs(t *testing.T) {
	const lyrics = "[Verse]\nfirst line\nsecond line\n\n[Chorus]\nsing it loud"
	plan, err := elevenlabs.Plan("upbeat pop", lyrics, 20000)
	if err != nil {
		t.Fatal(err)
	}
	sfx := func(text string, seconds int, format string) map[string]any {
		return map[string]any{"method": "sfx", "request": map[string]any{
			"text": text, "durationSeconds": seconds, "modelId": "eleven_text_to_sound_v2", "outputFormat": format}}
	}
	music := func(req map[string]any) map[string]any {
		req["modelId"], req["outputFormat"] = "music_v1", "mp3_44100_128"
		return map[string]any{"method": "music", "request": req}
	}
	mp3 := func(t *testing.T, sdk sdkReport, ours adapterRun) {
		v := sdkValue(t, sdk)
		if v["bytes"] != float64(len(testMP3())) || v["contentType"] != "audio/mpeg" {
			t.Errorf("the SDK read %v; want the fake's %d-byte MP3 as audio/mpeg", v, len(testMP3()))
		}
		oursEnded(t, ours, "ok", "")
		if ours.ContentType != "audio/mpeg" || !bytes.Equal(ours.Media, testMP3()) {
			t.Errorf("our adapter read %s, %d bytes; want the fake's MP3", ours.ContentType, len(ours.Media))
		}
	}
	vendorContract{
		pkg: "@elevenlabs/elevenlabs-js", version: "2.73.0", script: "elevenlabs.mjs",
		key:  vendorKeys["ELEVENLABS_API_KEY"],
		fake: fakeElevenLabs,
		adapter: func(base, key string) jobs.Provider {
			return elevenlabs.New(elevenlabs.Config{BaseURL: base, APIKey: key})
		},
		step: func(r wireRequest) string { return r.Path },
		cases: []contractCase{
			{name: "sound effect", model: "elevenlabs-sfx", wire: true,
				input: jobs.Input{Prompt: "door slam", Duration: 5, Format: "mp3"},
				sdk:   sfx("door slam", 5, "mp3_44100_128"), check: mp3},
			{name: "sound effect with a category as wav", model: "elevenlabs-sfx", wire: true,
				input: jobs.Input{Prompt: "door slam", Category: "impact", Duration: 2, Format: "wav"},
				sdk:   sfx("impact sound effect: door slam", 2, "pcm_44100"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					pcm := 2 * 2 * elevenlabs.PCMRate // 2 s of 16-bit mono samples
					if v := sdkValue(t, sdk); v["bytes"] != float64(pcm) {
						t.Errorf("the SDK read %v; want %d bytes of raw PCM", v, pcm)
					}
					oursEnded(t, ours, "ok", "")
					if ours.ContentType != "audio/wav" || len(ours.Media) != 44+pcm || !bytes.HasPrefix(ours.Media, []byte("RIFF")) {
						t.Errorf("our adapter read %s, %d bytes; want a WAV of the %d PCM bytes", ours.ContentType, len(ours.Media), pcm)
					}
				}},
			{name: "music from a prompt", model: "elevenlabs-music", wire: true,
				input: jobs.Input{Prompt: "calm piano", Duration: 30, Format: "mp3", Mode: "DESCRIPTION"},
				sdk:   music(map[string]any{"prompt": "calm piano", "musicLengthMs": 30000}), check: mp3},
			{name: "music from a composition plan", model: "elevenlabs-music", wire: true,
				input: jobs.Input{Prompt: "upbeat pop", Duration: 20, Format: "mp3", Mode: "LYRICS", Lyrics: lyrics},
				sdk:   music(map[string]any{"compositionPlan": sdkCompositionPlan(plan)}), check: mp3},
			{name: "wrong key", model: "elevenlabs-sfx", badKey: true,
				input: jobs.Input{Prompt: "door slam", Duration: 5, Format: "mp3"},
				sdk:   sfx("door slam", 5, "mp3_44100_128"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					e := sdkThrew(t, sdk, "ElevenLabsError", http.StatusUnauthorized)
					if field(e.Body, "detail.status") != "invalid_api_key" {
						t.Errorf("the SDK read the body %v; want detail.status invalid_api_key", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "rejected the configured API key: Invalid API key")
				}},
			{name: "duration out of range", model: "elevenlabs-sfx",
				input: jobs.Input{Prompt: "door slam", Duration: 45, Format: "mp3"},
				sdk:   sfx("door slam", 45, "mp3_44100_128"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					e := sdkThrew(t, sdk, "UnprocessableEntityError", http.StatusUnprocessableEntity)
					if field(e.Body, "detail.0.loc.1") != "duration_seconds" {
						t.Errorf("the SDK read the body %v; want a validation error on duration_seconds", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "duration_seconds")
				}},
			{name: "copyrighted music prompt", model: "elevenlabs-music",
				input: jobs.Input{Prompt: "forbidden: a famous band's hit", Duration: 30, Format: "mp3", Mode: "DESCRIPTION"},
				sdk:   music(map[string]any{"prompt": "forbidden: a famous band's hit", "musicLengthMs": 30000}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					e := sdkThrew(t, sdk, "ElevenLabsError", http.StatusBadRequest)
					if field(e.Body, "detail.status") != "bad_prompt" {
						t.Errorf("the SDK read the body %v; want detail.status bad_prompt", e.Body)
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "copyrighted")
				}},
			{name: "throttled", model: "elevenlabs-sfx",
				input: jobs.Input{Prompt: "throttled door", Duration: 5, Format: "mp3"},
				sdk:   sfx("throttled door", 5, "mp3_44100_128"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					e := sdkThrew(t, sdk, "ElevenLabsError", http.StatusTooManyRequests)
					if field(e.Body, "detail.status") != "too_many_concurrent_requests" {
						t.Errorf("the SDK read the body %v; want detail.status too_many_concurrent_requests", e.Body)
					}
					oursEnded(t, ours, "transient", "")
				}},
		},
	}.run(t)
}

// sdkCompositionPlan is plan in the ElevenLabs SDK's own terms (its
// MusicPrompt type), which the SDK serializes to the wire itself.
func sdkCompositionPlan(plan *elevenlabs.CompositionPlan) map[string]any {
	var sections []map[string]any
	for _, s := range plan.Sections {
		sections = append(sections, map[string]any{"sectionName": s.SectionName, "positiveLocalStyles": s.PositiveLocalStyles,
			"negativeLocalStyles": s.NegativeLocalStyles, "durationMs": s.DurationMS, "lines": s.Lines})
	}
	return map[string]any{"positiveGlobalStyles": plan.PositiveGlobalStyles, "negativeGlobalStyles": plan.NegativeGlobalStyles, "sections": sections}
}

// TestVendorContractVeo: @google/genai 2.32.0 (as genai2; 3.x offers
// generateVideos on Vertex AI only) submits a Veo generation
// (models.generateVideos: predictLongRunning) and polls its operation
// (operations.getVideosOperation) as our adapter does, and reads our
// fake's operations and errors.
func TestVendorContractVeo(t *testing.T) {
	video := func(model, prompt, aspect, resolution string, seconds int) map[string]any {
		return map[string]any{"request": map[string]any{"model": model, "source": map[string]any{"prompt": prompt},
			"config": map[string]any{"aspectRatio": aspect, "resolution": resolution, "durationSeconds": seconds}}}
	}
	done := func(t *testing.T, sdk sdkReport, ours adapterRun) {
		v := sdkValue(t, sdk)
		if got := fmt.Sprint(v["done"]); got != "[false false true]" {
			t.Errorf("the SDK read done %s; want [false false true] (submitted, running, done)", got)
		}
		if uri, _ := field(v, "response.generatedVideos.0.video.uri").(string); !strings.HasSuffix(uri, ":download?alt=media") {
			t.Errorf("the SDK read the response %v; want generatedVideos[0].video.uri", v["response"])
		}
		oursEnded(t, ours, "ok", "")
		if ours.Pending != 1 || ours.ContentType != "video/mp4" || !bytes.Equal(ours.Media, testVideo()) {
			t.Errorf("our adapter: %d pending polls, %s, %d bytes; want 1 pending poll, then the fake's MP4", ours.Pending, ours.ContentType, len(ours.Media))
		}
	}
	// The catalog's Veo models run on Vertex AI (TestVertexSDKContract in
	// shared/providers/gemini); the Gemini API route stays for catalogs of one's own,
	// with the preview ids Google served there.
	vendorContract{
		pkg: "genai2", version: "2.32.0", script: "veo.mjs",
		key:  vendorKeys["GEMINI_API_KEY"],
		fake: func(t testing.TB) *fakeVendor { return fakeVeo(t, 2) },
		adapter: func(base, key string) jobs.Provider {
			return gemini.NewVideo(gemini.Config{BaseURL: base, APIKey: key})
		},
		step: func(r wireRequest) string {
			switch {
			case strings.HasSuffix(r.Path, ":predictLongRunning"):
				return "generate"
			case strings.Contains(r.Path, "/operations/"):
				return "operation"
			}
			return "download"
		},
		known: map[string]string{
			"download: only ours makes this request": "the SDK hands back generatedVideos[0].video.uri (its files.download " +
				"rebuilds the URL from the file id on its own base); we download the uri as given with the key, following " +
				"redirects, as the Gemini API's REST guide does (curl -L with x-goog-api-key)",
		},
		cases: []contractCase{
			{name: "landscape 720p", model: "veo-3.1", upstream: "veo-3.1-generate-preview", wire: true,
				input: jobs.Input{Prompt: "a fox in the snow", Duration: 8, Size: "1280x720"},
				sdk:   video("veo-3.1-generate-preview", "a fox in the snow", "16:9", "720p", 8), check: done},
			{name: "portrait 1080p", model: "veo-3.1-fast", upstream: "veo-3.1-fast-generate-preview", wire: true,
				input: jobs.Input{Prompt: "a fox in the rain", Duration: 8, Size: "1080x1920"},
				sdk:   video("veo-3.1-fast-generate-preview", "a fox in the rain", "9:16", "1080p", 8), check: done},
			{name: "wrong key", model: "veo-3.1", upstream: "veo-3.1-generate-preview", badKey: true,
				input: jobs.Input{Prompt: "a fox", Duration: 8, Size: "1280x720"},
				sdk:   video("veo-3.1-generate-preview", "a fox", "16:9", "720p", 8),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusBadRequest); !strings.Contains(e.Message, "API_KEY_INVALID") {
						t.Errorf("the SDK read %q; want the API_KEY_INVALID reason", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "refused the configured key")
				}},
			{name: "invalid argument", model: "veo-3.1", upstream: "veo-3.1-generate-preview",
				input: jobs.Input{Prompt: "", Duration: 8, Size: "1280x720"},
				sdk:   video("veo-3.1-generate-preview", "", "16:9", "720p", 8),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusBadRequest); !strings.Contains(e.Message, "INVALID_ARGUMENT") {
						t.Errorf("the SDK read %q; want INVALID_ARGUMENT", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "prompt is required")
				}},
			{name: "filtered by safety", model: "veo-3.1", upstream: "veo-3.1-generate-preview",
				input: jobs.Input{Prompt: "forbidden scene", Duration: 8, Size: "1280x720"},
				sdk:   video("veo-3.1-generate-preview", "forbidden scene", "16:9", "720p", 8),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					v := sdkValue(t, sdk)
					if field(v, "response.raiMediaFilteredCount") != 1.0 || field(v, "response.raiMediaFilteredReasons.0") == nil || field(v, "response.generatedVideos") != nil {
						t.Errorf("the SDK read the response %v; want raiMediaFilteredCount 1 with a reason, no videos", v["response"])
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "usage policies")
				}},
			{name: "throttled", model: "veo-3.1", upstream: "veo-3.1-generate-preview",
				input: jobs.Input{Prompt: "throttled fox", Duration: 8, Size: "1280x720"},
				sdk:   video("veo-3.1-generate-preview", "throttled fox", "16:9", "720p", 8),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusTooManyRequests); !strings.Contains(e.Message, "RESOURCE_EXHAUSTED") {
						t.Errorf("the SDK read %q; want RESOURCE_EXHAUSTED", e.Message)
					}
					oursEnded(t, ours, "transient", "")
				}},
		},
	}.run(t)
}

// TestVendorContractFal: @fal-ai/client 1.10.1 queues a request on a
// nested endpoint id (our Kling model's
// fal-ai/kling-video/v2.5-turbo/pro/text-to-video), reads its status
// until COMPLETED and fetches its result (queue.submit, queue.status,
// queue.result) as our adapter does, and reads our fake's queue and
// errors.
func TestVendorContractFal(t *testing.T) {
	const kling = "fal-ai/kling-video/v2.5-turbo/pro/text-to-video"
	queue := func(input map[string]any) map[string]any { return map[string]any{"endpoint": kling, "input": input} }
	completed := func(t *testing.T, sdk sdkReport, ours adapterRun) {
		v := sdkValue(t, sdk)
		if got := fmt.Sprint(v["statuses"]); got != "[IN_QUEUE IN_PROGRESS COMPLETED]" {
			t.Errorf("the SDK read the statuses %s; want [IN_QUEUE IN_PROGRESS COMPLETED]", got)
		}
		if url, _ := field(v, "data.video.url").(string); !strings.HasSuffix(url, "/files/out.mp4") || field(v, "data.video.content_type") != "video/mp4" {
			t.Errorf("the SDK read the result %v; want video.url and video.content_type", v["data"])
		}
		oursEnded(t, ours, "ok", "")
		if ours.Pending != 2 || ours.ContentType != "video/mp4" || !bytes.Equal(ours.Media, testVideo()) {
			t.Errorf("our adapter: %d pending polls, %s, %d bytes; want 2 pending polls, then the fake's MP4", ours.Pending, ours.ContentType, len(ours.Media))
		}
	}
	vendorContract{
		pkg: "@fal-ai/client", version: "1.10.1", script: "fal.mjs",
		key:  vendorKeys["FAL_KEY"],
		fake: func(t testing.TB) *fakeVendor { return fakeFal(t, 3) },
		adapter: func(base, key string) jobs.Provider {
			return fal.New(fal.Config{BaseURL: base, APIKey: key})
		},
		step: func(r wireRequest) string {
			switch {
			case r.Method == http.MethodPost:
				return "submit"
			case strings.HasSuffix(r.Path, "/status"):
				return "status"
			case strings.Contains(r.Path, "/requests/"):
				return "result"
			}
			return "download"
		},
		known: map[string]string{
			`status: query "logs": sdk "0", ours absent`: "the SDK always asks logs=0 (its default: no logs); " +
				"without the parameter fal sends no logs either, and we poll the status_url fal handed back, as given",
			"download: only ours makes this request": "the SDK hands back the result's video.url; we copy the file " +
				"into our storage (without the key: fal's file links are public)",
		},
		cases: []contractCase{
			{name: "landscape 5 s", model: "kling-2.5-turbo", wire: true,
				input: jobs.Input{Prompt: "a fox running", Duration: 5, Size: "1920x1080"},
				sdk:   queue(map[string]any{"prompt": "a fox running", "duration": "5", "aspect_ratio": "16:9"}), check: completed},
			{name: "portrait 10 s", model: "kling-2.5-turbo", wire: true,
				input: jobs.Input{Prompt: "a fox jumping", Duration: 10, Size: "1080x1920"},
				sdk:   queue(map[string]any{"prompt": "a fox jumping", "duration": "10", "aspect_ratio": "9:16"}), check: completed},
			{name: "wrong key", model: "kling-2.5-turbo", badKey: true,
				input: jobs.Input{Prompt: "a fox", Duration: 5, Size: "1920x1080"},
				sdk:   queue(map[string]any{"prompt": "a fox", "duration": "5", "aspect_ratio": "16:9"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusUnauthorized); field(e.Body, "detail") == nil {
						t.Errorf("the SDK read the body %v; want fal's detail", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "fal refused the configured key")
				}},
			{name: "invalid input", model: "kling-2.5-turbo",
				input: jobs.Input{Prompt: "", Duration: 5, Size: "1920x1080"},
				sdk:   queue(map[string]any{"prompt": "", "duration": "5", "aspect_ratio": "16:9"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ValidationError", http.StatusUnprocessableEntity); field(e.Body, "detail.0.loc.1") != "prompt" {
						t.Errorf("the SDK read the body %v; want a field error on prompt", e.Body)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "field required")
				}},
			{name: "content policy", model: "kling-2.5-turbo",
				input: jobs.Input{Prompt: "forbidden scene", Duration: 5, Size: "1920x1080"},
				sdk:   queue(map[string]any{"prompt": "forbidden scene", "duration": "5", "aspect_ratio": "16:9"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ValidationError", http.StatusUnprocessableEntity); field(e.Body, "detail.0.type") != "content_policy_violation" {
						t.Errorf("the SDK read the body %v; want a content_policy_violation", e.Body)
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "flagged by the content checker")
				}},
			{name: "throttled once", model: "kling-2.5-turbo",
				input: jobs.Input{Prompt: "throttled fox", Duration: 5, Size: "1920x1080"},
				sdk:   queue(map[string]any{"prompt": "throttled fox", "duration": "5", "aspect_ratio": "16:9"}),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					// The SDK retries a 429 by itself; our worker retries
					// the job later.
					if sdkValue(t, sdk); count(sdk.Requests, http.MethodPost, "/text-to-video") != 2 {
						t.Errorf("the SDK submitted %d times; want a 429, then a retry that was queued", count(sdk.Requests, http.MethodPost, "/text-to-video"))
					}
					oursEnded(t, ours, "transient", "Too many requests")
				}},
		},
	}.run(t)
}

// TestVendorContractReplicate: replicate 1.4.0 creates predictions by
// version (our musicgen model, "owner/name:version") and by model
// ("owner/name") and reads them until they end (predictions.create,
// predictions.get) as our adapter does, and reads our fake's predictions
// and errors.
func TestVendorContractReplicate(t *testing.T) {
	const version = "671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb"
	// musicgen's input, as the catalog maps a 12-second mp3 job onto it.
	input := func(prompt string) map[string]any {
		return map[string]any{"prompt": prompt, "duration": 12, "output_format": "mp3", "model_version": "stereo-large", "normalization_strategy": "loudness"}
	}
	job := func(prompt string) jobs.Input {
		return jobs.Input{Prompt: prompt, Duration: 12, Format: "mp3", Mode: "DESCRIPTION"}
	}
	byVersion := func(prompt string) map[string]any {
		return map[string]any{"request": map[string]any{"version": version, "input": input(prompt)}}
	}
	succeeded := func(t *testing.T, sdk sdkReport, ours adapterRun) {
		v := sdkValue(t, sdk)
		if got := fmt.Sprint(v["statuses"]); got != "[starting processing succeeded]" {
			t.Errorf("the SDK read the statuses %s; want [starting processing succeeded]", got)
		}
		if out, _ := v["output"].(string); !strings.HasSuffix(out, "/out.mp3") {
			t.Errorf("the SDK read the output %v; want the file's URL", v["output"])
		}
		oursEnded(t, ours, "ok", "")
		if ours.Pending != 1 || ours.ContentType != "audio/mpeg" || !bytes.Equal(ours.Media, testMP3()) {
			t.Errorf("our adapter: %d pending polls, %s, %d bytes; want 1 pending poll, then the fake's MP3", ours.Pending, ours.ContentType, len(ours.Media))
		}
	}
	vendorContract{
		pkg: "replicate", version: "1.4.0", script: "replicate.mjs",
		key:  vendorKeys["REPLICATE_API_TOKEN"],
		fake: func(t testing.TB) *fakeVendor { return fakeReplicate(t, 2) },
		adapter: func(base, key string) jobs.Provider {
			return replicate.New(replicate.Config{BaseURL: base, APIToken: key})
		},
		step: func(r wireRequest) string {
			switch {
			case r.Method == http.MethodPost:
				return "create"
			case strings.HasPrefix(r.Path, "/v1/predictions/"):
				return "get"
			}
			return "download"
		},
		known: map[string]string{
			"download: only ours makes this request": "the SDK hands back the output URL; we copy the file into our " +
				"storage (without the token: Replicate's delivery links are public, and expire after an hour)",
		},
		cases: []contractCase{
			{name: "by version", model: "musicgen", wire: true,
				input: job("lofi beat"), sdk: byVersion("lofi beat"), check: succeeded},
			{name: "by model", model: "musicgen", upstream: "meta/musicgen", wire: true,
				input: job("lofi beat"), sdk: map[string]any{"request": map[string]any{"model": "meta/musicgen", "input": input("lofi beat")}},
				check: succeeded},
			{name: "wrong token", model: "musicgen", badKey: true,
				input: job("lofi beat"), sdk: byVersion("lofi beat"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusUnauthorized); !strings.Contains(e.Message, "valid authentication token") {
						t.Errorf("the SDK read %q; want Replicate's detail", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "Replicate refused the configured token")
				}},
			{name: "invalid input", model: "musicgen",
				input: job(""), sdk: byVersion(""),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					if e := sdkThrew(t, sdk, "ApiError", http.StatusUnprocessableEntity); !strings.Contains(e.Message, "Input validation failed") {
						t.Errorf("the SDK read %q; want Replicate's problem details", e.Message)
					}
					oursEnded(t, ours, jobs.CodeUpstream, "at least 1 character")
				}},
			{name: "flagged as sensitive", model: "musicgen",
				input: job("forbidden song"), sdk: byVersion("forbidden song"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					v := sdkValue(t, sdk)
					if got := fmt.Sprint(v["statuses"]); got != "[starting processing failed]" || !strings.Contains(fmt.Sprint(v["error"]), "E005") {
						t.Errorf("the SDK read the statuses %s, error %v; want [starting processing failed] with E005", got, v["error"])
					}
					oursEnded(t, ours, jobs.CodeContentPolicy, "flagged as sensitive")
				}},
			{name: "throttled once", model: "musicgen",
				input: job("throttled beat"), sdk: byVersion("throttled beat"),
				check: func(t *testing.T, sdk sdkReport, ours adapterRun) {
					// The SDK retries a 429 by itself; our worker retries
					// the job later, after the Retry-After.
					if sdkValue(t, sdk); count(sdk.Requests, http.MethodPost, "/v1/predictions") != 2 {
						t.Errorf("the SDK created %d times; want a 429, then a retry that was created", count(sdk.Requests, http.MethodPost, "/v1/predictions"))
					}
					var te *jobs.TransientError
					if oursEnded(t, ours, "transient", "throttled"); !errors.As(ours.Err, &te) || te.RetryAfter != time.Second {
						t.Errorf("our adapter ended %v; want a retry after the fake's Retry-After (1 s)", ours.Err)
					}
				}},
		},
	}.run(t)
}
