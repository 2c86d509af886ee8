#!/usr/bin/env bash
# The Node World on PostgreSQL (issue 14), called by .ci/run after .ci/node.sh: on the server
# of RUNLOG_PG_URL (.ci/run's), or a throwaway PostgreSQL 15 started here (.ci/pg-server.sh:
# Unix socket in a temp dir, no TCP), with RUNLOG_REQUIRE_PG=1 and RUNLOG_NO_SKIP=1 (a
# missing server fails, never skips; tests vitest reports as not run go to RUNLOG_SKIP_LOG):
#   1. the package's PostgreSQL tests (test/postgres.test.mjs) and its backend-neutral World
#      tests on PostgreSQL (test/world-storage.test.mjs with RUNLOG_TEST_BACKEND=postgres);
#   2. the SDK's published conformance suite (@workflow/world-testing 5.0.0-beta.35, 12
#      tests) against this package's World on PostgreSQL (npm run conformance:pg: a fresh
#      schema, selected by WORKFLOW_RUNLOG_URL).
# Stops and removes a server it started on exit, pass or fail. Builds nothing twice: the npm
# dependencies are installed only when .ci/node.sh has not installed them, and the addon
# build is cargo's no-op when .ci/node.sh already built it. About 1 minute here.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
. .ci/common.sh
ci_init

. .ci/step.sh

pkg=packages/world-runlog
package_ready @workflow/world-testing

step "PostgreSQL 15"
pg_ensure

step "package tests on PostgreSQL (postgres.test.mjs; world-storage.test.mjs with RUNLOG_TEST_BACKEND=postgres)"
# scripts/ci-results-vitest.mjs records each run's pass count for the README's compatibility
# table (when .ci/run set RUNLOG_CI_RESULTS; it prints nothing).
ci_reporter="--reporter=$PWD/scripts/ci-results-vitest.mjs"
ci_as='{"source":".ci/node-pg.sh","line":"5.0.0-beta.35","world":"runlog","feature":"PostgreSQL: package tests"'
RUNLOG_CI_RECORD_AS="$ci_as,\"detail\":\"test/postgres.test.mjs\"}" \
  npm_vitest "postgres.test.mjs" "$pkg" test test/postgres.test.mjs "$ci_reporter"
RUNLOG_TEST_BACKEND=postgres RUNLOG_CI_RECORD_AS="$ci_as,\"detail\":\"test/world-storage.test.mjs\"}" \
  npm_vitest "world-storage.test.mjs on RUNLOG_TEST_BACKEND=postgres" "$pkg" test test/world-storage.test.mjs "$ci_reporter"

step "SDK conformance suite against the runlog World on PostgreSQL (npm run conformance:pg, 12 tests)"
start_s=$SECONDS
RUNLOG_CI_RECORD_AS='{"source":".ci/node-pg.sh","line":"5.0.0-beta.35","world":"runlog","feature":"PostgreSQL: SDK conformance suite","detail":"@workflow/world-testing 5.0.0-beta.35"}' \
  npm_vitest "npm run conformance:pg" "$pkg" conformance:pg "$ci_reporter"
echo "conformance on PostgreSQL: $((SECONDS - start_s)) s"

echo
echo "node PostgreSQL CI passed"
