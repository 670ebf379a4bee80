#!/usr/bin/env bash
# The relay over PostgreSQL under load, beside SQLite (Docs/HTTP.md, "PostgreSQL"): run it
# inside Scripts/with-postgres.sh, which provides $CRDT_SYNC_TEST_POSTGRES.
#
#   Scripts/with-postgres.sh Scripts/relay-bench-postgres.sh [BIN_DIR] [CLIENTS] [SPACES] [SECONDS]
#
# 1. two `crdt-sync serve --postgres` instances over one database, clients spread over both;
# 2. one `crdt-sync serve --store` (SQLite), the same load;
# 3. the two PostgreSQL instances again, with one killed (kill -9) a third of the way in: its
#    clients go on through the other, and every space is checked at the end.
#
# With CRDT_SYNC_BENCH_PROFILE=1 (and the server started with pg_stat_statements, see
# Scripts/with-postgres.sh), prints per statement its calls and time after the first run.
set -euo pipefail
bin="${1:-.build/release}"
clients="${2:-200}"
spaces="${3:-50}"
seconds="${4:-30}"
: "${CRDT_SYNC_TEST_POSTGRES:?run this inside Scripts/with-postgres.sh}"
ulimit -n 65536 2>/dev/null || true

work="$(mktemp -d "${TMPDIR:-/tmp}/crdt-sync-relay-bench.XXXXXX")"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
token="bench-token-$RANDOM$RANDOM"
: > "$work/tokens"
for run in pg sqlite kill; do
    for ((i = 0; i < spaces; i++)); do echo "$run-$i=$token" >> "$work/tokens"; done
done

# Starts `crdt-sync serve ARGS...` on a free port; sets $url and appends its pid to $pids.
start_relay() {
    local log="$work/relay-${#pids[@]}.log"
    "$bin/crdt-sync" serve --port 0 --tokens-file "$work/tokens" --log-level notice \
        --max-connections-per-address 4096 --max-connections 4096 "$@" 2>"$log" &
    pids+=("$!")
    url=""
    for _ in $(seq 1 300); do
        url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -n 1 || true)"
        [ -n "$url" ] && return 0
        sleep 0.1
    done
    cat "$log" >&2
    echo "error: the relay did not start" >&2
    exit 1
}

bench() {
    "$bin/crdt-sync-bench" relay-bench --replica light --clients "$clients" --duration "$seconds" \
        --spaces "$spaces" --token "$token" "$@"
}

start_relay --postgres "$CRDT_SYNC_TEST_POSTGRES"; pg_a="$url"; pid_a="${pids[-1]}"
start_relay --postgres "$CRDT_SYNC_TEST_POSTGRES"; pg_b="$url"
start_relay --store "$work/relay.sqlite"; sqlite="$url"

psql() { "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql" "$CRDT_SYNC_TEST_POSTGRES" -X -q "$@"; }
if [ -n "${CRDT_SYNC_BENCH_PROFILE:-}" ]; then
    psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
fi

echo "== two serve --postgres instances ($pg_a, $pg_b): $clients clients over $spaces spaces, $seconds s"
bench --space pg --url "$pg_a" --url "$pg_b"
if [ -n "${CRDT_SYNC_BENCH_PROFILE:-}" ]; then
    psql -c "SELECT calls, round(total_exec_time::numeric) AS exec_ms, round(total_plan_time::numeric) AS plan_ms,
                    round(mean_exec_time::numeric, 3) AS mean_exec_ms, left(regexp_replace(query, '\s+', ' ', 'g'), 70) AS statement
             FROM pg_stat_statements ORDER BY calls DESC LIMIT 12"
fi
echo
echo "== one serve --store (SQLite, $sqlite): the same load"
bench --space sqlite --url "$sqlite"
echo
echo "== two serve --postgres instances, $pg_a killed (kill -9) after $((seconds / 3)) s"
( sleep "$((seconds / 3))"; kill -9 "$pid_a"; echo "-- killed $pg_a (pid $pid_a)" ) &
bench --space kill --url "$pg_a" --url "$pg_b"
