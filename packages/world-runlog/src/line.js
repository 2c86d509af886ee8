// Which Workflow SDK line the app runs, found from the app's own `@workflow/world`: no
// runtime tells its World (docs/SDK-LINES.md §10). The line decides what the World declares
// as `specVersion` (the runtime stamps new runs with it: 3 on workflow 4.x, as
// world-local 4.4.1 does; 5 on 5.0.0-beta.35) and whose queue it borrows: the line's own
// `@workflow/world-local`, since queue payloads differ between lines (SDK-LINES §3).
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

/** The highest spec version runlog's World layer serves (crates/runlog-world: runs up to 5). */
export const SPEC_VERSION_MAX = 5;

/**
 * The parsed package.json of `name` as `req` resolves it: its `./package.json` export, or,
 * for packages that do not export it (`@workflow/world` maps `./*` to `./dist/*`), the
 * nearest package.json of that name above its entry point. Throws when `name` is not there.
 */
function packageJson(req, name) {
  try {
    return JSON.parse(readFileSync(req.resolve(`${name}/package.json`), 'utf8'));
  } catch {
    // Not exported: walk up from the entry (which throws when the package is missing).
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
 * What a World needs from a line's two packages: the spec version to declare (the line's
 * `SPEC_VERSION_CURRENT`, at most `SPEC_VERSION_MAX`), the local World factory whose queue
 * it borrows (`createLocalWorld`, 4.x; also `createWorld` on 5.x) and `reenqueueActiveRuns`.
 */
function fromModules(world, local) {
  return {
    specVersion: Math.min(world.SPEC_VERSION_CURRENT ?? SPEC_VERSION_MAX, SPEC_VERSION_MAX),
    createLocalWorld: local.createLocalWorld ?? local.createWorld,
    reenqueueActiveRuns: world.reenqueueActiveRuns ?? ownWorld.reenqueueActiveRuns,
  };
}

/**
 * The line of the app in `cwd`: `{ source: 'app' | 'package', worldVersion,
 * worldLocalVersion, specVersion, createLocalWorld, reenqueueActiveRuns }`. `source` says
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
      return { source: 'app', worldVersion, worldLocalVersion, ...fromModules(app('@workflow/world'), app('@workflow/world-local')) };
    } catch (err) {
      failure = `the app's @workflow/world ${worldVersion} could not be loaded: ${err?.code ?? err?.message ?? err}`;
      console.warn(`world-runlog: ${failure}; serving this package's own @workflow/world and @workflow/world-local instead`);
    }
  }
  const own = createRequire(import.meta.url);
  return {
    source: 'package',
    ...(failure !== undefined && { failure }),
    worldVersion: versionOf(own, '@workflow/world'),
    worldLocalVersion: versionOf(own, '@workflow/world-local'),
    ...fromModules(ownWorld, ownLocal),
  };
}
