// `runs.experimentalSetAttributes` and `maxEvents`, differentially: the same calls against
// each 5.x line's own world-local (5.0.0-beta.46 from examples/sdk-5.0.0-beta.55, and
// 5.0.0-beta.29, this package's own, for 5.0.0-beta.35) and against runlog's World as that
// line give the same snapshots, the same run entities and the same error classes; runlog's
// run log gets no event from it (the changes are in the run's attribute log). `maxEvents` is
// on the beta.55 line's results that carry the run, honouring `WORKFLOW_MAX_EVENTS`, as
// world-local 5.0.0-beta.46 has it, and on no other line's; the 4.x line has no such member.
import { createRequire } from 'node:module';
import path from 'node:path';

import * as ownLocal from '@workflow/world-local';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';

import { createWorld } from '../index.js';
import { LINES } from '../src/line.js';
import {
  bytes,
  EXAMPLES,
  localBeta55 as localBeta55On,
  runlogBeta55 as runlogBeta55On,
  runningRun as runningRunOn,
  worldKeeper,
} from './beta55-worlds.mjs';
import { normalizeAcrossWorlds, rejection, tempDir } from './helpers.mjs';

const V4_APP = path.join(EXAMPLES, 'sdk-4.8.9');

let tmp;
const { keep, closeAll } = worldKeeper();

beforeEach(() => {
  tmp = tempDir('set-attributes-');
});

afterEach(async () => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  await closeAll();
  tmp.cleanup();
});

/** runlog's World as the beta.55 line (detected from the example app's directory). */
const runlogBeta55 = () => runlogBeta55On(path.join(tmp.dir, 'runlog'), keep);

/** runlog's World as the line of this package's own packages (5.0.0-beta.35). */
const runlogBeta35 = () => keep(createWorld({ dataDir: path.join(tmp.dir, 'runlog35') }));

const localBeta55 = () => localBeta55On(path.join(tmp.dir, 'local'), keep);
const localBeta35 = () => keep(ownLocal.createLocalWorld({ dataDir: path.join(tmp.dir, 'local35') }));

const runningRun = (w) => runningRunOn(w, 'dpl_attrs');

const errorName = async (p) => (await rejection(p))?.name;

/** The script run on each World: snapshots, entities and errors of experimentalSetAttributes. */
async function attributeScript(w) {
  const set = (runId, changes, options) => w.runs.experimentalSetAttributes(runId, changes, options);
  const runId = await runningRun(w);
  const first = await set(runId, [
    { key: 'a', value: '1' },
    { key: 'b', value: '2' },
  ]);
  const second = await set(runId, [
    { key: 'a', value: null },
    { key: 'c', value: '3' },
    { key: 'never-set', value: null },
  ]);
  const got = (await w.runs.get(runId)).attributes;
  const reserved = await errorName(set(runId, [{ key: '$fw', value: 'x' }]));
  const reservedAllowed = await set(runId, [{ key: '$fw', value: 'x' }], { allowReservedAttributes: true });
  const errors = {
    unknownRun: await errorName(set('wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV', [{ key: 'a', value: '1' }])),
    unknownRunBadChanges: await errorName(set('wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV', [{ key: 7, value: '1' }])),
    emptyKey: await errorName(set(runId, [{ key: '', value: '1' }])),
    longKey: await errorName(set(runId, [{ key: 'k'.repeat(257), value: '1' }])),
    longValue: await errorName(set(runId, [{ key: 'a', value: 'é'.repeat(129) }])),
    twice: await errorName(set(runId, [{ key: 'a', value: '1' }, { key: 'a', value: '2' }])),
    keyType: await errorName(set(runId, [{ key: 7, value: '1' }])),
    valueType: await errorName(set(runId, [{ key: 'a', value: 7 }])),
    overLimit: await errorName(set(runId, Array.from({ length: 62 }, (_, i) => ({ key: `k${i}`, value: 'v' })))),
  };
  const atLimit = Object.keys(await set(runId, Array.from({ length: 61 }, (_, i) => ({ key: `k${i}`, value: 'v' })))).length;
  const oneMore = await errorName(set(runId, [{ key: 'one-more', value: 'v' }]));
  const completed = await w.events.create(runId, { eventType: 'run_completed', eventData: { output: bytes('"done"') } });
  const onTerminal = await set(runId, [{ key: 'k0', value: null }, { key: 'done', value: 'yes' }]);
  const run = await w.runs.get(runId, { resolveData: 'none' });
  const listed = (await w.runs.list({ resolveData: 'none' })).data.map((r) => r.attributes);
  const events = (await w.events.list({ runId, pagination: { sortOrder: 'asc' } })).data.map((e) => [e.eventId, e.eventType]);
  const many = typeof w.runs.getMany === 'function' ? (await w.runs.getMany([runId]))[0].attributes : null;
  return {
    first,
    second,
    got,
    reserved,
    reservedAllowed,
    errors,
    atLimit,
    oneMore,
    completedAttributes: completed.run.attributes,
    onTerminal,
    run: { ...run, updatedAt: undefined },
    listed,
    events,
    many,
  };
}

describe.each([
  ['5.0.0-beta.55', localBeta55, runlogBeta55],
  ['5.0.0-beta.35', localBeta35, runlogBeta35],
])('runs.experimentalSetAttributes on the %s line', (lineName, local, runlog) => {
  test('the same calls give the same snapshots, entities and error classes on world-local and runlog', async () => {
    const l = normalizeAcrossWorlds(await attributeScript(local()));
    const r = normalizeAcrossWorlds(await attributeScript(runlog()));
    expect(l.first).toEqual({ attributes: { a: '1', b: '2' } });
    expect(l.errors.unknownRun).toBe('WorkflowRunNotFoundError');
    expect(l.errors.overLimit).toBe('AttributeValidationError');
    expect(r).toEqual(l);
  });

  test('a run log gets no event from it: the event list and the next slot are unchanged', async () => {
    const w = runlog();
    const runId = await runningRun(w);
    const before = (await w.events.list({ runId, pagination: { sortOrder: 'asc' } })).data.map((e) => e.eventId);
    for (let i = 0; i < 3; i++) await w.runs.experimentalSetAttributes(runId, [{ key: 'n', value: String(i) }]);
    const after = (await w.events.list({ runId, pagination: { sortOrder: 'asc' } })).data.map((e) => e.eventId);
    expect(after).toEqual(before);
    const store = await w.runlog.store();
    const ids = (await store.listRuns(null, 100)).runs.map((r) => r.runId);
    expect(ids).toContain(`attrs-${runId}`);
    expect((await w.runs.list()).data.map((r) => r.runId)).toEqual([runId]);
    expect((await w.runs.get(runId)).attributes).toEqual({ n: '2' });
    expect(lineName).toMatch(/^5\./);
  });

  test('arguments of the wrong type are refused as INVALID_INPUT (400), nothing written', async () => {
    const w = runlog();
    const runId = await runningRun(w);
    for (const args of [
      [7, []],
      [runId, 'not-an-array'],
      [runId, [null]],
      [runId, [], 'options'],
    ]) {
      const err = await rejection(w.runs.experimentalSetAttributes(...args));
      expect(err).toMatchObject({ name: 'WorkflowWorldError', status: 400 });
    }
    expect((await w.runs.get(runId)).attributes).toEqual({});
  });
});

/** `maxEvents` of the results of one run's lifecycle on `w`. */
/** Attributes named like the entities' date fields, set at creation and afterwards. */
async function dateNamedAttributes(w) {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: w.specVersion,
    eventData: {
      deploymentId: 'dpl_attrs',
      workflowName: 'wf',
      input: bytes('[]'),
      attributes: { startedAt: '2026-01-01T00:00:00.000Z', resumeAt: 'tomorrow' },
    },
  });
  const runId = run.runId;
  await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion });
  const set = await w.runs.experimentalSetAttributes(runId, [{ key: 'createdAt', value: '2026-02-02T00:00:00.000Z' }]);
  const got = await w.runs.get(runId);
  const listed = (await w.runs.list({})).data[0];
  const created = (await w.events.list({ runId, pagination: { sortOrder: 'asc' } })).data[0];
  const types = (o) => Object.fromEntries(Object.entries(o ?? {}).map(([k, v]) => [k, v instanceof Date ? 'Date' : typeof v]));
  return {
    created: types(run.attributes),
    set: types(set.attributes),
    got: types(got.attributes),
    listed: types(listed.attributes),
    event: types(created.eventData?.attributes),
    startedAtIsDate: got.startedAt instanceof Date,
  };
}

test('attributes named like date fields stay strings, as on world-local 5.0.0-beta.46 (the entities\' own dates are Dates)', async () => {
  const l = await dateNamedAttributes(localBeta55());
  const r = await dateNamedAttributes(runlogBeta55());
  const strings = { startedAt: 'string', resumeAt: 'string', createdAt: 'string' };
  expect(l.got).toEqual(strings);
  expect(r).toEqual(l);
  expect(r.startedAtIsDate).toBe(true);
});

async function ceilings(w, data = bytes) {
  const created = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: w.specVersion,
    eventData: { deploymentId: 'dpl_attrs', workflowName: 'wf', input: data('[]') },
  });
  const runId = created.run.runId;
  const started = await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion });
  const skipped = await w.events.create(runId, { eventType: 'run_started', specVersion: w.specVersion }, { skipPreload: true });
  const step = await w.events.create(runId, { eventType: 'step_created', correlationId: 'step_1', eventData: { stepName: 's', input: data('[]') } });
  const completed = await w.events.create(runId, { eventType: 'run_completed', eventData: { output: data('1') } });
  return { created: created.maxEvents, started: started.maxEvents, skipped: skipped.maxEvents, step: step.maxEvents, completed: completed.maxEvents };
}

describe('maxEvents', () => {
  test('beta.55: on every result carrying the run, as world-local 5.0.0-beta.46 reports it (default 25000)', async () => {
    const l = await ceilings(localBeta55());
    const r = await ceilings(runlogBeta55());
    expect(l).toEqual({ created: 25_000, started: 25_000, skipped: 25_000, step: undefined, completed: 25_000 });
    expect(r).toEqual(l);
  });

  test('beta.55: WORKFLOW_MAX_EVENTS is honoured, read per call', async () => {
    const runlog = runlogBeta55();
    const local = localBeta55();
    vi.stubEnv('WORKFLOW_MAX_EVENTS', '123');
    const l = await ceilings(local);
    const r = await ceilings(runlog);
    expect(l.created).toBe(123);
    expect(r).toEqual(l);
    vi.stubEnv('WORKFLOW_MAX_EVENTS', '77');
    expect((await ceilings(runlog)).completed).toBe(77);
  });

  test('4.x: on every result carrying the run, as world-local 4.4.1 reports it (the 4.8.9 runtime enforces it)', async () => {
    const v4Local = createRequire(path.join(V4_APP, 'package.json'))('@workflow/world-local');
    const local = keep(v4Local.createLocalWorld({ dataDir: path.join(tmp.dir, 'local-v4') }));
    vi.spyOn(process, 'cwd').mockReturnValue(V4_APP);
    const runlog = keep(createWorld({ dataDir: path.join(tmp.dir, 'runlog-v4') }));
    vi.restoreAllMocks();
    expect(runlog.runlog.line.name).toBe(LINES.V4);
    const json = (text) => JSON.parse(text);
    vi.stubEnv('WORKFLOW_MAX_EVENTS', '321');
    const l = await ceilings(local, json);
    const r = await ceilings(runlog, json);
    expect(l).toEqual({ created: 321, started: 321, skipped: 321, step: undefined, completed: 321 });
    expect(r).toEqual(l);
  });

  test('beta.35: none, as world-local 5.0.0-beta.29 reports none', async () => {
    const l = await ceilings(localBeta35());
    const r = await ceilings(runlogBeta35());
    expect(l).toEqual({ created: undefined, started: undefined, skipped: undefined, step: undefined, completed: undefined });
    expect(r).toEqual(l);
  });
});

describe('the line decides the member', () => {
  test('4.x (@workflow/world 4.5.0 declares none): absent; 5.x: present', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(V4_APP);
    const v4 = keep(createWorld({ dataDir: path.join(tmp.dir, 'v4') }));
    expect(v4.runlog.line.name).toBe(LINES.V4);
    expect('experimentalSetAttributes' in v4.runs).toBe(false);
    vi.restoreAllMocks();
    expect(typeof runlogBeta35().runs.experimentalSetAttributes).toBe('function');
    expect(typeof runlogBeta55().runs.experimentalSetAttributes).toBe('function');
  });
});
