// A differential test of the newest SDK line's World interface (@workflow/world
// 5.0.0-beta.37): the same calls against world-local 5.0.0-beta.46 (the line's own World,
// loaded from examples/sdk-5.0.0-beta.55/node_modules) and against runlog's World as that
// line (src/line.js's detection of that app directory, src/line-beta55.js's members), the
// results compared with run ids and times normalized. Where world-local has no such member
// (createBatch, cancelMany, createWriteSession), runlog's member is compared with what the
// line's runtime does without it on world-local: sequential creates, core's `cancelRuns`
// fallback, stateless stream writes.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { extendForBeta55 } from '../src/line-beta55.js';
import { detectLine, LINES } from '../src/line.js';
import { normalizeAcrossWorlds, rejection, tempDir } from './helpers.mjs';

const APP_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../examples/sdk-5.0.0-beta.55');
const app = createRequire(path.join(APP_DIR, 'package.json'));
const worldLocal = app('@workflow/world-local');
const workflowWorld = app('@workflow/world');
const { cancelRuns } = await import(app.resolve('@workflow/core/runtime'));
const INTERFACES_DTS = readFileSync(path.join(path.dirname(app.resolve('@workflow/world')), 'interfaces.d.ts'), 'utf8');

let tmp;
const opened = [];

/** runlog's World as the beta.55 line (the line detected from the example app's directory). */
function runlogWorld() {
  const line = detectLine(APP_DIR);
  const w = createWorld({ dataDir: path.join(tmp.dir, 'runlog') });
  opened.push(w);
  return extendForBeta55(w, { line, openWorld: w.runlog.world });
}

/** world-local 5.0.0-beta.46 (queue created, never started: storage and streams only). */
function localWorld() {
  const w = worldLocal.createWorld({ dataDir: path.join(tmp.dir, 'local'), recoverActiveRuns: false });
  opened.push(w);
  return w;
}

/** Both Worlds, `[['local', w], ['runlog', w]]`. */
const both = () => [
  ['local', localWorld()],
  ['runlog', runlogWorld()],
];

beforeEach(() => {
  tmp = tempDir('beta55-parity-');
});

afterEach(async () => {
  for (const w of opened.splice(0)) await w.close?.();
  tmp.cleanup();
});


/** The function members of `obj` two levels deep (`runs.get`, `start`, ...). */
function functionMembers(obj) {
  const out = [];
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v === 'function') out.push(k);
    else if (v !== null && typeof v === 'object' && k !== 'runlog') {
      for (const [k2, v2] of Object.entries(v)) if (typeof v2 === 'function') out.push(`${k}.${k2}`);
    }
  }
  return out.sort();
}

const bytes = (s) => new TextEncoder().encode(s);
/** A writer id as core mints one (`wrtr_` and a ULID). */
const WRITER_ID = 'wrtr_01JZ0000000000000000000000';
/** A payload as core 5.x writes a compressed one: the `gzip` format prefix, then the deflated bytes. */
const gzipPayload = (text) => new Uint8Array(Buffer.concat([Buffer.from('gzip'), gzipSync(Buffer.concat([Buffer.from('devl'), Buffer.from(text)]))]));

async function createdRun(w, input = bytes('[]')) {
  const r = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: w.specVersion,
    eventData: { deploymentId: 'dpl_parity', workflowName: 'wf', input },
  });
  return r.run.runId;
}

async function runningRun(w, input) {
  const runId = await createdRun(w, input);
  await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion });
  return runId;
}

/** The results of `script(w)` on both Worlds, normalized, as `{ local, runlog }`. */
async function onBoth(script) {
  const out = {};
  for (const [name, w] of both()) {
    const ids = new Map();
    out[name] = normalizeAcrossWorlds(await script(w), ids);
  }
  return out;
}

/** `err`'s class and status, as the runtime dispatches on them. */
const errorShape = (err) => ({ name: err?.name, status: err?.status });

describe('the interface: what world-local 5.0.0-beta.46 has, runlog has', () => {
  /**
   * World-local's function members that no `World` of @workflow/world 5.0.0-beta.37
   * declares (world-local's own `LocalWorld` extras): `clear()` deletes the data
   * directory, `events.clearCache()` drops its file cache.
   */
  const LOCAL_ONLY = ['clear', 'events.clearCache'];
  /**
   * Declared by the interface and implemented by world-local, not built on runlog: none
   * (`runs.experimentalSetAttributes` is built on an attribute log of the run's own,
   * test/experimental-set-attributes-parity.test.mjs).
   */
  const NOT_BUILT = [];

  test('every function member of world-local 5.0.0-beta.46 is on runlog\'s beta.55 World but the listed ones', () => {
    const local = functionMembers(localWorld());
    const runlog = new Set(functionMembers(runlogWorld()));
    expect(local).toEqual([
      'clear',
      'close',
      'createQueueHandler',
      'events.clearCache',
      'events.create',
      'events.get',
      'events.list',
      'events.listByCorrelationId',
      'getDeploymentId',
      'hooks.get',
      'hooks.getByToken',
      'hooks.list',
      'queue',
      'registerHandler',
      'runs.experimentalSetAttributes',
      'runs.get',
      'runs.getMany',
      'runs.list',
      'runs.waitForTerminalStatus',
      'start',
      'steps.get',
      'steps.list',
      'streams.close',
      'streams.get',
      'streams.getChunks',
      'streams.getInfo',
      'streams.list',
      'streams.write',
      'streams.writeMulti',
    ]);
    expect(local.filter((m) => !runlog.has(m))).toEqual([...LOCAL_ONLY, ...NOT_BUILT].sort());
    for (const m of LOCAL_ONLY) expect(INTERFACES_DTS).not.toMatch(new RegExp(`\\b${m.split('.').pop()}\\??\\(`));
  });

  test('runlog adds the optional members world-local lacks, each declared by the interface', () => {
    const local = new Set(functionMembers(localWorld()));
    const extra = functionMembers(runlogWorld()).filter((m) => !local.has(m));
    // The 4.x Streamer names (src/streams-v4.js) are on every line's World.
    const v4 = ['closeStream', 'getStreamChunks', 'getStreamInfo', 'listStreamsByRunId', 'readFromStream', 'writeToStream', 'writeToStreamMulti'];
    expect(extra.filter((m) => !v4.includes(m))).toEqual(['events.createBatch', 'runs.cancelMany', 'streams.createWriteSession']);
    for (const m of ['createBatch', 'cancelMany', 'createWriteSession']) expect(INTERFACES_DTS).toMatch(new RegExp(`\\b${m}\\?\\(`));
  });

  test('specVersion is the line\'s minted one on both; runlog claims what world-local claims, hook retention and resume dedup', () => {
    const local = localWorld();
    const runlog = runlogWorld();
    expect(detectLine(APP_DIR)).toMatchObject({ name: LINES.BETA55, source: 'app', worldVersion: '5.0.0-beta.37', worldLocalVersion: '5.0.0-beta.46' });
    expect(runlog.specVersion).toBe(local.specVersion);
    expect(runlog.specVersion).toBe(workflowWorld.mintedSpecVersion());
    expect(local.capabilities).toEqual({ hookRetention: { active: true }, hookResumeDedup: true });
    // Resume dedup is provided (the parity tests below), hook retention too
    // (test/hook-retention-parity.test.mjs; docs/SDK-LINES.md §9).
    expect(runlog.capabilities).toEqual({ hookRetention: { active: true }, hookResumeDedup: true });
    expect(runlog.capabilities.hookResumeDedup).toBe(local.capabilities.hookResumeDedup);
  });
});

describe('the members both have: same calls, same results', () => {
  test('a run with steps, a wait and a hook: entities, events, lists and lookups agree (a compressed payload kept byte for byte)', async () => {
    const payload = gzipPayload('{"big":"' + 'x'.repeat(2000) + '"}');
    const out = await onBoth(async (w) => {
      // Another run using the same correlation id: every lookup below names its run.
      const other = await runningRun(w);
      await w.events.create(other, { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 's', input: bytes('[0]') } });
      const runId = await runningRun(w, payload);
      const created = await w.events.create(runId, { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 's', input: payload } });
      await w.events.create(runId, { eventType: 'step_started', correlationId: 'step_1' });
      const done = await w.events.create(runId, { eventType: 'step_completed', correlationId: 'step_1', eventData: { result: payload } });
      const wait = await w.events.create(runId, { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01T00:00:00Z') } });
      const hook = await w.events.create(runId, { eventType: 'hook_created', correlationId: 'hook_1', eventData: { token: `tok-${runId}` } });
      return {
        created,
        done,
        wait,
        hook,
        run: await w.runs.get(runId),
        runNone: await w.runs.get(runId, { resolveData: 'none' }),
        many: await w.runs.getMany([runId, 'wrun_00000000000000000000000000', runId]),
        step: await w.steps.get(runId, 'step_1'),
        steps: await w.steps.list({ runId }),
        events: await w.events.list({ runId, pagination: { sortOrder: 'asc' } }),
        eventsNone: await w.events.list({ runId, pagination: { sortOrder: 'asc', limit: 2 }, resolveData: 'none' }),
        eventsNext: await w.events.list({
          runId,
          pagination: { sortOrder: 'asc', limit: 2, cursor: (await w.events.list({ runId, pagination: { sortOrder: 'asc', limit: 2 } })).cursor },
        }),
        eventsDesc: (await w.events.list({ runId, pagination: { sortOrder: 'desc', limit: 3 } })).data.map((e) => e.eventId),
        byCorrelation: await w.events.listByCorrelationId({ correlationId: 'step_1', runId, pagination: { sortOrder: 'asc' } }),
        eventGet: await w.events.get(runId, 'evnt_00000000000000000000000005'),
        hookGet: await w.hooks.get('hook_1'),
        hookByToken: await w.hooks.getByToken(`tok-${runId}`),
        hooks: await w.hooks.list({ runId }),
        listed: (await w.runs.list({ status: ['running'] })).data.map((r) => r.runId),
        listedNone: (await w.runs.list({ status: [] })).data.length,
      };
    });
    expect(out.runlog.step.output ?? out.runlog.step.result).toBeDefined();
    expect(out.runlog).toEqual(out.local);
  });

  test('run lifecycle results agree (run_created, run_started with its preload, run_completed), the line\'s event ceiling included', async () => {
    const out = await onBoth(async (w) => {
      const created = await w.events.create(null, {
        eventType: 'run_created',
        specVersion: w.specVersion,
        eventData: { deploymentId: 'dpl_parity', workflowName: 'wf', input: bytes('[1]'), executionContext: { a: 1 } },
      });
      const runId = created.run.runId;
      const started = await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion });
      const again = await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion }, { skipPreload: true });
      const completed = await w.events.create(runId, { eventType: 'run_completed', eventData: { output: bytes('"done"') } });
      // The class only: runlog's errors are of its own @workflow/errors (5.0.0-beta.11),
      // whose RunExpiredError has no `status`; the line's (5.0.0-beta.22) has 410.
      const late = (await rejection(w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion }))).name;
      // `maxEvents`: the line's `getMaxEventsPerRun()` (25000 unless WORKFLOW_MAX_EVENTS)
      // on both.
      return { created, started, again, completed, late };
    });
    expect([out.local.created, out.local.started, out.local.completed].map((r) => r.maxEvents)).toEqual([25_000, 25_000, 25_000]);
    expect(out.runlog).toEqual(out.local);
  });

  test('eventCount behind the log: both bump, commit at the next slot and report the skipped events', async () => {
    const out = await onBoth(async (w) => {
      const runId = await runningRun(w);
      await w.events.create(runId, { eventType: 'step_created', correlationId: 'step_a', eventData: { stepName: 's', input: bytes('[1]') } });
      await w.events.create(runId, { eventType: 'step_created', correlationId: 'step_b', eventData: { stepName: 's', input: bytes('[2]') } });
      const stale = await w.events.create(
        runId,
        { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01T00:00:00Z') } },
        { eventCount: 2 },
      );
      const current = await w.events.create(runId, { eventType: 'step_started', correlationId: 'step_a' }, { eventCount: 5 });
      return { stale, current };
    });
    expect(out.runlog.stale.events.map((e) => e.eventId)).toEqual(['evnt_00000000000000000000000003', 'evnt_00000000000000000000000004']);
    expect(out.runlog).toEqual(out.local);
  });

  test('waitForTerminalStatus: the snapshot at the timeout, the run once it ends, not-found as get', async () => {
    const out = await onBoth(async (w) => {
      const runId = await runningRun(w);
      const t0 = Date.now();
      const early = await w.runs.waitForTerminalStatus(runId, { timeoutMs: 150 });
      const waited = Date.now() - t0;
      const ending = w.runs.waitForTerminalStatus(runId, { timeoutMs: 10_000, resolveData: 'none' });
      await w.events.create(runId, { eventType: 'run_completed', eventData: { output: bytes('"ok"') } });
      const ended = await ending;
      const missing = errorShape(await rejection(w.runs.waitForTerminalStatus('wrun_00000000000000000000000000', { timeoutMs: 10 })));
      return { early: early.status, waitedEnough: waited >= 100, ended, missing };
    });
    expect(out.runlog.early).toBe('running');
    expect(out.runlog).toEqual(out.local);
  });

  test('occurredAt on create params is taken and not stored by either (events carry no occurredAt)', async () => {
    const out = await onBoth(async (w) => {
      const runId = await runningRun(w);
      const r = await w.events.create(
        runId,
        { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 's', input: bytes('[]') } },
        { occurredAt: new Date('2020-01-01T00:00:00Z') },
      );
      const listed = await w.events.list({ runId, pagination: { sortOrder: 'asc' } });
      return { event: r.event, occurred: listed.data.map((e) => e.occurredAt ?? null) };
    });
    expect(out.runlog.occurred).toEqual([null, null, null]);
    expect(out.runlog).toEqual(out.local);
  });
});

describe('hook resumes by (runId, resumeId): what capabilities.hookResumeDedup promises', () => {
  /** A resume's payload digest as core computes one (SHA-256, 64 hex digits). */
  const DIGEST = 'a'.repeat(64);
  const received = (w, runId, hookId, token, payload, params) =>
    w.events.create(runId, { eventType: 'hook_received', correlationId: hookId, specVersion: w.specVersion, eventData: { token, payload } }, params);

  test('retries converge on one event; another digest or hook is an EntityConflictError; the resumeId round-trips; a disposed hook takes only a recorded resume', async () => {
    const out = await onBoth(async (w) => {
      const runId = await runningRun(w);
      const token = `tok-${runId}`;
      await w.events.create(runId, { eventType: 'hook_created', correlationId: 'hook_1', eventData: { token } });
      await w.events.create(runId, { eventType: 'hook_created', correlationId: 'hook_2', eventData: { token: `${token}-2` } });
      const r1 = { resumeId: 'resm_01', resumePayloadDigest: DIGEST };
      const first = await received(w, runId, 'hook_1', token, bytes('"one"'), r1);
      const retry = await received(w, runId, 'hook_1', token, bytes('"one"'), r1);
      const noDigest = await received(w, runId, 'hook_1', token, bytes('"one"'), { resumeId: 'resm_01' });
      const otherDigest = errorShape(await rejection(received(w, runId, 'hook_1', token, bytes('"two"'), { ...r1, resumePayloadDigest: 'b'.repeat(64) })));
      const otherHook = errorShape(await rejection(received(w, runId, 'hook_2', `${token}-2`, bytes('"one"'), r1)));
      const second = await received(w, runId, 'hook_1', token, bytes('"two"'), { resumeId: 'resm_02', resumePayloadDigest: DIGEST });
      const plain = await received(w, runId, 'hook_1', token, bytes('"three"'));
      const plainAgain = await received(w, runId, 'hook_1', token, bytes('"three"'));
      await w.events.create(runId, { eventType: 'hook_disposed', correlationId: 'hook_1' });
      const redelivered = await received(w, runId, 'hook_1', token, bytes('"one"'), r1);
      const unrecorded = errorShape(await rejection(received(w, runId, 'hook_1', token, bytes('"four"'), { resumeId: 'resm_03', resumePayloadDigest: DIGEST })));
      return {
        first,
        retry,
        noDigest,
        otherDigest,
        otherHook,
        second,
        plain,
        plainAgain,
        redelivered,
        unrecorded,
        events: await w.events.list({ runId, pagination: { sortOrder: 'asc' } }),
        eventsNone: await w.events.list({ runId, pagination: { sortOrder: 'asc' }, resolveData: 'none' }),
        byCorrelation: await w.events.listByCorrelationId({ correlationId: 'hook_1', runId, pagination: { sortOrder: 'asc' } }),
        eventGet: await w.events.get(runId, first.event.eventId),
      };
    });
    expect(out.runlog.first.event.resumeId).toBe('resm_01');
    // The class only: neither World's EntityConflictError carries a `status` here.
    expect([out.runlog.otherDigest, out.runlog.otherHook, out.runlog.unrecorded]).toEqual([
      { name: 'EntityConflictError' },
      { name: 'EntityConflictError' },
      { name: 'HookNotFoundError' },
    ]);
    expect(out.runlog.retry.event).toEqual(out.runlog.first.event);
    expect(out.runlog.redelivered.event).toEqual(out.runlog.first.event);
    expect(out.runlog.events.data.filter((e) => e.eventType === 'hook_received').map((e) => e.resumeId ?? null)).toEqual(['resm_01', 'resm_02', null, null]);
    expect(out.runlog).toEqual(out.local);
  });

  test('concurrent writes of one resume commit one event and all get it back', async () => {
    const out = await onBoth(async (w) => {
      const runId = await runningRun(w);
      const token = `tok-${runId}`;
      await w.events.create(runId, { eventType: 'hook_created', correlationId: 'hook_1', eventData: { token } });
      const params = { resumeId: 'resm_race', resumePayloadDigest: DIGEST };
      const results = await Promise.all(Array.from({ length: 6 }, () => received(w, runId, 'hook_1', token, bytes('"x"'), params)));
      const events = await w.events.list({ runId, pagination: { sortOrder: 'asc' } });
      return {
        ids: [...new Set(results.map((r) => r.event.eventId))],
        received: events.data.filter((e) => e.eventType === 'hook_received'),
      };
    });
    expect(out.runlog.ids).toHaveLength(1);
    expect(out.runlog.received).toHaveLength(1);
    expect(out.runlog).toEqual(out.local);
  });
});

describe('members world-local lacks, against what the runtime does there without them', () => {
  test('createBatch lands what the same events written one by one land on world-local', async () => {
    const batch = [
      { event: { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 's', input: bytes('[1]') } }, occurredAt: new Date() },
      { event: { eventType: 'step_started', correlationId: 'step_1' } },
      { event: { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01T00:00:00Z') } } },
      // Refused on its own (no such step), as its single create is: nothing of it written.
      { event: { eventType: 'step_completed', correlationId: 'step_9', eventData: { result: bytes('1') } } },
    ];
    const ids = new Map();
    const local = localWorld();
    const localRun = await runningRun(local);
    const singles = [];
    for (const item of batch) {
      try {
        singles.push({ ok: await local.events.create(localRun, item.event) });
      } catch (err) {
        singles.push({ error: errorShape(err) });
      }
    }
    const runlog = runlogWorld();
    const runlogRun = await runningRun(runlog);
    const { results } = await runlog.events.createBatch(runlogRun, batch);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 404]);
    // Each item answers what its single create answered on world-local.
    const asSingle = results.map((r) => (r.status === 200 ? { event: r.event, step: r.step, wait: r.wait, run: r.run } : { status: r.status }));
    expect(normalizeAcrossWorlds(asSingle.slice(0, 3), ids)).toEqual(normalizeAcrossWorlds(singles.slice(0, 3).map((s) => ({ event: s.ok.event, step: s.ok.step, wait: s.ok.wait, run: s.ok.run })), new Map()));
    expect(singles[3].error.status ?? 404).toBe(results[3].status);
    // And the logs and entities they leave are the same.
    const state = async (w, runId) =>
      normalizeAcrossWorlds({ events: (await w.events.list({ runId, pagination: { sortOrder: 'asc' } })).data, steps: (await w.steps.list({ runId })).data }, new Map());
    expect(await state(runlog, runlogRun)).toEqual(await state(local, localRun));
  });

  test('cancelMany: the runs end as core\'s cancelRuns fallback leaves them on world-local, with typed outcomes', async () => {
    const setup = async (w) => {
      const running = await runningRun(w);
      const pending = await createdRun(w);
      const completed = await runningRun(w);
      await w.events.create(completed, { eventType: 'run_completed', eventData: { output: bytes('1') } });
      const cancelled = await runningRun(w);
      await w.events.create(cancelled, { eventType: 'run_cancelled' });
      return [running, pending, completed, cancelled, 'wrun_00000000000000000000000000'];
    };
    const local = localWorld();
    const localIds = await setup(local);
    const fallback = await cancelRuns(local, localIds, { cancelReason: 'bulk' });
    const runlog = runlogWorld();
    const runlogIds = await setup(runlog);
    const typed = await runlog.runs.cancelMany({ runIds: runlogIds, cancelReason: 'bulk' });

    expect(typed.results.map((r) => r.runId)).toEqual(runlogIds);
    expect(typed.results.map(({ runId, ...r }) => r)).toEqual([
      { outcome: 'cancelled' },
      { outcome: 'cancelled' },
      { outcome: 'not_cancellable', status: 'completed' },
      { outcome: 'already_cancelled' },
      { outcome: 'not_found' },
    ]);
    expect(typed.summary).toEqual({ requested: 5, cancelled: 2, alreadyCancelled: 1, notCancellable: 1, notFound: 1, failed: 0 });
    // The fallback cannot classify: what it reports is each typed outcome, coarsened.
    const coarse = { cancelled: 'cancelled', already_cancelled: 'cancelled', not_cancellable: 'failed', not_found: 'failed' };
    expect(fallback.results.map((r) => r.outcome)).toEqual(typed.results.map((r) => coarse[r.outcome]));
    // Every run is left in the same state, the reason on the new run_cancelled events.
    const states = async (w, ids) =>
      Promise.all(ids.slice(0, 4).map(async (id) => {
        const run = await w.runs.get(id, { resolveData: 'none' });
        const events = (await w.events.list({ runId: id, pagination: { sortOrder: 'asc' } })).data;
        const cancels = events.filter((e) => e.eventType === 'run_cancelled');
        return { status: run.status, reason: cancels[0]?.eventData?.cancelReason ?? null };
      }));
    expect(await states(runlog, runlogIds)).toEqual(await states(local, localIds));
    // One difference, by design: world-local's idempotent re-cancel stores a second
    // run_cancelled; runlog's writes nothing (one terminal event per run).
    const cancelCount = async (w, id) => (await w.events.list({ runId: id })).data.filter((e) => e.eventType === 'run_cancelled').length;
    expect([await cancelCount(local, localIds[3]), await cancelCount(runlog, runlogIds[3])]).toEqual([2, 1]);
  });

  test('cancelMany through core\'s cancelRuns (its fast path), and the requests the schema refuses', async () => {
    const runlog = runlogWorld();
    const a = await runningRun(runlog);
    const viaCore = await cancelRuns(runlog, [a]);
    expect(viaCore).toEqual({ summary: { requested: 1, cancelled: 1, alreadyCancelled: 0, notCancellable: 0, notFound: 0, failed: 0 }, results: [{ runId: a, outcome: 'cancelled' }] });
    for (const [request, field] of [
      [{ runIds: [] }, 'runIds'],
      [{ runIds: [a, a] }, 'runIds[1]'],
      [{ runIds: Array.from({ length: workflowWorld.BULK_CANCEL_MAX_RUN_IDS + 1 }, () => a) }, 'runIds'],
      [{ runIds: [a], cancelReason: 'x'.repeat(513) }, 'cancelReason'],
      [{ runIds: [1] }, 'request.runIds[0]'],
      [{}, 'request.runIds'],
    ]) {
      const err = await rejection(runlog.runs.cancelMany(request));
      expect(errorShape(err)).toEqual({ name: 'WorkflowWorldError', status: 400 });
      expect(err.cause?.field).toBe(field);
      // The SDK's own schema refuses each too.
      expect(workflowWorld.BulkCancelWorkflowRunsRequestSchema.safeParse(request).success).toBe(false);
    }
    expect(errorShape(await rejection(runlog.runs.cancelMany('wrun_x')))).toEqual({ name: 'WorkflowWorldError', status: 400 });
    expect((await runlog.runs.get(a)).status).toBe('cancelled');
  });

  test('a write session writes what the same groups written statelessly write on world-local', async () => {
    const groups = [[bytes('a'), 'b'], [bytes('c')], [], [bytes('d'), bytes('e'), bytes('f')]];
    const read = async (w, runId) => {
      const reader = (await w.streams.get(runId, 'out')).getReader();
      const chunks = [];
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(Buffer.from(value).toString());
      }
      return { chunks, page: normalizeAcrossWorlds(await w.streams.getChunks(runId, 'out'), new Map()), info: await w.streams.getInfo(runId, 'out'), list: await w.streams.list(runId) };
    };
    const local = localWorld();
    const localRun = await runningRun(local);
    for (const g of groups) if (g.length > 0) await local.streams.writeMulti(localRun, 'out', g);
    await local.streams.close(localRun, 'out');

    const runlog = runlogWorld();
    const runlogRun = await runningRun(runlog);
    const session = runlog.streams.createWriteSession(runlogRun, 'out', { writerId: WRITER_ID });
    let seq = 0;
    // Issued without awaiting, as core's dispatch may overlap them: applied in call order.
    const writes = groups.map((g) => {
      const p = session.write(seq, g);
      seq += g.length;
      return p;
    });
    const closing = session.close();
    await Promise.all([...writes, closing]);
    expect(await read(runlog, runlogRun)).toEqual(await read(local, localRun));
    expect((await read(runlog, runlogRun)).chunks.join('')).toBe('abcdef');
  });

  test('a write session refuses bad arguments (400) and is poisoned by a failed write', async () => {
    const runlog = runlogWorld();
    const runId = await runningRun(runlog);
    const ok = { writerId: WRITER_ID };
    for (const [args, field] of [
      [[runId, 'out', { writerId: 'wrtr_short' }], 'options.writerId'],
      [[runId, 'out', {}], 'options.writerId'],
      [[runId, 'out'], 'options'],
      [[42, 'out', ok], 'runId'],
      [[runId, null, ok], 'name'],
    ]) {
      let err;
      try {
        runlog.streams.createWriteSession(...args);
      } catch (e) {
        err = e;
      }
      expect(errorShape(err)).toEqual({ name: 'WorkflowWorldError', status: 400 });
      expect(err.cause?.field).toBe(field);
    }
    const session = runlog.streams.createWriteSession(runId, 'out', ok);
    expect((await rejection(session.write(-1, [bytes('x')]))).cause?.field).toBe('chunkSeq');
    expect((await rejection(session.write(0, [{}]))).cause?.field).toBe('chunks[0]');
    await session.write(0, [bytes('x')]);
    await session.close();
    // The stream is closed: the write fails as a stateless write would (409), and the
    // session stays failed with that error.
    const failed = await rejection(session.write(1, [bytes('y')]));
    expect(errorShape(failed)).toEqual(errorShape(await rejection(runlog.streams.write(runId, 'out', bytes('y')))));
    expect(await rejection(session.write(2, [bytes('z')]))).toBe(failed);
    expect(await rejection(session.close())).toBe(failed);
    expect((await runlog.streams.getChunks(runId, 'out')).data.map((c) => Buffer.from(c.data).toString())).toEqual(['x']);
  });

  test('occurredAt of createBatch items and create params: a bad one is refused (400), nothing written', async () => {
    const runlog = runlogWorld();
    const runId = await runningRun(runlog);
    const item = { event: { eventType: 'wait_created', correlationId: 'wait_1', eventData: { resumeAt: new Date('2030-01-01T00:00:00Z') } } };
    const bad = await rejection(runlog.events.createBatch(runId, [item, { ...item, occurredAt: 'not a date' }]));
    expect(errorShape(bad)).toEqual({ name: 'WorkflowWorldError', status: 400 });
    expect(bad.cause?.field).toBe('events[1].occurredAt');
    const bad2 = await rejection(runlog.events.create(runId, item.event, { occurredAt: 5 }));
    expect(bad2.cause?.field).toBe('params.occurredAt');
    expect((await runlog.events.list({ runId })).data).toHaveLength(2);
    const { results } = await runlog.events.createBatch(runId, [{ ...item, occurredAt: '2020-01-01T00:00:00Z' }]);
    expect(results[0].status).toBe(200);
    expect(results[0].event.occurredAt).toBeUndefined();
  });
});
