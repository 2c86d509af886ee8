// Every storage and streams method of createWorld() given an argument of the wrong type
// (a number or an object for an id, a string or a function for params, an object for a
// chunk, no array for chunks, undefined where one is required) rejects with the class the
// README promises, WorkflowWorldError 400 with code INVALID_INPUT naming the argument, and
// writes nothing: never a TypeError, never a silently ignored argument, never a crash.
//
// Backend-neutral (RUNLOG_TEST_BACKEND=postgres runs it on PostgreSQL).
import { WorkflowWorldError } from '@workflow/errors';
import { afterEach, beforeEach, expect, test } from 'vitest';

import { createWorld, STORAGE_METHODS } from '../index.js';
import { storeTarget, tempDir } from './helpers.mjs';

let tmp;
let w;

beforeEach(() => {
  tmp = tempDir();
  w = createWorld({ ...storeTarget(tmp.dir), recoverActiveRuns: false });
});

afterEach(async () => {
  await w.close();
  tmp.cleanup();
});

/** One value of each JavaScript type (and the shapes that are objects but no plain object). */
const VALUES = {
  undefined: undefined,
  null: null,
  number: 42,
  NaN: NaN,
  fraction: 1.5,
  bigint: 7n,
  boolean: true,
  string: 'x',
  object: {},
  array: [],
  bytes: new Uint8Array([1, 2]),
  function: () => 1,
  symbol: Symbol('s'),
};
/** The names of VALUES but `allowed`. */
const except = (...allowed) => Object.keys(VALUES).filter((k) => !allowed.includes(k));

// What the SDK's World interface says each argument is (@workflow/world's Storage, Streamer).
const ID = except('string');
const OPTIONAL_ID = except('string', 'undefined', 'null');
const REQUIRED_OBJECT = except('object');
const OPTIONS = except('object', 'undefined', 'null');
const CHUNK = except('string', 'bytes');
const CHUNKS = except('array');
const START_INDEX = except('number', 'undefined');

/**
 * Per method: its arguments in a well-typed call on run `r`, and per argument position the
 * values that are wrong there. Each wrong value is tried in its place, the others kept.
 */
const TABLE = (r) => ({
  'runs.get': [[r, { resolveData: 'none' }], [ID, OPTIONS]],
  'runs.list': [[{}], [OPTIONS]],
  'steps.get': [[r, 'step_1', {}], [ID, ID, OPTIONS]],
  'steps.list': [[{ runId: r }], [REQUIRED_OBJECT]],
  'events.create': [[r, { eventType: 'run_started', specVersion: 5 }, {}], [OPTIONAL_ID, REQUIRED_OBJECT, OPTIONS]],
  'events.get': [[r, 'evnt_01ARZ3NDEKTSV4RRFFQ69G5FAV', {}], [ID, ID, OPTIONS]],
  'events.list': [[{ runId: r }], [REQUIRED_OBJECT]],
  'events.listByCorrelationId': [[{ correlationId: 'step_1' }], [REQUIRED_OBJECT]],
  'hooks.get': [['hook_1', {}], [ID, OPTIONS]],
  'hooks.getByToken': [['tok'], [ID]],
  'hooks.list': [[{ runId: r }], [OPTIONS]],
  'streams.write': [[r, 'strm_x', 'a'], [ID, ID, CHUNK]],
  'streams.writeMulti': [[r, 'strm_x', ['a', new Uint8Array([1])]], [ID, ID, CHUNKS]],
  'streams.close': [[r, 'strm_x'], [ID, ID]],
  'streams.get': [[r, 'strm_x', 0], [ID, ID, START_INDEX]],
  'streams.list': [[r], [ID]],
  'streams.getChunks': [[r, 'strm_x', { limit: 10 }], [ID, ID, OPTIONS]],
  'streams.getInfo': [[r, 'strm_x'], [ID, ID]],
});

/** The argument names the errors use (the addon's). */
const FIELDS = {
  'runs.get': ['runId', 'params'],
  'runs.list': ['params'],
  'steps.get': ['runId', 'stepId', 'params'],
  'steps.list': ['params'],
  'events.create': ['runId', 'request', 'params'],
  'events.get': ['runId', 'eventId', 'params'],
  'events.list': ['params'],
  'events.listByCorrelationId': ['params'],
  'hooks.get': ['hookId', 'params'],
  'hooks.getByToken': ['token'],
  'hooks.list': ['params'],
  'streams.write': ['runId', 'name', 'chunk'],
  'streams.writeMulti': ['runId', 'name', 'chunks'],
  'streams.close': ['runId', 'name'],
  'streams.get': ['runId', 'name', 'startIndex'],
  'streams.list': ['runId'],
  'streams.getChunks': ['runId', 'name', 'params'],
  'streams.getInfo': ['runId', 'name'],
};

const invoke = (method, args) => {
  const [ns, m] = method.split('.');
  return w[ns][m](...args);
};

/** What the World's INVALID_INPUT naming `field` looks like in `outcome`'s terms. */
const invalidInput = (field) => `rejected WorkflowWorldError 400 INVALID_INPUT (cause INVALID_INPUT, field ${field})`;

/**
 * How `call()` settled, as one comparable line: a synchronous throw, a resolution, or a
 * rejection with its class (`WorkflowWorldError.is`, else the constructor's name), status,
 * code, and its cause's code and field.
 */
async function outcome(call) {
  let promise;
  try {
    promise = call();
  } catch (err) {
    return `threw synchronously ${err?.name}: ${err?.message}`;
  }
  try {
    await promise;
    return 'resolved';
  } catch (err) {
    const cls = WorkflowWorldError.is(err) ? 'WorkflowWorldError' : `${err?.constructor?.name} (${err?.message})`;
    return `rejected ${cls} ${err?.status} ${err?.code} (cause ${err?.cause?.code}, field ${err?.cause?.field})`;
  }
}

/** Asserts every case settled as `invalidInput(field)`; lists all that did not. */
async function expectAllInvalidInput(cases) {
  // All started at once, each settled on its own: none is left unhandled.
  const got = await Promise.all(cases.map((c) => outcome(c.call)));
  const wrong = cases.flatMap((c, i) => (got[i] === invalidInput(c.field) ? [] : [`${c.label}: ${got[i]}`]));
  expect(wrong).toEqual([]);
}

async function createRun() {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_test', workflowName: 'workflow//./t//wf', input: new Uint8Array([1]) },
  });
  return run.runId;
}

test('the table covers every storage method', () => {
  const methods = Object.entries(STORAGE_METHODS).flatMap(([ns, ms]) => ms.map((m) => `${ns}.${m}`));
  expect(Object.keys(TABLE('r')).sort()).toEqual(methods.sort());
  for (const [method, [args, wrong]] of Object.entries(TABLE('r'))) {
    expect(wrong.length, method).toBe(args.length);
    expect(FIELDS[method].length, method).toBe(args.length);
  }
});

test('every method rejects an argument of the wrong type with WorkflowWorldError 400 INVALID_INPUT naming it, and writes nothing', async () => {
  const runId = await createRun();
  const cases = [];
  for (const [method, [args, wrong]] of Object.entries(TABLE(runId))) {
    wrong.forEach((kinds, position) => {
      for (const kind of kinds) {
        const bad = args.slice();
        bad[position] = VALUES[kind];
        const field = FIELDS[method][position];
        cases.push({ label: `${method} with ${field} = ${kind}`, call: () => invoke(method, bad), field });
      }
    });
  }
  expect(cases.length).toBe(412);
  await expectAllInvalidInput(cases);

  expect((await w.events.list({ runId })).data.map((e) => e.eventType)).toEqual(['run_created']);
  expect(await w.streams.list(runId)).toEqual([]);
  expect((await w.runs.get(runId)).status).toBe('pending');
});

test('a chunk of the wrong type inside writeMulti, or a runId promise settling to no string, is INVALID_INPUT naming it', async () => {
  const runId = await createRun();
  const cases = [
    ['chunks [42]', () => w.streams.writeMulti(runId, 'strm_x', [42]), 'chunks[0]'],
    ["chunks ['a', {}]", () => w.streams.writeMulti(runId, 'strm_x', ['a', { not: 'bytes' }]), 'chunks[1]'],
    ["chunks ['a', bytes, undefined]", () => w.streams.writeMulti(runId, 'strm_x', ['a', new Uint8Array([1]), undefined]), 'chunks[2]'],
    ['chunks [[1, 2]]', () => w.streams.writeMulti(runId, 'strm_x', [[1, 2]]), 'chunks[0]'],
    ['write, runId a promise of 42', () => w.streams.write(Promise.resolve(42), 'strm_x', 'a'), 'runId'],
    ['writeMulti, runId a promise of {}', () => w.streams.writeMulti(Promise.resolve({}), 'strm_x', ['a']), 'runId'],
    ['close, runId a promise of undefined', () => w.streams.close(Promise.resolve(undefined), 'strm_x'), 'runId'],
  ].map(([label, call, field]) => ({ label, call, field }));
  await expectAllInvalidInput(cases);
  expect(await w.streams.list(runId)).toEqual([]);
});

test('the well-typed calls of the table are accepted (so each rejection above is its wrong argument)', async () => {
  const runId = await createRun();
  const outcomes = {};
  for (const [method, [args]] of Object.entries(TABLE(runId))) {
    try {
      const out = await invoke(method, args);
      if (method === 'streams.get') await out.cancel();
      outcomes[method] = 'ok';
    } catch (err) {
      outcomes[method] = `${err.name} ${err.status ?? ''}`.trim();
    }
  }
  expect(outcomes).toEqual({
    'runs.get': 'ok',
    'runs.list': 'ok',
    'steps.get': 'WorkflowWorldError 404',
    'steps.list': 'ok',
    'events.create': 'ok',
    'events.get': 'WorkflowWorldError 404',
    'events.list': 'ok',
    'events.listByCorrelationId': 'ok',
    'hooks.get': 'HookNotFoundError',
    'hooks.getByToken': 'HookNotFoundError',
    'hooks.list': 'ok',
    'streams.write': 'ok',
    'streams.writeMulti': 'ok',
    'streams.close': 'ok',
    'streams.get': 'ok',
    'streams.list': 'ok',
    'streams.getChunks': 'ok',
    'streams.getInfo': 'ok',
  });
});
