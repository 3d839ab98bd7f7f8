#!/usr/bin/env bash
# Throwaway database servers for tests and benchmarks, on 127.0.0.1 only.
#
#   scripts/testdb.sh start postgres   start a fresh PostgreSQL in a new temp dir
#   scripts/testdb.sh start mysql      start a fresh MariaDB in a new temp dir
#   scripts/testdb.sh stop <dir>       stop the server started in <dir> and remove <dir>
#
# start prints exactly two lines on stdout, KEY=value without quotes:
#   OUTBOX_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:<port>/outbox_test?sslmode=disable
#   OUTBOX_TEST_POSTGRES_DIR=/tmp/outbox-testdb-postgres.XXXXXX
# or
#   OUTBOX_TEST_MYSQL_DSN=root:outbox@tcp(127.0.0.1:<port>)/outbox_test?parseTime=true&loc=UTC
#   OUTBOX_TEST_MYSQL_DIR=/tmp/outbox-testdb-mysql.XXXXXX
# The MySQL DSN holds shell metacharacters, so export each line instead of eval-ing it:
#   while IFS= read -r line; do export "$line"; done < <(scripts/testdb.sh start mysql)
# Everything else goes to stderr. Exit status 2 means the server binaries are missing.
#
# Environment:
#   PG_BIN             directory of initdb, pg_ctl and postgres
#                      (default /usr/lib/postgresql/15/bin)
#   MYSQL_BIN          directory of MariaDB's mariadbd, mariadb-install-db and mariadb
#                      client (or their older names mysqld, mysql_install_db, mysql)
#                      (default: found on PATH, /usr/sbin and /usr/bin; Debian package
#                      mariadb-server)
#   TESTDB_OWNER_PID   when set, a detached watcher stops the server and removes its dir
#                      once this process has exited, so a killed test run leaves no
#                      server behind
#   TESTDB_DURABLE     1: start the server with durable commits instead of the fast
#                      settings below (benchmarks of a production-like server); unset,
#                      empty or 0: the fast settings (the tests use these)
#   TESTDB_POSTGRES_ARGS  more postgres options, given to pg_ctl -o after the script's
#                      own (for example -c shared_preload_libraries=pg_stat_statements,
#                      which outbox-bench's soak workload sets on the servers it starts);
#                      the tests and CI leave it unset
#   TESTDB_MYSQL_ARGS  more mariadbd options, split on whitespace and given after the
#                      script's own, for profiling a benchmark's server (for example
#                      --performance-schema=ON); the tests and CI leave it unset
#
# By default the settings favour speed over durability (PostgreSQL: fsync=off,
# synchronous_commit=off, full_page_writes=off; MariaDB: no binary log, no doublewrite
# buffer, no flushing at commit: innodb_flush_log_at_trx_commit=0,
# innodb_flush_method=nosync): the data is thrown away. With TESTDB_DURABLE=1 a commit
# returns only once it is on disk: PostgreSQL fsync=on, synchronous_commit=on,
# full_page_writes=on (the server's defaults); MariaDB innodb_flush_log_at_trx_commit=1,
# doublewrite buffer on, the default innodb_flush_method (O_DIRECT on MariaDB 10.6 and
# later). The MariaDB binary log stays off in both modes: with it on (a replicated
# production server), a commit would also write the binary log (and sync it, with
# sync_binlog=1) in a two-phase commit with InnoDB; that cost is not part of the
# durable settings here. The temp dir (TMPDIR, default /tmp) should be on a
# disk for durable settings to mean anything: on tmpfs fsync does nothing.
#
# Neither server reads the system's configuration files or uses its system service,
# data directory, socket or port (3306). Each kind has a start_<kind> function that
# writes the marker file <dir>/kind and a stop_<kind> function.
set -euo pipefail

SCRIPT=$(readlink -f "$0")

# DURABLE is 1 for durable commits (TESTDB_DURABLE=1), empty for the fast settings.
case ${TESTDB_DURABLE:-} in
"" | 0) DURABLE= ;;
1) DURABLE=1 ;;
*)
	printf 'testdb: TESTDB_DURABLE must be 1, 0 or unset, not %q\n' "$TESTDB_DURABLE" >&2
	exit 64
	;;
esac

log() { printf 'testdb: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# as_owner runs a command as the user that owns the server files: the $SERVER_USER OS
# user (postgres or mysql) when we are root (initdb and postgres refuse to run as root,
# and a server's files should not belong to root), else ourselves.
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

	local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" mode=fast
	if [ -n "$DURABLE" ]; then
		durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on" mode=durable
	fi
	local port attempt started=
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		log "starting postgres on 127.0.0.1:$port (attempt $attempt, $mode commits${TESTDB_POSTGRES_ARGS:+; TESTDB_POSTGRES_ARGS: $TESTDB_POSTGRES_ARGS})"
		if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -s start -o "\
-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
$durability \
-c max_connections=200 -c shared_buffers=64MB \
-c log_min_messages=warning -c log_statement=none ${TESTDB_POSTGRES_ARGS:-}" >&2; then
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

# find_bin prints the first of the named programs found in $MYSQL_BIN, or on PATH,
# /usr/sbin and /usr/bin.
find_bin() {
	local name dir
	for name in "$@"; do
		if [ -n "${MYSQL_BIN:-}" ]; then
			if [ -x "$MYSQL_BIN/$name" ]; then
				echo "$MYSQL_BIN/$name"
				return 0
			fi
			continue
		fi
		for dir in $(echo "$PATH" | tr ':' ' ') /usr/sbin /usr/bin; do
			if [ -x "$dir/$name" ]; then
				echo "$dir/$name"
				return 0
			fi
		done
	done
	return 1
}

# The MariaDB account the tests use, over TCP on 127.0.0.1.
MYSQL_USER=root
MYSQL_PASSWORD=outbox

# mysql_server_pid prints the pid of the server in <dir>, if it is running.
mysql_server_pid() {
	local dir=$1 pid
	[ -f "$dir/mysqld.pid" ] || return 1
	pid=$(cat "$dir/mysqld.pid")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# kill_mysql stops the server in <dir>: TERM, then KILL after 20 s. Its files are
# thrown away, so a slow shutdown is not worth waiting for.
kill_mysql() {
	local dir=$1 pid i
	pid=$(mysql_server_pid "$dir") || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	log "mariadbd $pid did not stop; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

start_mysql() {
	local server install client
	server=$(find_bin mariadbd mysqld) &&
		install=$(find_bin mariadb-install-db mysql_install_db) &&
		client=$(find_bin mariadb mysql) || {
		log "MariaDB binaries not found (mariadbd, mariadb-install-db, mariadb; set MYSQL_BIN or install mariadb-server)"
		exit 2
	}
	SERVER_USER=mysql
	if [ "$(id -u)" -eq 0 ] && ! id -u "$SERVER_USER" >/dev/null 2>&1; then
		log "running as root but there is no '$SERVER_USER' OS user to run the server"
		exit 2
	fi

	local dir
	dir=$(make_dir mysql)
	# Leave nothing behind if start-up fails.
	trap 'kill_mysql "$dir"; rm -rf "$dir"' ERR

	log "mariadb-install-db in $dir/data"
	# root@localhost and root@127.0.0.1 without a password ("normal"); the password is
	# set below, once the server runs.
	as_owner "$install" --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
		--skip-test-db --skip-name-resolve >"$dir/install.log" 2>&1 ||
		{
			cat "$dir/install.log" >&2
			false
		}

	# The binary log stays off in both modes (see the header).
	local durability=(--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-flush-method=nosync) mode=fast
	if [ -n "$DURABLE" ]; then
		durability=(--innodb-flush-log-at-trx-commit=1 --innodb-doublewrite=1) mode=durable
	fi
	local extra=()
	read -r -a extra <<<"${TESTDB_MYSQL_ARGS:-}"
	local port attempt i started=
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		log "starting mariadbd on 127.0.0.1:$port (attempt $attempt, $mode commits${TESTDB_MYSQL_ARGS:+; TESTDB_MYSQL_ARGS: $TESTDB_MYSQL_ARGS})"
		# setsid and closed descriptors: the server outlives this script and holds none
		# of its caller's pipes open.
		setsid bash -c 'as_user=$1; shift; if [ "$(id -u)" -eq 0 ]; then exec runuser -u "$as_user" -- "$@"; else exec "$@"; fi' \
			outbox-testdb-mariadbd "$SERVER_USER" "$server" --no-defaults \
			--datadir="$dir/data" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
			--tmpdir="$dir" --log-error="$dir/server.log" \
			--bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
			--skip-log-bin "${durability[@]}" --innodb-buffer-pool-size=128M --innodb-fast-shutdown=2 \
			--max-connections=1000 --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
			"${extra[@]}" </dev/null >/dev/null 2>&1 &
		for i in $(seq 1 600); do
			if "$client" --no-defaults --protocol=socket --socket="$dir/mysqld.sock" -u root -e 'SELECT 1' >/dev/null 2>&1; then
				started=1
				break
			fi
			# The server logs this and exits when it cannot start, for example when
			# another process took the port.
			if grep -q '\[ERROR\] Aborting' "$dir/server.log" 2>/dev/null; then
				break
			fi
			sleep 0.1
		done
		[ -z "$started" ] || break
		tail -n 5 "$dir/server.log" >&2 || true
		kill_mysql "$dir"
		mv "$dir/server.log" "$dir/server.log.$attempt" 2>/dev/null || true
	done
	[ -n "$started" ] || false

	"$client" --no-defaults --protocol=socket --socket="$dir/mysqld.sock" -u root >&2 <<-EOF
		CREATE USER IF NOT EXISTS '$MYSQL_USER'@'127.0.0.1';
		ALTER USER '$MYSQL_USER'@'127.0.0.1' IDENTIFIED BY '$MYSQL_PASSWORD';
		GRANT ALL PRIVILEGES ON *.* TO '$MYSQL_USER'@'127.0.0.1' WITH GRANT OPTION;
		CREATE DATABASE outbox_test CHARACTER SET utf8mb4;
	EOF
	trap - ERR

	watch_owner "${TESTDB_OWNER_PID:-}" "$dir"
	log "mariadb ready on 127.0.0.1:$port"
	echo "OUTBOX_TEST_MYSQL_DSN=$MYSQL_USER:$MYSQL_PASSWORD@tcp(127.0.0.1:$port)/outbox_test?parseTime=true&loc=UTC"
	echo "OUTBOX_TEST_MYSQL_DIR=$dir"
}

stop_mysql() {
	local dir=$1
	if mysql_server_pid "$dir" >/dev/null; then
		log "stopping mariadbd in $dir"
		kill_mysql "$dir"
	fi
}

usage() {
	cat >&2 <<-EOF
		usage: $0 start postgres|mysql
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
		mysql) start_mysql ;;
		*) die "unknown kind '$2' (supported: postgres, mysql)" ;;
		esac
		;;
	stop)
		local dir=$2 kind
		# Only remove directories this script created.
		[ -f "$dir/kind" ] || die "$dir was not created by $0"
		kind=$(cat "$dir/kind")
		case $kind in
		postgres) stop_postgres "$dir" ;;
		mysql) stop_mysql "$dir" ;;
		*) die "unknown kind '$kind' in $dir/kind" ;;
		esac
		rm -rf "$dir"
		log "removed $dir"
		;;
	*) usage ;;
	esac
}

main "$@"
