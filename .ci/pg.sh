#!/usr/bin/env bash
# The PostgreSQL side of CI (issue 14): starts a throwaway PostgreSQL 15 from the machine's
# Debian packages (.ci/pg-server.sh: Unix socket in a temp dir, no TCP), exports RUNLOG_PG_URL
# (a postgresql:// URL), runs with RUNLOG_REQUIRE_PG=1 (so they fail rather than skip without a
# server) the runlog-pg tests (the backend conformance suite, the storm, tests/world.rs: the
# World's rules on the server) and the runlog CLI's PostgreSQL tests
# (crates/runlog-cli/tests/postgres_cli.rs: every command, copy both ways, the storm over
# processes), and stops and removes the server on exit, pass or fail. The Node World on
# PostgreSQL is .ci/node-pg.sh.
# tests/faults.rs restarts a server mid-append: it starts a private one of its own through
# .ci/pg-server.sh (so it never pulls the shared server from under the other tests), which
# needs this machine's PostgreSQL binaries and root, as this script does.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

eval "$(.ci/pg-server.sh start)"
trap '.ci/pg-server.sh stop "$RUNLOG_PG_DIR"' EXIT
export RUNLOG_REQUIRE_PG=1
echo "PostgreSQL 15 on $RUNLOG_PG_DIR (socket only): $RUNLOG_PG_URL"
cargo test -p runlog-pg "$@"
cargo test -p runlog-cli --test postgres_cli "$@"
