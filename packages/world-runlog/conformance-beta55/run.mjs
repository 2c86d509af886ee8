#!/usr/bin/env node
// Runs the suite (world-conformance.test.mjs) on the line's own local World, then on the runlog World:
//
//   node run.mjs [local] [runlog] [--no-install] [--no-build]
//
// Install: `npm install --no-save` (this directory's package-lock.json, left as it is: workflow 5.0.0-beta.55, nitro
// 3.0.260610-beta). Build: `nitro build` once, with the line's own builder (`workflow/nitro`);
// on this line the runtime loads the World at run time from WORKFLOW_TARGET_WORLD, so one
// build serves both Worlds. runlog: packages/world-runlog installed into this app as a user
// installs it (`npm install --no-save <package dir>`), WORKFLOW_TARGET_WORLD=world-runlog,
// no RUNLOG_NODE_ADDON; after its pass `runlog verify` must be clean on its data directory
// (when target/release/runlog is built). Prints one pass count per World; exits 1 if any
// test failed (the reference World's pass is run a second time when its first fails, never
// runlog's: see below).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { LINES, record } from '../../../scripts/ci-results.mjs';
import { appDir } from './lib-server.mjs';

const repo = path.resolve(appDir, '..', '..', '..');
const worldPackage = path.resolve(appDir, '..');
const runlogBin = path.join(repo, 'target', 'release', 'runlog');
const args = process.argv.slice(2);
const worlds = args.filter((a) => !a.startsWith('--'));
for (const w of worlds) if (!['local', 'runlog'].includes(w)) throw new Error(`unknown world ${w} (local | runlog)`);
if (worlds.length === 0) worlds.push('local', 'runlog');
mkdirSync(path.join(appDir, '.logs'), { recursive: true });

function sh(cmd, cmdArgs, env = process.env) {
  const t0 = Date.now();
  const r = spawnSync(cmd, cmdArgs, { cwd: appDir, env, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`${cmd} ${cmdArgs.join(' ')} exited ${r.status}:\n${tail}`);
  }
  console.log(`[conformance-beta55] ${cmd} ${cmdArgs.join(' ')}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return r.stdout;
}

const buildEnv = { ...process.env };
delete buildEnv.WORKFLOW_TARGET_WORLD;
delete buildEnv.RUNLOG_NODE_ADDON;
if (!args.includes('--no-install')) sh('npm', ['install', '--no-audit', '--no-fund', '--no-save'], buildEnv);
if (!args.includes('--no-build') || !existsSync(path.join(appDir, '.output', 'server', 'index.mjs'))) {
  rmSync(path.join(appDir, '.output'), { recursive: true, force: true });
  sh('npx', ['nitro', 'build'], buildEnv);
}

// The suite's tests behind rows of the compatibility table (scripts/ci-results.mjs): what the
// spec ≥ 6 line adds (and the capabilities it declares), by the start of the test's name.
const SLOT_TESTS = [
  ['slot ids from seq (8 concurrent runs)', 'eight runs started at once'],
  ['eventCount bump-and-report, sinceCursor delta', 'eventCount: a stale write'],
  ["createBatch (a suspension's events together)", 'a suspension holding two waits'],
  ['spec 7, sealed log', 'the World declares spec 7'],
  ['hook retention (experimental_minRetention)', 'a hook kept by experimental_minRetention'],
];

/** One World's pass as results for the compatibility table: the pass count, then SLOT_TESTS. */
function recordResult(r, out) {
  const base = { source: 'packages/world-runlog/conformance-beta55/run.mjs', line: LINES.at(-1), world: r.world };
  const passed = r.exit === 0 && r.fail === 0 && r.pass === r.tests && r.tests > 0 && (r.verify ?? 'clean') === 'clean';
  const counted = Number.isInteger(r.pass) && Number.isInteger(r.tests) ? { pass: r.pass, tests: r.tests } : {};
  const why = `exit ${r.exit}, ${r.fail} failed${r.verify && r.verify !== 'clean' ? `, runlog verify ${r.verify}` : ''}`;
  record({ ...base, feature: 'SDK conformance suite (passed/tests)', ok: passed, ...counted, detail: passed ? 'conformance-beta55' : why });
  // The spec reporter's line per test: "✔ <name> (<ms>ms)" or "✖ <name> (<ms>ms)".
  const outcome = (start) => out.match(new RegExp(`^\\s*([✔✖]) ${start}`, 'm'))?.[1];
  for (const [feature, start] of SLOT_TESTS) {
    const mark = outcome(start);
    record({ ...base, feature, ok: mark === '✔', ...(mark !== '✔' && { detail: mark ? 'its test failed' : 'its test did not report' }) });
  }
}

const results = [];
for (const world of worlds) {
  if (world === 'runlog' && !args.includes('--no-install')) {
    sh('npm', ['install', '--no-audit', '--no-fund', '--no-save', worldPackage], buildEnv);
  }
  const dataDir = mkdtempSync(path.join(tmpdir(), `conformance-beta55-${world}-`));
  const env = { ...buildEnv, CONFORMANCE_WORLD: world, CONFORMANCE_DATA_DIR: dataDir };
  const t0 = Date.now();
  const pass = () => {
    const r = spawnSync('node', ['--test-reporter=spec', 'world-conformance.test.mjs'], { cwd: appDir, env, encoding: 'utf8', maxBuffer: 64 << 20 });
    const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    process.stdout.write(out);
    const num = (key) => Number(out.match(new RegExp(`ℹ ${key} (\\d+)`))?.[1] ?? NaN);
    return { out, result: { world, tests: num('tests'), pass: num('pass'), fail: num('fail'), exit: r.status } };
  };
  let { out, result } = pass();
  // The reference pass checks the suite, not runlog: the SDK's local World times its queue
  // with timers, and under a loaded machine it has failed a test that asserts exact flow
  // invocations (once in CI, with the spec 7 test, which counts the runs before it). So a
  // failed reference pass is run once more on a fresh data directory, its first failures
  // printed; runlog's pass is never retried.
  if (world === 'local' && !(result.exit === 0 && result.fail === 0 && result.tests > 0)) {
    const failed = [...new Set([...out.matchAll(/^\s*✖ (.*) \(\d/gm)].map((m) => m[1]))];
    console.log(`[conformance-beta55] local (the reference): ${result.fail} failed (${failed.join('; ')}); running its pass once more`);
    rmSync(dataDir, { recursive: true, force: true });
    mkdirSync(dataDir);
    ({ out, result } = pass());
    result.retried = `after ${failed.length} failed: ${failed.join('; ')}`;
  }
  result.seconds = Math.round((Date.now() - t0) / 1000);
  if (world === 'runlog' && existsSync(runlogBin)) {
    const v = spawnSync(runlogBin, ['--store', path.join(dataDir, 'runlog'), 'verify'], { encoding: 'utf8' });
    result.verify = v.status === 0 ? 'clean' : `exit ${v.status}: ${(v.stdout + v.stderr).trim().split('\n').slice(-5).join(' / ')}`;
  }
  rmSync(dataDir, { recursive: true, force: true });
  results.push(result);
  recordResult(result, out);
}
let ok = true;
for (const r of results) {
  const passed = r.exit === 0 && r.fail === 0 && r.pass === r.tests && r.tests > 0 && (r.verify ?? 'clean') === 'clean';
  ok &&= passed;
  console.log(
    `[conformance-beta55] ${r.world}: ${r.pass}/${r.tests} passed${r.verify ? `, runlog verify ${r.verify}` : ''}${r.retried ? ` on a second pass (${r.retried})` : ''} (${r.seconds} s)${passed ? '' : ' FAILED'}`,
  );
}
process.exit(ok ? 0 : 1);
