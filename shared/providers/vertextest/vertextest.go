// Package vertextest is a fake of Google Cloud's side of Veo on Vertex AI
// (Gemini Enterprise Agent Platform), for tests: one httptest server on
// loopback that speaks
//
//   - the OAuth2 token endpoint of a service account (POST /token, the JWT
//     bearer grant): the assertion's RS256 signature is checked with the
//     fake key's public key, and its iss, scope, aud, iat and exp;
//   - Vertex AI's Veo methods, POST /v1/projects/{project}/locations/
//     {region}/publishers/google/models/{model}:predictLongRunning and
//     :fetchPredictOperation, with the bearer tokens it issued, checking
//     the request as the API reference documents it;
//   - Cloud Storage's JSON API download (GET /storage/v1/b/{bucket}/o/
//     {object}?alt=media) of the videos written under a request's
//     storageUri;
//
// and the throwaway service-account key file whose token_uri is that
// server. Generations finish after DonePolls reads of their operation (or
// DoneAfter(prompt) after their submit); a prompt starting "forbidden" is blocked by the
// safety filters (raiMediaFilteredCount), one starting "broken" ends with
// an operation error, and one starting "quota" is refused at submit as
// Vertex AI refuses a request over a used-up daily quota (QuotaAnswer),
// counted in Quota. The wire as seen by @google/genai 3.3.0 in Vertex
// mode and in the Veo API reference.
package vertextest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Scope is the OAuth2 scope the token endpoint requires.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// Request is a call the server received.
type Request struct {
	Method, Path, Query string
	Auth                string // the Authorization header
	Body                []byte
}

// Server is the fake. Set its exported fields before the first request;
// read what it saw through its methods. Safe for concurrent use.
type Server struct {
	URL           string // the API, Cloud Storage, and URL+"/token"
	Project       string // the key's project_id, in request URLs
	ProjectNumber string // what operation names carry, as Vertex AI's do
	Region        string
	Email         string // the service account

	DonePolls int // fetchPredictOperation reads until done; default 1
	// DoneAfter, if set, says how long after its submit the generation of
	// a prompt is done, instead of DonePolls.
	DoneAfter func(prompt string) time.Duration
	Video     []byte        // what every generation makes
	TokenLife time.Duration // the tokens' expires_in; default an hour
	// ExtraTokens are bearer tokens accepted besides those it issued (an
	// SDK's fixed one).
	ExtraTokens []string
	// Intercept, if set, sees every request first and may answer it
	// (returning true), to inject failures.
	Intercept func(w http.ResponseWriter, r *http.Request) bool

	key *rsa.PrivateKey
	srv *httptest.Server

	mu        sync.Mutex
	requests  []Request
	tokens    map[string]time.Time // issued token -> expiry
	refusals  []string             // why token requests were refused
	badAuth   int
	ops       map[string]*operation // by operation name
	byPrompt  map[string]string     // operation name by prompt
	polls     int
	objects   map[string][]byte // "bucket/object" -> bytes
	submitted int
	quota     int // submits refused for a used-up quota
}

// QuotaAnswer is Vertex AI's answer (429) to a submit over a used-up
// daily quota: a google.rpc.Status RESOURCE_EXHAUSTED whose details are
// a QuotaFailure naming the quota (its quotaId says PerDay) and a
// RetryInfo.
const QuotaAnswer = `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/` +
	`online_prediction_requests_per_base_model_per_day with base model: veo-3.1-generate-001. ` +
	`Please submit a quota increase request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai.",` +
	`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` +
	`{"quotaMetric":"aiplatform.googleapis.com/online_prediction_requests_per_base_model_per_day",` +
	`"quotaId":"OnlinePredictionRequestsPerDayPerProjectPerBaseModel",` +
	`"quotaDimensions":{"location":"us-central1","base_model":"veo-3.1-generate-001"},"quotaValue":"50"}]},` +
	`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`

type operation struct {
	prompt     string
	storageURI string
	submitted  time.Time
	polls      int
}

// testKey is the service account's key, made once per test binary (an RSA
// key takes a moment to generate).
var testKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

// NewServer starts a fake on 127.0.0.1, closed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	key, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Project: "genway-test", ProjectNumber: "123456789012", Region: "us-central1",
		Email: "veo@genway-test.iam.gserviceaccount.com", DonePolls: 1, Video: []byte("\x00\x00\x00\x18ftypmp42 fake video"),
		key: key, tokens: map[string]time.Time{}, ops: map[string]*operation{}, byPrompt: map[string]string{}, objects: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Configure runs f, which sets the server's settings (DonePolls, Video,
// ExtraTokens, ...), under the lock every request takes when it arrives:
// what f sets happens before every later request, even one from another
// process (an SDK), which the race detector cannot otherwise order.
func (s *Server) Configure(f func(s *Server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// Credentials returns the service-account key file (JSON) for this
// server, as "gcloud iam service-accounts keys create" writes one.
func (s *Server) Credentials() string {
	return s.CredentialsWith(nil)
}

// CredentialsWith is Credentials with fields changed by edit (a wrong
// email, token_uri or key).
func (s *Server) CredentialsWith(edit func(fields map[string]any)) string {
	der, _ := x509.MarshalPKCS8PrivateKey(s.key)
	f := map[string]any{
		"type": "service_account", "project_id": s.Project, "private_key_id": "0123456789abcdef",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": s.Email, "client_id": "100000000000000000001",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": s.URL + "/token",
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	}
	if edit != nil {
		edit(f)
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// StrangerKey returns a PEM private key that is not the server's (a key
// it will not accept).
func StrangerKey(t testing.TB) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Counts returns the generations submitted, the tokens issued and the
// calls refused for their credentials.
func (s *Server) Counts() (submits, tokens, badAuth int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submitted, len(s.tokens), s.badAuth
}

// Quota returns how many submits were refused for a used-up quota
// ("quota" prompts).
func (s *Server) Quota() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quota
}

// Calls returns how many requests the server received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Polls returns how many operation reads the server answered.
func (s *Server) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// Refusals returns why token requests were refused.
func (s *Server) Refusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals)
}

// DoneAt returns when the generation of prompt finishes (DoneAfter mode),
// or the zero time if there is none.
func (s *Server) DoneAt(prompt string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[s.byPrompt[prompt]]
	if op == nil || s.DoneAfter == nil {
		return time.Time{}
	}
	return op.submitted.Add(s.DoneAfter(op.prompt))
}

var (
	modelPath = regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/publishers/google/models/([^/:]+):(predictLongRunning|fetchPredictOperation)$`)
	objPath   = regexp.MustCompile(`^/storage/v1/b/([^/]+)/o/(.+)$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: body})
	s.mu.Unlock()
	if s.Intercept != nil && s.Intercept(w, r) {
		return
	}
	switch m := modelPath.FindStringSubmatch(r.URL.EscapedPath()); {
	case r.Method == "POST" && r.URL.Path == "/token":
		s.token(w, r, body)
	case r.Method == "POST" && m != nil:
		if !s.authorized(w, r) {
			return
		}
		if m[1] != s.Project && m[1] != s.ProjectNumber || m[2] != s.Region {
			googleError(w, 404, "NOT_FOUND", fmt.Sprintf("Publisher model projects/%s/locations/%s/publishers/google/models/%s is not found.", m[1], m[2], m[3]))
			return
		}
		if m[4] == "predictLongRunning" {
			s.submit(w, m[3], body)
		} else {
			s.fetch(w, "projects/"+m[1]+"/locations/"+m[2]+"/publishers/google/models/"+m[3], body)
		}
	case r.Method == "GET" && objPath.MatchString(r.URL.EscapedPath()):
		if !s.authorized(w, r) {
			return
		}
		m := objPath.FindStringSubmatch(r.URL.EscapedPath())
		object, _ := url.PathUnescape(m[2])
		s.mu.Lock()
		b, ok := s.objects[m[1]+"/"+object]
		s.mu.Unlock()
		if !ok || r.URL.Query().Get("alt") != "media" {
			googleError(w, 404, "NOT_FOUND", "No such object: "+m[1]+"/"+object)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		w.Write(b)
	default:
		googleError(w, 404, "NOT_FOUND", "no such method: "+r.Method+" "+r.URL.Path)
	}
}

// token answers the JWT bearer grant.
func (s *Server) token(w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	refuse := func(why string) {
		s.mu.Lock()
		s.refusals = append(s.refusals, why)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": why})
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		refuse("the body is not a form")
		return
	}
	if g := form.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		refuse("grant_type " + g)
		return
	}
	if why := s.checkAssertion(form.Get("assertion"), time.Now()); why != "" {
		refuse(why)
		return
	}
	life := s.TokenLife
	if life <= 0 {
		life = time.Hour
	}
	s.mu.Lock()
	tok := "ya29.fake-" + strconv.Itoa(len(s.tokens)+1)
	s.tokens[tok] = time.Now().Add(life)
	s.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": tok, "expires_in": int(life / time.Second), "token_type": "Bearer"})
}

// checkAssertion returns why a JWT is refused, or "".
func (s *Server) checkAssertion(jwt string, now time.Time) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "Invalid JWT: not three parts"
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	var claims struct {
		Iss, Scope, Aud, Sub string
		Iat, Exp             int64
	}
	h, err1 := enc.DecodeString(parts[0])
	c, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil {
		return "Invalid JWT: not base64url JSON"
	}
	if header.Alg != "RS256" {
		return "Invalid JWT: alg " + header.Alg
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return "Invalid JWT Signature."
	}
	switch {
	case claims.Iss != s.Email:
		return "Invalid JWT: iss " + claims.Iss
	case !slices.Contains(strings.Fields(claims.Scope), Scope):
		return "Invalid JWT: scope " + claims.Scope
	case claims.Aud != s.URL+"/token":
		return "Invalid JWT: aud " + claims.Aud
	case claims.Exp <= now.Unix():
		return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe (expired)"
	case claims.Iat > now.Add(time.Minute).Unix():
		return "Invalid JWT: iat in the future"
	case claims.Exp-claims.Iat > 3600:
		return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe"
	}
	return ""
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, issued := s.tokens[tok]
	good := ok && (issued && time.Now().Before(exp) || slices.Contains(s.ExtraTokens, tok))
	if !good {
		s.badAuth++
	}
	s.mu.Unlock()
	if !good {
		googleError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
	}
	return good
}

// submit answers predictLongRunning.
func (s *Server) submit(w http.ResponseWriter, model string, body []byte) {
	var req struct {
		Instances []struct {
			Prompt string `json:"prompt"`
		} `json:"instances"`
		Parameters struct {
			AspectRatio     string `json:"aspectRatio"`
			DurationSeconds *int   `json:"durationSeconds"`
			Resolution      string `json:"resolution"`
			SampleCount     *int   `json:"sampleCount"`
			GenerateAudio   *bool  `json:"generateAudio"`
			StorageURI      string `json:"storageUri"`
		} `json:"parameters"`
	}
	bad := func(msg string) { googleError(w, 400, "INVALID_ARGUMENT", msg) }
	p := &req.Parameters
	switch {
	case json.Unmarshal(body, &req) != nil:
		bad("Invalid JSON payload received.")
	case len(req.Instances) != 1 || req.Instances[0].Prompt == "":
		bad("instances[0].prompt is required.")
	case p.AspectRatio != "16:9" && p.AspectRatio != "9:16":
		bad("aspectRatio must be 16:9 or 9:16.")
	case p.DurationSeconds == nil || !slices.Contains([]int{4, 6, 8}, *p.DurationSeconds):
		bad("durationSeconds must be 4, 6 or 8.")
	case p.Resolution != "720p" && p.Resolution != "1080p":
		bad("resolution must be 720p or 1080p.")
	case p.SampleCount != nil && (*p.SampleCount < 1 || *p.SampleCount > 4):
		bad("sampleCount must be between 1 and 4.")
	case p.GenerateAudio == nil:
		bad("generateAudio is required for Veo 3 models.")
	case p.StorageURI != "" && !strings.HasPrefix(p.StorageURI, "gs://"):
		bad("storageUri must be a gs:// URI.")
	case strings.HasPrefix(req.Instances[0].Prompt, "quota"):
		s.mu.Lock()
		s.quota++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, QuotaAnswer)
	default:
		s.mu.Lock()
		s.submitted++
		name := fmt.Sprintf("projects/%s/locations/%s/publishers/google/models/%s/operations/%08x-op%d", s.ProjectNumber, s.Region, model, s.submitted*7919, s.submitted)
		s.ops[name] = &operation{prompt: req.Instances[0].Prompt, storageURI: p.StorageURI, submitted: time.Now()}
		s.byPrompt[req.Instances[0].Prompt] = name
		s.mu.Unlock()
		writeJSON(w, map[string]any{"name": name})
	}
}

// fetch answers fetchPredictOperation for the model resource.
func (s *Server) fetch(w http.ResponseWriter, resource string, body []byte) {
	var req struct {
		OperationName string `json:"operationName"`
	}
	if json.Unmarshal(body, &req) != nil || req.OperationName == "" {
		googleError(w, 400, "INVALID_ARGUMENT", "operationName is required.")
		return
	}
	name := req.OperationName
	rest, ok := strings.CutPrefix(name, strings.Replace(resource, "/"+s.Project+"/", "/"+s.ProjectNumber+"/", 1)+"/operations/")
	s.mu.Lock()
	op := s.ops[name]
	if op != nil {
		op.polls++
		s.polls++
	}
	s.mu.Unlock()
	if !ok || rest == "" || op == nil {
		googleError(w, 404, "NOT_FOUND", "Operation "+name+" is not found.")
		return
	}
	done := op.polls >= s.DonePolls
	if s.DoneAfter != nil {
		done = !time.Now().Before(op.submitted.Add(s.DoneAfter(op.prompt)))
	}
	if !done {
		writeJSON(w, map[string]any{"name": name})
		return
	}
	resp := map[string]any{"@type": "type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse"}
	switch {
	case strings.HasPrefix(op.prompt, "broken"):
		writeJSON(w, map[string]any{"name": name, "done": true, "error": map[string]any{"code": 13, "message": "Video generation failed due to an internal error."}})
		return
	case strings.HasPrefix(op.prompt, "forbidden"):
		resp["raiMediaFilteredCount"] = 1
		resp["raiMediaFilteredReasons"] = []string{"Your prompt may violate our usage guidelines (support code 58061214)."}
	case op.storageURI != "":
		object := strings.TrimSuffix(strings.TrimPrefix(op.storageURI, "gs://"), "/") + "/" + rest + "/sample_0.mp4"
		s.mu.Lock()
		s.objects[object] = s.Video
		s.mu.Unlock()
		resp["raiMediaFilteredCount"] = 0
		resp["videos"] = []any{map[string]any{"gcsUri": "gs://" + object, "mimeType": "video/mp4"}}
	default:
		resp["raiMediaFilteredCount"] = 0
		resp["videos"] = []any{map[string]any{"bytesBase64Encoded": base64.StdEncoding.EncodeToString(s.Video), "mimeType": "video/mp4"}}
	}
	writeJSON(w, map[string]any{"name": name, "done": true, "response": resp})
}

func googleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
