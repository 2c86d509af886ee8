// Which Workflow SDK line the app runs, found from the app's own `@workflow/world`: no
// runtime tells its World (docs/SDK-LINES.md §10). This is the one place that decides it.
// The line decides what the World declares as `specVersion` (the runtime stamps new runs
// with it): 3 on workflow 4.x, as world-local 4.4.1 does; 5 on 5.0.0-beta.35; on
// 5.0.0-beta.55 (the slot-identity line, @workflow/world 5.0.0-beta.34 and later) what the
// line's `mintedSpecVersion()` says, 7 or 6 with `WORKFLOW_SEALED_LOG=0`. It also decides
// whose queue the World borrows: the line's own `@workflow/world-local`, since queue
// payloads differ between lines (SDK-LINES §3). What the beta.55 line adds on top of that
// (capabilities, createBatch, getMany, waitForTerminalStatus) is src/line-beta55.js's.
//
// The app's copies are resolved from the process's working directory
// (`createRequire(<cwd>/package.json)`), where the 4.x and 5.0.0-beta.55 runtimes load the
// World from and where `nitro dev` and `node .output/server/index.mjs` run; importing them
// from this package would give this package's own pinned copies whenever it is installed
// from a directory or nests them. Not resolvable there (a deployed `.output` alone, say),
// this package's own copies are used (static imports, which a bundler inlines).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import * as ownWorld from '@workflow/world';
import * as ownLocal from '@workflow/world-local';

/** The highest spec version runlog's World layer serves (crates/runlog-world `SPEC_VERSION_MAX_SUPPORTED`). */
export const SPEC_VERSION_MAX = 7;

/** The lines (`line.name`): workflow 4.x, 5.0.0-beta.35-like (spec 5), 5.0.0-beta.55-like (spec 6-7). */
export const LINES = Object.freeze({ V4: '4.x', BETA35: '5.0.0-beta.35', BETA55: '5.0.0-beta.55' });

/** The first `@workflow/world` of the slot-identity line (SDK-LINES §10: beta.34). */
const FIRST_SLOT_WORLD_BETA = 34;

/** Whether `version` (of `@workflow/world`) is of the slot-identity line: 5.0.0-beta.34 or later, or a later 5.x. */
export function isSlotLineWorldVersion(version) {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-beta\.(\d+))?/.exec(version ?? '');
  if (m === null || Number(m[1]) < 5) return false;
  if (Number(m[1]) > 5 || Number(m[2]) > 0 || Number(m[3]) > 0 || m[4] === undefined) return true;
  return Number(m[4]) >= FIRST_SLOT_WORLD_BETA;
}

/**
 * The line of an `@workflow/world` module `world` of version `version` (null when unknown,
 * inside a bundle): its exports decide where they tell (`SPEC_VERSION_SUPPORTS_SLOT_IDENTITY`
 * only from beta.34, `SPEC_VERSION_SUPPORTS_COMPRESSION` only on 5.x), else the version.
 */
export function lineOf(world, version) {
  if (world.SPEC_VERSION_SUPPORTS_SLOT_IDENTITY !== undefined || isSlotLineWorldVersion(version)) return LINES.BETA55;
  if (world.SPEC_VERSION_SUPPORTS_COMPRESSION !== undefined || /^5\./.test(version ?? '')) return LINES.BETA35;
  return LINES.V4;
}

/**
 * The spec version a World declares on line `name` with the line's `world` module: 3 on
 * 4.x (its `SPEC_VERSION_CURRENT`), 5 on beta.35, and on beta.55 the line's
 * `mintedSpecVersion()` (7; 6 with `WORKFLOW_SEALED_LOG=0`), never above `SPEC_VERSION_MAX`.
 */
export function specVersionOf(name, world) {
  let spec;
  if (name === LINES.BETA55) spec = typeof world.mintedSpecVersion === 'function' ? world.mintedSpecVersion() : (world.SPEC_VERSION_CURRENT ?? 7);
  else if (name === LINES.BETA35) spec = world.SPEC_VERSION_CURRENT ?? 5;
  else spec = world.SPEC_VERSION_CURRENT ?? 3;
  return Math.min(spec, SPEC_VERSION_MAX);
}

/**
 * The parsed package.json of `name` as `req` resolves it: its `./package.json` export, or,
 * for packages that do not export it (`@workflow/world` maps `./*` to `./dist/*`), the
 * nearest package.json of that name above its entry point. Throws when `name` is not there.
 */
function packageJson(req, name) {
  try {
    const pj = JSON.parse(readFileSync(req.resolve(`${name}/package.json`), 'utf8'));
    // A `./*` export can map `./package.json` to some other file (`dist/package.json`).
    if (pj.name === name) return pj;
  } catch {
    // Not exported (5.0.0-beta.37, 4.5.0): walk up from the entry (which throws when the
    // package is missing).
  }
  let dir = path.dirname(req.resolve(name));
  for (;;) {
    try {
      const pj = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
      if (pj.name === name) return pj;
    } catch {
      // No package.json at this level.
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no package.json of ${name} above ${req.resolve(name)}`);
    dir = up;
  }
}

/** `packageJson(...).version`, or null when `name` cannot be resolved by `req`. */
function versionOf(req, name) {
  try {
    return packageJson(req, name).version;
  } catch {
    return null;
  }
}

/**
 * What a World needs from a line's two packages: the line (`name`), the spec version to
 * declare (`specVersionOf`), the local World factory whose queue it borrows
 * (`createLocalWorld`, 4.x; also `createWorld` on 5.x) and `reenqueueActiveRuns`.
 */
function fromModules(world, local, worldVersion) {
  const name = lineOf(world, worldVersion);
  return {
    name,
    specVersion: specVersionOf(name, world),
    // beta.55's world-local is taken by `createWorld` (as the beta.55 work had it); the
    // older lines' by `createLocalWorld` where they have it.
    createLocalWorld: name === LINES.BETA55 ? (local.createWorld ?? local.createLocalWorld) : (local.createLocalWorld ?? local.createWorld),
    reenqueueActiveRuns: world.reenqueueActiveRuns ?? ownWorld.reenqueueActiveRuns,
    // The line's per-run event ceiling (`WORKFLOW_MAX_EVENTS`, read per call), where it has one.
    getMaxEventsPerRun: typeof world.getMaxEventsPerRun === 'function' ? world.getMaxEventsPerRun : undefined,
  };
}

/**
 * The line of the app in `cwd`: `{ source: 'app' | 'package', name (one of LINES),
 * worldVersion, worldLocalVersion, specVersion, createLocalWorld, reenqueueActiveRuns }`. `source` says
 * whose packages these are: the app's (both `@workflow/world` and `@workflow/world-local`
 * resolved from `cwd`) or this package's own (either one missing from the app; versions
 * null when this package is inlined into a bundle and cannot see its own package.json files;
 * `failure` set when the app's were found but could not be loaded).
 */
export function detectLine(cwd = process.cwd()) {
  const app = createRequire(path.join(cwd, 'package.json'));
  const worldVersion = versionOf(app, '@workflow/world');
  const worldLocalVersion = versionOf(app, '@workflow/world-local');
  let failure;
  if (worldVersion !== null && worldLocalVersion !== null) {
    // require() of these ES modules: Node >= 20.19 loads them synchronously (no top-level
    // await in either), as createWorld() must be synchronous on 4.x. An older Node
    // (ERR_REQUIRE_ESM) cannot: this package's own copies then serve, and `failure` says why.
    try {
      return { source: 'app', worldVersion, worldLocalVersion, ...fromModules(app('@workflow/world'), app('@workflow/world-local'), worldVersion) };
    } catch (err) {
      failure = `the app's @workflow/world ${worldVersion} could not be loaded: ${err?.code ?? err?.message ?? err}`;
      console.warn(`world-runlog: ${failure}; serving this package's own @workflow/world and @workflow/world-local instead`);
    }
  }
  const own = createRequire(import.meta.url);
  const ownVersion = versionOf(own, '@workflow/world');
  return {
    source: 'package',
    ...(failure !== undefined && { failure }),
    worldVersion: ownVersion,
    worldLocalVersion: versionOf(own, '@workflow/world-local'),
    ...fromModules(ownWorld, ownLocal, ownVersion),
  };
}
