#!/usr/bin/env bash
# scripts/test.sh — the project's one test command.
#
# 1. Starts a private, throwaway PostgreSQL cluster on 127.0.0.1 (scripts/lib/postgres.sh:
#    installs Debian's `postgresql` package when the server binaries are missing and we are root)
#    and exports LATCH_TEST_POSTGRES_URL and LATCH_REQUIRE_POSTGRES=1, so a missing server fails
#    the Postgres tests instead of skipping them.
# 2. Runs, each as a timed stage: go vet, staticcheck (pinned, run through the module proxy:
#    nothing installed by hand), a gofmt check, a build and vet with the minimum Go
#    version go.mod declares (that exact toolchain, fetched once into the module cache),
#    `go test -race -count=1 ./...` (extra arguments go to go test), the crash matrix (scripts/crash.sh), a short soak on SQLite and
#    PostgreSQL (scripts/soak.sh, $LATCH_SOAK_DURATION, default 2m) and a bounded run of every
#    fuzz target (scripts/fuzz.sh, $LATCH_FUZZ_TIME per target, default 10s), and two release builds
#    of cmd/latch compared byte for byte (scripts/repro.sh).
#    Then the console's browser tests (server/console/browsertest: chromium, installed when
#    missing, driven by chromedp; LATCH_REQUIRE_BROWSER=1 fails them without a browser).
#    Then each integration module (integrations/river, asynq, temporal: each its own go.mod, built
#    against this checkout) as its own stage: go vet, staticcheck and go test -race, bounded in
#    time. River's tests use the cluster; asynq's a private Redis (scripts/lib/redis.sh: installs
#    Debian's `redis-server` when missing and we are root, listens only on 127.0.0.1). gofmt
#    covers them. The browser tests' module gets go vet and staticcheck too. The Python client
#    (clients/python/test.sh) runs its unittest suite against a real `latch serve`, and the
#    TypeScript client (clients/typescript/test.sh: npm ci, tsc, node --test) its own.
# 3. Stops the cluster (and Redis) and removes their directories on exit, whether the run passed
#    or failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/redis.sh

postgres_start test.sh
trap 'redis_stop; postgres_cleanup' EXIT
redis_start test.sh
start=$(date +%s)

# The Python and curl examples of docs/http.md are run by the server tests; scripts/ci-gate.sh
# (run by cmd/latch's TestCIGate) compares policy replays with jq.
if ! command -v python3 >/dev/null || ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
	if [[ $(id -u) == 0 ]]; then
		echo "test.sh: installing python3, curl and jq (for the examples of docs/http.md and the CI gate)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq python3 curl jq >/dev/null
	fi
fi
export LATCH_REQUIRE_HTTP_EXAMPLES=1

stage vet go vet ./...
# staticcheck at a pinned version, fetched through the module proxy on first use and cached like
# any module: the same checks on every machine, nothing to install. The campaign's files (crash
# matrix, soak) build only under their tag, so they get a second, tagged pass.
staticcheck_version=v0.8.2
run_staticcheck() {
	timeout --kill-after=30 900 go run "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" "$@"
}
staticcheck_all() {
	run_staticcheck ./... && run_staticcheck -tags campaign ./internal/campaign
}
stage "staticcheck $staticcheck_version" staticcheck_all
gofmt_check() {
	local unformatted
	unformatted=$(gofmt -l .)
	if [[ -n "$unformatted" ]]; then
		echo "test.sh: gofmt needed on:" >&2
		echo "$unformatted" >&2
		return 1
	fi
}
stage gofmt gofmt_check
# The declared minimum: go.mod's go line names the oldest Go that builds latch. Build and vet with
# exactly that release, bounded in time; the current toolchain runs everything else.
min_go=$(go list -m -f '{{.GoVersion}}')
[[ $min_go == *.*.* ]] || min_go=$min_go.0 # "1.26" is the language; its first release is 1.26.0
min_go_check() {
	if [[ go$min_go == "$(go env GOVERSION)" ]]; then
		echo "test.sh: the current Go is the declared minimum, go$min_go" >&2
		return 0
	fi
	GOTOOLCHAIN=go$min_go timeout --kill-after=30 900 go build ./... &&
		GOTOOLCHAIN=go$min_go timeout --kill-after=30 900 go vet ./...
}
stage "build and vet with go$min_go (go.mod's minimum)" min_go_check
stage "go test -race" go test -race -count=1 -timeout 25m ./... "$@"
stage "crash matrix" scripts/crash.sh "${LATCH_CRASH_ROUNDS:-3}"
stage soak scripts/soak.sh "${LATCH_SOAK_DURATION:-2m}"
stage fuzz scripts/fuzz.sh "${LATCH_FUZZ_TIME:-10s}"
# Two release builds of cmd/latch (another path, other empty caches) must be byte-identical
# (docs/releasing.md).
stage "reproducible build" timeout --kill-after=30 900 scripts/repro.sh
# The modules of their own (integrations/*, server/console/browsertest): each go.mod replaces
# github.com/latchkit/latch with this checkout. A core dependency changed without tidying one is
# tidied for the run, with a warning naming the module.
# module_tests DIR GO-TEST-FLAGS…: go vet, staticcheck and go test in DIR, bounded in time.
module_tests() {
	local dir=$1
	shift
	(cd "$dir" &&
		{ go mod tidy -diff >/dev/null || {
			echo "test.sh: WARNING: $dir/go.mod or go.sum is out of date (the core's dependencies changed): commit (cd $dir && go mod tidy); tidied for this run" >&2
			go mod tidy
		}; } &&
		timeout --kill-after=30 900 go vet ./... &&
		run_staticcheck ./... &&
		timeout --kill-after=30 1200 go test -count=1 "$@" ./...)
}
for m in river asynq temporal genkit mcpsdk mcpgo openai anthropic golangci; do
	stage "integration $m (go vet, staticcheck, go test -race)" module_tests "integrations/$m" -race -timeout 15m
done
# The Python client against a real latch serve (clients/python/test.sh builds it): stdlib
# unittest with python3, skipped with a message only when python3 is absent.
stage "python client (clients/python)" clients/python/test.sh
# The console's browser tests (a module of its own so that chromedp is no dependency of latch):
# Debian's chromium, headless. LATCH_REQUIRE_BROWSER=1 makes a missing browser a failure, not a
# skip. Screenshots go to $LATCH_SCREENSHOTS when it is set.
if ! command -v chromium >/dev/null && [[ $(id -u) == 0 ]]; then
	echo "test.sh: installing chromium (for the console's browser tests)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
export LATCH_REQUIRE_BROWSER=1
stage "console browser tests (chromium)" module_tests server/console/browsertest -timeout 12m
# The TypeScript client and its adapters (clients/typescript): npm ci from the committed
# lockfile, tsc over the declarations, node --test against a latch serve built from this
# checkout. Its script skips, saying so, only when node is not installed.
if ! command -v node >/dev/null && [[ $(id -u) == 0 ]]; then
	echo "test.sh: installing nodejs and npm (for the TypeScript client's tests)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
export LATCH_REQUIRE_NODE=1
stage "TypeScript client (npm ci, tsc, node --test)" timeout --kill-after=30 900 clients/typescript/test.sh
echo "test.sh: all stages passed in $(($(date +%s) - start))s" >&2
