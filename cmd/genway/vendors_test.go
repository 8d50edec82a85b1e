package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/providers/vertextest"
)

// Fake media vendors for the end-to-end tests: httptest servers on
// loopback that speak each vendor's documented protocol (the adapters'
// own tests check the wire in detail; these check the whole path through
// genway serve). Each counts submits, so a test can say "submitted once".
// The vendors' official SDKs read them in the contract tests
// (vendors_contract_test.go), which keeps them honest.
//
// Every fake answers a wrong key with its vendor's own error, and knows
// two prompts:
//   - "forbidden ...": the vendor's content-policy refusal, in its own
//     shape and place (at submit, in the status or in the result);
//   - "throttled ...": the first submit of that prompt is answered 429
//     in the vendor's shape; the next is accepted.
//
// Veo on Vertex AI (fakeVertex, shared/providers/vertextest) knows "forbidden",
// "broken" and "quota ...": every submit of that prompt is answered as
// Vertex AI answers a used-up daily quota (429 RESOURCE_EXHAUSTED with a
// QuotaFailure and a RetryInfo), counted in its Quota.

// vendorKeys are the fake vendors' API keys; a test asserts that none of
// them appears in a job, a link or a log line.
var vendorKeys = map[string]string{
	"GEMINI_API_KEY":      "gemini-secret-key-1234567890",    // Veo through the Gemini API (the contract test), Gemini's image output
	"OPENAI_API_KEY":      "sk-openai-secret-key-1234567890", // OpenAI's Images API
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

	mu        sync.Mutex
	submits   int
	calls     int               // every request, authorised or not
	byPrompt  map[string]string // generation id by prompt
	polls     map[string]int    // by generation id
	badAuth   int
	refused   map[string]bool // generation ids of "forbidden" prompts
	throttled map[string]bool // "throttled" prompts answered 429 once
	// record keeps every request in seen (the contract tests compare
	// them with the vendor SDK's).
	record bool
	seen   []wireRequest
	// pictures are the image requests (fal, Replicate) by generation id:
	// how many images of which format.
	pictures map[string]pictureRequest
}

// pictureRequest is what an image request asked a hosted vendor for.
type pictureRequest struct {
	n      int
	format string
}

// picture records the image request of generation id.
func (v *fakeVendor) picture(id string, n int, format string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pictures == nil {
		v.pictures = map[string]pictureRequest{}
	}
	v.pictures[id] = pictureRequest{n: n, format: format}
}

// pictureOf returns generation id's image request, if it is one.
func (v *fakeVendor) pictureOf(id string) (pictureRequest, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.pictures[id]
	return r, ok
}

func (v *fakeVendor) callCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// count wraps a vendor's handler to count its calls (and record them,
// if asked).
func (v *fakeVendor) count(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		v.calls++
		if v.record {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			v.seen = append(v.seen, wireRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
		}
		v.mu.Unlock()
		h(w, r)
	}
}

// requests returns the requests recorded so far.
func (v *fakeVendor) requests() []wireRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.seen)
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

// poll records a status read of id and reports how many reads it has had
// and whether it is done.
func (v *fakeVendor) poll(id string) (n int, done bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.polls == nil {
		v.polls = map[string]int{}
	}
	v.polls[id]++
	n = v.polls[id]
	return n, n >= v.donePolls
}

// accept records the submit of prompt and returns its generation id, or
// "" for a "throttled" prompt's first submit (to be answered 429).
func (v *fakeVendor) accept(prompt string) string {
	v.mu.Lock()
	if strings.HasPrefix(prompt, "throttled") && !v.throttled[prompt] {
		if v.throttled == nil {
			v.throttled = map[string]bool{}
		}
		v.throttled[prompt] = true
		v.mu.Unlock()
		return ""
	}
	v.mu.Unlock()
	id := v.submit()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byPrompt == nil {
		v.byPrompt, v.refused = map[string]string{}, map[string]bool{}
	}
	v.byPrompt[prompt] = id
	v.refused[id] = strings.HasPrefix(prompt, "forbidden")
	return id
}

// isRefused reports whether generation id is of a "forbidden" prompt.
func (v *fakeVendor) isRefused(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refused[id]
}

// authorized reports whether r carries want in header; if not, it answers
// status with the vendor's error body.
func (v *fakeVendor) authorized(w http.ResponseWriter, r *http.Request, header, want string, status int, body string) bool {
	if r.Header.Get(header) == want {
		return true
	}
	v.mu.Lock()
	v.badAuth++
	v.mu.Unlock()
	writeStatusJSON(w, status, body)
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
// A wrong key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID (as
// the Gemini API answers it); a "forbidden" prompt's operation ends done
// with the video filtered out (raiMediaFilteredCount).
func fakeVeo(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	key := vendorKeys["GEMINI_API_KEY"]
	const badKey = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case r.Method == "POST" && strings.HasSuffix(p, ":predictLongRunning"):
			if !v.authorized(w, r, "x-goog-api-key", key, 400, badKey) {
				return
			}
			model := strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/models/"), ":predictLongRunning")
			var body struct {
				Instances []struct {
					Prompt string `json:"prompt"`
				} `json:"instances"`
			}
			if json.NewDecoder(r.Body).Decode(&body) != nil || len(body.Instances) != 1 || body.Instances[0].Prompt == "" {
				writeStatusJSON(w, 400, `{"error":{"code":400,"message":"instances[0].prompt is required","status":"INVALID_ARGUMENT"}}`)
				return
			}
			id := v.accept(body.Instances[0].Prompt)
			if id == "" {
				writeStatusJSON(w, 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
				return
			}
			writeJSONTest(w, map[string]any{"name": "models/" + model + "/operations/" + id})
		case r.Method == "GET" && strings.Contains(p, "/operations/"):
			if !v.authorized(w, r, "x-goog-api-key", key, 400, badKey) {
				return
			}
			name := strings.TrimPrefix(p, "/v1beta/")
			id := name[strings.LastIndex(name, "/")+1:]
			if _, done := v.poll(id); !done {
				writeJSONTest(w, map[string]any{"name": name})
				return
			}
			response := map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse"}
			if v.isRefused(id) {
				response["generateVideoResponse"] = map[string]any{"raiMediaFilteredCount": 1,
					"raiMediaFilteredReasons": []string{"The video could not be generated because it may violate our usage policies."}}
			} else {
				response["generateVideoResponse"] = map[string]any{"generatedSamples": []any{
					map[string]any{"video": map[string]any{"uri": v.srv.URL + "/v1beta/files/" + id + ":download?alt=media"}},
				}}
			}
			writeJSONTest(w, map[string]any{"name": name, "done": true, "response": response})
		case r.Method == "GET" && strings.HasPrefix(p, "/v1beta/files/"):
			if !v.authorized(w, r, "x-goog-api-key", key, 400, badKey) {
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

// fakeVertex is Veo on Vertex AI (vertextest: the token endpoint of its
// service account, predictLongRunning, fetchPredictOperation answering
// done after donePolls reads, the video inline), handing out testVideo;
// a "quota" prompt is refused for a used-up daily quota.
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
// MP3, or raw 16-bit PCM for a pcm_* output format. It checks the
// documented bounds (duration_seconds 0.5-30, music_length_ms 3000-600000,
// a prompt or a composition plan, not both) with FastAPI's 422; a
// "forbidden" music prompt is a 400 bad_prompt (the music API's refusal
// of copyrighted material).
func fakeElevenLabs(t testing.TB) *fakeVendor {
	v := &fakeVendor{}
	key := vendorKeys["ELEVENLABS_API_KEY"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || (r.URL.Path != "/v1/sound-generation" && r.URL.Path != "/v1/music") {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "xi-api-key", key, 401, `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`) {
			return
		}
		var body struct {
			Text            *string          `json:"text"`
			DurationSeconds *float64         `json:"duration_seconds"`
			Prompt          *string          `json:"prompt"`
			CompositionPlan *json.RawMessage `json:"composition_plan"`
			MusicLengthMS   *float64         `json:"music_length_ms"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil {
			writeStatusJSON(w, 422, `{"detail":[{"loc":["body"],"msg":"JSON decode error","type":"json_invalid"}]}`)
			return
		}
		seconds, prompt := 2.0, ""
		var invalid string
		if r.URL.Path == "/v1/sound-generation" {
			switch {
			case body.Text == nil:
				invalid = `{"loc":["body","text"],"msg":"Field required","type":"missing"}`
			case body.DurationSeconds != nil && (*body.DurationSeconds < 0.5 || *body.DurationSeconds > 30):
				invalid = `{"loc":["body","duration_seconds"],"msg":"Input should be less than or equal to 30","type":"less_than_equal"}`
			case body.DurationSeconds != nil:
				seconds = *body.DurationSeconds
			}
			if body.Text != nil {
				prompt = *body.Text
			}
		} else {
			switch {
			case (body.Prompt == nil) == (body.CompositionPlan == nil):
				invalid = `{"loc":["body"],"msg":"Provide either prompt or composition_plan","type":"value_error"}`
			case body.MusicLengthMS != nil && (*body.MusicLengthMS < 3000 || *body.MusicLengthMS > 600000):
				invalid = `{"loc":["body","music_length_ms"],"msg":"Input should be less than or equal to 600000","type":"less_than_equal"}`
			case body.MusicLengthMS != nil:
				seconds = *body.MusicLengthMS / 1000
			}
			if body.Prompt != nil {
				prompt = *body.Prompt
			}
		}
		if invalid != "" {
			writeStatusJSON(w, 422, `{"detail":[`+invalid+`]}`)
			return
		}
		id := v.accept(prompt)
		switch {
		case id == "":
			writeStatusJSON(w, 429, `{"detail":{"status":"too_many_concurrent_requests","message":"Too many concurrent requests for your subscription."}}`)
			return
		case v.isRefused(id) && r.URL.Path == "/v1/music":
			writeStatusJSON(w, 400, `{"detail":{"status":"bad_prompt","message":"The prompt references copyrighted material.","data":{"prompt_suggestion":"an upbeat pop song"}}}`)
			return
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

// fakeFal speaks fal's queue: a submit to the model id answers status,
// response and cancel URLs on the app's path (owner/alias, without the
// model id's sub-path: fal's clients build them so); the status is
// IN_QUEUE on the first read, IN_PROGRESS until donePolls reads, then
// COMPLETED; the response names the file. A "forbidden" prompt's result
// is fal's 422 content_policy_violation. A text-to-image model's request
// (num_images in its input) gets FLUX's result: the images, files named
// img-<id>-<i>.<output_format> that fal's storage types by name only.
func fakeFal(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	auth := "Key " + vendorKeys["FAL_KEY"]
	const badKey = `{"detail":"Invalid key: the Authorization header must be 'Key <key>' with a valid key."}`
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/files/img-"): // fal's storage types files by their name only
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(testPicture(path.Ext(p)))
		case strings.HasPrefix(p, "/files/"):
			w.Header().Set("Content-Type", "video/mp4")
			w.Write(testVideo())
		case r.Method == "POST":
			if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
				return
			}
			parts := strings.Split(strings.Trim(p, "/"), "/")
			if len(parts) < 2 {
				http.NotFound(w, r)
				return
			}
			var in struct {
				Prompt       string `json:"prompt"`
				NumImages    int    `json:"num_images"`
				OutputFormat string `json:"output_format"`
			}
			if json.NewDecoder(r.Body).Decode(&in) != nil || in.Prompt == "" {
				writeStatusJSON(w, 422, `{"detail":[{"loc":["body","prompt"],"msg":"field required","type":"value_error.missing"}]}`)
				return
			}
			id := v.accept(in.Prompt)
			if id == "" {
				writeStatusJSON(w, 429, `{"detail":"Too many requests: the concurrent request limit was reached."}`)
				return
			}
			if in.NumImages > 0 { // a text-to-image model
				v.picture(id, in.NumImages, in.OutputFormat)
			}
			base := v.srv.URL + "/" + parts[0] + "/" + parts[1] + "/requests/" + id
			writeJSONTest(w, map[string]any{"request_id": id, "status_url": base + "/status", "response_url": base, "cancel_url": base + "/cancel", "queue_position": 0})
		case r.Method == "GET" && strings.HasSuffix(p, "/status"):
			if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
				return
			}
			base := strings.TrimSuffix(p, "/status")
			id := base[strings.LastIndex(base, "/")+1:]
			st := map[string]any{"request_id": id, "response_url": v.srv.URL + base, "status_url": v.srv.URL + p, "cancel_url": v.srv.URL + base + "/cancel"}
			switch n, done := v.poll(id); {
			case done:
				st["status"] = "COMPLETED"
			case n == 1:
				st["status"], st["queue_position"] = "IN_QUEUE", 0
			default:
				st["status"] = "IN_PROGRESS"
			}
			writeJSONTest(w, st)
		case r.Method == "GET" && strings.Contains(p, "/requests/"):
			if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
				return
			}
			if v.isRefused(p[strings.LastIndex(p, "/")+1:]) { // the model's safety checker refused the prompt
				writeStatusJSON(w, 422, `{"detail":[{"loc":["body","prompt"],"msg":"The prompt was flagged by the content checker.","type":"content_policy_violation"}]}`)
				return
			}
			id := p[strings.LastIndex(p, "/")+1:]
			if pic, ok := v.pictureOf(id); ok { // FLUX's result
				var files []any
				var nsfw []bool
				for i := range pic.n {
					files = append(files, map[string]any{"url": fmt.Sprintf("%s/files/img-%s-%d.%s", v.srv.URL, id, i, pic.format), "width": 64, "height": 48})
					nsfw = append(nsfw, false)
				}
				writeJSONTest(w, map[string]any{"images": files, "has_nsfw_concepts": nsfw, "seed": 42, "timings": map[string]any{"inference": 0.5}})
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

// fakeReplicate speaks Replicate's predictions API: create (201) answers
// a prediction "starting" with urls.get, which is "processing" until
// donePolls reads and then "succeeded" with an output URL. Errors are
// problem details {"title", "detail", "status"}; a "forbidden" prompt's
// prediction fails with E005 (flagged as sensitive). An image prediction
// (num_outputs in its input: FLUX) outputs a list of files; create
// answers at once whatever its Prefer: wait, as Replicate does once the
// wait is over.
func fakeReplicate(t testing.TB, donePolls int) *fakeVendor {
	v := &fakeVendor{donePolls: donePolls}
	auth := "Bearer " + vendorKeys["REPLICATE_API_TOKEN"]
	const badKey = `{"title":"Unauthenticated","detail":"You did not pass a valid authentication token","status":401}`
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/delivery/") && path.Ext(p) != ".mp3":
			w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(p)))
			w.Write(testPicture(path.Ext(p)))
		case strings.HasPrefix(p, "/delivery/"):
			w.Header().Set("Content-Type", "audio/mpeg")
			w.Write(testMP3())
		case r.Method == "POST" && (p == "/v1/predictions" || strings.HasPrefix(p, "/v1/models/") && strings.HasSuffix(p, "/predictions")):
			if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
				return
			}
			var body struct {
				Version string `json:"version"`
				Input   struct {
					Prompt       string `json:"prompt"`
					NumOutputs   int    `json:"num_outputs"`
					OutputFormat string `json:"output_format"`
				} `json:"input"`
			}
			if json.NewDecoder(r.Body).Decode(&body) != nil || body.Input.Prompt == "" || (p == "/v1/predictions") != (body.Version != "") {
				writeStatusJSON(w, 422, `{"title":"Input validation failed","detail":"- input.prompt: String should have at least 1 character","status":422}`)
				return
			}
			id := v.accept(body.Input.Prompt)
			if id == "" {
				w.Header().Set("Retry-After", "1")
				writeStatusJSON(w, 429, `{"title":"Request was throttled","detail":"Request was throttled. Expected available in 1 second.","status":429}`)
				return
			}
			if body.Input.NumOutputs > 0 { // FLUX: its files
				v.picture(id, body.Input.NumOutputs, body.Input.OutputFormat)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(prediction(v.srv.URL, id, "starting"))
		case r.Method == "GET" && strings.HasPrefix(p, "/v1/predictions/"):
			if !v.authorized(w, r, "Authorization", auth, 401, badKey) {
				return
			}
			id := strings.TrimPrefix(p, "/v1/predictions/")
			_, done := v.poll(id)
			switch {
			case !done:
				writeJSONTest(w, prediction(v.srv.URL, id, "processing"))
			case v.isRefused(id):
				pr := prediction(v.srv.URL, id, "failed")
				pr["error"] = "The input or output was flagged as sensitive. Please try again with different inputs. (E005)"
				writeJSONTest(w, pr)
			default:
				pr := prediction(v.srv.URL, id, "succeeded")
				pr["output"] = v.srv.URL + "/delivery/" + id + "/out.mp3"
				if pic, ok := v.pictureOf(id); ok {
					var files []string
					for i := range pic.n {
						files = append(files, fmt.Sprintf("%s/delivery/%s/out-%d.%s", v.srv.URL, id, i, pic.format))
					}
					pr["output"] = files
				}
				writeJSONTest(w, pr)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func prediction(base, id, status string) map[string]any {
	return map[string]any{"id": id, "status": status, "output": nil, "error": nil, "logs": "",
		"urls": map[string]any{"get": base + "/v1/predictions/" + id, "cancel": base + "/v1/predictions/" + id + "/cancel"}}
}

// writeStatusJSON answers status with a JSON body.
func writeStatusJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func writeJSONTest(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// vendorEnv points genway serve at the fake vendors.
func vendorEnv(vertex *vertextest.Server, eleven, fal, replicate *fakeVendor) map[string]string {
	// The fakes hand out their files on loopback: the SSRF guard of
	// output links (upstreams.NewDownloadClient) would refuse them.
	env := map[string]string{"GENWAY_MEDIA_POLL": "1s", "GENWAY_MEDIA_ALLOW_PRIVATE": "1"}
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
