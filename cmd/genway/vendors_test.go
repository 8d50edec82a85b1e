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

	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/vertextest"
)

// Fake media vendors for the end-to-end tests: httptest servers on
// loopback that speak each vendor's documented protocol (the adapters'
// own tests check the wire in detail; these check the whole path through
// genway serve). Each counts submits, so a test can say "submitted once".

// vendorKeys are the fake vendors' API keys; a test asserts that none of
// them appears in a job, a link or a log line.
var vendorKeys = map[string]string{
	"ELEVENLABS_API_KEY":  "eleven-secret-key-1234567890",
	"FAL_KEY":             "fal-secret-key-1234567890",
	"REPLICATE_API_TOKEN": "r8_replicate-secret-1234567890",
}

// fakeVendor is one fake vendor: its server, and what it saw.
type fakeVendor struct {
	srv *httptest.Server
	// donePolls is how many status reads a long-running generation takes
	// to finish (the answer to the last of them is "done").
	donePolls int

	mu      sync.Mutex
	submits int
	polls   map[string]int // by generation id
	badAuth int
	refused []string // generation ids the vendor refuses
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
	return "gen" + strconv.Itoa(v.submits)
}

// poll records a status read of id and reports whether it is done.
func (v *fakeVendor) poll(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.polls == nil {
		v.polls = map[string]int{}
	}
	v.polls[id]++
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

// fakeVertex is Veo on Vertex AI (vertextest: the token endpoint of its
// service account, predictLongRunning, fetchPredictOperation answering
// done after donePolls reads, the video inline), handing out testVideo.
func fakeVertex(t testing.TB, donePolls int) *vertextest.Server {
	v := vertextest.NewServer(t)
	v.DonePolls = donePolls
	v.Video = testVideo()
	return v
}

// vertexVendor counts a fakeVertex's submits and refused calls, as a
// fakeVendor does.
type vertexVendor struct{ *vertextest.Server }

func (v vertexVendor) counts() (submits, badAuth int) {
	submits, _, badAuth = v.Counts()
	return submits, badAuth
}

// fakeElevenLabs answers sound generation and music with the audio bytes:
// MP3, or raw 16-bit PCM for a pcm_* output format.
func fakeElevenLabs(t testing.TB) *fakeVendor {
	v := &fakeVendor{}
	key := vendorKeys["ELEVENLABS_API_KEY"]
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
func vendorEnv(vertex *vertextest.Server, eleven, fal, replicate *fakeVendor) map[string]string {
	env := map[string]string{"GENWAY_MEDIA_POLL": "1s"}
	for k, v := range vendorKeys {
		env[k] = v
	}
	for k, v := range vertexEnv(vertex) {
		env[k] = v
	}
	env["ELEVENLABS_BASE_URL"] = eleven.srv.URL
	env["FAL_BASE_URL"] = fal.srv.URL
	env["REPLICATE_BASE_URL"] = replicate.srv.URL
	return env
}

// vertexEnv points genway serve at a fakeVertex: its service-account key
// (the JSON itself, as an SSM parameter would hold it) and its URL.
func vertexEnv(v *vertextest.Server) map[string]string {
	return map[string]string{"GOOGLE_VERTEX_CREDENTIALS": v.Credentials(), "GOOGLE_VERTEX_BASE_URL": v.URL}
}

// noSecrets fails if any vendor key appears in s, or a service-account
// key's private key, or one of the access tokens it was exchanged for.
func noSecrets(t *testing.T, where, s string) {
	t.Helper()
	for name, k := range vendorKeys {
		if strings.Contains(s, k) {
			t.Errorf("%s contains the %s value", where, name)
		}
	}
	for _, k := range []string{"PRIVATE KEY", "ya29."} {
		if strings.Contains(s, k) {
			t.Errorf("%s contains %q: a service-account key or its token", where, k)
		}
	}
}
