// The JSON codec between the addon and JavaScript: what crosses the addon is JSON text in the
// SDK's shapes; `toJson` writes `Uint8Array`s as `{"__type":"Uint8Array","data":"<base64>"}`
// (as @workflow/world-local's files hold them) and `fromJson(text, shape)` revives what
// world-local's reads revive, where they revive it: every such object back into a
// `Uint8Array`, at any depth and under any key (world-local's `jsonReviver`), and an ISO
// string into a `Date` only at the fields world-local's zod schemas coerce (`REVIVED_DATES`,
// generated from the addon's table): the top-level date fields of an event, a run, a step, a
// hook or a wait, and the date fields of an event's data by its type. User data (inputs,
// outputs, payloads, metadata, attributes) is never looked at for dates, at any depth.
import { REVIVED_DATES } from './event-page-format.js';
import { invalidInput } from './validate.js';

/** `JSON.stringify` replacer: binary values as world-local writes them (Buffers too). */
export function jsonReplacer(key, value) {
  const original = this[key];
  if (original instanceof Uint8Array) {
    return { __type: 'Uint8Array', data: Buffer.from(original.buffer, original.byteOffset, original.byteLength).toString('base64') };
  }
  return value;
}

/**
 * A parsed value with every `{__type: 'Uint8Array', data: <string>}` object back to bytes, in
 * place, at any depth (what world-local's `jsonReviver` does to everything it reads). One
 * walk: several times faster than `JSON.parse` with a reviver, which takes V8's slow path.
 */
export function reviveBinary(value) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v = value[i];
      if (v !== null && typeof v === 'object') value[i] = reviveBinary(v);
    }
    return value;
  }
  if (value.__type === 'Uint8Array' && typeof value.data === 'string') {
    return new Uint8Array(Buffer.from(value.data, 'base64'));
  }
  for (const key in value) {
    const v = value[key];
    if (v !== null && typeof v === 'object') value[key] = reviveBinary(v);
  }
  return value;
}

const isRecord = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);

/** Each of `keys` of `object` holding a string that parses as a date, as that `Date` (in place). */
function datesAt(object, keys) {
  for (const key of keys) {
    const v = object[key];
    if (typeof v !== 'string' || !Object.hasOwn(object, key)) continue;
    const d = new Date(v);
    if (!Number.isNaN(d.getTime())) object[key] = d;
  }
}

const EVENT_KEYS = REVIVED_DATES.entities.event;
const EVENT_DATA_KEYS = new Map(Object.entries(REVIVED_DATES.eventData));

/**
 * An event's dates (in place): its own `createdAt`, and the date fields of its `eventData`
 * for its type (`wait_created`'s `resumeAt`, ...), top level only.
 */
function eventDates(e) {
  if (!isRecord(e)) return;
  datesAt(e, EVENT_KEYS);
  const keys = EVENT_DATA_KEYS.get(e.eventType);
  if (keys !== undefined && isRecord(e.eventData)) datesAt(e.eventData, keys);
}

const entityDates = (keys) => (v) => {
  if (isRecord(v)) datesAt(v, keys);
};
const each = (shape) => (v) => {
  if (Array.isArray(v)) for (const x of v) shape(x);
};
const fields = (shapes) => (v) => {
  if (!isRecord(v)) return;
  for (const [key, shape] of shapes) if (Object.hasOwn(v, key)) shape(v[key]);
};

const run = entityDates(REVIVED_DATES.entities.run);
const step = entityDates(REVIVED_DATES.entities.step);
const hook = entityDates(REVIVED_DATES.entities.hook);
const wait = entityDates(REVIVED_DATES.entities.wait);
const ENTITY_KINDS = new Map([['run', run], ['step', step], ['hook', hook], ['wait', wait]]);
const page = (shape) => fields([['data', each(shape)]]);
const eventResult = fields([['event', eventDates], ['run', run], ['step', step], ['hook', hook], ['wait', wait], ['events', each(eventDates)]]);

/**
 * What each addon result is, for `fromJson`: where its dates are. Each is a function that
 * revives the dates of a value (whose binary values are already revived) in place.
 */
export const SHAPE = Object.freeze({
  /** Nothing but binary values (a result without dates). */
  none: () => {},
  event: eventDates,
  run,
  step,
  hook,
  wait,
  eventPage: page(eventDates),
  runPage: page(run),
  stepPage: page(step),
  hookPage: page(hook),
  /** `runs.getMany`: `(run | null)[]`. */
  runs: each(run),
  /** `events.create`'s result: the event, the entity it touched, and events it carries. */
  eventResult,
  /** `events.createBatch`'s result: `{results: [eventResult | {status, error, message}]}`. */
  batchResult: fields([['results', each(eventResult)]]),
  /** `world.runlog.runAt`: `{seq, lastSeq, run, steps, hooks, waits}`. */
  runAt: fields([['run', run], ['steps', each(step)], ['hooks', each(hook)], ['waits', each(wait)]]),
  /** `world.runlog.runDiff`: each change's `before` and `after` are entities of its `entity` kind. */
  runDiff: fields([
    [
      'changes',
      each((c) => {
        const shape = isRecord(c) ? ENTITY_KINDS.get(c.entity) : undefined;
        if (shape !== undefined) {
          shape(c.before);
          shape(c.after);
        }
      }),
    ],
  ]),
});

/** A parsed value of shape `shape` (a `SHAPE` member) revived as world-local reads revive it (in place). */
export function revive(value, shape) {
  const out = reviveBinary(value);
  shape(out);
  return out;
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
/** The addon's JSON text of a result of shape `shape` (a `SHAPE` member), revived. */
export const fromJson = (text, shape) => revive(JSON.parse(text), shape);
