#!/usr/bin/env bash
# The Node side of CI, called by .ci/run: on a fresh clone, installs packages/world-runlog's
# npm dependencies as locked in its package-lock.json, builds the runlog addon (crates/runlog-node,
# release, plain cargo) and the CLI (target/release/runlog, RUNLOG_BIN: the retention test's
# `runlog restore`), then runs the package's tests (vitest: the store API, errors and
# codes, a corrupt store, group commit, the World's storage and streams) and its type check,
# then the SDK's published conformance suite (@workflow/world-testing 5.0.0-beta.35, 12
# tests) against this package's World. The package tests include test/postgres.test.mjs: on
# the server of RUNLOG_PG_URL (.ci/run's), or a throwaway one started here (.ci/common.sh);
# with RUNLOG_NO_SKIP=1 nothing skips for want of a server, and every test vitest reports as
# not run goes to RUNLOG_SKIP_LOG. Exits non-zero on any failure.
# About 3–4 minutes here (npm install ~35 s, a cold release build of the addon ~1–2 min,
# the conformance suite ~30 s).
#
# `npm install`, not `npm ci`: the registry reached here lacks a few optional, platform-only
# packages (@cbor-extract/cbor-extract-<platform>, napi-windows-process-start-time; nothing
# this package runs needs them), so the lock file cannot list them and `npm ci` refuses it
# as out of sync. `npm install` installs the locked versions and skips those.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
. .ci/common.sh
ci_init

. .ci/step.sh

step "node toolchain"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are required (Node >= 20)" >&2
  exit 1
fi
node --version
npm --version

step "npm install (packages/world-runlog, as locked)"
(cd packages/world-runlog && npm install --no-audit --no-fund)

# test/beta55-interface-parity.test.mjs runs the newest line's own world-local (5.0.0-beta.46)
# and core beside runlog, and test/peer-world-v4-links.test.mjs loads the World against the
# 4.x line's @workflow/world 4.5.0 (a peer): they come from those lines' example apps, as
# locked (.ci/examples.sh installs the same directories again later, which then finds them
# installed).
step "npm install (examples/sdk-5.0.0-beta.55 and sdk-4.8.9, as locked: the reference Worlds of two package tests)"
(cd examples/sdk-5.0.0-beta.55 && npm install --no-audit --no-fund)
(cd examples/sdk-4.8.9 && npm install --no-audit --no-fund)

step "build the addon (crates/runlog-node/build.sh)"
bash crates/runlog-node/build.sh

# test/retention-archives-finished-runs-and-close-stops-it.test.mjs puts a run the World's
# retention archived back with `runlog restore` and fails without the CLI (RUNLOG_BIN).
step "build the CLI (runlog-cli, release) for the retention test"
cargo build --release -q -p runlog-cli
RUNLOG_BIN="$(cargo metadata --format-version 1 --no-deps |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).target_directory))')/release/runlog"
export RUNLOG_BIN

# The addon's declarations (packages/world-runlog/native.d.ts) are generated from its #[napi]
# items: regenerated here (napi build --dts, a debug build without the postgres feature) and
# compared with the checked-in file, which must be current.
step "generated declarations are current (crates/runlog-node/dts.sh --check)"
bash crates/runlog-node/dts.sh --check

step "PostgreSQL for test/postgres.test.mjs"
pg_ensure

step "package tests (npm test) and type check"
npm_vitest "npm test" packages/world-runlog test
(cd packages/world-runlog && npm run typecheck)

step "SDK conformance suite against the runlog World (npm run conformance, 12 tests)"
# scripts/ci-results-vitest.mjs records the pass count for the README's compatibility table
# (when .ci/run set RUNLOG_CI_RESULTS; it prints nothing).
RUNLOG_CI_RECORD_AS='{"source":".ci/node.sh","line":"5.0.0-beta.35","world":"runlog","feature":"SDK conformance suite (passed/tests)","detail":"@workflow/world-testing 5.0.0-beta.35"}' \
  npm_vitest "npm run conformance" packages/world-runlog conformance --reporter="$PWD/scripts/ci-results-vitest.mjs"

echo
echo "node CI passed"
