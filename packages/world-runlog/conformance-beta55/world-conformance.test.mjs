// The conformance suite for the Workflow SDK 5.0.0-beta.55 line: this directory's Nitro app
// (built by the line's own builder, `workflow/nitro`) started on one World and driven over
// HTTP. The behaviour list is the published suite's (@workflow/world-testing 5.0.0-beta.35:
// addition, idempotency, hooks, null bytes, retriable and fatal errors, inline execution,
// lineage) plus what is new on this line: slot ids dense from 1 (spec 6), eventCount
// bump-and-report and sinceCursor deltas, suspensions committed together (createBatch where
// the World has it), the sealed log (spec 7). Every run a test makes has its whole log
// checked (checkLog).
//
//   CONFORMANCE_WORLD=local|runlog node --test-reporter=spec world-conformance.test.mjs   (run.mjs does this)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { appDir, startApp } from './lib-server.mjs';

const world = process.env.CONFORMANCE_WORLD ?? 'local';
const TERMINAL = ['completed', 'failed', 'cancelled'];
const TERMINAL_EVENTS = ['run_completed', 'run_failed', 'run_cancelled'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let app;
/** Every run the suite made, with its final state: the spec-7 test reads them all. */
const seen = new Map();

before(async () => {
  app = await startApp(world, path.join(appDir, '.logs', `${world}.log`), process.env.CONFORMANCE_DATA_DIR);
});
after(async () => {
  await app?.stop();
});

async function call(method, route, body) {
  const res = await fetch(`${app.base}${route}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${method} ${route}: HTTP ${res.status}, not JSON: ${text.slice(0, 300)}`);
  }
  return { status: res.status, json };
}
const get = async (route) => (await call('GET', route)).json;

async function invoke(workflow, args) {
  const { status, json } = await call('POST', '/api/invoke', { workflow, args });
  assert.equal(status, 200, `starting ${workflow}: ${JSON.stringify(json)}`);
  assert.match(json.runId, /^wrun_[0-9A-HJKMNP-TV-Z]{26}$/);
  return json.runId;
}

/** Polls the run until it ends; asserts it ended with `status`. */
async function ended(runId, status = 'completed', timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let run;
  for (;;) {
    run = await get(`/api/run?id=${runId}`);
    if (TERMINAL.includes(run.status)) break;
    if (Date.now() > deadline) {
      const { events } = await get(`/api/events?id=${runId}`);
      assert.fail(`run ${runId} still ${run.status} after ${timeoutMs} ms; its log: ${events.map((e) => e.eventType).join(', ')}`);
    }
    await sleep(150);
  }
  assert.equal(run.status, status, `run ${runId}: ${JSON.stringify(run.error ?? run.returnValue)}`);
  return run;
}

const slotId = (n) => `evnt_${String(n).padStart(26, '0')}`;

/**
 * The run's whole log, checked against the line's contract: ids are slots dense from 1
 * (spec 6), no `noop` (a World assigning each position at its commit never has a hole to
 * fill, spec 7), exactly one terminal run event and it is the last. Returns the events.
 */
async function checkLog(runId) {
  // world-local 5.0.0-beta.46 can show the run ended a moment before its terminal event is
  // listable (two files); the log is read again, for up to 3 s, until that event is in it.
  let events;
  for (const deadline = Date.now() + 3_000; ; await sleep(100)) {
    ({ events } = await get(`/api/events?id=${runId}`));
    if (events.some((e) => TERMINAL_EVENTS.includes(e.eventType)) || Date.now() > deadline) break;
  }
  assert.deepEqual(
    events.map((e) => e.eventId),
    events.map((_, i) => slotId(i + 1)),
    `slot ids of ${runId}`,
  );
  assert.equal(events[0].eventType, 'run_created');
  assert.equal(events.filter((e) => e.eventType === 'noop').length, 0);
  const terminals = events.filter((e) => TERMINAL_EVENTS.includes(e.eventType));
  assert.equal(terminals.length, 1, `terminal events of ${runId}: ${terminals.map((e) => e.eventType)}`);
  assert.equal(events.at(-1), terminals[0]);
  const run = await get(`/api/run?id=${runId}`);
  seen.set(runId, { run, events });
  return events;
}

const kinds = (events) => events.map((e) => e.eventType);
const count = (events, type) => events.filter((e) => e.eventType === type).length;
const invocations = async (runId) => (await get(`/api/invocations?id=${runId}`)).count;
const stepTriple = ['step_created', 'step_started', 'step_completed'];

test('a step adds two numbers; the output is stored as bytes', async () => {
  const runId = await invoke('addition', [19, 23]);
  const run = await ended(runId);
  assert.equal(run.returnValue, 42);
  assert.equal(run.outputIsBytes, true);
  assert.equal(run.specVersion, 7);
  assert.deepEqual(kinds(await checkLog(runId)), ['run_created', 'run_started', ...stepTriple, 'run_completed']);
  assert.equal(await invocations(runId), 1);
});

test('a step result with NUL bytes comes back whole', async () => {
  const runId = await invoke('nulBytes', ['nul']);
  const run = await ended(runId);
  assert.deepEqual(run.returnValue, { s: 'nul\0middle\0', length: 11 });
  assert.equal(run.outputIsBytes, true);
  await checkLog(runId);
});

test('four sequential steps run in one flow invocation', async () => {
  const runId = await invoke('chain', [2]);
  const run = await ended(runId);
  assert.equal(run.returnValue, 14); // ((2*3-1)*3)-1
  const events = await checkLog(runId);
  assert.deepEqual(kinds(events), ['run_created', 'run_started', ...Array(4).fill(stepTriple).flat(), 'run_completed']);
  assert.equal(new Set(events.filter((e) => e.eventType === 'step_created').map((e) => e.correlationId)).size, 4);
  assert.equal(await invocations(runId), 1);
});

test('steps writing the run stream run in one flow invocation; the stream holds their lines', async () => {
  const runId = await invoke('streamed', [['one', 'three', 'fifteen']]);
  const run = await ended(runId);
  assert.equal(run.returnValue, 3 + 5 + 7);
  const res = await fetch(`${app.base}/api/readable?id=${runId}`, { signal: AbortSignal.timeout(15_000) });
  assert.equal(await res.text(), 'one\nthree\nfifteen\n');
  assert.deepEqual(kinds(await checkLog(runId)), ['run_created', 'run_started', ...Array(3).fill(stepTriple).flat(), 'run_completed']);
  assert.equal(await invocations(runId), 1);
});

test('a sleep takes exactly two flow invocations and lasts its second', async () => {
  const runId = await invoke('napThenAdd', [40, 2]);
  const run = await ended(runId);
  assert.equal(run.returnValue, 42);
  const events = await checkLog(runId);
  assert.deepEqual(kinds(events), ['run_created', 'run_started', 'wait_created', 'wait_completed', ...stepTriple, 'run_completed']);
  const [created, completed] = [events[2], events[3]];
  assert.equal(created.correlationId, completed.correlationId);
  assert.match(created.correlationId, /^wait_/);
  assert.ok(Date.parse(completed.createdAt) - Date.parse(created.createdAt) >= 900);
  assert.equal(await invocations(runId), 2);
});

test('steps given an AbortSignal still run in one flow invocation', async () => {
  const runId = await invoke('withSignal', [5]);
  const run = await ended(runId);
  assert.equal(run.returnValue, 1 + 2 + 3 + 4 + 5);
  const events = await checkLog(runId);
  // The signal is a hook, created before the first step and disposed at the end.
  assert.deepEqual(kinds(events), [
    'run_created',
    'run_started',
    'hook_created',
    ...Array(5).fill(stepTriple).flat(),
    'hook_disposed',
    'run_completed',
  ]);
  assert.equal(await invocations(runId), 1);
});

test('two steps awaited together (Promise.all) both run and the run completes', async () => {
  const runId = await invoke('pair', [1, 2]);
  const run = await ended(runId, 'completed', 20_000);
  assert.equal(run.returnValue, 6009);
  const events = await checkLog(runId);
  assert.equal(count(events, 'step_created'), 2);
  assert.equal(count(events, 'step_completed'), 2);
  assert.ok((await invocations(runId)) <= 3, `flow invocations of ${runId}: ${await invocations(runId)}`);
});

test('twenty steps awaited together run once each, results in order', async () => {
  const runId = await invoke('fanOut', [20]);
  const run = await ended(runId, 'completed', 30_000);
  assert.deepEqual(run.returnValue, Array.from({ length: 20 }, (_, i) => i + 100));
  const events = await checkLog(runId);
  assert.equal(count(events, 'step_created'), 20);
  assert.equal(count(events, 'step_completed'), 20);
});

test('step results are recorded once and replayed, never re-run (idempotency)', async () => {
  const runId = await invoke('draws', [5]);
  const run = await ended(runId);
  const values = run.returnValue;
  assert.equal(values.length, 10);
  assert.ok(values.every((v) => typeof v === 'number' && v >= 0 && v < 1));
  assert.equal(new Set(values).size, 10);
  const events = await checkLog(runId);
  assert.equal(count(events, 'step_created'), 10);
  assert.equal(count(events, 'step_completed'), 10);
  // The second invocation replayed the first five draws from the log.
  assert.equal(await invocations(runId), 2);
  const { byIndex } = await get(`/api/draws?id=${runId}`);
  assert.deepEqual(byIndex, Object.fromEntries(Array.from({ length: 10 }, (_, i) => [String(i), 1])));
});

test('a RetryableError retries the step after its delay; a FatalError is caught without retry', async () => {
  const runId = await invoke('retryThenFatal', ['tag']);
  const run = await ended(runId);
  assert.equal(run.returnValue.retried.attempt, 2);
  assert.equal(run.returnValue.fatal, 'refused: caught in tag');
  const events = await checkLog(runId);
  assert.deepEqual(kinds(events), [
    'run_created',
    'run_started',
    'step_created',
    'step_started',
    'step_retrying',
    'step_started',
    'step_completed',
    'step_created',
    'step_started',
    'step_failed',
    'run_completed',
  ]);
  // The second attempt starts no earlier than retryAfter ("2s") after the first.
  assert.ok(Date.parse(events[5].createdAt) - Date.parse(events[3].createdAt) >= 1900);
  assert.equal(typeof run.returnValue.retried.startedAt, 'number');
});

test('an uncaught FatalError fails the run with its message', async () => {
  const runId = await invoke('fatalEnds', ['tag']);
  const run = await ended(runId, 'failed');
  assert.equal(run.error.name, 'WorkflowRunFailedError');
  assert.match(run.error.message, /refused: uncaught in tag/);
  assert.equal(run.outputIsBytes, false);
  assert.deepEqual(kinds(await checkLog(runId)), ['run_created', 'run_started', 'step_created', 'step_started', 'step_failed', 'run_failed']);
});

test('a hook takes payloads from outside in order, with its metadata and token, until done', async () => {
  const token = `collect-${world}-${Date.now().toString(36)}`;
  const runId = await invoke('collect', [token, 'label-1']);
  const res = await fetch(`${app.base}/api/readable?id=${runId}`, { signal: AbortSignal.timeout(20_000) });
  const reader = res.body.getReader();
  const first = await reader.read();
  assert.equal(new TextDecoder().decode(first.value), 'listening\n');
  await reader.cancel();
  const hook = await call('GET', `/api/hook?token=${token}`);
  assert.equal(hook.status, 200);
  assert.equal(hook.json.runId, runId);
  assert.equal(hook.json.token, token);
  assert.match(hook.json.hookId, /^hook_/);
  for (const payload of [{ text: 'first' }, { text: 'second' }, { text: 'third', done: true }]) {
    const r = await call('POST', '/api/hook', { token, payload });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json, { runId, hookId: hook.json.hookId });
  }
  const run = await ended(runId);
  assert.deepEqual(run.returnValue, { label: 'label-1', notes: [{ text: 'first' }, { text: 'second' }, { text: 'third', done: true }] });
  const events = await checkLog(runId);
  assert.equal(count(events, 'hook_created'), 1);
  assert.equal(count(events, 'hook_received'), 3);
  // The run ended with its hook: the token is free again.
  const gone = await call('GET', `/api/hook?token=${token}`);
  assert.equal(gone.status, 404);
  assert.equal(gone.json.error.name, 'HookNotFoundError');
});

test('a second run claiming a held hook token gets hook_conflict naming the holder', async () => {
  const token = `claim-${world}-${Date.now().toString(36)}`;
  const holder = await invoke('claim', [token]);
  const deadline = Date.now() + 15_000;
  while ((await call('GET', `/api/hook?token=${token}`)).status !== 200) {
    assert.ok(Date.now() < deadline, 'the first run never held the token');
    await sleep(100);
  }
  const second = await invoke('claim', [token]);
  const lost = await ended(second);
  assert.deepEqual(lost.returnValue, { heldBy: holder });
  assert.deepEqual(kinds(await checkLog(second)), ['run_created', 'run_started', 'hook_conflict', 'run_completed']);
  const r = await call('POST', '/api/hook', { token, payload: { text: 'for the holder' } });
  assert.equal(r.json.runId, holder);
  const won = await ended(holder);
  assert.deepEqual(won.returnValue, { note: { text: 'for the holder' } });
  assert.deepEqual(kinds(await checkLog(holder)), ['run_created', 'run_started', 'hook_created', 'hook_received', 'run_completed']);
});

test('a hook kept by experimental_minRetention outlives its run: readable, its token held, not resumable', async () => {
  const token = `retained-${world}-${Date.now().toString(36)}`;
  const t0 = Date.now();
  const runId = await invoke('retained', [token]);
  const deadline = Date.now() + 15_000;
  let hook;
  while ((hook = await call('GET', `/api/hook?token=${token}`)).status !== 200) {
    assert.ok(Date.now() < deadline, 'the run never held the token');
    await sleep(100);
  }
  const until = Date.parse(hook.json.tokenRetentionUntil);
  assert.ok(until >= t0 + 3_600_000 && until <= Date.now() + 3_600_000, `tokenRetentionUntil ${hook.json.tokenRetentionUntil}`);
  const r = await call('POST', '/api/hook', { token, payload: { text: 'kept' } });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const run = await ended(runId);
  assert.deepEqual(run.returnValue, { note: { text: 'kept' } });
  assert.deepEqual(kinds(await checkLog(runId)), ['run_created', 'run_started', 'hook_created', 'hook_received', 'run_completed']);
  // The run ended; its hook did not: still found by token, with the same retention.
  const after = await call('GET', `/api/hook?token=${token}`);
  assert.equal(after.status, 200, JSON.stringify(after.json));
  assert.deepEqual(after.json, hook.json);
  // It cannot be resumed (the runtime reports the ended run as HookNotFoundError)...
  const late = await call('POST', '/api/hook', { token, payload: { text: 'late' } });
  assert.equal(late.status, 404);
  assert.equal(late.json.error.name, 'HookNotFoundError');
  // ...and its token is still held: another run claiming it gets hook_conflict.
  const second = await invoke('claim', [token]);
  const lost = await ended(second);
  assert.deepEqual(lost.returnValue, { heldBy: runId });
  assert.deepEqual(kinds(await checkLog(second)), ['run_created', 'run_started', 'hook_conflict', 'run_completed']);
});

test('start() from a workflow body records lineage on the child', async () => {
  const parentId = await invoke('parent', ['p']);
  const parent = await ended(parentId);
  const child = await ended(parent.returnValue);
  assert.equal(child.returnValue, 'p:done');
  assert.equal(child.attributes.$parentRunId, parentId);
  assert.equal(child.attributes.$rootRunId, parentId);
  assert.equal(parent.attributes.$parentRunId, undefined);
  await checkLog(parentId);
  await checkLog(child.runId);
});

test('a three-level chain keeps the root on every run', async () => {
  const rootId = await invoke('grandparent', ['g']);
  const root = await ended(rootId);
  const middle = await ended(root.returnValue);
  const leaf = await ended(middle.returnValue);
  assert.equal(leaf.returnValue, 'g/middle/leaf:done');
  assert.equal(root.attributes.$parentRunId, undefined);
  assert.equal(root.attributes.$rootRunId, undefined);
  assert.equal(middle.attributes.$parentRunId, rootId);
  assert.equal(middle.attributes.$rootRunId, rootId);
  assert.equal(leaf.attributes.$parentRunId, middle.runId);
  assert.equal(leaf.attributes.$rootRunId, rootId);
  for (const id of [rootId, middle.runId, leaf.runId]) await checkLog(id);
});

test('a suspension holding two waits, or a wait and a step, commits them and both complete', async () => {
  // A clean fan-out (waits and steps only): the runtime commits it through
  // events.createBatch where the World has one, one write per event where it has not.
  const napsId = await invoke('twoNaps', ['n']);
  assert.equal((await ended(napsId)).returnValue, 'n:rested');
  const naps = await checkLog(napsId);
  assert.deepEqual(kinds(naps), ['run_created', 'run_started', 'wait_created', 'wait_created', 'wait_completed', 'wait_completed', 'run_completed']);
  const waits = [naps[2].correlationId, naps[3].correlationId];
  assert.notEqual(waits[0], waits[1]);
  assert.deepEqual([naps[4].correlationId, naps[5].correlationId].sort(), [...waits].sort());
  // The later completion is the 2 s wait's: at least 2 s after the suspension.
  assert.ok(Date.parse(naps[5].createdAt) - Date.parse(naps[3].createdAt) >= 1900);

  const mixedId = await invoke('stepBesideNap', [4]);
  assert.equal((await ended(mixedId)).returnValue, 5);
  const mixed = await checkLog(mixedId);
  assert.deepEqual(kinds(mixed).sort(), ['run_created', 'run_started', 'wait_created', ...stepTriple, 'wait_completed', 'run_completed'].sort());
  const at = (type) => kinds(mixed).indexOf(type);
  assert.ok(at('wait_created') < at('wait_completed'));
  assert.ok(at('step_created') < at('step_started') && at('step_started') < at('step_completed'));
});

test('eventCount: a stale write is bumped to the next free slot and reports what it skipped; sinceCursor returns the delta', async () => {
  const { status, json: p } = await call('POST', '/api/probe/slots');
  assert.equal(status, 200, JSON.stringify(p));
  const s = p.steps;
  assert.equal(s.runCreated.eventId, slotId(1));
  assert.equal(s.runStarted.eventId, slotId(2));
  // eventCount 2 on a 2-event log: slot 3, nothing skipped, nothing reported.
  assert.equal(s.createdA.eventId, slotId(3));
  assert.ok(s.createdA.events === null || s.createdA.events.length === 0, JSON.stringify(s.createdA));
  // eventCount 1 on a 3-event log: committed at slot 4 (never rejected), slots 2-3 reported,
  // the cursor left alone, nothing more.
  assert.equal(s.createdBStale.eventId, slotId(4));
  assert.deepEqual(s.createdBStale.events, [
    { eventId: slotId(2), eventType: 'run_started', correlationId: null },
    { eventId: slotId(3), eventType: 'step_created', correlationId: p.stepA },
  ]);
  assert.equal(s.createdBStale.cursor, null);
  assert.equal(s.createdBStale.hasMore, false);
  // sinceCursor after slot 2: the write at slot 5 returns slots 3-5, with a cursor past them.
  assert.deepEqual(s.cursorAfter.map((e) => e.eventId), [slotId(1), slotId(2)]);
  assert.equal(s.startedA.eventId, slotId(5));
  assert.deepEqual(s.startedA.events, [
    { eventId: slotId(3), eventType: 'step_created', correlationId: p.stepA },
    { eventId: slotId(4), eventType: 'step_created', correlationId: p.stepB },
    { eventId: slotId(5), eventType: 'step_started', correlationId: p.stepA },
  ]);
  assert.equal(typeof s.startedA.cursor, 'string');
  assert.equal(s.startedA.hasMore, false);
  assert.equal(s.cancelled.eventId, slotId(6));
  assert.equal(p.status, 'cancelled');
  assert.equal(p.specVersion, 7);
  assert.deepEqual(kinds(await checkLog(p.runId)), ['run_created', 'run_started', 'step_created', 'step_created', 'step_started', 'run_cancelled']);
});

test('eight runs started at once, each resumed from outside while its steps run: dense slots, one terminal each', async () => {
  const tokens = Array.from({ length: 8 }, (_, i) => `race-${world}-${Date.now().toString(36)}-${i}`);
  const { status, json } = await call('POST', '/api/invoke', { workflow: 'racer', argsList: tokens.map((t) => [t]) });
  assert.equal(status, 200, JSON.stringify(json));
  assert.equal(new Set(json.runIds).size, 8);
  // Each run's three payloads go in order; the eight runs' resumes race each other and the
  // runs' own writes (hook_received is written out of band, the runs' writes carry eventCount).
  await Promise.all(
    tokens.map(async (token) => {
      for (const text of ['x', 'y', 'z']) {
        const deadline = Date.now() + 20_000;
        while ((await call('POST', '/api/hook', { token, payload: { text } })).status !== 200) {
          assert.ok(Date.now() < deadline, `no hook took ${token}`);
          await sleep(50);
        }
      }
    }),
  );
  for (const runId of json.runIds) {
    const run = await ended(runId);
    assert.deepEqual(run.returnValue, { before: 1, after: 2, texts: ['x', 'y', 'z'] });
    const events = await checkLog(runId);
    assert.equal(events.length, 13);
    assert.equal(count(events, 'hook_received'), 3);
    assert.equal(count(events, 'step_completed'), 2);
    assert.equal(count(events, 'hook_created'), 1);
  }
});

test('the World declares spec 7 and every run of this suite is stamped 7 with a sealed log', async () => {
  const declared = await get('/api/world');
  assert.equal(declared.specVersion, 7);
  assert.equal(declared.getMany, true);
  assert.equal(declared.waitForTerminalStatus, true);
  // The World asked for is the one that ran: runlog has createBatch, world-local 5.0.0-beta.46 not.
  assert.equal(declared.createBatch, world === 'runlog');
  console.log(`[conformance-beta55] ${world}: createBatch ${declared.createBatch}, capabilities ${JSON.stringify(declared.capabilities)}`);
  assert.equal(seen.size, 32, "runs checked by the tests before this one (every earlier test ran)");
  for (const [runId, { run, events }] of seen) {
    assert.equal(run.specVersion, 7, runId);
    assert.equal(count(events, 'noop'), 0, runId);
  }
});
