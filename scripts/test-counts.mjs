#!/usr/bin/env node
// The test counts of TESTING.md, from the runners themselves (issue 26, item 5).
//
//   node scripts/test-counts.mjs           rewrites TESTING.md
//   node scripts/test-counts.mjs --check   exits 1 when TESTING.md differs from what the
//                                          runners report (what .ci/run calls)
//
// What it asks:
//   - cargo: `cargo test --workspace --all-features --no-run --message-format=json` names
//     every test executable with its package and target; each one is run with
//     `--list --format terse` and `--ignored --list --format terse` (what
//     `cargo test -- --list` runs); the doc tests come from
//     `cargo test --workspace --all-features --doc -- [--ignored] --list --format terse`.
//     An ignored test's reason is the `#[ignore = "…"]` on its function in the source.
//   - vitest: the collection (no test runs) of packages/world-runlog under its two configs,
//     vitest.config.mjs (`npm test`) and vitest.conformance.config.mjs (`npm run
//     conformance`), through vitest's Node API. A test inside a `describe.skipIf` counts
//     whether or not it skips here, so the counts do not depend on the machine; `vitest list`
//     would leave those out. Needs the package's node_modules and the addon built
//     (.ci/node.sh).
//
// What it writes:
//   - the block between `<!-- counts:begin -->` and `<!-- counts:end -->`: tests per test
//     target and per vitest file, totals, and every ignored test named with its reason;
//   - every count written as `<!--n:KEY-->123` anywhere else in the file: the number after
//     the marker is replaced by the runner's. KEY is
//       `<package>/<target>` or `<package>/<target>/<prefix>` — the tests (not ignored) of
//         a cargo target (`lib`, `bin:<name>`, `doc`, or an integration test's name, e.g.
//         `runlog-world/world_rules`), optionally only those whose path starts with prefix
//         (`runlog/lib/io::sim::`);
//       `<package>/<target>/<prefix>+ignored` — its ignored tests instead;
//       `vitest/<file>` — the tests of a file of `npm test` (`vitest/test/store.test.mjs`);
//       `vitest` and `conformance` — the totals of `npm test` and `npm run conformance`.
//     An unknown key is an error.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkgDir = path.join(root, 'packages/world-runlog');
const doc = path.join(root, 'TESTING.md');
const BEGIN = '<!-- counts:begin -->';
const END = '<!-- counts:end -->';

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 256 << 20,
    stdio: ['ignore', 'pipe', 'inherit'],
    ...opts,
  });
}

/** Names of a terse libtest listing (`name: test`), benchmarks left out. */
function terse(out) {
  return out
    .split('\n')
    .filter((l) => l.endsWith(': test'))
    .map((l) => l.slice(0, -': test'.length));
}

function packageName(id) {
  const hash = id.match(/#([^@]+)@/); // path+file:///…#name@version
  if (hash) return hash[1];
  const bare = id.match(/#([^#@]+)$/); // path+file:///…/name#version: the directory's name
  return bare ? path.basename(id.slice(0, id.indexOf('#'))) : id.split(' ')[0];
}

function targetKey(target) {
  if (target.kind.includes('test')) return target.name;
  if (target.kind.includes('bin')) return `bin:${target.name}`;
  return 'lib';
}

/** The cargo test targets: { pkg, key, src, tests: [names], ignored: [names] }. */
function cargoTargets() {
  // RUNLOG_REQUIRE_PG=1: the PostgreSQL tests are built as they are where a server is
  // (without one, and without this switch, their build.rs `#[ignore]`s them), so the
  // counts do not depend on the machine that lists them.
  const env = { ...process.env, CARGO_TERM_COLOR: 'never', RUNLOG_REQUIRE_PG: '1' };
  const json = run(
    'cargo',
    ['test', '--workspace', '--all-features', '--no-run', '--message-format=json'],
    { env },
  );
  const targets = [];
  for (const line of json.split('\n')) {
    if (!line.startsWith('{')) continue;
    const m = JSON.parse(line);
    if (m.reason !== 'compiler-artifact' || !m.executable || !m.profile.test) continue;
    const list = (extra) =>
      terse(run(m.executable, [...extra, '--list', '--format', 'terse'], { env }));
    targets.push({
      pkg: packageName(m.package_id),
      key: targetKey(m.target),
      src: path.relative(root, m.target.src_path),
      all: list([]),
      ignored: list(['--ignored']),
    });
  }
  targets.push(...docTargets(env));
  for (const t of targets) {
    const ignored = new Set(t.ignored);
    t.tests = t.all.filter((n) => !ignored.has(n));
  }
  const order = (t) => `${t.pkg}\0${t.key === 'lib' ? 0 : t.key.startsWith('bin:') ? 1 : t.key === 'doc' ? 3 : 2}\0${t.key}`;
  return targets.sort((a, b) => (order(a) < order(b) ? -1 : 1));
}

/** Doc tests per crate, from `Doc-tests <crate>` headers of one combined listing. */
function docTargets(env) {
  const listing = (extra) =>
    run(
      'bash',
      [
        '-c',
        `cargo test --workspace --all-features --doc -- ${extra} --list --format terse 2>&1`,
      ],
      { env },
    );
  const byCrate = (out) => {
    const crates = new Map();
    let crate;
    for (const line of out.split('\n')) {
      const h = line.match(/^\s*Doc-tests (\S+)/);
      if (h) {
        crate = h[1].replaceAll('_', '-');
        crates.set(crate, []);
      } else if (crate && line.endsWith(': test')) {
        crates.get(crate).push(line.slice(0, -': test'.length));
      }
    }
    return crates;
  };
  const all = byCrate(listing(''));
  const ignored = byCrate(listing('--ignored'));
  return [...all].map(([pkg, names]) => ({
    pkg,
    key: 'doc',
    src: 'doc comments',
    all: names,
    ignored: ignored.get(pkg) ?? [],
  }));
}

/** The reason of `#[ignore = "…"]` on test `name` of a target whose root file is `src`. */
function ignoreReason(src, name) {
  if (src === 'doc comments') return 'an `ignore` code block of the docs, never compiled';
  const segs = name.split('::');
  const fn = segs.pop();
  const dir = path.dirname(path.join(root, src));
  const files = [];
  for (let k = segs.length; k >= 0; k--) {
    if (k === 0) files.push(path.join(root, src));
    else {
      const mod = path.join(dir, ...segs.slice(0, k));
      files.push(`${mod}.rs`, path.join(mod, 'mod.rs'));
    }
  }
  const re = new RegExp(
    `#\\[ignore(?:\\s*=\\s*"((?:[^"\\\\]|\\\\.)*)")?\\]\\s*(?:#\\[[^\\]]*\\]\\s*)*(?:pub\\s+)?(?:async\\s+)?fn\\s+${fn}\\b`,
  );
  for (const f of files) {
    if (!existsSync(f)) continue;
    const m = readFileSync(f, 'utf8').match(re);
    if (m) return m[1] ? `"${m[1]}"` : '(no reason given)';
  }
  return '(no `#[ignore]` found in its source)';
}

/** vitest's collection under `config`: Map file → test count (every mode). */
function vitestCounts(config) {
  const script = `
    import { createVitest } from 'vitest/node';
    const v = await createVitest('test', { config: ${JSON.stringify(config)}, run: false, watch: false, reporters: [] });
    const { testModules } = await v.collect();
    const out = {};
    for (const m of testModules) {
      const errors = m.errors();
      if (errors.length) { console.error(m.relativeModuleId, errors); process.exit(1); }
      out[m.relativeModuleId] = [...m.children.allTests()].length;
    }
    await v.close();
    process.stdout.write('\\n@@counts ' + JSON.stringify(out) + '\\n');
    process.exit(0);`;
  // Without the CI switches: a file that reads RUNLOG_PG_URL at load (pgUrl()) must load
  // with or without a server; its skipIf blocks are counted either way.
  const env = { ...process.env };
  delete env.RUNLOG_NO_SKIP;
  delete env.RUNLOG_REQUIRE_PG;
  const out = run('node', ['--input-type=module', '-e', script], { cwd: pkgDir, env });
  const line = out.split('\n').find((l) => l.startsWith('@@counts '));
  if (!line) throw new Error(`vitest collection under ${config} printed no counts`);
  const counts = JSON.parse(line.slice('@@counts '.length));
  return new Map(Object.entries(counts).sort(([a], [b]) => (a < b ? -1 : 1)));
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
const fmt = (n) => n.toLocaleString('en-US');

function block(targets, unit, conformance) {
  const rustTests = sum(targets.map((t) => t.tests.length));
  const rustIgnored = sum(targets.map((t) => t.ignored.length));
  const lines = [
    BEGIN,
    '',
    '## Counts (from the runners)',
    '',
    'Generated by `node scripts/test-counts.mjs` from the runners\' own listings (no test',
    'runs): `cargo test --workspace --all-features -- --list` and `-- --ignored --list` of every',
    'test target, and vitest\'s collection of `packages/world-runlog` under `vitest.config.mjs`',
    '(`npm test`) and `vitest.conformance.config.mjs` (`npm run conformance`; the same 12 tests',
    'run again on PostgreSQL by `npm run conformance:pg`). `.ci/run` fails when this block or a',
    'count marked `<!--n:…-->` elsewhere in this file differs (`--check`). Do not edit by hand;',
    'rerun the script.',
    '',
    `**Rust: ${fmt(rustTests)} tests in ${targets.length} targets, and ${rustIgnored} ignored.**`,
    '',
    '| package | target | source | tests | ignored |',
    '|---|---|---|---|---|',
  ];
  for (const t of targets) {
    if (t.key === 'doc' && t.all.length === 0) continue;
    lines.push(`| ${t.pkg} | ${t.key} | \`${t.src}\` | ${fmt(t.tests.length)} | ${t.ignored.length || ''} |`);
  }
  lines.push(`| **total** | | | **${fmt(rustTests)}** | **${rustIgnored}** |`, '');
  const ignored = targets.flatMap((t) => t.ignored.map((n) => ({ t, n })));
  if (ignored.length) {
    lines.push(
      'Ignored tests (`#[ignore]`: plain `cargo test` lists them and never runs them). The',
      'child entry points among them are not tests: their parent test starts its own binary on',
      'them with `--ignored --exact` and an environment variable, and each fails when run',
      'without it. No test is ignored for a known bug or a pending fix.',
      '',
    );
    for (const { t, n } of ignored) {
      lines.push(`- ${t.pkg} \`${t.key}\` \`${n}\`: ${ignoreReason(t.src, n)}`);
    }
    lines.push('');
  }
  const unitTotal = sum([...unit.values()]);
  const confTotal = sum([...conformance.values()]);
  lines.push(
    `**vitest (\`packages/world-runlog\`): ${fmt(unitTotal)} tests in \`npm test\`, ` +
      `${fmt(confTotal)} in \`npm run conformance\`.**`,
    'Tests in a `describe.skipIf` are counted whether or not they run on the machine (without',
    '`RUNLOG_PG_URL` the PostgreSQL ones skip; `.ci/run` has a server, and lists every test',
    'vitest did not run among the skipped).',
    '',
    '| config | file | tests |',
    '|---|---|---|',
  );
  for (const [f, n] of unit) lines.push(`| \`npm test\` | \`${f}\` | ${n} |`);
  for (const [f, n] of conformance) lines.push(`| \`npm run conformance\` | \`${f}\` | ${n} |`);
  lines.push('', END);
  return lines.join('\n');
}

/** The count a `<!--n:KEY-->` marker stands for. */
function markerCount(key, targets, unit, conformance) {
  if (key === 'vitest') return sum([...unit.values()]);
  if (key === 'conformance') return sum([...conformance.values()]);
  if (key.startsWith('vitest/')) {
    const n = unit.get(key.slice('vitest/'.length));
    if (n === undefined) throw new Error(`<!--n:${key}-->: no such vitest file`);
    return n;
  }
  let rest = key;
  const wantIgnored = rest.endsWith('+ignored');
  if (wantIgnored) rest = rest.slice(0, -'+ignored'.length);
  const [pkg, tkey, ...prefixParts] = rest.split('/');
  const prefix = prefixParts.join('/');
  const t = targets.find((x) => x.pkg === pkg && x.key === tkey);
  if (!t) throw new Error(`<!--n:${key}-->: no cargo target ${pkg}/${tkey}`);
  const names = (wantIgnored ? t.ignored : t.tests).filter((n) => n.startsWith(prefix));
  if (prefix && !t.all.some((n) => n.startsWith(prefix))) {
    throw new Error(`<!--n:${key}-->: no test of ${pkg}/${tkey} starts with ${prefix}`);
  }
  return names.length;
}

function render(text, targets, unit, conformance) {
  const b = text.indexOf(BEGIN);
  const e = text.indexOf(END);
  if (b < 0 || e < b) throw new Error(`TESTING.md has no ${BEGIN} … ${END} block`);
  const before = text.slice(0, b);
  const after = text.slice(e + END.length);
  const marks = (s) =>
    s.replace(/<!--n:([^>]+?)-->[0-9]+(?:,[0-9]{3})*/g, (_, key) => {
      return `<!--n:${key}-->${fmt(markerCount(key, targets, unit, conformance))}`;
    });
  return marks(before) + block(targets, unit, conformance) + marks(after);
}

const check = process.argv.includes('--check');
const targets = cargoTargets();
const unit = vitestCounts('vitest.config.mjs');
const conformance = vitestCounts('vitest.conformance.config.mjs');
const current = readFileSync(doc, 'utf8');
const wanted = render(current, targets, unit, conformance);
if (!check) {
  if (wanted !== current) writeFileSync(doc, wanted);
  console.log(wanted === current ? 'TESTING.md counts: unchanged' : 'TESTING.md counts: rewritten');
} else if (wanted !== current) {
  const a = current.split('\n');
  const w = wanted.split('\n');
  console.error('TESTING.md counts differ from the runners (run node scripts/test-counts.mjs):');
  for (let i = 0, shown = 0; i < Math.max(a.length, w.length) && shown < 20; i++) {
    if (a[i] !== w[i]) {
      console.error(`  line ${i + 1}\n    TESTING.md: ${a[i] ?? ''}\n    runners:    ${w[i] ?? ''}`);
      shown++;
    }
  }
  process.exit(1);
} else {
  console.log('TESTING.md counts agree with the runners');
}
