#!/usr/bin/env bash
# scripts/test.sh — the project's one test command.
#
# 1. Finds the PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on
#    PATH, installing Debian's `postgresql` package when they are missing and we are root.
# 2. Starts a private, throwaway cluster in a temporary directory, owned by an unprivileged user
#    (initdb refuses root), listening only on 127.0.0.1 on a free port, with trust auth.
# 3. Exports LATCH_TEST_POSTGRES_URL and LATCH_REQUIRE_POSTGRES=1, so a missing server fails the
#    Postgres tests instead of skipping them.
# 4. Runs go vet, a gofmt check and `go test -race -count=1 ./...`; extra arguments go to go test.
# 5. Stops the cluster and removes the directory on exit, whether the run passed or failed.
set -euo pipefail
cd "$(dirname "$0")/.."

pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return 0; }
	done
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(readlink -f "$(command -v initdb)")"
		return 0
	fi
	return 1
}

if ! bin=$(pg_bin); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "test.sh: PostgreSQL server binaries (initdb, pg_ctl) are missing;" >&2
		echo "test.sh: install them (Debian: apt-get install postgresql) or run as root" >&2
		exit 1
	fi
	echo "test.sh: installing postgresql" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
	bin=$(pg_bin) || { echo "test.sh: initdb still missing after install" >&2; exit 1; }
fi

# The cluster runs as an unprivileged user: the caller when not root, else a system user.
run_as=()
if [[ $(id -u) -eq 0 ]]; then
	id -u latchtest >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin latchtest
	run_as=(runuser -u latchtest --)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/latch-pg.XXXXXX")
cleanup() {
	local rc=$?
	if [[ -f "$tmp/data/postmaster.pid" ]]; then
		"${run_as[@]}" "$bin/pg_ctl" -D "$tmp/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
chmod 755 "$tmp"
[[ ${#run_as[@]} -gt 0 ]] && chown latchtest "$tmp"

"${run_as[@]}" "$bin/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 --locale=C >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; exit 1; }
# A loopback port below the ephemeral range (so no client socket holds it); retried if taken.
started=""
for _ in {1..10}; do
	port=$((15000 + RANDOM % 17000))
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # something listens there
	if "${run_as[@]}" "$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $tmp -c max_connections=200" start >/dev/null; then
		started=1
		break
	fi
done
[[ -n $started ]] || { cat "$tmp/server.log" >&2; exit 1; }

export LATCH_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
export LATCH_REQUIRE_POSTGRES=1
echo "test.sh: $("$bin/postgres" --version) on 127.0.0.1:$port" >&2

# The Python and curl examples of docs/http.md are run by the server tests.
if ! command -v python3 >/dev/null || ! command -v curl >/dev/null; then
	if [[ $(id -u) == 0 ]]; then
		echo "test.sh: installing python3 and curl (for the examples of docs/http.md)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq python3 curl >/dev/null
	fi
fi
export LATCH_REQUIRE_HTTP_EXAMPLES=1

go vet ./...
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	echo "test.sh: gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go test -race -count=1 ./... "$@"
