// Every failure is a rejected promise carrying a stable code and its fields; nothing throws
// synchronously and nothing takes the process down.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, test } from 'vitest';

import { ERROR_CODES, isRunlogError, Store } from '../store.js';
import { panicForTest } from '../src/native.js';
import { facts, rejection, tempDir } from './helpers.mjs';

let tmp;
let store;

beforeEach(async () => {
  tmp = tempDir();
  store = await Store.open(`${tmp.dir}/s.runlog`);
  await store.createRun('r');
});

afterEach(async () => {
  await store?.close();
  tmp.cleanup();
});

/** Calls `f`, asserts it returned a promise (no synchronous throw), returns its rejection. */
async function rejectsWith(f, code) {
  let promise;
  expect(() => {
    promise = f();
  }).not.toThrow();
  expect(promise).toBeInstanceOf(Promise);
  const err = await rejection(promise);
  expect(err).toBeInstanceOf(Error);
  expect(err.code).toBe(code);
  expect(isRunlogError(err, code)).toBe(true);
  expect(typeof err.message).toBe('string');
  return err;
}

describe('fence', () => {
  test('a decision derived from an old seq is rejected with FENCED, expected and actual, and writes nothing', async () => {
    await store.appendFacts('r', facts(3));
    const err = await rejectsWith(() => store.appendDecisions('r', 1, [{ kind: 'run_completed' }]), 'FENCED');
    expect(err).toMatchObject({ runId: 'r', expected: 1, actual: 3 });
    expect(err.message).toContain('expected last seq 1, actual 3');
    expect(await store.lastSeq('r')).toBe(3);
  });

  test('two decisions fenced at the same seq: exactly one commits', async () => {
    const results = await Promise.allSettled([
      store.appendDecisions('r', 0, [{ kind: 'run_completed' }]),
      store.appendDecisions('r', 0, [{ kind: 'run_completed' }]),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected').reason;
    expect(lost).toMatchObject({ code: 'FENCED', expected: 0, actual: 1 });
    expect(await store.lastSeq('r')).toBe(1);
  });

  test('a decision repeating a stored key is DUPLICATE with the original seq', async () => {
    await store.appendFacts('r', [{ kind: 'step_completed', key: 'k' }]);
    const err = await rejectsWith(() => store.appendDecisions('r', 1, [{ kind: 'x', key: 'k' }]), 'DUPLICATE');
    expect(err).toMatchObject({ runId: 'r', key: 'k', seq: 1 });
  });
});

describe('store errors', () => {
  test('NOT_FOUND and EXISTS name the run', async () => {
    expect(await rejectsWith(() => store.read('missing', 0, 1), 'NOT_FOUND')).toMatchObject({ runId: 'missing' });
    expect(await rejectsWith(() => store.createRun('r'), 'EXISTS')).toMatchObject({ runId: 'r' });
  });

  test('opening a directory that is not a store is NOT_A_STORE', async () => {
    writeFileSync(`${tmp.dir}/stray.txt`, 'x');
    const err = await rejectsWith(() => Store.open(tmp.dir), 'NOT_A_STORE');
    expect(err.path).toBe(tmp.dir);
    await rejectsWith(() => Store.openReadOnly(`${tmp.dir}/nothing-here`), 'NOT_A_STORE');
  });
});

describe('bad input', () => {
  const cases = [
    ['invalid run id (slash)', () => store.createRun('a/b'), 'runId'],
    ['invalid run id (empty)', () => store.read(''), 'runId'],
    ['invalid run id (too long)', () => store.lastSeq('x'.repeat(129)), 'runId'],
    ['run id of the wrong type', () => store.appendFacts(42, facts(1)), 'runId'],
    ['events not an array', () => store.appendFacts('r', { kind: 'x' }), 'events'],
    ['event not an object', () => store.appendFacts('r', ['x']), 'events[0]'],
    ['event without kind', () => store.appendFacts('r', [{ payload: 'x' }]), 'events[0].kind'],
    ['empty kind', () => store.appendFacts('r', [{ kind: '' }]), 'kind'],
    ['kind longer than 64 bytes', () => store.appendFacts('r', [{ kind: 'k'.repeat(65) }]), 'kind'],
    ['payload of the wrong type', () => store.appendFacts('r', [{ kind: 'k', payload: 12 }]), 'events[0].payload'],
    ['payload a Float32Array', () => store.appendFacts('r', [{ kind: 'k', payload: new Float32Array(2) }]), 'events[0].payload'],
    ['misspelt event field', () => store.appendFacts('r', [{ kind: 'k', correlation_id: 'c' }]), 'events[0].correlation_id'],
    ['key longer than 256 bytes', () => store.appendFacts('r', [{ kind: 'k', key: 'k'.repeat(257) }]), 'key'],
    ['eventId not a ULID', () => store.appendFacts('r', [{ kind: 'k', eventId: 'evnt_1' }]), 'events[0].eventId'],
    ['negative expectedSeq', () => store.appendDecisions('r', -1, facts(1)), 'expectedSeq'],
    ['fractional expectedSeq', () => store.appendDecisions('r', 1.5, facts(1)), 'expectedSeq'],
    ['string expectedSeq', () => store.appendDecisions('r', '0', facts(1)), 'expectedSeq'],
    ['BigInt expectedSeq', () => store.appendDecisions('r', 0n, facts(1)), 'expectedSeq'],
    ['expectedSeq beyond 2^53', () => store.appendDecisions('r', 2 ** 53, facts(1)), 'expectedSeq'],
    ['NaN cursor', () => store.read('r', Number.NaN, 1), 'after'],
    ['zero limit', () => store.read('r', 0, 0), 'limit'],
    ['limit too large', () => store.read('r', 0, 1e9), 'limit'],
    ['negative timeout', () => store.wait('r', 0, -5), 'timeoutMs'],
    ['metadata over 2 KiB', () => store.createRun('m', Buffer.alloc(2049)), 'meta'],
    ['unknown open option', () => Store.open(`${tmp.dir}/o`, { payloadLimit: 1 }), 'options.payloadLimit'],
    ['open option of the wrong type', () => Store.open(`${tmp.dir}/o`, { lockTimeoutMs: '1s' }), 'options.lockTimeoutMs'],
    ['unusable config', () => Store.open(`${tmp.dir}/o`, { batchEventsMax: 0 }), 'options'],
    ['dir not a string', () => Store.open(undefined), 'dir'],
  ];
  test.each(cases)('%s → INVALID_INPUT naming the field', async (_name, call, field) => {
    const err = await rejectsWith(call, 'INVALID_INPUT');
    expect(err.field).toBe(field);
  });

  test('an oversized payload (16 MiB + 1 byte, the default limit) is refused before anything is written', async () => {
    const err = await rejectsWith(() => store.appendFacts('r', [{ kind: 'k', payload: Buffer.alloc((16 << 20) + 1) }]), 'INVALID_INPUT');
    expect(err.field).toBe('payload');
    expect(err.message).toContain('16777217 bytes > limit 16777216');
    expect(await store.lastSeq('r')).toBe(0);
  });

  test('a getter that throws rejects the call instead of escaping', async () => {
    const evil = { get kind() { throw new Error('getter boom'); } };
    const err = await rejectsWith(() => store.appendFacts('r', [evil]), 'INVALID_INPUT');
    expect(err.message).toContain('getter boom');
    expect(await store.lastSeq('r')).toBe(0);
  });

  test('after all of that the store still works', async () => {
    await store.appendFacts('r', facts(1));
    expect(await store.lastSeq('r')).toBe(1);
  });
});

describe('closed store', () => {
  test('every call after close() rejects with CLOSED; close is idempotent; stats survive', async () => {
    await store.appendFacts('r', facts(2));
    const stats = store.commitStats();
    await store.close();
    expect(store.closed).toBe(true);
    const calls = [
      () => store.createRun('x'),
      () => store.appendFacts('r', facts(1)),
      () => store.appendDecisions('r', 2, facts(1)),
      () => store.read('r', 0, 10),
      () => store.lastSeq('r'),
      () => store.wait('r', 0, 10),
      () => store.runInfo('r'),
      () => store.runMeta('r'),
      () => store.listRuns(),
      () => store.deleteRun('r'),
      () => store.verifyRun('r'),
    ];
    for (const call of calls) await rejectsWith(call, 'CLOSED');
    await store.close();
    expect(store.commitStats()).toEqual(stats);
  });

  test('a pending wait is rejected with CLOSED by close()', async () => {
    const pending = rejection(store.wait('r', 0, 60_000));
    const t0 = Date.now();
    await store.close();
    expect((await pending).code).toBe('CLOSED');
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  test('calls made before close() settle normally', async () => {
    const appends = [store.appendFacts('r', facts(1)), store.appendFacts('r', facts(1))];
    await store.close();
    const done = await Promise.all(appends);
    expect(done.map(([a]) => a.seq).sort()).toEqual([1, 2]);
  });
});

describe('panics', () => {
  test('a panic on a worker thread rejects with PANICKED', async () => {
    const err = await rejectsWith(() => panicForTest('worker'), 'PANICKED');
    expect(err.detail).toBe('test panic on a worker thread');
  });

  test('a panic on the JavaScript thread rejects with PANICKED', async () => {
    const err = await rejectsWith(() => panicForTest('entry'), 'PANICKED');
    expect(err.detail).toBe('test panic on the JavaScript thread');
    expect(await store.lastSeq('r')).toBe(0);
  });
});

test('a separate Node process survives bad input, panics and a closed store, and exits 0', () => {
  const script = fileURLToPath(new URL('./fixtures/abuse.mjs', import.meta.url));
  const out = execFileSync(process.execPath, [script, `${tmp.dir}/child.runlog`], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 60_000,
  });
  const result = JSON.parse(out.trim().split('\n').at(-1));
  expect(result.codes).toEqual(['INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT', 'PANICKED', 'PANICKED', 'FENCED', 'CLOSED']);
  expect(result.alive).toBe(true);
});

test('ERROR_CODES documents every code the tests meet', () => {
  for (const code of ['FENCED', 'DUPLICATE', 'NOT_FOUND', 'EXISTS', 'BUSY', 'CORRUPT', 'READ_ONLY', 'INVALID_INPUT', 'IO', 'DISK_FULL', 'CLOSED', 'PANICKED', 'NOT_A_STORE']) {
    expect(ERROR_CODES[code]).toEqual(expect.any(String));
  }
});
