#!/usr/bin/env bash
# The Rust crates as crates.io would take them: the published crates (runlog, runlog-world,
# runlog-pg, runlog-cli; runlog-conformance and runlog-node are `publish = false`) packaged
# and verified together (`cargo publish --dry-run`, which builds each crate from its own
# .crate file against the others through a local overlay registry), the core's package
# checked to hold no test, bench or fuzz data, the licence files in every package, the docs
# built with warnings as errors (all features, as docs.rs builds them, and the core's default
# features), the CLI and the Node addon built and their opening tests run without their
# default `postgres` feature (no runlog-pg compiled in; a postgres:// target refused), and the
# embedding example (examples/job_runner.rs) run and checked once
# (its kill -9 test is tests/job_runner_survives_kill9.rs, run by cargo test).
#   .ci/publish-check.sh
# On a working tree with uncommitted changes it passes --allow-dirty (and says so). Exits
# non-zero on any failure. About 2-4 minutes here with a warm target/.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

. .ci/step.sh
fail() { echo "publish-check: $*" >&2; exit 1; }

crates=(runlog runlog-world runlog-pg runlog-cli)
pkg_args=()
for c in "${crates[@]}"; do pkg_args+=(-p "$c"); done
dirty=()
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  dirty=(--allow-dirty)
  echo "note: uncommitted changes in the working tree: packaging with --allow-dirty"
fi
work="$(mktemp -d /tmp/runlog-publish-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT

step "manifests: metadata of the published crates, publish = false on the others"
cargo metadata --format-version 1 --no-deps | node -e '
  const m = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const published = process.argv.slice(1);
  let bad = 0;
  for (const p of m.packages) {
    const publishes = p.publish === null || p.publish.length > 0;
    if (publishes !== published.includes(p.name)) { console.error(`${p.name}: publish is ${JSON.stringify(p.publish)}`); bad++; }
    if (!publishes) continue;
    for (const f of ["description", "license", "readme", "rust_version", "documentation"]) {
      if (!p[f]) { console.error(`${p.name}: no ${f}`); bad++; }
    }
    if (p.keywords.length === 0 || p.categories.length === 0) { console.error(`${p.name}: no keywords or categories`); bad++; }
    console.log(`${p.name} ${p.version}: rust-version ${p.rust_version}, ${p.license}, ${p.keywords.length} keywords, ${p.categories.join(" ")}`);
  }
  process.exit(bad ? 1 : 0);
' "${crates[@]}"

step "cargo package --list: what each crate ships"
for c in "${crates[@]}"; do
  cargo package -q -p "$c" --list "${dirty[@]}" 2>/dev/null > "$work/$c.list"
  for f in LICENSE-MIT LICENSE-APACHE README.md Cargo.toml; do
    grep -qx "$f" "$work/$c.list" || fail "$c's package has no $f"
  done
  echo "$c: $(wc -l < "$work/$c.list") files"
done
# The core: the library, its spec and contract, the example; no tests, fixtures, benches,
# fuzz targets or JS trees.
if grep -vE '^(src/.*\.rs|format/SPEC\.md|docs/INVARIANTS\.md|examples/job_runner\.rs|README\.md|LICENSE-(MIT|APACHE)|Cargo\.(toml|toml\.orig|lock)|\.cargo_vcs_info\.json)$' \
  "$work/runlog.list"; then
  fail "the runlog package holds the files above, which it should not ship"
fi

step "cargo publish --dry-run: ${crates[*]} (packaged, then each built from its .crate)"
# Cargo treats a registry crate <name>-<version> as immutable, and the dry run's overlay puts
# our own crates in a registry: it reuses an unpacked copy under CARGO_HOME and a build of it
# in the target directory from an earlier run at the same version, so a crate was verified
# against an earlier run's sibling (a function added since then "not found"; seen in CI with a
# kept CARGO_HOME, rust-lang/cargo's overlay). So each run removes our crates' unpacked copies,
# and builds in a target directory of its own (target/publish-check: every runlog* in it is
# such a registry copy and is removed; the other dependencies stay built between runs).
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
publish_target="$(pwd)/target/publish-check"
for c in "${crates[@]}"; do
  v="$(cargo metadata --format-version 1 --no-deps | node -e '
    const m = JSON.parse(require("fs").readFileSync(0, "utf8"));
    console.log(m.packages.find((p) => p.name === process.argv[1]).version);' "$c")"
  for d in "$cargo_home"/registry/src/*/"$c-$v" "$cargo_home"/registry/cache/*/"$c-$v.crate"; do
    if [ -e "$d" ]; then echo "removing an earlier run's unpacked $c $v: $d"; rm -rf "$d"; fi
  done
done
rm -rf "$publish_target"/package "$publish_target"/debug/.fingerprint/runlog* \
  "$publish_target"/debug/deps/*runlog* "$publish_target"/debug/build/runlog*
touch "$work/stamp"
set +e
CARGO_TARGET_DIR="$publish_target" cargo publish --dry-run "${pkg_args[@]}" "${dirty[@]}" > "$work/publish.log" 2>&1
code=$?
set -e
# Expected: cargo drops the [[test]] and [[bench]] targets whose files are not shipped.
echo "$(grep -c '^warning: ignoring \(test\|benchmark\) ' "$work/publish.log" || true) test and bench targets not shipped (their files are not included)"
grep -E '^\s*(Packaged|Verifying|Uploading|Finished)|^(error|warning)' "$work/publish.log" \
  | grep -vE 'File system loop|^warning: ignoring (test|benchmark) |^warning: aborting upload due to dry run' || true
[ "$code" -eq 0 ] || { tail -40 "$work/publish.log"; fail "cargo publish --dry-run exited $code"; }
for c in "${crates[@]}"; do
  crate="$(find "$publish_target"/package -name "$c-[0-9]*.crate" -newer "$work/stamp" | head -1)"
  [ -n "$crate" ] || fail "no $c .crate written by the dry run"
  echo "$crate: $(stat -c %s "$crate") bytes"
done

step "cargo doc, warnings as errors (all features; and the core with its default features)"
RUSTDOCFLAGS="-D warnings" cargo doc -q --workspace --no-deps --all-features
RUSTDOCFLAGS="-D warnings" cargo doc -q -p runlog --no-deps
echo "docs clean"

step "without PostgreSQL: runlog-cli and runlog-node with --no-default-features"
for c in runlog-cli runlog-node; do
  deps="$(cargo tree -q -p "$c" --no-default-features -e normal)"
  if grep -qE '(runlog-pg|postgres) v' <<<"$deps"; then
    fail "$c --no-default-features still depends on runlog-pg or postgres"
  fi
  cargo build -q -p "$c" --no-default-features
done
# The refusal naming the feature, and a file store opening, in those builds.
cargo test -q -p runlog-cli --no-default-features --lib target:: 2>&1 | grep -E '^test result' \
  || fail "runlog-cli --no-default-features: the target tests failed"
cargo test -q -p runlog-node --no-default-features --lib open:: 2>&1 | grep -E '^test result' \
  || fail "runlog-node --no-default-features: the open tests failed"
echo "both build and open file stores without runlog-pg"

step "the embedding example: examples/job_runner.rs, run then --check"
store="$work/jobs.runlog"
cargo run -q --example job_runner -- --store "$store" --jobs 3 --steps 3 --step-ms 5 | tail -1
cargo run -q --example job_runner -- --store "$store" --jobs 3 --steps 3 --check

echo
echo "publish check passed: ${crates[*]}"
