// Calls run on the addon's own threads, so that concurrent appends meet in one group commit
// (one write + one fdatasync for many appends) and never wait for libuv's 4-thread pool.
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, promises as fsp } from 'node:fs';

import { afterEach, beforeEach, expect, test } from 'vitest';

import { Store, threadPoolStats } from '../store.js';
import { tempDir } from './helpers.mjs';

const CONCURRENT = 64;
let tmp;
let store;

beforeEach(async () => {
  tmp = tempDir();
  store = await Store.open(`${tmp.dir}/s.runlog`);
  await store.createRun('r');
});

afterEach(async () => {
  await store.close();
  tmp.cleanup();
});

function delta(before, after) {
  return {
    groups: after.groups - before.groups,
    requests: after.requests - before.requests,
    events: after.events - before.events,
    groupSizes: after.groupSizes.map((n, i) => n - before.groupSizes[i]),
  };
}

test(`${CONCURRENT} concurrent appendFacts to one run share group commits`, async () => {
  const before = store.commitStats();
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: CONCURRENT }, (_, i) =>
      store.appendFacts('r', [{ kind: 'step_completed', payload: JSON.stringify({ i }), key: `step_${i}` }]),
    ),
  );
  const ms = performance.now() - t0;
  const d = delta(before, store.commitStats());
  // Every append acknowledged once, at a distinct seq: 1..64, dense.
  const seqs = results.map(([a]) => a.seq).sort((a, b) => a - b);
  expect(seqs).toEqual(Array.from({ length: CONCURRENT }, (_, i) => i + 1));
  expect(d.requests).toBe(CONCURRENT);
  expect(d.events).toBe(CONCURRENT);
  // The claim: fewer group commits (write + fdatasync) than appends.
  expect(d.groups).toBeLessThan(CONCURRENT);
  expect(d.groupSizes.reduce((a, b) => a + b, 0)).toBe(d.groups);
  // More store calls were in flight at once than libuv's pool has threads.
  expect(threadPoolStats().io.threadsStarted).toBeGreaterThan(4);
  console.log(
    `[group-commit] ${CONCURRENT} appends in ${d.groups} group commits ` +
      `(${(CONCURRENT / d.groups).toFixed(1)} appends per fdatasync), ${ms.toFixed(1)} ms; ` +
      `group size histogram ${JSON.stringify(d.groupSizes.slice(0, 8))}; io threads ${threadPoolStats().io.threadsStarted}`,
  );
});

test('store calls complete while every thread of libuv’s pool is blocked', async () => {
  // Each read of a FIFO with no writer blocks one libuv thread in open(2).
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const fifos = Array.from({ length: threads }, (_, i) => `${tmp.dir}/fifo-${i}`);
  for (const f of fifos) execFileSync('mkfifo', [f]);
  const blocked = fifos.map((f) => fsp.readFile(f));
  let libuvFree = false;
  const probe = fsp.stat(tmp.dir).then(() => {
    libuvFree = true;
  });
  try {
    await new Promise((r) => setTimeout(r, 100));
    expect(libuvFree).toBe(false); // the pool really is saturated
    const results = await Promise.all(Array.from({ length: 16 }, () => store.appendFacts('r', [{ kind: 'k' }])));
    expect(results).toHaveLength(16);
    expect((await store.read('r', 0, 100)).events).toHaveLength(16);
    expect(libuvFree).toBe(false); // ... and stayed so while the store worked
  } finally {
    // Unblock: opening each FIFO for writing (synchronously, on this thread) releases a reader.
    for (const f of fifos) closeSync(openSync(f, 'w'));
    await Promise.all(blocked);
    await probe;
  }
});

test('with the io lane bounded to one thread, queued calls and a close() behind them all settle', () => {
  const script = new URL('./fixtures/one-thread.mjs', import.meta.url).pathname;
  const out = execFileSync(process.execPath, [script, `${tmp.dir}/one.runlog`], {
    encoding: 'utf8',
    env: { ...process.env, RUNLOG_NODE_THREADS: '1' },
    timeout: 60_000,
  });
  const result = JSON.parse(out.trim().split('\n').at(-1));
  expect(result.seqs).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  expect(result.closed).toBe(true);
  expect(result.io).toMatchObject({ threadsMax: 1, threadsStarted: 1 });
});
