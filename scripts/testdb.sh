#!/usr/bin/env bash
# Throwaway database servers for tests and benchmarks, on 127.0.0.1 only.
#
#   scripts/testdb.sh start postgres   start a fresh server in a new temp dir
#   scripts/testdb.sh stop <dir>       stop the server started in <dir> and remove <dir>
#
# start prints exactly two lines on stdout, ready for `eval` or `export`:
#   OUTBOX_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:<port>/outbox_test?sslmode=disable
#   OUTBOX_TEST_POSTGRES_DIR=/tmp/outbox-testdb-postgres.XXXXXX
# Everything else goes to stderr. Exit status 2 means the server binaries are missing.
#
# Environment:
#   PG_BIN             directory of initdb, pg_ctl and postgres
#                      (default /usr/lib/postgresql/15/bin)
#   TESTDB_OWNER_PID   when set, a detached watcher stops the server and removes its dir
#                      once this process has exited, so a killed test run leaves no
#                      server behind
#
# Settings favour speed over durability (fsync=off, synchronous_commit=off,
# full_page_writes=off): the data is thrown away. Each kind has a start_<kind> function
# that writes the marker file <dir>/kind and a stop_<kind> function; a MariaDB kind
# ("mysql") is added the same way.
set -euo pipefail

SCRIPT=$(readlink -f "$0")

log() { printf 'testdb: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# as_owner runs a command as the user that owns the server files: the postgres OS user
# when we are root (initdb and postgres refuse to run as root), else ourselves.
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$SERVER_USER" -- "$@"
	else
		"$@"
	fi
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on right now. The
# server may still lose a race for it; callers retry with another port.
free_port() {
	local port i
	for i in $(seq 1 50); do
		port=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	die "no free port found"
}

make_dir() {
	local kind=$1 dir
	dir=$(mktemp -d "${TMPDIR:-/tmp}/outbox-testdb-$kind.XXXXXX")
	echo "$kind" >"$dir/kind"
	if [ "$(id -u)" -eq 0 ]; then
		chown -R "$SERVER_USER" "$dir"
	fi
	echo "$dir"
}

# watch_owner stops the server in <dir> once process <pid> is gone. It runs detached,
# with no inherited file descriptors, so that the caller does not wait for it.
watch_owner() {
	local pid=$1 dir=$2
	[ -n "$pid" ] || return 0
	setsid bash -c '
		while kill -0 "$1" 2>/dev/null && [ -d "$2" ]; do sleep 2; done
		if [ -d "$2" ]; then bash "$3" stop "$2"; fi
	' outbox-testdb-watch "$pid" "$dir" "$SCRIPT" </dev/null >/dev/null 2>&1 &
}

start_postgres() {
	local bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
	local b
	for b in initdb pg_ctl postgres psql; do
		if [ ! -x "$bin/$b" ]; then
			log "PostgreSQL binaries not found: $bin/$b (set PG_BIN or install postgresql-15)"
			exit 2
		fi
	done
	SERVER_USER=postgres
	if [ "$(id -u)" -eq 0 ] && ! id -u "$SERVER_USER" >/dev/null 2>&1; then
		log "running as root but there is no '$SERVER_USER' OS user to run the server"
		exit 2
	fi

	local dir
	dir=$(make_dir postgres)
	# Leave nothing behind if start-up fails.
	trap 'as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"' ERR

	log "initdb in $dir/data"
	as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
		{
			cat "$dir/initdb.log" >&2
			false
		}

	local port attempt started=
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		log "starting postgres on 127.0.0.1:$port (attempt $attempt)"
		if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -s start -o "\
-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
-c fsync=off -c synchronous_commit=off -c full_page_writes=off \
-c max_connections=200 -c shared_buffers=64MB \
-c log_min_messages=warning -c log_statement=none" >&2; then
			started=1
			break
		fi
		tail -n 5 "$dir/server.log" >&2 || true
	done
	[ -n "$started" ] || false

	local i
	for i in $(seq 1 100); do
		if as_owner "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
			break
		fi
		sleep 0.1
	done
	as_owner "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
		-c "CREATE DATABASE outbox_test" >&2
	trap - ERR

	watch_owner "${TESTDB_OWNER_PID:-}" "$dir"
	log "postgres ready on 127.0.0.1:$port"
	echo "OUTBOX_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:$port/outbox_test?sslmode=disable"
	echo "OUTBOX_TEST_POSTGRES_DIR=$dir"
}

stop_postgres() {
	local dir=$1 bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
	SERVER_USER=postgres
	if [ -f "$dir/data/postmaster.pid" ]; then
		log "stopping postgres in $dir"
		as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -s stop >&2 || log "pg_ctl stop failed; removing $dir anyway"
	fi
}

usage() {
	cat >&2 <<-EOF
		usage: $0 start postgres
		       $0 stop <dir>
	EOF
	exit 64
}

main() {
	[ $# -eq 2 ] || usage
	case $1 in
	start)
		case $2 in
		postgres) start_postgres ;;
		*) die "unknown kind '$2' (supported: postgres)" ;;
		esac
		;;
	stop)
		local dir=$2 kind
		# Only remove directories this script created.
		[ -f "$dir/kind" ] || die "$dir was not created by $0"
		kind=$(cat "$dir/kind")
		case $kind in
		postgres) stop_postgres "$dir" ;;
		*) die "unknown kind '$kind' in $dir/kind" ;;
		esac
		rm -rf "$dir"
		log "removed $dir"
		;;
	*) usage ;;
	esac
}

main "$@"
