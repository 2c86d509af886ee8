# Sourced by every CI script: `step "what"` prints a step's heading with the time since the
# CI run began (RUNLOG_CI_T0, set by the first script of the run) and the free space where
# the build writes, so a slow step is named and a full disk is seen before it kills a linker.
export RUNLOG_CI_T0="${RUNLOG_CI_T0:-$(date +%s)}"
step() {
  local free
  free="$(df -Ph "${CARGO_TARGET_DIR:-.}" 2>/dev/null | awk 'NR == 2 { print $4 }')"
  printf '\n== %s == [%ss into CI, %s free]\n' "$*" "$(($(date +%s) - RUNLOG_CI_T0))" "${free:-?}"
}
