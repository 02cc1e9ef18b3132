# scripts/lib/postgres.sh — sourced by test.sh, crash.sh and soak.sh: a private, throwaway
# PostgreSQL cluster for the tests.
#
# postgres_start:
# 1. finds the PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on
#    PATH, installing Debian's `postgresql` package when they are missing and we are root;
# 2. starts a cluster in a temporary directory, owned by an unprivileged user (initdb refuses
#    root), listening only on 127.0.0.1 on a free port, with trust auth;
# 3. exports LATCH_TEST_POSTGRES_URL and LATCH_REQUIRE_POSTGRES=1, so a missing server fails the
#    Postgres tests instead of skipping them;
# 4. installs an EXIT trap that stops the cluster and removes the directory, whether the run
#    passed or failed.

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

postgres_start() {
	local who=$1 bin
	if ! bin=$(pg_bin); then
		if [[ $(id -u) -ne 0 ]]; then
			echo "$who: PostgreSQL server binaries (initdb, pg_ctl) are missing;" >&2
			echo "$who: install them (Debian: apt-get install postgresql) or run as root" >&2
			exit 1
		fi
		echo "$who: installing postgresql" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
		bin=$(pg_bin) || { echo "$who: initdb still missing after install" >&2; exit 1; }
	fi
	pg_dir=$bin

	# The cluster runs as an unprivileged user: the caller when not root, else a system user.
	pg_run_as=()
	if [[ $(id -u) -eq 0 ]]; then
		id -u latchtest >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin latchtest
		pg_run_as=(runuser -u latchtest --)
	fi

	pg_tmp=$(mktemp -d "${TMPDIR:-/tmp}/latch-pg.XXXXXX")
	trap postgres_cleanup EXIT
	chmod 755 "$pg_tmp"
	[[ ${#pg_run_as[@]} -gt 0 ]] && chown latchtest "$pg_tmp"

	"${pg_run_as[@]}" "$bin/initdb" -D "$pg_tmp/data" -U postgres --auth=trust -E UTF8 --locale=C >"$pg_tmp/initdb.log" 2>&1 ||
		{ cat "$pg_tmp/initdb.log" >&2; exit 1; }
	# A loopback port below the ephemeral range (so no client socket holds it); retried if taken.
	local started="" port
	for _ in {1..10}; do
		port=$((15000 + RANDOM % 17000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # something listens there
		if "${pg_run_as[@]}" "$bin/pg_ctl" -D "$pg_tmp/data" -l "$pg_tmp/server.log" -w -t 60 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $pg_tmp -c max_connections=200" start >/dev/null; then
			started=1
			break
		fi
	done
	[[ -n $started ]] || { cat "$pg_tmp/server.log" >&2; exit 1; }

	export LATCH_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	export LATCH_REQUIRE_POSTGRES=1
	echo "$who: $("$bin/postgres" --version) on 127.0.0.1:$port" >&2
}

postgres_cleanup() {
	local rc=$?
	if [[ -f "$pg_tmp/data/postmaster.pid" ]]; then
		"${pg_run_as[@]}" "$pg_dir/pg_ctl" -D "$pg_tmp/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$pg_tmp"
	exit "$rc"
}

# stage NAME COMMAND… runs one test stage and prints how long it took, pass or fail.
stage() {
	local name=$1 start rc=0
	shift
	start=$(date +%s)
	echo "== stage $name" >&2
	"$@" || rc=$?
	echo "== stage $name: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $(($(date +%s) - start))s" >&2
	return "$rc"
}
