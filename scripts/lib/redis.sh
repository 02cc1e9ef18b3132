# scripts/lib/redis.sh — sourced by test.sh: a private, throwaway Redis server for the asynq
# integration's tests.
#
# redis_start WHO:
# 1. installs Debian's `redis-server` package when redis-server is missing and we are root;
# 2. starts a server in a temporary directory, listening only on 127.0.0.1 on a free port and on
#    a unix socket in that directory, with no persistence (nothing is saved);
# 3. exports LATCH_TEST_REDIS_ADDR (host:port) and LATCH_REQUIRE_REDIS=1, so a missing server
#    fails the Redis tests instead of skipping them.
# redis_stop stops the server and removes its directory; test.sh calls it from its EXIT trap.

redis_start() {
	local who=$1 port started=""
	if ! command -v redis-server >/dev/null; then
		if [[ $(id -u) -ne 0 ]]; then
			echo "$who: redis-server is missing; install it (Debian: apt-get install redis-server) or run as root" >&2
			exit 1
		fi
		echo "$who: installing redis-server" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
		command -v redis-server >/dev/null || { echo "$who: redis-server still missing after install" >&2; exit 1; }
	fi
	redis_tmp=$(mktemp -d "${TMPDIR:-/tmp}/latch-redis.XXXXXX")
	for _ in {1..10}; do
		port=$((15000 + RANDOM % 17000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # something listens there
		redis-server --bind 127.0.0.1 --port "$port" --unixsocket "$redis_tmp/redis.sock" --unixsocketperm 700 \
			--dir "$redis_tmp" --save '' --appendonly no --daemonize yes \
			--pidfile "$redis_tmp/redis.pid" --logfile "$redis_tmp/redis.log" || continue
		# Up to 10 s for it to answer.
		for _ in {1..100}; do
			if redis-cli -s "$redis_tmp/redis.sock" ping 2>/dev/null | grep -q PONG; then
				started=1
				break
			fi
			sleep 0.1
		done
		[[ -n $started ]] && break
		redis_stop_server
	done
	[[ -n $started ]] || { cat "$redis_tmp/redis.log" >&2; exit 1; }
	export LATCH_TEST_REDIS_ADDR="127.0.0.1:$port"
	export LATCH_REQUIRE_REDIS=1
	echo "$who: $(redis-server --version | cut -d' ' -f1-3) on $LATCH_TEST_REDIS_ADDR" >&2
}

redis_stop_server() {
	[[ -f "$redis_tmp/redis.pid" ]] || return 0
	local pid
	pid=$(cat "$redis_tmp/redis.pid")
	kill "$pid" 2>/dev/null || true
	for _ in {1..50}; do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$redis_tmp/redis.pid"
}

# redis_stop keeps the exit status it was called with, for the cleanup that runs after it.
redis_stop() {
	local rc=$?
	if [[ -n ${redis_tmp:-} ]]; then
		redis_stop_server
		rm -rf "$redis_tmp"
	fi
	return "$rc"
}
