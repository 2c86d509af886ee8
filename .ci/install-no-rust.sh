#!/usr/bin/env bash
# world-runlog installed as a user without Rust installs it: from the two npm tarballs (the
# World and its addon's platform package, `npm pack`), into a fresh copy of an example app,
# with a PATH that holds node, npm, npx, a shell and coreutils only (no cargo, rustc or
# rustup: checked), then a real workflow app run on it, dev server and production build
# (examples/run.mjs --pack, which calls no Rust tool), on the newest SDK line and the stable
# one. Needs the addon built before (bash crates/runlog-node/build.sh, as .ci/node.sh does)
# and target/release/runlog, which checks the app's store afterwards with the normal PATH.
#   .ci/install-no-rust.sh [LINE...]      (default: 5.0.0-beta.55 4.8.9)
# Exits non-zero on any failure. Took 15 min here on 2 cores shared with other builds and
# test runs (load well above 2); each line is a cold `npm install` of the app (about a
# minute alone) plus the dev and production runs (about 30 s each alone), so about 3-4 min
# on an idle machine (an estimate, not measured idle).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
unset RUNLOG_NODE_ADDON

. .ci/step.sh
fail() { echo "install-no-rust: $*" >&2; exit 1; }

lines=("$@")
[ "${#lines[@]}" -gt 0 ] || lines=(5.0.0-beta.55 4.8.9)
work="$(mktemp -d /tmp/runlog-no-rust.XXXXXX)"
echo "work directory: $work"

# The platform's napi-rs name, as src/native.js and crates/runlog-node/build.sh compute it.
platform="$(node -e '
const { platform, arch } = process;
const musl = platform === "linux" && !process.report.getReport().header.glibcVersionRuntime;
process.stdout.write(platform === "linux" ? `linux-${arch}-${musl ? "musl" : "gnu"}` : platform === "win32" ? `win32-${arch}-msvc` : `${platform}-${arch}`);')"
world_dir=packages/world-runlog
platform_dir="$world_dir/npm/$platform"
addon="$platform_dir/runlog_node.$platform.node"
[ -f "$addon" ] || fail "$addon missing: build it first (bash crates/runlog-node/build.sh)"
runlog_bin=target/release/runlog
[ -x "$runlog_bin" ] || cargo build --release -q -p runlog-cli

step "npm pack: world-runlog and @runlog/world-runlog-$platform"
mkdir -p "$work/tarballs"
pack() { (cd "$1" && npm pack --silent --pack-destination "$work/tarballs"); }
world_tgz="$work/tarballs/$(pack "$world_dir")"
platform_tgz="$work/tarballs/$(pack "$platform_dir")"
# What each tarball must hold: the World its sources and no binary, the platform package
# its .node; both the licence texts, equal to the repository's; neither `private`.
tar -tzf "$world_tgz" > "$work/world.list"
tar -tzf "$platform_tgz" > "$work/platform.list"
grep -qx "package/src/native.js" "$work/world.list" || fail "world tarball without src/native.js"
! grep -q '\.node$' "$work/world.list" || fail "world tarball holds a .node file"
grep -qx "package/runlog_node.$platform.node" "$work/platform.list" || fail "platform tarball without its .node"
for list in world platform; do
  for f in LICENSE-MIT LICENSE-APACHE; do
    grep -qx "package/$f" "$work/$list.list" || fail "$list tarball without $f"
  done
done
for tgz in "$world_tgz" "$platform_tgz"; do
  mkdir -p "$work/unpacked" && tar -xzf "$tgz" -C "$work/unpacked"
  cmp -s "$work/unpacked/package/LICENSE-MIT" LICENSE-MIT || fail "$tgz: LICENSE-MIT differs from the root's"
  cmp -s "$work/unpacked/package/LICENSE-APACHE" LICENSE-APACHE || fail "$tgz: LICENSE-APACHE differs from the root's"
  node -e 'const p=require(process.argv[1]); if (p.private) { console.error(`${p.name} is private`); process.exit(1) }' \
    "$work/unpacked/package/package.json"
  rm -rf "$work/unpacked"
done
ls -l "$world_tgz" "$platform_tgz"

step "a PATH without Rust: node, npm, npx, sh, bash and coreutils"
bin="$work/bin"
mkdir -p "$bin"
for tool in node npm npx sh bash; do
  ln -s "$(command -v "$tool")" "$bin/$tool"
done
dpkg -L coreutils 2>/dev/null | grep -E '^/(usr/)?bin/[^/]+$' | while read -r tool; do
  [ -e "$bin/$(basename "$tool")" ] || ln -s "$tool" "$bin/$(basename "$tool")"
done
[ -e "$bin/cat" ] || fail "coreutils not found through dpkg -L coreutils"
for tool in cargo rustc rustup; do
  if PATH="$bin" command -v "$tool" >/dev/null 2>&1; then fail "$tool is on the Rust-free PATH"; fi
done
echo "PATH=$bin: $(ls "$bin" | wc -l) tools; cargo, rustc and rustup not found on it"

for line in "${lines[@]}"; do
  app="$work/sdk-$line"
  step "$line: tarballs installed into a fresh app ($app), dev server and production build, no Rust on PATH"
  # run.mjs packs the two directories again (the tarballs above are the same bytes) and
  # installs them with `npm install --no-save <world.tgz> <platform.tgz>`.
  if ! PATH="$bin" node examples/run.mjs "$line" runlog --pack --keep-data --app-dir "$app" \
    > "$work/$line.json"; then
    cat "$work/$line.json"
    fail "$line: the app failed on the tarball install"
  fi
  node -e '
    const text = require("fs").readFileSync(process.argv[1], "utf8");
    const runs = text.split(/\n(?=\{)/).map((s) => JSON.parse(s));
    for (const r of runs) {
      if (!r.ok || r.installedFrom !== "tarball") { console.error(JSON.stringify(r)); process.exit(1); }
      console.log(`${r.line} ${r.mode}: ok, installed from ${r.installedFrom}, stream sha256 ${r.streamSha256}`);
    }
    if (runs.length !== 2) { console.error(`expected dev and prod, got ${runs.length} runs`); process.exit(1); }
  ' "$work/$line.json"
  # The addon the app loads is the installed platform package's, not the repository's.
  loaded="$(cd "$app" && PATH="$bin" node --input-type=module -e '
    const m = await import("world-runlog/store");
    process.stdout.write(`${m.addonSource} ${m.addonPath}`);')"
  echo "addon loaded: $loaded"
  case "$loaded" in
    "package $app/node_modules/@runlog/world-runlog-$platform/"*) ;;
    *) fail "$line: the app did not load the addon from its installed platform package" ;;
  esac
  "$runlog_bin" --store "$app/.workflow-data/runlog" verify > "$work/verify-$line.txt" 2>&1 \
    || { cat "$work/verify-$line.txt"; fail "$line: runlog verify found problems"; }
  grep '^verified' "$work/verify-$line.txt"
done

rm -rf "$work"
echo
echo "install without Rust passed: ${lines[*]}"
