#!/usr/bin/env bash
# scripts/repro.sh — checks that cmd/latch builds reproducibly (docs/releasing.md).
#
# Builds cmd/latch twice with the release flags and compares the two binaries' SHA-256:
#   A: from this checkout, with a fresh, empty build cache and temporary directory of its own;
#   B: from a copy of the same source files at another path, with another fresh cache and
#      temporary directory, written to another output directory.
# Nothing is shared between the two builds but the module cache (downloaded module zips, checked
# against go.sum) and the Go toolchain, so a difference means the binary depends on where the
# source lies, on a build cache's contents, or on something else a release build must not
# depend on. Exits 0 when the two are identical, 1 (printing both hashes and `go version -m`
# of each) when they differ.
#
# The release flags are CGO_ENABLED=0, -trimpath and -buildvcs=false (docs/releasing.md says why
# each); extra arguments are passed to both `go build`s (e.g. -ldflags='-s -w' to check those
# too). Both builds are cold, so this takes minutes on a small machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=$(mktemp -d "${TMPDIR:-/tmp}/latch-repro.XXXXXX")
# The module cache marks files read-only; the build caches are ordinary directories.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

flags=(-trimpath -buildvcs=false "$@")

# build NAME SRC: one build from SRC with a cache, temporary directory and output of its own.
build() {
	local name=$1 src=$2
	mkdir -p "$work/$name/cache" "$work/$name/tmp" "$work/$name/out"
	(cd "$src" &&
		env CGO_ENABLED=0 GOFLAGS= GOCACHE="$work/$name/cache" GOTMPDIR="$work/$name/tmp" \
			go build "${flags[@]}" -o "$work/$name/out/latch" ./cmd/latch)
}

# The copy holds the files git knows (tracked, and untracked but not ignored), so that an
# uncommitted change is in both builds.
mkdir -p "$work/src/latch-copy"
git -C "$root" ls-files -z --cached --others --exclude-standard |
	(cd "$root" && xargs -0 cp --parents -t "$work/src/latch-copy" 2>/dev/null || true)
# A file git tracks but the checkout has deleted is skipped above; check the copy is buildable.
test -f "$work/src/latch-copy/cmd/latch/main.go"

echo "repro.sh: build A (checkout $root)"
build a "$root"
echo "repro.sh: build B (copy $work/src/latch-copy)"
build b "$work/src/latch-copy"

sum_a=$(sha256sum "$work/a/out/latch" | cut -d' ' -f1)
sum_b=$(sha256sum "$work/b/out/latch" | cut -d' ' -f1)
echo "A sha256:$sum_a"
echo "B sha256:$sum_b"
if [[ "$sum_a" != "$sum_b" ]]; then
	echo "repro.sh: the two builds differ" >&2
	diff <(go version -m "$work/a/out/latch" | tail -n +2) <(go version -m "$work/b/out/latch" | tail -n +2) >&2 || true
	exit 1
fi
echo "repro.sh: identical ($(go version -m "$work/a/out/latch" | head -1 | cut -d' ' -f2), flags: CGO_ENABLED=0 ${flags[*]})"
