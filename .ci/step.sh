# Sourced by every CI script: `step "what"` prints a step's heading with the time since the
# CI run began (RUNLOG_CI_T0, set by the first script of the run), so a slow step is named.
export RUNLOG_CI_T0="${RUNLOG_CI_T0:-$(date +%s)}"
step() { printf '\n== %s == [%ss into CI]\n' "$*" "$(($(date +%s) - RUNLOG_CI_T0))"; }
