// A corrupt store is loud: a byte flipped inside a committed batch of a copied store makes
// the read that reaches it reject with CORRUPT (run, segment file, byte offset), refuses
// writes to that run, and leaves the original store and the other runs alone
// (format/SPEC.md §4 and §6). lastSeq, runInfo and wait of a damaged run (a flipped byte, a
// segment cut short) reject with CORRUPT too, never the length of the events before the
// damage (INVARIANTS.md rule 5).
import { cpSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';

import { afterEach, beforeEach, expect, test } from 'vitest';

import { Store } from '../store.js';
import { rejection, tempDir } from './helpers.mjs';

let tmp;
let original;
let copy;
const opened = [];

async function open(path, readOnly = false) {
  const s = readOnly ? await Store.openReadOnly(path) : await Store.open(path);
  opened.push(s);
  return s;
}

beforeEach(async () => {
  tmp = tempDir();
  original = `${tmp.dir}/original.runlog`;
  copy = `${tmp.dir}/copy.runlog`;
  const s = await open(original);
  await s.createRun('wrun_damaged');
  await s.createRun('wrun_intact');
  // Three batches; the second carries a marker to find in the segment file.
  for (const payload of ['batch-one', 'MARKER-batch-two', 'batch-three']) {
    await s.appendFacts('wrun_damaged', [{ kind: 'step_completed', payload }]);
  }
  await s.appendFacts('wrun_intact', [{ kind: 'step_completed', payload: 'fine' }]);
  await s.close();
  cpSync(original, copy, { recursive: true });
  const segment = `${copy}/runs/wrun_damaged/seg-00000001.log`;
  const bytes = readFileSync(segment);
  const at = bytes.indexOf('MARKER');
  expect(at).toBeGreaterThan(4096); // batches start at 4096 (SPEC §2, §4)
  bytes[at] ^= 0x01;
  writeFileSync(segment, bytes);
});

afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  tmp.cleanup();
});

test('reading up to the flipped batch returns the events before it, then rejects with CORRUPT', async () => {
  const s = await open(copy);
  const before = await s.read('wrun_damaged', 0, 10);
  expect(before.events.map((e) => e.payload.toString())).toEqual(['batch-one']);
  expect(before.hasMore).toBe(true);
  const err = await rejection(s.read('wrun_damaged', before.next, 10));
  expect(err).toBeInstanceOf(Error);
  expect(err).toMatchObject({ code: 'CORRUPT', runId: 'wrun_damaged', segment: 'seg-00000001.log' });
  expect(err.offset).toBeGreaterThanOrEqual(4096);
  expect(typeof err.detail).toBe('string');
});

test('a damaged run refuses writes with CORRUPT; the other run and the original store are unaffected', async () => {
  const s = await open(copy);
  expect((await rejection(s.appendFacts('wrun_damaged', [{ kind: 'x' }]))).code).toBe('CORRUPT');
  expect((await rejection(s.appendDecisions('wrun_damaged', 3, [{ kind: 'x' }]))).code).toBe('CORRUPT');
  await s.appendFacts('wrun_intact', [{ kind: 'x' }]);
  expect(await s.lastSeq('wrun_intact')).toBe(2);
  const o = await open(original);
  expect((await o.read('wrun_damaged')).events.map((e) => e.payload.toString())).toEqual([
    'batch-one',
    'MARKER-batch-two',
    'batch-three',
  ]);
});

test('verifyRun reports the problem with segment and offset; listRuns lists the run as damaged', async () => {
  const s = await open(copy);
  const report = await s.verifyRun('wrun_damaged');
  expect(report.ok).toBe(false);
  expect(report.problems[0]).toMatchObject({ segment: 'seg-00000001.log' });
  expect(report.problems[0].offset).toBeGreaterThanOrEqual(4096);
  const page = await s.listRuns();
  const listed = [...page.runs.map((r) => r.runId), ...page.damaged.map((d) => d.runId)].sort();
  expect(listed).toEqual(['wrun_damaged', 'wrun_intact']);
});

test('a read-only open rejects the damaged read with CORRUPT too', async () => {
  const ro = await open(copy, true);
  const err = await rejection(ro.read('wrun_damaged', 1, 10));
  expect(err.code).toBe('CORRUPT');
});

test('lastSeq, runInfo and wait of a damaged run reject with CORRUPT, never the length before the damage', async () => {
  for (const s of [await open(copy), await open(copy, true)]) {
    const calls = [
      () => s.lastSeq('wrun_damaged'),
      () => s.runInfo('wrun_damaged'),
      () => s.wait('wrun_damaged', 1, 50),
    ];
    for (const call of calls) {
      const err = await rejection(call());
      expect(err).toMatchObject({ code: 'CORRUPT', runId: 'wrun_damaged', segment: 'seg-00000001.log' });
    }
    // The damage found, the listing of the open run says so too.
    const page = await s.listRuns();
    expect(page.runs.map((r) => r.runId)).toEqual(['wrun_intact']);
    expect(page.damaged.map((d) => [d.runId, d.corrupt])).toEqual([['wrun_damaged', true]]);
    expect((await s.runInfo('wrun_intact')).lastSeq).toBe(1);
  }
});

test('a run whose segment is cut short: lastSeq and runInfo reject with CORRUPT naming the cut; reads keep the events before it', async () => {
  const segment = `${original}/runs/wrun_damaged/seg-00000001.log`;
  // Inside the batch of 'batch-three', before its payload in every frame version.
  const cutAt = readFileSync(segment).indexOf('batch-three') - 4;
  truncateSync(segment, cutAt);
  const ro = await open(original, true);
  const page = await ro.listRuns();
  expect(page.damaged.map((d) => d.runId)).toEqual(['wrun_damaged']);
  for (const call of [() => ro.runInfo('wrun_damaged'), () => ro.lastSeq('wrun_damaged')]) {
    const err = await rejection(call());
    expect(err).toMatchObject({ code: 'CORRUPT', segment: 'seg-00000001.log', offset: cutAt });
  }
  const before = await ro.read('wrun_damaged', 0, 10);
  expect(before.events.map((e) => e.payload.toString())).toEqual(['batch-one', 'MARKER-batch-two']);
  expect(before.hasMore).toBe(true);
  expect((await rejection(ro.read('wrun_damaged', 2, 10))).code).toBe('CORRUPT');
});
