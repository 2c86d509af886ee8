// The newest SDK line (workflow 5.0.0-beta.55: @workflow/world 5.0.0-beta.37, world-local
// 5.0.0-beta.46), which admits Worlds of spec 6 ("slot identity") through 7 ("sealed
// log"). Kept apart from world.js so that line detection can call it:
//   detectBeta55Line()        the app's line, or null when the app runs another one
//   extendForBeta55(world, …) the members this line adds, on a World built by world.js
// The event ids, `eventCount` bump-and-report and createBatch are the Rust World's
// (crates/runlog-world); this file only declares and routes them.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { toWorkflowError } from './errors.js';
import { fromJson, toJson } from './storage.js';

/** The first `@workflow/world` of the slot-identity line (docs/SDK-LINES.md §10). */
const FIRST_SLOT_WORLD_BETA = 34;

/** How long one addon wait of `waitForTerminalStatus` blocks before the signal is looked at. */
const TERMINAL_WAIT_SLICE_MS = 1000;
/** `waitForTerminalStatus`'s default `timeoutMs` (what the runtime passes per call). */
const TERMINAL_WAIT_DEFAULT_MS = 50_000;

/** Whether `version` (of `@workflow/world`) is of the slot-identity line: 5.0.0-beta.34 or later. */
export function isBeta55WorldVersion(version) {
  const m = /^5\.0\.0-beta\.(\d+)$/.exec(version ?? '');
  return m !== null && Number(m[1]) >= FIRST_SLOT_WORLD_BETA;
}

/**
 * The app's line when it is the slot-identity one: `{ version, require }`, `require`
 * resolving from the app (`process.cwd()`, where the beta.55 runtime loads its World
 * from), or `null`.
 */
export function detectBeta55Line(cwd = process.cwd()) {
  const appRequire = createRequire(path.join(cwd, 'package.json'));
  const version = packageVersion(appRequire, '@workflow/world');
  return isBeta55WorldVersion(version) ? { version, require: appRequire } : null;
}

/**
 * The version of package `name` as `appRequire` resolves it, or `null`. `@workflow/world`
 * 5.0.0-beta.37 does not export `./package.json` (its `./*` maps into `dist/`), so the
 * package's own package.json is found from its resolved entry point, upwards.
 */
function packageVersion(appRequire, name) {
  let dir;
  try {
    dir = path.dirname(appRequire.resolve(name));
  } catch {
    return null;
  }
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
      if (pkg.name === name) return typeof pkg.version === 'string' ? pkg.version : null;
    } catch {}
    const up = path.dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/**
 * The spec version this World declares on the line: 7, or 6 when the line's kill switch
 * (`WORKFLOW_SEALED_LOG=0`) is set, as the line's `mintedSpecVersion()` says. Both are
 * served: runlog assigns each seq at the commit that fills it, so a log has no hole to
 * seal and never a `noop`.
 */
export function beta55SpecVersion(line) {
  const { mintedSpecVersion } = line.require('@workflow/world');
  return typeof mintedSpecVersion === 'function' ? mintedSpecVersion() : 7;
}

/** The line's own world-local (its queue speaks the line's payloads) and recovery. */
export function beta55Modules(line) {
  const local = line.require('@workflow/world-local');
  const world = line.require('@workflow/world');
  return { createLocalWorld: local.createWorld, reenqueueActiveRuns: world.reenqueueActiveRuns };
}

/**
 * Adds this line's members to `world` (built by world.js on `storage`, whose addon World
 * is `openWorld()`): `specVersion`, `capabilities` (none is claimed: hook retention,
 * resume dedup, invoke, maxConcurrency and deployment affinity are not provided),
 * `events.createBatch`, `runs.getMany`, `runs.waitForTerminalStatus`, and `events.create`
 * with `eventCount`'s report as the line shapes it (`cursor: null`).
 */
export function extendForBeta55(world, { line, openWorld }) {
  const call = async (f) => {
    try {
      return fromJson(await f(await openWorld()));
    } catch (err) {
      throw toWorkflowError(err);
    }
  };
  const create = world.events.create;
  const events = {
    ...world.events,
    create: async (runId, request, params) => {
      const result = await create(runId, request, params);
      // The skipped-event report must not move the caller's read position.
      if (params?.eventCount !== undefined && typeof params.sinceCursor !== 'string' && Array.isArray(result.events) && result.cursor === undefined) {
        result.cursor = null;
      }
      return result;
    },
    createBatch: (runId, items, params) => call((w) => w.createBatch(runId, toJson(items, 'events'), toJson(params))),
  };
  const list = world.runs.list;
  const runs = {
    ...world.runs,
    // beta.37's `status` may be an array (the line's reenqueueActiveRuns asks for
    // ['pending', 'running']): the page is listed unfiltered and filtered here, so a page
    // may hold fewer runs than its limit while its cursor and `hasMore` stay the listing's.
    list: async (params) => {
      if (!Array.isArray(params?.status)) return list(params);
      const { status, ...rest } = params;
      const wanted = new Set(status);
      const page = await list(rest);
      return { ...page, data: page.data.filter((r) => wanted.has(r.status)) };
    },
    getMany: (runIds, params) => call((w) => w.runsGetMany(toJson(runIds, 'runIds'), toJson(params))),
    waitForTerminalStatus: async (runId, params = {}) => {
      const { timeoutMs = TERMINAL_WAIT_DEFAULT_MS, signal, ...rest } = params;
      const deadline = Date.now() + Math.max(0, timeoutMs);
      for (;;) {
        const left = Math.max(0, deadline - Date.now());
        const slice = signal ? Math.min(left, TERMINAL_WAIT_SLICE_MS) : left;
        const run = await call((w) => w.runsWaitForTerminalStatus(runId, Math.min(slice, 0xffffffff), toJson(rest)));
        if (isTerminal(run.status) || Date.now() >= deadline || signal?.aborted) return run;
      }
    },
  };
  world.specVersion = beta55SpecVersion(line);
  world.capabilities = {};
  world.events = events;
  world.runs = runs;
  return world;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const isTerminal = (status) => TERMINAL.has(status);
