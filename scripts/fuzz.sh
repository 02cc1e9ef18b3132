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
	if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
		grep -v '^fuzz: elapsed' <<<"$out" >&2
		echo "fuzz.sh: $pkg $name FAILED after $(($(date +%s) - start))s" >&2
		exit 1
	fi
	took=$(($(date +%s) - start))
	total=$((total + took))
	printf 'fuzz.sh: %-18s %-20s ok in %ss\n' "$pkg" "$name" "$took" >&2
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|func ||' | sort)
echo "fuzz.sh: every target ran $fuzztime; $total s in all" >&2
