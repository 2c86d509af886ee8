#!/usr/bin/env bash
# The example apps of examples/ (one real Nitro app per Workflow SDK line) on the runlog World,
# called by .ci/run after .ci/node.sh built the addon. Per line that runlog serves: the app on
# the line's own local World (the reference), then on runlog installed from tarballs as a user
# installs packages and from the package directory, dev server and production build each;
# every run must pass its checks, the stream bytes must equal the local World's, and
# `runlog verify` must be clean on the app's runlog data directory. No environment variable
# points at the addon. Exits non-zero on any failure. About 7–9 minutes here for the three
# lines, an estimate (not timed as one script): about 5 for the first two, and 5.0.0-beta.55's
# three runs took 27 s (local), 36 s (--pack) and 21 s (directory) on a warm npm cache;
# a cold `npm install` of an app is ~60 s. All three lines runlog serves are run:
# 4.8.9 (spec 3), 5.0.0-beta.35 (spec 5) and 5.0.0-beta.55 (spec 7: slot event ids,
# docs/SDK-LINES.md §4–§9).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUNLOG_NODE_ADDON

step() { printf '\n== %s ==\n' "$*"; }

runlog_bin=target/release/runlog
[ -x "$runlog_bin" ] || cargo build --release -q -p runlog-cli

# The stream SHA-256s of a run.mjs output (one JSON summary per mode), one line each.
shas() { node -e '
  const text = require("fs").readFileSync(0, "utf8");
  const objs = text.split(/\n(?=\{)/).map((s) => JSON.parse(s));
  for (const o of objs) { if (!o.ok) { console.error(`${o.line} ${o.world} ${o.mode}: not ok`); process.exit(1); } console.log(o.streamSha256); }
'; }

for line in 4.8.9 5.0.0-beta.35 5.0.0-beta.55; do
  app="examples/sdk-$line"
  step "examples: $line on its own local World (the reference)"
  node examples/run.mjs "$line" local > "/tmp/ex-$line-local.json" || { cat "/tmp/ex-$line-local.json"; exit 1; }
  ref="$(shas < "/tmp/ex-$line-local.json" | sort -u)"
  echo "reference stream sha256: $ref"
  test "$(echo "$ref" | wc -l)" -eq 1
  for how in --pack ""; do
    step "examples: $line on runlog (${how:-directory install}), dev and production build"
    node examples/run.mjs "$line" runlog --keep-data $how > "/tmp/ex-$line-runlog.json" \
      || { cat "/tmp/ex-$line-runlog.json"; exit 1; }
    got="$(shas < "/tmp/ex-$line-runlog.json" | sort -u)"
    echo "runlog stream sha256: $got"
    test "$got" = "$ref" || { echo "stream bytes differ from the local World's" >&2; exit 1; }
    "$runlog_bin" --store "$app/.workflow-data/runlog" verify
    rm -rf "$app/.workflow-data"
  done
done
echo
echo "examples passed"
