#!/usr/bin/env bash
# The example apps of examples/ (one real Nitro app per Workflow SDK line) on the runlog World,
# called by .ci/run after .ci/node.sh built the addon. Per line that runlog serves: the app on
# the line's own local World (the reference), then on runlog installed from tarballs as a user
# installs packages and from the package directory, dev server and production build each;
# every run must pass its checks, the stream bytes must equal the local World's, and
# `runlog verify` must be clean on the app's runlog data directory. No environment variable
# points at the addon. Exits non-zero on any failure. The whole script took 14.6 and 15.6
# minutes here (2026-12-01, node_modules present, load average 15–31 from other sessions),
# with the restart tests and the storm (8 s per World at that load); a cold `npm install` of
# an app is ~60 s more per line. All three lines runlog serves are run:
# 4.8.9 (spec 3), 5.0.0-beta.35 (spec 5) and 5.0.0-beta.55 (spec 7: slot event ids,
# docs/SDK-LINES.md §4–§9).
#
# The local run and the runlog run from the package directory also run the restart test
# (run.mjs --restart-mid-sleep: the server's process group killed while a run sleeps, started
# again on the same data directory, the run must complete through world.start()'s recovery
# with one terminal event; on runlog `runlog verify` clean; where the line's own local World
# cannot, as world-local's start() throws when bundled, run.mjs reports that known failure
# instead, examples/README.md). After the last line: the storm
# (packages/world-runlog/scripts/storm.mjs) through the 5.0.0-beta.55 app's World, runlog and
# the line's own local World side by side; it fails unless runlog has 0 runs with extra
# terminal events, 0 entities created twice, 0 runs without a terminal event and 0 runs with
# slot gaps (the local World's counts are printed, never failed on).
#
# EXAMPLES_APP_ROOT=DIR runs each line's app in DIR/sdk-<line> (run.mjs --app-dir) instead
# of examples/sdk-<line>, so that this script can run beside other users of those directories.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUNLOG_NODE_ADDON

. .ci/step.sh

runlog_bin=target/release/runlog
[ -x "$runlog_bin" ] || cargo build --release -q -p runlog-cli

# The stream SHA-256s of a run.mjs output (one JSON summary per mode), one line each.
shas() { node -e '
  const text = require("fs").readFileSync(0, "utf8");
  const objs = text.split(/\n(?=\{)/).map((s) => JSON.parse(s));
  for (const o of objs) { if (!o.ok) { console.error(`${o.line} ${o.world} ${o.mode}: not ok`); process.exit(1); } console.log(o.streamSha256); }
'; }

out="${EXAMPLES_APP_ROOT:-/tmp}"
for line in 4.8.9 5.0.0-beta.35 5.0.0-beta.55; do
  app="examples/sdk-$line"
  appdir=()
  if [ -n "${EXAMPLES_APP_ROOT:-}" ]; then app="$EXAMPLES_APP_ROOT/sdk-$line"; appdir=(--app-dir "$app"); fi
  step "examples: $line on its own local World (the reference), with the restart mid-sleep"
  # The reference checks the app, not runlog: a failed pass of the SDK's local World (its
  # queue is timed with timers) is printed and run once more; runlog's passes never are.
  if ! node examples/run.mjs "$line" local --restart-mid-sleep "${appdir[@]}" > "$out/ex-$line-local.json"; then
    cat "$out/ex-$line-local.json"
    echo "the reference pass on the local World failed; running it once more"
    node examples/run.mjs "$line" local --restart-mid-sleep "${appdir[@]}" > "$out/ex-$line-local.json" \
      || { cat "$out/ex-$line-local.json"; exit 1; }
  fi
  ref="$(shas < "$out/ex-$line-local.json" | sort -u)"
  echo "reference stream sha256: $ref"
  test "$(echo "$ref" | wc -l)" -eq 1
  for how in --pack ""; do
    # The restart test on the directory install (the tarball run proves the installation),
    # with a 12 s sleep: a production server is back within it (the run is recovered while
    # still asleep), a dev server mostly after it (recovered with its wake-up past due).
    # Each summary's restart.sleepLeftAtRecoveryMs says which.
    restart=()
    [ -z "$how" ] && restart=(--restart-mid-sleep --restart-sleep-ms 12000)
    step "examples: $line on runlog (${how:-directory install}), dev and production build${restart:+, with the restart mid-sleep}"
    node examples/run.mjs "$line" runlog --keep-data $how "${restart[@]}" "${appdir[@]}" > "$out/ex-$line-runlog.json" \
      || { cat "$out/ex-$line-runlog.json"; exit 1; }
    got="$(shas < "$out/ex-$line-runlog.json" | sort -u)"
    echo "runlog stream sha256: $got"
    test "$got" = "$ref" || { echo "stream bytes differ from the local World's" >&2; exit 1; }
    installed=directory; [ -z "$how" ] || installed=tarball
    ci_result="\"source\":\".ci/examples.sh\",\"line\":\"$line\",\"world\":\"runlog\",\"install\":\"$installed\",\"ok\":true"
    node scripts/ci-results.mjs record "{$ci_result,\"feature\":\"stream bytes equal the local World's\",\"detail\":\"sha256 $got\"}"
    "$runlog_bin" --store "$app/.workflow-data/runlog" verify
    node scripts/ci-results.mjs record "{$ci_result,\"feature\":\"runlog verify clean\"}"
    rm -rf "$app/.workflow-data"
  done
done

step "storm through the 5.0.0-beta.55 line's World: runlog and the line's own local World"
# The app directory of the last line holds that line's packages (installed by its runs above).
node packages/world-runlog/scripts/storm.mjs --app "$app" > "$out/ex-storm.json" || true
node -e '
  const { results } = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const [runlog, local] = results;
  const keys = ["specVersion", "runsWithExtraTerminal", "extraTerminalEvents", "entitiesCreatedTwice", "runsWithoutTerminal", "runsWithSlotGaps", "storedEvents", "stormMs"];
  console.log(`${runlog.processes} processes x ${runlog.writers} writers on ${runlog.runs} runs`);
  console.log(["", runlog.world, local.world].map((s) => s.padEnd(36)).join(""));
  for (const k of keys) console.log([k, String(runlog[k]), String(local[k])].map((s) => s.padEnd(36)).join(""));
  const must = ["runsWithExtraTerminal", "entitiesCreatedTwice", "runsWithoutTerminal", "runsWithSlotGaps"];
  const bad = must.filter((k) => runlog[k] !== 0);
  if (runlog.specVersion < 6) bad.push(`specVersion ${runlog.specVersion} (slot ids need 6 or more)`);
  if (bad.length) { console.error(`storm: the runlog World broke: ${bad.join(", ")}`); process.exit(1); }
' "$out/ex-storm.json"

echo
echo "examples passed"
