# Sourced by .ci/run, .ci/node.sh, .ci/node-pg.sh and .ci/pg.sh: the tools the tests need,
# the throwaway PostgreSQL server, the skip switches and the summary of skipped tests.
#
# A test that cannot run here (a missing tool, privilege or server) reports it through
# runlog_conformance::skip::skip (Rust) or pgUrl() (JavaScript): with RUNLOG_NO_SKIP=1 that
# is a failure; otherwise its line "skipped: <test>: <why>" goes to the file RUNLOG_SKIP_LOG,
# which skip_summary counts. Each script calls ci_init first: when .ci/run called it, the
# switches, the log and the server are .ci/run's; run alone, the script makes its own and
# prints the summary and stops its server on exit.

ci_owner=""
ci_pg_dir=""

# RUNLOG_NO_SKIP=1 and a RUNLOG_SKIP_LOG file (unless set already), and the exit trap.
ci_init() {
  export RUNLOG_NO_SKIP="${RUNLOG_NO_SKIP:-1}"
  if [ -z "${RUNLOG_SKIP_LOG:-}" ]; then
    RUNLOG_SKIP_LOG="$(mktemp /tmp/runlog-skips.XXXXXX)"
    export RUNLOG_SKIP_LOG
    ci_owner=1
  fi
  trap ci_finish EXIT
}

# On exit: stops the server this script started; the summary, if the skip log is this
# script's.
ci_finish() {
  [ -z "$ci_pg_dir" ] || .ci/pg-server.sh stop "$ci_pg_dir"
  ci_pg_dir=""
  if [ -n "$ci_owner" ]; then
    skip_summary
    rm -f "$RUNLOG_SKIP_LOG"
  fi
  ci_owner=""
}

# A PostgreSQL server in RUNLOG_PG_URL: the caller's, or a throwaway one (.ci/pg-server.sh:
# Unix socket in a temp dir, no TCP) stopped by ci_finish. Sets RUNLOG_REQUIRE_PG=1.
pg_ensure() {
  if [ -z "${RUNLOG_PG_URL:-}" ]; then
    local env
    env="$(.ci/pg-server.sh start)"
    eval "$env"
    ci_pg_dir="$RUNLOG_PG_DIR"
    echo "PostgreSQL 15 on $RUNLOG_PG_DIR (socket only): $RUNLOG_PG_URL"
  else
    echo "PostgreSQL: $RUNLOG_PG_URL"
  fi
  export RUNLOG_REQUIRE_PG=1
}

# need TOOL PACKAGE: installs the Debian package when TOOL is missing; fails naming both when
# it cannot be had.
need() {
  command -v "$1" >/dev/null && return 0
  (apt-get install -y "$2" >/dev/null 2>&1 \
    || (apt-get update >/dev/null 2>&1 && apt-get install -y "$2" >/dev/null 2>&1)) || true
  command -v "$1" >/dev/null && return 0
  echo "CI needs $1 (Debian package $2) and could not install it" >&2
  exit 1
}

# Every tool and privilege the tests need, each checked to work, not only to exist: root,
# mount/umount of a tmpfs (disk_full, cli_exit_codes, cli_read_only), setpriv running a
# command as nobody (cli_exit_codes, cli_read_only, .ci/pg-server.sh), strace able to trace
# and inject (cli_exit_codes, cli_read_only, cli_import).
tools_check() {
  [ "$(id -u)" = 0 ] || {
    echo "CI runs as root: tests mount tmpfs, run commands as another user and start PostgreSQL" >&2
    exit 1
  }
  need strace strace
  need setpriv util-linux
  need mount mount
  need umount mount
  local probe
  probe="$(mktemp -d)"
  if ! mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
    rmdir "$probe"
    echo "mount -t tmpfs fails here (a container without CAP_SYS_ADMIN?): the disk-full and read-only tests need it" >&2
    exit 1
  fi
  umount "$probe" && rmdir "$probe"
  setpriv --reuid=65534 --regid=65534 --clear-groups true || {
    echo "setpriv cannot run a command as uid 65534 here" >&2
    exit 1
  }
  strace -f -o /dev/null -e inject=getpid:retval=1 true || {
    echo "strace cannot trace and inject here (ptrace not permitted?)" >&2
    exit 1
  }
  echo "tools: $(strace -V | head -1); $(setpriv --version); mount and ptrace work; uid 0"
}

# npm_vitest WHY DIR SCRIPT [ARGS...]: `npm run SCRIPT -- ARGS...` (a vitest script of the
# package in DIR), then one skip line per test it did not run, from its JSON report (WHY
# names the run: vitest does not say why a test skipped itself).
npm_vitest() {
  local why="$1" dir="$2" script="$3" report
  shift 3
  report="$(mktemp /tmp/runlog-vitest.XXXXXX)"
  (cd "$dir" && npm run "$script" -- "$@" \
    --reporter=default --reporter=json --outputFile.json="$report")
  node .ci/vitest-skips.mjs "$report" "$why"
  rm -f "$report"
}

# package_ready MODULE: packages/world-runlog's npm dependencies (installed as locked when
# node_modules/MODULE is missing, i.e. .ci/node.sh did not install them; `npm install`, not
# `npm ci`, for the reason .ci/node.sh gives) and the addon (cargo's no-op when built).
# Needs step.sh sourced.
package_ready() {
  local pkg=packages/world-runlog
  if [ ! -d "$pkg/node_modules/$1" ]; then
    step "npm install (packages/world-runlog, as locked; .ci/node.sh did not run)"
    (cd "$pkg" && npm install --no-audit --no-fund)
  fi
  step "the addon (crates/runlog-node/build.sh; up to date after .ci/node.sh)"
  bash crates/runlog-node/build.sh
}

# The count and list of skipped tests in RUNLOG_SKIP_LOG.
skip_summary() {
  local n=0
  if [ -s "${RUNLOG_SKIP_LOG:-/nonexistent}" ]; then
    n="$(grep -c '^skipped: ' "$RUNLOG_SKIP_LOG" || true)"
  fi
  printf '\n== skipped tests: %s ==\n' "$n"
  if [ "$n" -gt 0 ]; then
    sed 's/^skipped: /  /' "$RUNLOG_SKIP_LOG"
  fi
  if [ "${RUNLOG_NO_SKIP:-}" = 1 ]; then
    echo "(RUNLOG_NO_SKIP=1: a test that cannot run here fails instead of skipping; a line above"
    echo " is a test that skips itself where it does not apply, as a vitest skipIf)"
  fi
}
