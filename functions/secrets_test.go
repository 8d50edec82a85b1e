package functions_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/providers/vertextest"
)

// TestSecretReaders: only the functions that read a secret (a vendor key,
// the operator token) link the SSM client. The others cannot read one,
// and do not pay for the package at cold start (about 1 MB and 2 ms).
func TestSecretReaders(t *testing.T) {
	readers := []string{"chat", "media", "worker", "jobs-create", "admin"}
	for _, name := range functionNames {
		cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./functions/"+name)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", name, err)
		}
		links := slices.Contains(strings.Fields(string(out)), "github.com/aws/aws-sdk-go-v2/service/ssm")
		if want := slices.Contains(readers, name); links != want {
			t.Errorf("%s links the SSM client: %v; want %v", name, links, want)
		}
	}
}

// BenchmarkBootstrapSecrets reports the init time (init-ms: median over
// b.N process starts) of the functions that read vendor keys, with each
// key in an SSM SecureString parameter (*_PARAMETER; read at start, in
// parallel) served by a loopback fake of SSM, and for comparison with
// the keys in plain variables (env). The difference is the secret read
// minus the network: on AWS add one GetParameter round trip. Run it as
// BenchmarkBootstrap:
//
//	go test ./functions -run '^$' -bench BenchmarkBootstrapSecrets -benchtime 20x
func BenchmarkBootstrapSecrets(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skipf("bootstraps are linux binaries; this is %s", runtime.GOOS)
	}
	var reads atomic.Int64
	// Each key is "key-of-<its parameter or variable>", but a Vertex AI
	// service-account key, which must be one to be taken.
	vertexKey := vertextest.NewServer(b).Credentials()
	value := func(name string) string {
		if strings.HasSuffix(name, "GOOGLE_VERTEX_CREDENTIALS") {
			return vertexKey
		}
		return "key-of-" + name
	}
	ssmFake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Name string }
		json.NewDecoder(r.Body).Decode(&in)
		reads.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "SecureString", "Value": value(in.Name), "Version": 1}})
	}))
	defer ssmFake.Close()
	base := map[string]string{
		"GENWAY_JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/genway-jobs",
		"GENWAY_MEDIA_BUCKET":   "genway-media",
		"AWS_ENDPOINT_URL":      ssmFake.URL,
	}
	// The keys each function holds in the template.
	keys := map[string][]string{
		"chat":        {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"},
		"worker":      {"ELEVENLABS_API_KEY", "FAL_KEY", "REPLICATE_API_TOKEN", "GOOGLE_VERTEX_CREDENTIALS"},
		"jobs-create": {"FAL_KEY", "REPLICATE_API_TOKEN"},
		"media":       {"OPENAI_API_KEY", "GEMINI_API_KEY", "ELEVENLABS_API_KEY", "FAL_KEY", "REPLICATE_API_TOKEN"},
	}
	dir := b.TempDir()
	for _, name := range []string{"chat", "media", "worker", "jobs-create"} {
		host, err := buildBootstrap(dir, name, runtime.GOARCH)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"env", "ssm"} {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for _, k := range keys[name] {
				if mode == "ssm" {
					env[k+"_PARAMETER"] = "/genway/" + k
				} else {
					env[k] = value(k)
				}
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				before := reads.Load()
				b.ResetTimer()
				inits := measureInits(b, host, env)
				b.StopTimer()
				want := int64(0)
				if mode == "ssm" {
					want = int64(b.N * len(keys[name])) // each key once per start
				}
				if got := reads.Load() - before; got != want {
					b.Fatalf("%d SSM reads over %d starts; want %d", got, b.N, want)
				}
				sort.Slice(inits, func(i, j int) bool { return inits[i] < inits[j] })
				b.ReportMetric(float64(inits[len(inits)/2])/float64(time.Millisecond), "init-ms")
				b.ReportMetric(float64(inits[len(inits)-1])/float64(time.Millisecond), "init-max-ms")
			})
		}
	}
}
