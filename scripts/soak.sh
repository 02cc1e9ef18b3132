#!/usr/bin/env bash
# scripts/soak.sh [DURATION [BACKEND]] — the soak: mixed load from several driver processes with
# injected faults (executor errors, NotExecuted, panics, timeouts, lapsed leases and, on
# PostgreSQL, a proxy cutting connections), each written to an injection ledger; at the end no
# effect may have run twice, every blocked effect must be traced to an injection, and the receipt
# chain must verify (docs/reliability.md).
#
# DURATION is a Go duration (default 2m: what CI runs; docs/reliability.md records a 20m run).
# BACKEND is sqlite or postgres (default: both, side by side). Figures go to stderr and, as JSON
# lines, to $LATCH_SOAK_REPORT when set. Extra tuning: $LATCH_SOAK_PROCS (driver processes,
# default 4), $LATCH_SOAK_WORKERS (goroutines each, default 8). Uses $LATCH_TEST_POSTGRES_URL
# when set, else starts a private PostgreSQL cluster (scripts/lib/postgres.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh

duration=${1:-2m}
backend=${2:-}
usage() { echo "usage: scripts/soak.sh [DURATION [sqlite|postgres]]  ($1)" >&2; exit 2; }
[[ $duration =~ ^([0-9]+)(s|m|h)$ ]] || usage "DURATION like 90s, 2m or 1h, got '$duration'"
secs=${BASH_REMATCH[1]}
case ${BASH_REMATCH[2]} in m) secs=$((secs * 60)) ;; h) secs=$((secs * 3600)) ;; esac
case $backend in "" | sqlite | postgres) ;; *) usage "BACKEND sqlite or postgres, got '$backend'" ;; esac

[[ $backend == sqlite || -n ${LATCH_TEST_POSTGRES_URL:-} ]] || postgres_start soak.sh
go test -tags campaign -count=1 -timeout "$((secs + 600))s" -run '^TestSoak$' -v ./internal/campaign \
	-soak.duration="$duration" -soak.backend="$backend" -soak.report="${LATCH_SOAK_REPORT:-}" \
	-soak.procs="${LATCH_SOAK_PROCS:-4}" -soak.workers="${LATCH_SOAK_WORKERS:-8}"
