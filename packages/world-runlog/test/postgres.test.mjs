// The store and the World on PostgreSQL (issue 14): Store.open of a postgres:// URL, the
// RunLog calls through it, commitStats refused with UNSUPPORTED, a read-only handle, and
// createWorld({ url }) / WORKFLOW_RUNLOG_URL selecting it. An unreachable server rejects
// with IO (tested without any server). The server tests need RUNLOG_PG_URL (a throwaway
// server: `eval "$(.ci/pg-server.sh start)"`); without it they are skipped, unless
// RUNLOG_NO_SKIP=1 (set by .ci/run) or RUNLOG_REQUIRE_PG=1, where they fail.
import { spawnSync } from 'node:child_process';

import { WorkflowWorldError } from '@workflow/errors';
import { createWorldFromModule } from '@workflow/core/runtime';
import { afterEach, describe, expect, test } from 'vitest';

import * as mod from '../index.js';
import { createWorld, isPostgresUrl, resolveConfig, Store } from '../index.js';
import { facts, pgUrl, rejection, withFreshSchema } from './helpers.mjs';

const server = pgUrl();
const closers = [];

afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c.close();
});

async function open(url, readOnly = false) {
  const s = readOnly ? await Store.openReadOnly(url) : await Store.open(url);
  closers.push(s);
  return s;
}

function world(options) {
  const w = createWorld({ recoverActiveRuns: false, ...options });
  closers.push(w);
  return w;
}

/** A socket directory that does not exist: connecting fails at once. */
const UNREACHABLE = 'postgresql://postgres@%2Fnonexistent-runlog-socket-dir/postgres';

describe('selecting PostgreSQL (no server needed)', () => {
  const cwd = '/srv/app';
  test('url option, then WORKFLOW_RUNLOG_URL; the file store stays the default', () => {
    expect(resolveConfig({}, {}, cwd)).toMatchObject({
      backend: 'file',
      dataDir: '/srv/app/.workflow-data/runlog',
      target: '/srv/app/.workflow-data/runlog',
    });
    const url = 'postgres://u:pw@db:5432/app?schema=wf';
    expect(resolveConfig({ url }, {}, cwd)).toMatchObject({ backend: 'postgres', url, target: url });
    expect(resolveConfig({}, { WORKFLOW_RUNLOG_URL: url }, cwd)).toMatchObject({ backend: 'postgres', url });
    // The variable outranks WORKFLOW_RUNLOG_DATA_DIR; an explicit dataDir outranks both.
    expect(resolveConfig({}, { WORKFLOW_RUNLOG_URL: url, WORKFLOW_RUNLOG_DATA_DIR: '/d' }, cwd).backend).toBe('postgres');
    expect(resolveConfig({ dataDir: 'mine' }, { WORKFLOW_RUNLOG_URL: url }, cwd)).toMatchObject({
      backend: 'file',
      dataDir: '/srv/app/mine',
    });
    // world-postgres's variable is not runlog's.
    expect(resolveConfig({}, { WORKFLOW_POSTGRES_URL: url }, cwd).backend).toBe('file');
    expect(isPostgresUrl('PostgreSQL:///db?host=/tmp')).toBe(true);
    expect(isPostgresUrl('./postgres://x')).toBe(false);
  });

  test('a url that is no PostgreSQL URL, a URL as dataDir, and both together are refused', () => {
    for (const [options, env] of [
      [{ url: '/var/data' }, {}],
      [{ url: 5 }, {}],
      [{ dataDir: 'postgres://h/db' }, {}],
      [{ url: 'postgres://h/db', dataDir: 'x' }, {}],
      [{}, { WORKFLOW_RUNLOG_URL: 'mysql://h/db' }],
      [{}, { WORKFLOW_RUNLOG_DATA_DIR: 'postgresql://h/db' }],
    ]) {
      expect(() => resolveConfig(options, env, cwd), JSON.stringify([options, env])).toThrow(
        expect.objectContaining({ code: 'INVALID_INPUT' }),
      );
    }
  });

  test('an unreachable server rejects with IO: Store.open, start(), every storage call', async () => {
    const err = await rejection(Store.open(UNREACHABLE));
    expect(err).toMatchObject({ code: 'IO', path: 'postgres' });
    const w = world({ url: UNREACHABLE });
    expect(await rejection(w.start())).toMatchObject({ code: 'IO', path: 'postgres' });
    // Every promise gets its handler at once: one that rejects early is never unhandled.
    for (const e of await Promise.all([w.runs.list(), w.events.create(null, { eventType: 'run_created', eventData: {} }), w.hooks.getByToken('t')].map(rejection))) {
      expect(WorkflowWorldError.is(e)).toBe(true);
      expect(e.status).toBe(500);
      expect(e.cause).toMatchObject({ code: 'IO', path: 'postgres' });
    }
    // A failed open is not kept: the next call connects again (and fails again here).
    expect((await rejection(w.runs.list())).cause.code).toBe('IO');
  });

  test('a separate Node process with an unreachable server rejects, goes on, and exits 0', () => {
    const script = `
      import { createWorld } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
      const w = createWorld({ url: ${JSON.stringify(UNREACHABLE)}, recoverActiveRuns: false });
      const codes = [];
      for (const p of [w.start(), w.runs.list(), w.streams.write('wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV', 's', 'x')]) {
        codes.push(await p.then(() => 'resolved', (e) => e.cause?.code ?? e.code));
      }
      await w.close();
      console.log(JSON.stringify(codes));
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual(['IO', 'IO', 'IO']);
  });
});

describe.skipIf(!server)('Store on PostgreSQL', () => {
  test('open reports the backend and the URL; the RunLog calls work as on files', async () => {
    const url = withFreshSchema(server);
    const store = await open(url);
    expect(store.backend).toBe('postgres');
    expect(store.path).toBe(url);
    expect(store.readOnly).toBe(false);
    await store.createRun('r1', Buffer.from('meta'));
    expect((await store.runMeta('r1')).toString()).toBe('meta');
    const appended = await store.appendFacts('r1', [...facts(2), { kind: 'k', payload: Buffer.from([0, 255]), key: 'once' }]);
    expect(appended.map((a) => a.seq)).toEqual([1, 2, 3]);
    const again = await store.appendFacts('r1', [{ kind: 'k', payload: 'x', key: 'once' }]);
    expect(again).toEqual([{ seq: 3, duplicate: true }]);
    expect(await store.appendDecisions('r1', 3, [{ kind: 'run_completed', payload: '{}' }])).toEqual([4]);
    const fenced = await rejection(store.appendDecisions('r1', 3, [{ kind: 'run_failed' }]));
    expect(fenced).toMatchObject({ code: 'FENCED', runId: 'r1', expected: 3, actual: 4 });
    const page = await store.read('r1', 2, 10);
    expect(page.events.map((e) => [e.seq, e.kind])).toEqual([
      [3, 'k'],
      [4, 'run_completed'],
    ]);
    expect([...page.events[0].payload]).toEqual([0, 255]);
    expect((await store.runInfo('r1')).lastSeq).toBe(4);
    expect((await store.verifyRun('r1')).ok).toBe(true);
    expect((await store.listRuns()).runs.map((r) => r.runId)).toEqual(['r1']);
    expect((await rejection(store.createRun('r1'))).code).toBe('EXISTS');
    await store.deleteRun('r1');
    expect((await rejection(store.read('r1'))).code).toBe('NOT_FOUND');
  });

  test('commitStats throws UNSUPPORTED (a file store counter); the store goes on', async () => {
    const store = await open(withFreshSchema(server));
    let thrown;
    try {
      store.commitStats();
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ code: 'UNSUPPORTED', op: 'commitStats' });
    await store.createRun('r');
    expect(await store.lastSeq('r')).toBe(0);
  });

  test('a wait is woken by a commit of another handle; a read-only handle reads and cannot write', async () => {
    const url = withFreshSchema(server);
    const a = await open(url);
    const b = await open(url);
    await a.createRun('r');
    const waiting = b.wait('r', 0, 10_000);
    await a.appendFacts('r', facts(1));
    expect(await waiting).toBe(1);
    const ro = await open(url, true);
    expect(ro.readOnly).toBe(true);
    expect((await ro.read('r')).events).toHaveLength(1);
    const refused = await rejection(ro.appendFacts('r', facts(1)));
    expect(refused).toMatchObject({ code: 'IO', path: 'postgres' });
    expect(await a.lastSeq('r')).toBe(1);
  });

  test("a server's refusal reaches JavaScript with the server's reason, not only the client's \"db error\"", async () => {
    const url = withFreshSchema(server);
    const a = await open(url);
    await a.createRun('r');
    const ro = await open(url, true);
    const refused = await rejection(ro.appendFacts('r', facts(1)));
    expect(refused).toMatchObject({ code: 'IO', path: 'postgres' });
    expect(refused.message).toMatch(/ERROR( 25006)?:? .*read-only transaction/);
  });

  test('payloadLenBytesMax reaches the PostgreSQL store', async () => {
    const store = await Store.open(withFreshSchema(server), { payloadLenBytesMax: 4 });
    closers.push(store);
    await store.createRun('r');
    expect((await rejection(store.appendFacts('r', [{ kind: 'k', payload: '12345' }]))).code).toBe('INVALID_INPUT');
    expect(await store.lastSeq('r')).toBe(0);
  });
});

describe.skipIf(!server)('World on PostgreSQL', () => {
  test('createWorld({ url }): events, entities and a stream, seen by a second World on the schema', async () => {
    const url = withFreshSchema(server);
    const w = world({ url });
    expect(w.runlog.config).toMatchObject({ backend: 'postgres', url });
    const { run } = await w.events.create(null, {
      eventType: 'run_created',
      specVersion: 5,
      eventData: { deploymentId: 'dpl', workflowName: 'workflow//./t//wf', input: new Uint8Array([1, 0, 2]) },
    });
    expect((await w.runlog.store()).backend).toBe('postgres');
    await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
    await w.events.create(run.runId, {
      eventType: 'hook_created',
      specVersion: 5,
      correlationId: 'hook_1',
      eventData: { token: 'tok-pg' },
    });
    await w.streams.write(run.runId, 'strm_out', 'hello');
    await w.streams.close(run.runId, 'strm_out');

    const other = world({ url });
    const got = await other.runs.get(run.runId);
    expect(got.status).toBe('running');
    expect([...got.input]).toEqual([1, 0, 2]);
    expect((await other.hooks.getByToken('tok-pg')).hookId).toBe('hook_1');
    const events = await other.events.list({ runId: run.runId });
    expect(events.data.map((e) => e.eventType)).toEqual(['run_created', 'run_started', 'hook_created']);
    expect((await other.streams.getInfo(run.runId, 'strm_out'))).toEqual({ tailIndex: 0, done: true });
    const done = await other.events.create(run.runId, { eventType: 'run_completed', specVersion: 5, eventData: { output: 1 } });
    expect(done.run.status).toBe('completed');
    const late = await rejection(w.events.create(run.runId, { eventType: 'run_failed', specVersion: 5, eventData: { error: 'x' } }));
    expect(late.name).toBe('EntityConflictError');
  });

  test('WORKFLOW_RUNLOG_URL selects PostgreSQL for createWorldFromModule (how the SDK loads the World)', async () => {
    const url = withFreshSchema(server);
    const previous = process.env.WORKFLOW_RUNLOG_URL;
    process.env.WORKFLOW_RUNLOG_URL = url;
    try {
      const w = await createWorldFromModule(mod);
      closers.push(w);
      expect(w.runlog.config.backend).toBe('postgres');
      await w.start();
      expect((await w.runs.list()).data).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.WORKFLOW_RUNLOG_URL;
      else process.env.WORKFLOW_RUNLOG_URL = previous;
    }
  });
});
