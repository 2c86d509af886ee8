#!/usr/bin/env bash
# Builds the runlog Node addon into this machine's platform package, where
# packages/world-runlog loads it from (src/native.js), napi-rs style:
#   packages/world-runlog/npm/<platform>/runlog_node.<platform>.node   (e.g. linux-x64-gnu)
# Plain cargo (napi-rs needs no CLI to build): the cdylib is copied to a `.node` file.
# `npm pack` in that directory then makes the platform package's tarball.
# Usage: crates/runlog-node/build.sh [--debug]     (release by default)
# Honours CARGO_TARGET_DIR and cargo's other target-directory settings.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

profile=release
args=(--release)
if [[ "${1:-}" == "--debug" ]]; then
  profile=debug
  args=()
fi

cargo build "${args[@]}" -p runlog-node
target_dir="$(cargo metadata --format-version 1 --no-deps |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).target_directory))')"
case "$(uname -s)" in
  Darwin) lib="librunlog_node.dylib" ;;
  *) lib="librunlog_node.so" ;;
esac
# The platform's napi-rs name, as src/native.js computes it (platformName).
platform="$(node -e '
const { platform, arch } = process;
const musl = platform === "linux" && !process.report.getReport().header.glibcVersionRuntime;
process.stdout.write(platform === "linux" ? `linux-${arch}-${musl ? "musl" : "gnu"}` : platform === "win32" ? `win32-${arch}-msvc` : `${platform}-${arch}`);')"
pkg_dir="$root/packages/world-runlog/npm/$platform"
if [[ ! -f "$pkg_dir/package.json" ]]; then
  echo "note: no platform package for $platform yet ($pkg_dir/package.json); the loader still finds the file there" >&2
fi
dest="$pkg_dir/runlog_node.$platform.node"
mkdir -p "$pkg_dir"
# Copy, then rename: a process that has the old addon loaded keeps its mapping intact.
cp "$target_dir/$profile/$lib" "$dest.tmp"
mv -f "$dest.tmp" "$dest"
echo "runlog addon ($profile): $dest"
