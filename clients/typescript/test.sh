#!/bin/sh
# Runs the TypeScript client's tests against a real `latch serve` built from this repository:
# npm ci from the committed lockfile, the declarations type-checked, then node --test.
# Skips, saying so, only when node (or npm) is not installed and LATCH_REQUIRE_NODE is unset
# (scripts/test.sh sets it: there a missing node is a failure).
set -eu
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [ -n "${LATCH_REQUIRE_NODE:-}" ]; then
		echo "clients/typescript: node and npm are not installed, and LATCH_REQUIRE_NODE is set" >&2
		exit 1
	fi
	echo "clients/typescript: SKIPPED: node and npm are not installed (Node 20+ runs these tests)"
	exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "clients/typescript: node $(node --version) is older than 20, which the package requires" >&2
	exit 1
fi
npm ci --no-audit --no-fund
npm run --silent typecheck
# One latch binary for every test file (each would otherwise build its own).
if [ -z "${LATCH_BIN:-}" ]; then
	bindir=$(mktemp -d)
	trap 'rm -rf "$bindir"' EXIT
	(cd ../.. && go build -o "$bindir/latch" ./cmd/latch)
	LATCH_BIN=$bindir/latch
	export LATCH_BIN
fi
npm test
