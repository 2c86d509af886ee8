#!/usr/bin/env bash
# The Node side of CI, called by .ci/run: on a fresh clone, installs packages/world-runlog's
# npm dependencies exactly as locked (npm ci), builds the runlog addon (crates/runlog-node,
# release, plain cargo), then runs the package's tests (vitest: the store API, errors and
# codes, a corrupt store, group commit) and its type check. Exits non-zero on any failure.
# About 2–4 minutes here (npm ci ~50 s, a cold release build of the addon ~1 min).
#
# Not run here: the SDK's conformance suite (npm run conformance), which passes only once
# the World layer is wired into the package.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n== %s ==\n' "$*"; }

step "node toolchain"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are required (Node >= 20)" >&2
  exit 1
fi
node --version
npm --version

step "npm ci (packages/world-runlog)"
(cd packages/world-runlog && npm ci --no-audit --no-fund)

step "build the addon (crates/runlog-node/build.sh)"
bash crates/runlog-node/build.sh

step "package tests (npm test) and type check"
(cd packages/world-runlog && npm test && npm run typecheck)

echo
echo "node CI passed"
