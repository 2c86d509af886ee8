// The README's compatibility table (issue 19): scripts/ci-results.mjs records what CI ran,
// scripts/compat-table.mjs renders it into packages/world-runlog/README.md between its
// markers and --check fails naming each cell that differs from what the results give, and
// each cell CI should have run and has no result for; scripts/ci-results-vitest.mjs records a
// vitest run's pass count.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { FEATURES, readResults, record, validate } from '../../../scripts/ci-results.mjs';
import { BEGIN, check, END, missing, parseTable, renderRegion, renderTable, replaceRegion } from '../../../scripts/compat-table.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..', '..');
const SCRIPT = path.join(repo, 'scripts', 'compat-table.mjs');
const RESTART_KNOWN = "known failure: world-local's start() throws where the bundler inlined it";

/** One passing result for every cell CI runs, then the fixture's own: what a full run records. */
function fullRun() {
  const out = [];
  for (const f of FEATURES) {
    for (const line of f.lines) for (const world of f.worlds) out.push({ source: 'fixture', line, world, feature: f.label, ok: true });
  }
  const conformance = (r) => r.feature === 'SDK conformance suite (passed/tests)';
  for (const r of out.filter(conformance)) Object.assign(r, r.line === '5.0.0-beta.35' ? { pass: 12, tests: 12 } : { pass: 19, tests: 19 });
  out.push(
    // The local World's restart, dev passing and prod failing as run.mjs knows it does.
    { source: 'examples/run.mjs', line: '4.8.9', world: 'local', feature: 'restart mid-sleep', mode: 'dev', ok: true },
    { source: 'examples/run.mjs', line: '4.8.9', world: 'local', feature: 'restart mid-sleep', mode: 'prod', ok: false, detail: RESTART_KNOWN },
    { source: 'storm.mjs', line: '5.0.0-beta.55', world: 'local', feature: 'storm: 0 runs with two terminal events', ok: false, detail: '27 of 30 runs with extra terminal events' },
    { source: 'run.mjs', line: '5.0.0-beta.55', world: 'local', feature: 'SDK conformance suite (passed/tests)', ok: true, pass: 19, tests: 19 },
  );
  return out;
}

const rowOf = (results, label) => parseTable(renderTable(results)).rows.get(label);
const README = `# x\n\nbefore\n\n${BEGIN}\nold table\n${END}\n\nafter: other sections\n`;

let tmp;
beforeEach(() => {
  tmp = mkdtempSync(path.join(tmpdir(), 'compat-table-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('renderTable', () => {
  test('a passing cell is ✓, a counted one ✓ n/m, and a line CI does not run it on is –', () => {
    const rows = parseTable(renderTable(fullRun())).rows;
    expect(rows.get('steps+sleep+hook+stream+retry+FatalError')).toEqual(['✓', '✓', '✓']);
    expect(rows.get('SDK conformance suite (passed/tests)')).toEqual(['–', '✓ 12/12', '✓ 19/19']);
    expect(rows.get('Next.js (next dev; next build + next start)')).toEqual(['–', '–', '✓']);
    expect(rows.get('PostgreSQL: SDK conformance suite')).toEqual(['–', '✓', '–']);
    expect([...rows.keys()]).toEqual(FEATURES.map((f) => f.label));
  });

  test("the local World's result is noted where it differs, with the failing mode and why", () => {
    const results = fullRun();
    expect(rowOf(results, 'restart mid-sleep')[0]).toBe(`✓; world-local: ✗ (prod: ${RESTART_KNOWN})`);
    expect(rowOf(results, 'storm: 0 runs with two terminal events')[2]).toBe('✓; world-local: ✗ (27 of 30 runs with extra terminal events)');
    // The same count on both Worlds: nothing noted.
    expect(rowOf(results, 'SDK conformance suite (passed/tests)')[2]).toBe('✓ 19/19');
  });

  test('a failed runlog result is ✗ with its mode, install and detail; a cell without results is not run', () => {
    const results = fullRun().filter((r) => !(r.feature === 'tarball install' && r.line === '4.8.9'));
    results.push({ source: 'x', line: '5.0.0-beta.35', world: 'runlog', feature: 'dev server', mode: 'dev', install: 'tarball', ok: false, detail: 'a | b' });
    const dev = rowOf(results, 'dev server');
    // runlog failed where world-local passed: the local result is noted.
    expect(dev[1]).toBe('✗ (dev tarball: a \\| b); world-local: ✓');
    expect(rowOf(results, 'tarball install')[0]).toBe('not run');
  });
});

describe('--check', () => {
  test('passes on the table it wrote, and names each cell that differs from the results', () => {
    const results = fullRun();
    const readme = replaceRegion(README, renderRegion(results, 'the fixture'));
    expect(readme.startsWith('# x\n\nbefore\n\n')).toBe(true);
    expect(readme.endsWith(`${END}\n\nafter: other sections\n`)).toBe(true);
    expect(check(readme, results)).toEqual({ ok: true, problems: [] });

    const worse = results.map((r) => (r.feature === 'workflow web (Chromium)' && r.line === '4.8.9' && r.world === 'runlog' ? { ...r, ok: false, detail: 'webRunPage' } : r));
    expect(check(readme, worse)).toEqual({
      ok: false,
      problems: ['"workflow web (Chromium)" × 4.8.9: README says "✓", the results give "✗ (webRunPage); world-local: ✓"'],
    });
  });

  test('a step CI did not run fails it even where the README was generated without it', () => {
    const results = fullRun().filter((r) => !(r.feature === 'runlog verify clean' && r.line === '5.0.0-beta.55'));
    const readme = replaceRegion(README, renderRegion(results, 'the fixture'));
    expect(missing(results)).toEqual(['runlog verify clean × 5.0.0-beta.55 × runlog']);
    expect(check(readme, results).problems).toEqual(['not run by CI (no result): runlog verify clean × 5.0.0-beta.55 × runlog']);
  });

  test('the CLI writes between the markers only, then --check exits 0, and 1 naming the cell after a result changes', () => {
    const file = path.join(tmp, 'results.jsonl');
    const readme = path.join(tmp, 'README.md');
    const results = fullRun();
    writeFileSync(file, results.map((r) => JSON.stringify(r)).join('\n'));
    writeFileSync(readme, README);
    const cli = (...args) => spawnSync(process.execPath, [SCRIPT, '--results', file, '--readme', readme, ...args], { encoding: 'utf8' });
    expect(cli('--from', 'the fixture').status).toBe(0);
    const written = readFileSync(readme, 'utf8');
    expect(written).toMatch(/^Generated by `node scripts\/compat-table\.mjs` on \d{4}-\d\d-\d\d \d\d:\d\d UTC from the fixture$/m);
    expect(written.endsWith(`${END}\n\nafter: other sections\n`)).toBe(true);
    expect(cli('--check').status).toBe(0);

    results.find((r) => r.feature === 'storm: dense slot ids' && r.world === 'runlog').ok = false;
    writeFileSync(file, results.map((r) => JSON.stringify(r)).join('\n'));
    const r = cli('--check');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('"storm: dense slot ids" × 5.0.0-beta.55: README says "✓", the results give "✗ (failed); world-local: ✓"');
  });

  test('a README without the markers, and a malformed results line, exit 2 naming what is wrong', () => {
    const file = path.join(tmp, 'results.jsonl');
    const readme = path.join(tmp, 'README.md');
    writeFileSync(file, `${JSON.stringify(fullRun()[0])}\n`);
    writeFileSync(readme, '# no markers\n');
    const cli = () => spawnSync(process.execPath, [SCRIPT, '--check', '--results', file, '--readme', readme], { encoding: 'utf8' });
    let r = cli();
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('ERR_COMPAT_MARKERS');
    writeFileSync(file, `${JSON.stringify(fullRun()[0])}\n{"source":"x","line":"4.8.9","world":"runlog","feature":"teleport","ok":true}\n`);
    r = cli();
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(':2: ci result: feature "teleport" is not one of FEATURES');
  });

  test("the package README has one marker region, and its table has every feature's row", () => {
    const readme = readFileSync(path.join(here, '..', 'README.md'), 'utf8');
    const region = readme.slice(readme.indexOf(BEGIN), readme.indexOf(END));
    expect(readme.split(BEGIN).length).toBe(2);
    expect([...parseTable(region).rows.keys()]).toEqual(FEATURES.map((f) => f.label));
  });
});

describe('record', () => {
  test('appends one validated line under RUNLOG_CI_RESULTS, nothing without it', () => {
    const r = { source: 'examples/run.mjs', line: '4.8.9', world: 'runlog', feature: 'dev server', mode: 'dev', install: 'tarball', ok: true };
    expect(record(r, {})).toBe(false);
    expect(record(r, { RUNLOG_CI_RESULTS: tmp })).toBe(true);
    expect(record({ ...r, ok: false, detail: 'why' }, { RUNLOG_CI_RESULTS: tmp })).toBe(true);
    expect(readResults(path.join(tmp, 'results.jsonl'))).toEqual([r, { ...r, ok: false, detail: 'why' }]);
  });

  test.each([
    [{ line: '4.9.0' }, 'line "4.9.0"'],
    [{ world: 'vercel' }, 'world "vercel"'],
    [{ feature: 'dev' }, 'feature "dev"'],
    [{ mode: 'test' }, 'mode "test"'],
    [{ ok: 'yes' }, 'ok "yes" is not a boolean'],
    [{ pass: -1, tests: 2 }, 'pass/tests -1/2'],
  ])('a bad result %j throws ERR_CI_RESULT naming the field', (change, message) => {
    const r = { source: 's', line: '4.8.9', world: 'runlog', feature: 'dev server', ok: true, ...change };
    expect(() => validate(r)).toThrow(expect.objectContaining({ code: 'ERR_CI_RESULT', message: expect.stringContaining(message) }));
  });

  test('the CLI form records the JSON it is given and exits 1 on a bad one', () => {
    const env = { ...process.env, RUNLOG_CI_RESULTS: tmp };
    const cli = (json) => spawnSync(process.execPath, [path.join(repo, 'scripts', 'ci-results.mjs'), 'record', json], { encoding: 'utf8', env });
    const r = { source: '.ci/examples.sh', line: '5.0.0-beta.55', world: 'runlog', install: 'directory', ok: true, feature: 'runlog verify clean' };
    expect(cli(JSON.stringify(r)).status).toBe(0);
    const bad = cli('{"source":"x"}');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('ci result: line undefined');
    expect(readResults(path.join(tmp, 'results.jsonl'))).toEqual([r]);
  });

  test('the vitest reporter records the pass count of a run, prints nothing, and marks a failed run not ok', () => {
    const fixture = path.join(here, 'fixtures', 'ci-results-vitest');
    const as = { source: '.ci/node.sh', line: '5.0.0-beta.35', world: 'runlog', feature: 'SDK conformance suite (passed/tests)' };
    const vitest = path.join(here, '..', 'node_modules', 'vitest', 'vitest.mjs');
    const run = spawnSync(
      process.execPath,
      [vitest, 'run', '--root', fixture, '--config', path.join(fixture, 'vitest.config.mjs'), `--reporter=${path.join(repo, 'scripts', 'ci-results-vitest.mjs')}`],
      { encoding: 'utf8', env: { ...process.env, RUNLOG_CI_RESULTS: tmp, RUNLOG_CI_RECORD_AS: JSON.stringify(as) } },
    );
    expect(run.status).toBe(1);
    expect(run.stdout.trim()).toBe('');
    expect(readResults(path.join(tmp, 'results.jsonl'))).toEqual([{ ...as, ok: false, pass: 2, tests: 3, detail: 'run failed; 2 passed, 1 failed' }]);
  }, 60_000);
});
