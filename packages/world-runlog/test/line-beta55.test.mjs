// The beta.55 line's surface (src/line-beta55.js) on a World built by createWorld: its
// detection from the app's @workflow/world, spec 7, slot event ids, `eventCount`'s report,
// events.createBatch, runs.getMany and runs.waitForTerminalStatus.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { BETA55_METHODS, createWorld } from '../index.js';
import { extendForBeta55 } from '../src/line-beta55.js';
import { detectLine, isSlotLineWorldVersion, LINES, lineOf, specVersionOf } from '../src/line.js';
import { BETA55_SIGNATURES } from '../src/validate.js';
import { rejection, tempDir } from './helpers.mjs';

let tmp;
const worlds = [];

/** A World extended for the line, its `@workflow/world` standing in as `minted`. */
function world(minted = 7) {
  const w = createWorld({ dataDir: `${tmp.dir}/data/runlog` });
  worlds.push(w);
  // What src/line.js's detectLine() gives for such an app (the one line detection).
  const line = { name: LINES.BETA55, source: 'app', worldVersion: '5.0.0-beta.37', specVersion: specVersionOf(LINES.BETA55, { mintedSpecVersion: () => minted }) };
  return extendForBeta55(w, { line, openWorld: w.runlog.world });
}

const slot = (n) => `evnt_${String(n).padStart(26, '0')}`;
const bytes = (s) => new TextEncoder().encode(s);

async function runningRun(w) {
  const created = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: w.specVersion,
    eventData: { deploymentId: 'dpl_test', workflowName: 'wf', input: bytes('[]') },
  });
  const runId = created.run.runId;
  await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion });
  return runId;
}

const stepCreated = (id) => ({ eventType: 'step_created', correlationId: id, eventData: { stepName: 's', input: bytes('[1]') } });

beforeEach(() => {
  tmp = tempDir();
});

afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
  tmp.cleanup();
});

describe('line detection (src/line.js)', () => {
  test('the slot-identity line is @workflow/world 5.0.0-beta.34 and later', () => {
    expect(isSlotLineWorldVersion('5.0.0-beta.37')).toBe(true);
    expect(isSlotLineWorldVersion('5.0.0-beta.34')).toBe(true);
    expect(isSlotLineWorldVersion('5.0.0')).toBe(true);
    expect(isSlotLineWorldVersion('5.0.0-beta.21')).toBe(false);
    expect(isSlotLineWorldVersion('4.5.0')).toBe(false);
    // Inside a bundle (no version), the exports decide.
    expect(lineOf({ SPEC_VERSION_SUPPORTS_SLOT_IDENTITY: 6 }, null)).toBe(LINES.BETA55);
    expect(lineOf({ SPEC_VERSION_SUPPORTS_COMPRESSION: 5 }, null)).toBe(LINES.BETA35);
    expect(lineOf({ SPEC_VERSION_CURRENT: 3 }, null)).toBe(LINES.V4);
  });

  test('spec per line: 3 on 4.x, 5 on beta.35, the minted 7 (or 6) on beta.55', () => {
    expect(specVersionOf(LINES.V4, { SPEC_VERSION_CURRENT: 3 })).toBe(3);
    expect(specVersionOf(LINES.BETA35, { SPEC_VERSION_CURRENT: 5 })).toBe(5);
    expect(specVersionOf(LINES.BETA55, { SPEC_VERSION_CURRENT: 7, mintedSpecVersion: () => 7 })).toBe(7);
    expect(specVersionOf(LINES.BETA55, { SPEC_VERSION_CURRENT: 7, mintedSpecVersion: () => 6 })).toBe(6);
    expect(specVersionOf(LINES.BETA55, { SPEC_VERSION_CURRENT: 9, mintedSpecVersion: () => 9 })).toBe(7);
  });

  test("the app's @workflow/world, resolved from its directory, decides (package.json not exported, as beta.37 ships it)", () => {
    const app = (version, worldSource) => {
      const dir = path.join(tmp.dir, `app-${version}`);
      const world = path.join(dir, 'node_modules/@workflow/world');
      const local = path.join(dir, 'node_modules/@workflow/world-local');
      mkdirSync(path.join(world, 'dist'), { recursive: true });
      mkdirSync(local, { recursive: true });
      writeFileSync(path.join(dir, 'package.json'), '{"name":"app","private":true}');
      // As 5.0.0-beta.37 ships it: package.json not exported (`./*` maps into dist/), the
      // entry point in dist/; a dist/package.json of no name must not be taken for it.
      const manifest = { name: '@workflow/world', version, type: 'module', exports: { '.': './dist/index.js', './*': './dist/*' } };
      writeFileSync(path.join(world, 'package.json'), JSON.stringify(manifest));
      writeFileSync(path.join(world, 'dist/package.json'), '{"type":"module"}');
      writeFileSync(path.join(world, 'dist/index.js'), worldSource);
      const localManifest = { name: '@workflow/world-local', version: '5.0.0-beta.46', type: 'module', exports: { '.': './index.js' } };
      writeFileSync(path.join(local, 'package.json'), JSON.stringify(localManifest));
      writeFileSync(path.join(local, 'index.js'), 'export const createWorld = () => ({ local: true });');
      return dir;
    };
    const beta37 = detectLine(
      app('5.0.0-beta.37', 'export const SPEC_VERSION_CURRENT = 7; export const SPEC_VERSION_SUPPORTS_SLOT_IDENTITY = 6; export const mintedSpecVersion = () => (process.env.WORKFLOW_SEALED_LOG === "0" ? 6 : 7); export const reenqueueActiveRuns = () => {};'),
    );
    expect(beta37).toMatchObject({ name: LINES.BETA55, source: 'app', worldVersion: '5.0.0-beta.37', worldLocalVersion: '5.0.0-beta.46', specVersion: 7 });
    expect(beta37.createLocalWorld()).toEqual({ local: true });
    const beta21 = detectLine(app('5.0.0-beta.21', 'export const SPEC_VERSION_CURRENT = 5; export const SPEC_VERSION_SUPPORTS_COMPRESSION = 5;'));
    expect(beta21).toMatchObject({ name: LINES.BETA35, source: 'app', worldVersion: '5.0.0-beta.21', specVersion: 5 });
    const v4 = detectLine(app('4.5.0', 'export const SPEC_VERSION_CURRENT = 3;'));
    expect(v4).toMatchObject({ name: LINES.V4, source: 'app', worldVersion: '4.5.0', specVersion: 3 });
    // No app: this package's own copies (the beta.35 line).
    expect(detectLine(path.join(tmp.dir, 'no-app'))).toMatchObject({ name: LINES.BETA35, source: 'package', specVersion: 5 });
  });

  test('this package run from its own directory is not on the line: spec 5, no createBatch', () => {
    const w = createWorld({ dataDir: `${tmp.dir}/data/runlog` });
    worlds.push(w);
    expect(w.specVersion).toBe(5);
    expect(w.runlog.line).toMatchObject({ name: LINES.BETA35, specVersion: 5 });
    expect(w.events.createBatch).toBeUndefined();
    expect(w.runs.getMany).toBeUndefined();
  });
});

describe('the beta.55 surface', () => {
  test('declares the spec its line mints and claims hook retention and resume dedup only', () => {
    expect(world().specVersion).toBe(7);
    expect(world(6).specVersion).toBe(6);
    expect(world().capabilities).toEqual({ hookRetention: { active: true }, hookResumeDedup: true });
  });

  test('event ids are slots, dense from 1, and events.get takes them', async () => {
    const w = world();
    const runId = await runningRun(w);
    const r = await w.events.create(runId, stepCreated('step_1'));
    expect(r.event.eventId).toBe(slot(3));
    const page = await w.events.list({ runId });
    expect(page.data.map((e) => e.eventId)).toEqual([slot(1), slot(2), slot(3)]);
    const got = await w.events.get(runId, slot(3));
    expect(got.eventType).toBe('step_created');
  });

  test('eventCount behind the log: committed at the next slot, the skipped events reported with cursor null', async () => {
    const w = world();
    const runId = await runningRun(w);
    await w.events.create(runId, stepCreated('step_a'));
    await w.events.create(runId, stepCreated('step_b'));
    const r = await w.events.create(
      runId,
      { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01') } },
      { eventCount: 2 },
    );
    expect(r.event.eventId).toBe(slot(5));
    expect(r.events.map((e) => [e.eventId, e.correlationId])).toEqual([
      [slot(3), 'step_a'],
      [slot(4), 'step_b'],
    ]);
    expect(r.cursor).toBe(null);
    expect(r.hasMore).toBe(false);
  });

  test('createBatch: request order at consecutive slots, per-item answers, whole refusals', async () => {
    const w = world();
    const runId = await runningRun(w);
    await w.events.create(runId, stepCreated('step_0'));
    const { results } = await w.events.createBatch(runId, [
      { event: stepCreated('step_1') },
      { event: { eventType: 'step_started', correlationId: 'step_1' } },
      { event: stepCreated('step_0') },
      { event: { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01') } } },
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 409, 200]);
    expect(results.map((r) => r.event?.eventId)).toEqual([slot(4), slot(5), undefined, slot(6)]);
    expect(results[1].step.status).toBe('running');
    expect(results[1].step.startedAt).toBeInstanceOf(Date);
    expect(results[2].error).toBe('EntityConflictError');
    expect(results[3].wait.waitId).toBe(`${runId}-wait_1`);
    const refused = await rejection(
      w.events.createBatch(runId, [{ event: { eventType: 'hook_created', correlationId: 'hook_1', eventData: { token: 't' } } }]),
    );
    expect(refused.status).toBe(400);
    expect((await w.events.list({ runId })).data).toHaveLength(6);
  });

  test('runs.list takes an array of statuses, as the line\'s reenqueueActiveRuns asks', async () => {
    const w = world();
    const running = await runningRun(w);
    const done = await runningRun(w);
    await w.events.create(done, { eventType: 'run_completed', eventData: { output: bytes('1') } });
    const page = await w.runs.list({ status: ['pending', 'running'], resolveData: 'none', pagination: {} });
    expect(page.data.map((r) => r.runId)).toEqual([running]);
    expect(page.hasMore).toBe(false);
  });

  test('runs.getMany answers in input order, null for a missing run', async () => {
    const w = world();
    const a = await runningRun(w);
    const b = await runningRun(w);
    const missing = 'wrun_01JH8ZQ4Y2V3V8A2D1W7N0K9XQ';
    const runs = await w.runs.getMany([b, missing, a]);
    expect(runs.map((r) => r?.runId ?? null)).toEqual([b, null, a]);
  });

  test('runs.waitForTerminalStatus returns once the run ends, and the snapshot at the timeout', async () => {
    const w = world();
    const runId = await runningRun(w);
    const t0 = Date.now();
    const early = await w.runs.waitForTerminalStatus(runId, { timeoutMs: 200 });
    expect(early.status).toBe('running');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    const waiting = w.runs.waitForTerminalStatus(runId, { timeoutMs: 10_000 });
    setTimeout(() => void w.events.create(runId, { eventType: 'run_completed', eventData: { output: bytes('1') } }), 100);
    const t1 = Date.now();
    const done = await waiting;
    expect(done.status).toBe('completed');
    expect(Date.now() - t1).toBeLessThan(5_000);
  });

  test('every method the line adds is type-checked by src/validate.js (BETA55_SIGNATURES): WorkflowWorldError 400 INVALID_INPUT naming the argument', async () => {
    const w = world();
    expect(BETA55_METHODS).toEqual({ runs: ['list', 'getMany', 'waitForTerminalStatus', 'cancelMany'], events: ['createBatch'] });
    for (const [ns, methods] of Object.entries(BETA55_METHODS)) {
      for (const m of methods) expect(BETA55_SIGNATURES[ns][m]).toBeDefined();
    }
    const runId = await runningRun(w);
    const cases = [
      [() => w.runs.getMany('wrun_x'), 'runIds'],
      [() => w.runs.getMany([runId, 7]), 'runIds[1]'],
      [() => w.runs.getMany([runId], 'none'), 'params'],
      [() => w.runs.waitForTerminalStatus(42), 'runId'],
      [() => w.runs.waitForTerminalStatus(runId, () => 1), 'params'],
      [() => w.events.createBatch(undefined, []), 'runId'],
      [() => w.events.createBatch(runId, { event: stepCreated('step_1') }), 'events'],
      [() => w.events.createBatch(runId, [{ event: stepCreated('step_1') }, 'x']), 'events[1]'],
      [() => w.events.createBatch(runId, [], 'x'), 'params'],
      [() => w.runs.list('running'), 'params'],
      [() => w.runs.list({ status: 7 }), 'params.status'],
      [() => w.runs.list({ status: ['running', 1] }), 'params.status[1]'],
      [() => w.runs.cancelMany([runId]), 'request'],
      [() => w.runs.cancelMany(undefined), 'request'],
      [() => w.runs.cancelMany({ runIds: runId }), 'request.runIds'],
    ];
    for (const [call, field] of cases) {
      const err = await rejection(call());
      expect(err, field).toMatchObject({ name: 'WorkflowWorldError', status: 400, cause: { code: 'INVALID_INPUT', field } });
    }
    expect((await w.events.list({ runId })).data).toHaveLength(2);
    expect((await w.runs.get(runId)).status).toBe('running');
  });

  test('runs.list with an array of statuses keeps a damaged run under every status it may still reach (storageError), as the one-status listing does', async () => {
    const w = world();
    const damaged = await runningRun(w);
    await w.events.create(damaged, { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 'DAMAGE_MARK', input: bytes('[1]') } });
    await w.events.create(damaged, stepCreated('step_2'));
    const done = await runningRun(w);
    await w.events.create(done, { eventType: 'run_completed', eventData: { output: bytes('1') } });
    await w.close();
    const seg = path.join(tmp.dir, 'data/runlog/runs', damaged, 'seg-00000001.log');
    const { readFileSync } = await import('node:fs');
    const buf = readFileSync(seg);
    const at = buf.indexOf('DAMAGE_MARK');
    expect(at).toBeGreaterThan(0);
    buf[at] ^= 0x20;
    writeFileSync(seg, buf);
    const w2 = world();
    const ids = async (status) => (await w2.runs.list({ status, resolveData: 'none' })).data.map((r) => r.runId).sort();
    const listed = (await w2.runs.list({ status: ['completed', 'failed'] })).data;
    expect(listed.map((r) => r.runId).sort()).toEqual([damaged, done].sort());
    expect(listed.find((r) => r.runId === damaged).storageError).toMatchObject({ code: 'CORRUPT', readableSeq: 2 });
    expect(await ids(['pending'])).toEqual([]);
    expect(await ids(['running'])).toEqual([damaged]);
    // The same as the one-status listing of the Rust World.
    expect(await ids('completed')).toEqual([damaged, done].sort());
  });
});
