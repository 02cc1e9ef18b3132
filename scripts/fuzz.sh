#!/usr/bin/env bash
# scripts/fuzz.sh [FUZZTIME] — runs every fuzz target of the module (each `func FuzzXxx` in a
# _test.go file) for FUZZTIME (a go test -fuzztime value, default 10s), one after another,
# printing each target's time. The seed corpora (f.Add and testdata/fuzz/) also run in every
# plain `go test`. A failure stops the run; go test writes the failing input under
# testdata/fuzz/ of its package and prints how to re-run it.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-10s}
[[ $fuzztime =~ ^[0-9]+(s|m|x)$ ]] || { echo "usage: scripts/fuzz.sh [FUZZTIME]  (like 10s, 1m or 1000x, got '$fuzztime')" >&2; exit 2; }
total=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	start=$(date +%s)
	corpus=$pkg/testdata/fuzz/$name
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	note=""
	if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
		# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a failure when a
		# loaded machine keeps a worker busy past it ("context deadline exceeded", no input). That
		# is the end of a run that found nothing; a failing input is always written to the corpus.
		if [[ $(grep -c -- '^--- FAIL' <<<"$out") == 1 ]] && grep -qx '    context deadline exceeded' <<<"$out" &&
			! grep -q 'Failing input written' <<<"$out" && [[ $(ls "$corpus" 2>/dev/null | sort || true) == "$before" ]]; then
			note=" (the fuzz coordinator reported its own deadline; no failing input)"
		else
			grep -v '^fuzz: elapsed' <<<"$out" >&2
			echo "fuzz.sh: $pkg $name FAILED after $(($(date +%s) - start))s" >&2
			exit 1
		fi
	fi
	took=$(($(date +%s) - start))
	total=$((total + took))
	printf 'fuzz.sh: %-18s %-20s ok in %ss%s\n' "$pkg" "$name" "$took" "$note" >&2
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|func ||' | sort)
echo "fuzz.sh: every target ran $fuzztime; $total s in all" >&2
