// Loads the runlog addon (crates/runlog-node) as napi-rs packages do: the binary is a
// platform package, `@runlog/world-runlog-<platform>` (in this repository
// `npm/<platform>/`, e.g. `npm/linux-x64-gnu/`, where crates/runlog-node/build.sh puts it),
// listed in this package's optionalDependencies so that npm installs the one for the
// machine, and required **by package name** through `createRequire`. The name is computed,
// so a bundler that inlines this module (Nitro on workflow 5.0.0-beta.35, dev and `nitro
// build`; Turbopack when an app's code imports world-runlog under `next dev` or `next
// build`) cannot follow it: the require stays external and Node resolves it at run time
// from wherever the bundle is, as it would from this file. No require here is created from
// `import.meta.url` (`nodeRequire`): bundlers take that one for their own.
//
// Where the addon is looked for, in order (`locateAddon`):
//   1. RUNLOG_NODE_ADDON, an absolute path to a `.node` file (an override: another build);
//   2. the platform package by name, resolved from this module, then from the app (the
//      process's cwd: a bundle may live outside the app's node_modules tree);
//   3. the platform package's directory beside this package's real location
//      (`<world-runlog>/npm/<platform>/`): a repository checkout, or a directory install
//      (`npm install <dir>` links the package, and npm cannot fetch an unpublished
//      optional dependency), found from this module and, when this module is bundled,
//      through the app's `world-runlog/package.json`.
// None found: an Error with code ADDON_NOT_FOUND naming the platform package to install.
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** This package's name, as an app depends on it. */
const WORLD_PACKAGE = 'world-runlog';
/** The platform packages' names are this and the platform, e.g. `@runlog/world-runlog-linux-x64-gnu`. */
export const PLATFORM_PACKAGE_PREFIX = '@runlog/world-runlog-';

/** Whether this Linux runs on musl rather than glibc (napi-rs's test: the report's glibc version). */
function isMusl() {
  if (process.platform !== 'linux') return false;
  const header = process.report?.getReport?.()?.header;
  return header !== undefined && !header.glibcVersionRuntime;
}

/** napi-rs's name for a platform: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, `win32-x64-msvc`. */
export function platformName(platform = process.platform, arch = process.arch, musl = isMusl()) {
  if (platform === 'linux') return `linux-${arch}-${musl ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** The platform package of `platform` and the `.node` file its `main` names. */
export function platformPackage(platform = platformName()) {
  return { name: `${PLATFORM_PACKAGE_PREFIX}${platform}`, file: `runlog_node.${platform}.node` };
}

/**
 * Node's own `require`, created from `from` (a path known only at run time). A bundler that
 * inlines this module takes `createRequire(import.meta.url)` for its own require and bundles
 * what it loads: Turbopack (`next dev`, `next build`) turns `createRequire(import.meta.url)(p)`
 * with a computed `p` into a stub that throws "Cannot find module as expression is too
 * dynamic". A require created from a value it cannot evaluate is left to Node, as
 * `resolveFrom`'s is, and so is the addon.
 */
function nodeRequire(from) {
  return createRequire(/* webpackIgnore: true */ /* turbopackIgnore: true */ from);
}

/** `require.resolve(id)` from `from` (a file path or URL), or `null` when it is not there. */
function resolveFrom(from, id) {
  try {
    return nodeRequire(from).resolve(id);
  } catch (err) {
    if (err?.code === 'MODULE_NOT_FOUND' || err?.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') return null;
    throw err;
  }
}

/**
 * Where the addon is: `{ path, via }` (`via`: `RUNLOG_NODE_ADDON`, `package`, `directory`),
 * searched as the header says. Throws ADDON_NOT_FOUND (with `platformPackage` and
 * `searched`) when there is none. Parameters are for tests.
 */
export function locateAddon({
  env = process.env,
  platform = platformName(),
  moduleUrl = import.meta.url,
  cwd = process.cwd(),
} = {}) {
  const override = env.RUNLOG_NODE_ADDON;
  if (override) {
    if (existsSync(override)) return { path: override, via: 'RUNLOG_NODE_ADDON' };
    throw notFound(`RUNLOG_NODE_ADDON names no file: ${override}`, platformPackage(platform).name, [override]);
  }
  const pkg = platformPackage(platform);
  const app = path.join(cwd, 'package.json');
  const searched = [];
  let unbuilt = null;
  for (const from of [moduleUrl, app]) {
    searched.push(`${pkg.name} from ${from.startsWith('file:') ? fileURLToPath(from) : from}`);
    const found = resolveFrom(from, pkg.name);
    if (found !== null) return { path: found, via: 'package' };
    // Installed, but its main file missing (a platform package packed before the build).
    unbuilt ??= resolveFrom(from, `${pkg.name}/package.json`);
  }
  // The package roots: this module's (src/..), and the app's world-runlog when this module
  // is inlined into a bundle; their real paths, where a directory install's npm/ is.
  const roots = [path.dirname(path.dirname(fileURLToPath(moduleUrl)))];
  const appWorld = resolveFrom(app, `${WORLD_PACKAGE}/package.json`);
  if (appWorld !== null) roots.push(path.dirname(appWorld));
  const seen = new Set();
  for (const root of roots) {
    let real;
    try {
      real = realpathSync(root);
    } catch {
      continue;
    }
    if (seen.has(real)) continue;
    seen.add(real);
    const file = path.join(real, 'npm', platform, pkg.file);
    searched.push(file);
    if (existsSync(file)) return { path: file, via: 'directory' };
  }
  const what =
    unbuilt === null
      ? `the platform package ${pkg.name} is not installed`
      : `the platform package ${pkg.name} is installed (${path.dirname(unbuilt)}) without its ${pkg.file}`;
  throw notFound(what, pkg.name, searched);
}

function notFound(what, platformPackageName, searched) {
  const err = new Error(
    `runlog addon not found: ${what}. world-runlog loads its native addon from ${platformPackageName} ` +
      '(an optional dependency: npm skips it when it cannot get it for this platform). Install it beside ' +
      `world-runlog (npm install ${platformPackageName}, or its tarball or directory), build it from source ` +
      '(bash crates/runlog-node/build.sh puts it in packages/world-runlog/npm/<platform>/), or set ' +
      `RUNLOG_NODE_ADDON to a .node file. Looked for: ${searched.join('; ')}`,
  );
  err.code = 'ADDON_NOT_FOUND';
  err.platformPackage = platformPackageName;
  err.searched = searched;
  return err;
}

const located = locateAddon();
const addon = nodeRequire(located.path)(/* webpackIgnore: true */ /* turbopackIgnore: true */ located.path);

/** The addon file loaded, and how it was found (`RUNLOG_NODE_ADDON`, `package` or `directory`). */
export const addonPath = located.path;
export const addonSource = located.via;
/** The store class of the addon: `Store.open(dir, options?)`, `Store.openReadOnly(...)`. */
export const Store = addon.Store;
/** Counters of the addon's worker threads (`io` and `wait` lanes). */
export const threadPoolStats = addon.threadPoolStats;
/** The addon's version. */
export const version = addon.version;
/** Test hook: a panic inside the addon, which must reject with PANICKED. */
export const panicForTest = addon.__panicForTest;
