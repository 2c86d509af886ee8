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
//
// The parts live by concern: the JSON codec (src/codec.js), event pages (src/event-page.js),
// the per-tick batcher of `events.create` (src/batcher.js), 4.x's entity shapes
// (src/v4-shapes.js) and the streams (src/streams.js); this module builds the storage from
// them and re-exports what the rest of the package imports from it.
import { toWorkflowError } from './errors.js';
import { createBatcher } from './batcher.js';
import { fromJson, SHAPE, toJson } from './codec.js';
import { fromEventPage, listEventsInSlices, listRunEventsInSlices, PAGE_LIMIT_MAX, sliced } from './event-page.js';
import { createStreams } from './streams.js';
import { needsV4Error, STEP_ERROR_EVENTS, structuredError, v4Run, v4Steps } from './v4-shapes.js';
import { checked, SIGNATURES } from './validate.js';

export { fromJson, jsonReplacer, SHAPE, toJson } from './codec.js';
export { EVENTS_SLICE, fromEventPage } from './event-page.js';
export { SPEC_VERSION_V4_MAX } from './v4-shapes.js';

/** The World methods, by namespace, that storage provides (those of `SIGNATURES`). */
export const STORAGE_METHODS = Object.freeze(
  Object.fromEntries(Object.entries(SIGNATURES).map(([ns, methods]) => [ns, Object.freeze(Object.keys(methods))])),
);

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
  /** `f(world)`'s JSON text, revived as a result of shape `shape` (codec.js `SHAPE`). */
  const json = (f, shape) => call(async (w) => fromJson(await f(w), shape));
  const eventPage = (list, params) => call((w) => listEventsInSlices((text) => list(w, text), params));
  /** `events.list` of a run: a large page in slices listed by one job (`listRunEventsInSlices`). */
  const runEvents = (params) =>
    call(async (w) =>
      sliced(params) ? listRunEventsInSlices((text, sizes) => w.eventsListSlices(text, sizes), params) : fromEventPage(await w.eventsList(toJson(params))),
    );

  const creates = createBatcher(openWorld);
  const { streams, endReaders } = createStreams(call);

  // A run's events, every page, ascending, with data (for the 4.x step shapes).
  const eventsOf = async (runId) => {
    const out = [];
    let cursor;
    for (;;) {
      const page = await runEvents({
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
      get: async (runId, params) => v4Run(await json((w) => w.runsGet(runId, toJson(params)), SHAPE.run)),
      list: async (params) => {
        const page = await json((w) => w.runsList(toJson(params)), SHAPE.runPage);
        page.data.forEach(v4Run);
        return page;
      },
    },
    steps: {
      get: async (runId, stepId, params) => v4Step(await json((w) => w.stepsGet(runId, stepId, toJson(params)), SHAPE.step)),
      list: async (params) => {
        const page = await json((w) => w.stepsList(toJson(params)), SHAPE.stepPage);
        await v4Steps(page.data, eventsOf);
        return page;
      },
    },
    events: {
      create: async (runId, request, params) => v4Created(await creates(runId, request, params), request),
      get: (runId, eventId, params) => json((w) => w.eventsGet(runId, eventId, toJson(params)), SHAPE.event),
      list: (params) => runEvents(params),
      listByCorrelationId: (params) => eventPage((w, text) => w.eventsListByCorrelationId(text), params),
    },
    hooks: {
      get: (hookId, params) => json((w) => w.hooksGet(hookId, toJson(params)), SHAPE.hook),
      getByToken: (token) => json((w) => w.hooksGetByToken(token), SHAPE.hook),
      list: (params) => json((w) => w.hooksList(toJson(params)), SHAPE.hookPage),
    },
    streams,
    /** Ends live readers (their streams close); the store itself is closed by the World. */
    close() {
      endReaders();
    },
  };
  for (const [ns, methods] of Object.entries(STORAGE_METHODS)) {
    for (const m of methods) storage[ns][m] = checked(ns, m, storage[ns][m]);
  }
  return storage;
}
