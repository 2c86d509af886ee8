#!/usr/bin/env bash
# The Node World on PostgreSQL (issue 14), called by .ci/run after .ci/node.sh: starts a
# throwaway PostgreSQL 15 (.ci/pg-server.sh: Unix socket in a temp dir, no TCP), then, with
# RUNLOG_REQUIRE_PG=1 (a missing server fails, never skips):
#   1. the package's PostgreSQL tests (test/postgres.test.mjs) and its backend-neutral World
#      tests on PostgreSQL (test/world-storage.test.mjs with RUNLOG_TEST_BACKEND=postgres);
#   2. the SDK's published conformance suite (@workflow/world-testing 5.0.0-beta.35, 12
#      tests) against this package's World on PostgreSQL (npm run conformance:pg: a fresh
#      schema, selected by WORKFLOW_RUNLOG_URL).
# Stops and removes the server on exit, pass or fail. Builds nothing twice: the npm
# dependencies are installed only when .ci/node.sh has not installed them, and the addon
# build is cargo's no-op when .ci/node.sh already built it. About 1 minute here.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n== %s ==\n' "$*"; }

pkg=packages/world-runlog
if [ ! -d "$pkg/node_modules/@workflow/world-testing" ]; then
  step "npm install (packages/world-runlog, as locked; .ci/node.sh did not run)"
  (cd "$pkg" && npm install --no-audit --no-fund)
fi
step "the addon (crates/runlog-node/build.sh; up to date after .ci/node.sh)"
bash crates/runlog-node/build.sh

step "throwaway PostgreSQL 15"
eval "$(.ci/pg-server.sh start)"
trap '.ci/pg-server.sh stop "$RUNLOG_PG_DIR"' EXIT
export RUNLOG_REQUIRE_PG=1
echo "PostgreSQL 15 on $RUNLOG_PG_DIR (socket only): $RUNLOG_PG_URL"

step "package tests on PostgreSQL (postgres.test.mjs; world-storage.test.mjs with RUNLOG_TEST_BACKEND=postgres)"
(cd "$pkg" && npx vitest run test/postgres.test.mjs)
(cd "$pkg" && RUNLOG_TEST_BACKEND=postgres npx vitest run test/world-storage.test.mjs)

step "SDK conformance suite against the runlog World on PostgreSQL (npm run conformance:pg, 12 tests)"
start_s=$SECONDS
(cd "$pkg" && npm run conformance:pg)
echo "conformance on PostgreSQL: $((SECONDS - start_s)) s"

echo
echo "node PostgreSQL CI passed"
