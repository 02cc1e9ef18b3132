#!/bin/sh
# Runs the Python client's tests against a real `latch serve` built from this repository
# (or $LATCH_BIN). Skips, saying so, only when python3 is absent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if ! command -v python3 >/dev/null 2>&1; then
	echo "clients/python: SKIP: python3 is not installed; install Python 3.9 or later to run these tests" >&2
	exit 0
fi
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' || {
	echo "clients/python: $(python3 --version 2>&1) is older than 3.9, which the client needs" >&2
	exit 1
}

if [ -z "${LATCH_BIN:-}" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$repo" && go build -o "$tmp/latch" ./cmd/latch)
	LATCH_BIN="$tmp/latch"
	export LATCH_BIN
fi

cd "$here"
python3 -m unittest discover -s tests -v
