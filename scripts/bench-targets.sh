#!/usr/bin/env bash
# Issue 24's table in one sitting: every figure's bench, each with its peer in the same run,
# the device- and scheduler-bound ones (w1, w3, w5, random appends, the World's creates and
# listing) three times (the peers' cells: the median of 3 rounds each, the peers' order rotating
# from round to round), the deterministic or slow ones (bytes per event; the 1M-event
# stores) once. Raw outputs go to OUT (default: a new temp dir); then
# scripts/bench-targets.mjs OUT prints the table.
#
#   bash scripts/bench-targets.sh [OUT]          # ~25 min on 2 vCPUs; needs the release
#                                                # addon (crates/runlog-node/build.sh) and
#                                                # packages/world-runlog's npm install
# RUNLOG_TARGETS_RUNS=N repeats the noisy figures N times (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d /tmp/runlog-targets.XXXXXX)}"
mkdir -p "$out"
runs="${RUNLOG_TARGETS_RUNS:-3}"

cargo build -q --release -p runlog-cli
cargo bench -q --no-run --bench peers --bench scale_cost --bench disk_bytes 2>/dev/null
export RUNLOG_CLI="${CARGO_TARGET_DIR:-$PWD/target}/release/runlog"

note() { printf '%s %s (load %s)\n' "$(date -u +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/sitting.txt" >&2; }

note "start, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+dirty')"
for i in $(seq 1 "$runs"); do
  note "peers w1,w3,w4,w5 run $i"
  cargo bench -q --bench peers -- --quick --rounds 3 --only w1,w3,w4,w5 \
    --peers runlog,raw,raw-pre,sqlite-mutex --json-out "$out/peers-$i.json" > "$out/peers-$i.txt"
  note "random appends run $i"
  RUNLOG_SCALE_ONLY=random cargo bench -q --bench scale_cost > "$out/random-$i.jsonl"
  note "world vs world-local run $i"
  node packages/world-runlog/scripts/bench.mjs > "$out/world-$i.json"
done
note "scale_cost (listings, fresh first ops, memory per open run)"
cargo bench -q --bench scale_cost > "$out/scale.jsonl"
note "disk_bytes"
cargo bench -q --bench disk_bytes > "$out/disk.jsonl"
note "done"
echo "$out"
