#!/usr/bin/env bash
# The examples' Next.js app (examples/next-app on Next 16.4.6, a line's workflow locked in
# examples/next-sdk-<line>) on the runlog World, driven by examples/next.mjs: first
# on the line's own local World (the reference), then on runlog installed from tarballs as a
# user installs the published pair (world-runlog and its addon's platform package); `next
# dev`, then `next build` + `next start`, each. Every run must pass its checks (on runlog:
# also GET /api/addon, a route whose code imports world-runlog, so that Next bundles the
# loader), the stream bytes must equal the local World's, and `runlog verify` must be clean
# on the app's runlog data directory. No environment variable points at the addon. Exits
# non-zero on any failure.
#
#   bash .ci/next.sh [line...]     lines: 5.0.0-beta.55 (the default) and 4.8.9
#                                  (examples/next-sdk-4.8.9: @workflow/next 4.1.13)
#
# Time: the "next.sh took" line it prints; a line's two `next build`s and its cold `npm
# install` are most of it. Measured here on 2 cores shared with other work: 447 s for
# 5.0.0-beta.55 with its node_modules already installed (load 10–19); from a fresh clone,
# both lines, 1535 s (load ~25: installs 149 s and 185 s, builds 162–184 s each), about
# 12 minutes a line. On an idle machine it should be less; that is not measured.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUNLOG_NODE_ADDON
t0=$SECONDS
lines=("${@:-5.0.0-beta.55}")
for line in "${lines[@]}"; do
  [ -f "examples/next-sdk-$line/package-lock.json" ] || { echo "no Next app for line $line (examples/next-sdk-$line)" >&2; exit 2; }
done

. .ci/step.sh

runlog_bin=target/release/runlog
[ -x "$runlog_bin" ] || cargo build --release -q -p runlog-cli
ls packages/world-runlog/npm/*/runlog_node.*.node >/dev/null 2>&1 || bash crates/runlog-node/build.sh

out="$(mktemp -d /tmp/runlog-next.XXXXXX)"
trap 'rm -rf "$out"' EXIT

# The stream SHA-256s of a next.mjs output (one JSON summary per mode), one line each; fails
# when a mode did not pass.
shas() { node -e '
  const text = require("fs").readFileSync(0, "utf8");
  const objs = text.split(/\n(?=\{)/).map((s) => JSON.parse(s));
  for (const o of objs) {
    if (!o.ok) { console.error(`${o.line} ${o.world} ${o.mode ?? ""}: not ok: ${o.failure ?? JSON.stringify(o.checks)}`); process.exit(1); }
    console.log(o.streamSha256);
  }
'; }

# next.mjs's summaries less the lines of the run's stream, for the log.
brief() { node -e '
  const text = require("fs").readFileSync(0, "utf8");
  for (const o of text.split(/\n(?=\{)/).map((s) => JSON.parse(s))) {
    const { world, mode, ok, checks, streamSha256, bundledAddon, timings, failure, serverErrors } = o;
    console.log(JSON.stringify({ world, mode, ok, checks, streamSha256, bundledAddon, timings, failure, serverErrors }));
  }
'; }

for line in "${lines[@]}"; do
  app="examples/next-sdk-$line"
  step "next: $line on its own local World (the reference), next dev and next build + next start"
  node examples/next.mjs "$line" local > "$out/local.json" || { cat "$out/local.json"; exit 1; }
  brief < "$out/local.json"
  ref="$(shas < "$out/local.json" | sort -u)"
  echo "reference stream sha256: $ref"
  test "$(echo "$ref" | wc -l)" -eq 1

  step "next: $line on runlog (tarballs), next dev and next build + next start"
  rm -rf "$app/.workflow-data"
  node examples/next.mjs "$line" runlog --keep-data > "$out/runlog.json" || { cat "$out/runlog.json"; exit 1; }
  brief < "$out/runlog.json"
  got="$(shas < "$out/runlog.json" | sort -u)"
  echo "runlog stream sha256: $got"
  test "$got" = "$ref" || { echo "stream bytes differ from the local World's" >&2; exit 1; }
  "$runlog_bin" --store "$app/.workflow-data/runlog" verify
  rm -rf "$app/.workflow-data"
done

echo
echo "next.sh took $((SECONDS - t0)) s"
echo "next passed"
