// The package as a World module: what @workflow/core's createWorldFromModule accepts, the
// options and environment it reads, the queue it takes from world-local, and its storage
// methods (wired to the runlog World; test/world-storage.test.mjs tests them in depth).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { EntityConflictError, HookNotFoundError, WorkflowRunNotFoundError, WorkflowWorldError } from '@workflow/errors';
import { createWorldFromModule } from '@workflow/core/runtime';
import { describe, expect, test } from 'vitest';

import * as mod from '../index.js';
import { createWorld, DEFAULT_DATA_DIR, resolveConfig, STORAGE_METHODS, Store, toWorkflowError } from '../index.js';
import { rejection } from './helpers.mjs';
import { worldsPerTest } from './worlds-per-test.mjs';

const t = worldsPerTest((dir, options) => createWorld({ dataDir: `${dir}/data/runlog`, ...options }));
const world = (options) => t.world(options);

describe('module shape', () => {
  test('createWorldFromModule accepts the module and gets a spec-5 World', async () => {
    const previous = process.env.WORKFLOW_RUNLOG_DATA_DIR;
    process.env.WORKFLOW_RUNLOG_DATA_DIR = `${t.dir}/from-env`;
    try {
      const w = await createWorldFromModule(mod);
      t.track(w);
      expect(w.specVersion).toBe(5);
      expect(w.runlog.config.dataDir).toBe(`${t.dir}/from-env`);
    } finally {
      if (previous === undefined) delete process.env.WORKFLOW_RUNLOG_DATA_DIR;
      else process.env.WORKFLOW_RUNLOG_DATA_DIR = previous;
    }
  });

  test("the SDK's own CLI lists a runlog store: workflow inspect runs -b <this package> --json", async () => {
    const w = world();
    const { run } = await w.events.create(null, {
      eventType: 'run_created',
      specVersion: 5,
      eventData: { deploymentId: 'dpl_cli', workflowName: 'workflow//./cli//wf', input: new Uint8Array([1]) },
    });
    await w.close();
    const { execFile } = await import('node:child_process');
    const packageDir = path.resolve(new URL('..', import.meta.url).pathname);
    const stdout = await new Promise((resolve, reject) =>
      execFile(
        path.join(packageDir, 'node_modules', '.bin', 'workflow'),
        ['inspect', 'runs', '-b', './index.js', '--json'],
        { cwd: packageDir, env: { ...process.env, WORKFLOW_RUNLOG_DATA_DIR: `${t.dir}/data/runlog` }, timeout: 60_000 },
        (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve(out)),
      ),
    );
    // The CLI prints a banner and debug lines before the JSON.
    const listed = JSON.parse(stdout.slice(stdout.indexOf('\n{') + 1));
    expect(listed.data).toHaveLength(1);
    expect(listed.data[0]).toMatchObject({
      runId: run.runId,
      status: 'pending',
      workflowName: 'workflow//./cli//wf',
      deploymentId: 'dpl_cli',
    });
    expect(listed.hasMore).toBe(false);
  }, 90_000);

  test('package.json exports resolve for import and require.resolve (the SDK CLI uses the latter)', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(pkg.type).toBe('module');
    expect(pkg.exports['.'].default).toBe('./index.js');
    const { createRequire } = await import('node:module');
    const resolved = createRequire(import.meta.url).resolve('world-runlog');
    expect(resolved).toBe(path.resolve(new URL('../index.js', import.meta.url).pathname));
  });

  test('the World has the queue of world-local and every storage namespace', async () => {
    const w = world();
    for (const fn of ['queue', 'createQueueHandler', 'getDeploymentId', 'start', 'close']) {
      expect(typeof w[fn]).toBe('function');
    }
    expect(await w.getDeploymentId()).toMatch(/^dpl_local@5\.0\.0-beta\.29$/);
    for (const [ns, methods] of Object.entries(STORAGE_METHODS)) {
      for (const m of methods) expect(typeof w[ns][m]).toBe('function');
    }
    const handler = w.createQueueHandler('__wkf_workflow_', async () => {});
    const res = await handler(new Request('http://localhost/x', { method: 'POST' }));
    expect(res.status).toBe(400); // world-local's handler: missing queue headers
  });

  test('streamFlushIntervalMs is passed through when given', () => {
    expect(world({ streamFlushIntervalMs: 0 }).streamFlushIntervalMs).toBe(0);
    expect('streamFlushIntervalMs' in world()).toBe(false);
  });
});

describe('lifecycle', () => {
  test('start() opens the runlog store at dataDir and creates nothing else; close() releases it', async () => {
    const cwd = process.cwd();
    const w = world();
    await w.start();
    expect(readFileSync(`${t.dir}/data/runlog/FORMAT`, 'utf8')).toMatch(/^runlog-store format 1/);
    expect(readdirSync(`${t.dir}/data`)).toEqual(['runlog']);
    const store = await w.runlog.store();
    expect(store).toBeInstanceOf(Store);
    await store.createRun('wrun_probe');
    await w.close();
    expect(store.closed).toBe(true);
    await w.close(); // idempotent
    expect(existsSync(path.join(cwd, '.workflow-data', 'version.txt'))).toBe(false);
  });

  test('a closed World rejects store calls with CLOSED', async () => {
    const w = world();
    await w.start();
    const store = await w.runlog.store();
    await w.close();
    expect((await rejection(store.listRuns())).code).toBe('CLOSED');
  });

  test('start() with recovery on does not fail while storage is not wired', async () => {
    const w = world({ recoverActiveRuns: true });
    await expect(w.start()).resolves.toBeUndefined();
  });
});

describe('storage', () => {
  test("every storage method is wired, and rejects ('wrun_x', {}) with the exact SDK error for it", async () => {
    const w = world();
    // 400 INVALID_INPUT naming the argument at fault: a string where params go, {} an
    // object where a string goes (the package's type check) or a request without eventType
    // (the addon checks the request before the run id). 'wrun_x' is no wrun_<ULID>, so no
    // run of it exists: runs.get finds nothing, and streams.list lists no stream of it
    // (a stream needs only an id the store can hold); the hook lookups find nothing.
    const invalid = (field) => ({ name: 'WorkflowWorldError', status: 400, code: 'INVALID_INPUT', cause: { code: 'INVALID_INPUT', field } });
    const hookNotFound = { name: 'HookNotFoundError', cause: { code: 'NOT_FOUND', className: 'HookNotFoundError' } };
    const runNotFound = { name: 'WorkflowRunNotFoundError', cause: { code: 'NOT_FOUND' } };
    const resolves = { resolved: [] };
    const expected = {
      runs: { get: runNotFound, list: invalid('params') },
      steps: { get: invalid('stepId'), list: invalid('params') },
      events: { create: invalid('request'), get: invalid('eventId'), list: invalid('params'), listByCorrelationId: invalid('params') },
      hooks: { get: hookNotFound, getByToken: hookNotFound, list: invalid('params') },
      streams: {
        write: invalid('name'),
        writeMulti: invalid('name'),
        close: invalid('name'),
        get: invalid('name'),
        list: resolves,
        getChunks: invalid('name'),
        getInfo: invalid('name'),
      },
    };
    expect(Object.keys(expected)).toEqual(Object.keys(STORAGE_METHODS));
    const got = {};
    for (const [ns, methods] of Object.entries(STORAGE_METHODS)) {
      expect(Object.keys(expected[ns])).toEqual(methods);
      got[ns] = {};
      for (const m of methods) {
        expect(typeof w[ns][m]).toBe('function');
        const call = w[ns][m]('wrun_x', {});
        got[ns][m] = expected[ns][m] === resolves ? { resolved: await call } : await rejection(call);
      }
    }
    // All at once: a failure shows every method that deviates.
    expect(got).toMatchObject(expected);
    for (const [ns, methods] of Object.entries(got)) {
      for (const [m, err] of Object.entries(methods)) {
        if (expected[ns][m] === resolves) continue;
        const classOf = { HookNotFoundError, WorkflowRunNotFoundError, WorkflowWorldError }[err.name];
        expect(classOf?.is(err), `${ns}.${m}: ${err.name}`).toBe(true);
      }
    }
  });
});

describe('config', () => {
  const cwd = '/srv/app';
  test('dataDir: option, then WORKFLOW_RUNLOG_DATA_DIR, then WORKFLOW_LOCAL_DATA_DIR/runlog, then .workflow-data/runlog', () => {
    expect(DEFAULT_DATA_DIR).toBe(path.join('.workflow-data', 'runlog'));
    expect(resolveConfig({}, {}, cwd).dataDir).toBe('/srv/app/.workflow-data/runlog');
    expect(resolveConfig({}, { WORKFLOW_LOCAL_DATA_DIR: 'wd' }, cwd).dataDir).toBe('/srv/app/wd/runlog');
    expect(resolveConfig({}, { WORKFLOW_LOCAL_DATA_DIR: 'wd', WORKFLOW_RUNLOG_DATA_DIR: '/abs/r' }, cwd).dataDir).toBe('/abs/r');
    expect(resolveConfig({ dataDir: 'mine' }, { WORKFLOW_RUNLOG_DATA_DIR: '/abs/r' }, cwd).dataDir).toBe('/srv/app/mine');
  });

  test('recoverActiveRuns: option, then WORKFLOW_RUNLOG_…, then WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS, then true', () => {
    expect(resolveConfig({}, {}, cwd).recoverActiveRuns).toBe(true);
    expect(resolveConfig({}, { WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS: '0' }, cwd).recoverActiveRuns).toBe(false);
    expect(resolveConfig({}, { WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS: '0', WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS: 'true' }, cwd).recoverActiveRuns).toBe(true);
    expect(resolveConfig({ recoverActiveRuns: false }, { WORKFLOW_RUNLOG_RECOVER_ACTIVE_RUNS: '1' }, cwd).recoverActiveRuns).toBe(false);
    expect(resolveConfig({}, { WORKFLOW_LOCAL_RECOVER_ACTIVE_RUNS: 'maybe' }, cwd).recoverActiveRuns).toBe(true);
  });

  test('undefined options are ignored; bad ones, unknown ones and tag are refused', () => {
    expect(resolveConfig({ dataDir: undefined, port: 3000 }, {}, cwd)).toMatchObject({ dataDir: '/srv/app/.workflow-data/runlog', port: 3000 });
    for (const bad of [{ tag: 'vitest-0' }, { datadir: 'x' }, { port: 0 }, { dataDir: '' }, { recoverActiveRuns: 'no' }, { store: 5 }]) {
      expect(() => resolveConfig(bad, {}, cwd)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });

  test('store options reach Store.open', async () => {
    const w = world({ store: { payloadLenBytesMax: 4, batchLenBytesMax: 1 << 20 } });
    const store = await w.runlog.store();
    await store.createRun('r');
    expect((await rejection(store.appendFacts('r', [{ kind: 'k', payload: '12345' }]))).code).toBe('INVALID_INPUT');
  });
});

describe('toWorkflowError', () => {
  test('store codes become the SDK classes the runtime dispatches on', async () => {
    const tmpStore = await Store.open(`${t.dir}/e.runlog`);
    try {
      const notFound = toWorkflowError(await rejection(tmpStore.read('wrun_missing')));
      expect(WorkflowRunNotFoundError.is(notFound)).toBe(true);
      expect(notFound.runId).toBe('wrun_missing');
      expect(notFound.cause.code).toBe('NOT_FOUND');
      await tmpStore.createRun('r');
      expect(EntityConflictError.is(toWorkflowError(await rejection(tmpStore.createRun('r'))))).toBe(true);
      const bad = toWorkflowError(await rejection(tmpStore.createRun('a.b')));
      expect(bad).toMatchObject({ name: 'WorkflowWorldError', status: 400, code: 'INVALID_INPUT' });
    } finally {
      await tmpStore.close();
    }
  });

  test('World-layer rejections (className, status) become their classes', () => {
    const e = (className, fields = {}) => Object.assign(new Error('m'), { className, ...fields });
    expect(toWorkflowError(e('EntityConflictError')).name).toBe('EntityConflictError');
    expect(toWorkflowError(e('RunExpiredError')).name).toBe('RunExpiredError');
    expect(toWorkflowError(e('TooEarlyError', { retryAfter: 3 }))).toMatchObject({ name: 'TooEarlyError', retryAfter: 3 });
    expect(toWorkflowError(e('HookNotFoundError', { hook: 'tok' }))).toMatchObject({ name: 'HookNotFoundError', token: 'tok' });
    expect(toWorkflowError(e('WorkflowRunNotFoundError', { runId: 'wrun_1' }))).toMatchObject({ runId: 'wrun_1' });
    expect(toWorkflowError(e('RunNotSupportedError', { found: 6, supported: 5 }))).toMatchObject({ runSpecVersion: 6, worldSpecVersion: 5 });
    expect(toWorkflowError(e('PreconditionFailedError')).name).toBe('PreconditionFailedError');
    expect(toWorkflowError(e('AttributeValidationError')).name).toBe('AttributeValidationError');
    expect(toWorkflowError(e('WorkflowWorldError', { status: 503, code: 'BUSY' }))).toMatchObject({ status: 503, code: 'BUSY' });
    const plain = new Error('other');
    expect(toWorkflowError(plain)).toBe(plain);
  });
});
