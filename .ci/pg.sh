#!/usr/bin/env bash
# The PostgreSQL tests alone (issue 14; .ci/run runs them within its `cargo test --workspace`,
# on its own server). On the server of RUNLOG_PG_URL, or a throwaway PostgreSQL 15 started
# here from the machine's Debian packages (.ci/pg-server.sh: Unix socket in a temp dir, no
# TCP), with RUNLOG_REQUIRE_PG=1 and RUNLOG_NO_SKIP=1 (.ci/common.sh: they fail rather than
# skip without a server): the runlog-pg tests (the backend conformance suite, the storm,
# tests/world.rs: the World's rules on the server) and the runlog CLI's PostgreSQL tests
# (crates/runlog-cli/tests/postgres_cli.rs: every command, copy both ways, the storm over
# processes). Stops and removes a server it started on exit, pass or fail. The Node World on
# PostgreSQL is .ci/node-pg.sh.
# tests/faults.rs restarts a server mid-append: it starts a private one of its own through
# .ci/pg-server.sh (so it never pulls the shared server from under the other tests), which
# needs this machine's PostgreSQL binaries and root, as this script does.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

. .ci/common.sh
ci_init
pg_ensure
cargo test -p runlog-pg "$@"
cargo test -p runlog-cli --test postgres_cli "$@"
