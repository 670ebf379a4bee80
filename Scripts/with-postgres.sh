#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: a temporary folder, a free loopback port, a
# non-root server user, trust authentication on loopback only. Installs Debian's `postgresql` when
# no server binaries are found (needs root and apt-get). Exports
# CRDT_SYNC_TEST_POSTGRES=postgres://postgres@127.0.0.1:PORT/crdt_sync_test?sslmode=disable for the
# command, and always stops the cluster and removes the folder. Exits with the command's status.
# $CRDT_SYNC_PG_OPTIONS adds server options (e.g. "-c fsync=on -c commit_delay=200", or
# "-c shared_preload_libraries=pg_stat_statements" to profile statements).
#
#   Scripts/with-postgres.sh swift test --skip-build --filter 'NotesRelayTests|NotesSyncHTTPTests'
set -euo pipefail
if [ $# -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGUMENT...]" >&2
    exit 2
fi

find_bin() {
    # The newest installed major version's binaries.
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}
bin="$(find_bin || true)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        echo "error: no PostgreSQL server under /usr/lib/postgresql/*/bin, and cannot install it (needs root and apt-get)" >&2
        exit 1
    fi
    echo "with-postgres: installing Debian's postgresql" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    bin="$(find_bin)"
fi

# PostgreSQL refuses to run as root: as root, run it as the `postgres` user (the package makes it).
as_server() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    fi
    as_server() { runuser -u postgres -- "$@"; }
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/crdt-sync-pg.XXXXXX")"
started=""
cleanup() {
    if [ -n "$started" ]; then
        as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 700 "$dir"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi

as_server "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    echo "error: initdb failed" >&2
    exit 1
}

# A free loopback port: a random one that nothing answers on; pg_ctl fails if it was taken since.
port_is_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    port_is_free "$port" || continue
    if as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 ${CRDT_SYNC_PG_OPTIONS:-}" start >/dev/null; then
        started=1
        break
    fi
done
if [ -z "$started" ]; then
    cat "$dir/server.log" >&2 || true
    echo "error: the PostgreSQL server did not start" >&2
    exit 1
fi
"$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres crdt_sync_test

export CRDT_SYNC_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/crdt_sync_test?sslmode=disable"
echo "with-postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (CRDT_SYNC_TEST_POSTGRES=$CRDT_SYNC_TEST_POSTGRES)" >&2
status=0
"$@" || status=$?
exit "$status"
