package functions_test

import (
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The build: SAM's go1.x builder runs `go build` with the caller's
// environment and takes no tags or flags from the template (only
// BuildProperties.TrimGoPath), so the small bootstraps need
// GOFLAGS=-tags=lambda.norpc (and CGO_ENABLED=0) on the `sam build` line.
// These tests check what a build produced, and that the documents name
// the SAM CLI that understands ResponseTransferMode.

// minSAMCLI is the SAM CLI the documents require: the first release dated
// after aws-sam-translator 1.108.0 (2026-03-17), the first translator that
// accepts an Api event's ResponseTransferMode (an older one fails the build
// with "property ResponseTransferMode not defined").
const minSAMCLI = "1.157.1"

// bootstrapBuild is the build line the template, samconfig.toml and
// docs/aws.md document.
const bootstrapBuild = "CGO_ENABLED=0 GOFLAGS=-tags=lambda.norpc sam build"

// checkBootstrap returns what is wrong with a built bootstrap: not
// linux/arm64, built with cgo, or without the lambda.norpc tag (aws-lambda-go's
// RPC mode, unused on provided.al2023, makes the binary about 50% larger:
// 29.8 MB instead of 19.5 MB for functions/chat).
func checkBootstrap(path string) []string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return []string{path + ": " + err.Error()}
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var problems []string
	if settings["GOOS"] != "linux" || settings["GOARCH"] != "arm64" {
		problems = append(problems, path+": built for "+settings["GOOS"]+"/"+settings["GOARCH"]+"; want linux/arm64")
	}
	if settings["CGO_ENABLED"] != "0" {
		problems = append(problems, path+": CGO_ENABLED="+settings["CGO_ENABLED"]+"; want 0 (a static binary)")
	}
	var norpc bool
	for _, tag := range strings.Split(settings["-tags"], ",") {
		norpc = norpc || tag == "lambda.norpc"
	}
	if !norpc {
		problems = append(problems, path+": built without -tags lambda.norpc (tags "+strconv.Quote(settings["-tags"])+
			"); rebuild with `"+bootstrapBuild+"`")
	}
	return problems
}

// TestTemplateBuiltBootstraps checks the bootstraps of the last `sam build`
// (.aws-sam/build), if there is one: run it after building and before
// `sam deploy`.
func TestTemplateBuiltBootstraps(t *testing.T) {
	dir := filepath.Join(repoRoot, ".aws-sam", "build")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no %s (run `%s` first): %v", dir, bootstrapBuild, err)
	}
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		for _, p := range checkBootstrap(filepath.Join(dir, fn, "bootstrap")) {
			t.Error(p)
		}
	}
}

// TestTemplateBootstrapCheckFails runs checkBootstrap on this test binary,
// built for the host without lambda.norpc.
func TestTemplateBootstrapCheckFails(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkBootstrap(self), "\n")
	if !strings.Contains(got, "without -tags lambda.norpc") {
		t.Errorf("checkBootstrap(test binary) = %q; want it to say lambda.norpc is missing", got)
	}
	if got := checkBootstrap(filepath.Join(t.TempDir(), "missing")); len(got) == 0 {
		t.Error("checkBootstrap(missing file) found nothing wrong")
	}
}

// TestTemplateBuildDocumented wants template.yaml, samconfig.toml and the
// deployment guide to name the build line and the minimum SAM CLI.
func TestTemplateBuildDocumented(t *testing.T) {
	for _, f := range []string{"template.yaml", "samconfig.toml", "docs/aws.md"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{bootstrapBuild, "SAM CLI " + minSAMCLI} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not mention %q", f, want)
			}
		}
	}
}

var samVersion = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// versionAtLeast reports whether version a (x.y.z) >= b.
func versionAtLeast(a, b string) bool {
	pa, pb := samVersion.FindStringSubmatch(a), samVersion.FindStringSubmatch(b)
	if pa == nil || pb == nil {
		return false
	}
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x > y
		}
	}
	return true
}

func TestTemplateVersionCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"SAM CLI, version 1.157.1", minSAMCLI, true},
		{"SAM CLI, version 1.160.0", minSAMCLI, true},
		{"SAM CLI, version 2.0.0", minSAMCLI, true},
		{"SAM CLI, version 1.157.0", minSAMCLI, false},
		{"SAM CLI, version 1.99.9", minSAMCLI, false},
		{"garbage", minSAMCLI, false},
	}
	for _, tt := range tests {
		if got := versionAtLeast(tt.a, tt.b); got != tt.want {
			t.Errorf("versionAtLeast(%q, %q) = %v; want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestTemplateSAMCLIVersion checks the installed SAM CLI, where there is
// one: an older one fails `sam build` on ResponseTransferMode.
func TestTemplateSAMCLIVersion(t *testing.T) {
	sam, err := exec.LookPath("sam")
	if err != nil {
		t.Skip("the SAM CLI is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sam, "--version")
	cmd.Env = append(withoutAWS(os.Environ()), "SAM_CLI_TELEMETRY=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sam --version: %v", err)
	}
	if !versionAtLeast(string(out), minSAMCLI) {
		t.Errorf("%s; want SAM CLI %s or newer (older ones reject ResponseTransferMode)", strings.TrimSpace(string(out)), minSAMCLI)
	}
}
