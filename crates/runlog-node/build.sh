#!/usr/bin/env bash
# Builds the runlog Node addon and installs it where packages/world-runlog loads it:
#   packages/world-runlog/native/runlog_node.node
# Plain cargo (napi-rs needs no CLI to build): the cdylib is copied to a `.node` file.
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
dest="$root/packages/world-runlog/native/runlog_node.node"
mkdir -p "$(dirname "$dest")"
# Copy, then rename: a process that has the old addon loaded keeps its mapping intact.
cp "$target_dir/$profile/$lib" "$dest.tmp"
mv -f "$dest.tmp" "$dest"
echo "runlog addon ($profile): $dest"
