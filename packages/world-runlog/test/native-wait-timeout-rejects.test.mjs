// The addon World's runsWaitForTerminalStatus checks its timeout like every other argument:
// a wrong one rejects the returned promise with INVALID_INPUT naming `timeoutMs`, never a
// synchronous throw (it was a typed u32: a string threw napi's NumberExpected, and -1 wrapped
// to a wait of 2^32 - 1 ms). A timeout up to 2^32 - 1 (what src/line-beta55.js passes at most)
// is still taken.
import { afterEach, beforeEach, expect, test } from 'vitest';

import { Store } from '../store.js';
import { tempDir } from './helpers.mjs';

const RUN = 'wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV';
let tmp;
let store;

beforeEach(async () => {
  tmp = tempDir();
  store = await Store.open(tmp.dir);
});

afterEach(async () => {
  await store.close();
  tmp.cleanup();
});

/** The call's outcome: how it failed (thrown or rejected) and the error's code and field. */
async function outcome(call) {
  let promise;
  try {
    promise = call();
  } catch (e) {
    return { thrown: true, code: e.code, field: e.field };
  }
  try {
    await promise;
    return { resolved: true };
  } catch (e) {
    return { rejected: true, code: e.code, field: e.field };
  }
}

test.each([
  ['a string', '10'],
  ['a negative number', -1],
  ['a fraction', 1.5],
  ['NaN', NaN],
  ['undefined', undefined],
  ['a BigInt', 10n],
  ['more than 2^32 - 1', 2 ** 32],
])('a timeout that is %s rejects with INVALID_INPUT (timeoutMs), not a throw', async (_, timeout) => {
  const w = store.world();
  expect(await outcome(() => w.runsWaitForTerminalStatus(RUN, timeout))).toEqual({
    rejected: true,
    code: 'INVALID_INPUT',
    field: 'timeoutMs',
  });
});

test('a valid timeout, up to 2^32 - 1, reaches the World (an unknown run: NOT_FOUND)', async () => {
  const w = store.world();
  for (const timeout of [0, 2 ** 32 - 1]) {
    expect(await outcome(() => w.runsWaitForTerminalStatus(RUN, timeout))).toEqual({
      rejected: true,
      code: 'NOT_FOUND',
      field: undefined,
    });
  }
});
