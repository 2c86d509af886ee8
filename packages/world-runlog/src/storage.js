// The storage half of the World (runs, steps, events, hooks) and its streams, on the Rust
// World layer (crates/runlog-world) through the addon's `World` object (`store.world()`).
//
// Requests, parameters and results cross the addon as JSON text in the SDK's shapes; this
// module turns them into JavaScript values the way @workflow/world-local's files do:
// `Uint8Array`s as `{"__type":"Uint8Array","data":"<base64>"}` on the way in and back into
// `Uint8Array`s on the way out, dates as ISO strings in and `Date`s out. Payload bytes are
// stored exactly as serialized here, so what a caller writes is what it reads back. Every
// rejection is mapped to the SDK's error classes by `toWorkflowError`, and every method's
// arguments are type-checked first by src/validate.js (a wrong type is INVALID_INPUT, 400).
import { toWorkflowError } from './errors.js';
import { DATE_KEYS as DATE_KEY_LIST, FIX_KIND, PLAIN_KEYS as PLAIN_KEY_LIST } from './event-page-format.js';
import { checkArg, checked, invalidInput, SIGNATURES } from './validate.js';

/** The World methods, by namespace, that storage provides (those of `SIGNATURES`). */
export const STORAGE_METHODS = Object.freeze(
  Object.fromEntries(Object.entries(SIGNATURES).map(([ns, methods]) => [ns, Object.freeze(Object.keys(methods))])),
);

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
function revive(value) {
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

/** No bytes: what a page without `bytes` points into (its binary values are all empty). */
const NO_BYTES = new Uint8Array(0);

/**
 * An event page in the addon's wire form (docs/EVENT-PAGE.md), `[text, bytes | null, ...]`:
 * one column per field, event types as indexes into `typeNames`, `createdAt` in ms since
 * the epoch as the difference from the event before, and the places the generic walk would
 * revive as `fix` pairs `[event index, path index]` into `fixPaths`, each path `[kind,
 * 'eventData', key or index...]` with a kind of `FIX_KIND` (src/event-page-format.js,
 * generated from the encoder). Building each event here and reviving just those places
 * gives what `fromJson` gives for the same events, without visiting every value of every
 * event.
 */
export function fromEventPage(wire) {
  const [text, bytes] = wire;
  const page = JSON.parse(text);
  if (page.walk) return revive({ data: page.data, cursor: page.cursor, hasMore: page.hasMore });
  const { run, runs, ids, typeNames, types, corr, data: payloads, absent, at, spec, fix, fixPaths, bins } = page;
  // A plain Uint8Array over the bytes: its `slice` makes plain Uint8Array copies.
  const bin = bytes ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : NO_BYTES;
  const data = new Array(ids.length);
  let nextAbsent = 0;
  let createdAt = 0;
  for (let i = 0; i < ids.length; i++) {
    const e = { runId: run ?? runs[i], eventId: ids[i], eventType: typeNames[types[i]] };
    if (corr[i] !== null) e.correlationId = corr[i];
    if (absent[nextAbsent] === i) nextAbsent++;
    else e.eventData = payloads[i];
    createdAt += at[i];
    e.createdAt = new Date(createdAt);
    if (spec[i] !== null) e.specVersion = spec[i];
    data[i] = e;
  }
  for (let f = 0; f < fix.length; f += 2) {
    const path = fixPaths[fix[f + 1]];
    let parent = data[fix[f]];
    const last = path.length - 1;
    for (let k = 1; k < last; k++) parent = parent[path[k]];
    const key = path[last];
    const v = parent[key];
    const kind = path[0];
    if (kind === FIX_KIND.BINARY_BYTES) {
      parent[key] = bin.slice(bins[2 * v], bins[2 * v] + bins[2 * v + 1]);
    } else if (kind === FIX_KIND.BINARY_OBJECT) {
      if (v !== null && typeof v === 'object' && typeof v.data === 'string') {
        parent[key] = new Uint8Array(Buffer.from(v.data, 'base64'));
      }
    } else if (kind === FIX_KIND.DATE && typeof v === 'string') {
      const d = new Date(v);
      if (!Number.isNaN(d.getTime())) parent[key] = d;
    }
  }
  return { data, cursor: page.cursor, hasMore: page.hasMore };
}

/** Events per addon call when a page of `events.list` is larger: see `listEventsInSlices`. */
export const EVENTS_SLICE = 300;
/** The World's largest page (`runlog_world::PAGE_LIMIT_MAX`): a larger `limit` lists this many. */
const PAGE_LIMIT_MAX = 1000;

/**
 * `events.list` (or `listByCorrelationId`, by `list`) for a page of more than
 * `EVENTS_SLICE` events, as consecutive slices of at most that many, following cursors: the
 * next slice is asked for before this one is parsed, so that Rust reads and writes slice
 * k + 1 while JavaScript parses slice k. The log only grows and is dense, so the slices
 * together are the page one call would have listed a moment later: the same events in the
 * same order, and the last slice's cursor and `hasMore`.
 */
async function listEventsInSlices(list, params) {
  const pagination = params?.pagination ?? {};
  if (!(Number.isInteger(pagination.limit) && pagination.limit > EVENTS_SLICE)) return fromEventPage(await list(toJson(params)));
  const limit = Math.min(pagination.limit, PAGE_LIMIT_MAX);
  const ask = (cursor, n) => list(toJson({ ...params, pagination: { ...pagination, cursor, limit: n } }));
  let remaining = limit - EVENTS_SLICE;
  let wire = await ask(pagination.cursor, EVENTS_SLICE);
  const data = [];
  for (;;) {
    const [, , cursor, hasMore] = wire;
    // A slice with more after it was full.
    const next = hasMore && remaining > 0 ? ask(cursor, Math.min(EVENTS_SLICE, remaining)) : null;
    remaining -= EVENTS_SLICE;
    // Handled at once: should this slice fail to parse, the next one's rejection is not
    // left unhandled.
    next?.catch(() => {});
    const page = fromEventPage(wire);
    for (const e of page.data) data.push(e);
    if (next === null) return { data, cursor: page.cursor, hasMore: page.hasMore };
    wire = await next;
  }
}

/**
 * `events.create` calls made in the same turn of the event loop, gathered per run and sent
 * to the addon as one `createEvents` call each (the calls of a new run, `runId` null, each
 * on its own): one promise, one worker thread and one wake-up per run instead of one per
 * call, and the run's calls queued together, in call order, for one group commit. Each call
 * still settles on its own, with the same value or error class as one `createEvent` call.
 */
function createBatcher(openWorld) {
  let queued = null;
  const send = async (calls) => {
    let outs;
    try {
      const w = await openWorld();
      outs = await w.createEvents(calls.map((c) => c.args));
    } catch (err) {
      for (const c of calls) c.reject(toWorkflowError(err));
      return;
    }
    for (let i = 0; i < calls.length; i++) {
      const out = outs[i];
      if (typeof out !== 'string') {
        calls[i].reject(toWorkflowError(out));
        continue;
      }
      try {
        calls[i].resolve(fromJson(out));
      } catch (err) {
        calls[i].reject(toWorkflowError(err));
      }
    }
  };
  const flush = () => {
    const groups = queued;
    queued = null;
    for (const calls of groups.values()) void send(calls);
  };
  return (runId, request, params) =>
    new Promise((resolve, reject) => {
      let args;
      try {
        args = [runId ?? null, toJson(request, 'request'), toJson(params)];
      } catch (err) {
        reject(toWorkflowError(err));
        return;
      }
      if (queued === null) {
        queued = new Map();
        process.nextTick(flush);
      }
      // A new run's calls (runId null) each go alone: they are different runs.
      const key = args[0] ?? Symbol('new run');
      let calls = queued.get(key);
      if (calls === undefined) queued.set(key, (calls = []));
      calls.push({ args, resolve, reject });
    });
}

/**
 * The last spec version of workflow 4.x (`SPEC_VERSION_CURRENT` of @workflow/world 4.x). A
 * run created at it or below, and its steps, are read back in 4.x's shapes, as
 * @workflow/world-local 4.x writes them (and as every later world-local reads such files
 * back): a failed run's and a step's `error` is a StructuredError `{ message, stack?, code? }`
 * (@workflow/world 4.5.0 `StructuredErrorSchema`). The Rust World keeps, as on 5.x, the
 * event's `error` as is: a 4.x step_failed or step_retrying event's is the message alone
 * (a string, its stack beside it in `stack`), and a run_failed's `errorCode` is beside
 * the error rather than in it.
 */
export const SPEC_VERSION_V4_MAX = 3;

const isV4Entity = (e) => e !== null && typeof e === 'object' && Number.isInteger(e.specVersion) && e.specVersion <= SPEC_VERSION_V4_MAX;

/** A StructuredError from a 4.x event's `error` (a message, or an object with one), `stack`, `code`. */
function structuredError(error, stack, code) {
  const out = { message: typeof error === 'string' ? error : (error?.message ?? 'Unknown error') };
  const st = stack ?? (typeof error === 'object' ? error?.stack : undefined);
  if (st !== undefined) out.stack = st;
  if (code !== undefined) out.code = code;
  return out;
}

/** A 4.x failed run's `error` with its code in it (in place). */
function v4Run(run) {
  if (isV4Entity(run) && run.error != null) run.error = structuredError(run.error, undefined, run.error.code ?? run.errorCode);
  return run;
}

const STEP_ERROR_EVENTS = new Set(['step_failed', 'step_retrying']);
const needsV4Error = (step) => isV4Entity(step) && step.error != null && typeof step.error !== 'object';

/**
 * The 4.x steps of `steps` (one run's) with their `error` as 4.x has it (in place): the
 * message and `stack` of each one's latest step_failed or step_retrying event, which
 * `eventsOf(runId)` (the run's events, ascending, with data) supplies; read only when a
 * step needs it.
 */
async function v4Steps(steps, eventsOf) {
  const pending = steps.filter(needsV4Error);
  if (pending.length === 0) return steps;
  const latest = new Map();
  for (const e of await eventsOf(pending[0].runId)) {
    if (STEP_ERROR_EVENTS.has(e.eventType) && e.correlationId) latest.set(e.correlationId, e.eventData);
  }
  for (const step of pending) {
    const d = latest.get(step.stepId);
    step.error = structuredError(d?.error ?? step.error, d?.stack);
  }
  return steps;
}

/** Bytes of a stream chunk (`string` as UTF-8; its type was checked by `checked`). */
const chunkBytes = (chunk) => (typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);

/** How long one `streamsWait` of a live reader blocks before looking again. */
const STREAM_WAIT_MS = 1000;

/**
 * `{ available, runs, steps, events, hooks, streams, close }` for a World whose addon World
 * is `openWorld()` (a memoized `Promise<World>` of the addon).
 */
export function createStorage(openWorld) {
  /** Calls `f(world)`, mapping any rejection to the SDK's class. */
  const call = async (f) => {
    try {
      return await f(await openWorld());
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  const json = (f) => call(async (w) => fromJson(await f(w)));
  const eventPage = (list, params) => call((w) => listEventsInSlices((text) => list(w, text), params));

  const creates = createBatcher(openWorld);

  // Writes to one stream are applied in call order, even when runId is a promise (whose
  // value is type-checked like a runId given as is).
  const tails = new Map();
  const serial = (runId, name, f) => {
    const key = `${name}`;
    const prev = tails.get(key) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(async () => {
      const id = await runId;
      const err = checkArg('runId', 'string', id);
      if (err !== null) throw toWorkflowError(err);
      return f(id);
    });
    const tail = next.catch(() => undefined);
    tails.set(key, tail);
    tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return next;
  };

  const readers = new Set();

  // A run's events, every page, ascending, with data (for the 4.x step shapes).
  const eventsOf = async (runId) => {
    const out = [];
    let cursor;
    for (;;) {
      const page = await eventPage((w, text) => w.eventsList(text), {
        runId,
        resolveData: 'all',
        pagination: { sortOrder: 'asc', limit: PAGE_LIMIT_MAX, ...(cursor && { cursor }) },
      });
      out.push(...page.data);
      if (!page.hasMore) return out;
      cursor = page.cursor;
    }
  };
  const v4Step = async (step) => (await v4Steps([step], eventsOf))[0];
  /** A create's result with 4.x shapes: a step failing or retrying now takes the request's error. */
  const v4Created = async (result, request) => {
    if (result?.run) v4Run(result.run);
    const step = result?.step;
    if (needsV4Error(step)) {
      if (STEP_ERROR_EVENTS.has(request?.eventType)) step.error = structuredError(request.eventData?.error ?? step.error, request.eventData?.stack);
      else await v4Step(step);
    }
    return result;
  };

  const storage = {
    available: true,
    runs: {
      get: async (runId, params) => v4Run(await json((w) => w.runsGet(runId, toJson(params)))),
      list: async (params) => {
        const page = await json((w) => w.runsList(toJson(params)));
        page.data.forEach(v4Run);
        return page;
      },
    },
    steps: {
      get: async (runId, stepId, params) => v4Step(await json((w) => w.stepsGet(runId, stepId, toJson(params)))),
      list: async (params) => {
        const page = await json((w) => w.stepsList(toJson(params)));
        await v4Steps(page.data, eventsOf);
        return page;
      },
    },
    events: {
      create: async (runId, request, params) => v4Created(await creates(runId, request, params), request),
      get: (runId, eventId, params) => json((w) => w.eventsGet(runId, eventId, toJson(params))),
      list: (params) => eventPage((w, text) => w.eventsList(text), params),
      listByCorrelationId: (params) => eventPage((w, text) => w.eventsListByCorrelationId(text), params),
    },
    hooks: {
      get: (hookId, params) => json((w) => w.hooksGet(hookId, toJson(params))),
      getByToken: (token) => json((w) => w.hooksGetByToken(token)),
      list: (params) => json((w) => w.hooksList(toJson(params))),
    },
    streams: {
      write: (runId, name, chunk) =>
        serial(runId, name, (id) => call(async (w) => void (await w.streamsWrite(id, name, chunkBytes(chunk))))),
      writeMulti: (runId, name, chunks) =>
        serial(runId, name, (id) =>
          call(async (w) => {
            if (chunks.length === 0) return;
            await w.streamsWriteMulti(id, name, chunks.map(chunkBytes));
          }),
        ),
      close: (runId, name) => serial(runId, name, (id) => call(async (w) => void (await w.streamsClose(id, name)))),
      list: (runId) => call((w) => w.streamsList(runId)),
      getChunks: (runId, name, options) =>
        call(async (w) => {
          const page = await w.streamsGetChunks(runId, name, toJson(options));
          return {
            data: page.data.map((c) => ({ index: c.index, data: new Uint8Array(c.data.buffer, c.data.byteOffset, c.data.byteLength) })),
            cursor: page.cursor ?? null,
            hasMore: page.hasMore,
            done: page.done,
          };
        }),
      getInfo: (runId, name) => call((w) => w.streamsInfo(runId, name)),
      /** A live reader from `startIndex` (negative: from the end); empty chunks are skipped. */
      get: async (runId, name, startIndex = 0) => {
        const w = await call((w) => w);
        let next = startIndex;
        let cancelled = false;
        const reader = { cancel: () => (cancelled = true) };
        readers.add(reader);
        const finish = () => readers.delete(reader);
        return new ReadableStream({
          async pull(controller) {
            try {
              for (;;) {
                if (cancelled) {
                  finish();
                  controller.close();
                  return;
                }
                const r = await w.streamsRead(runId, name, next, 100);
                next = r.nextIndex;
                const nonEmpty = r.chunks.filter((c) => c.data.byteLength > 0);
                for (const c of nonEmpty) controller.enqueue(new Uint8Array(c.data.buffer, c.data.byteOffset, c.data.byteLength));
                if (r.done) {
                  finish();
                  controller.close();
                  return;
                }
                if (nonEmpty.length > 0) return;
                if (!r.hasMore) await w.streamsWait(runId, name, next, STREAM_WAIT_MS);
              }
            } catch (err) {
              finish();
              if (cancelled || err?.code === 'CLOSED') {
                try {
                  controller.close();
                } catch {}
                return;
              }
              controller.error(toWorkflowError(err));
            }
          },
          cancel() {
            cancelled = true;
            finish();
          },
        });
      },
    },
    /** Ends live readers (their streams close); the store itself is closed by the World. */
    close() {
      for (const r of readers) r.cancel();
      readers.clear();
    },
  };
  for (const [ns, methods] of Object.entries(STORAGE_METHODS)) {
    for (const m of methods) storage[ns][m] = checked(ns, m, storage[ns][m]);
  }
  return storage;
}
