#!/usr/bin/env bash
# The PostgreSQL side of CI (issue 14): starts a throwaway PostgreSQL 15 from the machine's
# Debian packages (/usr/lib/postgresql/15/bin; installs postgresql-15 if missing), listening
# only on a Unix socket in a temp dir (no TCP), exports RUNLOG_PG_URL, runs the runlog-pg
# tests with RUNLOG_REQUIRE_PG=1 (so they fail rather than skip without a server), and stops
# and removes the server on exit, pass or fail.
# initdb refuses root: the data directory belongs to `postgres` and the server runs as it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ ! -x "$PG_BIN/initdb" ]; then
  (apt-get install -y postgresql-15 >/dev/null 2>&1 \
    || (apt-get update >/dev/null 2>&1 && apt-get install -y postgresql-15 >/dev/null 2>&1)) \
    || { echo "postgresql-15 is required ($PG_BIN/initdb missing)" >&2; exit 1; }
fi
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres

as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

tmp="$(mktemp -d /tmp/runlog-pg.XXXXXX)"
chown postgres:postgres "$tmp"
chmod 700 "$tmp"
cleanup() {
  as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

as_pg "$PG_BIN/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 >"$tmp/initdb.log" 2>&1 \
  || { cat "$tmp/initdb.log" >&2; exit 1; }
as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w \
  -o "-c listen_addresses='' -c unix_socket_directories='$tmp' -c max_connections=300 -c fsync=on" start \
  || { cat "$tmp/server.log" >&2; exit 1; }
# The tests run as root and connect through the socket; the directory must be reachable.
chmod 755 "$tmp"

export RUNLOG_PG_URL="host=$tmp user=postgres dbname=postgres"
export RUNLOG_REQUIRE_PG=1
echo "PostgreSQL 15 on $tmp (socket only)"
cargo test -p runlog-pg "$@"
