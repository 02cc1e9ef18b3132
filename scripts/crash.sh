#!/usr/bin/env bash
# scripts/crash.sh [ROUNDS] — the crash matrix: a driver process SIGKILLed at each pipeline step
# (before reserve, after reserve, inside the executor, after execution, after record) ROUNDS
# times (default 3) on SQLite and PostgreSQL, plus ROUNDS kills at random instants; after each
# kill a new driver repeats the call, and the store is checked against the executions counted
# outside it (docs/reliability.md). TestHardLinkedPaths measures the hard-link limit. Uses
# $LATCH_TEST_POSTGRES_URL when set, else starts a private PostgreSQL cluster
# (scripts/lib/postgres.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh

rounds=${1:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/crash.sh [ROUNDS]  (ROUNDS: a positive integer, got '$rounds')" >&2; exit 2; }
[[ -n ${LATCH_TEST_POSTGRES_URL:-} ]] || postgres_start crash.sh
go test -tags campaign -count=1 -timeout 20m -run '^(TestCrashMatrix|TestHardLinkedPaths)$' -v ./internal/campaign -crash.rounds="$rounds"
