// The test helpers themselves: a helper that cannot fail makes every test built on it vacuous.
import { expect, test } from 'vitest';

import { rejection } from './helpers.mjs';

test('rejection() fails when the promise resolves, naming the value', async () => {
  await expect(rejection(Promise.resolve(42))).rejects.toThrow('expected a rejection, got 42');
  await expect(rejection(Promise.resolve(undefined))).rejects.toThrow('expected a rejection, got undefined');
  await expect(rejection(Promise.resolve({ a: [1n] }))).rejects.toThrow('expected a rejection, got { a: [ 1n ] }');
});

test('rejection() returns the rejection reason itself', async () => {
  const err = new Error('boom');
  expect(await rejection(Promise.reject(err))).toBe(err);
  expect(await rejection(Promise.reject(7))).toBe(7);
});
