#!/usr/bin/env bash
# scripts/test.sh — the project's one test command.
#
# 1. Starts a private, throwaway PostgreSQL cluster on 127.0.0.1 (scripts/lib/postgres.sh:
#    installs Debian's `postgresql` package when the server binaries are missing and we are root)
#    and exports LATCH_TEST_POSTGRES_URL and LATCH_REQUIRE_POSTGRES=1, so a missing server fails
#    the Postgres tests instead of skipping them.
# 2. Runs, each as a timed stage: go vet, a gofmt check, `go test -race -count=1 ./...` (extra
#    arguments go to go test), the crash matrix (scripts/crash.sh), a short soak on SQLite and
#    PostgreSQL (scripts/soak.sh, $LATCH_SOAK_DURATION, default 2m) and a bounded run of every
#    fuzz target (scripts/fuzz.sh, $LATCH_FUZZ_TIME per target, default 10s).
# 3. Stops the cluster and removes its directory on exit, whether the run passed or failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh

postgres_start test.sh
start=$(date +%s)

# The Python and curl examples of docs/http.md are run by the server tests.
if ! command -v python3 >/dev/null || ! command -v curl >/dev/null; then
	if [[ $(id -u) == 0 ]]; then
		echo "test.sh: installing python3 and curl (for the examples of docs/http.md)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq python3 curl >/dev/null
	fi
fi
export LATCH_REQUIRE_HTTP_EXAMPLES=1

stage vet go vet ./...
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
stage "go test -race" go test -race -count=1 ./... "$@"
stage "crash matrix" scripts/crash.sh "${LATCH_CRASH_ROUNDS:-3}"
stage soak scripts/soak.sh "${LATCH_SOAK_DURATION:-2m}"
stage fuzz scripts/fuzz.sh "${LATCH_FUZZ_TIME:-10s}"
echo "test.sh: all stages passed in $(($(date +%s) - start))s" >&2
