#!/usr/bin/env bash
# A throwaway PostgreSQL 15 on a Unix socket in a temp dir (no TCP), for CI and for local runs.
#   eval "$(.ci/pg-server.sh start)"   # exports RUNLOG_PG_URL (a postgresql:// URL) and RUNLOG_PG_DIR
#   .ci/pg-server.sh stop "$RUNLOG_PG_DIR"
# initdb refuses root: the data directory belongs to `postgres` and the server runs as it.
set -euo pipefail
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

case "${1:-}" in
start)
  if [ ! -x "$PG_BIN/initdb" ]; then
    (apt-get install -y postgresql-15 >/dev/null 2>&1 \
      || (apt-get update >/dev/null 2>&1 && apt-get install -y postgresql-15 >/dev/null 2>&1)) \
      || { echo "postgresql-15 is required ($PG_BIN/initdb missing)" >&2; exit 1; }
  fi
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  tmp="$(mktemp -d /tmp/runlog-pg.XXXXXX)"
  chown postgres:postgres "$tmp"
  chmod 700 "$tmp"
  as_pg "$PG_BIN/initdb" -D "$tmp/data" -U postgres --auth=trust -E UTF8 >"$tmp/initdb.log" 2>&1 \
    || { cat "$tmp/initdb.log" >&2; exit 1; }
  as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories='$tmp' -c max_connections=300 -c fsync=on" start >&2 \
    || { cat "$tmp/server.log" >&2; exit 1; }
  # Clients run as root and connect through the socket; the directory must be reachable.
  chmod 755 "$tmp"
  enc="${tmp//\//%2F}"
  echo "export RUNLOG_PG_DIR='$tmp'"
  echo "export RUNLOG_PG_URL='postgresql://postgres@$enc/postgres'"
  ;;
stop)
  dir="${2:?usage: pg-server.sh stop DIR}"
  as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*)
  echo "usage: pg-server.sh start | stop DIR" >&2
  exit 2
  ;;
esac
