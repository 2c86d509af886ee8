// createWorld's `retention` option (issue 25): the World's retention thread, started with the
// store, archives a finished run (its own log and its stream log) into
// `<dataDir>/archive/<runId>.rla` and removes it from the store, and `runlog restore` (the
// CLI) puts it back byte-exact; an unfinished run and a finished run whose hook is retained
// (`tokenRetentionUntil`) stay; `close()` stops and joins the thread (no `runlog-retention`
// thread left in this process, no pass after); retention is off by default; bad options
// throw or reject with INVALID_INPUT.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { WorkflowRunNotFoundError, WorkflowWorldError } from '@workflow/errors';
import { describe, expect, test } from 'vitest';

import { createWorld, resolveConfig, Store } from '../index.js';
import { rejection } from './helpers.mjs';
import { worldsPerTest } from './worlds-per-test.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DAY_MS = 24 * 60 * 60 * 1000;
const INTERVAL_MS = 20;
const STREAM = 'strm_01ARZ3NDEKTSV4RRFFQ69G5FAV_user';

const t = worldsPerTest((dir, options) => createWorld({ dataDir: dataDir(dir), recoverActiveRuns: false, ...options }));
const dataDir = (dir) => `${dir}/data/runlog`;
const bytes = (s) => new TextEncoder().encode(s);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The CLI: RUNLOG_BIN, else target/release/runlog (.ci/node.sh builds it), else
 * target/debug/runlog. Missing, the test fails: the round trip is what it proves.
 */
function runlogBin() {
  const candidates = [process.env.RUNLOG_BIN, path.join(REPO, 'target/release/runlog'), path.join(REPO, 'target/debug/runlog')];
  const found = candidates.find((p) => p && existsSync(p));
  if (!found) throw new Error(`no runlog CLI (${candidates.filter(Boolean).join(', ')}): cargo build -p runlog-cli, or set RUNLOG_BIN`);
  return found;
}

/**
 * This process's threads named as the retention thread (retention.rs names it
 * `runlog-retention`; Linux keeps 15 bytes of a name: `runlog-retentio`).
 */
function retentionThreads() {
  return readdirSync('/proc/self/task')
    .map((tid) => {
      try {
        return readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      } catch {
        return ''; // the thread ended meanwhile
      }
    })
    .filter((name) => 'runlog-retention'.startsWith(name) && name.startsWith('runlog-ret'));
}

/** Polls `done()` until true (a liveness bound of `ms`, by default 20 s, not a speed assertion). */
async function until(done, what, ms = 20_000) {
  const start = Date.now();
  while (!done()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function runningRun(w) {
  const { run } = await w.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'dpl_retention', workflowName: 'wf', input: bytes('[]') },
  });
  await w.events.create(run.runId, { eventType: 'run_started', specVersion: 5 });
  return run.runId;
}

const complete = (w, runId) => w.events.create(runId, { eventType: 'run_completed', specVersion: 5, eventData: { output: bytes('done') } });

/** A run with a completed step and a stream of two chunks, completed. */
async function finishedRun(w) {
  const runId = await runningRun(w);
  await w.events.create(runId, { eventType: 'step_started', correlationId: 'step_1', specVersion: 5, eventData: { stepName: 'step//./t//s', input: bytes('in') } });
  await w.events.create(runId, { eventType: 'step_completed', correlationId: 'step_1', specVersion: 5, eventData: { result: bytes('out') } });
  await w.streams.writeMulti(runId, STREAM, ['chunk-a', bytes('chunk-b')]);
  await w.streams.close(runId, STREAM);
  await complete(w, runId);
  return runId;
}

/** Every log of the store whose id holds `runId`'s ULID (its own, its streams'): meta and every field of every event. */
async function logsOf(dir, runId) {
  const store = await Store.openReadOnly(dir);
  try {
    const out = {};
    const { runs, hasMore } = await store.listRuns(null, 10_000);
    expect(hasMore).toBe(false);
    for (const { runId: id } of runs.filter((r) => r.runId.includes(runId.slice('wrun_'.length)))) {
      const page = await store.read(id, 0, 100_000);
      expect(page.hasMore).toBe(false);
      out[id] = { meta: (await store.runMeta(id)).toString('base64'), events: page.events.map((e) => ({ ...e, payload: e.payload.toString('base64') })) };
    }
    return out;
  } finally {
    await store.close();
  }
}

const runIds = async (w) => (await w.runs.list({ pagination: { limit: 100 } })).data.map((r) => r.runId).sort();

describe('the retention option', () => {
  test('archives a finished run (restored byte-exact by runlog restore), keeps an unfinished run and one with a retained hook, and close() stops the thread', async () => {
    const dir = dataDir(t.dir);
    const bin = runlogBin();
    // Written without retention, so that the logs can be read before anything collects them.
    const before = t.world();
    const finished = await finishedRun(before);
    const unfinished = await runningRun(before);
    const hooked = await runningRun(before);
    await before.events.create(hooked, {
      eventType: 'hook_created',
      correlationId: 'hook_kept',
      specVersion: 5,
      eventData: { token: 'tok-kept', metadata: bytes('m'), tokenRetentionUntil: new Date(Date.now() + DAY_MS) },
    });
    await complete(before, hooked);
    expect(before.runlog.retentionStats()).toBeNull();
    await before.close();
    const original = await logsOf(dir, finished);
    // The run's own log and its stream's two (the index and the named stream).
    expect(Object.keys(original).sort()).toEqual([
      expect.stringMatching(new RegExp(`^stream-.*${finished}-i$`)),
      expect.stringMatching(new RegExp(`^stream-.*${finished}-n${STREAM}$`)),
      finished,
    ]);
    expect(retentionThreads()).toEqual([]);

    const w = t.world({ retention: { finishedOlderThan: 1, intervalMs: INTERVAL_MS } });
    expect(w.runlog.config.retention).toEqual({ finishedOlderThanMs: 1, intervalMs: INTERVAL_MS, archiveDir: path.join(dir, 'archive') });
    expect(w.runlog.retentionStats()).toBeNull(); // the store is not open yet
    await w.start();
    // The thread names itself once it runs (Rust sets the name from inside the thread).
    await until(() => retentionThreads().length === 1, 'the retention thread');
    await until(() => w.runlog.retentionStats().collected === 1, 'the finished run to be collected');
    const { passes } = w.runlog.retentionStats();
    await until(() => w.runlog.retentionStats().passes >= passes + 3, 'three more passes');
    expect(w.runlog.retentionStats().collected).toBe(1);
    expect(await runIds(w)).toEqual([hooked, unfinished].sort());
    expect(WorkflowRunNotFoundError.is(await rejection(w.runs.get(finished)))).toBe(true);
    expect(existsSync(path.join(dir, 'archive', `${finished}.rla`))).toBe(true);
    expect((await w.hooks.getByToken('tok-kept')).runId).toBe(hooked);
    // Its stream is in the archive: a write or read now is GONE (410) and creates nothing.
    for (const call of [() => w.streams.write(finished, STREAM, 'late'), () => w.streams.write(finished, 'another', 'x')]) {
      const err = await rejection(call());
      expect([err.constructor, err.status, err.cause?.code]).toEqual([WorkflowWorldError, 410, 'GONE']);
      expect(err.message).toContain('runlog restore');
    }
    const read = await rejection(w.streams.getChunks(finished, STREAM, { limit: 10 }));
    expect([read.status, read.cause?.code]).toEqual([410, 'GONE']);
    expect(existsSync(path.join(dir, 'runs', `stream-31-${finished}-i`))).toBe(false);

    // A run that finishes while the thread runs is collected too; requests go on meanwhile.
    const later = await runningRun(w);
    await complete(w, later);
    await until(() => w.runlog.retentionStats().collected === 2, 'the later run to be collected');
    expect(existsSync(path.join(dir, 'archive', `${later}.rla`))).toBe(true);

    await w.close();
    // Joined: the kernel wakes the joiner as the thread exits, a moment before its entry
    // leaves /proc; a thread still running (close() without stopping it) never does.
    await until(() => retentionThreads().length === 0, 'the retention thread to be gone', 2000);
    const final = w.runlog.retentionStats();
    expect(final).toMatchObject({ collected: 2, swept: 0, failures: 0, lastError: null });
    // A run finished in the store after close() stays: nothing collects any more.
    const after = t.world();
    const untouched = await runningRun(after);
    await complete(after, untouched);
    await sleep(10 * INTERVAL_MS);
    expect(await runIds(after)).toContain(untouched);
    await after.close();
    expect(existsSync(path.join(dir, 'archive', `${untouched}.rla`))).toBe(false);
    expect(w.runlog.retentionStats()).toEqual(final);

    const restored = spawnSync(bin, ['--store', dir, 'restore', finished], { encoding: 'utf8' });
    expect(restored.status, restored.stderr).toBe(0);
    expect(existsSync(path.join(dir, 'archive', `${finished}.rla`))).toBe(false);
    expect(await logsOf(dir, finished)).toEqual(original);
  });

  test('a pass that cannot archive (a file where archiveDir should be) counts each failure with its message and keeps the run', async () => {
    const dir = dataDir(t.dir);
    const before = t.world();
    const finished = await finishedRun(before);
    await before.close();
    const blocker = path.join(t.dir, 'not-a-dir');
    writeFileSync(blocker, 'in the way');
    const w = t.world({ retention: { finishedOlderThan: 1, intervalMs: INTERVAL_MS, archiveDir: path.join(blocker, 'archive') } });
    await w.start();
    await until(() => w.runlog.retentionStats().failures >= 2, 'two failed passes');
    const stats = w.runlog.retentionStats();
    expect(stats.collected).toBe(0);
    expect(stats.lastError).toContain('not-a-dir');
    expect(await runIds(w)).toEqual([finished]);
    expect((await w.streams.getChunks(finished, STREAM, { limit: 10 })).data.length).toBe(2);
    await w.close();
    expect(Object.keys(await logsOf(dir, finished)).length).toBe(3);
  });

  test('is off by default: retentionStats() is null and no retention thread runs', async () => {
    const w = t.world();
    await w.start();
    await complete(w, await runningRun(w));
    expect(w.runlog.config.retention).toBeUndefined();
    expect(w.runlog.retentionStats()).toBeNull();
    expect((await w.runlog.store()).retentionStats()).toBeNull();
    expect(retentionThreads()).toEqual([]);
  });

  test('finishedOlderThan takes the durations of runlog gc, and WORKFLOW_RUNLOG_RETENTION gives the option to a World created without it', async () => {
    const cwd = t.dir;
    const resolved = (retention, env = {}) => resolveConfig({ dataDir: 'd', ...(retention !== undefined && { retention }) }, env, cwd).retention;
    const archive = path.join(cwd, 'd', 'archive');
    for (const [given, ms] of [['500ms', 500], ['45s', 45_000], ['90m', 5_400_000], ['12h', 43_200_000], ['30d', 2_592_000_000], [7, 7]]) {
      expect(resolved({ finishedOlderThan: given }), String(given)).toEqual({ finishedOlderThanMs: ms, archiveDir: archive });
    }
    expect(resolved(undefined, {})).toBeUndefined();
    expect(resolved(undefined, { WORKFLOW_RUNLOG_RETENTION: ' ' })).toBeUndefined();
    expect(resolved(undefined, { WORKFLOW_RUNLOG_RETENTION: '7d' })).toEqual({ finishedOlderThanMs: 604_800_000, archiveDir: archive });
    expect(resolved(undefined, { WORKFLOW_RUNLOG_RETENTION: '2500' })).toEqual({ finishedOlderThanMs: 2500, archiveDir: archive });
    expect(resolved(undefined, { WORKFLOW_RUNLOG_RETENTION: '1h', WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR: 'arch' })).toEqual({
      finishedOlderThanMs: 3_600_000,
      archiveDir: path.join(cwd, 'arch'),
    });
    // The option wins over the variable.
    expect(resolved({ finishedOlderThan: '1s' }, { WORKFLOW_RUNLOG_RETENTION: '7d' })).toEqual({ finishedOlderThanMs: 1000, archiveDir: archive });
    for (const [env, message] of [
      [{ WORKFLOW_RUNLOG_RETENTION: 'week' }, 'WORKFLOW_RUNLOG_RETENTION="week" must be whole ms'],
      [{ WORKFLOW_RUNLOG_RETENTION: '0' }, 'WORKFLOW_RUNLOG_RETENTION="0" must be whole ms'],
      [{ WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR: 'arch' }, 'WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR is set without WORKFLOW_RUNLOG_RETENTION'],
      [{ WORKFLOW_RUNLOG_RETENTION: '1d', WORKFLOW_RUNLOG_READ_ONLY: '1' }, '`retention` needs a writable store'],
    ]) {
      let thrown;
      try {
        resolved(undefined, env);
      } catch (err) {
        thrown = err;
      }
      expect(thrown?.code, JSON.stringify(env)).toBe('INVALID_INPUT');
      expect(thrown.message).toContain(message);
    }
    expect(() => resolveConfig({ url: 'postgres://u@localhost/db' }, { WORKFLOW_RUNLOG_RETENTION: '1d' }, cwd)).toThrow(
      'WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR) is required on a PostgreSQL store',
    );

    // A World created with no options (as WORKFLOW_TARGET_WORLD does) runs the thread.
    const saved = process.env.WORKFLOW_RUNLOG_RETENTION;
    process.env.WORKFLOW_RUNLOG_RETENTION = '1d';
    let w;
    try {
      w = t.world();
    } finally {
      if (saved === undefined) delete process.env.WORKFLOW_RUNLOG_RETENTION;
      else process.env.WORKFLOW_RUNLOG_RETENTION = saved;
    }
    expect(w.runlog.config.retention?.finishedOlderThanMs).toBe(86_400_000);
    await w.start();
    expect(w.runlog.retentionStats()).toMatchObject({ collected: 0 });
  });

  test('bad options throw from createWorld with INVALID_INPUT, and the addon rejects them with INVALID_INPUT naming the field', async () => {
    const bad = [
      [null, '`retention` must be an object'],
      [30, '`retention` must be an object'],
      [{}, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: 0 }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: -1 }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: NaN }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: 1.5 }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: '30 days' }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: '0d' }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: '1.5h' }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: '30D' }, '`retention.finishedOlderThan` must be a whole number of ms'],
      [{ finishedOlderThan: 1000, intervalMs: 0 }, '`retention.intervalMs` must be a whole number of ms'],
      [{ finishedOlderThan: 1000, intervalMs: '1s' }, '`retention.intervalMs` must be a whole number of ms'],
      [{ finishedOlderThan: 1000, archiveDir: '' }, '`retention.archiveDir` must be a non-empty string'],
      [{ finishedOlderThan: 1000, archiveDir: 7 }, '`retention.archiveDir` must be a non-empty string'],
      [{ finishedOlderThan: 1000, olderThan: 5 }, 'unknown option `retention.olderThan`'],
    ];
    for (const [retention, message] of bad) {
      let thrown;
      try {
        createWorld({ dataDir: dataDir(t.dir), retention });
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(retention)).toBeInstanceOf(TypeError);
      expect(thrown.code).toBe('INVALID_INPUT');
      expect(thrown.message).toContain(message);
    }
    const conflicting = [
      [{ readOnly: true, retention: { finishedOlderThan: 1000 } }, '`retention` needs a writable store'],
      [{ dataDir: undefined, url: 'postgres://u@localhost/db', retention: { finishedOlderThan: 1000 } }, '`retention.archiveDir` (or WORKFLOW_RUNLOG_RETENTION_ARCHIVE_DIR) is required on a PostgreSQL store'],
      [{ store: { retention: { finishedOlderThanMs: 1000 } } }, 'give `retention` as an option of its own'],
    ];
    for (const [options, message] of conflicting) {
      expect(() => createWorld({ dataDir: dataDir(t.dir), ...options })).toThrow(message);
    }

    const dir = path.join(t.dir, 'addon');
    const addonBad = [
      [{ finishedOlderThanMs: 0 }, 'options.retention.finishedOlderThanMs'],
      [{ finishedOlderThanMs: -5 }, 'options.retention.finishedOlderThanMs'],
      [{ finishedOlderThanMs: NaN }, 'options.retention.finishedOlderThanMs'],
      [{ finishedOlderThanMs: '30d' }, 'options.retention.finishedOlderThanMs'],
      [{ finishedOlderThanMs: 1000, intervalMs: 0 }, 'options.retention.intervalMs'],
      [{ finishedOlderThanMs: 1000, archiveDir: '' }, 'options.retention.archiveDir'],
      [{ finishedOlderThanMs: 1000, extra: 1 }, 'options.retention.extra'],
      ['1000', 'options.retention'],
    ];
    for (const [retention, field] of addonBad) {
      const err = await rejection(Store.open(dir, { retention }));
      expect(err.code, JSON.stringify(retention)).toBe('INVALID_INPUT');
      expect(err.field).toBe(field);
    }
    const pg = await rejection(Store.open('postgres://u@localhost:1/db', { retention: { finishedOlderThanMs: 1000 } }));
    expect([pg.code, pg.field]).toEqual(['INVALID_INPUT', 'options.retention.archiveDir']);
    const readOnly = await rejection(Store.openReadOnly(dir, { retention: { finishedOlderThanMs: 1000 } }));
    expect([readOnly.code, readOnly.field]).toEqual(['INVALID_INPUT', 'options.retention']);
    // Nothing was opened, no thread started, and the store still opens.
    expect(retentionThreads()).toEqual([]);
    const store = await Store.open(dir, { retention: { finishedOlderThanMs: DAY_MS } });
    expect(store.retentionStats()).toEqual({ passes: 0, collected: 0, swept: 0, failures: 0, lastError: null });
    await store.close();
  });
});
