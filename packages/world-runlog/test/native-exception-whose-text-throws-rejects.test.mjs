// A getter or toJSON that throws a value whose own String() throws as well still rejects the
// call with INVALID_INPUT ("reading an argument threw: an exception"): both exceptions are
// cleared, none escapes synchronously, nothing is written, and the store goes on.
import { expect, test } from 'vitest';

import { Store } from '../store.js';
import { rejection, tempDir } from './helpers.mjs';

/** Runs `body` on a fresh store holding run `r`, then closes and removes it. */
async function onStore(body) {
  const tmp = tempDir();
  const store = await Store.open(`${tmp.dir}/s.runlog`);
  try {
    await store.createRun('r');
    await body(store);
  } finally {
    await store.close();
    tmp.cleanup();
  }
}

/** A thrown value whose conversion to a string throws in turn. */
const unprintable = () => ({
  toString() {
    throw new Error('toString boom');
  },
});

/** How `f()` settled: `threw <message>` or `rejected <code> <message>`. */
async function outcome(f) {
  let promise;
  try {
    promise = f();
  } catch (err) {
    return `threw ${err?.message}`;
  }
  const err = await rejection(promise);
  return `rejected ${err.code} ${err.message}`;
}

const REJECTED = 'rejected INVALID_INPUT reading an argument threw: an exception';

test('a getter throwing an unprintable value rejects the call', () =>
  onStore(async (store) => {
    const evil = {
      get kind() {
        throw unprintable();
      },
    };
    expect(await outcome(() => store.appendFacts('r', [evil]))).toBe(REJECTED);
    expect(await store.lastSeq('r')).toBe(0);
  }));

test('a toJSON throwing an unprintable value rejects the World call', () =>
  onStore(async (store) => {
    const evil = {
      toJSON() {
        throw unprintable();
      },
    };
    expect(await outcome(() => store.world().runsGet('wrun_x', evil))).toBe(REJECTED);
    await store.appendFacts('r', [{ kind: 'k' }]);
    expect(await store.lastSeq('r')).toBe(1);
  }));
