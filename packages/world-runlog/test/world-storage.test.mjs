// The World's storage and streams from JavaScript, on real files: events.create through
// the Rust World layer, entities and events read back with Uint8Array payloads byte for
// byte and Date fields, the SDK's error classes, streams (write, writeMulti, close, get from
// an index or from the end, getChunks, getInfo, list, a live reader), start() re-enqueuing
// active runs, and bad input — invalid run ids, oversized payloads, a closed World, a
// corrupt store — each a rejected promise with a code.
//
// Backend-neutral: with RUNLOG_TEST_BACKEND=postgres (and RUNLOG_PG_URL) every World here is
// on PostgreSQL, a fresh schema per test (`.ci/node-pg.sh`), but the corrupt-file test.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';

import {
  EntityConflictError,
  HookNotFoundError,
  RunExpiredError,
  TooEarlyError,
  WorkflowRunNotFoundError,
  WorkflowWorldError,
} from '@workflow/errors';
import { describe, expect, test } from 'vitest';

import { createWorld, Store } from '../index.js';
import { threadPoolStats } from '../store.js';
import { fromEventPage, fromJson, SHAPE } from '../src/storage.js';
import { rejection, storeTarget, testBackend } from './helpers.mjs';
import { worldsPerTest } from './worlds-per-test.mjs';

const t = worldsPerTest((dir, options) => {
  const target = options?.dataDir ? {} : storeTarget(dir);
  return createWorld({ ...target, recoverActiveRuns: false, ...options });
});
const world = (options) => t.world(options);

const allBytes = new Uint8Array(256).map((_, i) => i);

async function createRun(w, extra = {}) {
  const { run, event } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: allBytes, ...extra },
  });
  expect(event.eventType).toBe('run_created');
  return run;
}

async function text(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(Buffer.from(c).toString());
  return chunks;
}

describe('events.create and reads', () => {
  test('a run, a lazy step and its result: entities, events, bytes exact, dates', async () => {
    const w = world();
    const run = await createRun(w);
    expect(run.runId).toMatch(/^wrun_[0-9A-Z]{26}$/);
    expect(run.status).toBe('pending');
    expect(run.createdAt).toBeInstanceOf(Date);
    expect(run.input).toEqual(allBytes);

    const started = await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    expect(started.run.status).toBe('running');
    expect(started.events.map((e) => e.eventType)).toEqual(['run_created', 'run_started']);

    const nul = new TextEncoder().encode('null byte \0 end');
    const lazy = await w.events.create(run.runId, {
      eventType: 'step_started',
      correlationId: 'step_1',
      specVersion: 5,
      eventData: { stepName: 'step//./t//add', input: nul },
    });
    expect(lazy.stepCreated).toBe(true);
    expect(lazy.step).toMatchObject({ stepId: 'step_1', status: 'running', attempt: 1 });
    const done = await w.events.create(run.runId, {
      eventType: 'step_completed',
      correlationId: 'step_1',
      specVersion: 5,
      eventData: { result: nul },
    });
    expect(done.step.output).toEqual(nul);
    expect(done.step.completedAt).toBeInstanceOf(Date);

    const step = await w.steps.get(run.runId, 'step_1');
    expect(step.input).toEqual(nul);
    expect((await w.steps.list({ runId: run.runId })).data.map((s) => s.stepId)).toEqual(['step_1']);

    const events = await w.events.list({ runId: run.runId, pagination: { sortOrder: 'asc' } });
    expect(events.data.map((e) => e.eventType)).toEqual([
      'run_created',
      'run_started',
      'step_created',
      'step_started',
      'step_completed',
    ]);
    expect(events.hasMore).toBe(false);
    expect(events.data[4].eventData.result).toEqual(nul);
    const one = await w.events.get(run.runId, events.data[4].eventId);
    expect(one.eventData.result).toEqual(nul);
    const none = await w.events.get(run.runId, events.data[4].eventId, { resolveData: 'none' });
    expect(none.eventData).toBeUndefined();
    const byCorr = await w.events.listByCorrelationId({ correlationId: 'step_1' });
    expect(byCorr.data.length).toBe(3);

    // Paging: two at a time, the cursor always advances, all five seen once.
    const seen = [];
    let cursor;
    for (;;) {
      const page = await w.events.list({ runId: run.runId, pagination: { limit: 2, cursor } });
      seen.push(...page.data.map((e) => e.eventId));
      if (!page.hasMore) break;
      cursor = page.cursor;
    }
    expect(new Set(seen).size).toBe(5);

    const output = new Uint8Array([0, 255, 0, 1]);
    const completed = await w.events.create(run.runId, { eventType: 'run_completed', specVersion: 5, eventData: { output } });
    expect(completed.run.status).toBe('completed');
    const got = await w.runs.get(run.runId);
    expect(got.output).toEqual(output);
    expect((await w.runs.get(run.runId, { resolveData: 'none' })).output).toBeUndefined();
    expect((await w.runs.list({ status: 'completed' })).data.map((r) => r.runId)).toEqual([run.runId]);
    // The SDK's CLI (`workflow inspect runs`) asks for the first page with cursor ''.
    const cli = await w.runs.list({ resolveData: 'none', pagination: { sortOrder: 'desc', cursor: '', limit: 20 } });
    expect(cli.data.map((r) => r.runId)).toEqual([run.runId]);

    // A second terminal event: the SDK's conflict class; nothing written.
    const again = await rejection(w.events.create(run.runId, { eventType: 'run_failed', specVersion: 5, eventData: { error: 'x' } }));
    expect(EntityConflictError.is(again)).toBe(true);
    expect(again.cause).toMatchObject({ code: 'CONFLICT', className: 'EntityConflictError', status: 409 });
    const gone = await rejection(w.events.create(run.runId, { eventType: 'step_started', correlationId: 'step_1', specVersion: 5 }));
    expect(RunExpiredError.is(gone) || EntityConflictError.is(gone)).toBe(true);
    expect((await w.events.list({ runId: run.runId })).data.length).toBe(6);
  });

  test('not found, too early with retryAfter, hooks by token', async () => {
    const w = world();
    const missing = await rejection(w.runs.get('wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV'));
    expect(WorkflowRunNotFoundError.is(missing)).toBe(true);
    expect(missing.cause).toMatchObject({ code: 'NOT_FOUND', status: 404 });

    const run = await createRun(w);
    await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    await w.events.create(run.runId, {
      eventType: 'step_started',
      correlationId: 's',
      specVersion: 5,
      eventData: { stepName: 'step//x', input: allBytes },
    });
    await w.events.create(run.runId, {
      eventType: 'step_retrying',
      correlationId: 's',
      specVersion: 5,
      eventData: { error: 'later', retryAfter: new Date(Date.now() + 30_000) },
    });
    const early = await rejection(w.events.create(run.runId, { eventType: 'step_started', correlationId: 's', specVersion: 5 }));
    expect(TooEarlyError.is(early)).toBe(true);
    expect(early.retryAfter).toBeGreaterThanOrEqual(29);
    expect(early.cause).toMatchObject({ code: 'TOO_EARLY', status: 425 });
    expect((await w.steps.get(run.runId, 's')).retryAfter).toBeInstanceOf(Date);

    const created = await w.events.create(run.runId, {
      eventType: 'hook_created',
      correlationId: 'hook_1',
      specVersion: 5,
      eventData: { token: 'tok-1', metadata: allBytes },
    });
    expect(created.hook.token).toBe('tok-1');
    expect((await w.hooks.getByToken('tok-1')).metadata).toEqual(allBytes);
    expect((await w.hooks.get('hook_1')).runId).toBe(run.runId);
    expect((await w.hooks.list({ runId: run.runId })).data.length).toBe(1);
    await w.events.create(run.runId, { eventType: 'hook_disposed', correlationId: 'hook_1', specVersion: 5 });
    expect(HookNotFoundError.is(await rejection(w.hooks.getByToken('tok-1')))).toBe(true);
  });
});

describe('event pages', () => {
  test('events.list revives binary values and dates exactly as a generic walk of the same events does', async () => {
    const w = world();
    const run = await createRun(w);
    await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    await w.events.create(run.runId, {
      eventType: 'step_started',
      correlationId: 's',
      specVersion: 5,
      eventData: { stepName: 'step//x', input: [allBytes, { deep: new Uint8Array([1, 2]), when: '2026-01-01T00:00:00.000Z' }] },
    });
    await w.events.create(run.runId, {
      eventType: 'step_retrying',
      correlationId: 's',
      specVersion: 5,
      eventData: { error: { message: 'later', resumeAt: 'not a date' }, retryAfter: new Date(Date.now() + 30_000) },
    });
    await w.events.create(run.runId, {
      eventType: 'wait_created',
      correlationId: 'wait_1',
      specVersion: 5,
      eventData: { resumeAt: new Date(Date.UTC(2030, 0, 1)) },
    });
    const page = await w.events.list({ runId: run.runId, pagination: { limit: 100 } });
    expect(page.data.map((e) => e.eventType)).toEqual([
      'run_created',
      'run_started',
      'step_created', // the lazy start's
      'step_started',
      'step_retrying',
      'wait_created',
    ]);
    // Each event as events.get returns it (the generic reviver of every other read).
    for (const e of page.data) expect(e).toEqual(await w.events.get(run.runId, e.eventId));
    const [created, , lazy, started, retrying, wait] = page.data;
    expect(created.createdAt).toBeInstanceOf(Date);
    expect(created.eventData.input).toEqual(allBytes);
    // A plain Uint8Array owning its own memory, as world-local's reviver makes (a consumer
    // may transfer its buffer).
    expect(created.eventData.input.constructor).toBe(Uint8Array);
    expect([created.eventData.input.byteOffset, created.eventData.input.buffer.byteLength]).toEqual([0, 256]);
    expect(lazy.eventData.input[0]).toBeInstanceOf(Uint8Array);
    expect(lazy.eventData.input[1].deep).toEqual(new Uint8Array([1, 2]));
    expect(lazy.eventData.input[1].when).toBe('2026-01-01T00:00:00.000Z');
    expect(retrying.eventData.retryAfter).toBeInstanceOf(Date);
    expect(retrying.eventData.error.resumeAt).toBe('not a date');
    expect(wait.eventData.resumeAt).toEqual(new Date(Date.UTC(2030, 0, 1)));
    const byCorrelation = await w.events.listByCorrelationId({ correlationId: 's', runId: run.runId });
    expect(byCorrelation.data).toEqual([lazy, started, retrying]);
    // Newest first, in pages of 4 and 2: the same events, reversed.
    const desc = await w.events.list({ runId: run.runId, pagination: { limit: 4, sortOrder: 'desc' } });
    const rest = await w.events.list({ runId: run.runId, pagination: { limit: 4, sortOrder: 'desc', cursor: desc.cursor } });
    expect([...desc.data, ...rest.data]).toEqual([...page.data].reverse());
    expect([desc.hasMore, rest.hasMore]).toEqual([true, false]);
    // resolveData 'none': no payloads, everything else as listed.
    const bare = await w.events.list({ runId: run.runId, pagination: { limit: 100 }, resolveData: 'none' });
    expect(bare.data.map((e) => [e.eventId, e.eventType, e.createdAt, e.eventData?.input])).toEqual(
      page.data.map((e) => [e.eventId, e.eventType, e.createdAt, undefined]),
    );
  });
  test('a page larger than one slice lists what one call lists: every event once, in order, cursor and hasMore of the page', async () => {
    const w = world();
    const run = await createRun(w);
    const n = 1004; // with run_created: 1005 events
    for (let i = 0; i < n; i += 64) {
      await Promise.all(
        Array.from({ length: Math.min(64, n - i) }, (_, j) =>
          w.events.create(run.runId, {
            eventType: 'step_created',
            correlationId: `s_${i + j}`,
            specVersion: 5,
            eventData: { stepName: 'step//x', input: new Uint8Array([(i + j) % 256, 1]) },
          }),
        ),
      );
    }
    // The reference: pages of 100 (one addon call each).
    const all = [];
    for (let cursor; ; ) {
      const p = await w.events.list({ runId: run.runId, pagination: { limit: 100, cursor } });
      all.push(...p.data);
      if (!p.hasMore) break;
      cursor = p.cursor;
    }
    expect(all.length).toBe(1005);
    const jobs = threadPoolStats().io.jobsQueued;
    const big = await w.events.list({ runId: run.runId, pagination: { limit: 1000 } });
    expect(threadPoolStats().io.jobsQueued - jobs).toBe(1); // one job lists the slices of 50, 150, 700 and 100
    expect(big.data).toEqual(all.slice(0, 1000));
    expect(big.hasMore).toBe(true);
    const rest = await w.events.list({ runId: run.runId, pagination: { limit: 1000, cursor: big.cursor } });
    expect(rest.data).toEqual(all.slice(1000));
    expect(rest.hasMore).toBe(false);
    // A limit above the World's largest page lists that page; one that ends mid-slice ends there.
    expect((await w.events.list({ runId: run.runId, pagination: { limit: 5000 } })).data).toEqual(all.slice(0, 1000));
    const odd = await w.events.list({ runId: run.runId, pagination: { limit: 650 } });
    expect([odd.data.length, odd.hasMore, odd.data.at(-1).eventId]).toEqual([650, true, all[649].eventId]);
    // Newest first, and by correlation id across slices too.
    const desc = await w.events.list({ runId: run.runId, pagination: { limit: 700, sortOrder: 'desc' } });
    expect(desc.data).toEqual(all.slice(-700).reverse());
    expect(desc.hasMore).toBe(true);
    expect(desc.data[1].eventData.input).toEqual(all.at(-2).eventData.input);
  });

  test('a payload with a repeated key lists as events.get reads it: the last value wins, as in JSON.parse', async () => {
    // The World takes event requests as JSON text too, so stored eventData can repeat a
    // key; the earlier value's binaries and dates are not in the parsed payload.
    const store = await Store.open(`${t.dir}/repeated-key`);
    try {
      const w = store.world();
      const { run } = JSON.parse(
        await w.createEvent(null, { eventType: 'run_created', eventData: { deploymentId: 'd', workflowName: 'wf', input: null } }),
      );
      const eventData =
        '{"stepName":"s","input":null,"a":{"b":{"createdAt":"2026-01-01T00:00:00.000Z"}},"a":null,' +
        '"c":{"__type":"Uint8Array","data":"AA=="},"c":{"data":"text"},"d":1,"d":{"resumeAt":"2026-01-02T00:00:00.000Z"}}';
      const created = JSON.parse(
        await w.createEvent(run.runId, `{"eventType":"step_created","correlationId":"step_1","specVersion":5,"eventData":${eventData}}`),
      );
      const one = fromJson(await w.eventsGet(run.runId, created.event.eventId, '{}'), SHAPE.event);
      // `d.resumeAt` is step_created user data: no date.
      expect(one.eventData).toEqual({ stepName: 's', input: null, a: null, c: { data: 'text' }, d: { resumeAt: '2026-01-02T00:00:00.000Z' } });
      const page = fromEventPage(await w.eventsList(JSON.stringify({ runId: run.runId })));
      expect(page.data.at(-1)).toEqual(one);
      const byCorrelation = fromEventPage(await w.eventsListByCorrelationId(JSON.stringify({ correlationId: 'step_1' })));
      expect(byCorrelation.data).toEqual([one]);
    } finally {
      await store.close();
    }
  });
});

describe('events.create calls of one turn, gathered per run', () => {
  const step = (correlationId, i) => ({
    eventType: 'step_created',
    correlationId,
    specVersion: 5,
    eventData: { stepName: 'step//x', input: new Uint8Array([i, 0, 255]) },
  });

  test('each run’s calls of one turn are one addon call, applied in call order, each settled with its own result', async () => {
    const w = world();
    const runs = [await createRun(w), await createRun(w), await createRun(w)];
    const jobsBefore = threadPoolStats().io.jobsQueued;
    const calls = runs.flatMap((run, r) => Array.from({ length: 10 }, (_, i) => w.events.create(run.runId, step(`step_${r}_${i}`, i))));
    const results = await Promise.all(calls);
    // Three runs, three worker jobs: not one per call.
    expect(threadPoolStats().io.jobsQueued - jobsBefore).toBe(3);
    for (const [k, result] of results.entries()) {
      const [r, i] = [Math.floor(k / 10), k % 10];
      expect(result.event.runId).toBe(runs[r].runId);
      expect(result.step).toMatchObject({ stepId: `step_${r}_${i}`, status: 'pending', input: new Uint8Array([i, 0, 255]) });
    }
    for (const [r, run] of runs.entries()) {
      const events = (await w.events.list({ runId: run.runId, pagination: { limit: 100 } })).data;
      // In call order, right after run_created: the order the calls were made in.
      expect(events.map((e) => e.correlationId ?? null)).toEqual([null, ...Array.from({ length: 10 }, (_, i) => `step_${r}_${i}`)]);
    }
  });

  test('two terminal events in one turn: the first wins, the second gets the conflict it would get alone', async () => {
    const w = world();
    const run = await createRun(w);
    await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    const [done, again] = await Promise.allSettled([
      w.events.create(run.runId, { eventType: 'run_completed', specVersion: 5, eventData: { output: allBytes } }),
      w.events.create(run.runId, { eventType: 'run_failed', specVersion: 5, eventData: { error: 'late' } }),
    ]);
    expect(done.status).toBe('fulfilled');
    expect(done.value.run.status).toBe('completed');
    expect(again.status).toBe('rejected');
    const alone = await rejection(w.events.create(run.runId, { eventType: 'run_failed', specVersion: 5, eventData: { error: 'late' } }));
    expect(again.reason.constructor).toBe(alone.constructor);
    expect(again.reason.status).toBe(alone.status);
    expect(again.reason.cause).toMatchObject({ code: alone.cause.code, className: alone.cause.className });
    const types = (await w.events.list({ runId: run.runId })).data.map((e) => e.eventType);
    expect(types).toEqual(['run_created', 'run_started', 'run_completed']);
    expect((await w.runs.get(run.runId)).output).toEqual(allBytes);
  });

  test('bad calls in a turn reject alone; the good ones of the same run commit', async () => {
    const w = world();
    const run = await createRun(w);
    const settled = await Promise.allSettled([
      w.events.create(run.runId, step('a', 1)),
      w.events.create(run.runId, { eventType: 'no_such_event', specVersion: 5 }),
      w.events.create(run.runId, { ...step('b', 2), eventData: { stepName: 'x', input: 1n } }),
      w.events.create(run.runId, { eventType: 'step_completed', correlationId: 'never_created', specVersion: 5, eventData: { result: 1 } }),
      w.events.create('wrun_short', step('c', 3)),
      w.events.create(run.runId, step('d', 4)),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'rejected', 'fulfilled']);
    expect(settled[1].reason.cause).toMatchObject({ code: 'INVALID_INPUT' });
    expect(settled[2].reason.cause).toMatchObject({ code: 'INVALID_INPUT', field: 'request' });
    expect(settled[3].reason.status).toBe(404);
    // No run of a non-wrun_<ULID> id can exist: not found, like any missing run.
    expect(WorkflowRunNotFoundError.is(settled[4].reason), String(settled[4].reason)).toBe(true);
    const events = (await w.events.list({ runId: run.runId })).data;
    expect(events.map((e) => e.correlationId ?? null)).toEqual([null, 'a', 'd']);
  });
});

describe('streams', () => {
  test('write, writeMulti, get from an index and from the end, getChunks, getInfo, list, close', async () => {
    const w = world();
    const run = await createRun(w);
    const name = 'strm_01ARZ3NDEKTSV4RRFFQ69G5FAV_user';
    expect(await w.streams.getInfo(run.runId, name)).toEqual({ tailIndex: -1, done: false });
    // Not awaited one by one: call order is kept.
    const writes = [w.streams.write(run.runId, name, 'a'), w.streams.write(Promise.resolve(run.runId), name, new Uint8Array([98]))];
    writes.push(w.streams.writeMulti(run.runId, name, ['c', 'd', 'e']));
    await Promise.all(writes);
    expect(await w.streams.list(run.runId)).toEqual([name]);
    expect(await w.streams.getInfo(run.runId, name)).toEqual({ tailIndex: 4, done: false });
    const page = await w.streams.getChunks(run.runId, name, { limit: 2 });
    expect(page.data.map((c) => [c.index, Buffer.from(c.data).toString()])).toEqual([
      [0, 'a'],
      [1, 'b'],
    ]);
    expect(page.hasMore).toBe(true);
    const rest = await w.streams.getChunks(run.runId, name, { cursor: page.cursor });
    expect(rest.data.map((c) => c.index)).toEqual([2, 3, 4]);

    const live = await w.streams.get(run.runId, name, -2);
    const reading = text(live);
    await new Promise((r) => setTimeout(r, 50));
    await w.streams.write(run.runId, name, 'f');
    await w.streams.close(run.runId, name);
    expect(await reading).toEqual(['d', 'e', 'f']);
    expect(await text(await w.streams.get(run.runId, name, 1))).toEqual(['b', 'c', 'd', 'e', 'f']);
    expect(await w.streams.getInfo(run.runId, name)).toEqual({ tailIndex: 5, done: true });
    const closed = await rejection(w.streams.write(run.runId, name, 'late'));
    expect(closed.cause).toMatchObject({ code: 'STREAM_CLOSED', status: 409 });
  });
});

describe('start() and close()', () => {
  test('start() re-enqueues the pending and running runs found in runlog', async () => {
    const w = world();
    const a = await createRun(w);
    const b = await createRun(w);
    await w.events.create(b.runId, { eventType: 'run_started', specVersion: 5 });
    const c = await createRun(w);
    await w.events.create(c.runId, { eventType: 'run_cancelled', specVersion: 5 });
    await w.close();

    const again = world({ recoverActiveRuns: true });
    const queued = [];
    again.queue = async (name, payload) => {
      queued.push([name, payload.runId]);
      return { messageId: null };
    };
    await again.start();
    expect(queued.sort()).toEqual(
      [
        ['__wkf_workflow_workflow//./t//wf', a.runId],
        ['__wkf_workflow_workflow//./t//wf', b.runId],
      ].sort(),
    );
  });

  test('a closed World rejects every call with CLOSED; a live reader ends', async () => {
    const w = world();
    const run = await createRun(w);
    const reader = (await w.streams.get(run.runId, 'strm_x')).getReader();
    const pending = reader.read();
    await w.close();
    expect((await pending).done).toBe(true);
    // Every promise gets its handler at once: one that rejects early is never unhandled.
    for (const err of await Promise.all([
      w.runs.get(run.runId),
      w.events.create(run.runId, { eventType: 'run_started' }),
      w.events.list({ runId: run.runId }),
      w.streams.write(run.runId, 'strm_x', 'a'),
      w.hooks.getByToken('t'),
    ].map(rejection))) {
      expect(WorkflowWorldError.is(err)).toBe(true);
      expect(err.cause.code).toBe('CLOSED');
    }
  });
});

describe('bad input', () => {
  test('run ids that cannot exist: reads and writes about a run are not found, an id the store cannot hold is 400, nothing written', async () => {
    const w = world();
    const notFound = (err) => WorkflowRunNotFoundError.is(err) && err.cause?.code === 'NOT_FOUND';
    const invalid = (err) => WorkflowWorldError.is(err) && err.status === 400 && err.cause?.code === 'INVALID_INPUT';
    // What each id gets from [runs.get, events.create run_started, events.list, steps.list,
    // streams.write]: not a wrun_<ULID>, so no run of it can exist (the SDK's own probes send
    // such ids: getRun('my-run-id').exists is false); a stream needs only an id the store can
    // hold ('' and ids with '/' or '.' it cannot), as the health check's wrun_hc_… streams do.
    const cases = [
      ['', [notFound, invalid, notFound, notFound, invalid]],
      ['run_1', [notFound, notFound, notFound, notFound, null]],
      ['wrun_short', [notFound, notFound, notFound, notFound, null]],
      ['_world-hook-tokens', [notFound, notFound, notFound, notFound, null]],
      ['wrun_../../etc', [notFound, notFound, notFound, notFound, invalid]],
      ['wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV/x', [notFound, notFound, notFound, notFound, invalid]],
    ];
    for (const [id, want] of cases) {
      const calls = [
        w.runs.get(id),
        w.events.create(id, { eventType: 'run_started' }),
        w.events.list({ runId: id }),
        w.steps.list({ runId: id }),
        w.streams.write(id, 'strm_x', 'a'),
      ];
      // Every promise gets its handler at once: one that rejects early is never unhandled.
      const settled = await Promise.allSettled(calls);
      settled.forEach((s, i) => {
        if (want[i] === null) expect(s.status, `${JSON.stringify(id)} call ${i}: ${s.reason}`).toBe('fulfilled');
        else expect(s.status === 'rejected' && want[i](s.reason), `${JSON.stringify(id)} call ${i}: ${s.reason ?? 'resolved'}`).toBe(true);
      });
    }
    const badReq = await rejection(w.events.create(null, { eventType: 'no_such_event' }));
    expect(badReq.cause.code).toBe('INVALID_INPUT');
    const badParams = await rejection(w.events.list({ runId: 'wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV', pagination: { limit: -1 } }));
    expect(badParams.cause.code).toBe('INVALID_INPUT');
    // A run_created that names its own id is refused: the World mints run ids.
    const named = await rejection(w.events.create('wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV', { eventType: 'run_created', eventData: { deploymentId: 'd', workflowName: 'w', input: null } }));
    expect(invalid(named), String(named)).toBe(true);
    expect((await w.runs.list()).data).toEqual([]);
  });

  test('a request, params or chunk JavaScript cannot send (a BigInt, a cycle, a number chunk) rejects with INVALID_INPUT (400), nothing written', async () => {
    const w = world();
    const run = await createRun(w);
    const cyclic = { runId: run.runId };
    cyclic.self = cyclic;
    // Every promise gets its handler at once: one that rejects early is never unhandled.
    for (const err of await Promise.all([
      w.events.create(run.runId, { eventType: 'step_created', correlationId: 's', specVersion: 5, eventData: { stepName: 'x', input: 1n } }),
      w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 }, cyclic),
      w.events.list(cyclic),
      w.runs.list({ limit: 2n }),
      w.streams.write(run.runId, 'strm_x', 42),
      w.streams.writeMulti(run.runId, 'strm_x', ['a', { not: 'bytes' }]),
    ].map(rejection))) {
      expect(WorkflowWorldError.is(err), String(err)).toBe(true);
      expect(err.status).toBe(400);
      expect(err.cause).toMatchObject({ code: 'INVALID_INPUT' });
    }
    expect((await w.events.list({ runId: run.runId })).data.map((e) => e.eventType)).toEqual(['run_created']);
    expect(await w.streams.list(run.runId)).toEqual([]);
  });

  test('an oversized payload rejects with INVALID_INPUT and writes nothing', async () => {
    const w = world({ store: { payloadLenBytesMax: 4096 } });
    const run = await createRun(w, { input: new Uint8Array(16) });
    const big = await rejection(
      w.events.create(run.runId, { eventType: 'run_completed', specVersion: 5, eventData: { output: new Uint8Array(8192) } }),
    );
    expect(big.cause.code).toBe('INVALID_INPUT');
    expect((await w.runs.get(run.runId)).status).toBe('pending');
    const chunk = await rejection(w.streams.write(run.runId, 'strm_big', new Uint8Array(8192)));
    expect(chunk.cause.code).toBe('INVALID_INPUT');
  });

  // Flips a byte of a segment file: a case of the file store only (the PostgreSQL run of this
  // file defines it not at all, so it is not counted as skipped there).
  (testBackend === 'file' ? test : () => {})('a corrupt store rejects with CORRUPT (500), never not-found', async () => {
    const dataDir = `${t.dir}/corrupt/runlog`;
    const w = world({ dataDir });
    const run = await createRun(w, { input: new TextEncoder().encode('MARKER-input') });
    await w.close();
    const segDir = `${dataDir}/runs/${run.runId}`;
    const seg = readdirSync(segDir).find((f) => f.startsWith('seg-'));
    const bytes = readFileSync(`${segDir}/${seg}`);
    const at = bytes.indexOf('deploymentId');
    expect(at).toBeGreaterThan(0);
    bytes[at] ^= 0x01;
    writeFileSync(`${segDir}/${seg}`, bytes);

    const again = world({ dataDir });
    // Every promise gets its handler at once: one that rejects early is never unhandled.
    for (const err of await Promise.all([again.runs.get(run.runId), again.events.list({ runId: run.runId })].map(rejection))) {
      expect(WorkflowWorldError.is(err)).toBe(true);
      expect(err.status).toBe(500);
      expect(err.cause).toMatchObject({ code: 'CORRUPT', runId: run.runId });
    }
  });
});

describe('the addon World directly', () => {
  test('objects or JSON text in, JSON text out; errors carry code, className, status', async () => {
    const store = await Store.open(`${t.dir}/direct`);
    try {
      const w = store.world();
      const out = JSON.parse(
        await w.createEvent(null, { eventType: 'run_created', eventData: { deploymentId: 'd', workflowName: 'wf', input: null } }),
      );
      expect(out.run.status).toBe('pending');
      const runId = out.run.runId;
      const text = await w.createEvent(runId, '{"eventType":"run_cancelled"}', '{}');
      expect(JSON.parse(text).run.status).toBe('cancelled');
      const err = await rejection(w.createEvent(runId, { eventType: 'run_completed', eventData: { output: 1 } }));
      expect(err).toMatchObject({ code: 'CONFLICT', className: 'EntityConflictError', status: 409, runId });
      const bad = await rejection(w.createEvent(runId, 'not json'));
      expect(bad.code).toBe('INVALID_INPUT');
      const badType = await rejection(w.runsGet(42));
      expect(badType).toMatchObject({ code: 'INVALID_INPUT', field: 'runId' });
      await store.close();
      expect(w.closed).toBe(true);
      expect((await rejection(w.runsGet(runId))).code).toBe('CLOSED');
    } finally {
      await store.close();
    }
  });
  test('createEvents: one entry per call, in order, a JSON text or the Error createEvent rejects with', async () => {
    const store = await Store.open(`${t.dir}/direct`);
    try {
      const w = store.world();
      const newRun = async () =>
        JSON.parse(await w.createEvent(null, { eventType: 'run_created', eventData: { deploymentId: 'd', workflowName: 'wf', input: null } }))
          .run.runId;
      const calls = (runId) => [
        [runId, '{"eventType":"run_started","specVersion":5}'],
        [runId, { eventType: 'run_started', specVersion: 5 }, { resolveData: 'none' }],
        [runId, { eventType: 'step_completed', correlationId: 'nope', specVersion: 5, eventData: { result: 1 } }],
        [runId, '{"eventType":"run_cancelled"}', '{"resolveData":"some"}'],
        [runId, 'not json'],
        [runId, '{"eventType":"run_cancelled"}', null],
        [runId, '{"eventType":"run_completed","eventData":{"output":1}}'],
      ];
      const outcome = (x) => (typeof x === 'string' ? { status: JSON.parse(x).run?.status } : { ...x, message: x.message });
      // The same calls, one createEvent after another on a second run: the same outcomes.
      const [batched, serial] = [await newRun(), await newRun()];
      const out = await w.createEvents(calls(batched));
      const alone = [];
      for (const [runId, request, params] of calls(serial)) {
        alone.push(await w.createEvent(runId, request, params).catch((e) => e));
      }
      const normalize = (o, runId) => JSON.parse(JSON.stringify(outcome(o)).replaceAll(runId, 'RUN'));
      expect(out.map((o) => normalize(o, batched))).toEqual(alone.map((o) => normalize(o, serial)));
      expect(out.map((o) => (typeof o === 'string' ? 'ok' : o.code))).toEqual([
        'ok',
        alone[1] instanceof Error ? alone[1].code : 'ok',
        'NOT_FOUND',
        'INVALID_INPUT',
        'INVALID_INPUT',
        'ok',
        'CONFLICT',
      ]);
      expect(out[3]).toMatchObject({ field: 'params.resolveData' });
      // A call that is no [runId, request, params?] is an entry of its own; the rest go on.
      const shapes = await w.createEvents([['wrun_short', '{"eventType":"run_started"}'], [batched], 'not a call', 7]);
      const badRun = await rejection(w.createEvent('wrun_short', '{"eventType":"run_started"}'));
      expect(outcome(shapes[0])).toEqual(outcome(badRun));
      expect(shapes.slice(1).map((e) => e.code)).toEqual(['INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT']);
      expect((await rejection(w.createEvents('nope'))).code).toBe('INVALID_INPUT');
      expect(await w.createEvents([])).toEqual([]);
      await store.close();
      expect((await rejection(w.createEvents([[batched, '{"eventType":"run_started"}']]))).code).toBe('CLOSED');
    } finally {
      await store.close();
    }
  });
});
