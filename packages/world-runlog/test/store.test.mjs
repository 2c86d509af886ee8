// The store API of the addon, round trip: every method, with real files and fsync.
import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { Store } from '../store.js';
import { facts, rejection, tempDir } from './helpers.mjs';

let tmp;
let store;

beforeEach(async () => {
  tmp = tempDir();
  store = await Store.open(`${tmp.dir}/s.runlog`);
});

afterEach(async () => {
  await store?.close();
  tmp.cleanup();
});

describe('Store round trip', () => {
  test('open reports its path and mode', () => {
    expect(store.path).toBe(`${tmp.dir}/s.runlog`);
    expect(store.readOnly).toBe(false);
    expect(store.closed).toBe(false);
  });

  test('createRun keeps its metadata; runInfo describes the empty run', async () => {
    await store.createRun('wrun_a', Buffer.from('{"source":"test"}'));
    expect((await store.runMeta('wrun_a')).toString()).toBe('{"source":"test"}');
    const info = await store.runInfo('wrun_a');
    expect(info).toMatchObject({ runId: 'wrun_a', lastSeq: 0, committedBytes: 0, segmentCount: 1 });
    expect(info.createdAt).toBeGreaterThan(Date.UTC(2020, 0, 1));
    expect(await store.lastSeq('wrun_a')).toBe(0);
  });

  test('appendFacts assigns dense seqs; a repeated key appends nothing and reports the original seq', async () => {
    await store.createRun('r');
    const first = await store.appendFacts('r', [
      { kind: 'step_completed', payload: Buffer.from('a'), key: 'step_1', correlationId: 'step_1' },
      { kind: 'hook_received', payload: 'text payload' },
    ]);
    expect(first).toEqual([
      { seq: 1, duplicate: false },
      { seq: 2, duplicate: false },
    ]);
    const again = await store.appendFacts('r', [
      { kind: 'step_completed', payload: Buffer.from('a'), key: 'step_1' },
      { kind: 'step_completed', payload: Buffer.from('b'), key: 'step_2' },
    ]);
    expect(again).toEqual([
      { seq: 1, duplicate: true },
      { seq: 3, duplicate: false },
    ]);
    expect(await store.lastSeq('r')).toBe(3);
  });

  test('appendDecisions at the current seq commits the batch whole', async () => {
    await store.createRun('r');
    await store.appendFacts('r', facts(2));
    const seqs = await store.appendDecisions('r', 2, [{ kind: 'step_created', correlationId: 's1' }, { kind: 'step_created', correlationId: 's2' }]);
    expect(seqs).toEqual([3, 4]);
  });

  test('read returns every field; payload bytes round-trip exactly (NUL, binary, subarray views)', async () => {
    await store.createRun('r');
    const binary = Buffer.from([0, 1, 2, 255, 0, 10, 13, 0]);
    const backing = new Uint8Array([9, 9, 0x68, 0x69, 0, 9]);
    const view = backing.subarray(2, 5); // "hi\0": the view's offset must be honoured
    const eventId = '01HZZZZZZZZZZZZZZZZZZZZZZZ';
    await store.appendFacts('r', [
      { kind: 'a', payload: binary, correlationId: 'c1', key: 'k1', eventId, createdAt: 1_700_000_000_123 },
      { kind: 'b', payload: view },
      { kind: 'c' },
      { kind: 'd', payload: 'null byte \u0000 and ünïcödé' },
    ]);
    const page = await store.read('r', 0, 10);
    expect(page.next).toBe(4);
    expect(page.hasMore).toBe(false);
    const [a, b, c, d] = page.events;
    expect(a).toMatchObject({ seq: 1, eventId, kind: 'a', correlationId: 'c1', key: 'k1', createdAt: 1_700_000_000_123 });
    expect(Buffer.isBuffer(a.payload)).toBe(true);
    expect(a.payload.equals(binary)).toBe(true);
    expect(b).toMatchObject({ seq: 2, kind: 'b', correlationId: null, key: null });
    expect([...b.payload]).toEqual([0x68, 0x69, 0]);
    expect(c.payload.length).toBe(0);
    expect(d.payload.toString('utf8')).toBe('null byte \u0000 and ünïcödé');
    expect(b.eventId).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(b.createdAt).toBeGreaterThanOrEqual(Date.now() - 60_000);
  });

  test('read pages after a cursor: next and hasMore', async () => {
    await store.createRun('r');
    await store.appendFacts('r', facts(5));
    const p1 = await store.read('r', 0, 2);
    expect(p1.events.map((e) => e.seq)).toEqual([1, 2]);
    expect(p1).toMatchObject({ next: 2, hasMore: true });
    const p2 = await store.read('r', p1.next, 2);
    expect(p2.events.map((e) => e.seq)).toEqual([3, 4]);
    const p3 = await store.read('r', p2.next, 2);
    expect(p3.events.map((e) => e.seq)).toEqual([5]);
    expect(p3).toMatchObject({ next: 5, hasMore: false });
    const empty = await store.read('r', 5);
    expect(empty).toEqual({ events: [], next: 5, hasMore: false });
    const all = await store.read('r');
    expect(all.events).toHaveLength(5);
  });

  test('wait resolves on a commit, and with the old seq at its timeout', async () => {
    await store.createRun('r');
    await store.appendFacts('r', facts(1));
    const woken = store.wait('r', 1, 10_000);
    const started = Date.now();
    setTimeout(() => store.appendFacts('r', facts(1)), 50);
    expect(await woken).toBe(2);
    expect(Date.now() - started).toBeLessThan(5_000);
    const t0 = Date.now();
    expect(await store.wait('r', 2, 150)).toBe(2);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect(await store.wait('r', 0, 0)).toBe(2);
  });

  test('listRuns pages in id order; a deleted run is gone', async () => {
    for (const id of ['c', 'a', 'b', 'd']) await store.createRun(id);
    const p1 = await store.listRuns(null, 2);
    expect(p1.runs.map((r) => r.runId)).toEqual(['a', 'b']);
    expect(p1).toMatchObject({ next: 'b', hasMore: true, damaged: [] });
    const p2 = await store.listRuns(p1.next, 10);
    expect(p2.runs.map((r) => r.runId)).toEqual(['c', 'd']);
    expect(p2.hasMore).toBe(false);
    await store.deleteRun('b');
    expect((await store.listRuns()).runs.map((r) => r.runId)).toEqual(['a', 'c', 'd']);
    expect((await rejection(store.lastSeq('b'))).code).toBe('NOT_FOUND');
  });

  test('verifyRun reports a clean run', async () => {
    await store.createRun('r');
    await store.appendFacts('r', facts(3));
    expect(await store.verifyRun('r')).toEqual({ runId: 'r', ok: true, segments: 1, events: 3, problems: [], notes: [] });
  });

  test('openReadOnly reads what the writer committed and refuses writes with READ_ONLY', async () => {
    await store.createRun('r');
    await store.appendFacts('r', facts(2));
    const ro = await Store.openReadOnly(store.path);
    try {
      expect(ro.readOnly).toBe(true);
      expect((await ro.read('r')).events.map((e) => e.seq)).toEqual([1, 2]);
      const err = await rejection(ro.appendFacts('r', facts(1)));
      expect(err.code).toBe('READ_ONLY');
      expect(err.path).toBe(store.path);
      expect((await rejection(ro.createRun('x'))).code).toBe('READ_ONLY');
      expect(await store.lastSeq('r')).toBe(2);
    } finally {
      await ro.close();
    }
  });

  test('options reach the store: a smaller payload limit is enforced', async () => {
    const small = await Store.open(`${tmp.dir}/small.runlog`, { payloadLenBytesMax: 8, batchLenBytesMax: 1 << 20 });
    try {
      await small.createRun('r');
      await small.appendFacts('r', [{ kind: 'k', payload: Buffer.alloc(8) }]);
      const err = await rejection(small.appendFacts('r', [{ kind: 'k', payload: Buffer.alloc(9) }]));
      expect(err).toMatchObject({ code: 'INVALID_INPUT', field: 'payload' });
    } finally {
      await small.close();
    }
  });

  test('a second handle on the same directory sees the first one’s commits', async () => {
    await store.createRun('r');
    const other = await Store.open(store.path);
    try {
      await other.appendFacts('r', facts(1));
      expect(await store.lastSeq('r')).toBe(1);
      expect((await rejection(store.appendDecisions('r', 0, facts(1)))).code).toBe('FENCED');
    } finally {
      await other.close();
    }
  });
});
