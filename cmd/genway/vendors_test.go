package main

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/media"
)

// Fake media vendors for the end-to-end tests: httptest servers on
// loopback that speak each vendor's documented protocol (the adapters'
// own tests check the wire in detail; these check the whole path through
// genway serve). Each counts submits, so a test can say "submitted once".

// vendorKeys are the fake vendors' API keys; a test asserts that none of
// them appears in a job, a link or a log line.
var vendorKeys = map[string]string{
	"GEMINI_API_KEY":      "gemini-secret-key-1234567890",
	"ELEVENLABS_API_KEY":  "eleven-secret-key-1234567890",
	"FAL_KEY":             "fal-secret-key-1234567890",
	"REPLICATE_API_TOKEN": "r8_replicate-secret-1234567890",
}

// fakeVendor is one fake vendor: its server, and what it saw.
type fakeVendor struct {
	srv *httptest.Server
	// donePolls is how many status reads a long-running generation takes
	// to finish (the answer to the last of them is "done"); with doneAfter
	// set, a generation is done that long after its submit instead.
	donePolls int
	doneAfter time.Duration

	mu        sync.Mutex
	submits   int
	calls     int                  // every request, authorised or not
	submitted map[string]time.Time // by generation id
	byPrompt  map[string]string    // generation id by prompt
	polls     map[string]int       // by generation id
	badAuth   int
	refused   []string // generation ids the vendor refuses
}

// doneAt is when generation id finished at the vendor (doneAfter mode):
// doneAfter after its submit, plus n x 173 ms modulo 1 s for the n-th
// submit, so that done times fall anywhere between two polls.
func (v *fakeVendor) doneAt(id string) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "gen"))
	return v.submitted[id].Add(v.doneAfter + time.Duration(n*173%1000)*time.Millisecond)
}

func (v *fakeVendor) callCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// count wraps a vendor's handler to count its calls.
func (v *fakeVendor) count(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		v.calls++
		v.mu.Unlock()
		h(w, r)
	}
}

func (v *fakeVendor) counts() (submits, badAuth int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.submits, v.badAuth
}

// submit records a submit and returns its generation id.
func (v *fakeVendor) submit() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.submits++
	id := "gen" + strconv.Itoa(v.submits)
	if v.submitted == nil {
		v.submitted = map[string]time.Time{}
	}
	v.submitted[id] = time.Now()
	return id
}

// poll records a status read of id and reports whether it is done.
func (v *fakeVendor) poll(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.polls == nil {
		v.polls = map[string]int{}
	}
	v.polls[id]++
	if v.doneAfter > 0 {
		v.mu.Unlock()
		done := !time.Now().Before(v.doneAt(id))
		v.mu.Lock()
		return done
	}
	return v.polls[id] >= v.donePolls
}

func (v *fakeVendor) authorized(w http.ResponseWriter, r *http.Request, header, want string) bool {
	if r.Header.Get(header) == want {
		return true
	}
	v.mu.Lock()
	v.badAuth++
	v.mu.Unlock()
	http.Error(w, `{"error":{"code":401,"message":"API key not valid","status":"UNAUTHENTICATED"}}`, http.StatusUnauthorized)
	return false
}

// testVideo is a small playable MP4 the fake video vendors hand out.
var testVideo = sync.OnceValue(func() []byte {
	b, err := media.Video(7, 2, 320, 240)
	if err != nil {
		panic(err)
	}
	return b
})

// testMP3 is a 2-second MP3 the fake audio vendors hand out.
var testMP3 = sync.OnceValue(func() []byte {
	b, _, err := media.Audio(media.Music, 7, 2, "mp3")
	if err != nil {
		panic(err)
	}
	return b
})

// fakeVeo speaks the Gemini API's long-running video protocol:
// predictLongRunning answers an operation, GET of the operation answers
// done after donePolls reads, and the video's uri redirects to the file.
func fakeVeo(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	key := vendorKeys["GEMINI_API_KEY"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case r.Method == "POST" && strings.HasSuffix(p, ":predictLongRunning"):
			if !v.authorized(w, r, "x-goog-api-key", key) {
				return
			}
			model := strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/models/"), ":predictLongRunning")
			var body struct {
				Instances []struct {
					Prompt string `json:"prompt"`
				} `json:"instances"`
			}
			if json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Instances) != 1 || body.Instances[0].Prompt == "" {
				http.Error(w, `{"error":{"code":400,"message":"instances[0].prompt is required","status":"INVALID_ARGUMENT"}}`, 400)
				return
			}
			id := v.submit()
			v.mu.Lock()
			if v.byPrompt == nil {
				v.byPrompt = map[string]string{}
			}
			v.byPrompt[body.Instances[0].Prompt] = id
			v.mu.Unlock()
			writeJSONTest(w, map[string]any{"name": "models/" + model + "/operations/" + id})
		case r.Method == "GET" && strings.Contains(p, "/operations/"):
			if !v.authorized(w, r, "x-goog-api-key", key) {
				return
			}
			name := strings.TrimPrefix(p, "/v1beta/")
			id := name[strings.LastIndex(name, "/")+1:]
			if !v.poll(id) {
				writeJSONTest(w, map[string]any{"name": name})
				return
			}
			writeJSONTest(w, map[string]any{"name": name, "done": true, "response": map[string]any{
				"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
				"generateVideoResponse": map[string]any{"generatedSamples": []any{
					map[string]any{"video": map[string]any{"uri": v.srv.URL + "/v1beta/files/" + id + ":download?alt=media"}},
				}},
			}})
		case r.Method == "GET" && strings.HasPrefix(p, "/v1beta/files/"):
			if !v.authorized(w, r, "x-goog-api-key", key) {
				return
			}
			http.Redirect(w, r, "/storage/"+strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/files/"), ":download")+".mp4", http.StatusFound)
		case r.Method == "GET" && strings.HasPrefix(p, "/storage/"):
			w.Header().Set("Content-Type", "video/mp4")
			w.Write(testVideo())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// fakeElevenLabs answers sound generation and music with the audio bytes:
// MP3, or raw 16-bit PCM for a pcm_* output format.
func fakeElevenLabs(t testing.TB) *fakeVendor {
	v := &fakeVendor{}
	key := vendorKeys["ELEVENLABS_API_KEY"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || (r.URL.Path != "/v1/sound-generation" && r.URL.Path != "/v1/music") {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "xi-api-key", key) {
			return
		}
		var body map[string]any
		if json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, `{"detail":{"status":"invalid_json","message":"bad body"}}`, 422)
			return
		}
		v.submit()
		seconds := 2.0
		if d, ok := body["duration_seconds"].(float64); ok {
			seconds = d
		}
		if ms, ok := body["music_length_ms"].(float64); ok {
			seconds = ms / 1000
		}
		if f := r.URL.Query().Get("output_format"); strings.HasPrefix(f, "pcm_") {
			rate, _ := strconv.Atoi(strings.TrimPrefix(f, "pcm_"))
			pcm := make([]byte, 2*int(seconds*float64(rate)))
			for i := 0; i < len(pcm)/2; i++ {
				binary.LittleEndian.PutUint16(pcm[2*i:], uint16(int16((i%100)*300-15000)))
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(pcm)
			return
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		w.Write(testMP3())
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// fakeFal speaks fal's queue: a submit answers status, response and
// cancel URLs (on a path of their own, as fal's differ from the model id),
// the status is IN_PROGRESS until donePolls reads, the response names the
// file.
func fakeFal(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	auth := "Key " + vendorKeys["FAL_KEY"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/files/"):
			w.Header().Set("Content-Type", "video/mp4")
			w.Write(testVideo())
		case r.Method == "POST":
			if !v.authorized(w, r, "Authorization", auth) {
				return
			}
			var in struct {
				Prompt string `json:"prompt"`
			}
			json.NewDecoder(r.Body).Decode(&in)
			id := v.submit()
			if strings.HasPrefix(in.Prompt, "forbidden") {
				v.mu.Lock()
				v.refused = append(v.refused, id)
				v.mu.Unlock()
			}
			base := v.srv.URL + "/app/requests/" + id
			writeJSONTest(w, map[string]any{"request_id": id, "status_url": base + "/status", "response_url": base, "cancel_url": base + "/cancel"})
		case r.Method == "GET" && strings.HasSuffix(p, "/status"):
			if !v.authorized(w, r, "Authorization", auth) {
				return
			}
			id := strings.TrimSuffix(strings.TrimPrefix(p, "/app/requests/"), "/status")
			status := "IN_PROGRESS"
			if v.poll(id) {
				status = "COMPLETED"
			}
			writeJSONTest(w, map[string]any{"status": status, "request_id": id})
		case r.Method == "GET" && strings.HasPrefix(p, "/app/requests/"):
			if !v.authorized(w, r, "Authorization", auth) {
				return
			}
			v.mu.Lock()
			refused := slices.Contains(v.refused, strings.TrimPrefix(p, "/app/requests/"))
			v.mu.Unlock()
			if refused { // the model's safety checker refused the prompt
				w.WriteHeader(http.StatusUnprocessableEntity)
				writeJSONTest(w, map[string]any{"detail": []any{map[string]any{"loc": []string{"body", "prompt"}, "msg": "The prompt was flagged by the content checker.", "type": "content_policy_violation"}}})
				return
			}
			writeJSONTest(w, map[string]any{"video": map[string]any{"url": v.srv.URL + "/files/out.mp4", "content_type": "video/mp4", "file_size": len(testVideo())}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// fakeReplicate speaks Replicate's predictions API: create answers a
// prediction with urls.get, which is processing until donePolls reads and
// then succeeded with an output URL.
func fakeReplicate(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	auth := "Bearer " + vendorKeys["REPLICATE_API_TOKEN"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/delivery/"):
			w.Header().Set("Content-Type", "audio/mpeg")
			w.Write(testMP3())
		case r.Method == "POST" && (p == "/v1/predictions" || strings.HasSuffix(p, "/predictions")):
			if !v.authorized(w, r, "Authorization", auth) {
				return
			}
			id := v.submit()
			writeJSONTest(w, prediction(v.srv.URL, id, "starting"))
		case r.Method == "GET" && strings.HasPrefix(p, "/v1/predictions/"):
			if !v.authorized(w, r, "Authorization", auth) {
				return
			}
			id := strings.TrimPrefix(p, "/v1/predictions/")
			if v.poll(id) {
				pr := prediction(v.srv.URL, id, "succeeded")
				pr["output"] = v.srv.URL + "/delivery/" + id + "/out.mp3"
				writeJSONTest(w, pr)
				return
			}
			writeJSONTest(w, prediction(v.srv.URL, id, "processing"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func prediction(base, id, status string) map[string]any {
	return map[string]any{"id": id, "status": status, "output": nil, "error": nil,
		"urls": map[string]any{"get": base + "/v1/predictions/" + id, "cancel": base + "/v1/predictions/" + id + "/cancel"}}
}

func writeJSONTest(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// vendorEnv points genway serve at the fake vendors.
func vendorEnv(veo, eleven, fal, replicate *fakeVendor) map[string]string {
	env := map[string]string{"GENWAY_MEDIA_POLL": "1s"}
	for k, v := range vendorKeys {
		env[k] = v
	}
	env["GEMINI_BASE_URL"] = veo.srv.URL
	env["ELEVENLABS_BASE_URL"] = eleven.srv.URL
	env["FAL_BASE_URL"] = fal.srv.URL
	env["REPLICATE_BASE_URL"] = replicate.srv.URL
	return env
}

// noSecrets fails if any vendor key appears in s.
func noSecrets(t *testing.T, where, s string) {
	t.Helper()
	for name, k := range vendorKeys {
		if strings.Contains(s, k) {
			t.Errorf("%s contains the %s value", where, name)
		}
	}
}
