package functions_test

import (
	"os"
	"runtime"
	"sort"
	"testing"
	"time"
)

// Budgets of issue 4: a deployed bootstrap (linux/arm64, stripped) under
// 15 MB, and init (process start to the first invocation/next) under 30 ms.
const (
	maxBootstrapMB = 15.0
	maxInitMS      = 30.0
)

// BenchmarkBootstrap reports, per function, the size of its linux/arm64
// stripped bootstrap (MB-arm64) and the init time of a host-arch build run
// against the test Runtime API (init-ms: median over b.N process starts;
// init-max-ms: the slowest). Run it with a fixed count, e.g.
//
//	go test ./functions -run '^$' -bench BenchmarkBootstrap -benchtime 20x
//
// It logs a line per function saying whether the budgets hold; it does not
// fail on time (machines are noisy), only on the size budget, which is
// deterministic.
func BenchmarkBootstrap(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skipf("bootstraps are linux binaries; this is %s", runtime.GOOS)
	}
	dir := b.TempDir()
	for _, name := range functionNames {
		b.Run(name, func(b *testing.B) {
			arm, err := buildBootstrap(dir+"/arm64", name, "arm64")
			if err != nil {
				b.Fatal(err)
			}
			st, err := os.Stat(arm)
			if err != nil {
				b.Fatal(err)
			}
			sizeMB := float64(st.Size()) / (1 << 20)
			host := arm
			if runtime.GOARCH != "arm64" {
				if host, err = buildBootstrap(dir+"/"+runtime.GOARCH, name, runtime.GOARCH); err != nil {
					b.Fatal(err)
				}
			}
			env := map[string]string{
				"GENWAY_JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/genway-jobs",
				"GENWAY_MEDIA_BUCKET":   "genway-media",
			}
			b.ResetTimer()
			inits := measureInits(b, host, env)
			b.StopTimer()
			sort.Slice(inits, func(i, j int) bool { return inits[i] < inits[j] })
			median := float64(inits[len(inits)/2]) / float64(time.Millisecond)
			worst := float64(inits[len(inits)-1]) / float64(time.Millisecond)
			b.ReportMetric(sizeMB, "MB-arm64")
			b.ReportMetric(median, "init-ms")
			b.ReportMetric(worst, "init-max-ms")
			b.Logf("%s: bootstrap %.2f MB (linux/arm64, budget %.0f MB); init median %.2f ms, max %.2f ms over %d starts on %s/%s (budget %.0f ms): within budget: size %v, init %v",
				name, sizeMB, maxBootstrapMB, median, worst, len(inits), runtime.GOOS, runtime.GOARCH, maxInitMS, sizeMB < maxBootstrapMB, median < maxInitMS)
			if sizeMB >= maxBootstrapMB {
				b.Errorf("%s bootstrap is %.2f MB; the budget is %.0f MB", name, sizeMB, maxBootstrapMB)
			}
		})
	}
}

// startBench starts bootstrap like start, without test cleanup (the
// benchmark stops each process itself).
func startBench(b *testing.B, bootstrap string, api *runtimeAPI, env map[string]string) *process {
	b.Helper()
	p := &process{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = newCmd(bootstrap, api, env, p.stderr)
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", bootstrap, err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	return p
}

// measureInits starts the bootstrap at path b.N times with env, each time
// against a fresh fake Runtime API, and returns how long each took from
// process start to its first /next (killed right after).
func measureInits(b *testing.B, path string, env map[string]string) []time.Duration {
	b.Helper()
	inits := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		api := newRuntimeAPI(b)
		p := startBench(b, path, api, env)
		d, err := p.initTime(api)
		p.cmd.Process.Kill()
		<-p.exited
		api.srv.Close()
		if err != nil {
			b.Fatal(err)
		}
		inits = append(inits, d)
	}
	return inits
}
