// Issue 20 through createWorld(): a damaged run is never dropped from a store-wide read
// (items 1, 2), start() reports the active runs it cannot recover, a hook token claim whose
// hook_created never committed never blocks another run (item 3: strace on a real child
// process, EIO on its fdatasync and SIGKILL as it writes), and the SDK's own probes are
// answered (item 5: getRun(id).exists, `workflow health`, the queue's base URL).
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { getRun, healthCheck, setWorld, workflowEntrypoint } from '@workflow/core/runtime';
import { WorkflowRunNotFoundError, WorkflowWorldError } from '@workflow/errors';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';

import { createWorld } from '../index.js';
import { CLI_DEFAULT_BASE_URL, withBaseUrlFallback } from '../src/base-url.js';
import { rejection, tempDir } from './helpers.mjs';

const PACKAGE = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

let tmp;
let dataDir;
const worlds = [];

function world(options = {}) {
  const w = createWorld({ dataDir, recoverActiveRuns: false, ...options });
  worlds.push(w);
  return w;
}

beforeEach(() => {
  tmp = tempDir();
  dataDir = path.join(tmp.dir, '.workflow-data', 'runlog');
});

afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
  vi.restoreAllMocks();
  tmp.cleanup();
});

async function createRun(w, workflowName = 'workflow//./t//wf') {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_test', workflowName, input: new Uint8Array([1]) },
  });
  return run.runId;
}

async function runningRun(w) {
  const runId = await createRun(w);
  await w.events.create(runId, { eventType: 'run_started', specVersion: 5 });
  return runId;
}

const step = (w, runId, stepId, name = 'step//./t//add') =>
  w.events.create(runId, {
    eventType: 'step_created',
    specVersion: 5,
    correlationId: stepId,
    eventData: { stepName: name, input: new Uint8Array([2]) },
  });

const hook = (w, runId, hookId, token) =>
  w.events.create(runId, { eventType: 'hook_created', specVersion: 5, correlationId: hookId, eventData: { token } });

/** Flips a byte of `marker` in run `runId`'s segment (a batch with valid batches after it). */
function flip(runId, marker) {
  const segment = path.join(dataDir, 'runs', runId, 'seg-00000001.log');
  const bytes = readFileSync(segment);
  const at = bytes.indexOf(marker);
  expect(at).toBeGreaterThan(0);
  bytes[at] ^= 0x20;
  writeFileSync(segment, bytes);
}

/** A running run whose seq 4 is damaged: seqs 1–3 (created, started, step s1) are readable. */
async function damagedRun(w, marker) {
  const runId = await runningRun(w);
  await step(w, runId, 's1');
  await step(w, runId, 's2', `step//./t//${marker}`);
  await step(w, runId, 's3');
  return runId;
}

describe('store-wide reads of a store holding a damaged run', () => {
  test('runs.list lists it as its readable part with storageError; runs.get rejects CORRUPT', async () => {
    const w1 = world();
    const intact = await runningRun(w1);
    const damaged = await damagedRun(w1, 'DAMAGE_LIST');
    await w1.close();
    flip(damaged, 'DAMAGE_LIST');
    const w = world();
    const page = await w.runs.list({ resolveData: 'none' });
    expect(page.data.map((r) => r.runId)).toEqual([damaged, intact]);
    expect(page.hasMore).toBe(false);
    const [d, i] = page.data;
    expect(i.storageError).toBeUndefined();
    expect(d).toMatchObject({ runId: damaged, status: 'running', workflowName: 'workflow//./t//wf' });
    expect(d.storageError).toMatchObject({ runId: damaged, code: 'CORRUPT', readableSeq: 3, segment: 'seg-00000001.log' });
    expect(d.storageError.offset).toBeGreaterThan(4096);
    expect(d.storageError.message).toContain(damaged);
    expect(d.createdAt).toBeInstanceOf(Date);
    // Filters: a damaged running run may have completed past its damage; never pending.
    expect((await w.runs.list({ status: 'completed' })).data.map((r) => r.runId)).toEqual([damaged]);
    expect((await w.runs.list({ status: 'pending' })).data).toEqual([]);
    const err = await rejection(w.runs.get(damaged));
    expect(WorkflowWorldError.is(err)).toBe(true);
    expect(err.status).toBe(500);
    expect(err.cause).toMatchObject({ code: 'CORRUPT', runId: damaged });
  });

  test('start() re-enqueues the intact active runs and reports the damaged one', async () => {
    const w1 = world();
    const pending = await createRun(w1);
    const running = await runningRun(w1);
    const damaged = await damagedRun(w1, 'DAMAGE_START');
    await w1.close();
    flip(damaged, 'DAMAGE_START');
    const w = world({ recoverActiveRuns: true });
    const enqueued = [];
    w.queue = async (name, payload) => {
      enqueued.push([name, payload.runId]);
      return { messageId: `msg_${enqueued.length}` };
    };
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.spyOn(console, 'log').mockImplementation(() => {});
    await w.start();
    expect(enqueued.map(([, runId]) => runId).sort()).toEqual([pending, running].sort());
    expect(enqueued.every(([name]) => name === '__wkf_workflow_workflow//./t//wf')).toBe(true);
    const warned = warn.mock.calls.map((c) => String(c[0])).filter((m) => m.includes(damaged));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('CORRUPT');
    expect(w.runlog.recovery.unrecovered).toEqual([
      { runId: damaged, code: 'CORRUPT', message: expect.stringContaining('seg-00000001.log'), readableSeq: 3 },
    ]);
  });

  test('hooks.list() and listByCorrelationId serve intact runs and fail naming the damaged run where the answer may lie past it', async () => {
    const w1 = world();
    const intact = await runningRun(w1);
    await hook(w1, intact, 'hook_intact', 'tok-intact');
    await step(w1, intact, 'step_intact');
    // A hook before the damage (seq 3), a step whose later events lie past it.
    const damaged = await runningRun(w1);
    await hook(w1, damaged, 'hook_before', 'tok-before');
    await step(w1, damaged, 'step_damaged', 'step//./t//DAMAGE_HOOKS');
    await w1.events.create(damaged, { eventType: 'step_started', specVersion: 5, correlationId: 'step_damaged' });
    await w1.close();
    flip(damaged, 'DAMAGE_HOOKS');
    const w = world();
    const hooks = await w.hooks.list({});
    const listed = hooks.data.map((h) => [h.runId, h.hookId, h.storageError?.code ?? null]);
    expect(listed.sort()).toEqual([[damaged, 'hook_before', 'CORRUPT'], [intact, 'hook_intact', null]].sort());
    // An intact run's entity: its events, in full.
    const found = await w.events.listByCorrelationId({ correlationId: 'step_intact' });
    expect(found.data.map((e) => [e.runId, e.eventType])).toEqual([[intact, 'step_created']]);
    // Found nowhere readable, or found in the damaged run: loud, naming it.
    for (const correlationId of ['step_nowhere', 'step_damaged']) {
      const err = await rejection(w.events.listByCorrelationId({ correlationId }));
      expect(WorkflowWorldError.is(err), correlationId).toBe(true);
      expect(err.status).toBe(500);
      expect(err.cause).toMatchObject({ code: 'CORRUPT', runId: damaged, runIds: damaged });
      expect(err.message).toContain(damaged);
    }
  });
});

/** Whether strace can run a child here (RUNLOG_NO_SKIP=1: it must). */
function straceWorks() {
  const ok = spawnSync('strace', ['-o', '/dev/null', 'true']).status === 0;
  if (!ok && process.env.RUNLOG_NO_SKIP === '1') throw new Error('RUNLOG_NO_SKIP=1 but strace cannot trace a child here');
  return ok;
}

/**
 * A child `node` asks createWorld() for hook `hook_child` with token `tok-js` on `runId`,
 * under strace injecting `inject` into the first such syscall on that run's segment file
 * (its append of the hook_created, after its claim committed); its stdout.
 */
function childHookCreated(runId, inject) {
  const script = path.join(tmp.dir, 'child.mjs');
  writeFileSync(
    script,
    `import { createWorld } from ${JSON.stringify(path.join(PACKAGE, 'index.js'))};
const w = createWorld({ dataDir: ${JSON.stringify(dataDir)}, recoverActiveRuns: false });
try {
  const r = await w.events.create(${JSON.stringify(runId)}, { eventType: 'hook_created', specVersion: 5, correlationId: 'hook_child', eventData: { token: 'tok-js' } });
  console.log('RESULT ' + JSON.stringify({ eventType: r.event.eventType }));
} catch (e) {
  console.log('RESULT ' + JSON.stringify({ name: e.name, status: e.status, code: e.cause?.code }));
}
await w.close();
`,
  );
  const segment = path.join(dataDir, 'runs', runId, 'seg-00000001.log');
  const [syscall] = inject.split(':');
  const out = spawnSync(
    'strace',
    ['-f', '-qq', '-o', '/dev/null', '-P', segment, '-e', `trace=${syscall}`, '-e', `inject=${inject}:when=1`, process.execPath, script],
    { encoding: 'utf8', timeout: 60_000 },
  );
  return out;
}

describe.skipIf(!straceWorks())('a token claim whose hook_created never committed (real child processes)', () => {
  for (const [what, inject, check] of [
    [
      'its fdatasync fails with EIO',
      'fdatasync:error=EIO',
      (out) => expect(out.stdout).toContain('RESULT {"name":"WorkflowWorldError","status":500,"code":"IO"}'),
    ],
    ['it is killed (SIGKILL) as it writes the batch', 'pwrite64:signal=KILL', (out) => expect(out.stdout).not.toContain('RESULT')],
  ]) {
    test(`${what}: another run's hook_created takes the token and getByToken finds it`, async () => {
      const w1 = world();
      const a = await runningRun(w1);
      const b = await runningRun(w1);
      await w1.close();
      const out = childHookCreated(a, inject);
      check(out);
      const w = world();
      // The claimant's run holds no hook_created.
      const events = (await w.events.list({ runId: a })).data.map((e) => e.eventType);
      expect(events).toEqual(['run_created', 'run_started']);
      const { event } = await hook(w, b, 'hook_b', 'tok-js');
      expect(event.eventType).toBe('hook_created');
      expect(await w.hooks.getByToken('tok-js')).toMatchObject({ runId: b, hookId: 'hook_b', token: 'tok-js' });
      // The claimant's hook has its outcome in its own log: the conflict naming b.
      const after = (await w.events.list({ runId: a })).data;
      expect(after.at(-1)).toMatchObject({ eventType: 'hook_conflict', correlationId: 'hook_child' });
      expect(after.at(-1).eventData).toEqual({ token: 'tok-js', conflictingRunId: b });
    });
  }
});

describe("the SDK's own probes", () => {
  test('getRun(id).exists of an id that cannot exist is false; reads answer WorkflowRunNotFoundError', async () => {
    const w = world();
    setWorld(w);
    expect(await getRun('my-run-id').exists).toBe(false);
    for (const read of [
      () => w.runs.get('my-run-id', { resolveData: 'none' }),
      () => w.steps.get('my-run-id', 'step_1'),
      () => w.events.list({ runId: 'my-run-id' }),
      () => w.events.create('my-run-id', { eventType: 'run_started', specVersion: 5 }),
    ]) {
      const err = await rejection(read());
      expect(WorkflowRunNotFoundError.is(err), String(err)).toBe(true);
    }
    // A write that would store the id as a run's is still refused with a 400.
    const created = await rejection(
      w.events.create('my-run-id', { eventType: 'run_created', specVersion: 5, eventData: { deploymentId: 'd', workflowName: 'wf', input: null } }),
    );
    expect(created).toMatchObject({ name: 'WorkflowWorldError', status: 400 });
    expect((await w.runs.list()).data).toEqual([]);
  });

  test("`workflow health`'s queue round trip is healthy: streams of wrun_hc_<ULID> are written and read", async () => {
    const entry = workflowEntrypoint('');
    const server = createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const headers = Object.entries(req.headers).filter(([, v]) => typeof v === 'string');
      const response = await entry(
        new Request(`http://localhost${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined }),
      );
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const w = world({ baseUrl: `http://127.0.0.1:${server.address().port}` });
      setWorld(w);
      const result = await healthCheck(w, 'workflow', { timeout: 15_000 });
      expect(result, JSON.stringify(result)).toMatchObject({ healthy: true });
    } finally {
      server.close();
    }
  });

  test('createWorld() with nothing configured, in a process listening on no port (the CLI), delivers to http://localhost:3000', async () => {
    // The app's server stands in a child process on 3000 (this process must listen on none).
    const server = spawn(process.execPath, [
      '-e',
      `require('http').createServer((q, s) => { console.log('GOT', q.url, q.headers['x-vqs-queue-name']); s.end('{}'); })
        .on('error', (e) => { console.log('ERROR', e.code); process.exit(0); })
        .listen(3000, () => console.log('LISTENING'));`,
    ]);
    let out = '';
    const seen = (word) =>
      new Promise((resolve) => {
        const look = () => (out.includes(word) || out.includes('ERROR') ? resolve(out) : setTimeout(look, 20));
        look();
      });
    server.stdout.on('data', (d) => (out += d));
    const env = { ...process.env };
    delete process.env.PORT;
    delete process.env.WORKFLOW_LOCAL_BASE_URL;
    try {
      await seen('LISTENING');
      if (out.includes('ERROR')) {
        if (process.env.RUNLOG_NO_SKIP === '1') throw new Error(`port 3000 is taken here: ${out}`);
        return;
      }
      const w = world();
      await w.queue('__wkf_workflow_probe', { runId: 'wrun_probe' });
      await Promise.race([seen('GOT'), new Promise((r) => setTimeout(r, 10_000))]);
      expect(out).toContain('GOT /.well-known/workflow/v1/flow __wkf_workflow_probe');
    } finally {
      process.env = env;
      server.kill();
    }
  });

  test('with nothing configured and no port of its own, the queue delivers to the CLI default, as the CLI gives the local World', async () => {
    const sent = [];
    const queueOf = (tag) => async (name, message) => {
      sent.push([tag, name, message.runId]);
      return { messageId: `msg_${sent.length}` };
    };
    let starting = false;
    let listening = false;
    const fallbacks = [];
    const make = (config) =>
      withBaseUrlFallback({
        queue: queueOf('local'),
        config,
        fallbackWorld: () => {
          fallbacks.push(CLI_DEFAULT_BASE_URL);
          return { queue: queueOf('fallback') };
        },
        inStart: () => starting,
        listens: async () => listening,
      });
    const env = { ...process.env };
    delete process.env.PORT;
    delete process.env.WORKFLOW_LOCAL_BASE_URL;
    try {
      const q = make({});
      await q('__wkf_workflow_x', { runId: 'r1' });
      starting = true;
      await q('__wkf_workflow_x', { runId: 'r2' });
      starting = false;
      listening = true;
      await q('__wkf_workflow_x', { runId: 'r3' });
      listening = false;
      await make({ port: 4000 })('__wkf_workflow_x', { runId: 'r4' });
      process.env.PORT = '5000';
      await make({})('__wkf_workflow_x', { runId: 'r5' });
    } finally {
      process.env = env;
    }
    expect(sent.map(([tag, , runId]) => [tag, runId])).toEqual([
      ['fallback', 'r1'],
      ['local', 'r2'],
      ['local', 'r3'],
      ['local', 'r4'],
      ['local', 'r5'],
    ]);
    expect(CLI_DEFAULT_BASE_URL).toBe('http://localhost:3000');
  });
});
