// The JSON codec between the addon and JavaScript: what crosses the addon is JSON text in the
// SDK's shapes; `toJson` writes `Uint8Array`s as `{"__type":"Uint8Array","data":"<base64>"}`
// (as @workflow/world-local's files hold them) and `fromJson` turns those back into
// `Uint8Array`s and the ISO dates of known keys into `Date`s.
import { DATE_KEYS as DATE_KEY_LIST, PLAIN_KEYS as PLAIN_KEY_LIST } from './event-page-format.js';
import { invalidInput } from './validate.js';

/** Keys whose ISO string values are `Date`s in the SDK's entities and event data (the addon's list). */
const DATE_KEYS = new Set(DATE_KEY_LIST);

/** `JSON.stringify` replacer: binary values as world-local writes them (Buffers too). */
export function jsonReplacer(key, value) {
  const original = this[key];
  if (original instanceof Uint8Array) {
    return { __type: 'Uint8Array', data: Buffer.from(original.buffer, original.byteOffset, original.byteLength).toString('base64') };
  }
  return value;
}

/** Keys whose values are never revived (a run's attributes: strings, whatever their names). */
const PLAIN_KEYS = new Set(PLAIN_KEY_LIST);

/**
 * A parsed value with its `Uint8Array` shapes back to bytes and the ISO dates of known keys
 * (DATE_KEYS) as `Date`s, in place, except under PLAIN_KEYS (`attributes`: (a user may name an attribute
 * `startedAt`, and its value stays the string it was set to). One walk: several times faster
 * than `JSON.parse` with a reviver, which takes V8's slow path.
 */
export function revive(value) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v = value[i];
      if (v !== null && typeof v === 'object') value[i] = revive(v);
    }
    return value;
  }
  if (value.__type === 'Uint8Array' && typeof value.data === 'string') {
    return new Uint8Array(Buffer.from(value.data, 'base64'));
  }
  for (const key in value) {
    const v = value[key];
    if (v === null || PLAIN_KEYS.has(key)) continue;
    if (typeof v === 'object') value[key] = revive(v);
    else if (typeof v === 'string' && DATE_KEYS.has(key)) {
      const d = new Date(v);
      if (!Number.isNaN(d.getTime())) value[key] = d;
    }
  }
  return value;
}

/**
 * `value` as the JSON text the addon takes; a value JSON cannot hold (a BigInt, a cycle)
 * is bad input like any other: an `INVALID_INPUT` error naming `field`, not a bare TypeError.
 */
export function toJson(value, field = 'params') {
  try {
    return JSON.stringify(value ?? {}, jsonReplacer);
  } catch (cause) {
    throw invalidInput(field, `cannot be serialized as JSON: ${cause?.message ?? cause}`, cause);
  }
}
export const fromJson = (text) => revive(JSON.parse(text));
