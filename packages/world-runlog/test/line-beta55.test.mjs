// The beta.55 line's surface (src/line-beta55.js) on a World built by createWorld: its
// detection from the app's @workflow/world, spec 7, slot event ids, `eventCount`'s report,
// events.createBatch, runs.getMany and runs.waitForTerminalStatus.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { detectBeta55Line, extendForBeta55, isBeta55WorldVersion } from '../src/line-beta55.js';
import { rejection, tempDir } from './helpers.mjs';

let tmp;
const worlds = [];

/** A World extended for the line, its `@workflow/world` standing in as `minted`. */
function world(minted = 7) {
  const w = createWorld({ dataDir: `${tmp.dir}/data/runlog` });
  worlds.push(w);
  const line = { version: '5.0.0-beta.37', require: () => ({ mintedSpecVersion: () => minted }) };
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

describe('line detection', () => {
  test('the slot-identity line is @workflow/world 5.0.0-beta.34 and later', () => {
    expect(isBeta55WorldVersion('5.0.0-beta.37')).toBe(true);
    expect(isBeta55WorldVersion('5.0.0-beta.34')).toBe(true);
    expect(isBeta55WorldVersion('5.0.0-beta.21')).toBe(false);
    expect(isBeta55WorldVersion('4.5.0')).toBe(false);
  });

  test("the app's @workflow/world, resolved from its directory, decides", () => {
    const app = (version) => {
      const dir = path.join(tmp.dir, `app-${version}`);
      mkdirSync(path.join(dir, 'node_modules/@workflow/world'), { recursive: true });
      writeFileSync(path.join(dir, 'package.json'), '{"name":"app","private":true}');
      // As 5.0.0-beta.37 ships it: package.json not exported, the entry point in dist/.
      const manifest = { name: '@workflow/world', version, type: 'module', exports: { '.': './dist/index.js', './*': './dist/*' } };
      writeFileSync(path.join(dir, 'node_modules/@workflow/world/package.json'), JSON.stringify(manifest));
      mkdirSync(path.join(dir, 'node_modules/@workflow/world/dist'));
      writeFileSync(path.join(dir, 'node_modules/@workflow/world/dist/index.js'), 'export {};');
      return dir;
    };
    expect(detectBeta55Line(app('5.0.0-beta.37'))?.version).toBe('5.0.0-beta.37');
    expect(detectBeta55Line(app('5.0.0-beta.21'))).toBe(null);
    expect(detectBeta55Line(path.join(tmp.dir, 'no-app'))).toBe(null);
  });

  test('this package run from its own directory is not on the line: spec 5, no createBatch', () => {
    const w = createWorld({ dataDir: `${tmp.dir}/data/runlog` });
    worlds.push(w);
    expect(w.specVersion).toBe(5);
    expect(w.events.createBatch).toBeUndefined();
  });
});

describe('the beta.55 surface', () => {
  test('declares the spec its line mints and claims no capability', () => {
    expect(world().specVersion).toBe(7);
    expect(world(6).specVersion).toBe(6);
    expect(world().capabilities).toEqual({});
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
});
