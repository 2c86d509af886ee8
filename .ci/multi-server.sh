#!/usr/bin/env bash
# Several app servers on one PostgreSQL (issue 23): examples/multi-server.mjs on a throwaway
# PostgreSQL 15 (.ci/pg-server.sh; stopped on exit), the 5.0.0-beta.55 example app as 3
# servers, 100 demo runs + 100 doomed runs each time:
#   1. kill        SIGKILL to one server mid-way (concurrent replays allowed, counted);
#   2. pg-restart  `pg_ctl restart` of the server mid-way;
#   3. kill        again with WORKFLOW_SEQUENTIAL_REPLAYS=1 (one replay of a run at a time).
# Each prints its counts (runs, completed, redelivered messages, concurrent replays) as JSON
# and must pass its checks (every run ends once, no step completed twice, streams whole,
# `runlog verify` clean). Then the storm (packages/world-runlog/scripts/storm.mjs, docs/STORM.md's
# World-level storm) on the same PostgreSQL: 3 processes x 8 writers racing on 100 runs
# through the World of that app's line, each process its own World on the shared store; it
# must show 0 runs with two terminal events, 0 entities created twice, 0 runs without one,
# dense slot ids. Needs the addon and the release `runlog` CLI (built here; no-ops after
# .ci/node.sh). The app is installed in a temp dir, removed on exit. About 3-4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
. .ci/common.sh
ci_init
. .ci/step.sh

package_ready graphile-worker
step "the runlog CLI (release)"
cargo build --release -p runlog-cli

app_dir="$(mktemp -d /tmp/runlog-ms-app.XXXXXX)"
ms_pg_dir=""
cleanup() {
  if [ -n "$ms_pg_dir" ]; then bash .ci/pg-server.sh stop "$ms_pg_dir"; fi
  rm -rf "$app_dir"
  ci_finish
}
trap cleanup EXIT
# A server of its own even when .ci/run has one: the pg-restart scenario restarts it.
step "PostgreSQL 15 (throwaway, restarted by the pg-restart scenario)"
pg_env="$(bash .ci/pg-server.sh start)"
eval "$pg_env"
ms_pg_dir="$RUNLOG_PG_DIR"
export RUNLOG_PG_URL RUNLOG_PG_DIR

bin="$(cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).target_directory))')/release/runlog"
step "3 servers, kill -9 one mid-way, then a PostgreSQL restart mid-way"
node examples/multi-server.mjs --scenario both --runs 100 --app-dir "$app_dir/sdk" --runlog-bin "$bin"
step "3 servers, kill -9 one mid-way, WORKFLOW_SEQUENTIAL_REPLAYS=1"
node examples/multi-server.mjs --scenario kill --runs 100 --sequential --app-dir "$app_dir/sdk" --no-install --runlog-bin "$bin"
step "storm on PostgreSQL: 3 processes x 8 writers on 100 runs through the 5.0.0-beta.55 line's World"
node packages/world-runlog/scripts/storm.mjs --app "$app_dir/sdk" --url "$RUNLOG_PG_URL" --processes 3 --writers 8 --runs 100 > "$app_dir/storm.json" \
  || { cat "$app_dir/storm.json"; echo "storm: the runlog World broke on PostgreSQL" >&2; exit 1; }
node -e '
  const [r] = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).results;
  console.log(`${r.world} on ${r.store}: ${r.processes} processes x ${r.writers} writers on ${r.runs} runs, ${r.attempts} attempts, ${r.storedEvents} events stored, ${r.stormMs} ms`);
  for (const k of ["runsWithExtraTerminal", "extraTerminalEvents", "entitiesCreatedTwice", "runsWithoutTerminal", "runsWithSlotGaps"]) console.log(`  ${k.padEnd(24)}${r[k]}`);
' "$app_dir/storm.json"
