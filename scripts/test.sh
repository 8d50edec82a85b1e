#!/usr/bin/env bash
# The whole test suite, with its set-up: checks (and, where it can, installs)
# the tools the tests use, then vets and tests every package.
#
#   scripts/test.sh            everything
#   scripts/test.sh ./shared/jobs/...   just these packages
#
# Tools: moto_server (Python moto[server]) for the AWS adapter tests,
# cfn-lint for the template, ffprobe (Debian package ffmpeg) to check media,
# chromium (Debian package chromium) for the console's browser tests (the
# module clients/browser, run after the main tests when no packages are
# named). In CI (CI set) a missing tool is an error; elsewhere the tests that
# need it skip with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
# CGO_ENABLED=0 everywhere: the Lambda bootstraps that the functions tests
# build are CGO_ENABLED=0, so they share the build cache with the tests.
export CGO_ENABLED=0

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    echo "scripts/test.sh: Go is not installed; get Go 1.24 or newer from https://go.dev/dl/" >&2
    exit 1
  fi
}

# apt_install NAME PACKAGE... installs Debian packages when run as root
# with apt-get (the package lists are updated once per run); NAME names
# the log, /tmp/genway-NAME-install.log. It reports failure in a message.
apt_updated=""
apt_install() {
  local name=$1; shift
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  echo "scripts/test.sh: installing $* with apt-get..." >&2
  {
    if [ -z "$apt_updated" ]; then apt-get update -qq && apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
  } >"/tmp/genway-$name-install.log" 2>&1 \
    || echo "scripts/test.sh: apt-get install $* failed (see /tmp/genway-$name-install.log)" >&2
}

install_ffprobe() {
  command -v ffprobe >/dev/null 2>&1 && return 0
  apt_install ffmpeg ffmpeg
  command -v ffprobe >/dev/null 2>&1 || echo "scripts/test.sh: ffprobe not found; install ffmpeg to check media with it" >&2
}

has_chromium() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }

install_chromium() {
  has_chromium && return 0
  apt_install chromium chromium
  has_chromium || echo "scripts/test.sh: chromium not found; install Debian's chromium to run the console's browser tests" >&2
}

install_python_tool() { # $1 command, $2 pip package
  command -v "$1" >/dev/null 2>&1 && return 0
  if command -v pip3 >/dev/null 2>&1 || command -v pip >/dev/null 2>&1; then
    echo "scripts/test.sh: installing $2 with pip..." >&2
    (pip3 install -q "$2" || pip install -q "$2") >/tmp/genway-pip-install.log 2>&1 \
      || echo "scripts/test.sh: pip install $2 failed (see /tmp/genway-pip-install.log)" >&2
  fi
  command -v "$1" >/dev/null 2>&1 || echo "scripts/test.sh: $1 not found; pip install '$2'" >&2
}

# The official JavaScript clients (openai, ai, @ai-sdk/openai,
# @ai-sdk/openai-compatible, @anthropic-ai/sdk) and the coding agents
# (@openai/codex, @anthropic-ai/claude-code), pinned by
# clients/npm/package-lock.json, for cmd/genway's TestNPMClients,
# TestAnthropicSDK, TestCodexCLI and TestClaudeCode, and the media vendors'
# SDKs for the contract tests. Node comes from Debian if it is missing
# (bookworm's is 18; some pinned SDKs declare 20 or 22, and say so in a
# warning). The agents are native binaries in platform packages (Codex's
# an optional dependency, Claude Code's linked into place by its
# postinstall, which package.json's allowScripts permits): about 900 MB of
# the 1.1 GB node_modules.
npm_dir=clients/npm
npm_modules=$npm_dir/node_modules

# npm_clients_installed says whether node_modules is there, as new as the
# lock file, with every package the tests run and the agents' binaries
# working (Claude Code's bin/claude.exe stays a stub if its postinstall
# did not run).
npm_clients_installed() {
  [ -d $npm_modules/@ai-sdk/openai-compatible ] && [ -d $npm_modules/@anthropic-ai/sdk ] \
    && [ ! $npm_dir/package-lock.json -nt $npm_modules ] \
    && $npm_modules/.bin/codex --version >/dev/null 2>&1 \
    && $npm_modules/.bin/claude --version >/dev/null 2>&1
}

install_npm_clients() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install node nodejs npm
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "scripts/test.sh: node/npm not found; install Node.js 20+ to run the JavaScript client tests" >&2
    return 0
  fi
  local major
  major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')
  if [ -n "$major" ] && [ "$major" -lt 20 ] 2>/dev/null; then
    echo "scripts/test.sh: warning: node $(node --version) is older than some pinned SDKs declare (20+; @google/genai 3 and Claude Code want 22+); the tests pass on it today" >&2
  fi
  if ! npm_clients_installed; then
    echo "scripts/test.sh: installing the npm client packages and agents (npm ci in $npm_dir, about 400 MB to download)..." >&2
    (cd $npm_dir && npm ci --no-audit --no-fund) >/tmp/genway-npm-install.log 2>&1 \
      || echo "scripts/test.sh: npm ci failed (see /tmp/genway-npm-install.log)" >&2
  fi
  if npm_clients_installed; then
    # The versions the agent tests run.
    echo "scripts/test.sh: agents: $($npm_modules/.bin/codex --version), claude $($npm_modules/.bin/claude --version)," \
      "@anthropic-ai/sdk $(node -p "require('./$npm_modules/@anthropic-ai/sdk/package.json').version")" >&2
  else
    echo "scripts/test.sh: the npm clients are incomplete in $npm_modules (see /tmp/genway-npm-install.log); their tests skip" >&2
  fi
}

need_go
install_ffprobe
install_chromium
install_npm_clients
install_python_tool moto_server 'moto[server]'
install_python_tool cfn-lint cfn-lint

if [ -n "${CI:-}" ]; then
  missing=""
  for t in moto_server cfn-lint ffprobe node; do command -v "$t" >/dev/null 2>&1 || missing="$missing $t"; done
  has_chromium || missing="$missing chromium"
  npm_clients_installed || missing="$missing $npm_modules"
  if [ -n "$missing" ]; then
    echo "scripts/test.sh: CI needs these tools and they could not be installed:$missing" >&2
    exit 1
  fi
fi

pkgs=("$@")
all=""
[ ${#pkgs[@]} -gt 0 ] || { pkgs=(./...); all=1; }

echo "== go vet" >&2
go vet "${pkgs[@]}"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
echo "== go test" >&2
# -p 2: two cores; moto-backed packages start their own moto_server each.
go test -count=1 -p 2 -timeout 20m "${pkgs[@]}"
if [ -n "$all" ]; then
  # The console in headless Chromium: a module of its own (chromedp).
  echo "== go test (clients/browser)" >&2
  (cd clients/browser && go vet ./... && go test -count=1 -timeout 10m ./...)
fi
