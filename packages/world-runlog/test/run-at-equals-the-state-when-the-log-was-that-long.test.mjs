// world.runlog.runAt and runDiff (issue 25): a run as of each seq N of its log equals what the
// World's own reads (runs.get, steps.list, hooks.list) returned when the log was N events long;
// a time is the last seq at or before it; seq 0, a seq past the end, a time before the first
// event and a point of the wrong type are rejected promises (WorkflowWorldError 400,
// INVALID_INPUT); runDiff names the entities each event changed.
import { WorkflowRunNotFoundError, WorkflowWorldError } from '@workflow/errors';
import { expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { rejection, storeTarget } from './helpers.mjs';
import { worldsPerTest } from './worlds-per-test.mjs';

const t = worldsPerTest((dir) => createWorld({ ...storeTarget(dir), recoverActiveRuns: false }));
const world = (options) => t.world(options);

const bytes = new Uint8Array([0, 1, 2, 255]);

/** The run as the World's reads show it now. */
async function readsOf(w, runId) {
  const run = await w.runs.get(runId, { resolveData: 'all' });
  const steps = await w.steps.list({ runId, pagination: { sortOrder: 'asc', limit: 1000 }, resolveData: 'all' });
  const hooks = await w.hooks.list({ runId, pagination: { limit: 1000 }, resolveData: 'all' });
  return { run, steps: steps.data, hooks: hooks.data };
}

test('runAt(N) is the state the reads returned when the log held N events; runDiff names what each event changed', async () => {
  const w = world();
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: bytes },
  });
  const id = run.runId;
  const requests = [
    { eventType: 'run_started' },
    { eventType: 'step_created', correlationId: 'step_a', eventData: { stepName: 'step//a', input: bytes } },
    { eventType: 'step_started', correlationId: 'step_a' },
    { eventType: 'hook_created', correlationId: 'hook_a', eventData: { token: 'tok-a', metadata: bytes } },
    { eventType: 'wait_created', correlationId: 'wait_a', eventData: { resumeAt: new Date(Date.UTC(2030, 0, 1)) } },
    { eventType: 'step_completed', correlationId: 'step_a', eventData: { result: bytes } },
    { eventType: 'hook_disposed', correlationId: 'hook_a' },
    { eventType: 'wait_completed', correlationId: 'wait_a' },
    { eventType: 'run_completed', eventData: { output: bytes } },
  ];
  const states = [await readsOf(w, id)];
  for (const r of requests) {
    await w.events.create(id, { specVersion: 5, ...r });
    states.push(await readsOf(w, id));
  }
  const last = states.length;
  for (let n = 1; n <= last; n++) {
    const at = await w.runlog.runAt(id, n);
    expect({ seq: at.seq, lastSeq: at.lastSeq }).toEqual({ seq: n, lastSeq: last });
    expect({ run: at.run, steps: at.steps, hooks: at.hooks }).toEqual(states[n - 1]);
    expect(at.run.createdAt).toBeInstanceOf(Date);
  }
  const mid = await w.runlog.runAt(id, 6);
  expect(mid.waits.map((x) => [x.waitId, x.status])).toEqual([[`${id}-wait_a`, 'waiting']]);
  expect(mid.steps[0].input).toEqual(bytes);
  expect((await w.runlog.runAt(id, '6')).seq).toBe(6);

  // A time: the last seq whose createdAt is at or before it (a Date or an ISO string).
  const events = (await w.events.list({ runId: id, pagination: { limit: 100 } })).data;
  const t = events[3].createdAt;
  const lastAtT = events.findLastIndex((e) => e.createdAt <= t) + 1;
  expect((await w.runlog.runAt(id, t)).seq).toBe(lastAtT);
  expect((await w.runlog.runAt(id, t.toISOString())).seq).toBe(lastAtT);
  expect((await w.runlog.runAt(id, new Date(Date.UTC(2999, 0, 1)))).seq).toBe(last);

  // Each event's diff: the entity it changed, created or changed or removed.
  const rows = [];
  for (let n = 1; n <= last; n++) {
    const d = await w.runlog.runDiff(id, n - 1, n);
    expect([d.from, d.to]).toEqual([n - 1, n]);
    rows.push(d.changes.map((c) => `${c.entity} ${c.id} ${c.change} ${c.events.map((e) => `${e.seq}:${e.eventType}`).join(',')}`));
  }
  expect(rows).toEqual([
    [`run ${id} created 1:run_created`],
    [`run ${id} changed 2:run_started`],
    ['step step_a created 3:step_created'],
    ['step step_a changed 4:step_started'],
    ['hook hook_a created 5:hook_created'],
    [`wait ${id}-wait_a created 6:wait_created`],
    ['step step_a changed 7:step_completed'],
    ['hook hook_a removed 8:hook_disposed'],
    [`wait ${id}-wait_a changed 9:wait_completed`],
    [`run ${id} changed 10:run_completed`],
  ]);
  const whole = await w.runlog.runDiff(id, 0, last);
  expect(whole.changes.map((c) => [c.entity, c.change, c.before])).toEqual([
    ['run', 'created', null],
    ['step', 'created', null],
    ['wait', 'created', null],
  ]);
  expect(whole.changes[1].after.output).toEqual(bytes);
});

test('points the log does not hold, and points of the wrong type, reject with INVALID_INPUT; an unknown run is not found', async () => {
  const w = world();
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: bytes },
  });
  const first = (await w.events.list({ runId: run.runId })).data[0].createdAt;
  for (const at of [0, 2, new Date(first.getTime() - 1)]) {
    const err = await rejection(w.runlog.runAt(run.runId, at));
    expect(WorkflowWorldError.is(err)).toBe(true);
    expect(err.status).toBe(400);
    expect(err.cause).toMatchObject({ code: 'INVALID_INPUT', runId: run.runId, lastSeq: 1 });
    expect(err.message).toContain('its log ends at seq 1');
  }
  for (const at of [-1, 1.5, 'soon', null, {}, new Date(NaN)]) {
    const err = await rejection(w.runlog.runAt(run.runId, at));
    expect(WorkflowWorldError.is(err)).toBe(true);
    expect(err.status).toBe(400);
    expect(err.cause).toMatchObject({ code: 'INVALID_INPUT', field: 'at' });
  }
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
  const backwards = await rejection(w.runlog.runDiff(run.runId, 2, 1));
  expect(backwards.cause).toMatchObject({ code: 'INVALID_INPUT', field: 'from' });
  expect((await rejection(w.runlog.runAt(42, 1))).cause).toMatchObject({ code: 'INVALID_INPUT', field: 'runId' });
  const missing = await rejection(w.runlog.runAt('wrun_01M8N4BGVC6PBGA4VZWAQRRZ00', 1));
  expect(WorkflowRunNotFoundError.is(missing)).toBe(true);
});
