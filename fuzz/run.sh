#!/usr/bin/env bash
# Builds and runs every cargo-fuzz target for SECONDS each (default 60), with the nightly
# toolchain; installs cargo-fuzz if missing. First replays every kept regression input
# (fuzz/regressions/<target>/), then fuzzes from the corpus in fuzz/corpus/<target>/.
# Prints one line per target: "fuzz <target>: <executions> executions in <s> s".
# Exit status is non-zero if a regression input or a new input makes a target fail; the
# failing input is left in fuzz/artifacts/<target>/.
#
# Usage: fuzz/run.sh [SECONDS]      e.g. fuzz/run.sh 3600 for a soak
set -euo pipefail

seconds="${1:-60}"
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

if ! cargo +nightly --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=(decode frame_v2 frame_v3 crash_recovery model)
cargo +nightly fuzz build

# libFuzzer limits: a hang (10 s), a big allocation (512 MiB; no length read from the
# input may size one) or a leak of memory fails the run like a panic does.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=4096 -len_control=0)
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    if compgen -G "regressions/$t/*" >/dev/null; then
        if ! cargo +nightly fuzz run "$t" "regressions/$t"/* -- -runs=0 "${limits[@]}" \
            >"artifacts/$t/regressions.log" 2>&1; then
            echo "fuzz $t: a regression input fails (see fuzz/artifacts/$t/regressions.log)"
            status=1
            continue
        fi
    fi
    log="artifacts/$t/run.log"
    if cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds" "${limits[@]}" \
        >"$log" 2>&1; then
        runs=$(grep -Eo 'Done [0-9]+ runs in [0-9]+' "$log" | tail -1 | awk '{print $2}')
        echo "fuzz $t: ${runs:-?} executions in $seconds s"
    else
        echo "fuzz $t: FAILED (input and log in fuzz/artifacts/$t/)"
        grep -E 'panicked|ERROR' -A3 "$log" | head -20 || true
        status=1
    fi
done
exit "$status"
