#!/usr/bin/env bash
# The conformance suite for the newest SDK line (workflow 5.0.0-beta.55), which has no
# published @workflow/world-testing: packages/world-runlog/conformance-beta55/ is a Nitro app
# of its own built with the line's builder (workflow/nitro) and 17 tests driving it over
# HTTP (run.mjs, world-conformance.test.mjs). It installs the app (npm install --no-save: its package-lock.json, not rewritten),
# builds it once, runs the suite on the line's own local World (@workflow/world-local
# 5.0.0-beta.46, the reference: it must pass there, on a second try
# when its first fails, as it once did in CI on a timing test), then on the runlog World installed into
# the app from the package directory (WORKFLOW_TARGET_WORLD=world-runlog, no
# RUNLOG_NODE_ADDON), and checks `runlog verify` on runlog's data directory. Prints the pass
# count per World; exits non-zero on any failure. Needs the addon built
# (crates/runlog-node/build.sh, as .ci/node.sh does) and target/release/runlog for the verify
# (built here when missing). About 2.5 minutes here on a warm npm cache (npm install ~60 s cold, build
# ~25 s, each World's pass ~35 s).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUNLOG_NODE_ADDON

addon=packages/world-runlog/npm/linux-x64-gnu/runlog_node.linux-x64-gnu.node
[ -f "$addon" ] || bash crates/runlog-node/build.sh
[ -x target/release/runlog ] || cargo build --release -q -p runlog-cli
[ -d packages/world-runlog/node_modules ] || (cd packages/world-runlog && npm install --no-audit --no-fund)  # not `npm ci`: see .ci/node.sh

node packages/world-runlog/conformance-beta55/run.mjs local runlog
