#!/usr/bin/env bash
# scripts/bench.sh — reproduces every figure of docs/performance.md in one go.
#
# Run it on a quiet machine: the figures are medians of RUNS runs (default 3), but a neighbour
# that takes a core for a whole run still moves them. It prints the load average before and
# after, so a noisy run shows itself.
#
#   scripts/bench.sh                 # all of it (about 10 minutes on 2 cores)
#   DURATION=10s RUNS=5 scripts/bench.sh
#   SECTIONS="targets scaling" scripts/bench.sh   # go, targets, scaling, race, chain, serve, postgres
#   LATCH_BENCH_POSTGRES='postgres://user@host:5432/db?sslmode=disable' scripts/bench.sh
#                                    # adds the postgres section (scratch schema latch_bench)
#   SECTIONS=prefill PREFILL=1000000 scripts/bench.sh
#                                    # the store grown to PREFILL receipts (default 1M; about 4 GB
#                                    # a million in $TMPDIR) by its bulk path: calls and reads there
#                                    # against an empty store. Not in the default sections.
#   LATCH_BENCH_REFERENCE='./other-tool bench' scripts/bench.sh
#                                    # adds the reference section: that command (which prints its
#                                    # calls/s) run alternately with latch, one worker, and the ratio
#
# Needs go and jq; /usr/bin/time (GNU time) for the maximum RSS of `latch receipts --verify`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
RUNS=${RUNS:-3}
SECTIONS=${SECTIONS:-go targets scaling race chain serve${LATCH_BENCH_POSTGRES:+ postgres}${LATCH_BENCH_REFERENCE:+ reference}}
command -v jq >/dev/null || { echo "bench.sh: jq is required" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/latch-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/latch" ./cmd/latch
latch=$tmp/latch

# median reads numbers, one a line, and prints their median.
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }
has() { [[ " $SECTIONS " == *" $1 "* ]]; }

# bench STORE WORKERS: RUNS runs of `latch bench`, one JSON object per line in $tmp/runs.
bench() {
	: >"$tmp/runs"
	for _ in $(seq "$RUNS"); do
		"$latch" bench --store "$1" --workers "$2" --duration "$DURATION" --json >>"$tmp/runs"
	done
}
# field JQ: the median of JQ over the last bench's runs.
field() { jq -r "$1" "$tmp/runs" | median; }
# row LABEL WORKERS: the last bench's medians as a row of the calls table.
row() {
	printf "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f |\n" "$1" "$2" \
		"$(field .latch.calls_per_s)" "$(field .latch.p50_us)" "$(field .latch.p99_us)" \
		"$(field .latch.allocs_per_call)" "$(field .latch.commits_per_call)" \
		"$(field .baseline.calls_per_s)" "$(field .baseline.p99_us)" "$(field .ratio)" \
		"$(field '.latch.cpu_us_per_call // 0')" "$(field '.baseline.cpu_us_per_call // 0')"
}

# race_row LABEL RUN: the race in $tmp/race as a row (deadlocks: "" on SQLite).
race_row() {
	jq -r --arg l "$1" --arg r "$2" '"| \($l) | \($r) | \(.executions) | \(.committed) | \(.seconds * 1000 | round / 1000) | \(.attempts_per_s | round) | \(.p50_us | round) | \(.p99_us | round) | \(.max_us | round) |" + (if .deadlocks == null then "" else " \(.deadlocks) |" end)' "$tmp/race"
}

echo "# latch bench — $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# $(go version), $(uname -sr), $(nproc) CPUs, RUNS=$RUNS, DURATION=$DURATION each side"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
echo

if has go; then
	echo "## Go benchmarks (median of $RUNS, ns/op and allocs/op)"
	echo
	{
		go test -run '^$' -bench '^Benchmark(Evaluate|Seal|VerifyChain)$' -benchmem -count "$RUNS" .
		go test -run '^$' -bench '^BenchmarkScanLinks$' -benchmem -count "$RUNS" ./receipt/
	} | awk '/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 3; i < NF; i++) {
			if ($(i+1) == "ns/op") ns[name] = ns[name] " " $i
			if ($(i+1) == "allocs/op") al[name] = al[name] " " $i
			if ($(i+1) == "receipts/s") rs[name] = rs[name] " " $i
		}
		names[name] = 1
	}
	function med(s,   n, a, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	END {
		for (n in names) printf "| %s | %s | %s | %s |\n", n, med(ns[n]), med(al[n]), (n in rs) ? med(rs[n]) : ""
	}' | sort >"$tmp/go"
	echo "| benchmark | ns/op | allocs/op | receipts/s |"
	echo "|---|---:|---:|---:|"
	cat "$tmp/go"
	echo
fi

if has targets || has scaling; then
	echo "## latch bench: calls through the pipeline vs the bare transactions (median of $RUNS)"
	echo
	echo "CPU µs/call: the process's CPU time (every thread) per call, latch and baseline; it depends far less on other load than calls/s."
	echo
	echo "| synchronous | workers | latch calls/s | p50 µs | p99 µs | allocs/call | commits/call | baseline calls/s | baseline p99 µs | latch/baseline | latch CPU µs/call | baseline CPU µs/call |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	workers="1 8"
	has scaling && workers="1 2 4 8 16 32"
	: >"$tmp/targets"
	for sync in normal full; do
		for w in $workers; do
			bench "sqlite:?synchronous=$sync" "$w"
			row "$sync" "$w"
			# The medians the targets of issue 14 are read from.
			echo "$sync $w $(field .latch.calls_per_s) $(field .ratio) $(field .latch.p99_us) $(field .baseline.p99_us) $(field .latch.allocs_per_call)" >>"$tmp/targets"
		done
	done
	echo
	echo "## Targets: SQLite, one worker (latch/baseline ≥ 0.70, p99 ≤ 3× the baseline's, ≤ 120 allocations a call) and 8 workers ÷ 1 (normal: ≥ 3)"
	echo
	echo "| synchronous | latch/baseline, 1 worker | latch p99 ÷ baseline p99, 1 worker | allocs/call, 1 worker | 8 workers ÷ 1 worker (calls/s) |"
	echo "|---|---:|---:|---:|---:|"
	for sync in normal full; do
		awk -v s="$sync" '$1 == s && $2 == 1 {c1 = $3; r = $4; p = $5 / $6; a = $7} $1 == s && $2 == 8 {c8 = $3}
			END {printf "| %s | %.2f | %.2f | %.0f | %.2f |\n", s, r, p, a, c8 / c1}' "$tmp/targets"
	done
	echo
fi

if has race; then
	echo "## Race: 8 processes × 8 workers, 8,000 attempts over 1,000 shared keys (each run)"
	echo
	echo "| synchronous | run | executions | committed | wall s | attempts/s | p50 µs | p99 µs | max µs |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for sync in normal full; do
		for r in $(seq "$RUNS"); do
			"$latch" bench --store "sqlite:?synchronous=$sync" --race-keys 1000 --processes 8 --workers 8 --json >"$tmp/race"
			race_row "$sync" "$r"
		done
	done
	echo
fi

if has chain; then
	echo "## Chain verification: latch receipts --verify (median of $RUNS)"
	echo
	echo "| receipts | seconds | receipts/s | max RSS MiB |"
	echo "|---:|---:|---:|---:|"
	store="sqlite:$tmp/chain.db?synchronous=normal"
	for n in 10000 100000 1000000; do
		"$latch" bench --store "$store" --receipts "$n" --json >/dev/null # grows the chain to n
		: >"$tmp/verify"
		for _ in $(seq "$RUNS"); do
			if [[ -x /usr/bin/time ]]; then
				/usr/bin/time -f "%e %M" -o "$tmp/time" "$latch" receipts --verify --store "$store" >/dev/null
				cat "$tmp/time" >>"$tmp/verify"
			else
				start=$(date +%s.%N)
				"$latch" receipts --verify --store "$store" >/dev/null
				echo "$(echo "$(date +%s.%N) - $start" | bc) 0" >>"$tmp/verify"
			fi
		done
		secs=$(cut -d' ' -f1 "$tmp/verify" | median)
		rss=$(cut -d' ' -f2 "$tmp/verify" | median)
		printf "| %d | %.3f | %.0f | %.1f |\n" "$n" "$secs" "$(echo "$n / $secs" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
	done
	echo
fi

if has serve; then
	# latch serve: 8 HTTP clients (POST /v1/actions + POST /v1/actions/{id}/outcome) on loopback
	# against 8 goroutines calling the pipeline in process, on one store; the target is a ratio
	# of at least 0.50. Each run is both phases, so the ratio is taken under one load; the
	# table shows each run and the median.
	echo "## latch serve: HTTP vs in process, 8 workers (each run, then the median of $RUNS)"
	echo
	echo "| store | run | in process calls/s | HTTP calls/s | HTTP p50 µs | HTTP p99 µs | HTTP / in process | serve RSS MiB (peak) | serve CPU µs/call |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	# Each store twice: latch serve's default (the token read on every request) and with
	# --token-cache 1s.
	serve_stores=("sqlite:" "sqlite:")
	serve_caches=(0s 1s)
	serve_labels=("SQLite (FULL)" "SQLite (FULL), --token-cache 1s")
	if [[ -n ${LATCH_BENCH_POSTGRES:-} ]]; then
		psep='?'
		[[ $LATCH_BENCH_POSTGRES == *\?* ]] && psep='&'
		serve_stores+=("$LATCH_BENCH_POSTGRES${psep}schema=latch_bench_serve" "$LATCH_BENCH_POSTGRES${psep}schema=latch_bench_serve")
		serve_caches+=(0s 1s)
		serve_labels+=("Postgres" "Postgres, --token-cache 1s")
	fi
	for i in "${!serve_stores[@]}"; do
		: >"$tmp/serve"
		for r in $(seq "$RUNS"); do
			if [[ ${serve_stores[$i]} == sqlite: ]]; then
				"$latch" bench --serve --token-cache "${serve_caches[$i]}" --workers 8 --duration "$DURATION" --json >"$tmp/one"
			else
				"$latch" bench --serve --token-cache "${serve_caches[$i]}" --store "${serve_stores[$i]}" --workers 8 --duration "$DURATION" --json >"$tmp/one"
			fi
			cat "$tmp/one" >>"$tmp/serve"
			jq -r --arg l "${serve_labels[$i]}" --arg r "$r" '"| \($l) | \($r) | \(.in_process.calls_per_s | round) | \(.http.calls_per_s | round) | \(.http.p50_us | round) | \(.http.p99_us | round) | \(.ratio * 100 | round / 100) | \(.serve_rss_bytes / 1048576 * 10 | round / 10) (\(.serve_peak_rss_bytes / 1048576 * 10 | round / 10)) | \(.serve_cpu_us_per_call | round) |"' "$tmp/one"
		done
		sfield() { jq -r "$1" "$tmp/serve" | median; }
		printf "| %s | **median** | %.0f | %.0f | %.0f | %.0f | **%.2f** | %.1f | %.0f |\n" "${serve_labels[$i]}" \
			"$(sfield .in_process.calls_per_s)" "$(sfield .http.calls_per_s)" "$(sfield .http.p50_us)" "$(sfield .http.p99_us)" \
			"$(sfield .ratio)" "$(jq -r '.serve_rss_bytes / 1048576' "$tmp/serve" | median)" "$(sfield .serve_cpu_us_per_call)"
	done
	echo
fi

if has postgres; then
	[[ -n ${LATCH_BENCH_POSTGRES:-} ]] || { echo "bench.sh: the postgres section needs LATCH_BENCH_POSTGRES" >&2; exit 1; }
	sep='?'
	[[ $LATCH_BENCH_POSTGRES == *\?* ]] && sep='&'
	echo "## Postgres: latch bench (median of $RUNS; cache_statement is the default, exec the pooler mode)"
	echo
	echo "| statements | workers | latch calls/s | p50 µs | p99 µs | allocs/call | commits/call | baseline calls/s | baseline p99 µs | latch/baseline | latch CPU µs/call | baseline CPU µs/call |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for mode in cache_statement exec; do
		for w in ${PG_WORKERS:-1 2 4 8 32}; do
			bench "$LATCH_BENCH_POSTGRES${sep}schema=latch_bench&default_query_exec_mode=$mode" "$w"
			row "$mode" "$w"
		done
	done
	echo
	echo "## Postgres race: 4 processes × 8 workers, 4,000 attempts over 1,000 shared keys (each run)"
	echo
	echo "deadlocks: the rise of pg_stat_database.deadlocks of the database during the run (all its clients)."
	echo
	echo "| statements | run | executions | committed | wall s | attempts/s | p50 µs | p99 µs | max µs | deadlocks |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for mode in cache_statement exec; do
		for r in $(seq "$RUNS"); do
			"$latch" bench --store "$LATCH_BENCH_POSTGRES${sep}schema=latch_bench_race&default_query_exec_mode=$mode" \
				--race-keys 1000 --processes 4 --workers 8 --json >"$tmp/race"
			race_row "$mode" "$r"
		done
	done
	echo
fi

if has prefill; then
	# The store grown to PREFILL receipts through its bulk path, then calls at 1 and 8 workers
	# on it and on an empty store alternately, its chain verified, and the operator's reads
	# timed: whether the costs stay flat as the store grows.
	echo "## Flat as the store grows: latch bench --prefill ${PREFILL:-1000000} (SQLite, normal; $RUNS runs each)"
	echo
	echo '```'
	"$latch" bench --prefill "${PREFILL:-1000000}" --runs "$RUNS" --duration "$DURATION" \
		--store "sqlite:$tmp/prefill.db?synchronous=normal" 2>/dev/null
	echo '```'
	echo
	rm -f "$tmp"/prefill.db*
fi

if has reference; then
	[[ -n ${LATCH_BENCH_REFERENCE:-} ]] || { echo "bench.sh: the reference section needs LATCH_BENCH_REFERENCE" >&2; exit 1; }
	echo "## Against a reference: \`$LATCH_BENCH_REFERENCE\` and latch, alternately, $RUNS runs each (SQLite, normal, 1 worker)"
	echo
	echo '```'
	"$latch" bench --reference "$LATCH_BENCH_REFERENCE" --runs "$RUNS" --duration "$DURATION" --store 'sqlite:?synchronous=normal'
	echo '```'
	echo
fi

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
