// Issue 20 item 4 through createWorld(): a store this process cannot write (another user's,
// a read-only mount) opens read-only. Every read works (runs, events, steps, hooks, streams),
// every write rejects with READ_ONLY (WorkflowWorldError 403, naming the store), nothing is
// written, and start() says so once and re-enqueues nothing (runlog.readOnly,
// runlog.recovery.skipped). readOnly: false refuses such a store; a missing data directory
// that cannot be created and a directory of other files fail start() naming the path. The
// World runs in a child process: as `nobody` (setpriv) on a store written by root (0755
// directories, 0644 files), and as root on a tmpfs remounted read-only.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { createWorld } from '../index.js';
import { rejection, tempDir } from './helpers.mjs';

const CHILD = fileURLToPath(new URL('./fixtures/read-only-world.mjs', import.meta.url));
const NOBODY = ['--reuid=nobody', '--regid=nogroup', '--clear-groups'];
const EACCES = 13;
const EROFS = 30;

/** Whether `check` passes here; with RUNLOG_NO_SKIP=1 a failing check is an error, never a skip. */
function available(what, check) {
  const ok = check();
  if (!ok && process.env.RUNLOG_NO_SKIP === '1') throw new Error(`RUNLOG_NO_SKIP=1 but ${what} is not available here`);
  return ok;
}
const setprivWorks = () => spawnSync('setpriv', [...NOBODY, 'true']).status === 0;
const isRoot = () => process.getuid?.() === 0;

let tmp;
beforeEach(() => {
  tmp = tempDir('world-read-only-');
  chmodSync(tmp.dir, 0o755);
});
afterEach(() => {
  spawnSync('umount', [path.join(tmp.dir, 'mnt')]);
  tmp.cleanup();
});

/** A store as an app leaves it: a running run with a step, a hook and a stream `out`. */
async function writeStore(dataDir) {
  const w = createWorld({ dataDir, recoverActiveRuns: false });
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_ro', workflowName: 'workflow//./ro//wf', input: new Uint8Array([1]) },
  });
  const runId = run.runId;
  await w.events.create(runId, { eventType: 'run_started', specVersion: 5 });
  await w.events.create(runId, { eventType: 'step_created', specVersion: 5, correlationId: 'step_1', eventData: { stepName: 'step//./ro//s', input: new Uint8Array([2]) } });
  await w.events.create(runId, { eventType: 'hook_created', specVersion: 5, correlationId: 'hook_1', eventData: { token: 'tok_ro' } });
  await w.streams.write(runId, 'out', Buffer.from('hello'));
  await w.close();
  return runId;
}

function chmodTree(p) {
  const dir = statSync(p).isDirectory();
  chmodSync(p, dir ? 0o755 : 0o644);
  if (dir) for (const name of readdirSync(p)) chmodTree(path.join(p, name));
}

/** Every file under `root` with its bytes and mtime. */
function snapshot(root) {
  const out = {};
  const walk = (p) => {
    const st = statSync(p);
    if (st.isDirectory()) readdirSync(p).forEach((n) => walk(path.join(p, n)));
    else out[path.relative(root, p)] = [st.mtimeMs, readFileSync(p).toString('base64')];
  };
  walk(root);
  return out;
}

/** Runs the child World (as `nobody` when `asNobody`) and returns what it printed. */
function child(dataDir, { asNobody, options = {}, runId = 'wrun_0', token = 'tok_ro' }) {
  const args = [process.execPath, CHILD, dataDir, JSON.stringify(options), runId, token];
  const opts = { encoding: 'utf8', timeout: 30_000 };
  const r = asNobody ? spawnSync('setpriv', [...NOBODY, ...args], opts) : spawnSync(args[0], args.slice(1), opts);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

/** What a read-only World answers on the store of writeStore(). */
function expectReadOnlyWorld(out, dataDir, runId, errno) {
  expect(out.start).toEqual({ ok: null });
  expect(out.readOnly).toEqual({ path: dataDir, requested: false, cause: { code: 'IO', errno, path: path.join(dataDir, 'FORMAT') } });
  expect(out.warnings).toHaveLength(1);
  expect(out.warnings[0]).toContain(`the store at ${dataDir} is open read-only`);
  expect(out.warnings[0]).toContain('active runs are not re-enqueued');
  expect(out.recovery).toEqual({ unrecovered: [], skipped: 'read-only' });
  expect(out.runsList).toEqual({ ok: [[runId, 'running', null]] });
  expect(out.runsGet).toEqual({ ok: 'running' });
  expect(out.eventsList).toEqual({ ok: ['run_created', 'run_started', 'step_created', 'hook_created'] });
  expect(out.byCorrelation).toEqual({ ok: ['step_created'] });
  expect(out.stepsList).toEqual({ ok: ['step_1'] });
  expect(out.hooksList).toEqual({ ok: ['hook_1'] });
  expect(out.hookByToken).toEqual({ ok: 'hook_1' });
  expect(out.streamsList).toEqual({ ok: ['out'] });
  expect(out.streamChunks).toEqual({ ok: ['hello'] });
  expect(out.readFromStream).toEqual({ ok: 'hello' });
  for (const write of ['createEvent', 'createRun', 'streamWrite']) {
    const { error } = out[write];
    expect(error, write).toMatchObject({ name: 'WorkflowWorldError', status: 403, code: 'READ_ONLY' });
    expect(error.message, write).toContain(dataDir);
  }
}

describe.skipIf(!available('setpriv as nobody', setprivWorks))('as another user (nobody), on a store root wrote', () => {
  test('every read works, every write is READ_ONLY 403, start() warns once, nothing is written', async () => {
    const dataDir = path.join(tmp.dir, '.workflow-data', 'runlog');
    const runId = await writeStore(dataDir);
    chmodTree(tmp.dir);
    const before = snapshot(dataDir);
    expectReadOnlyWorld(child(dataDir, { asNobody: true, runId }), dataDir, runId, EACCES);
    expect(snapshot(dataDir)).toEqual(before);
  });

  test('readOnly: false refuses it in start(): the refused open for writing, naming the store', async () => {
    const dataDir = path.join(tmp.dir, 'runlog');
    await writeStore(dataDir);
    chmodTree(tmp.dir);
    const out = child(dataDir, { asNobody: true, options: { readOnly: false } });
    expect(out.start.error).toMatchObject({ code: 'IO', errno: EACCES, path: path.join(dataDir, 'FORMAT') });
    expect(out.start.error.message).toContain(`world-runlog: cannot open the store at ${dataDir}`);
  });

  test('a missing data directory it cannot create fails start() naming the path', () => {
    const dataDir = path.join(tmp.dir, '.workflow-data', 'runlog');
    const out = child(dataDir, { asNobody: true });
    expect(out.start.error).toMatchObject({ code: 'IO', errno: EACCES, path: path.join(tmp.dir, '.workflow-data') });
    expect(out.start.error.message).toContain(`cannot open the store at ${dataDir}`);
  });
});

describe.skipIf(!available('mount (root)', isRoot))('on a read-only mount', () => {
  test('every read works, every write is READ_ONLY 403, start() warns once, nothing is written', async () => {
    const mnt = path.join(tmp.dir, 'mnt');
    mkdirSync(mnt);
    const mount = spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', mnt], { encoding: 'utf8' });
    if (mount.status !== 0 && process.env.RUNLOG_NO_SKIP !== '1') return;
    expect(mount.status, mount.stderr).toBe(0);
    const dataDir = path.join(mnt, 'runlog');
    const runId = await writeStore(dataDir);
    const remount = spawnSync('mount', ['-o', 'remount,ro', mnt], { encoding: 'utf8' });
    expect(remount.status, remount.stderr).toBe(0);
    const before = snapshot(dataDir);
    expectReadOnlyWorld(child(dataDir, { asNobody: false, runId }), dataDir, runId, EROFS);
    expect(snapshot(dataDir)).toEqual(before);
  });
});

describe('explicit read-only, and what is not a store', () => {
  test('readOnly: true (and WORKFLOW_RUNLOG_READ_ONLY=1) opens a writable store read-only', async () => {
    const dataDir = path.join(tmp.dir, 'runlog');
    const runId = await writeStore(dataDir);
    const warn = console.warn;
    const warnings = [];
    console.warn = (m) => warnings.push(m);
    try {
      const w = createWorld({ dataDir, readOnly: true });
      await w.start();
      await w.start();
      expect(w.runlog.readOnly).toEqual({ path: dataDir, requested: true, cause: null });
      expect(warnings).toHaveLength(1);
      expect((await w.runs.get(runId)).status).toBe('running');
      const err = await rejection(w.events.create(runId, { eventType: 'run_cancelled', specVersion: 5 }));
      expect(err).toMatchObject({ name: 'WorkflowWorldError', status: 403 });
      expect(err.cause.code).toBe('READ_ONLY');
      await w.close();
    } finally {
      console.warn = warn;
    }
    const previous = process.env.WORKFLOW_RUNLOG_READ_ONLY;
    process.env.WORKFLOW_RUNLOG_READ_ONLY = '1';
    try {
      expect(createWorld({ dataDir }).runlog.config.readOnly).toBe(true);
    } finally {
      if (previous === undefined) delete process.env.WORKFLOW_RUNLOG_READ_ONLY;
      else process.env.WORKFLOW_RUNLOG_READ_ONLY = previous;
    }
  });

  test('a directory of other files fails start() with NOT_A_STORE naming it', async () => {
    const dataDir = path.join(tmp.dir, 'foreign');
    mkdirSync(dataDir);
    writeFileSync(path.join(dataDir, 'notes.txt'), 'not a store');
    const w = createWorld({ dataDir });
    const err = await rejection(w.start());
    expect(err).toMatchObject({ code: 'NOT_A_STORE', path: dataDir });
    expect(err.message).toContain(`cannot open the store at ${dataDir}`);
    expect(readdirSync(dataDir)).toEqual(['notes.txt']);
    await w.close();
  });
});
