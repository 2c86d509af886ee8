// The newest SDK line (workflow 5.0.0-beta.55: @workflow/world 5.0.0-beta.37, world-local
// 5.0.0-beta.46), which admits Worlds of spec 6 ("slot identity") through 7 ("sealed
// log"). Which line the app runs, the spec version it declares (the line's
// `mintedSpecVersion()`: 7, or 6 with `WORKFLOW_SEALED_LOG=0`), its queue and recovery are
// src/line.js's (the one line detection); this file adds what the line has beyond that:
//   extendForBeta55(world, …) the members this line adds, on a World built by world.js
// The event ids, `eventCount` bump-and-report, createBatch and cancelMany are the Rust
// World's (crates/runlog-world); this file only declares, checks (src/validate.js's
// BETA55_SIGNATURES) and routes them; stream write sessions are src/write-session.js's.
// `maxEvents` is on every events.create result that carries the run (src/max-events.js; a
// createBatch item has no such member in the line's `BatchEventItemResult`).
// `occurredAt` (of create params and of createBatch items) is type-checked and not stored:
// world-local 5.0.0-beta.46 stores none either, and its events carry no `occurredAt`.
// Both spec versions are served: runlog assigns each seq at the commit that fills it, so a
// log has no hole to seal and never a `noop`.
import { toWorkflowError } from './errors.js';
import { withMaxEvents } from './max-events.js';
import { fromJson, SHAPE, toJson } from './storage.js';
import { BETA55_SIGNATURES, checkArg, checked } from './validate.js';
import { writeSessionFactory } from './write-session.js';

/** How long one addon wait of `waitForTerminalStatus` blocks before the signal is looked at. */
const TERMINAL_WAIT_SLICE_MS = 1000;
/** `waitForTerminalStatus`'s default `timeoutMs` (what the runtime passes per call). */
const TERMINAL_WAIT_DEFAULT_MS = 50_000;

/** The storage methods this line adds or reshapes, by namespace (those of `BETA55_SIGNATURES`). */
export const BETA55_METHODS = Object.freeze(
  Object.fromEntries(Object.entries(BETA55_SIGNATURES).map(([ns, methods]) => [ns, Object.freeze(Object.keys(methods))])),
);

/**
 * Adds this line's members to `world` (built by world.js on `storage`, whose addon World
 * is `openWorld()`; `line` is src/line.js's `detectLine()` of the app): `specVersion` (the
 * line's, as line.js found it), `capabilities` (`hookResumeDedup` only: a `hook_received`
 * with `params.resumeId` is a fact of its run keyed by the resume id, crates/runlog-world
 * src/resume.rs, and events carry their `resumeId` back; `hookRetention`: a hook created
 * with `tokenRetentionUntil` stays readable and keeps its token past its run's end until
 * then, at most 30 days ahead, crates/runlog-world src/fold.rs and src/tokens.rs; invoke,
 * maxConcurrency and deployment affinity are not provided),
 * `events.createBatch`, `runs.getMany`, `runs.waitForTerminalStatus`, `runs.cancelMany`,
 * `streams.createWriteSession`, and `events.create` with `eventCount`'s report as the line
 * shapes it (`cursor: null`) and `maxEvents` on results carrying the run.
 */
export function extendForBeta55(world, { line, openWorld }) {
  const call = async (f, shape) => {
    try {
      return fromJson(await f(await openWorld()), shape);
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  const create = world.events.create;
  const events = {
    ...world.events,
    create: async (runId, request, params) => {
      const bad = checkArg('params.occurredAt', 'optionalDate', params?.occurredAt);
      if (bad !== null) throw toWorkflowError(bad);
      const result = withMaxEvents(line, await create(runId, request, params));
      // The skipped-event report must not move the caller's read position.
      if (params?.eventCount !== undefined && typeof params.sinceCursor !== 'string' && Array.isArray(result.events) && result.cursor === undefined) {
        result.cursor = null;
      }
      return result;
    },
    createBatch: async (runId, items, params) => {
      for (let i = 0; i < items.length; i++) {
        const bad = checkArg(`events[${i}].occurredAt`, 'optionalDate', items[i].occurredAt);
        if (bad !== null) throw toWorkflowError(bad);
      }
      return call((w) => w.createBatch(runId, toJson(items, 'events'), toJson(params)), SHAPE.batchResult);
    },
  };
  const list = world.runs.list;
  const runs = {
    ...world.runs,
    // beta.37's `status` may be an array (the line's reenqueueActiveRuns asks for
    // ['pending', 'running']): the page is listed unfiltered and filtered here, so a page
    // may hold fewer runs than its limit while its cursor and `hasMore` stay the listing's.
    // A run with `storageError` (its log cannot be read to its end) is kept under every
    // status its unreadable part could still reach, as the Rust listing does for one status.
    list: async (params) => {
      const bad = checkArg('params.status', 'optionalStatuses', params?.status);
      if (bad !== null) throw toWorkflowError(bad);
      if (!Array.isArray(params?.status)) return list(params);
      const { status, ...rest } = params;
      const wanted = [...new Set(status)];
      const page = await list(rest);
      const passes = (r) => wanted.some((s) => (r.storageError === undefined ? r.status === s : mayReach(r.status, s)));
      return { ...page, data: page.data.filter(passes) };
    },
    getMany: (runIds, params) => call((w) => w.runsGetMany(toJson(runIds, 'runIds'), toJson(params)), SHAPE.runs),
    cancelMany: (request) => call((w) => w.runsCancelMany(toJson(request, 'request')), SHAPE.none),
    waitForTerminalStatus: async (runId, params = {}) => {
      const { timeoutMs = TERMINAL_WAIT_DEFAULT_MS, signal, ...rest } = params;
      const deadline = Date.now() + Math.max(0, timeoutMs);
      for (;;) {
        const left = Math.max(0, deadline - Date.now());
        const slice = signal ? Math.min(left, TERMINAL_WAIT_SLICE_MS) : left;
        const run = await call((w) => w.runsWaitForTerminalStatus(runId, Math.min(slice, 0xffffffff), toJson(rest)), SHAPE.run);
        if (isTerminal(run.status) || Date.now() >= deadline || signal?.aborted) return run;
      }
    },
  };
  for (const [ns, methods] of Object.entries(BETA55_METHODS)) {
    const target = { runs, events }[ns];
    for (const m of methods) target[m] = checked(ns, m, target[m], BETA55_SIGNATURES);
  }
  world.specVersion = line.specVersion;
  world.capabilities = { hookRetention: { active: true }, hookResumeDedup: true };
  world.events = events;
  world.runs = runs;
  world.streams = { ...world.streams, createWriteSession: writeSessionFactory(world.streams) };
  return world;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const isTerminal = (status) => TERMINAL.has(status);
const RANK = { pending: 0, running: 1 };
const rank = (status) => RANK[status] ?? 2;
/** Whether a run at `from` may be at `to` later (crates/runlog-world `may_reach`). */
const mayReach = (from, to) => from === to || (!isTerminal(from) && rank(to) > rank(from));
